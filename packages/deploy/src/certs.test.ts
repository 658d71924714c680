import { createPrivateKey, X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { certManagerObjects, generateCertificates, tlsSecrets } from './certs.js';
import { CertificateError } from './errors.js';
import { certNames, HOST } from './testing/fixtures.js';
import { schemaProblems } from './testing/schemas.js';

// biome-ignore lint/suspicious/noExplicitAny: test access to nested plain JSON
type Any = any;

describe('cert-manager objects', () => {
  it('Issuer kbs-issuer is self-signed; the objects pass cert-manager schemas with no unknown fields', () => {
    const objs = certManagerObjects(certNames);
    expect(objs.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'Issuer/kbs-issuer',
      'Certificate/kbs-https',
      'Certificate/kbs-token',
    ]);
    expect(objs[0].spec).toEqual({ selfSigned: {} });
    for (const o of objs) expect(schemaProblems(o), o.metadata?.name).toEqual([]);
    const wrong = structuredClone(objs[1]) as Any;
    wrong.spec.privateKey.sise = 2048;
    expect(schemaProblems(wrong)).toEqual(['/spec/privateKey/sise is not a field of Certificate']);
    const badEnum = structuredClone(objs[1]) as Any;
    badEnum.spec.privateKey.encoding = 'PKCS12';
    expect(schemaProblems(badEnum).length).toBeGreaterThan(0);
  });

  it('kbs-https: RSA 2048 PKCS8, 8760h, renew 360h, dnsNames = route host, CN and organization, TLS Secret', () => {
    const https = certManagerObjects(certNames)[1].spec as Any;
    expect(https).toMatchObject({
      secretName: 'kbs-https-tls',
      duration: '8760h',
      renewBefore: '360h',
      commonName: HOST,
      dnsNames: [HOST],
      subject: { organizations: ['Example Org'] },
      privateKey: { algorithm: 'RSA', size: 2048, encoding: 'PKCS8' },
      issuerRef: { name: 'kbs-issuer', kind: 'Issuer' },
    });
  });

  it('kbs-token: ECDSA 256 PKCS8 into the token-key Secret', () => {
    const token = certManagerObjects(certNames)[2].spec as Any;
    expect(token).toMatchObject({
      secretName: 'kbs-token-tls',
      privateKey: { algorithm: 'ECDSA', size: 256, encoding: 'PKCS8' },
      issuerRef: { name: 'kbs-issuer' },
    });
  });

  it('refuses hosts a certificate cannot carry', () => {
    for (const routeHost of ['', 'UPPER.example', 'a_b.example', `${'a'.repeat(60)}.example.test`]) {
      expect(() => certManagerObjects({ ...certNames, routeHost }), routeHost).toThrow(CertificateError);
    }
    expect(() => certManagerObjects({ ...certNames, organization: '' })).toThrow(CertificateError);
  });
});

describe('generateCertificates', () => {
  it('makes the same key types, lifetime and names directly', async () => {
    const now = new Date('2026-01-01T00:00:00Z');
    const { https, token } = await generateCertificates(certNames, now);
    const hc = new X509Certificate(https.certPem);
    expect(hc.subjectAltName).toBe(`DNS:${HOST}`);
    expect(hc.subject).toContain(`CN=${HOST}`);
    expect(hc.subject).toContain('O=Example Org');
    expect(hc.publicKey.asymmetricKeyType).toBe('rsa');
    expect(hc.publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(new Date(hc.validTo).getTime() - new Date(hc.validFrom).getTime()).toBe(8760 * 3600 * 1000);
    expect(hc.verify(hc.publicKey)).toBe(true);
    expect(https.keyPem.startsWith('-----BEGIN PRIVATE KEY-----\n')).toBe(true);
    expect(hc.checkPrivateKey(createPrivateKey(https.keyPem))).toBe(true);

    const tc = new X509Certificate(token.certPem);
    expect(tc.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(token.keyPem.startsWith('-----BEGIN PRIVATE KEY-----\n')).toBe(true);
    expect(tc.checkPrivateKey(createPrivateKey(token.keyPem))).toBe(true);
    expect(tc.verify(tc.publicKey)).toBe(true);
  });

  it('tlsSecrets are kubernetes.io/tls Secrets that pass the schema', async () => {
    const secrets = tlsSecrets(certNames, await generateCertificates(certNames));
    for (const s of secrets) {
      expect(s.type).toBe('kubernetes.io/tls');
      expect(Object.keys(s.data ?? {})).toEqual(['tls.crt', 'tls.key']);
      expect(schemaProblems(s)).toEqual([]);
    }
  });
});
