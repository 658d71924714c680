// Hostile layers against pullImage: a gzip bomb in place of a real layer (wrong digest) must not be
// decompressed at all, and layers that verify but expand past the configured caps are refused with
// the cap named. `ImagePullError.unpacked` says what had been written before the refusal.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import {
  type BuiltLayer,
  buildImage,
  buildLayer,
  buildTar,
  digestHex,
  ImagePullError,
  layerFromTar,
  openDirImage,
  type PullImageOptions,
  pullImage,
  pushImage,
  RegistryClient,
  writeDirImage,
} from '@broker/image';
import { FakeRegistry } from '@broker/image/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { imagePullMain } from './cli.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pull-limits-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A real layer: one file of random (incompressible) bytes, so the blob is about `bytes` long. */
async function randomLayer(bytes: number): Promise<BuiltLayer> {
  return buildLayer([{ name: 'data.bin', content: randomBytes(bytes) }], 'gzip');
}

/**
 * A gzip of a tar holding `expanded` zero bytes, padded with zeros (which gunzip ignores after the
 * last member) to exactly `size` bytes: it passes the size check and fails only the digest check.
 */
async function gzipBomb(size: number, expanded: number): Promise<Buffer> {
  const bomb = gzipSync(await buildTar([{ name: 'zeros', content: Buffer.alloc(expanded) }]), { level: 9 });
  if (bomb.byteLength > size) throw new Error(`bomb of ${bomb.byteLength} bytes does not fit in ${size}`);
  return Buffer.concat([bomb, Buffer.alloc(size - bomb.byteLength)]);
}

async function pullError(image: Parameters<typeof pullImage>[0], options: PullImageOptions = {}) {
  const e = await pullImage(image, join(dir, 'bundle'), options).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ImagePullError);
  return e as ImagePullError;
}

/** Nothing of a refused image stays in the bundle: no rootfs, no work or spool folder. */
async function expectEmptyBundle(): Promise<void> {
  expect(existsSync(join(dir, 'bundle', 'rootfs'))).toBe(false);
  expect(await readdir(join(dir, 'bundle'))).toEqual([]);
}

describe('a gzip bomb in place of a layer', () => {
  it('is refused on its digest before a byte is decompressed (dir: image)', async () => {
    const layer = await randomLayer(64 * 1024);
    const image = buildImage({ layers: [layer] });
    const src = join(dir, 'image');
    await writeDirImage(src, image);
    // About 1000 times its own size once decompressed: ~60 MiB from ~64 KiB.
    const bomb = await gzipBomb(layer.blob.byteLength, 60 * 1024 * 1024);
    await writeFile(join(src, digestHex(layer.digest)), bomb);

    const e = await pullError(await openDirImage(src));
    expect(e.message).toContain('blob digest mismatch');
    expect(e.message).toMatch(/^Errors happened when pulling image: Failed to async pull blob stream: /);
    expect(e.unpacked).toMatchObject({ bytes: 0, files: 0, directories: 0 });
    await expectEmptyBundle();
  });

  describe('from a registry', () => {
    let registry: FakeRegistry;
    beforeAll(async () => {
      registry = await FakeRegistry.start();
    });
    afterAll(() => registry.close());

    it('is refused on its digest before a byte is decompressed', async () => {
      const layers = [await randomLayer(16 * 1024), await randomLayer(64 * 1024)];
      const image = buildImage({ layers });
      const client = new RegistryClient({ insecure: () => true });
      try {
        await pushImage(client, { domain: registry.host, path: 'app/bomb' }, 'v1', image);
        const real = layers[1] as BuiltLayer;
        registry.blobs.set(real.digest, await gzipBomb(real.blob.byteLength, 60 * 1024 * 1024));
        // Sent as a network would: a puller that decompresses while downloading has time to write.
        registry.trickle.set(real.digest, 2048);
        const e = await pullError(`${registry.host}/app/bomb:v1`, { client });
        expect(e.detail).toContain(`blob digest mismatch: expected ${real.digest}`);
        // The first, genuine layer was unpacked; of the bomb, nothing.
        expect(e.unpacked).toMatchObject({ files: 1, bytes: 16 * 1024 });
        await expectEmptyBundle();
      } finally {
        client.close();
      }
    });
  });
});

describe('caps on what layers expand to', () => {
  async function dirImage(layers: BuiltLayer[]) {
    const src = join(dir, 'image');
    await writeDirImage(src, buildImage({ layers }));
    return openDirImage(src);
  }

  it('refuses a layer that verifies but expands past max-layer-bytes, naming the cap', async () => {
    // A bomb whose digest is right (a hostile image without a signature policy).
    const bomb = layerFromTar(await buildTar([{ name: 'zeros', content: Buffer.alloc(8 * 1024 * 1024) }]));
    expect(bomb.blob.byteLength).toBeLessThan(64 * 1024);
    const e = await pullError(await dirImage([bomb]), { limits: { maxLayerBytes: 1024 * 1024 } });
    expect(e.message).toBe(
      'Errors happened when pulling image: Failed to decode layer data stream: Failed to unpack layer: the expanded bytes pass the per-layer cap (max-layer-bytes = 1048576)',
    );
    expect(e.unpacked?.bytes).toBeLessThanOrEqual(1024 * 1024);
    await expectEmptyBundle();
  });

  it('refuses a layer with more entries than max-layer-entries', async () => {
    const files = Array.from({ length: 50 }, (_, i) => ({ name: `f${i}`, content: 'x' }));
    const e = await pullError(await dirImage([await buildLayer(files)]), { limits: { maxLayerEntries: 10 } });
    expect(e.detail).toContain('the tar entries pass the per-layer cap (max-layer-entries = 10)');
    expect(e.unpacked?.files).toBeLessThanOrEqual(10);
    await expectEmptyBundle();
  });

  it('counts all layers against max-image-entries and max-image-bytes', async () => {
    const files = (p: string) => Array.from({ length: 40 }, (_, i) => ({ name: `${p}${i}`, content: 'x' }));
    const layers = [await buildLayer(files('a')), await buildLayer(files('b'))];
    const entries = await pullError(await dirImage(layers), { limits: { maxImageEntries: 60 } });
    expect(entries.detail).toContain('the tar entries pass the per-image cap (max-image-entries = 60)');

    await rm(join(dir, 'image'), { recursive: true });
    const big = [await randomLayer(48 * 1024), await randomLayer(48 * 1024)];
    const bytes = await pullError(await dirImage(big), { limits: { maxImageBytes: 80 * 1024 } });
    expect(bytes.detail).toContain('the expanded bytes pass the per-image cap (max-image-bytes = 81920)');
    expect(bytes.unpacked?.files).toBe(1);
  });

  it('accepts an image within its caps, and refuses caps that are not positive integers', async () => {
    const image = await dirImage([await buildLayer([{ name: 'ok', content: 'fine' }])]);
    const result = await pullImage(image, join(dir, 'bundle'), {
      limits: { maxLayerBytes: 4096, maxLayerEntries: 1, maxImageBytes: 4096, maxImageEntries: 1 },
    });
    expect(result.stats.files).toBe(1);
    await expect(pullImage(image, join(dir, 'other'), { limits: { maxLayerEntries: 0 } })).rejects.toThrow(
      'max-layer-entries must be a positive integer, got 0',
    );
  });
});

describe('image-pull caps', () => {
  function io() {
    const err: string[] = [];
    const value = { stdout: () => {}, stderr: (t: string) => err.push(t), env: {} };
    return { io: value, err: () => err.join('') };
  }

  it('takes the caps as options and names the cap that refused the image', async () => {
    const src = join(dir, 'image');
    const files = Array.from({ length: 5 }, (_, i) => ({ name: `f${i}`, content: 'x' }));
    await writeDirImage(src, buildImage({ layers: [await buildLayer(files)] }));
    const t = io();
    const status = await imagePullMain(
      ['--no-progress', '--max-layer-entries', '3', `dir:${src}`, join(dir, 'bundle')],
      t.io,
    );
    expect(status).toBe(1);
    expect(t.err()).toContain('the tar entries pass the per-layer cap (max-layer-entries = 3)');
    expect(
      await imagePullMain(
        ['--no-progress', '--max-image-bytes=65536', `dir:${src}`, join(dir, 'b2')],
        io().io,
      ),
    ).toBe(0);
  });

  it('refuses a cap that is not a positive integer', async () => {
    for (const bad of ['0', '-1', '1e9', '8GiB', '99999999999999999999']) {
      const t = io();
      // `=` keeps a value that starts with '-' (`-1`) the option's value, as parseArgs reads it.
      expect(await imagePullMain([`--max-layer-bytes=${bad}`, 'dir:/nowhere', join(dir, 'b')], t.io)).toBe(2);
      expect(t.err()).toContain(`--max-layer-bytes takes a positive integer, got "${bad}"`);
    }
  });
});
