/**
 * PullImage of a two-platform image on Debian's docker-registry signed only
 * on its index: accepted by default, as image-rs does since its commit
 * de3f6ff6; `[image] index_signatures = false` keeps containers/image's rule
 * and refuses it with upstream's error.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  buildImage,
  buildIndex,
  buildLayer,
  createSigstoreSignature,
  MEDIA_TYPE,
  pushImage,
  pushSigstoreSignatures,
  RegistryClient,
} from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { captureLogger, tempDir } from '../testing/helpers.js';
import { ImagePullService } from './service.js';

let registry: RunningRegistry;
let publicPem: string;
const digests: Record<string, string> = {};
const image = () => `${registry.host}/multi/app:v1`;

beforeAll(async () => {
  registry = await startDockerRegistry();
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  publicPem = keys.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const client = new RegistryClient({ insecure: () => true });
  const repo = { domain: registry.host, path: 'multi/app' };
  const platforms = [
    { os: 'linux', architecture: 'amd64' },
    { os: 'linux', architecture: 'arm64' },
  ];
  const images = [];
  for (const platform of platforms) {
    const img = buildImage({
      layers: [await buildLayer([{ name: 'arch', content: platform.architecture }])],
      platform,
    });
    await pushImage(client, repo, platform.architecture, img);
    digests[platform.architecture] = img.manifestDigest;
    images.push({ image: img, platform });
  }
  const index = buildIndex(images);
  await client.putManifest(repo, 'v1', index.bytes, MEDIA_TYPE.ociIndex);
  digests.index = index.digest;
  await pushSigstoreSignatures(client, repo, index.digest, [
    createSigstoreSignature(keys.privateKey, { manifestDigest: index.digest, dockerReference: image() }),
  ]);
  client.close();
}, 60_000);

afterAll(async () => {
  await registry?.stop();
});

let dir: string;
let cleanup: () => Promise<void>;
const services: ImagePullService[] = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir('cdh-index-sig-'));
});
afterEach(async () => {
  for (const s of services.splice(0)) s.close();
  await cleanup();
});

function service(extra: string, architecture: string) {
  const policy = JSON.stringify({
    default: [{ type: 'reject' }],
    transports: {
      docker: {
        [`${registry.host}/multi`]: [
          { type: 'sigstoreSigned', keyData: Buffer.from(publicPem).toString('base64') },
        ],
      },
    },
  });
  const cfg = parseCdhConfig(
    [
      `socket = "unix://${join(dir, 'cdh.sock')}"`,
      '[kbc]',
      'name = "offline_fs_kbc"',
      '[image]',
      `work_dir = "${join(dir, 'work')}"`,
      `image_security_policy = '${policy}'`,
      extra,
      '[[image.registry_config.registry]]',
      `prefix = "${registry.host}"`,
      `location = "${registry.host}"`,
      'insecure = true',
      '',
    ].join('\n'),
  );
  const { logger, lines } = captureLogger();
  const s = new ImagePullService(
    cfg,
    {
      logger,
      getResource: async (uri) => {
        throw new Error(`no KBS here (${uri})`);
      },
    },
    { platform: { os: 'linux', architecture }, extendMeasurement: async () => undefined },
  );
  services.push(s);
  return { s, lines };
}

describe('an image signed on its index only', () => {
  it.each(['amd64', 'arm64'])(
    'is pulled by default (%s): the platform manifest digest is returned',
    async (arch) => {
      const { s } = service('', arch);
      const bundle = join(dir, 'bundle');
      expect(await s.pullImage(image(), bundle)).toBe(digests[arch]);
      expect(readFileSync(join(bundle, 'rootfs/arch'), 'utf8')).toBe(arch);
    },
  );

  it('is refused with index_signatures = false (containers/image), with upstream error text', async () => {
    const { s, lines } = service('index_signatures = false', 'amd64');
    const bundle = join(dir, 'bundle');
    await expect(s.pullImage(image(), bundle)).rejects.toThrow(
      `Failed to pull image ${image()} from all mirror/mapping locations or original location: image: ${image()}, error: Image policy rejected: Denied by policy: rejected by \`sigstoreSigned\` rule`,
    );
    expect(lines.join('\n')).toContain('A signature was required, but no signature exists');
    expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
  });

  it('index_signatures must be a boolean', () => {
    expect(() => service('index_signatures = "no"', 'amd64')).toThrow(/index_signatures/);
  });
});
