/**
 * Passport-mode tokens from the attestation agent: `GetToken("kbs")` over
 * ttrpc, answered with `{"token","tee_keypair"}`. The agent attests afresh on
 * every call, so the KBS client caches what this returns and asks again only
 * when the KBS refuses the token or it has expired.
 *
 * One connection is kept and reopened after it drops, so an agent restart
 * costs one failed request at most. Upstream connects once per request.
 */
import { messageOf } from '@broker/cli';
import { AttestationAgentClient } from '@broker/guest-api';
import { parseAttestationToken, TeeKeyPair, type TokenAndKey, type TokenProvider } from '@broker/kbs-client';
import { formatTtrpcAddress, type TtrpcAddress } from '@broker/ttrpc';
import { AaTokenProviderError } from './errors.js';

/** What the provider needs of an agent connection. */
export interface AaTokenClient {
  getToken(tokenType: string, options?: { timeoutMs?: number }): Promise<Uint8Array>;
  close(): void;
  readonly closed: boolean;
}

export type AaConnect = (
  address: TtrpcAddress,
  options: { connectTimeoutMs: number },
) => Promise<AaTokenClient>;

export interface AaTokenProviderOptions {
  /** The agent's socket (`[aa] aa_socket`). */
  readonly address: TtrpcAddress;
  /** Give up connecting after this long (default 5 s; a unix socket answers at once or never). */
  readonly connectTimeoutMs?: number;
  /** Deadline of `GetToken` (default 50 s, upstream's). It covers a full attestation by the agent. */
  readonly callTimeoutMs?: number;
  /** Replaces the ttrpc connection (tests). */
  readonly connect?: AaConnect;
}

export const DEFAULT_AA_CONNECT_TIMEOUT_MS = 5_000;
export const DEFAULT_AA_CALL_TIMEOUT_MS = 50_000;
/** The reply holds a JWT and a PEM key; trustee caps request heads at 128 KiB. */
const MAX_REPLY_BYTES = 256 * 1024;

const defaultConnect: AaConnect = (address, { connectTimeoutMs }) =>
  AttestationAgentClient.connect(address, { connectTimeoutMs, timeoutMs: 0 });

export class AaTokenProvider implements TokenProvider {
  readonly #address: TtrpcAddress;
  readonly #connectTimeoutMs: number;
  readonly #callTimeoutMs: number;
  readonly #connect: AaConnect;
  #client: AaTokenClient | undefined;
  #connecting: Promise<AaTokenClient> | undefined;
  #closed = false;

  constructor(options: AaTokenProviderOptions) {
    this.#address = options.address;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_AA_CONNECT_TIMEOUT_MS;
    this.#callTimeoutMs = options.callTimeoutMs ?? DEFAULT_AA_CALL_TIMEOUT_MS;
    this.#connect = options.connect ?? defaultConnect;
  }

  /** `GetToken("kbs")`, with the token and key parsed. Throws `AaTokenProviderError`. */
  async getToken(): Promise<TokenAndKey> {
    const client = await this.#connection();
    let bytes: Uint8Array;
    try {
      bytes = await client.getToken('kbs', { timeoutMs: this.#callTimeoutMs });
    } catch (cause) {
      if (client.closed && this.#client === client) this.#client = undefined;
      // "cal" is upstream's spelling of this message.
      throw new AaTokenProviderError(`cal ttrpc failed: ${messageOf(cause)}`, { cause });
    }
    return parseReply(bytes);
  }

  close(): void {
    this.#closed = true;
    this.#client?.close();
    this.#client = undefined;
  }

  async #connection(): Promise<AaTokenClient> {
    if (this.#closed) throw new AaTokenProviderError('the token provider is closed');
    if (this.#client !== undefined && !this.#client.closed) return this.#client;
    // Concurrent first calls share one connection attempt.
    this.#connecting ??= this.#connect(this.#address, { connectTimeoutMs: this.#connectTimeoutMs }).finally(
      () => {
        this.#connecting = undefined;
      },
    );
    let client: AaTokenClient;
    try {
      client = await this.#connecting;
    } catch (cause) {
      throw new AaTokenProviderError(
        `ttrpc connect failed: cannot reach the attestation agent at ${formatTtrpcAddress(this.#address)}: ${messageOf(cause)}`,
        { cause },
      );
    }
    if (this.#closed) {
      client.close();
      throw new AaTokenProviderError('the token provider is closed');
    }
    this.#client = client;
    return client;
  }
}

/** Parses the agent's `{"token","tee_keypair"}` reply; other members are ignored, as upstream. */
export function parseReply(bytes: Uint8Array): TokenAndKey {
  if (bytes.length > MAX_REPLY_BYTES) {
    throw new AaTokenProviderError(
      `deserialize attestation-agent reply failed: reply is larger than ${MAX_REPLY_BYTES} bytes`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new AaTokenProviderError(`deserialize attestation-agent reply failed: ${messageOf(cause)}`, {
      cause,
    });
  }
  const reply = value as { token?: unknown; tee_keypair?: unknown } | null;
  if (typeof reply !== 'object' || reply === null || Array.isArray(reply)) {
    throw new AaTokenProviderError('deserialize attestation-agent reply failed: not a JSON object');
  }
  if (typeof reply.token !== 'string' || typeof reply.tee_keypair !== 'string') {
    throw new AaTokenProviderError(
      'deserialize attestation-agent reply failed: `token` and `tee_keypair` must be strings',
    );
  }
  try {
    parseAttestationToken(reply.token);
  } catch (cause) {
    throw new AaTokenProviderError(`deserialize token failed: ${messageOf(cause)}`, { cause });
  }
  let teeKeyPair: TeeKeyPair;
  try {
    teeKeyPair = TeeKeyPair.fromPem(reply.tee_keypair);
  } catch (cause) {
    // The key's own error text never includes key material.
    throw new AaTokenProviderError(`deserialize tee keypair failed: ${messageOf(cause)}`, { cause });
  }
  return { token: reply.token, teeKeyPair };
}
