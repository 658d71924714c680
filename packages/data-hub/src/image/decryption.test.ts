// `[image] decryption_keys` (our addition): jwe private keys from a file or from the KBS let the
// image-pull service decrypt ocicrypt `jwe` layers; without them the pull fails with image-rs' text;
// entries that are not usable keys fail the image client's set-up (pgp and pkcs7:
// test/cdh-image-keys.test.ts and decryption-keys.test.ts).
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  buildAnnotatedImage,
  buildLayer,
  encryptLayer,
  jweWrapper,
  pushImage,
  RegistryClient,
} from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { tempDir } from '../testing/helpers.js';
import { ImagePullService } from './service.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PEM = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

const toml = (image: string, registryHost: string) =>
  [
    'socket = "unix:///run/cdh.sock"',
    '[kbc]',
    'name = "offline_fs_kbc"',
    '[image]',
    image,
    '[[image.registry_config.registry]]',
    `prefix = "${registryHost}"`,
    `location = "${registryHost}"`,
    'insecure = true',
    '',
  ].join('\n');

describe('[image] decryption_keys', () => {
  let registry: RunningRegistry;
  beforeAll(async () => {
    registry = await startDockerRegistry();
    const client = new RegistryClient({ insecure: () => true });
    const layer = await buildLayer([{ name: 'app/secret', content: 'jwe in the CDH\n' }]);
    await pushImage(
      client,
      { domain: registry.host, path: 'enc/app' },
      'v1',
      buildAnnotatedImage({ layers: [await encryptLayer(layer, [jweWrapper(rsa.publicKey)])] }),
    );
    client.close();
  }, 60_000);
  afterAll(() => registry?.stop());

  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-decryption-'));
  });
  afterEach(() => cleanup());

  async function pullWith(keys: string, getResource: (uri: string) => Promise<Uint8Array>, bundle: string) {
    const service = new ImagePullService(
      parseCdhConfig(toml(`work_dir = "${join(dir, 'w')}"\n${keys}`, registry.host)),
      { getResource },
      { extendMeasurement: async () => {} },
    );
    try {
      return await service.pullImage(`${registry.host}/enc/app:v1`, join(dir, bundle));
    } finally {
      service.close();
    }
  }

  const noKbs = async (): Promise<Uint8Array> => {
    throw new Error('no KBS in this test');
  };

  it('decrypts with a key file and with a key from the KBS (not cached on disk)', async () => {
    const file = join(dir, 'priv.pem');
    writeFileSync(file, PEM);
    expect(await pullWith(`decryption_keys = ["jwe:${file}"]`, noKbs, 'a')).toMatch(/^sha256:/);
    expect(readFileSync(join(dir, 'a/rootfs/app/secret'), 'utf8')).toBe('jwe in the CDH\n');
    const asked: string[] = [];
    const fromKbs = async (uri: string) => {
      asked.push(uri);
      return Buffer.from(PEM);
    };
    expect(await pullWith('decryption_keys = ["jwe:kbs:///default/image-key/priv"]', fromKbs, 'b')).toMatch(
      /^sha256:/,
    );
    expect(asked).toEqual(['kbs:///default/image-key/priv']);
    // The resource cache (where policies and signature keys go) holds nothing.
    expect(existsSync(join(dir, 'w/image-security/kbs'))).toBe(false);
  });

  it('fails without a key, and on entries that are not usable keys', async () => {
    await expect(pullWith('', noKbs, 'c')).rejects.toThrow(
      "Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct (no decryption key for the layer's key protocols (jwe); configured: provider.attestation-agent)",
    );
    await expect(pullWith('decryption_keys = ["pkcs11:/k.pem"]', noKbs, 'd')).rejects.toThrow(
      'Image Client error: Initialize decryption keys failed: decryption_keys entry "pkcs11:…": not PROTOCOL:SOURCE[:PASSWORD] with PROTOCOL jwe, pgp or pkcs7',
    );
    const absent = join(dir, 'absent.pem');
    await expect(pullWith(`decryption_keys = ["jwe:${absent}"]`, noKbs, 'e')).rejects.toThrow(
      `Image Client error: Initialize decryption keys failed: decryption_keys entry "jwe:${absent}": cannot read the key file ${absent}`,
    );
  });
});
