// The `external` plugin (trustee's ExternalPlugin with the plugin arm of api_server.rs `api`): requests
// under `/kbs/v0/external/<backend>/...` go to that backend over kbs.plugin.v1.KbsPlugin. The plugin's
// ValidateAuth picks the gate: admin credentials, or an attestation token and the resource policy (data
// `{"plugin":"external","resource-path":[<backend>,…],"query":{…}}`); on the token path NeedsEncryption
// may ask for the reply to be JWE-encrypted to the TEE key in the token. Every plugin failure is
// trustee's 401 PluginInternalError.
import { KbsError } from '@broker/protocol';
import type { Logger } from 'pino';
import { type AdminAuthorizer, AdminError, bearerToken } from '../admin.js';
import type { ApiRequest } from '../api.js';
import { explainAppraisals } from '../attestation/index.js';
import { JweEncrypter } from '../jwe-encrypter.js';
import type { KbsMetrics } from '../metrics.js';
import { PolicyEngineError, type ResourcePolicy } from '../policy/resource-policy.js';
import { jsonReply, type Reply } from '../reply.js';
import type { SessionStore } from '../session.js';
import type { AttestationTokenVerifier } from '../token.js';
import type { ExternalPluginConfig } from './external-config.js';
import { type ForwardedRequest, PluginBackend, PluginCallError } from './grpc-backend.js';

export const EXTERNAL_PLUGIN_NAME = 'external';

export interface ExternalPluginDeps {
  readonly admin: AdminAuthorizer;
  readonly sessions: SessionStore;
  readonly tokens: AttestationTokenVerifier;
  readonly policy: ResourcePolicy;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
}

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
          throw new Error(`Failed to initialise backend '${b.name}': ${(e as Error).message}`, { cause: e });
        }
        deps.logger.info({ backend: b.name, endpoint: b.endpoint }, 'connected to external plugin backend');
      }
    } catch (e) {
      for (const b of backends.values()) b.close();
      throw new Error(`Initialize 'external' plugin failed: ${(e as Error).message}`, { cause: e });
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
      this.checkAdmin(req);
      const body = await callHandle();
      return { status: 200, headers: TEXT_XML, body };
    }

    const claims = await this.authorize(req, rest);
    const body = await callHandle();
    let encrypt: boolean;
    try {
      encrypt = await backend.needsEncryption(forwarded);
    } catch (e) {
      throw grpcFailure(e);
    }
    if (!encrypt) return { status: 200, headers: TEXT_XML, body };
    let teeKey: ReturnType<AttestationTokenVerifier['teePublicKey']>;
    try {
      teeKey = this.deps.tokens.teePublicKey(claims);
    } catch (e) {
      throw new KbsError('TokenVerifierError', undefined, { cause: e });
    }
    try {
      return jsonReply(JSON.stringify(this.jwe.encrypt(body, teeKey)));
    } catch (e) {
      throw new KbsError('JweError', undefined, { cause: e });
    }
  }

  private checkAdmin(req: ApiRequest): void {
    try {
      this.deps.admin.check({ authorization: req.authorization, path: `/kbs/v0/${req.segments.join('/')}` });
    } catch (e) {
      // trustee reports a denied plugin admin call as AdminAuthInitialization (as for the resource plugin).
      const msg = e instanceof AdminError ? e.message : 'Admin access denied';
      throw new KbsError('AdminAuthInitialization', `failed to initialize [admin] configuration: ${msg}`, {
        cause: e,
      });
    }
  }

  /** The attestation token (attested session, else Bearer), verified, then the resource policy. */
  private async authorize(req: ApiRequest, rest: readonly string[]): Promise<Record<string, unknown>> {
    const { sessions, tokens, policy, metrics, logger } = this.deps;
    const session = await sessions.get(req.sessionId);
    const token = session?.status === 'Attested' ? session.token : bearerToken(req.authorization);
    if (token === undefined) throw new KbsError('TokenNotFound');
    let claims: Record<string, unknown>;
    try {
      claims = tokens.verify(token);
    } catch (e) {
      throw new KbsError('TokenVerifierError', undefined, { cause: e });
    }
    metrics.policyEvaluations.inc();
    let allow: boolean;
    try {
      const decision = await policy.evaluate(claims, {
        plugin: EXTERNAL_PLUGIN_NAME,
        'resource-path': rest,
        query: req.query,
      });
      if (decision.anomaly !== undefined) {
        metrics.policyErrors.inc();
        logger.warn(decision.anomaly);
      }
      allow = decision.allow;
    } catch (e) {
      metrics.policyErrors.inc();
      if (e instanceof PolicyEngineError) {
        throw new KbsError('PolicyEngineError', `Policy engine error: ${e.message}`, { cause: e });
      }
      throw e;
    }
    if (!allow) {
      metrics.policyViolations.inc();
      const why = explainAppraisals(claims);
      throw new KbsError('PolicyDeny', undefined, {
        cause: new Error(why ?? 'every appraisal in the token is affirming; the resource policy refused it'),
      });
    }
    metrics.policyApprovals.inc();
    return claims;
  }
}
