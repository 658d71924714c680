// Test certificates made the way an operator would: RSA 2048 self-signed, SAN = the host names.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TlsMaterial {
  dir: string;
  keyPath: string;
  certPath: string;
  certPem: string;
}

export function makeServerCert(hosts: string[] = ['localhost', '127.0.0.1'], dir?: string): TlsMaterial {
  const out = dir ?? mkdtempSync(join(tmpdir(), 'broker-tls-'));
  const keyPath = join(out, 'https.key');
  const certPath = join(out, 'https.crt');
  const san = hosts.map((h) => (/^[\d.]+$/.test(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-sha256',
      '-days',
      '365',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-subj',
      `/CN=${hosts[0]}/O=broker-test`,
      '-addext',
      `subjectAltName=${san}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return { dir: out, keyPath, certPath, certPem: readFileSync(certPath, 'utf8') };
}

/** A P-256 key pair in PEM (PKCS#8 private, SPKI public), e.g. for the token signer or admin auth. */
export function makeP256KeyPair(dir: string, name: string): { privatePath: string; publicPath: string } {
  const privatePath = join(dir, `${name}.key`);
  const publicPath = join(dir, `${name}.pub`);
  execFileSync('openssl', [
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-out',
    privatePath,
  ]);
  execFileSync('openssl', ['pkey', '-in', privatePath, '-pubout', '-out', publicPath]);
  return { privatePath, publicPath };
}
