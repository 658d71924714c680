// The `external` plugin (trustee's ExternalPlugin with the plugin arm of api_server.rs `api`): requests
// under `/kbs/v0/external/<backend>/...` go to that backend over kbs.plugin.v1.KbsPlugin. The plugin's
// ValidateAuth picks the gate (gate.ts): admin credentials, or an attestation token and the resource policy
// (data `{"plugin":"external","resource-path":[<backend>,…],"query":{…}}`); on the token path
// NeedsEncryption may ask for the reply to be JWE-encrypted to the TEE key in the token. Every plugin failure is
// trustee's 401 PluginInternalError.
import { KbsError } from '@broker/protocol';
import { KbsServiceError } from '../errors.js';
import { JweEncrypter } from '../jwe-encrypter.js';
import type { Reply } from '../reply.js';
import type { ApiRequest } from '../request.js';
import type { ExternalPluginConfig } from './external-config.js';
import { authorizePluginCall, checkPluginAdmin, encryptToTee, type PluginGateDeps } from './gate.js';
import { type ForwardedRequest, PluginBackend, PluginCallError } from './grpc-backend.js';

export const EXTERNAL_PLUGIN_NAME = 'external';

export type ExternalPluginDeps = PluginGateDeps;

export interface ExternalPluginOptions {
  /** How long start-up waits for each backend to accept a connection. */
  readonly connectWindowMs?: number;
}

const TEXT_XML = { 'content-type': 'text/xml' };

function internal(cause: unknown): KbsError {
  return new KbsError('PluginInternalError', undefined, { cause });
}

export class ExternalPlugin {
  private readonly jwe = new JweEncrypter();

  private constructor(
    private readonly backends: ReadonlyMap<string, PluginBackend>,
    private readonly deps: ExternalPluginDeps,
  ) {}

  /** Connects every backend, as trustee does at start: the KBS does not start while one is unreachable. */
  static async connect(
    config: ExternalPluginConfig,
    deps: ExternalPluginDeps,
    options: ExternalPluginOptions = {},
  ): Promise<ExternalPlugin> {
    const backends = new Map<string, PluginBackend>();
    try {
      for (const b of config.backends) {
        if (b.caCertPath === undefined) {
          deps.logger.warn(
            { backend: b.name, endpoint: b.endpoint },
            'external plugin backend in insecure mode (plaintext): only for development',
          );
        }
        try {
          const backend = await PluginBackend.open(b);
          backends.set(b.name, backend);
          await backend.waitForReady(options.connectWindowMs);
        } catch (e) {
          throw new KbsServiceError(
            'PLUGIN_INIT_FAILED',
            `Failed to initialise backend '${b.name}': ${(e as Error).message}`,
            { cause: e },
          );
        }
        deps.logger.info({ backend: b.name, endpoint: b.endpoint }, 'connected to external plugin backend');
      }
    } catch (e) {
      for (const b of backends.values()) b.close();
      throw new KbsServiceError(
        'PLUGIN_INIT_FAILED',
        `Initialize 'external' plugin failed: ${(e as Error).message}`,
        { cause: e },
      );
    }
    return new ExternalPlugin(backends, deps);
  }

  close(): void {
    for (const b of this.backends.values()) b.close();
  }

  /** `rest` is the path after `/kbs/v0/external/`: the backend name, then what the backend sees. */
  async handle(req: ApiRequest, rest: readonly string[]): Promise<Reply> {
    const name = rest[0];
    if (name === undefined) throw internal(new Error('external plugin name missing from request path'));
    const backend = this.backends.get(name);
    if (backend === undefined) {
      throw internal(new Error(`external plugin '${name.slice(0, 128)}' not registered`));
    }
    const forwarded: ForwardedRequest = {
      body: req.body,
      query: req.query,
      path: rest.slice(1),
      method: req.method,
    };
    const { metrics } = this.deps;
    const grpcFailure = (e: unknown) => {
      if (e instanceof PluginCallError && e.grpc) metrics.pluginErrors.labels(name).inc();
      return internal(e);
    };
    // Only Handle is counted as a request (trustee's kbs_plugin_requests_total); errors of every RPC.
    const callHandle = async () => {
      metrics.pluginRequests.labels(name).inc();
      const end = metrics.pluginDuration.startTimer({ plugin_name: name });
      try {
        return await backend.handle(forwarded);
      } catch (e) {
        throw grpcFailure(e);
      } finally {
        end();
      }
    };

    let admin: boolean;
    try {
      admin = await backend.requiresAdmin(forwarded);
    } catch (e) {
      throw grpcFailure(e);
    }
    if (admin) {
      checkPluginAdmin(this.deps.admin, req);
      const body = await callHandle();
      return { status: 200, headers: TEXT_XML, body };
    }

    const claims = await authorizePluginCall(this.deps, req, EXTERNAL_PLUGIN_NAME, rest);
    const body = await callHandle();
    let encrypt: boolean;
    try {
      encrypt = await backend.needsEncryption(forwarded);
    } catch (e) {
      throw grpcFailure(e);
    }
    if (!encrypt) return { status: 200, headers: TEXT_XML, body };
    return encryptToTee(this.jwe, this.deps.tokens, claims, body);
  }
}
