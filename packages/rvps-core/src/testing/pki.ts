// Test credentials made with the openssl command, as an operator would: a server certificate for the
// loopback address, a client CA with one client certificate, a second CA with a certificate the server
// must not accept, and two admin signing key pairs (one trusted, one not).
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestPki {
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCa: string;
  readonly clientCert: string;
  readonly clientKey: string;
  /** Issued by a CA the server does not trust. */
  readonly rogueCert: string;
  readonly rogueKey: string;
  readonly adminKey: string;
  readonly adminPub: string;
  /** A key pair the server does not trust. */
  readonly otherKey: string;
  readonly otherPub: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function ca(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  openssl([
    'req',
    '-x509',
    ...EC,
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  ]);
  return { cert, key };
}

function issue(
  dir: string,
  name: string,
  issuer: { cert: string; key: string },
): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n');
  openssl(['req', ...EC, '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
  openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    issuer.cert,
    '-CAkey',
    issuer.key,
    '-CAcreateserial',
    '-out',
    cert,
    '-days',
    '2',
    '-extfile',
    ext,
  ]);
  return { cert, key };
}

function keyPair(dir: string, name: string): { key: string; pub: string } {
  const key = join(dir, `${name}.key`);
  const pub = join(dir, `${name}.pub`);
  openssl(['genpkey', '-algorithm', 'ed25519', '-out', key]);
  openssl(['pkey', '-in', key, '-pubout', '-out', pub]);
  return { key, pub };
}

export function makeTestPki(dir: string): TestPki {
  const serverCert = join(dir, 'server.crt');
  const serverKey = join(dir, 'server.key');
  openssl([
    'req',
    '-x509',
    ...EC,
    '-keyout',
    serverKey,
    '-out',
    serverCert,
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ]);
  const clientCa = ca(dir, 'client-ca');
  const client = issue(dir, 'client', clientCa);
  const rogue = issue(dir, 'rogue', ca(dir, 'rogue-ca'));
  const admin = keyPair(dir, 'admin');
  const other = keyPair(dir, 'other');
  return {
    serverCert,
    serverKey,
    clientCa: clientCa.cert,
    clientCert: client.cert,
    clientKey: client.key,
    rogueCert: rogue.cert,
    rogueKey: rogue.key,
    adminKey: admin.key,
    adminPub: admin.pub,
    otherKey: other.key,
    otherPub: other.pub,
  };
}

/** The bytes of a file of the PKI, for TLS options. */
export const pem = (path: string): Buffer => readFileSync(path);
