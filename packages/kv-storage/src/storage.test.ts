import { mkdir, mkdtemp, readdir, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidStorageKey } from './keys.js';
import { LocalFsStorage, STALE_TEMP_FILE_MS } from './local-fs.js';
import { MemoryStorage } from './memory.js';
import { RoutedStorage } from './routed.js';
import type { KvStorage } from './types.js';

const enc = (s: string) => Buffer.from(s, 'utf8');
const dec = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('utf8'));

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kbs-storage-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const backends: [string, () => Promise<KvStorage>][] = [
  ['MemoryStorage', async () => new MemoryStorage()],
  ['LocalFsStorage', () => LocalFsStorage.open({ dirPath: dir })],
];

describe.each(backends)('%s common behaviour', (_name, open) => {
  it('sets, gets, lists and deletes per namespace', async () => {
    const s = await open();
    expect(await s.set('repository', 'default/key/one', enc('1'))).toBe(true);
    expect(await s.set('kbs', 'resource-policy.rego', enc('p'))).toBe(true);
    expect(dec(await s.get('repository', 'default/key/one'))).toBe('1');
    expect(await s.get('kbs', 'default/key/one')).toBeUndefined();
    expect(await s.list('repository')).toEqual(['default/key/one']);
    expect(await s.list('reference_value')).toEqual([]);
    expect(await s.delete('repository', 'default/key/one')).toBe(true);
    expect(await s.delete('repository', 'default/key/one')).toBe(false);
    expect(await s.get('repository', 'default/key/one')).toBeUndefined();
    await s.close();
  });

  it('keeps the existing value when overwrite is false', async () => {
    const s = await open();
    expect(await s.set('kbs', 'a.rego', enc('first'), { overwrite: false })).toBe(true);
    expect(await s.set('kbs', 'a.rego', enc('second'), { overwrite: false })).toBe(false);
    expect(dec(await s.get('kbs', 'a.rego'))).toBe('first');
    expect(await s.set('kbs', 'a.rego', enc('third'))).toBe(true);
    expect(dec(await s.get('kbs', 'a.rego'))).toBe('third');
  });

  it('does not let a caller change stored bytes through the returned or given array', async () => {
    const s = await open();
    const v = enc('abc');
    await s.set('repository', 'r/t/x', v);
    v[0] = 0x7a;
    const got = (await s.get('repository', 'r/t/x')) as Uint8Array;
    expect(dec(got)).toBe('abc');
    got[1] = 0x7a;
    expect(dec(await s.get('repository', 'r/t/x'))).toBe('abc');
  });
});

describe('MemoryStorage', () => {
  it('forgets a key once its ttl has passed', async () => {
    let now = 1_000;
    const s = new MemoryStorage({ now: () => now });
    await s.set('kbs_protocol_session', 'abc', enc('x'), { ttlMs: 500 });
    now = 1_499;
    expect(dec(await s.get('kbs_protocol_session', 'abc'))).toBe('x');
    expect(await s.list('kbs_protocol_session')).toEqual(['abc']);
    now = 1_500;
    expect(await s.get('kbs_protocol_session', 'abc')).toBeUndefined();
    expect(await s.list('kbs_protocol_session')).toEqual([]);
    expect(await s.delete('kbs_protocol_session', 'abc')).toBe(false);
  });

  it('lets overwrite=false write over an expired key', async () => {
    let now = 0;
    const s = new MemoryStorage({ now: () => now });
    await s.set('kbs', 'k', enc('old'), { ttlMs: 10 });
    now = 10;
    expect(await s.set('kbs', 'k', enc('new'), { overwrite: false })).toBe(true);
    expect(dec(await s.get('kbs', 'k'))).toBe('new');
  });

  it('rejects a non-positive ttl', async () => {
    await expect(new MemoryStorage().set('kbs', 'k', enc('x'), { ttlMs: 0 })).rejects.toThrow(RangeError);
  });
});

describe('LocalFsStorage', () => {
  it("writes trustee's flat layout, <dir>/repository/<repo>\\x2F<type>\\x2F<tag>", async () => {
    const s = await LocalFsStorage.open({ dirPath: dir });
    await s.set('repository', 'default/image-policy/policy.json', enc('{}'));
    expect(await readdir(join(dir, 'repository'))).toEqual(['default\\x2Fimage-policy\\x2Fpolicy.json']);
    expect(await readFile(join(dir, 'repository', 'default\\x2Fimage-policy\\x2Fpolicy.json'), 'utf8')).toBe(
      '{}',
    );
    await s.set('kbs_protocol_session', '0123abcd', enc('s'));
    expect(await readFile(join(dir, 'kbs_protocol_session', '0123abcd'), 'utf8')).toBe('s');
  });

  it('writes <dir>/repository/<repo>/<type>/<tag> directories with layout = nested', async () => {
    const s = await LocalFsStorage.open({ dirPath: dir, layout: 'nested' });
    await s.set('repository', 'default/image-policy/policy.json', enc('{}'));
    expect(await readFile(join(dir, 'repository', 'default', 'image-policy', 'policy.json'), 'utf8')).toBe(
      '{}',
    );
    expect(
      dec(
        await (await LocalFsStorage.open({ dirPath: dir })).get(
          'repository',
          'default/image-policy/policy.json',
        ),
      ),
    ).toBe('{}');
  });

  it('survives a restart: a new instance on the same directory sees every write', async () => {
    const a = await LocalFsStorage.open({ dirPath: dir });
    await a.set('repository', 'r/t/one', enc('1'));
    await a.set('reference_value', 'svn', enc('["1"]'));
    await a.delete('repository', 'r/t/one');
    await a.set('repository', 'r/t/two', enc('2'));
    await a.close();
    const b = await LocalFsStorage.open({ dirPath: dir });
    expect(await b.get('repository', 'r/t/one')).toBeUndefined();
    expect(dec(await b.get('repository', 'r/t/two'))).toBe('2');
    expect(dec(await b.get('reference_value', 'svn'))).toBe('["1"]');
  });

  it('leaves no temp files behind and hides those a crash left', async () => {
    const s = await LocalFsStorage.open({ dirPath: dir });
    for (let i = 0; i < 20; i++) await s.set('repository', 'r/t/k', enc(`v${i}`));
    await s.set('repository', 'r/t/k', enc('x'), { overwrite: false });
    expect(await readdir(join(dir, 'repository'))).toEqual(['r\\x2Ft\\x2Fk']);
    // What an interrupted write leaves: a hidden temp file next to the target.
    await writeFile(join(dir, 'repository', '.deadbeef.tmp'), 'partial');
    expect(await s.list('repository')).toEqual(['r/t/k']);
    expect(dec(await s.get('repository', 'r/t/k'))).toBe('v19');
  });

  it("removes at open the temp files of crashed writes, old enough not to be another process's", async () => {
    const keyDir = join(dir, 'repository', 'r', 't');
    await mkdir(keyDir, { recursive: true });
    await mkdir(join(dir, 'repository', '..data'), { recursive: true });
    const old = new Date(Date.now() - STALE_TEMP_FILE_MS - 60_000);
    const plant = async (path: string, age: Date) => {
      await writeFile(path, 'partial');
      await utimes(path, age, age);
    };
    await plant(join(keyDir, '.0123456789abcdef.tmp'), old);
    await mkdir(join(dir, 'kbs'));
    await plant(join(dir, 'kbs', '.fedcba9876543210.tmp'), old);
    // Another process's write in progress, a name of another pattern, a Kubernetes volume's internals.
    await plant(join(keyDir, '.aaaaaaaaaaaaaaaa.tmp'), new Date());
    await plant(join(keyDir, '.notours.tmp'), old);
    await plant(join(dir, 'repository', '..data', '.bbbbbbbbbbbbbbbb.tmp'), old);
    await writeFile(join(dir, 'outside.tmp'), 'x');
    const s = await LocalFsStorage.open({ dirPath: join(dir, 'store-unused') });
    expect(s.staleTempFilesRemoved).toBe(0);
    const opened = await LocalFsStorage.open({ dirPath: dir });
    expect(opened.staleTempFilesRemoved).toBe(2);
    expect((await readdir(keyDir)).sort()).toEqual(['.aaaaaaaaaaaaaaaa.tmp', '.notours.tmp']);
    expect(await readdir(join(dir, 'repository', '..data'))).toEqual(['.bbbbbbbbbbbbbbbb.tmp']);
    expect((await readdir(join(dir, 'repository'))).sort()).toEqual(['..data', 'r']);
    expect(await readdir(join(dir, 'kbs'))).toEqual([]);
  });

  it('never shows a reader a partial value while a writer replaces it', async () => {
    const s = await LocalFsStorage.open({ dirPath: dir, fsync: false });
    const size = 512 * 1024;
    const a = Buffer.alloc(size, 0x61);
    const b = Buffer.alloc(size, 0x62);
    await s.set('repository', 'r/t/big', a);
    let stop = false;
    const seen = new Set<string>();
    const reader = (async () => {
      while (!stop) {
        const v = Buffer.from((await s.get('repository', 'r/t/big')) as Uint8Array);
        expect(v.length).toBe(size);
        const first = v[0] as number;
        expect(v.every((x) => x === first)).toBe(true);
        seen.add(String.fromCharCode(first));
      }
    })();
    for (let i = 0; i < 30; i++) await s.set('repository', 'r/t/big', i % 2 === 0 ? b : a);
    stop = true;
    await reader;
    expect(seen.size).toBeGreaterThan(0);
  });

  it.each([
    ['../escape'],
    ['a/../../escape'],
    ['/etc/passwd'],
    ['a//b'],
    ['a/./b'],
    ['.hidden'],
    ['a/.b/c'],
    [''],
    ['a/b/'],
    ['a\\b'],
    ['a b'],
    ['%2e%2e/x'],
    ['x'.repeat(300)],
  ])('rejects the key %j, which could leave its namespace', async (key) => {
    const s = await LocalFsStorage.open({ dirPath: join(dir, 'root') });
    await expect(s.set('repository', key, enc('x'))).rejects.toBeInstanceOf(InvalidStorageKey);
    await expect(s.get('repository', key)).rejects.toBeInstanceOf(InvalidStorageKey);
    await expect(s.delete('repository', key)).rejects.toBeInstanceOf(InvalidStorageKey);
    expect(await readdir(dir)).toEqual(['root']);
  });

  it('reads a Kubernetes Secret volume mounted at <repo>/<type>', async () => {
    // kubelet's layout: <mount>/..<timestamp>/<key>, ..data -> ..<timestamp>, <key> -> ..data/<key>
    const mount = join(dir, 'repository', 'default', 'kbsres1');
    await mkdir(join(mount, '..2024_01_01_00_00_00.000'), { recursive: true });
    await writeFile(join(mount, '..2024_01_01_00_00_00.000', 'key1'), 'secret-1');
    await symlink('..2024_01_01_00_00_00.000', join(mount, '..data'));
    await symlink(join('..data', 'key1'), join(mount, 'key1'));
    const s = await LocalFsStorage.open({ dirPath: dir });
    expect(dec(await s.get('repository', 'default/kbsres1/key1'))).toBe('secret-1');
    expect(await s.list('repository')).toEqual(['default/kbsres1/key1']);
  });

  it("reads, lists and deletes trustee's flat a\\x2Fb\\x2Fc files", async () => {
    await mkdir(join(dir, 'repository'), { recursive: true });
    await writeFile(join(dir, 'repository', 'default\\x2Fkey\\x2Fold'), 'legacy');
    const s = await LocalFsStorage.open({ dirPath: dir });
    expect(dec(await s.get('repository', 'default/key/old'))).toBe('legacy');
    expect(await s.list('repository')).toEqual(['default/key/old']);
    expect(await s.set('repository', 'default/key/old', enc('x'), { overwrite: false })).toBe(false);
    expect(await s.delete('repository', 'default/key/old')).toBe(true);
    expect(await s.get('repository', 'default/key/old')).toBeUndefined();
  });

  it("reads the flat files trustee-operator's secret converter makes, beside a mounted Secret tree", async () => {
    const repo = join(dir, 'repository');
    await mkdir(join(repo, 'default', 'mounted'), { recursive: true });
    await writeFile(join(repo, 'default\\x2Fkbsres1\\x2Fkey1'), 'converted');
    await writeFile(join(repo, 'default', 'mounted', 'key'), 'mounted');
    const s = await LocalFsStorage.open({ dirPath: dir });
    expect(dec(await s.get('repository', 'default/kbsres1/key1'))).toBe('converted');
    expect(dec(await s.get('repository', 'default/mounted/key'))).toBe('mounted');
    expect((await s.list('repository')).sort()).toEqual(['default/kbsres1/key1', 'default/mounted/key']);
  });

  it('moves a nested key to the flat layout when it is written again, and lists and deletes both', async () => {
    const repo = join(dir, 'repository');
    await mkdir(join(repo, 'default', 'app'), { recursive: true });
    await writeFile(join(repo, 'default', 'app', 'old'), 'nested');
    await writeFile(join(repo, 'default', 'app', 'kept'), 'nested');
    const s = await LocalFsStorage.open({ dirPath: dir });
    expect(await s.set('repository', 'default/app/old', enc('x'), { overwrite: false })).toBe(false);
    expect(await s.set('repository', 'default/app/old', enc('flat'))).toBe(true);
    expect((await readdir(repo)).sort()).toEqual(['default', 'default\\x2Fapp\\x2Fold']);
    expect(await readdir(join(repo, 'default', 'app'))).toEqual(['kept']);
    expect(dec(await s.get('repository', 'default/app/old'))).toBe('flat');
    // The same key in both layouts (a read-only mount and a later write): listed once, the flat one read.
    await writeFile(join(repo, 'default\\x2Fapp\\x2Fkept'), 'flat');
    expect((await s.list('repository')).sort()).toEqual(['default/app/kept', 'default/app/old']);
    expect(dec(await s.get('repository', 'default/app/kept'))).toBe('flat');
    expect(await s.delete('repository', 'default/app/kept')).toBe(true);
    expect(await s.get('repository', 'default/app/kept')).toBeUndefined();
    // The directories the nested file left empty are gone; the namespace directory stays.
    expect(await readdir(repo)).toEqual(['default\\x2Fapp\\x2Fold']);
  });

  it('writes nested a key whose flat name would be longer than a file name may be', async () => {
    const s = await LocalFsStorage.open({ dirPath: dir });
    const key = `${'a'.repeat(200)}/${'b'.repeat(200)}`;
    await s.set('repository', key, enc('long'));
    expect(await readFile(join(dir, 'repository', 'a'.repeat(200), 'b'.repeat(200)), 'utf8')).toBe('long');
    expect(await s.list('repository')).toEqual([key]);
  });

  it('puts a namespace elsewhere when asked (legacy resource plugin dir_path)', async () => {
    const repo = join(dir, 'kbs-repository');
    const s = await LocalFsStorage.open({
      dirPath: join(dir, 'unused'),
      namespaceDirs: { repository: repo },
    });
    await s.set('repository', 'default/k/t', enc('v'));
    // trustee's old LocalFs resource backend wrote this tree: it stays nested.
    expect(await readFile(join(repo, 'default', 'k', 't'), 'utf8')).toBe('v');
    expect(s.layoutOf('repository')).toBe('nested');
  });

  it('treats a directory where a key would be as absent', async () => {
    const s = await LocalFsStorage.open({ dirPath: dir });
    await s.set('repository', 'a/b/c', enc('v'));
    expect(await s.get('repository', 'a/b')).toBeUndefined();
    expect(await s.get('repository', 'a/b/c/d')).toBeUndefined();
    expect(await s.delete('repository', 'a/b')).toBe(false);
  });
});

describe('RoutedStorage', () => {
  it('sends a namespace to its own backend', async () => {
    const main = new MemoryStorage();
    const sessions = new MemoryStorage();
    const r = new RoutedStorage(main, { kbs_protocol_session: sessions });
    await r.set('kbs_protocol_session', 's1', enc('x'));
    await r.set('repository', 'a/b/c', enc('y'));
    expect(await sessions.list('kbs_protocol_session')).toEqual(['s1']);
    expect(await main.list('kbs_protocol_session')).toEqual([]);
    expect(dec(await main.get('repository', 'a/b/c'))).toBe('y');
    await r.close();
  });
});
