// The TLS and write-authentication flags shared by `rvps`, `grpc-as`, `restful-as` and
// `attestation-service`: one spelling, one set of usage errors.

import { createWriteAuthorizer, type WriteAuthorizer } from '@broker/auth';
import { UsageError } from '@broker/cli';
import { readPemFile, type ServerTls } from './tls.js';

export const SECURITY_OPTIONS = {
  'https-pubkey-cert': { type: 'string', short: 't' },
  'https-prikey': { type: 'string', short: 'k' },
  'client-ca': { type: 'string' },
  'admin-public-key': { type: 'string', multiple: true },
} as const;

export const SECURITY_HELP = `  -t, --https-pubkey-cert <FILE>  PEM certificate chain: serve TLS (needs -k)
  -k, --https-prikey <FILE>       PEM private key of that certificate (needs -t)
      --client-ca <FILE>          PEM CA certificates: a client certificate they issue may write
                                  (requested, not required: reads need none; needs -t and -k)
      --admin-public-key <FILE>   PEM public key: an admin JWT it signs (role "admin", as the KBS's
                                  admin API checks them), sent as \`authorization: Bearer <jwt>\`, may
                                  write; repeatable
                                  Without --client-ca or --admin-public-key anyone may write (as
                                  upstream); a warning says so at start.`;

export interface SecurityValues {
  readonly 'https-pubkey-cert'?: string | undefined;
  readonly 'https-prikey'?: string | undefined;
  readonly 'client-ca'?: string | undefined;
  readonly 'admin-public-key'?: readonly string[] | undefined;
}

export interface ServerSecurity {
  readonly tls?: ServerTls;
  readonly auth: WriteAuthorizer;
}

export async function serverSecurity(values: SecurityValues, now?: () => number): Promise<ServerSecurity> {
  const certPath = values['https-pubkey-cert'];
  const keyPath = values['https-prikey'];
  const caPath = values['client-ca'];
  if ((certPath === undefined) !== (keyPath === undefined)) {
    throw new UsageError('HTTPS public key cert and private key must be provided to enable HTTPS.');
  }
  if (caPath !== undefined && certPath === undefined) {
    throw new UsageError(
      '--client-ca needs --https-pubkey-cert and --https-prikey (client certificates need TLS)',
    );
  }
  const tls =
    certPath === undefined || keyPath === undefined
      ? undefined
      : {
          certChain: readPemFile(certPath),
          privateKey: readPemFile(keyPath),
          ...(caPath !== undefined && { clientCa: readPemFile(caPath) }),
        };
  const auth = await createWriteAuthorizer({
    adminPublicKeys: values['admin-public-key'] ?? [],
    clientCertificates: caPath !== undefined,
    ...(now !== undefined && { now }),
  });
  return { ...(tls !== undefined && { tls }), auth };
}
