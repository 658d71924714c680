// The two certificates of the service (spec "Certificates"): as cert-manager objects, and made directly
// for clusters without cert-manager. Both paths give the same key types, lifetimes and names.
import 'reflect-metadata';
import { X509Certificate as NodeX509, type webcrypto as wc, webcrypto } from 'node:crypto';
import type { ICertificate } from '@kubernetes-models/cert-manager/cert-manager.io/v1/Certificate';
import type { IIssuer } from '@kubernetes-models/cert-manager/cert-manager.io/v1/Issuer';
import * as x509 from '@peculiar/x509';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { CertificateError } from './errors.js';

export const ISSUER_NAME = 'kbs-issuer';
export const HTTPS_CERTIFICATE_NAME = 'kbs-https';
export const TOKEN_CERTIFICATE_NAME = 'kbs-token';
export const DEFAULT_HTTPS_SECRET = 'kbs-https-tls';
export const DEFAULT_TOKEN_SECRET = 'kbs-token-tls';
export const DEFAULT_ORGANIZATION = 'broker';
/** Spec "Limits": 8760 hours, renewed 360 hours before expiry. */
export const CERT_DURATION_HOURS = 8760;
export const CERT_RENEW_BEFORE_HOURS = 360;
export const TOKEN_COMMON_NAME = 'kbs-token';

export interface CertificateNames {
  /** Omitted: the objects take the namespace of `kubectl apply -n`. */
  readonly namespace?: string;
  readonly routeHost: string;
  readonly httpsSecretName: string;
  readonly tokenSecretName: string;
  readonly organization: string;
}

const HOST = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkNames(n: CertificateNames): void {
  if (n.namespace !== undefined && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(n.namespace)) {
    throw new CertificateError(`namespace ${JSON.stringify(n.namespace)} is not a valid namespace name`);
  }
  if (!HOST.test(n.routeHost))
    throw new CertificateError(`route host ${JSON.stringify(n.routeHost)} is not a lowercase DNS name`);
  if (n.routeHost.length > 64) {
    // X.509 limits the common name to 64 characters; cert-manager would fail to issue.
    throw new CertificateError(
      `route host ${n.routeHost} is longer than 64 characters, the limit of a certificate common name`,
    );
  }
  if (n.organization.length === 0 || n.organization.length > 64) {
    throw new CertificateError('organization must be 1 to 64 characters');
  }
}

/** Issuer `kbs-issuer` (self-signed) and Certificates `kbs-https` and `kbs-token`. */
export function certManagerObjects(n: CertificateNames): [IIssuer, ICertificate, ICertificate] {
  checkNames(n);
  const issuerRef = { name: ISSUER_NAME, kind: 'Issuer', group: 'cert-manager.io' };
  const duration = `${CERT_DURATION_HOURS}h`;
  const renewBefore = `${CERT_RENEW_BEFORE_HOURS}h`;
  return [
    {
      apiVersion: 'cert-manager.io/v1',
      kind: 'Issuer',
      metadata: { name: ISSUER_NAME, ...(n.namespace !== undefined && { namespace: n.namespace }) },
      spec: { selfSigned: {} },
    },
    {
      apiVersion: 'cert-manager.io/v1',
      kind: 'Certificate',
      metadata: {
        name: HTTPS_CERTIFICATE_NAME,
        ...(n.namespace !== undefined && { namespace: n.namespace }),
      },
      spec: {
        secretName: n.httpsSecretName,
        duration,
        renewBefore,
        commonName: n.routeHost,
        dnsNames: [n.routeHost],
        subject: { organizations: [n.organization] },
        privateKey: { algorithm: 'RSA', size: 2048, encoding: 'PKCS8', rotationPolicy: 'Always' },
        usages: ['server auth', 'digital signature', 'key encipherment'],
        issuerRef,
      },
    },
    {
      apiVersion: 'cert-manager.io/v1',
      kind: 'Certificate',
      metadata: {
        name: TOKEN_CERTIFICATE_NAME,
        ...(n.namespace !== undefined && { namespace: n.namespace }),
      },
      spec: {
        secretName: n.tokenSecretName,
        duration,
        renewBefore,
        commonName: TOKEN_COMMON_NAME,
        subject: { organizations: [n.organization] },
        privateKey: { algorithm: 'ECDSA', size: 256, encoding: 'PKCS8', rotationPolicy: 'Always' },
        usages: ['digital signature'],
        issuerRef,
      },
    },
  ];
}

export interface KeyAndCertificate {
  /** PKCS#8 PEM. */
  readonly keyPem: string;
  readonly certPem: string;
}

export interface GeneratedCertificates {
  readonly https: KeyAndCertificate;
  readonly token: KeyAndCertificate;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64');
  return `-----BEGIN ${label}-----\n${b64.replace(/(.{64})/g, '$1\n').replace(/\n?$/, '\n')}-----END ${label}-----\n`;
}

async function selfSigned(
  algorithm: wc.RsaHashedKeyGenParams | wc.EcKeyGenParams,
  signingAlgorithm: wc.RsaHashedImportParams | wc.EcdsaParams,
  subject: x509.JsonName,
  extensions: (keys: wc.CryptoKeyPair) => Promise<x509.Extension[]>,
  now: Date,
): Promise<KeyAndCertificate> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as wc.CryptoKeyPair;
  const notBefore = new Date(Math.floor(now.getTime() / 1000) * 1000);
  const notAfter = new Date(notBefore.getTime() + CERT_DURATION_HOURS * 3600 * 1000);
  const serial = Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)));
  serial[0] = (serial[0] as number) & 0x7f; // positive INTEGER
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial.toString('hex'),
      name: subject,
      notBefore,
      notAfter,
      signingAlgorithm,
      keys: keys as never,
      extensions: await extensions(keys),
    },
    webcrypto as never,
  );
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    keyPem: pem('PRIVATE KEY', pkcs8),
    certPem: cert.toString('pem').replace(/\r\n/g, '\n').replace(/\n?$/, '\n'),
  };
}

/** Makes the HTTPS (RSA 2048) and token (ECDSA P-256) keys and self-signed certificates directly. */
export async function generateCertificates(
  n: CertificateNames,
  now = new Date(),
): Promise<GeneratedCertificates> {
  checkNames(n);
  const https = await selfSigned(
    {
      name: 'RSASSA-PKCS1-v1_5',
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: 'SHA-256',
    },
    { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    [{ CN: [n.routeHost] }, { O: [n.organization] }],
    async (keys) => [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: n.routeHost }]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as never, false, webcrypto as never),
    ],
    now,
  );
  const token = await selfSigned(
    { name: 'ECDSA', namedCurve: 'P-256' },
    { name: 'ECDSA', hash: 'SHA-256' },
    [{ CN: [TOKEN_COMMON_NAME] }, { O: [n.organization] }],
    async (keys) => [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as never, false, webcrypto as never),
    ],
    now,
  );
  // Self-check with the platform's parser: what we hand out must read back.
  if (new NodeX509(https.certPem).checkHost(n.routeHost, { subject: 'never' }) === undefined) {
    throw new CertificateError('generated HTTPS certificate does not name the route host');
  }
  return { https, token };
}

/** The kubernetes.io/tls Secrets a BrokerConfig's httpsSpec and attestationTokenVerificationSpec name. */
export function tlsSecrets(n: CertificateNames, certs: GeneratedCertificates): [ISecret, ISecret] {
  const s = (name: string, kc: KeyAndCertificate): ISecret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, ...(n.namespace !== undefined && { namespace: n.namespace }) },
    type: 'kubernetes.io/tls',
    data: {
      'tls.crt': Buffer.from(kc.certPem, 'utf8').toString('base64'),
      'tls.key': Buffer.from(kc.keyPem, 'utf8').toString('base64'),
    },
  });
  return [s(n.httpsSecretName, certs.https), s(n.tokenSecretName, certs.token)];
}
