import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuildCompression, buildLayer, buildTar, type LayerEntry, layerFromTar } from './build.js';
import { digestOf } from './digest.js';
import { applyLayerStream, LayerError } from './layer.js';
import { layerCompression } from './manifest.js';
import { RootfsUnpacker } from './unpack.js';

let base: string;
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'unpack-'));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

let n = 0;
async function freshRoot(): Promise<string> {
  const root = join(base, `root-${n++}`);
  await mkdir(root);
  return root;
}

async function unpack(
  layers: readonly (readonly LayerEntry[])[],
  options: { root?: string; preserveOwnership?: boolean; compression?: BuildCompression } = {},
): Promise<string> {
  const root = options.root ?? (await freshRoot());
  const u = new RootfsUnpacker(root, { preserveOwnership: options.preserveOwnership ?? false });
  for (const entries of layers) {
    const l = await buildLayer(entries, options.compression ?? 'none');
    await applyLayerStream(u, Readable.from([l.blob]), layerCompression(l.mediaType), l.diffId);
  }
  await u.finish();
  return root;
}

async function unpackError(layers: readonly (readonly LayerEntry[])[], root?: string): Promise<LayerError> {
  try {
    await unpack(layers, root !== undefined ? { root } : {});
  } catch (e) {
    if (e instanceof LayerError) return e;
    throw e;
  }
  throw new Error('unpack succeeded');
}

const list = async (root: string) => (await readdir(root, { recursive: true })).sort();

describe('plain unpacking', () => {
  it('files, folders, symlinks, hard links, modes and times', async () => {
    const t = new Date('2020-01-02T03:04:05Z');
    const root = await unpack([
      [
        { name: 'etc/', type: 'directory', mode: 0o755 },
        { name: 'etc/hosts', content: '127.0.0.1 localhost\n', mode: 0o644, mtime: t },
        { name: './bin/tool', content: '#!/bin/sh\n', mode: 0o755 },
        { name: 'bin/alias', type: 'symlink', linkname: 'tool' },
        { name: 'bin/hard', type: 'link', linkname: 'bin/tool' },
        { name: '/abs/file', content: 'x' },
        { name: 'ro/', type: 'directory', mode: 0o555 },
        { name: 'ro/inside', content: 'y' },
      ],
    ]);
    expect(readFileSync(join(root, 'etc/hosts'), 'utf8')).toBe('127.0.0.1 localhost\n');
    expect(statSync(join(root, 'etc/hosts')).mtime.getTime()).toBe(t.getTime());
    expect(statSync(join(root, 'bin/tool')).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(root, 'bin/alias'))).toBe('tool');
    expect(statSync(join(root, 'bin/hard')).ino).toBe(statSync(join(root, 'bin/tool')).ino);
    expect(readFileSync(join(root, 'abs/file'), 'utf8')).toBe('x');
    expect(statSync(join(root, 'ro')).mode & 0o777).toBe(0o555);
    expect(readFileSync(join(root, 'ro/inside'), 'utf8')).toBe('y');
  });

  it('replaces files with folders and the other way round; merges folder over folder', async () => {
    const root = await unpack([
      [
        { name: 'a', content: 'file' },
        { name: 'b/', type: 'directory' },
        { name: 'b/x', content: 'x' },
        { name: 'c/', type: 'directory' },
        { name: 'c/keep', content: 'k' },
      ],
      [
        { name: 'a/', type: 'directory' },
        { name: 'a/y', content: 'y' },
        { name: 'b', content: 'now a file' },
        { name: 'c/', type: 'directory', mode: 0o700 },
        { name: 'c/new', content: 'n' },
      ],
    ]);
    expect(readFileSync(join(root, 'a/y'), 'utf8')).toBe('y');
    expect(readFileSync(join(root, 'b'), 'utf8')).toBe('now a file');
    expect(await list(join(root, 'c'))).toEqual(['keep', 'new']);
    expect(statSync(join(root, 'c')).mode & 0o777).toBe(0o700);
  });

  it('keeps archive order for entries of one layer written in the background', async () => {
    const root = await unpack([
      [
        { name: 'x', content: 'first' },
        { name: 'x', content: 'second' },
        { name: 'f', content: 'a file' },
        { name: 'f/', type: 'directory' },
        { name: 'f/g', content: 'g' },
        ...Array.from({ length: 100 }, (_, i) => ({ name: `many/${i}`, content: String(i) })),
        { name: 'many/50', content: 'again' },
        { name: 'link-to-99', type: 'link' as const, linkname: 'many/99' },
      ],
    ]);
    expect(readFileSync(join(root, 'x'), 'utf8')).toBe('second');
    expect(readFileSync(join(root, 'f/g'), 'utf8')).toBe('g');
    expect(readFileSync(join(root, 'many/50'), 'utf8')).toBe('again');
    expect(readFileSync(join(root, 'many/7'), 'utf8')).toBe('7');
    expect(statSync(join(root, 'link-to-99')).ino).toBe(statSync(join(root, 'many/99')).ino);
  });

  it('drops setuid bits unless ownership is kept', async () => {
    const entries: LayerEntry[] = [{ name: 'suid', content: 'x', mode: 0o4755, uid: 0, gid: 0 }];
    const dropped = await unpack([entries], { preserveOwnership: false });
    expect(statSync(join(dropped, 'suid')).mode & 0o7777).toBe(0o755);
    if (process.getuid?.() === 0) {
      const kept = await unpack([[{ name: 'suid', content: 'x', mode: 0o4755, uid: 1234, gid: 5678 }]], {
        preserveOwnership: true,
      });
      const st = statSync(join(kept, 'suid'));
      expect(st.mode & 0o7777).toBe(0o4755);
      expect([st.uid, st.gid]).toEqual([1234, 5678]);
    }
  });

  it('skips device nodes and FIFOs', async () => {
    const root = await freshRoot();
    const u = new RootfsUnpacker(root, { preserveOwnership: false });
    const l = await buildLayer(
      [
        { name: 'dev/', type: 'directory' },
        { name: 'dev/null', type: 'character-device' },
        { name: 'dev/sda', type: 'block-device' },
        { name: 'pipe', type: 'fifo' },
        { name: 'ok', content: 'ok' },
      ],
      'none',
    );
    await applyLayerStream(u, Readable.from([l.blob]), 'none', l.diffId);
    expect(await list(root)).toEqual(['dev', 'ok']);
    expect(u.stats.skipped).toBe(3);
  });
});

describe('hostile entries never leave the root', () => {
  let outside: string;
  beforeAll(async () => {
    outside = join(base, 'outside');
    await mkdir(outside, { recursive: true });
    await writeFile(join(outside, 'secret'), 'host secret');
  });

  it('.. in a name is refused', async () => {
    const e = await unpackError([[{ name: '../escape', content: 'x' }]]);
    expect(e.stage).toBe('unpack');
    expect(e.message).toBe('Illegal entry name in the layer tar: ../escape');
    const e2 = await unpackError([[{ name: 'a/../../escape', content: 'x' }]]);
    expect(e2.message).toBe('Illegal entry name in the layer tar: a/../../escape');
  });

  it('an absolute symlink is followed inside the root', async () => {
    const root = await unpack([
      [
        { name: 'evil', type: 'symlink', linkname: outside },
        { name: 'evil/pwned', content: 'x' },
      ],
    ]);
    expect(existsSync(join(outside, 'pwned'))).toBe(false);
    expect(readFileSync(join(root, outside, 'pwned'), 'utf8')).toBe('x');
  });

  it('a relative symlink with .. stops at the root, also across layers', async () => {
    const root = await unpack([
      [{ name: 'a/b/up', type: 'symlink', linkname: '../../../../../../../../..' }],
      [{ name: 'a/b/up/tmp/pwned', content: 'x' }],
    ]);
    expect(existsSync('/tmp/pwned')).toBe(false);
    expect(readFileSync(join(root, 'tmp/pwned'), 'utf8')).toBe('x');
  });

  it('a symlink as the final component is replaced, not written through', async () => {
    const root = await unpack([
      [{ name: 'target', type: 'symlink', linkname: join(outside, 'secret') }],
      [{ name: 'target', content: 'new' }],
    ]);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret');
    expect(lstatSync(join(root, 'target')).isFile()).toBe(true);
  });

  it('symlink loops fail instead of hanging', async () => {
    const e = await unpackError([
      [
        { name: 'l1', type: 'symlink', linkname: 'l2' },
        { name: 'l2', type: 'symlink', linkname: 'l1' },
        { name: 'l1/x', content: 'x' },
      ],
    ]);
    expect(e.message).toMatch(/too many levels of symbolic links/);
  });

  it('hard links resolve inside the root and never reach host files', async () => {
    const viaAbs = await unpackError([[{ name: 'h', type: 'link', linkname: join(outside, 'secret') }]]);
    expect(viaAbs.message).toMatch(/does not exist/);
    const viaLink = await unpackError([
      [
        { name: 'd', type: 'symlink', linkname: outside },
        { name: 'h', type: 'link', linkname: 'd/secret' },
      ],
    ]);
    expect(viaLink.message).toMatch(/does not exist/);
    const dotdot = await unpackError([[{ name: 'h', type: 'link', linkname: '../../secret' }]]);
    expect(dotdot.message).toBe('Illegal entry name in the layer tar: ../../secret');
    const dir = await unpackError([
      [
        { name: 'd/', type: 'directory' },
        { name: 'h', type: 'link', linkname: 'd' },
      ],
    ]);
    expect(dir.message).toMatch(/hard link h to a directory/);
    // A link to a file the image itself put there (through its own symlink) is fine.
    const root = await unpack([
      [
        { name: `${outside.slice(1)}/secret`, content: 'image file' },
        { name: 'd', type: 'symlink', linkname: outside },
        { name: 'h', type: 'link', linkname: 'd/secret' },
      ],
    ]);
    expect(readFileSync(join(root, 'h'), 'utf8')).toBe('image file');
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret');
  });

  it('a whiteout through a symlink only removes inside the root', async () => {
    await unpack([[{ name: 'd', type: 'symlink', linkname: outside }, { name: 'd/.wh.secret' }]]);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret');
    const opaque = await unpack([
      [{ name: 'd', type: 'symlink', linkname: outside }, { name: 'd/.wh..wh..opq' }],
    ]);
    expect(existsSync(join(outside, 'secret'))).toBe(true);
    expect(existsSync(join(opaque, outside))).toBe(true);
  });
});

describe('whiteouts', () => {
  it('.wh.<name> removes lower files and folders only', async () => {
    const root = await unpack([
      [
        { name: 'a/b', content: 'b' },
        { name: 'a/c', content: 'c' },
        { name: 'gone/deep/file', content: 'x' },
        { name: 'same', content: 'lower' },
      ],
      [
        { name: 'a/.wh.b' },
        { name: '.wh.gone' },
        { name: 'same', content: 'upper' },
        { name: '.wh.same' }, // after its own file in the same layer: the file stays
        { name: '.wh.missing' },
      ],
    ]);
    expect(await list(root)).toEqual(['a', 'a/c', 'same']);
    expect(readFileSync(join(root, 'same'), 'utf8')).toBe('upper');
  });

  it('an opaque folder hides lower children wherever the marker is in the layer', async () => {
    const root = await unpack([
      [
        { name: 'd/x', content: 'x' },
        { name: 'd/sub/y', content: 'y' },
        { name: 'other', content: 'o' },
      ],
      [
        { name: 'd/before', content: 'b' },
        { name: 'd/sub/z', content: 'z' },
        { name: 'd/.wh..wh..opq' },
        { name: 'd/after', content: 'a' },
      ],
    ]);
    expect(await list(root)).toEqual(['d', 'd/after', 'd/before', 'd/sub', 'd/sub/z', 'other']);
  });

  it('markers are never written and AUFS metadata is ignored', async () => {
    const root = await unpack([
      [{ name: 'x/.wh..wh..opq' }, { name: '.wh..wh.plnk/1', content: '' }, { name: 'f', content: 'f' }],
    ]);
    expect(await list(root)).toEqual(['f', 'x']);
  });

  it('a whiteout of the root or an empty name is refused', async () => {
    const e = await unpackError([[{ name: '.wh.' }]]);
    expect(e.message).toMatch(/^Convert whiteout file failed/);
  });
});

describe('the layer stream', () => {
  const entries: LayerEntry[] = [
    { name: 'big', content: Buffer.alloc(300_000, 7) },
    { name: 'small', content: 'hello' },
  ];

  for (const c of ['none', 'gzip', 'gzip-multi', 'zstd'] as const) {
    it(`${c} layers unpack and match their diff_id`, async () => {
      const root = await unpack([entries], { compression: c });
      expect(readFileSync(join(root, 'small'), 'utf8')).toBe('hello');
      expect(statSync(join(root, 'big')).size).toBe(300_000);
    });
  }

  it('a diff_id mismatch fails after the stream, with upstream wording', async () => {
    const l = await buildLayer(entries, 'gzip');
    const wrong = digestOf(Buffer.from('other'));
    const u = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
    const e = await applyLayerStream(u, Readable.from([l.blob]), 'gzip', wrong).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LayerError);
    expect((e as LayerError).stage).toBe('diffid');
    expect((e as LayerError).message).toBe(`unequal uncompressed digest ${l.diffId} config diff_id ${wrong}`);
  });

  it('corrupt and truncated data fail as decode errors', async () => {
    const l = await buildLayer(entries, 'gzip');
    const cases = [
      l.blob.subarray(0, l.blob.byteLength - 100), // truncated gzip
      Buffer.concat([l.blob.subarray(0, 30), Buffer.alloc(50, 0xff), l.blob.subarray(80)]), // corrupt deflate
      gzipSync(Buffer.alloc(1024, 0x41)), // not a tar
      gzipSync((await buildTar(entries)).subarray(0, 600)), // tar truncated inside an entry
    ];
    for (const blob of cases) {
      const u = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
      const e = await applyLayerStream(u, Readable.from([blob]), 'gzip', l.diffId).catch((x: unknown) => x);
      expect(e, String(e)).toBeInstanceOf(LayerError);
      expect(['decode', 'diffid']).toContain((e as LayerError).stage);
    }
  });

  it('a failing download is reported as such, not as the tar error it causes', async () => {
    const l = await buildLayer(entries, 'gzip');
    const source = new Readable({
      read() {
        this.push(l.blob.subarray(0, 1000));
        this.destroy(new Error('connection reset'));
      },
    });
    const u = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
    const e = (await applyLayerStream(u, source, 'gzip', l.diffId).catch((x: unknown) => x)) as LayerError;
    expect(e.stage).toBe('fetch');
    expect(e.message).toBe('connection reset');
  });

  it('an archive that stops on an entry boundary without padding or trailer is complete (as Go reads it)', async () => {
    const longName = `${'d'.repeat(120)}/last.txt`; // a PAX record carries the path
    const full = await buildTar([
      { name: 'first', content: 'one' },
      { name: longName, content: 'xyz' },
    ]);
    // Cut the trailer and the last entry's padding: the archive ends right after "xyz".
    const end = full.lastIndexOf(Buffer.from('xyz')) + 3;
    const cut = full.subarray(0, end);
    const u = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
    await applyLayerStream(u, Readable.from([cut]), 'none', digestOf(cut));
    expect(readFileSync(join(u.root, longName), 'utf8')).toBe('xyz');
    // Ending right after a header of an empty file is complete too.
    const header = (await buildTar([{ name: 'empty', content: '' }])).subarray(0, 512);
    const v = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
    await applyLayerStream(v, Readable.from([header]), 'none', digestOf(header));
    expect(existsSync(join(v.root, 'empty'))).toBe(true);
    // Ending inside the data is not.
    const inside = full.subarray(0, end - 1);
    const w = new RootfsUnpacker(await freshRoot(), { preserveOwnership: false });
    const e = (await applyLayerStream(w, Readable.from([inside]), 'none', digestOf(inside)).catch(
      (x: unknown) => x,
    )) as LayerError;
    expect(e.stage).toBe('decode');
    expect(e.message).toBe('Unexpected end of data');
  });

  it('the zstd and plain media types are recognised, others are not', () => {
    expect(layerFromTar(Buffer.alloc(1024), 'zstd').mediaType).toBe(
      'application/vnd.oci.image.layer.v1.tar+zstd',
    );
    expect(() => layerCompression('application/vnd.oci.image.layer.v1.tar+bzip2')).toThrow(
      'unhandled media type: application/vnd.oci.image.layer.v1.tar+bzip2',
    );
  });
});

describe('a full disk', () => {
  it('fails with the unpack chain (needs root to mount a small tmpfs)', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs and needs root');
    const mnt = join(base, 'small-fs');
    await mkdir(mnt);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', mnt]);
    try {
      const root = join(mnt, 'root');
      await mkdir(root);
      const e = await unpackError([[{ name: 'big', content: Buffer.alloc(2 * 1024 * 1024, 1) }]], root);
      expect(e.stage).toBe('unpack');
      expect(e.message).toMatch(
        /^Failed to unpack layer to destination \(big: ENOSPC: no space left on device/,
      );
      // Many small files (written in the background) fail the same way.
      const small = join(mnt, 'small');
      await mkdir(small);
      const files = Array.from({ length: 40 }, (_, i) => ({
        name: `f${i}`,
        content: Buffer.alloc(100_000, i),
      }));
      const e2 = await unpackError([files], small);
      expect(e2.stage).toBe('unpack');
      expect(e2.message).toMatch(
        /^Failed to unpack layer to destination \(f\d+: ENOSPC: no space left on device/,
      );
    } finally {
      execFileSync('umount', [mnt]);
    }
  });
});
