// Server TLS for the gRPC listeners of the RVPS and the attestation service. With a client CA the
// handshake asks for a client certificate but lets a client without one in (reads stay open, as in
// trustee's topology where the KBS has no client certificate); a certificate that does not chain to the
// CA leaves the connection unverified, and writes check that (write-auth.ts).
import { readFileSync, statSync } from 'node:fs';
import { type KeyCertPair, ServerCredentials } from '@grpc/grpc-js';
import { RvpsConfigError } from './errors.js';

export interface ServerTls {
  /** PEM certificate chain. */
  readonly certChain: Buffer;
  /** PEM private key of that certificate. */
  readonly privateKey: Buffer;
  /** PEM CA certificates that issue the clients allowed to write. */
  readonly clientCa?: Buffer;
}

/** Requests (does not require) a client certificate, verified against `ca`. */
class OptionalClientCertificate extends ServerCredentials {
  constructor(ca: Buffer, pair: KeyCertPair) {
    super(
      { requestCert: true, rejectUnauthorized: false },
      { ca, cert: pair.cert_chain, key: pair.private_key },
    );
  }
  _equals(other: ServerCredentials): boolean {
    return other === this;
  }
}

export function grpcServerCredentials(tls: ServerTls | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const pair = { cert_chain: tls.certChain, private_key: tls.privateKey };
  if (tls.clientCa !== undefined) return new OptionalClientCertificate(tls.clientCa, pair);
  return ServerCredentials.createSsl(null, [pair]);
}

const MAX_PEM_BYTES = 1024 * 1024;

/** A PEM file's bytes (certificates, keys), refusing anything larger than 1 MiB. */
export function readPemFile(path: string): Buffer {
  if (statSync(path).size > MAX_PEM_BYTES)
    throw new RvpsConfigError(`${path} is larger than ${MAX_PEM_BYTES} bytes`);
  return readFileSync(path);
}
