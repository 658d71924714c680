// Who may write (register reference values, set attestation policies) on the standalone RVPS and
// attestation service. trustee leaves these writes open to anyone who reaches the port; here they can
// require a client certificate issued by a configured CA (mutual TLS), and/or an admin bearer JWT
// checked exactly as the KBS checks its admin API's tokens (`createAdminAuthorizer` from @broker/kbs:
// a trusted PEM public key, `exp` required, a `role` claim, here `admin`). Reads stay open, as upstream:
// the KBS evaluates evidence and the policies query reference values without any credential.

import type { Metadata } from '@grpc/grpc-js';
import { AdminAccessDenied, type AdminAuthorizer, AdminError, createAdminAuthorizer } from './admin.js';
import { AuthError } from './errors.js';

/** The role an admin token must carry to write (what `kbs-client config --auth-private-key` signs). */
export const WRITE_ROLE = 'admin';

export type WriteAuthErrorCode = 'UNAUTHENTICATED' | 'PERMISSION_DENIED' | 'INVALID_CONFIG';

/** A write refused, or write authentication that cannot be set up. */
export class WriteAuthError extends AuthError {
  override readonly name: string = 'WriteAuthError';
  declare readonly code: WriteAuthErrorCode;
  constructor(code: WriteAuthErrorCode, message: string, options?: ErrorOptions) {
    super(message, { cause: options?.cause, code });
  }
}

export interface WriteAuthConfig {
  /** PEM public keys (paths, file:// or https:// URLs) whose admin JWTs may write. */
  readonly adminPublicKeys?: readonly string[];
  /**
   * A client certificate verified against the server's client CA may write. The TLS listener requests
   * the certificate without requiring it, so clients without one can still read.
   */
  readonly clientCertificates?: boolean;
  /** Clock in epoch milliseconds (tests). */
  readonly now?: () => number;
}

/** What a request presented. */
export interface WriteCredentials {
  /** The `authorization` header or metadata entry. */
  readonly authorization?: string | undefined;
  /** A client certificate that chained to the client CA was presented. */
  readonly verifiedClientCertificate: boolean;
}

export interface WriteAuthorizer {
  /** False when writes are open to anyone (upstream's behaviour, the default). */
  readonly enabled: boolean;
  /** The accepted credentials, for the start-up log. */
  readonly methods: readonly ('client-certificate' | 'admin-jwt')[];
  /**
   * Throws WriteAuthError when `creds` may not perform the write `what` (a gRPC method path such as
   * `/reference.ReferenceValueProviderService/RegisterReferenceValue`, or `POST /policy`); returns who
   * wrote, for the log.
   */
  check(what: string, creds: WriteCredentials): string;
}

/** Writes open to anyone. */
export const OPEN_WRITES: WriteAuthorizer = {
  enabled: false,
  methods: [],
  check: () => 'unauthenticated',
};

/** The loud start-up warning of a service whose writes are open. */
export function openWritesWarning(service: string, writes: string): string {
  return `WRITES ARE UNAUTHENTICATED: anyone who can reach ${service} can ${writes}. Set --admin-public-key and/or --client-ca to require a credential`;
}

export async function createWriteAuthorizer(config: WriteAuthConfig): Promise<WriteAuthorizer> {
  const keys = config.adminPublicKeys ?? [];
  const certs = config.clientCertificates === true;
  if (keys.length === 0 && !certs) return OPEN_WRITES;
  let jwt: AdminAuthorizer | undefined;
  if (keys.length > 0) {
    try {
      jwt = await createAdminAuthorizer(
        {
          mode: 'AuthenticatedAuthorization',
          identityProviders: keys.map((publicKeyUri) => ({ publicKeyUri })),
          acls: [{ role: WRITE_ROLE, allowedEndpoints: '.*' }],
        },
        config.now,
      );
    } catch (e) {
      throw new WriteAuthError('INVALID_CONFIG', `--admin-public-key: ${(e as Error).message}`, { cause: e });
    }
  }
  const methods: ('client-certificate' | 'admin-jwt')[] = [];
  if (certs) methods.push('client-certificate');
  if (jwt !== undefined) methods.push('admin-jwt');
  const wanted = [
    ...(certs ? ['a client certificate issued by the client CA (--client-ca)'] : []),
    ...(jwt !== undefined
      ? ['an `authorization: Bearer <admin JWT>` header signed by a key of --admin-public-key']
      : []),
  ].join(' or ');
  return {
    enabled: true,
    methods,
    check(what, creds) {
      if (certs && creds.verifiedClientCertificate) return 'client-certificate';
      if (jwt !== undefined && creds.authorization !== undefined) {
        try {
          return `admin-jwt:${jwt.check({ authorization: creds.authorization, path: what }).principal}`;
        } catch (e) {
          if (!(e instanceof AdminError)) throw e;
          const role = e instanceof AdminAccessDenied && e.reason.startsWith('Role ');
          throw new WriteAuthError(
            role ? 'PERMISSION_DENIED' : 'UNAUTHENTICATED',
            role
              ? `${what}: the admin token's role may not write (the role must be ${WRITE_ROLE})`
              : `${what}: the admin token was refused (${e instanceof AdminAccessDenied ? e.reason : e.message})`,
            { cause: e },
          );
        }
      }
      throw new WriteAuthError('UNAUTHENTICATED', `${what} needs authentication: present ${wanted}`);
    },
  };
}

/** What a gRPC call presented: its `authorization` metadata and the TLS peer's verified certificate. */
export function grpcWriteCredentials(call: {
  readonly metadata: Metadata;
  getAuthContext(): { readonly sslPeerCertificate?: unknown } | null;
}): WriteCredentials {
  const values = call.metadata.get('authorization');
  const first = values[0];
  // grpc-js fills sslPeerCertificate only when the TLS socket verified the peer against the CA.
  const verified = call.getAuthContext()?.sslPeerCertificate !== undefined;
  return {
    ...(typeof first === 'string' && { authorization: first }),
    verifiedClientCertificate: verified,
  };
}
