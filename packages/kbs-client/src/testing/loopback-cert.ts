// A self-signed P-256 certificate for 127.0.0.1 made by openssl, for tests of the HTTP layer over TLS.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface LoopbackCert {
  readonly cert: string;
  readonly key: string;
}

/** Writes `<name>.pem` and `<name>.key` in `dir` (valid for a day) and returns their PEM text. */
export function makeLoopbackCert(dir: string, name: string): LoopbackCert {
  const certPath = join(dir, `${name}.pem`);
  const keyPath = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyPath,
      '-out',
      certPath,
    ],
    { stdio: 'ignore' },
  );
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
}
