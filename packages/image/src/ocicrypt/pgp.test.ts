// ocicrypt's `pgp` key protocol against Debian's gpg: gpg opens what pgpWrapper wraps (two recipients,
// one message), pgpUnwrapper opens what `gpg --encrypt` makes; a key that is not a recipient, a
// passphrase-protected key, garbage and a compressed message expanding past the options' limit are refused.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../testing/tools.js';
import { pgpUnwrapper, pgpWrapper, readPgpPrivateKeys, readPgpPublicKeys } from './pgp.js';

let home: string;
const OPTIONS = Buffer.from(
  JSON.stringify({
    symkey: 'a'.repeat(43) + '=',
    digest: 'sha256:00',
    cipheroptions: { nonce: 'b'.repeat(22) + '==' },
  }),
);

async function gpg(args: string[], passphrase = ''): Promise<string> {
  const r = await runTool(
    'gpg',
    ['--batch', '--yes', '--no-tty', '--pinentry-mode', 'loopback', '--passphrase', passphrase, ...args],
    { GNUPGHOME: home },
  );
  if (r.code !== 0) throw new Error(`gpg ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** An RSA primary key (certify, sign) with an RSA encryption subkey, as ocicrypt's Go OpenPGP reads them. */
async function makeKey(userId: string, passphrase = ''): Promise<void> {
  await gpg(['--quick-gen-key', userId, 'rsa2048', 'cert,sign', 'never'], passphrase);
  const fpr = (await gpg(['--with-colons', '--list-keys', userId]))
    .split('\n')
    .find((l) => l.startsWith('fpr:'))
    ?.split(':')[9];
  await gpg(['--quick-add-key', fpr ?? '', 'rsa2048', 'encr', 'never'], passphrase);
}

async function exported(args: string[], passphrase = ''): Promise<Buffer> {
  const out = join(home, `export-${Math.random().toString(36).slice(2)}`);
  await gpg(['--output', out, ...args], passphrase);
  return readFile(out);
}

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'gnupg-ocicrypt-'));
  await makeKey('Alice <alice@example.com>');
  await makeKey('Bob <bob@example.com>');
  await makeKey('Carol <carol@example.com>', 'carol-passphrase');
}, 120_000);

afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('pgp key protocol', () => {
  it('wraps one message for every recipient, which gpg decrypts', async () => {
    const keys = await readPgpPublicKeys(
      await exported(['--export', 'alice@example.com', 'bob@example.com']),
    );
    expect(keys).toHaveLength(2);
    const wrapped = await pgpWrapper(keys).wrap(OPTIONS);
    const file = join(home, 'wrapped.pgp');
    await writeFile(file, wrapped);
    expect((await gpg(['--list-packets', file])).match(/:pubkey enc packet:/g)).toHaveLength(2);
    await gpg(['--output', join(home, 'opened'), '--decrypt', file]);
    expect(await readFile(join(home, 'opened'))).toEqual(OPTIONS);
  });

  it('unwraps what gpg --encrypt makes, with the secret key gpg exports', async () => {
    await writeFile(join(home, 'options.json'), OPTIONS);
    const message = await exported([
      '--recipient',
      'alice@example.com',
      '--compress-algo',
      'none',
      '--encrypt',
      join(home, 'options.json'),
    ]);
    const alice = await readPgpPrivateKeys(await exported(['--export-secret-keys', 'alice@example.com']));
    const opened = await pgpUnwrapper(alice).unwrap(message);
    expect(Buffer.from(opened as Uint8Array)).toEqual(OPTIONS);

    // Armored keys are read too.
    const armored = await readPgpPrivateKeys(
      await exported(['--armor', '--export-secret-keys', 'alice@example.com']),
    );
    expect(Buffer.from((await pgpUnwrapper(armored).unwrap(message)) as Uint8Array)).toEqual(OPTIONS);

    // Bob is not a recipient: the attempt fails with openpgp's reason, nothing is returned.
    const bob = await readPgpPrivateKeys(await exported(['--export-secret-keys', 'bob@example.com']));
    const refused = await pgpUnwrapper(bob).unwrap(message);
    expect(refused).not.toBeInstanceOf(Uint8Array);
    expect((refused as { failed: string }).failed).toMatch(/decrypt/i);
  });

  it('refuses passphrase-protected secret keys, public keys as secret keys, and garbage', async () => {
    await expect(
      readPgpPrivateKeys(
        await exported(['--export-secret-keys', 'carol@example.com'], 'carol-passphrase'),
        'carol.gpg',
      ),
    ).rejects.toThrow(/^carol\.gpg: the OpenPGP secret key [0-9A-F]{16} is passphrase-protected/);
    await expect(
      readPgpPrivateKeys(await exported(['--export', 'alice@example.com']), 'pub.gpg'),
    ).rejects.toThrow(/^pub\.gpg: not an OpenPGP secret key/);
    await expect(readPgpPublicKeys(Buffer.from('not a key'), 'x')).rejects.toThrow(
      /^x: not an OpenPGP keyring/,
    );
    const alice = await readPgpPrivateKeys(await exported(['--export-secret-keys', 'alice@example.com']));
    await expect(pgpUnwrapper(alice).unwrap(Buffer.from('{"not":"pgp"}'))).rejects.toThrow(
      /^the pgp packet is not an OpenPGP message/,
    );
  });

  it('refuses a message whose compressed content expands past 64 KiB', async () => {
    await writeFile(join(home, 'zeros'), Buffer.alloc(1024 * 1024));
    const bomb = await exported([
      '--recipient',
      'alice@example.com',
      '--compress-algo',
      'zlib',
      '--compress-level',
      '9',
      '--encrypt',
      join(home, 'zeros'),
    ]);
    expect(bomb.byteLength).toBeLessThan(64 * 1024);
    const alice = await readPgpPrivateKeys(await exported(['--export-secret-keys', 'alice@example.com']));
    const result = await pgpUnwrapper(alice).unwrap(bomb);
    expect(result).not.toBeInstanceOf(Uint8Array);
    expect((result as { failed: string }).failed).toMatch(/decompressed/i);
  });
});
