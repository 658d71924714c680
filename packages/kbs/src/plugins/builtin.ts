// trustee's built-in client plugins other than `resource` (plugin arm of api_server.rs `api`): the
// plugin's validate_auth picks the gate — admin credentials, or an attestation token and the resource
// policy with data `{"plugin":<name>,"resource-path":[…],"query":{…}}` — and, on the token path, its
// encrypted() asks for the reply to be JWE-encrypted to the token's TEE key. Every plugin failure is
// trustee's 401 PluginInternalError; replies are `text/xml` unless encrypted, as trustee.
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

/** What a built-in plugin sees of a request: the path after `/kbs/v0/<plugin>/`. */
export interface PluginCall {
  readonly method: string;
  readonly path: readonly string[];
  readonly query: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

/** trustee's ClientPlugin trait. */
export interface BuiltinPlugin {
  readonly name: string;
  handle(call: PluginCall): Promise<Uint8Array>;
  /** true: the call needs admin credentials; false: an attestation token and the resource policy. */
  validateAuth(call: PluginCall): boolean;
  /** On the token path: encrypt the reply to the TEE key. */
  encrypted(call: PluginCall): boolean;
  close?(): Promise<void>;
}

export interface BuiltinPluginDeps {
  readonly admin: AdminAuthorizer;
  readonly sessions: SessionStore;
  readonly tokens: AttestationTokenVerifier;
  readonly policy: ResourcePolicy;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
}

const TEXT_XML = { 'content-type': 'text/xml' };

/** A refusal of the caller's request whose message is safe (and useful) to show the caller. */
export class PluginRequestError extends Error {}

export class BuiltinPluginHost {
  private readonly jwe = new JweEncrypter();

  constructor(
    private readonly plugins: ReadonlyMap<string, BuiltinPlugin>,
    private readonly deps: BuiltinPluginDeps,
  ) {}

  has(name: string): boolean {
    return this.plugins.has(name);
  }

  async close(): Promise<void> {
    for (const p of this.plugins.values()) await p.close?.();
  }

  /** `rest` is the path after `/kbs/v0/<name>/`. */
  async handle(req: ApiRequest, name: string, rest: readonly string[]): Promise<Reply> {
    const plugin = this.plugins.get(name);
    if (plugin === undefined) throw new KbsError('PluginNotFound', `Plugin ${name.slice(0, 128)} not found`);
    const call: PluginCall = { method: req.method, path: rest, query: req.query, body: req.body };
    const run = () =>
      this.deps.metrics.measurePlugin(
        name,
        (e) => e instanceof KbsError && e.kind === 'PluginInternalError',
        async () => {
          try {
            return await plugin.handle(call);
          } catch (e) {
            const detail =
              e instanceof PluginRequestError ? `Plugin internal error: ${e.message}` : undefined;
            throw new KbsError('PluginInternalError', detail, { cause: e });
          }
        },
      );
    if (plugin.validateAuth(call)) {
      this.checkAdmin(req);
      return { status: 200, headers: TEXT_XML, body: await run() };
    }
    const claims = await this.authorize(req, name, rest);
    const body = await run();
    if (!plugin.encrypted(call)) return { status: 200, headers: TEXT_XML, body };
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
  private async authorize(
    req: ApiRequest,
    name: string,
    rest: readonly string[],
  ): Promise<Record<string, unknown>> {
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
        plugin: name,
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
