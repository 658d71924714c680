import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GetResourceFailed } from '../errors.js';
import { tempDir } from '../testing/helpers.js';
import { ResourceProvider } from './resources.js';

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-image-res-'));
});
afterEach(async () => {
  await cleanup();
});

describe('image resources', () => {
  it('kbs:// resources are fetched once and kept under image-security/kbs/<sha256(uri)>', async () => {
    const asked: string[] = [];
    const p = new ResourceProvider({
      workDir: dir,
      getResource: async (uri) => {
        asked.push(uri);
        await new Promise((r) => setTimeout(r, 5));
        return Buffer.from(`content of ${uri}`);
      },
    });
    const uri = 'kbs:///default/policy-secret/policy';
    const [a, b] = await Promise.all([p.get(uri), p.get(uri)]);
    expect(Buffer.from(a).toString()).toBe(`content of ${uri}`);
    expect(Buffer.from(b).toString()).toBe(`content of ${uri}`);
    const file = join(dir, 'image-security/kbs', createHash('sha256').update(uri).digest('hex'));
    expect(readFileSync(file, 'utf8')).toBe(`content of ${uri}`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'image-security/kbs')).mode & 0o777).toBe(0o700);
    // A new provider (a restarted hub) uses the cached copy.
    const again = new ResourceProvider({ workDir: dir, getResource: async () => Buffer.from('fresh') });
    expect(Buffer.from(await again.get(uri)).toString()).toBe(`content of ${uri}`);
    expect(asked).toEqual([uri]);
  });

  it('failures are not cached, and say why without repeating the hub wording', async () => {
    let n = 0;
    const p = new ResourceProvider({
      workDir: dir,
      getResource: async () => {
        n++;
        if (n === 1) throw new GetResourceFailed('KBS resource not found: nope');
        return Buffer.from('ok');
      },
    });
    await expect(p.get('kbs:///a/b/c')).rejects.toThrow(
      /^Get resource failed: KBS resource not found: nope$/,
    );
    expect(Buffer.from(await p.get('kbs:///a/b/c')).toString()).toBe('ok');
  });

  it('paths and file:// read local files; other schemes are refused', async () => {
    const f = join(dir, 'policy.json');
    await writeFile(f, '{}');
    const p = new ResourceProvider({ workDir: dir, getResource: async () => new Uint8Array() });
    expect(Buffer.from(await p.get(f)).toString()).toBe('{}');
    expect(Buffer.from(await p.get(`file://${f}`)).toString()).toBe('{}');
    await expect(p.get(join(dir, 'missing'))).rejects.toThrow(/^Failed to read local file: /);
    await expect(p.get('https://example.com/policy.json')).rejects.toThrow(
      'Resource URI scheme `https` not supported',
    );
  });
});
