// Admin API access (trustee kbs/src/admin): InsecureAllowAll, DenyAll, or a bearer JWT from a trusted
// identity provider whose mandatory `role` claim an anchored regex ACL allows for the request path.
//
// The ACL sees the path the router acts on: `/kbs/v0/` and the percent-decoded segments joined by `/`,
// without the query. trustee matches the request target as received instead (percent-encoded, with the
// query), while actix routes on the decoded path, so `%72esource-policy` reaches `resource-policy` past
// an ACL that refuses it, and a query can satisfy a pattern the path alone would not.
import type { CacheUsage } from '@broker/kv-storage';
import { AuthError, type AuthErrorCode } from './errors.js';
import { JwtVerifier } from './verifier.js';

/** One `[[admin.identity_providers]]` table of the KBS configuration (or a service's trusted admin key). */
export interface IdentityProviderConfig {
  readonly issuer?: string;
  readonly audience?: string;
  readonly publicKeyUri?: string;
  readonly jwkSetUri?: string;
}

/** One `[[admin.acls]]` rule: the role and the anchored regex of the paths it may call. */
export interface AclRuleConfig {
  readonly role: string;
  readonly allowedEndpoints: string;
}

/** trustee's `[admin]`: who may call the admin API. */
export type AdminConfig =
  | { readonly mode: 'InsecureAllowAll' }
  | { readonly mode: 'DenyAll' }
  | {
      readonly mode: 'AuthenticatedAuthorization';
      readonly identityProviders: readonly IdentityProviderConfig[];
      readonly acls: readonly AclRuleConfig[];
    };

/** trustee's admin::Error, its Display as the message. */
export class AdminError extends AuthError {
  override readonly name: string = 'AdminError';
  static readonly defaultCode: AuthErrorCode = 'ADMIN_FAILED';
}

export class AdminAccessDenied extends AdminError {
  override readonly name: string = 'AdminAccessDenied';
  static override readonly defaultCode: AuthErrorCode = 'ADMIN_ACCESS_DENIED';
  readonly reason: string;
  constructor(reason: string) {
    super(`Admin access denied: ${reason}`);
    this.reason = reason;
  }
}

export interface AdminRequest {
  /** The `Authorization` header. */
  readonly authorization: string | undefined;
  /** The normalised path the request is routed on: `/kbs/v0/` and the decoded segments; no query. */
  readonly path: string;
}

export interface AdminDecision {
  /** Who was let in, for the log: `insecure`, or the token's role. */
  readonly principal: string;
}

export interface AdminAuthorizer {
  readonly mode: AdminConfig['mode'];
  /** Throws AdminError when the request may not use the admin API. */
  check(req: AdminRequest): AdminDecision;
  /** What the token verifiers cache, summed over the identity providers (bearer mode only). */
  cacheUsage?(): CacheUsage;
}

/** actix-web-httpauth's Bearer parse: scheme `Bearer`, one space, the token. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const sp = header.indexOf(' ');
  if (sp < 0 || header.slice(0, sp) !== 'Bearer') return undefined;
  return header.slice(sp + 1);
}

interface TrustedIssuer {
  readonly config: IdentityProviderConfig;
  readonly verifier: JwtVerifier;
}

function audiences(aud: unknown): string[] {
  if (typeof aud === 'string') return [aud];
  if (Array.isArray(aud)) return aud.filter((a): a is string => typeof a === 'string');
  return [];
}

class BearerJwtAuthorizer implements AdminAuthorizer {
  readonly mode = 'AuthenticatedAuthorization' as const;
  private readonly acls: readonly { role: string; re: RegExp }[];

  constructor(
    private readonly issuers: readonly TrustedIssuer[],
    acls: readonly AclRuleConfig[],
  ) {
    this.acls = acls.map((a) => ({ role: a.role, re: new RegExp(a.allowedEndpoints, 'u') }));
  }

  private role(token: string): string {
    for (const issuer of this.issuers) {
      let claims: Record<string, unknown>;
      try {
        claims = issuer.verifier.verify(token);
      } catch {
        continue;
      }
      const role = claims.role;
      if (typeof role !== 'string') throw new AdminAccessDenied('Missing required `role` claim in JWT');
      const iss = typeof claims.iss === 'string' ? claims.iss : '';
      if (issuer.config.issuer !== undefined && iss !== issuer.config.issuer) continue;
      if (issuer.config.audience !== undefined && !audiences(claims.aud).includes(issuer.config.audience))
        continue;
      return role;
    }
    throw new AdminAccessDenied('Cannot verify token with any of the issuers');
  }

  check(req: AdminRequest): AdminDecision {
    const token = bearerToken(req.authorization);
    if (token === undefined) throw new AdminError('Failed to parse HTTP Auth Bearer header');
    const role = this.role(token);
    for (const acl of this.acls) {
      if (acl.role === role && acl.re.test(req.path)) return { principal: role };
    }
    throw new AdminAccessDenied(`Role ${role} not allowed for path ${req.path.slice(0, 256)}`);
  }

  cacheUsage(): CacheUsage {
    let entries = 0;
    let bytes = 0;
    for (const { verifier } of this.issuers) {
      const u = verifier.cacheUsage;
      entries += u.verified.entries + u.headerKeys.entries;
      bytes += u.verified.bytes + u.headerKeys.bytes;
    }
    return { entries, bytes };
  }
}

export async function createAdminAuthorizer(
  config: AdminConfig,
  now?: () => number,
): Promise<AdminAuthorizer> {
  switch (config.mode) {
    case 'InsecureAllowAll':
      return { mode: config.mode, check: () => ({ principal: 'insecure' }) };
    case 'DenyAll':
      return {
        mode: config.mode,
        check: () => {
          throw new AdminAccessDenied('Admin access denied as DenyAll authorization_mode is enabled');
        },
      };
    case 'AuthenticatedAuthorization': {
      const issuers: TrustedIssuer[] = [];
      for (const [i, idp] of config.identityProviders.entries()) {
        try {
          const verifier = await JwtVerifier.create({
            ...(idp.jwkSetUri !== undefined && { trustedJwkSets: [idp.jwkSetUri] }),
            ...(idp.publicKeyUri !== undefined && { trustedPemKeys: [idp.publicKeyUri] }),
            ...(now !== undefined && { now }),
          });
          issuers.push({ config: idp, verifier });
        } catch (e) {
          throw new AdminError(
            `Invalid admin token verifier config: identity_providers[${i}]: ${(e as Error).message}`,
          );
        }
      }
      return new BearerJwtAuthorizer(issuers, config.acls);
    }
  }
}
