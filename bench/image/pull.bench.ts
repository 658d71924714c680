/**
 * Pull + verify + unpack of a multi-layer image (> 200 MB uncompressed, half
 * incompressible random data, half compressible text in many small files)
 * from a local docker-registry, against Debian's `skopeo copy docker://…
 * oci:DIR` followed by `umoci raw unpack` on the same image in the same run.
 *
 * Our side runs in a child process (this same module, started with
 * BROKER_IMAGE_BENCH_CHILD set) so that its peak RSS is its own. It checks a
 * sigstore signature under a `sigstoreSigned` policy, every blob digest and
 * every diff_id. The image is built once and cached in dist/bench-cache.
 */
import { execFileSync } from 'node:child_process';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type BuiltLayer,
  buildImage,
  buildLayer,
  type LayerEntry,
  writeDirImage,
} from '../../packages/image/src/build.js';
import { digestHex } from '../../packages/image/src/digest.js';
import { type ImageManifest, MEDIA_TYPE, parseManifest } from '../../packages/image/src/manifest.js';
import { parsePolicy } from '../../packages/image/src/policy.js';
import { pullImage } from '../../packages/image/src/pull.js';
import { RegistryClient, type Repository } from '../../packages/image/src/registry/client.js';
import { requireTool } from '../../packages/image/src/registry/local-registry.js';
import { pushSigstoreSignatures } from '../../packages/image/src/registry/signatures.js';
import { createSigstoreSignature } from '../../packages/image/src/sigstore.js';
import { startDockerRegistry } from '../../packages/image/src/testing/index.js';
import { timeCommand } from '../helpers.js';

const CHILD_ENV = 'BROKER_IMAGE_BENCH_CHILD';
/**
 * Pulls run inside the confidential data hub, which broker-guest starts with
 * these V8 flags (`execArgv` of broker-guest in scripts/build.mjs); the child
 * runs with them so that its peak RSS is the hub's. With Node's default 16 MiB
 * semi-spaces the young generation keeps the wrappers of spent stream buffers
 * alive long enough for their backing stores to pile up (~25 MB more).
 */
const DATA_HUB_V8_FLAGS = ['--max-semi-space-size=1'];
const MB = 1024 * 1024;

/** A deterministic pseudo-random stream (so the cached image is reproducible). */
function pseudoRandom(seed: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let block = createHash('sha256').update(seed).digest();
  for (let off = 0; off < size; off += block.length) {
    block.copy(out, off);
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

const WORDS = [
  'attestation',
  'broker',
  'container',
  'policy',
  'signature',
  'layer',
  'registry',
  'digest',
  'enclave',
  'measurement',
];

function textFile(i: number, size: number): string {
  let s = '';
  let k = i;
  while (s.length < size) {
    s += `${WORDS[k % WORDS.length]} ${k} ${WORDS[(k * 7) % WORDS.length]}\n`;
    k += 3;
  }
  return s.slice(0, size);
}

export async function buildBenchImage(dir: string): Promise<void> {
  const layers: BuiltLayer[] = [];
  // Two layers of incompressible data in 1 MiB files.
  for (const l of [0, 1]) {
    const entries: LayerEntry[] = [{ name: `data${l}/`, type: 'directory' }];
    for (let i = 0; i < 60; i++)
      entries.push({ name: `data${l}/blob-${i}.bin`, content: pseudoRandom(`layer${l}-${i}`, MB) });
    layers.push(await buildLayer(entries, 'gzip'));
  }
  // Two layers of compressible text in many small files.
  for (const l of [2, 3]) {
    const entries: LayerEntry[] = [{ name: `text${l}/`, type: 'directory' }];
    for (let d = 0; d < 50; d++) {
      entries.push({ name: `text${l}/dir${d}/`, type: 'directory' });
      for (let i = 0; i < 100; i++)
        entries.push({
          name: `text${l}/dir${d}/file-${i}.txt`,
          content: textFile(l * 100000 + d * 100 + i, 10_000 + ((i * 37) % 5000)),
        });
    }
    // gzip throughout: Debian's umoci 0.4 cannot read zstd layers.
    layers.push(await buildLayer(entries, 'gzip'));
  }
  await writeDirImage(dir, buildImage({ layers, cmd: ['/bin/sh'] }));
}

/** Pushes a `dir:` image (blobs by hex name) to a registry; returns the manifest digest. */
export async function pushDirImage(
  client: RegistryClient,
  dir: string,
  repo: Repository,
  tag: string,
): Promise<string> {
  const manifest = await readFile(join(dir, 'manifest.json'));
  const parsed = parseManifest(manifest);
  if (parsed.kind !== 'manifest') throw new Error('bench image is not a manifest');
  for (const d of [...parsed.layers, parsed.config])
    await client.pushBlob(repo, await readFile(join(dir, digestHex(d.digest))));
  return client.putManifest(repo, tag, manifest, MEDIA_TYPE.ociManifest);
}

interface ChildResult {
  readonly ms: number;
  readonly maxRssKiB: number;
  readonly files: number;
}

/** The measured side: one pull in this process. */
async function childMain(): Promise<void> {
  const [reference, policyFile, bundle] = process.argv.slice(2) as [string, string, string];
  const policy = parsePolicy(await readFile(policyFile));
  const started = performance.now();
  const result = await pullImage(reference, bundle, { policy, registry: { insecure: () => true } });
  const ms = performance.now() - started;
  const out: ChildResult = { ms, maxRssKiB: process.resourceUsage().maxRSS, files: result.stats.files };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/**
 * The bench image (built once into dist/bench-cache/image-pull-v2, the bundle's ../../dist) and its
 * manifest; encrypted.bench uses the same.
 */
export async function cachedBenchImage(): Promise<{ cache: string; manifest: ImageManifest }> {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const cache = join(root, 'dist', 'bench-cache', 'image-pull-v2');
  if (!existsSync(join(cache, 'manifest.json'))) {
    await rm(cache, { recursive: true, force: true });
    await mkdir(cache, { recursive: true });
    await buildBenchImage(cache);
  }
  const manifest = parseManifest(await readFile(join(cache, 'manifest.json')));
  if (manifest.kind !== 'manifest') throw new Error('bench image is not a manifest');
  return { cache, manifest };
}

export async function run(): Promise<Record<string, number>> {
  const skopeo = requireTool('skopeo');
  const umoci = requireTool('umoci');
  const { cache, manifest } = await cachedBenchImage();
  const compressed = manifest.layers.reduce((n, l) => n + l.size, 0);

  const registry = await startDockerRegistry();
  const work = await mkdtemp(join(tmpdir(), 'image-bench-'));
  const client = new RegistryClient({ insecure: () => true });
  try {
    const repo = { domain: registry.host, path: 'bench/image' };
    const digest = await pushDirImage(client, cache, repo, 'v1');
    const key = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    await pushSigstoreSignatures(client, repo, digest, [
      createSigstoreSignature(key.privateKey, {
        manifestDigest: digest,
        dockerReference: `${registry.host}/bench/image:v1`,
      }),
    ]);
    const keyFile = join(work, 'key.pub');
    await writeFile(keyFile, key.publicKey.export({ type: 'spki', format: 'pem' }));
    const policyFile = join(work, 'policy.json');
    await writeFile(
      policyFile,
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: { docker: { [registry.host]: [{ type: 'sigstoreSigned', keyPath: keyFile }] } },
      }),
    );
    const reference = `${registry.host}/bench/image:v1`;
    const self = fileURLToPath(import.meta.url);

    const ours: ChildResult[] = [];
    const theirs: { copy: number; unpack: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const bundle = join(work, `ours-${i}`);
      const out = execFileSync(
        process.execPath,
        [...DATA_HUB_V8_FLAGS, self, reference, policyFile, bundle],
        {
          env: { ...process.env, [CHILD_ENV]: '1' },
          maxBuffer: 1024 * 1024,
        },
      );
      ours.push(JSON.parse(out.toString().trim().split('\n').at(-1) ?? '{}') as ChildResult);
      await rm(bundle, { recursive: true, force: true });

      const layout = join(work, `oci-${i}`);
      const copy = timeCommand(skopeo, [
        'copy',
        '--src-tls-verify=false',
        `docker://${reference}`,
        `oci:${layout}:img`,
      ]);
      const unpack = timeCommand(umoci, [
        'raw',
        'unpack',
        '--image',
        `${layout}:img`,
        join(work, `umoci-${i}`),
      ]);
      theirs.push({ copy, unpack });
      await rm(layout, { recursive: true, force: true });
      await rm(join(work, `umoci-${i}`), { recursive: true, force: true });
    }
    const best = (xs: number[]) => Math.min(...xs);
    const oursMs = best(ours.map((o) => o.ms));
    const copyMs = best(theirs.map((t) => t.copy));
    const unpackMs = best(theirs.map((t) => t.unpack));
    const referenceMs = best(theirs.map((t) => t.copy + t.unpack));
    return {
      image_uncompressed_mb: (await uncompressedSize(cache)) / MB,
      image_compressed_mb: compressed / MB,
      layers: manifest.layers.length,
      files: ours[0]?.files ?? 0,
      ours_pull_verify_unpack_ms: oursMs,
      skopeo_copy_ms: copyMs,
      umoci_raw_unpack_ms: unpackMs,
      skopeo_plus_umoci_ms: referenceMs,
      ratio_ours_vs_skopeo_umoci: oursMs / referenceMs,
      peak_rss_mb: Math.max(...ours.map((o) => o.maxRssKiB)) / 1024,
    };
  } finally {
    client.close();
    await registry.stop();
    await rm(work, { recursive: true, force: true });
  }
}

async function uncompressedSize(dir: string): Promise<number> {
  const config = JSON.parse((await readFile(join(dir, 'manifest.json'))).toString()) as {
    layers: { digest: string }[];
  };
  let total = 0;
  const { createGunzip, createZstdDecompress } = await import('node:zlib');
  const { createReadStream } = await import('node:fs');
  for (const l of config.layers) {
    const raw = await readFile(join(dir, digestHex(l.digest)));
    const zstd = raw[0] === 0x28 && raw[1] === 0xb5;
    const stream = createReadStream(join(dir, digestHex(l.digest))).pipe(
      zstd ? createZstdDecompress() : createGunzip(),
    );
    for await (const c of stream) total += (c as Buffer).byteLength;
  }
  return total;
}

if (process.env[CHILD_ENV] === '1') {
  childMain().catch((e: unknown) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  });
}
