// Test-only: a directory updated the way kubelet updates a ConfigMap or Secret volume (its atomic
// writer): the files go into a fresh hidden `..<timestamp>` directory, a `..data_tmp` symlink to it is
// renamed over `..data`, each visible name is a symlink `<name> -> ..data/<name>`, and the previous
// timestamped directory is removed.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

let counter = 0;

/** Replaces the whole content of the mounted directory `dir` with `files` (name → content). */
export function kubeMount(dir: string, files: Readonly<Record<string, string | Uint8Array>>): void {
  mkdirSync(dir, { recursive: true });
  const previous = readdirSync(dir).filter((n) => n.startsWith('..') && n !== '..data');
  counter++;
  const stamp = `..2025_01_01_00_00_${String(counter).padStart(2, '0')}.${process.pid}`;
  mkdirSync(join(dir, stamp));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, stamp, name), content);
  symlinkSync(stamp, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const name of Object.keys(files)) {
    const link = join(dir, name);
    if (!existsSync(link)) symlinkSync(join('..data', name), link);
  }
  // Names no longer in the volume lose their symlink.
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.') || Object.hasOwn(files, name)) continue;
    if (lstatSync(join(dir, name)).isSymbolicLink()) unlinkSync(join(dir, name));
  }
  for (const old of previous) rmSync(join(dir, old), { recursive: true, force: true });
}

/** A self-signed P-256 certificate for 127.0.0.1 and its key, as PEM. */
export function selfSignedCert(dir: string, cn: string): { key: Buffer; cert: Buffer } {
  const keyPath = join(dir, `${cn}.key`);
  const certPath = join(dir, `${cn}.crt`);
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
      '2',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'pipe' },
  );
  return { key: readFileSync(keyPath), cert: readFileSync(certPath) };
}
