// The Secrets `render` copies from. Rendering runs offline, so the TLS Secrets named by the BrokerConfig
// come in as Secret documents (same YAML stream or --secrets files), e.g. `brokerctl certs` output or
// `kubectl get secret -o yaml` of what cert-manager issued.
import type { KeyObject, X509Certificate } from 'node:crypto';
import { CertificateError, InputError } from './errors.js';
import { isRecord } from './fields.js';
import {
  checkKeyMatchesCertificate,
  checkServerCertificate,
  parseCertificates,
  parsePrivateKey,
} from './pem.js';

export interface SourceSecret {
  readonly name: string;
  readonly namespace?: string;
  readonly type: string;
  readonly data: ReadonlyMap<string, Buffer>;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function isSecretDoc(doc: unknown): doc is Record<string, unknown> {
  return isRecord(doc) && doc.kind === 'Secret' && (doc.apiVersion === 'v1' || doc.apiVersion === undefined);
}

/** Reads a Secret document (data is base64, stringData is text; stringData wins, as in the API server). */
export function parseSourceSecret(doc: unknown, source: string): SourceSecret {
  if (!isSecretDoc(doc)) throw new InputError(`${source}: not a v1 Secret`);
  const meta = doc.metadata;
  const name = isRecord(meta) && typeof meta.name === 'string' ? meta.name : undefined;
  if (name === undefined || name === '') throw new InputError(`${source}: Secret without metadata.name`);
  const namespace = isRecord(meta) && typeof meta.namespace === 'string' ? meta.namespace : undefined;
  const type = typeof doc.type === 'string' ? doc.type : 'Opaque';
  const data = new Map<string, Buffer>();
  for (const [field, decode] of [
    ['data', (v: string, k: string) => decodeBase64(v, `${source}: Secret ${name} data.${k}`)],
    ['stringData', (v: string) => Buffer.from(v, 'utf8')],
  ] as const) {
    const m = doc[field];
    if (m === undefined || m === null) continue;
    if (!isRecord(m)) throw new InputError(`${source}: Secret ${name} ${field} must be a mapping`);
    for (const [k, v] of Object.entries(m)) {
      if (typeof v !== 'string')
        throw new InputError(`${source}: Secret ${name} ${field}.${k} must be a string`);
      data.set(k, decode(v, k));
    }
  }
  return { name, ...(namespace !== undefined && { namespace }), type, data };
}

function decodeBase64(v: string, what: string): Buffer {
  const compact = v.replace(/\s+/g, '');
  if (!BASE64.test(compact)) throw new InputError(`${what} is not base64`);
  return Buffer.from(compact, 'base64');
}

/** Splits a document list into Secrets (by name) and the rest. */
export function collectSecrets(
  docs: readonly unknown[],
  source: string,
): { secrets: Map<string, SourceSecret>; others: unknown[] } {
  const secrets = new Map<string, SourceSecret>();
  const others: unknown[] = [];
  for (const [i, d] of docs.entries()) {
    if (!isSecretDoc(d)) {
      others.push(d);
      continue;
    }
    const s = parseSourceSecret(d, `${source} document ${i + 1}`);
    if (secrets.has(s.name)) throw new InputError(`${source}: Secret ${s.name} is given twice`);
    secrets.set(s.name, s);
  }
  return { secrets, others };
}

export interface TlsMaterial {
  readonly certPem: Buffer;
  readonly keyPem: Buffer;
  readonly cert: X509Certificate;
  readonly key: KeyObject;
}

function tlsEntries(secret: SourceSecret): { crt: Buffer; key: Buffer } {
  if (secret.type !== 'kubernetes.io/tls') {
    throw new CertificateError(`Secret ${secret.name} is of type ${secret.type}, expected kubernetes.io/tls`);
  }
  const crt = secret.data.get('tls.crt');
  const key = secret.data.get('tls.key');
  if (crt === undefined) throw new CertificateError(`Secret ${secret.name} has no tls.crt`);
  if (key === undefined) throw new CertificateError(`Secret ${secret.name} has no tls.key`);
  return { crt, key };
}

/** The HTTPS key and certificate; the certificate must name the route host (spec "Authentication" 1). */
export function httpsMaterial(secret: SourceSecret, routeHost: string, now?: Date): TlsMaterial {
  const { crt, key } = tlsEntries(secret);
  const what = `Secret ${secret.name} tls.crt`;
  const certs = checkServerCertificate(crt.toString('utf8'), routeHost, what, now);
  const cert = certs[0] as X509Certificate;
  const k = parsePrivateKey(key.toString('utf8'), `Secret ${secret.name} tls.key`);
  checkKeyMatchesCertificate(cert, k, `Secret ${secret.name}`);
  return { certPem: crt, keyPem: key, cert, key: k };
}

/** The attestation-token signing key: EC P-256 (the KBS signs ES256 EAR tokens) and its certificate. */
export function tokenMaterial(secret: SourceSecret): TlsMaterial {
  const { crt, key } = tlsEntries(secret);
  const certs = parseCertificates(crt.toString('utf8'), `Secret ${secret.name} tls.crt`);
  const cert = certs[0] as X509Certificate;
  const k = parsePrivateKey(key.toString('utf8'), `Secret ${secret.name} tls.key`);
  if (k.asymmetricKeyType !== 'ec' || k.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new CertificateError(
      `Secret ${secret.name} tls.key: the attestation token key must be ECDSA P-256 (ES256), found ${k.asymmetricKeyType ?? 'unknown'} ${k.asymmetricKeyDetails?.namedCurve ?? ''}`.trimEnd(),
    );
  }
  checkKeyMatchesCertificate(cert, k, `Secret ${secret.name}`);
  return { certPem: crt, keyPem: key, cert, key: k };
}
