// One external plugin backend: a kbs.plugin.v1.KbsPlugin client over @grpc/grpc-js, plaintext or TLS
// verified against the configured CA, each call bounded by the backend's deadline.
import { readFile } from 'node:fs/promises';
import { plugin } from '@broker/trustee-protos';
import { ChannelCredentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { KbsServiceError } from '../errors.js';
import type { ExternalBackendConfig } from './external-config.js';

/** Deadline of each call when `timeout_ms` is not set (trustee sets none; a stuck plugin must not hold requests). */
export const DEFAULT_PLUGIN_TIMEOUT_MS = 60_000;
/**
 * The largest reply accepted from a plugin; grpc-js fails a larger one with RESOURCE_EXHAUSTED. Requests
 * need no bound here: their body is already within the KBS's `payload_request_size`.
 */
export const MAX_PLUGIN_RESPONSE_BYTES = 16 * 1024 * 1024;
/** How long start-up waits for a backend to accept a connection (trustee: a 30 s retry window). */
export const DEFAULT_CONNECT_WINDOW_MS = 30_000;
/** A CA bundle is a few certificates; anything far larger is not one. */
const MAX_CA_FILE_BYTES = 1024 * 1024;

/** What the KBS tells the plugin about one HTTP request. */
export interface ForwardedRequest {
  readonly body: Uint8Array;
  readonly query: Readonly<Record<string, string>>;
  /** The segments after the backend name. */
  readonly path: readonly string[];
  readonly method: string;
}

/** A failed call: the gRPC status, or a non-2xx status_code the plugin answered with. */
export class PluginCallError extends KbsServiceError {
  override readonly name: string = 'PluginCallError';
  constructor(
    message: string,
    /** True for transport and gRPC failures (counted in `kbs_plugin_errors_total`), false for status_code. */
    readonly grpc: boolean,
  ) {
    super('PLUGIN_CALL_FAILED', message);
  }
}

function toMessage(req: ForwardedRequest) {
  return {
    body: Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength),
    query: { ...req.query },
    path: [...req.path],
    method: req.method,
  };
}

export class PluginBackend {
  private constructor(
    readonly name: string,
    private readonly client: plugin.KbsPluginClient,
    private readonly timeoutMs: number,
  ) {}

  static async open(config: ExternalBackendConfig): Promise<PluginBackend> {
    let credentials = ChannelCredentials.createInsecure();
    if (config.caCertPath !== undefined) {
      const ca = await readFile(config.caCertPath).catch((e: unknown) => {
        throw new KbsServiceError(
          'PLUGIN_INIT_FAILED',
          `Read CA certificate ${config.caCertPath}: ${(e as Error).message}`,
        );
      });
      if (ca.length > MAX_CA_FILE_BYTES || !ca.includes('-----BEGIN CERTIFICATE-----')) {
        throw new KbsServiceError(
          'PLUGIN_INIT_FAILED',
          `Read CA certificate ${config.caCertPath}: not a PEM certificate file`,
        );
      }
      credentials = ChannelCredentials.createSsl(ca);
    }
    const client = new plugin.KbsPluginClient(config.target, credentials, {
      'grpc.max_receive_message_length': MAX_PLUGIN_RESPONSE_BYTES,
    });
    return new PluginBackend(config.name, client, config.timeoutMs ?? DEFAULT_PLUGIN_TIMEOUT_MS);
  }

  /** Resolves once the channel is connected (TLS handshake included); rejects after `windowMs`. */
  waitForReady(windowMs = DEFAULT_CONNECT_WINDOW_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client.waitForReady(Date.now() + windowMs, (err) =>
        err ? reject(new Error(`Failed to connect to plugin after retry window: ${err.message}`)) : resolve(),
      );
    });
  }

  private call<Res>(
    what: string,
    invoke: (
      metadata: Metadata,
      options: { deadline: Date },
      done: (err: ServiceError | null, res: Res) => void,
    ) => void,
  ): Promise<Res> {
    return new Promise((resolve, reject) => {
      invoke(new Metadata(), { deadline: new Date(Date.now() + this.timeoutMs) }, (err, res) => {
        if (err) {
          reject(
            new PluginCallError(
              `gRPC error from plugin '${this.name}' (${what}): ${err.details || err.message}`,
              true,
            ),
          );
        } else {
          resolve(res);
        }
      });
    });
  }

  /** `Handle`: the reply body when status_code is 0 or 2xx, else a PluginCallError. */
  async handle(req: ForwardedRequest): Promise<Buffer> {
    const res = await this.call<plugin.PluginResponse>('Handle', (m, o, done) =>
      this.client.handle(toMessage(req), m, o, done),
    );
    const code = res.statusCode;
    if (code !== 0 && (code < 200 || code > 299)) {
      throw new PluginCallError(`plugin '${this.name}' returned HTTP status ${code}`, false);
    }
    return res.body;
  }

  /** `ValidateAuth`: true when the request needs admin credentials instead of an attestation token. */
  async requiresAdmin(req: ForwardedRequest): Promise<boolean> {
    const res = await this.call<plugin.ValidateAuthResponse>('ValidateAuth', (m, o, done) =>
      this.client.validateAuth(toMessage(req), m, o, done),
    );
    return res.requiresAdminAuth;
  }

  /** `NeedsEncryption`: true when the Handle reply must be JWE-encrypted to the TEE's key. */
  async needsEncryption(req: ForwardedRequest): Promise<boolean> {
    const res = await this.call<plugin.NeedsEncryptionResponse>('NeedsEncryption', (m, o, done) =>
      this.client.needsEncryption(toMessage(req), m, o, done),
    );
    return res.requiresPayloadEncryption;
  }

  close(): void {
    this.client.close();
  }
}
