// `image-policy encrypt` on a layer far larger than its memory: a 256 MiB uncompressed tar layer (random
// bytes, pushed from disk to Debian's docker-registry) is encrypted by the command in a child process
// (the CLI bundled with esbuild), whose peak RSS (VmHWM from /proc/self/status as it exits) must stay
// within half the layer's size (128 MiB) of the same command's peak on a 1 MiB layer: the layer streams
// through the cipher into a spool file. Holding the layer in memory (the earlier implementation) adds
// more than twice the layer's size (1.09 GB measured); a streaming run adds 40-66 MiB of buffers and
// heap the garbage collector has not yet returned, so the bound sits between the two. Debian's skopeo then decrypts the result with --decryption-key, and the layer it writes
// is the original tar, byte for byte.
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { MEDIA_TYPE, parseManifest, RegistryClient, requireTool } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MiB = 1024 * 1024;
const BIG_PAYLOAD = 256 * MiB;
const SMALL_PAYLOAD = 1 * MiB;
const dir = mkdtempSync(join(tmpdir(), 'broker-encrypt-stream-'));
let registry: RunningRegistry;
let bundle: string;
const plain = new Map<string, { digest: string; size: number }>();

async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return `sha256:${h.digest('hex')}`;
}

/** Pushes `repo:v1`: one uncompressed tar layer holding `payload` random bytes, built on disk. */
async function pushTarImage(repo: string, payload: number): Promise<void> {
  const name = repo.replace('/', '-');
  await pipeline(
    (async function* () {
      for (let left = payload; left > 0; left -= MiB) yield randomBytes(Math.min(MiB, left));
    })(),
    createWriteStream(join(dir, `${name}.bin`)),
  );
  const tarFile = join(dir, `${name}.tar`);
  execFileSync(requireTool('tar'), ['-cf', tarFile, '-C', dir, `${name}.bin`]);
  rmSync(join(dir, `${name}.bin`));
  const digest = await sha256File(tarFile);
  const size = statSync(tarFile).size;
  plain.set(repo, { digest, size });
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      rootfs: { type: 'layers', diff_ids: [digest] },
      config: {},
    }),
  );
  const client = new RegistryClient({ insecure: () => true });
  try {
    const to = { domain: registry.host, path: repo };
    const configDescriptor = await client.pushBlob(to, config);
    await client.pushBlob(to, { digest, size, open: () => createReadStream(tarFile) });
    const manifest = {
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.ociManifest,
      config: { mediaType: MEDIA_TYPE.ociConfig, digest: configDescriptor.digest, size: config.byteLength },
      layers: [{ mediaType: MEDIA_TYPE.ociLayer, digest, size }],
    };
    await client.putManifest(to, 'v1', Buffer.from(JSON.stringify(manifest)), MEDIA_TYPE.ociManifest);
  } finally {
    client.close();
  }
  rmSync(tarFile);
}

beforeAll(async () => {
  registry = await startDockerRegistry();
  await pushTarImage('small/plain', SMALL_PAYLOAD);
  await pushTarImage('big/plain', BIG_PAYLOAD);
  execFileSync(requireTool('openssl'), ['genrsa', '-out', join(dir, 'priv.pem'), '2048'], { stdio: 'pipe' });
  execFileSync(
    requireTool('openssl'),
    ['rsa', '-in', join(dir, 'priv.pem'), '-pubout', '-out', join(dir, 'pub.pem')],
    { stdio: 'pipe' },
  );
  // The command as a process of its own, reporting its peak RSS as it ends.
  const entry = join(dir, 'entry.ts');
  writeFileSync(
    entry,
    `import { readFileSync } from 'node:fs';
import { imagePolicyMain } from ${JSON.stringify(resolve(import.meta.dirname, '../packages/image-tools/src/cli.ts'))};
const code = await imagePolicyMain(process.argv.slice(2));
const hwm = /VmHWM:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
process.stderr.write(\`VmHWM \${hwm} kB\\n\`);
process.exitCode = code;
`,
  );
  bundle = join(dir, 'image-policy.mjs');
  await build({
    entryPoints: [entry],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    logLevel: 'silent',
    banner: {
      js: "import { createRequire as brokerCreateRequire } from 'node:module'; const require = brokerCreateRequire(import.meta.url);",
    },
  });
}, 240_000);

afterAll(async () => {
  await registry?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function runChild(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [bundle, ...args], {
      env: { PATH: process.env.PATH ?? '', TMPDIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', rej);
    child.on('exit', (code) => res({ code, stdout, stderr }));
  });
}

/** `image-policy encrypt` of `repo` (`…/plain`) into `…/encrypted` in a child; resolves to its peak RSS. */
async function encryptInChild(repo: string): Promise<number> {
  const r = await runChild([
    'encrypt',
    '--plain-http',
    '--encryption-key',
    `jwe:${join(dir, 'pub.pem')}`,
    `docker://${registry.host}/${repo}/plain:v1`,
    `docker://${registry.host}/${repo}/encrypted:v1`,
  ]);
  expect(r.stderr).toMatch(/^VmHWM \d+ kB\n$/);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^sha256:[0-9a-f]{64}\n$/);
  return Number(/VmHWM (\d+) kB/.exec(r.stderr)?.[1]) * 1024;
}

describe('image-policy encrypt on a 256 MiB layer', () => {
  it('stays within half the layer size of its peak RSS on a 1 MiB layer, and skopeo decrypts the result to the original tar', async () => {
    const baseline = await encryptInChild('small');
    const peak = await encryptInChild('big');
    expect(baseline).toBeGreaterThan(0);
    expect(peak - baseline).toBeLessThan(BIG_PAYLOAD / 2);
    const { digest: plainDigest, size: plainSize } = plain.get('big/plain') ?? { digest: '', size: 0 };

    // What was pushed: one encrypted tar layer of the same size, another digest; the spool is gone.
    const client = new RegistryClient({ insecure: () => true });
    try {
      const m = await client.getManifest({ domain: registry.host, path: 'big/encrypted' }, 'v1');
      const manifest = parseManifest(m.bytes, m.contentType);
      if (manifest.kind !== 'manifest') throw new Error('expected a manifest');
      expect(manifest.layers.map((l) => [l.mediaType, l.size])).toEqual([
        [`${MEDIA_TYPE.ociLayer}+encrypted`, plainSize],
      ]);
      expect(manifest.layers[0]?.digest).not.toBe(plainDigest);
    } finally {
      client.close();
    }
    expect(execFileSync('find', [dir, '-name', 'image-encrypt-*']).toString()).toBe('');

    execFileSync(
      requireTool('skopeo'),
      [
        'copy',
        '--src-tls-verify=false',
        '--decryption-key',
        join(dir, 'priv.pem'),
        `docker://${registry.host}/big/encrypted:v1`,
        `oci:${join(dir, 'decrypted')}:img`,
      ],
      { stdio: 'pipe', env: { ...process.env, HOME: dir } },
    );
    const index = JSON.parse(readFileSync(join(dir, 'decrypted/index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const decrypted = JSON.parse(
      readFileSync(join(dir, 'decrypted/blobs/sha256', (index.manifests[0]?.digest ?? '').slice(7)), 'utf8'),
    ) as { layers: { mediaType: string; digest: string }[] };
    expect(decrypted.layers.map((l) => [l.mediaType, l.digest])).toEqual([
      [MEDIA_TYPE.ociLayer, plainDigest],
    ]);
    expect(await sha256File(join(dir, 'decrypted/blobs/sha256', plainDigest.slice(7)))).toBe(plainDigest);
  }, 300_000);
});
