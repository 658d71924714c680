// Test-only PKI: a root CA, an intermediate and a P-256 leaf made with the openssl CLI, so tests can
// sign tokens whose header JWK carries a real x5c chain.
import { execFileSync } from 'node:child_process';
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestChain {
  /** PEM of the root, to be trusted. */
  readonly rootPem: string;
  readonly rootPath: string;
  /** x5c: leaf then intermediate, standard base64 DER. */
  readonly x5c: string[];
  readonly leafKey: KeyObject;
  /** PEM file of the leaf key (PKCS#8). */
  readonly leafKeyPath: string;
  /** PEM file of leaf then intermediate. */
  readonly chainPath: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

function der64(pemPath: string): string {
  return Buffer.from(new X509Certificate(readFileSync(pemPath)).raw).toString('base64');
}

/** Creates root → intermediate → leaf in `dir`; `tag` keeps names of several chains apart. */
export function makeChain(dir: string, tag = 'test'): TestChain {
  const ext = join(dir, `${tag}-ext.cnf`);
  writeFileSync(
    ext,
    '[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' +
      '[leaf]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n',
  );
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(
    [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      `${tag}-root.key`,
      '-out',
      `${tag}-root.pem`,
      '-days',
      '30',
      '-subj',
      `/CN=${tag}-root`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    dir,
  );
  openssl(
    ['req', ...ec, '-keyout', `${tag}-int.key`, '-out', `${tag}-int.csr`, '-subj', `/CN=${tag}-intermediate`],
    dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${tag}-int.csr`,
      '-CA',
      `${tag}-root.pem`,
      '-CAkey',
      `${tag}-root.key`,
      '-CAcreateserial',
      '-out',
      `${tag}-int.pem`,
      '-days',
      '30',
      '-extfile',
      ext,
      '-extensions',
      'ca',
    ],
    dir,
  );
  openssl(
    ['req', ...ec, '-keyout', `${tag}-leaf.key`, '-out', `${tag}-leaf.csr`, '-subj', `/CN=${tag}-leaf`],
    dir,
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${tag}-leaf.csr`,
      '-CA',
      `${tag}-int.pem`,
      '-CAkey',
      `${tag}-int.key`,
      '-CAcreateserial',
      '-out',
      `${tag}-leaf.pem`,
      '-days',
      '30',
      '-extfile',
      ext,
      '-extensions',
      'leaf',
    ],
    dir,
  );
  const rootPath = join(dir, `${tag}-root.pem`);
  const chainPath = join(dir, `${tag}-chain.pem`);
  writeFileSync(
    chainPath,
    readFileSync(join(dir, `${tag}-leaf.pem`), 'utf8') + readFileSync(join(dir, `${tag}-int.pem`), 'utf8'),
  );
  return {
    leafKeyPath: join(dir, `${tag}-leaf.key`),
    chainPath,
    rootPem: readFileSync(rootPath, 'utf8'),
    rootPath,
    x5c: [der64(join(dir, `${tag}-leaf.pem`)), der64(join(dir, `${tag}-int.pem`))],
    leafKey: createPrivateKey(readFileSync(join(dir, `${tag}-leaf.key`))),
  };
}
