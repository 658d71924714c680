// The gate trustee's api_server.rs puts in front of every plugin but `resource`: admin credentials when
// the plugin's validate_auth asks for them, otherwise an attestation token (attested session cookie, else
// Bearer) and the resource policy with data `{"plugin":<name>,"resource-path":[…],"query":{…}}`; on that
// path the plugin may ask for its reply to be JWE-encrypted to the TEE key in the token.
import { KbsError } from '@broker/protocol';
import type { Logger } from 'pino';
import { type AdminAuthorizer, AdminError, bearerToken } from '../admin.js';
import type { ApiRequest } from '../api.js';
import { explainAppraisals } from '../attestation/index.js';
import type { JweEncrypter } from '../jwe-encrypter.js';
import type { KbsMetrics } from '../metrics.js';
import { PolicyEngineError, type ResourcePolicy } from '../policy/resource-policy.js';
import { jsonReply, type Reply } from '../reply.js';
import type { SessionStore } from '../session.js';
import type { AttestationTokenVerifier } from '../token.js';

export interface PluginGateDeps {
  readonly admin: AdminAuthorizer;
  readonly sessions: SessionStore;
  readonly tokens: AttestationTokenVerifier;
  readonly policy: ResourcePolicy;
  readonly metrics: KbsMetrics;
  readonly logger: Logger;
}

export function checkPluginAdmin(admin: AdminAuthorizer, req: ApiRequest): void {
  try {
    admin.check({ authorization: req.authorization, path: `/kbs/v0/${req.segments.join('/')}` });
  } catch (e) {
    // trustee reports a denied plugin admin call as AdminAuthInitialization (as for the resource plugin).
    const msg = e instanceof AdminError ? e.message : 'Admin access denied';
    throw new KbsError('AdminAuthInitialization', `failed to initialize [admin] configuration: ${msg}`, {
      cause: e,
    });
  }
}

/** The attestation token, verified, then the resource policy; returns the token's claims. */
export async function authorizePluginCall(
  deps: PluginGateDeps,
  req: ApiRequest,
  plugin: string,
  rest: readonly string[],
): Promise<Record<string, unknown>> {
  const { sessions, tokens, policy, metrics, logger } = deps;
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
    const decision = await policy.evaluate(claims, { plugin, 'resource-path': rest, query: req.query });
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

/** The reply JWE-encrypted to the TEE key the token carries (`application/json`). */
export function encryptToTee(
  jwe: JweEncrypter,
  tokens: AttestationTokenVerifier,
  claims: Record<string, unknown>,
  body: Uint8Array,
): Reply {
  let teeKey: ReturnType<AttestationTokenVerifier['teePublicKey']>;
  try {
    teeKey = tokens.teePublicKey(claims);
  } catch (e) {
    throw new KbsError('TokenVerifierError', undefined, { cause: e });
  }
  try {
    return jsonReply(JSON.stringify(jwe.encrypt(body, teeKey)));
  } catch (e) {
    throw new KbsError('JweError', undefined, { cause: e });
  }
}
