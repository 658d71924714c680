// The unsealing step on real folders: Kubernetes' projected secret layout, plain files, failures that
// keep the pointer, symlinks leading out, limits, and env values.
import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { serializePayload, vaultPayload } from './payload.js';
import { MAX_SEALED_SECRET_BYTES, unsignedSealedSecret } from './pointer.js';
import { tempDir } from './testing/helpers.js';
import { type EnvResult, type StepLogger, unsealEnv, unsealVolumes } from './volumes.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
});
afterEach(() => cleanup());

/** A pointer naming `uri` (unsigned: the fake unsealer below does not verify). */
const pointerTo = (uri: string) => unsignedSealedSecret(serializePayload(vaultPayload(uri)));

/** Unseals pointers made by `pointerTo` from a map; anything else fails. */
function fakeUnseal(secrets: Record<string, string>) {
  return vi.fn(async (pointer: string) => {
    const body = JSON.parse(Buffer.from(pointer.split('.')[2] as string, 'base64url').toString()) as {
      name: string;
    };
    const value = secrets[body.name];
    if (value === undefined) throw new Error(`Unseal Secret failed: KBS resource not found: ${body.name}`);
    return Buffer.from(value);
  });
}

function captureLog(): { logger: StepLogger; lines: string[] } {
  const lines: string[] = [];
  const put = (level: string) => (fields: object, msg: string) =>
    lines.push(JSON.stringify({ level, msg, ...fields }));
  return { logger: { info: put('info'), warn: put('warn'), debug: put('debug') }, lines };
}

/** A secret volume as kubelet's AtomicWriter lays it out. */
async function projectedVolume(root: string, files: Record<string, string>, mode = 0o644): Promise<string> {
  const ts = '..2024_09_30_02_55_58.2237819815';
  await mkdir(join(root, ts), { recursive: true });
  for (const [name, content] of Object.entries(files)) {
    await writeFile(join(root, ts, name), content, { mode });
    await symlink(`..data/${name}`, join(root, name));
  }
  await symlink(ts, join(root, '..data'));
  return ts;
}

describe('unsealVolumes', () => {
  it('replaces pointers in a projected secret volume and keeps the symlink layout', async () => {
    const vol = join(dir, 'sealed', 'creds');
    const ts = await projectedVolume(vol, {
      password: pointerTo('kbs:///default/app/password'),
      username: 'plain-user',
    });
    const unseal = fakeUnseal({ 'kbs:///default/app/password': 'hunter2' });
    const { logger, lines } = captureLog();
    const results = await unsealVolumes(join(dir, 'sealed'), { unseal, logger });

    expect(await readFile(join(vol, 'password'), 'utf8')).toBe('hunter2');
    expect(await readFile(join(vol, 'username'), 'utf8')).toBe('plain-user');
    expect(await readlink(join(vol, 'password'))).toBe('..data/password');
    expect(await readlink(join(vol, '..data'))).toBe(ts);
    expect((await lstat(join(vol, ts, 'password'))).isFile()).toBe(true);
    // Readable by its owner only: the pointer file was 0644, the secret is 0600.
    expect((await stat(join(vol, ts, 'password'))).mode & 0o777).toBe(0o600);
    // No temporary files are left behind.
    expect((await readdir(join(vol, ts))).sort()).toEqual(['password', 'username']);
    expect(results).toEqual([
      {
        path: join(dir, 'sealed', 'creds', 'password'),
        target: join(await realRoot(), 'creds', ts, 'password'),
        outcome: 'unsealed',
        resource: 'kbs:///default/app/password',
      },
    ]);
    expect(unseal).toHaveBeenCalledTimes(1);
    const log = lines.join('\n');
    expect(log).toContain('sealed secret unsealed');
    expect(log).toContain('kbs:///default/app/password');
    expect(log).not.toContain('hunter2');
  });

  it('keeps the pointer, byte for byte, when unsealing fails, and goes on with the other files', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const kept = `${pointerTo('kbs:///default/app/missing')}\n`;
    await writeFile(join(root, 'a-missing'), kept);
    await writeFile(join(root, 'b-present'), pointerTo('kbs:///default/app/present'));
    const { logger, lines } = captureLog();
    const results = await unsealVolumes(root, {
      unseal: fakeUnseal({ 'kbs:///default/app/present': 'ok' }),
      logger,
    });
    expect(await readFile(join(root, 'a-missing'), 'utf8')).toBe(kept);
    expect(await readFile(join(root, 'b-present'), 'utf8')).toBe('ok');
    expect(results.map((r) => [r.outcome, r.resource])).toEqual([
      ['failed', 'kbs:///default/app/missing'],
      ['unsealed', 'kbs:///default/app/present'],
    ]);
    expect(results[0]?.reason).toBe(
      'Unseal Secret failed: KBS resource not found: kbs:///default/app/missing',
    );
    expect(lines.find((l) => l.includes('sealed secret kept'))).toContain('kbs:///default/app/missing');
  });

  it('passes the pointer without the trailing newline of a file written with echo', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const pointer = pointerTo('kbs:///default/a/b');
    await writeFile(join(root, 'k'), `${pointer}\r\n`);
    const unseal = fakeUnseal({ 'kbs:///default/a/b': 'v' });
    await unsealVolumes(root, { unseal });
    expect(unseal).toHaveBeenCalledWith(pointer);
  });

  it('handles a volume mounted at the root itself, nested item paths and restrictive modes', async () => {
    const root = join(dir, 'sealed');
    const ts = await projectedVolume(root, { top: pointerTo('kbs:///r/t/top') }, 0o400);
    await mkdir(join(root, ts, 'sub'));
    await writeFile(join(root, ts, 'sub', 'deep'), pointerTo('kbs:///r/t/deep'));
    await symlink('..data/sub', join(root, 'sub'));
    const results = await unsealVolumes(root, {
      unseal: fakeUnseal({ 'kbs:///r/t/top': 'T', 'kbs:///r/t/deep': 'D' }),
    });
    expect(results.map((r) => r.outcome)).toEqual(['unsealed', 'unsealed']);
    expect(await readFile(join(root, 'top'), 'utf8')).toBe('T');
    expect(await readFile(join(root, 'sub', 'deep'), 'utf8')).toBe('D');
    expect((await stat(join(root, 'top'))).mode & 0o777).toBe(0o400);
  });

  it('does not follow symlinks out of the volume', async () => {
    const root = join(dir, 'sealed');
    const vol = join(root, 'vol');
    await mkdir(vol, { recursive: true });
    const outside = join(dir, 'outside-file');
    const text = pointerTo('kbs:///r/t/x');
    await writeFile(outside, text);
    await symlink(outside, join(vol, 'escape'));
    await symlink('/etc', join(vol, 'etc'));
    const { logger, lines } = captureLog();
    const unseal = fakeUnseal({ 'kbs:///r/t/x': 'secret' });
    const results = await unsealVolumes(root, { unseal, logger });
    expect(results).toEqual([]);
    expect(unseal).not.toHaveBeenCalled();
    expect(await readFile(outside, 'utf8')).toBe(text);
    expect(lines.filter((l) => l.includes('leads out of the volume'))).toHaveLength(2);
  });

  it('refuses a symlinked folder at the top that leads out of the root', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const shared = join(dir, 'shared', 'containers', 'abc-sealed-secret-target');
    const text = pointerTo('kbs:///r/t/k');
    await projectedVolume(shared, { key: text });
    await symlink(shared, join(root, 'creds'));
    const { logger, lines } = captureLog();
    const unseal = fakeUnseal({ 'kbs:///r/t/k': 'K' });
    const results = await unsealVolumes(root, { unseal, logger });
    expect(results).toEqual([]);
    expect(unseal).not.toHaveBeenCalled();
    expect(await readFile(join(root, 'creds', 'key'), 'utf8')).toBe(text);
    expect(lines.filter((l) => l.includes('leads out of the volume'))).toHaveLength(1);
  });

  it('follows a symlinked folder at the top that stays inside the root', async () => {
    const root = join(dir, 'sealed');
    await projectedVolume(join(root, 'real-volume'), { key: pointerTo('kbs:///r/t/k') });
    await symlink('real-volume', join(root, 'creds'));
    const results = await unsealVolumes(root, { unseal: fakeUnseal({ 'kbs:///r/t/k': 'K' }) });
    expect(results.map((r) => r.outcome)).toEqual(['unsealed']);
    expect(await readFile(join(root, 'creds', 'key'), 'utf8')).toBe('K');
  });

  it('gives the secret mode 0600, or the mode of a stricter pointer file, and keeps no special bits', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const modes = { a: 0o644, b: 0o640, c: 0o400, d: 0o4755, e: 0o000 };
    const secrets: Record<string, string> = {};
    for (const [name, mode] of Object.entries(modes)) {
      await writeFile(join(root, name), pointerTo(`kbs:///r/t/${name}`), { mode });
      await chmod(join(root, name), mode);
      secrets[`kbs:///r/t/${name}`] = name;
    }
    const results = await unsealVolumes(root, { unseal: fakeUnseal(secrets) });
    expect(results.map((r) => r.outcome)).toEqual(Array(5).fill('unsealed'));
    const got = Object.fromEntries(
      await Promise.all(Object.keys(modes).map(async (n) => [n, (await stat(join(root, n))).mode & 0o7777])),
    );
    expect(got).toEqual({ a: 0o600, b: 0o600, c: 0o400, d: 0o600, e: 0o000 });
  });

  it('unseals a file reached by two links once, and survives symlink loops', async () => {
    const root = join(dir, 'sealed');
    await mkdir(join(root, 'v'), { recursive: true });
    await writeFile(join(root, 'v', 'real'), pointerTo('kbs:///r/t/once'));
    await symlink('real', join(root, 'v', 'alias'));
    await symlink('.', join(root, 'v', 'loop'));
    const unseal = fakeUnseal({ 'kbs:///r/t/once': 'O' });
    const results = await unsealVolumes(root, { unseal });
    expect(unseal).toHaveBeenCalledTimes(1);
    expect(results).toHaveLength(1);
    expect(await readFile(join(root, 'v', 'real'), 'utf8')).toBe('O');
  });

  it('keeps a pointer file that is too large or not UTF-8', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    await writeFile(join(root, 'big'), `sealed.${'A'.repeat(MAX_SEALED_SECRET_BYTES + 5000)}`);
    await writeFile(join(root, 'bin'), Buffer.concat([Buffer.from('sealed.'), Buffer.from([0xff, 0xfe])]));
    const unseal = fakeUnseal({});
    const results = await unsealVolumes(root, { unseal });
    expect(results.map((r) => [r.outcome, r.reason])).toEqual([
      ['failed', `the pointer file is larger than ${MAX_SEALED_SECRET_BYTES + 4096} bytes`],
      ['failed', 'the pointer file is not UTF-8'],
    ]);
    expect(unseal).not.toHaveBeenCalled();
    expect((await readFile(join(root, 'bin')))[7]).toBe(0xff);
  });

  it('stops after maxEntries and below maxDepth', async () => {
    const root = join(dir, 'sealed');
    await mkdir(join(root, 'a', 'b', 'c'), { recursive: true });
    await writeFile(join(root, 'a', 'b', 'c', 'deep'), pointerTo('kbs:///r/t/deep'));
    for (let i = 0; i < 5; i++) await writeFile(join(root, `f${i}`), pointerTo(`kbs:///r/t/f${i}`));
    const unseal = fakeUnseal({});
    const shallow = await unsealVolumes(root, { unseal, maxDepth: 2 });
    expect(shallow.map((r) => r.resource)).not.toContain('kbs:///r/t/deep');
    expect(shallow).toHaveLength(5);
    const few = await unsealVolumes(root, { unseal, maxEntries: 3 });
    expect(few.length).toBeLessThan(3);
  });

  it('gives no result for a missing root', async () => {
    const { logger, lines } = captureLog();
    expect(await unsealVolumes(join(dir, 'absent'), { unseal: fakeUnseal({}), logger })).toEqual([]);
    expect(lines[0]).toContain('no sealed-secret volumes');
  });

  it.skipIf(process.getuid?.() === 0)('keeps the pointer when the folder is read-only', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    const text = pointerTo('kbs:///r/t/ro');
    await writeFile(join(root, 'ro'), text);
    const { chmod } = await import('node:fs/promises');
    await chmod(root, 0o555);
    try {
      const results = await unsealVolumes(root, { unseal: fakeUnseal({ 'kbs:///r/t/ro': 'x' }) });
      expect(results[0]?.outcome).toBe('failed');
      expect(await readFile(join(root, 'ro'), 'utf8')).toBe(text);
    } finally {
      await chmod(root, 0o755);
    }
  });
});

describe('unsealVolumes while the volume changes during the unseal call', () => {
  /** Unseals like `fakeUnseal`, but first runs `during` (as another process sharing the volume would). */
  function racingUnseal(secrets: Record<string, string>, during: () => Promise<void>) {
    const inner = fakeUnseal(secrets);
    return vi.fn(async (pointer: string) => {
      await during();
      return inner(pointer);
    });
  }

  it('writes nothing outside when the volume folder is swapped for a symlink during the call', async () => {
    const root = join(dir, 'sealed');
    const vol = join(root, 'vol');
    await mkdir(vol, { recursive: true });
    const pointer = pointerTo('kbs:///r/t/race');
    await writeFile(join(vol, 'key'), pointer);
    const outside = join(dir, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'key'), 'precious');
    const unseal = racingUnseal({ 'kbs:///r/t/race': 'PLAINTEXT' }, async () => {
      await rename(vol, join(root, 'moved'));
      await symlink(outside, vol);
    });
    const { logger, lines } = captureLog();
    const results = await unsealVolumes(root, { unseal, logger });
    expect(unseal).toHaveBeenCalledTimes(1);
    expect(await readFile(join(outside, 'key'), 'utf8')).toBe('precious');
    expect(await readdir(outside)).toEqual(['key']);
    expect(await readFile(join(root, 'moved', 'key'), 'utf8')).toBe(pointer);
    expect(await readdir(join(root, 'moved'))).toEqual(['key']);
    expect(results.map((r) => [r.outcome, r.reason])).toEqual([
      ['failed', 'the file was not replaced: the folder was moved or replaced during unsealing'],
    ]);
    expect(lines.join('\n')).not.toContain('PLAINTEXT');
  });

  it('writes nothing outside when a folder of a projected volume is swapped during the call', async () => {
    const root = join(dir, 'sealed');
    const vol = join(root, 'creds');
    const ts = await projectedVolume(vol, { password: pointerTo('kbs:///r/t/pw') });
    const outside = join(dir, 'etc');
    await mkdir(outside);
    const unseal = racingUnseal({ 'kbs:///r/t/pw': 'PLAINTEXT' }, async () => {
      await rename(join(vol, ts), join(vol, '..old'));
      await symlink(outside, join(vol, ts));
    });
    const results = await unsealVolumes(root, { unseal });
    expect(results.map((r) => r.outcome)).toEqual(['failed']);
    expect(await readdir(outside)).toEqual([]);
  });

  it('keeps the pointer when the pointer file itself is replaced during the call', async () => {
    const root = join(dir, 'sealed');
    await mkdir(root);
    await writeFile(join(root, 'key'), pointerTo('kbs:///r/t/swap'));
    const outside = join(dir, 'target');
    await writeFile(outside, 'precious');
    const unseal = racingUnseal({ 'kbs:///r/t/swap': 'PLAINTEXT' }, async () => {
      await rename(join(root, 'key'), join(root, 'key.old'));
      await symlink(outside, join(root, 'key'));
    });
    const results = await unsealVolumes(root, { unseal });
    expect(results.map((r) => [r.outcome, r.reason])).toEqual([
      ['failed', 'the file was not replaced: the pointer file was replaced during unsealing'],
    ]);
    expect(await readFile(outside, 'utf8')).toBe('precious');
    expect((await lstat(join(root, 'key'))).isSymbolicLink()).toBe(true);
  });
});

async function realRoot(): Promise<string> {
  const { realpath } = await import('node:fs/promises');
  return realpath(join(dir, 'sealed'));
}

describe('unsealEnv', () => {
  it('replaces sealed values, keeps the others and the order, and keeps a value that fails', async () => {
    const unseal = fakeUnseal({ 'kbs:///default/app/token': 'tok=en', 'kbs:///default/app/bin': '\u0000' });
    const results: EnvResult[] = [];
    const { logger, lines } = captureLog();
    const failing = pointerTo('kbs:///default/app/missing');
    const env = await unsealEnv(
      [
        'PATH=/bin',
        `TOKEN=${pointerTo('kbs:///default/app/token')}`,
        `OTHER=${failing}`,
        'NOEQUALS',
        `NUL=${pointerTo('kbs:///default/app/bin')}`,
        'EMPTY=',
        'NOTSEALED=sealed-but-not-a-pointer',
      ],
      { unseal, logger, results },
    );
    expect(env).toEqual([
      'PATH=/bin',
      'TOKEN=tok=en',
      `OTHER=${failing}`,
      'NOEQUALS',
      `NUL=${pointerTo('kbs:///default/app/bin')}`,
      'EMPTY=',
      'NOTSEALED=sealed-but-not-a-pointer',
    ]);
    expect(results.map((r) => [r.key, r.outcome])).toEqual([
      ['TOKEN', 'unsealed'],
      ['OTHER', 'failed'],
      ['NUL', 'failed'],
    ]);
    expect(results[2]?.reason).toBe('the secret contains a NUL byte');
    expect(lines.join('\n')).not.toContain('tok=en');
  });

  it('keeps a value whose secret is not UTF-8', async () => {
    const unseal = vi.fn(async () => Buffer.from([0xff]));
    const entry = `K=${pointerTo('kbs:///a/b/c')}`;
    expect(await unsealEnv([entry], { unseal })).toEqual([entry]);
  });
});
