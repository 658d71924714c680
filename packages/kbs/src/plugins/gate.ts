// The gate trustee's api_server.rs puts in front of every plugin but `resource`: admin credentials when
// the plugin's validate_auth asks for them, otherwise an attestation token (attested session cookie, else
// Bearer) and the resource policy with data `{"plugin":<name>,"resource-path":[…],"query":{…}}`; on that
// path the plugin may ask for its reply to be JWE-encrypted to the TEE key in the token.

import { type AdminAuthorizer, AdminError, bearerToken } from '@broker/auth';
import { KbsError } from '@broker/protocol';
import type { Logger } from 'pino';
import type { JweEncrypter } from '../jwe-encrypter.js';
import type { KbsMetrics } from '../metrics.js';
import { requirePolicyAllows } from '../policy/decide.js';
import type { ResourcePolicy } from '../policy/resource-policy.js';
import { jsonReply, type Reply } from '../reply.js';
import type { ApiRequest } from '../request.js';
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
  const { sessions, tokens } = deps;
  const session = await sessions.get(req.sessionId);
  const token = session?.status === 'Attested' ? session.token : bearerToken(req.authorization);
  if (token === undefined) throw new KbsError('TokenNotFound');
  let claims: Record<string, unknown>;
  try {
    claims = tokens.verify(token);
  } catch (e) {
    throw new KbsError('TokenVerifierError', undefined, { cause: e });
  }
  await requirePolicyAllows(deps, claims, { plugin, 'resource-path': rest, query: req.query });
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
