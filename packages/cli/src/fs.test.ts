import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DirectoryError, makeDirectory, makeDirectorySync } from './fs.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-cli-fs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('makeDirectory', () => {
  it('creates every missing level with the mode, and accepts an existing folder', async () => {
    const deep = join(dir, 'a', 'b', 'c');
    await makeDirectory(deep, 0o700);
    expect(statSync(deep).isDirectory()).toBe(true);
    expect(statSync(join(dir, 'a')).mode & 0o777).toBe(0o700);
    await makeDirectory(deep);
    makeDirectorySync(join(deep, 'd'));
    expect(statSync(join(deep, 'd')).isDirectory()).toBe(true);
  });

  // Node's recursive mkdir never returns here (procfs answers ENOENT for a child of an existing folder).
  it.each([makeDirectory, async (p: string) => makeDirectorySync(p)])(
    'fails under /proc naming the path instead of spinning (%#)',
    async (make) => {
      const target = '/proc/broker-no-such/sub';
      const e = await Promise.resolve()
        .then(() => make(target))
        .catch((x: unknown) => x);
      expect(e).toBeInstanceOf(DirectoryError);
      expect((e as Error).message).toContain(target);
      expect((e as DirectoryError).code).toBe('ENOENT');
    },
  );

  it('refuses a file where a folder should be', async () => {
    writeFileSync(join(dir, 'file'), '');
    await expect(makeDirectory(join(dir, 'file'))).rejects.toThrow(/exists and is not a directory/);
    await expect(makeDirectory(join(dir, 'file', 'x'))).rejects.toThrow(join(dir, 'file', 'x'));
  });
});
