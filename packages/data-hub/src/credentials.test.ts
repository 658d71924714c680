import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isCredentialPathValid,
  KBS_RESOURCE_STORAGE_DIR,
  provisionCredentials,
  writeFileAtomic,
} from './credentials.js';
import { HubInitializationFailed } from './errors.js';
import { tempDir } from './testing/helpers.js';

describe('credential path rules', () => {
  it("follows upstream's cases", () => {
    const D = KBS_RESOURCE_STORAGE_DIR;
    expect(D).toBe('/run/confidential-containers/cdh/kbs');
    expect(isCredentialPathValid('/etc/config.toml')).toBe(false);
    expect(isCredentialPathValid(`${D}/../../config.toml`)).toBe(false);
    expect(isCredentialPathValid(`${D}/kms-credential/../../../config.toml`)).toBe(false);
    expect(isCredentialPathValid(`${D}/kms-credential/./config.toml`)).toBe(false);
    expect(isCredentialPathValid(`${D}/kms-credential/aliyun/config.toml`)).toBe(true);
  });

  it('is stricter than a string prefix', () => {
    const D = KBS_RESOURCE_STORAGE_DIR;
    expect(isCredentialPathValid(`${D}-other/x`)).toBe(false);
    expect(isCredentialPathValid(`${D}`)).toBe(false);
    expect(isCredentialPathValid(`${D}/`)).toBe(false);
    expect(isCredentialPathValid(`${D}/dir/`)).toBe(false);
    expect(isCredentialPathValid(`${D}/..`)).toBe(false);
    expect(isCredentialPathValid(`${D}/a/..hidden`)).toBe(true);
    expect(isCredentialPathValid('relative/path')).toBe(false);
    expect(isCredentialPathValid('/tmp/root/x', '/tmp/root')).toBe(true);
    expect(isCredentialPathValid('/tmp/root/x', '/tmp/root/')).toBe(true);
  });
});

describe('writing', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-cred-'));
  });
  afterEach(() => cleanup());

  it('writes atomically with mode 0600 and leaves no temporary file', async () => {
    const path = join(dir, 'secret');
    await writeFileAtomic(path, Buffer.from('one'));
    await writeFileAtomic(path, Buffer.from('two'));
    expect(await readFile(path, 'utf8')).toBe('two');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(['secret']);
  });

  it('removes the temporary file when the rename fails', async () => {
    const path = join(dir, 'adir');
    await mkdir(join(path, 'child'), { recursive: true }); // a non-empty folder cannot be replaced by a file
    await expect(writeFileAtomic(path, Buffer.from('x'))).rejects.toThrow();
    expect((await readdir(dir)).sort()).toEqual(['adir']);
  });

  it('fetches each credential and creates its folders', async () => {
    const root = join(dir, 'kbs');
    const asked: string[] = [];
    await provisionCredentials(
      [
        { resourceUri: 'kbs:///a/b/c', path: `${root}/x/y/c.json` },
        { resourceUri: 'kbs:///a/b/d', path: `${root}/d` },
      ],
      async (uri) => {
        asked.push(uri);
        return Buffer.from(uri);
      },
      root,
    );
    expect(asked).toEqual(['kbs:///a/b/c', 'kbs:///a/b/d']);
    expect(await readFile(`${root}/x/y/c.json`, 'utf8')).toBe('kbs:///a/b/c');
    expect(await readFile(`${root}/d`, 'utf8')).toBe('kbs:///a/b/d');
  });

  it('checks every path before fetching any', async () => {
    const root = join(dir, 'kbs');
    let fetched = 0;
    const err = await provisionCredentials(
      [
        { resourceUri: 'kbs:///a/b/c', path: `${root}/ok` },
        { resourceUri: 'kbs:///a/b/d', path: `${root}/../bad` },
      ],
      async () => {
        fetched++;
        return Buffer.from('x');
      },
      root,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubInitializationFailed);
    expect((err as Error).message).toBe(`init Hub failed: illegal path to put credential : ${root}/../bad`);
    expect(fetched).toBe(0);
    expect(existsSync(`${root}/ok`)).toBe(false);
  });

  it('refuses a folder inside the root that is a symlink leading out of it', async () => {
    const root = join(dir, 'kbs');
    const outside = join(dir, 'outside');
    await mkdir(root, { recursive: true });
    await mkdir(outside);
    await symlink(outside, join(root, 'link'));
    const err = await provisionCredentials(
      [{ resourceUri: 'kbs:///a/b/c', path: `${root}/link/secret` }],
      async () => Buffer.from('x'),
      root,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubInitializationFailed);
    expect((err as Error).message).toMatch(/leaves/);
    expect(await readdir(outside)).toEqual([]);
  });

  it('reports a fetch failure with upstream wording', async () => {
    const root = join(dir, 'kbs');
    const err = await provisionCredentials(
      [{ resourceUri: 'kbs:///a/b/c', path: `${root}/c` }],
      async () => {
        throw new Error('request unauthorized');
      },
      root,
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe(
      'init Hub failed: kbs client get resource failed: request unauthorized',
    );
  });

  it('does nothing (not even the folder) without credentials', async () => {
    const root = join(dir, 'kbs');
    await provisionCredentials([], async () => Buffer.from(''), root);
    expect(existsSync(root)).toBe(false);
  });
});
