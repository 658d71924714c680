import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalJsonStorage, LocalJsonStorageError } from './local-json.js';

const enc = (s: string) => Buffer.from(s, 'utf8');
const dec = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('utf8'));

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kbs-local-json-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('LocalJsonStorage', () => {
  it("writes trustee's layout: one file per namespace, URL-safe base64 values with padding", async () => {
    const s = await LocalJsonStorage.open({ dirPath: join(dir, 'lj') });
    expect(await s.set('reference_value', 'snp_pcr11', Uint8Array.of(0xfb, 0xff, 0x01))).toBe(true);
    expect(await s.set('kbs', 'k', enc('a'))).toBe(true);
    const file = JSON.parse(await readFile(join(dir, 'lj', 'reference_value'), 'utf8'));
    expect(file).toEqual({ snp_pcr11: '-_8B' });
    expect(JSON.parse(await readFile(join(dir, 'lj', 'kbs'), 'utf8'))).toEqual({ k: 'YQ==' });
    // No temp file is left behind.
    expect((await readdir(join(dir, 'lj'))).sort()).toEqual(['kbs', 'reference_value']);
  });

  it('reads a file trustee wrote (padded or not) and keeps unrelated keys on change', async () => {
    await writeFile(join(dir, 'reference_value'), '{"a":"MTIzCg==","b":"MjM0Cg"}');
    const s = await LocalJsonStorage.open({ dirPath: dir });
    expect(dec(await s.get('reference_value', 'a'))).toBe('123\n');
    expect(dec(await s.get('reference_value', 'b'))).toBe('234\n');
    expect(await s.get('reference_value', 'c')).toBeUndefined();
    expect((await s.list('reference_value')).sort()).toEqual(['a', 'b']);
    expect(await s.delete('reference_value', 'a')).toBe(true);
    expect(await s.delete('reference_value', 'a')).toBe(false);
    expect(JSON.parse(await readFile(join(dir, 'reference_value'), 'utf8'))).toEqual({ b: 'MjM0Cg' });
  });

  it("reads trustee-operator's hand-written file: JSON entries are their own JSON text, lists by name", async () => {
    await writeFile(
      join(dir, 'reference_value'),
      '{"svn": {"expiration": "2026-01-01T00:00:00Z", "value": 1}, "b64": "MQ=="}',
    );
    const s = await LocalJsonStorage.open({ dirPath: dir });
    expect(JSON.parse(dec(await s.get('reference_value', 'svn')) as string)).toEqual({
      expiration: '2026-01-01T00:00:00Z',
      value: 1,
    });
    expect(dec(await s.get('reference_value', 'b64'))).toBe('1');
    await writeFile(
      join(dir, 'kbs'),
      '[{"name": "svn", "expired": "2026-01-01T00:00:00Z", "hash-value": []}]',
    );
    expect(await s.list('kbs')).toEqual(['svn']);
    expect(JSON.parse(dec(await s.get('kbs', 'svn')) as string).expired).toBe('2026-01-01T00:00:00Z');
  });

  it('an absent file is an empty namespace; overwrite false keeps the value', async () => {
    const s = await LocalJsonStorage.open({ dirPath: dir });
    expect(await s.list('repository')).toEqual([]);
    expect(await s.set('repository', 'r/t/x', enc('1'), { overwrite: false })).toBe(true);
    expect(await s.set('repository', 'r/t/x', enc('2'), { overwrite: false })).toBe(false);
    expect(dec(await s.get('repository', 'r/t/x'))).toBe('1');
  });

  it('applies concurrent changes one after the other, losing none', async () => {
    const s = await LocalJsonStorage.open({ dirPath: dir, fsync: false });
    await Promise.all(Array.from({ length: 50 }, (_, i) => s.set('reference_value', `k${i}`, enc(`${i}`))));
    expect((await s.list('reference_value')).length).toBe(50);
    await s.close();
  });

  it('a failed change does not stop the next one', async () => {
    const s = await LocalJsonStorage.open({ dirPath: dir });
    await writeFile(join(dir, 'kbs'), 'not json');
    await expect(s.set('kbs', 'a', enc('1'))).rejects.toThrow(/kbs is not JSON/);
    await writeFile(join(dir, 'kbs'), '{}');
    expect(await s.set('kbs', 'a', enc('1'))).toBe(true);
  });

  describe('hostile files and keys', () => {
    it.each([
      ['a list without names', '[{"value":1}]', /list entry 0 is not an object with a "name"/],
      ['a list of strings', '["a"]', /list entry 0 is not an object with a "name"/],
      ['null', 'null', /must hold a JSON object/],
      ['truncated JSON', '{"a":', /is not JSON/],
      ['a number value', '{"a":1}', /value of "a" is not URL-safe base64/],
      ['standard base64 with + and /', '{"a":"+/+/"}', /not URL-safe base64/],
      ['an impossible length', '{"a":"abcde"}', /not URL-safe base64/],
    ])('%s is a clear error', async (_what, content, re) => {
      await writeFile(join(dir, 'reference_value'), content);
      const s = await LocalJsonStorage.open({ dirPath: dir });
      await expect(s.get('reference_value', 'a')).rejects.toThrow(re);
    });

    it('refuses empty and oversized keys', async () => {
      const s = await LocalJsonStorage.open({ dirPath: dir });
      await expect(s.set('kbs', '', enc('x'))).rejects.toBeInstanceOf(LocalJsonStorageError);
      await expect(s.get('kbs', 'x'.repeat(1025))).rejects.toBeInstanceOf(LocalJsonStorageError);
    });

    it('keys like __proto__ are plain entries', async () => {
      const s = await LocalJsonStorage.open({ dirPath: dir });
      await s.set('kbs', '__proto__', enc('v'));
      expect(dec(await s.get('kbs', '__proto__'))).toBe('v');
      expect(await s.list('kbs')).toEqual(['__proto__']);
    });
  });
  it('removes at open the temp files of rewrites a crash interrupted, and nothing else', async () => {
    const lj = join(dir, 'lj');
    await mkdir(lj);
    await writeFile(join(lj, 'kbs'), JSON.stringify({ k: 'YQ==' }));
    await writeFile(join(lj, '.kbs.0123456789abcdef.tmp'), '{"k":');
    await writeFile(join(lj, '.reference_value.fedcba9876543210.tmp'), '');
    await writeFile(join(lj, '.kbs.tmp'), 'not ours');
    await writeFile(join(dir, '.kbs.0123456789abcdef.tmp'), 'outside the store');
    await mkdir(join(lj, '.kbs.aaaaaaaaaaaaaaaa.tmp'));
    const s = await LocalJsonStorage.open({ dirPath: lj });
    expect(s.staleTempFilesRemoved).toBe(2);
    expect((await readdir(lj)).sort()).toEqual(['.kbs.aaaaaaaaaaaaaaaa.tmp', '.kbs.tmp', 'kbs']);
    expect(await readdir(dir)).toContain('.kbs.0123456789abcdef.tmp');
    expect(dec(await s.get('kbs', 'k'))).toBe('a');
  });
});
