/**
 * Where the `secret` tool and the unsealing step get secrets from:
 *
 * - a confidential data hub over ttrpc (`UnsealSecret`): the hub attests,
 *   verifies and unseals with its own configuration;
 * - a KBS directly, for `secret unseal`: tokens from the attestation agent
 *   (upstream's `--aa-kbc-params cc_kbc::<url>`), or our own RCAR handshake
 *   with the detected TEE attester (`--kbs-url`, as `kbs-client` does).
 *
 * These modules load the ttrpc and KBS clients, so the CLIs import this file
 * on demand.
 */
import type { Attester } from '@broker/attester';
import { messageOf } from '@broker/cli';
import { AttestationAgentClient, DataHubClient, decodeKbsTokenReply } from '@broker/guest-api';
import { KbsClient, TeeKeyPair, type TokenProvider } from '@broker/kbs-client';
import { SealedSecretError } from './errors.js';
import type { Unseal } from './volumes.js';

export interface Closable {
  close(): void;
}

/** Upstream's default CDH socket. */
export const DEFAULT_CDH_SOCKET = 'unix:///run/confidential-containers/cdh.sock';
/** api-server-rest's and kata's deadline towards the hub. */
export const DEFAULT_UNSEAL_TIMEOUT_MS = 50_000;

/**
 * `UnsealSecret` on a data hub. One connection, opened on first use and
 * opened again after it drops, so a hub restart costs one pointer at most.
 */
export function dataHubUnsealer(
  socket: string,
  options: { timeoutMs?: number; connectTimeoutMs?: number } = {},
): { unseal: Unseal } & Closable {
  let client: DataHubClient | undefined;
  const connect = async (): Promise<DataHubClient> => {
    if (client !== undefined && !client.closed) return client;
    try {
      client = await DataHubClient.connect(socket, {
        connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
        timeoutMs: options.timeoutMs ?? DEFAULT_UNSEAL_TIMEOUT_MS,
      });
    } catch (e) {
      throw new SealedSecretError(`cannot reach the confidential data hub at ${socket}: ${messageOf(e)}`, {
        code: 'SERVICE_UNREACHABLE',
      });
    }
    return client;
  };
  return {
    async unseal(pointer) {
      return (await connect()).unsealSecret(pointer);
    },
    close() {
      client?.close();
    },
  };
}

export interface KbsGetterOptions {
  readonly url: string;
  readonly certPem?: string;
  readonly timeoutMs?: number;
}

/** A getter for `kbs:///…` resources through a KBS client. */
function getterOf(client: KbsClient): { getResource(uri: string): Promise<Uint8Array> } & Closable {
  return {
    getResource: (uri) => client.getResource(uri),
    close: () => client.close(),
  };
}

/** Passport mode with tokens from the attestation agent, as upstream's `cc_kbc` (`AA_SOCKET`). */
export function aaKbsGetter(
  options: KbsGetterOptions & { readonly aaSocket: string },
): { getResource(uri: string): Promise<Uint8Array> } & Closable {
  let aa: AttestationAgentClient | undefined;
  const tokenProvider: TokenProvider = {
    async getToken() {
      if (aa === undefined || aa.closed) {
        try {
          aa = await AttestationAgentClient.connect(options.aaSocket, { connectTimeoutMs: 5_000 });
        } catch (e) {
          throw new SealedSecretError(
            `cannot reach the attestation agent at ${options.aaSocket}: ${messageOf(e)}`,
            { code: 'SERVICE_UNREACHABLE' },
          );
        }
      }
      const reply = decodeKbsTokenReply(await aa.getToken('kbs'));
      return { token: reply.token, teeKeyPair: TeeKeyPair.fromPem(reply.tee_keypair) };
    },
  };
  const getter = getterOf(
    new KbsClient({
      url: options.url,
      tokenProvider,
      ...(options.certPem !== undefined ? { certPem: options.certPem } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    }),
  );
  return {
    getResource: getter.getResource,
    close() {
      getter.close();
      aa?.close();
    },
  };
}

/** Background-check mode: this process attests with `attester` (the detected TEE unless given). */
export async function attestingKbsGetter(
  options: KbsGetterOptions & {
    readonly attester?: Attester;
    readonly additionalAttesters?: readonly Attester[];
    readonly env?: Readonly<Record<string, string | undefined>>;
  },
): Promise<{ getResource(uri: string): Promise<Uint8Array> } & Closable> {
  let attester = options.attester;
  let additionalAttesters = options.additionalAttesters ?? [];
  if (attester === undefined) {
    const { detectAdditionalDevices, detectTee, getAttester } = await import('@broker/attester');
    const opts = options.env !== undefined ? { env: options.env } : {};
    attester = getAttester(await detectTee(opts), opts);
    additionalAttesters = (await detectAdditionalDevices(opts)).map((d) => getAttester(d, opts));
  }
  return getterOf(
    new KbsClient({
      url: options.url,
      attester,
      additionalAttesters,
      ...(options.certPem !== undefined ? { certPem: options.certPem } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    }),
  );
}
