/**
 * Encrypted images: pull + decrypt + unpack of pull.bench's 240 MB image
 * with every layer encrypted (ocicrypt AES_256_CTR_HMAC_SHA256, key wrapped
 * with `jwe` for an RSA key), against the same image unencrypted in the same
 * run (the cost of decryption, HMAC check included), and against Debian's
 * `skopeo copy --decryption-key` into an OCI layout followed by
 * `umoci raw unpack` of the same encrypted image (the plain image through
 * skopeo + umoci is measured too). The encryption side is measured as well:
 * `image-policy encrypt`'s library call (layers streamed through a spool
 * file) against `skopeo copy --encryption-key jwe:PUB` registry to registry.
 *
 * Our side runs in child processes (this module started with
 * BROKER_ENCRYPTED_BENCH_CHILD set) so that each peak RSS is its own. No
 * signature policy: both of our pulls accept the image as is, so the ratio
 * is the decryption's alone. Best of four runs each (three for encrypting).
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  encryptRegistryImage,
  wrappersFromArguments,
} from '../../packages/image/src/ocicrypt/encrypt-image.js';
import { jweUnwrapper, parseJwePrivateKey } from '../../packages/image/src/ocicrypt/jwe.js';
import { pullImage } from '../../packages/image/src/pull.js';
import { parseImageReference } from '../../packages/image/src/reference.js';
import { RegistryClient } from '../../packages/image/src/registry/client.js';
import { requireTool } from '../../packages/image/src/registry/local-registry.js';
import { startDockerRegistry } from '../../packages/image/src/testing/index.js';
import { timeCommand } from '../helpers.js';
import { cachedBenchImage, pushDirImage } from './pull.bench.js';

const CHILD_ENV = 'BROKER_ENCRYPTED_BENCH_CHILD';
const MB = 1024 * 1024;

interface ChildResult {
  readonly ms: number;
  readonly maxRssKiB: number;
}

/** The measured side, in a child: `pull REF BUNDLE [PRIVATE.pem]` or `encrypt SRC DEST PUBLIC.pem`. */
async function childMain(): Promise<void> {
  const [mode, a, b, key] = process.argv.slice(2) as [string, string, string, string | undefined];
  const started = performance.now();
  if (mode === 'pull') {
    const decryption =
      key === undefined ? [] : [jweUnwrapper([parseJwePrivateKey(await readFile(key), key)])];
    await pullImage(a, b, { registry: { insecure: () => true }, decryption });
  } else {
    const client = new RegistryClient({ insecure: () => true });
    try {
      await encryptRegistryImage(
        client,
        parseImageReference(a),
        parseImageReference(b),
        await wrappersFromArguments([`jwe:${key}`]),
      );
    } finally {
      client.close();
    }
  }
  const out: ChildResult = { ms: performance.now() - started, maxRssKiB: process.resourceUsage().maxRSS };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

function child(args: string[]): ChildResult {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), ...args], {
    env: { ...process.env, [CHILD_ENV]: '1' },
    maxBuffer: 1024 * 1024,
  });
  return JSON.parse(out.toString().trim().split('\n').at(-1) ?? '{}') as ChildResult;
}

export async function run(): Promise<Record<string, number>> {
  const skopeo = requireTool('skopeo');
  const umoci = requireTool('umoci');
  const openssl = requireTool('openssl');
  // The same cached image as pull.bench.
  const { cache, manifest } = await cachedBenchImage();

  const registry = await startDockerRegistry();
  const work = await mkdtemp(join(tmpdir(), 'image-encrypted-bench-'));
  const client = new RegistryClient({ insecure: () => true });
  try {
    await pushDirImage(client, cache, { domain: registry.host, path: 'bench/plain' }, 'v1');
    const priv = join(work, 'priv.pem');
    const pub = join(work, 'pub.pem');
    execFileSync(openssl, ['genrsa', '-out', priv, '2048'], { stdio: 'ignore' });
    execFileSync(openssl, ['rsa', '-in', priv, '-pubout', '-out', pub], { stdio: 'ignore' });
    const plain = `${registry.host}/bench/plain:v1`;
    const encrypted = `${registry.host}/bench/encrypted:v1`;

    const oursEncrypt: ChildResult[] = [];
    const skopeoEncrypt: number[] = [];
    for (let i = 0; i < 3; i++) {
      // Distinct tags: each run uploads every encrypted layer afresh (a fresh key gives new blobs).
      oursEncrypt.push(child(['encrypt', plain, `${encrypted}-ours${i}`, pub]));
      skopeoEncrypt.push(
        timeCommand(skopeo, [
          'copy',
          '--src-tls-verify=false',
          '--dest-tls-verify=false',
          '--encryption-key',
          `jwe:${pub}`,
          `docker://${plain}`,
          `docker://${encrypted}-skopeo${i}`,
        ]),
      );
    }
    // The image every puller reads: our encryption's first run.
    const pulled = `${encrypted}-ours0`;

    const oursPlain: ChildResult[] = [];
    const oursEncrypted: ChildResult[] = [];
    const peerPlain: { copy: number; unpack: number }[] = [];
    const peerEncrypted: { copy: number; unpack: number }[] = [];
    const peer = async (reference: string, decrypt: boolean, i: number) => {
      const layout = join(work, `oci-${i}`);
      const copy = timeCommand(skopeo, [
        'copy',
        '--src-tls-verify=false',
        ...(decrypt ? ['--decryption-key', priv] : []),
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
      await rm(layout, { recursive: true, force: true });
      await rm(join(work, `umoci-${i}`), { recursive: true, force: true });
      return { copy, unpack };
    };
    // Four runs each, in alternating order, so that neither side always follows the other.
    for (let i = 0; i < 4; i++) {
      const bundle = join(work, `ours-${i}`);
      const steps = [
        async () => {
          oursPlain.push(child(['pull', plain, bundle]));
          await rm(bundle, { recursive: true, force: true });
        },
        async () => {
          oursEncrypted.push(child(['pull', pulled, bundle, priv]));
          await rm(bundle, { recursive: true, force: true });
        },
        async () => {
          peerPlain.push(await peer(plain, false, i));
        },
        async () => {
          peerEncrypted.push(await peer(pulled, true, i));
        },
      ];
      for (const step of i % 2 === 0 ? steps : steps.reverse()) await step();
    }

    const best = (xs: number[]) => Math.min(...xs);
    const oursPlainMs = best(oursPlain.map((o) => o.ms));
    const oursEncryptedMs = best(oursEncrypted.map((o) => o.ms));
    const peerPlainMs = best(peerPlain.map((t) => t.copy + t.unpack));
    const peerEncryptedMs = best(peerEncrypted.map((t) => t.copy + t.unpack));
    const oursEncryptMs = best(oursEncrypt.map((o) => o.ms));
    const skopeoEncryptMs = best(skopeoEncrypt);
    return {
      image_compressed_mb: manifest.layers.reduce((n, l) => n + l.size, 0) / MB,
      layers: manifest.layers.length,
      ours_pull_plain_ms: oursPlainMs,
      ours_pull_encrypted_ms: oursEncryptedMs,
      ratio_ours_encrypted_vs_plain: oursEncryptedMs / oursPlainMs,
      skopeo_umoci_plain_ms: peerPlainMs,
      skopeo_decrypt_copy_ms: best(peerEncrypted.map((t) => t.copy)),
      umoci_raw_unpack_ms: best(peerEncrypted.map((t) => t.unpack)),
      skopeo_decrypt_umoci_ms: peerEncryptedMs,
      ratio_skopeo_umoci_encrypted_vs_plain: peerEncryptedMs / peerPlainMs,
      ratio_ours_vs_skopeo_umoci_encrypted: oursEncryptedMs / peerEncryptedMs,
      ours_pull_encrypted_peak_rss_mb: Math.max(...oursEncrypted.map((o) => o.maxRssKiB)) / 1024,
      ours_pull_plain_peak_rss_mb: Math.max(...oursPlain.map((o) => o.maxRssKiB)) / 1024,
      ours_encrypt_ms: oursEncryptMs,
      skopeo_encrypt_ms: skopeoEncryptMs,
      ratio_ours_vs_skopeo_encrypt: oursEncryptMs / skopeoEncryptMs,
      ours_encrypt_peak_rss_mb: Math.max(...oursEncrypt.map((o) => o.maxRssKiB)) / 1024,
    };
  } finally {
    client.close();
    await registry.stop();
    await rm(work, { recursive: true, force: true });
  }
}

if (process.env[CHILD_ENV] === '1') {
  childMain().catch((e: unknown) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 1;
  });
}
