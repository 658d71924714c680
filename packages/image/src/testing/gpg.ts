/**
 * Debian's `gpg` as an independent producer of simple signatures in tests:
 * a throw-away GNUPGHOME (0700) with passphrase-less keys made in batch mode.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTool } from './tools.js';

export interface GpgHome {
  readonly home: string;
  readonly env: NodeJS.ProcessEnv;
  /** Makes a signing key and returns its fingerprint. `fakedTime` (gpg's `--faked-system-time`, e.g. `20200101T000000`) backdates it. */
  generateKey(userId: string, options?: { expire?: string; fakedTime?: string }): Promise<string>;
  /** `gpg --export FPR` (binary keyring). */
  exportKey(fingerprint: string): Promise<Buffer>;
  /** `gpg --sign` of `payload` (compressed one-pass signed literal, as skopeo writes). */
  sign(
    fingerprint: string,
    payload: Uint8Array,
    options?: { fakedTime?: string; uncompressed?: boolean; detached?: boolean },
  ): Promise<Buffer>;
  /** Imports the revocation certificate gpg made with the key, revoking it. */
  revoke(fingerprint: string): Promise<void>;
  close(): Promise<void>;
}

async function gpg(env: NodeJS.ProcessEnv, args: readonly string[]): Promise<string> {
  const r = await runTool(
    'gpg',
    ['--batch', '--yes', '--no-tty', '--pinentry-mode', 'loopback', ...args],
    env,
  );
  if (r.code !== 0) throw new Error(`gpg ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

export async function createGpgHome(): Promise<GpgHome> {
  const home = await mkdtemp(join(tmpdir(), 'gnupg-'));
  const env = { GNUPGHOME: home };
  const faked = (t: string | undefined) => (t !== undefined ? ['--faked-system-time', t] : []);
  return {
    home,
    env,
    async generateKey(userId, options = {}) {
      await gpg(env, [
        ...faked(options.fakedTime),
        '--passphrase',
        '',
        '--quick-gen-key',
        userId,
        'ed25519',
        'sign',
        options.expire ?? '1d',
      ]);
      const listing = await gpg(env, ['--with-colons', '--list-keys', userId]);
      const fpr = listing.split('\n').find((l) => l.startsWith('fpr:'));
      if (fpr === undefined) throw new Error(`no fingerprint for ${userId}`);
      return fpr.split(':')[9] as string;
    },
    async exportKey(fingerprint) {
      const out = join(home, `${fingerprint}.gpg`);
      await gpg(env, ['--output', out, '--export', fingerprint]);
      return readFile(out);
    },
    async sign(fingerprint, payload, options = {}) {
      const input = join(home, 'payload');
      const output = join(home, 'payload.sig');
      await writeFile(input, payload);
      await gpg(env, [
        ...faked(options.fakedTime),
        ...(options.uncompressed === true ? ['--compress-algo', 'none'] : []),
        '--local-user',
        fingerprint,
        '--output',
        output,
        options.detached === true ? '--detach-sign' : '--sign',
        input,
      ]);
      return readFile(output);
    },
    async revoke(fingerprint) {
      const cert = await readFile(join(home, 'openpgp-revocs.d', `${fingerprint}.rev`), 'utf8');
      // gpg guards the certificate against accidental import with a leading ':'.
      const armored = cert.replace(/^:-----BEGIN/m, '-----BEGIN');
      const file = join(home, 'revoke.asc');
      await writeFile(file, armored);
      await gpg(env, ['--import', file]);
    },
    async close() {
      await runTool('gpgconf', ['--kill', 'all'], env).catch(() => undefined);
      await rm(home, { recursive: true, force: true });
    },
  };
}
