/**
 * A policy written for image-rs works in the data hub: `keyData` as the PEM
 * text, and a `sigstoreSigned` rule without `signedIdentity` that accepts a
 * `cosign sign` signature (identity: the repository alone) of an image pulled
 * by tag. `[image] policy_semantics = "containers-image"` keeps
 * containers/image's meanings. Images on Debian's docker-registry.
 */
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  buildImage,
  buildLayer,
  createSigstoreSignature,
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
let digest: string;
const image = () => `${registry.host}/cosign/app:v1`;

beforeAll(async () => {
  registry = await startDockerRegistry();
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  publicPem = keys.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const client = new RegistryClient({ insecure: () => true });
  const repo = { domain: registry.host, path: 'cosign/app' };
  const img = buildImage({ layers: [await buildLayer([{ name: 'hello', content: 'signed by cosign\n' }])] });
  digest = await pushImage(client, repo, 'v1', img);
  // As `cosign sign` signs: the identity is the repository, without the tag.
  await pushSigstoreSignatures(client, repo, digest, [
    createSigstoreSignature(keys.privateKey, {
      manifestDigest: digest,
      dockerReference: `${registry.host}/cosign/app`,
    }),
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
  ({ dir, cleanup } = await tempDir('cdh-policy-semantics-'));
});
afterEach(async () => {
  for (const s of services.splice(0)) s.close();
  await cleanup();
});

/** image-rs' policy shape: `type` and a key, no `signedIdentity`. */
const policy = (keyData: string) =>
  JSON.stringify({
    default: [{ type: 'reject' }],
    transports: { docker: { [`${registry.host}/cosign`]: [{ type: 'sigstoreSigned', keyData }] } },
  });

function service(policyJson: string, extra = '') {
  const cfg = parseCdhConfig(
    [
      `socket = "unix://${join(dir, 'cdh.sock')}"`,
      '[kbc]',
      'name = "offline_fs_kbc"',
      '[image]',
      `work_dir = "${join(dir, 'work')}"`,
      `image_security_policy = '''${policyJson}'''`,
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
    { extendMeasurement: async () => undefined },
  );
  services.push(s);
  return { s, lines };
}

const failed = (why: string) =>
  `Failed to pull image ${image()} from all mirror/mapping locations or original location: image: ${image()}, error: ${why}`;

describe('image-rs semantics (the default)', () => {
  it.each([
    ['the PEM text', () => publicPem],
    ['base64 of the PEM', () => Buffer.from(publicPem).toString('base64')],
  ])('keyData as %s, no signedIdentity: the cosign-signed image is pulled', async (_what, key) => {
    const { s } = service(policy(key()));
    const bundle = join(dir, 'bundle');
    expect(await s.pullImage(image(), bundle)).toBe(digest);
    expect(readFileSync(join(bundle, 'rootfs/hello'), 'utf8')).toBe('signed by cosign\n');
  });
});

describe('policy_semantics = "containers-image"', () => {
  const strict = 'policy_semantics = "containers-image"';

  it('keyData must be base64: the PEM text fails the image client', async () => {
    const { s } = service(policy(publicPem), strict);
    await expect(s.pullImage(image(), join(dir, 'bundle'))).rejects.toThrow(
      /^Image Client error: Initialize signature validator failed: Invalid image policy file: illegal base64 data at input byte \d+$/,
    );
  });

  it('no signedIdentity means matchRepoDigestOrExact: the repository-only identity is refused', async () => {
    const { s, lines } = service(policy(Buffer.from(publicPem).toString('base64')), strict);
    const bundle = join(dir, 'bundle');
    await expect(s.pullImage(image(), bundle)).rejects.toThrow(
      failed('Image policy rejected: Denied by policy: rejected by `sigstoreSigned` rule'),
    );
    expect(lines.join('\n')).toContain(
      `Signature for identity \\"${registry.host}/cosign/app\\" is not accepted`,
    );
    expect(existsSync(join(bundle, 'rootfs'))).toBe(false);
  });

  it('an unknown value is a configuration error', () => {
    expect(() => service(policy('x'), 'policy_semantics = "skopeo"')).toThrow(
      'image.policy_semantics must be "image-rs" or "containers-image", got "skopeo"',
    );
  });
});
