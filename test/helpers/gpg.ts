// Keys made by Debian's gpg for the image tests, in a GNUPGHOME of the test's own.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { requireTool } from '@broker/image';

export interface GpgHome {
  /** The GNUPGHOME directory (mode 0700), under the test's directory. */
  readonly home: string;
  /** The environment gpg and skopeo run with: this GNUPGHOME, and HOME at the test's directory. */
  readonly env: NodeJS.ProcessEnv;
  /** Runs gpg non-interactively (loopback pinentry with `passphrase`, '' by default) in `dir`. */
  gpg(args: string[], passphrase?: string): Buffer;
  /**
   * An RSA key that gpg and skopeo's Go OpenPGP both handle: a signing primary and an encryption
   * subkey, protected by `passphrase` ('' for none).
   */
  makeKey(userId: string, passphrase?: string): void;
}

/** A fresh gpg home in `dir` (the directory gpg's output files are written to). */
export function gpgHome(dir: string): GpgHome {
  const home = join(dir, 'gnupg');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const env = { ...process.env, GNUPGHOME: home, HOME: dir };
  const gpg = (args: string[], passphrase = '') =>
    execFileSync(
      requireTool('gpg'),
      ['--batch', '--yes', '--no-tty', '--pinentry-mode', 'loopback', '--passphrase', passphrase, ...args],
      { cwd: dir, stdio: 'pipe', env },
    );
  return {
    home,
    env,
    gpg,
    makeKey(userId, passphrase = '') {
      gpg(['--quick-gen-key', userId, 'rsa2048', 'cert,sign', 'never'], passphrase);
      const fpr = gpg(['--with-colons', '--list-keys', userId], passphrase)
        .toString()
        .split('\n')
        .find((l) => l.startsWith('fpr:'))
        ?.split(':')[9];
      if (fpr === undefined) throw new Error(`gpg listed no fingerprint for ${userId}`);
      gpg(['--quick-add-key', fpr, 'rsa2048', 'encr', 'never'], passphrase);
    },
  };
}
