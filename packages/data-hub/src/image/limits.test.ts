// The caps on what image layers expand to, set in the data hub's `[image]` table and applied by
// the image-pull service (a loopback docker-registry, no policy: every image is accepted).
import { join } from 'node:path';
import { buildImage, buildLayer, DEFAULT_EXPANSION_LIMITS, pushImage, RegistryClient } from '@broker/image';
import { type RunningRegistry, startDockerRegistry } from '@broker/image/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCdhConfig } from '../config.js';
import { tempDir } from '../testing/helpers.js';
import { ImagePullService } from './service.js';

const toml = (image: string, registryHost = '127.0.0.1:1') =>
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

describe('[image] caps in the config', () => {
  it('default to 8 GiB and 1 000 000 entries per layer and per image', () => {
    expect(parseCdhConfig(toml('')).image.expansionLimits).toEqual({
      maxLayerBytes: 8 * 1024 ** 3,
      maxLayerEntries: 1_000_000,
      maxImageBytes: 8 * 1024 ** 3,
      maxImageEntries: 1_000_000,
    });
    expect(DEFAULT_EXPANSION_LIMITS.maxLayerBytes).toBe(8589934592);
  });

  it('are read from max_layer_bytes, max_layer_entries, max_image_bytes and max_image_entries', () => {
    const c = parseCdhConfig(
      toml('max_layer_bytes = 1024\nmax_layer_entries = 2\nmax_image_bytes = 4096\nmax_image_entries = 8'),
    );
    expect(c.image.expansionLimits).toEqual({
      maxLayerBytes: 1024,
      maxLayerEntries: 2,
      maxImageBytes: 4096,
      maxImageEntries: 8,
    });
    expect(c.unknownKeys).toEqual([]);
  });

  it('refuse a cap that is not a positive integer', () => {
    expect(() => parseCdhConfig(toml('max_layer_entries = 0'))).toThrow(
      'image.max_layer_entries: 0 is outside',
    );
    expect(() => parseCdhConfig(toml('max_image_bytes = "8G"'))).toThrow('image.max_image_bytes');
  });
});

describe('the image-pull service', () => {
  let registry: RunningRegistry;
  beforeAll(async () => {
    registry = await startDockerRegistry();
    const client = new RegistryClient({ insecure: () => true });
    const files = Array.from({ length: 20 }, (_, i) => ({ name: `f${i}`, content: 'x' }));
    await pushImage(
      client,
      { domain: registry.host, path: 'many/files' },
      'v1',
      buildImage({ layers: [await buildLayer(files)] }),
    );
    client.close();
  }, 60_000);
  afterAll(() => registry?.stop());

  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir('cdh-limits-'));
  });
  afterEach(() => cleanup());

  it('applies the configured caps, and the error names the cap', async () => {
    const getResource = async () => {
      throw new Error('no resources in this test');
    };
    const strict = new ImagePullService(
      parseCdhConfig(toml(`work_dir = "${join(dir, 'w')}"\nmax_layer_entries = 10`, registry.host)),
      { getResource },
      { extendMeasurement: async () => {} },
    );
    try {
      await expect(strict.pullImage(`${registry.host}/many/files:v1`, join(dir, 'b1'))).rejects.toThrow(
        'the tar entries pass the per-layer cap (max-layer-entries = 10)',
      );
    } finally {
      strict.close();
    }
    const roomy = new ImagePullService(
      parseCdhConfig(toml(`work_dir = "${join(dir, 'w')}"\nmax_layer_entries = 20`, registry.host)),
      { getResource },
      { extendMeasurement: async () => {} },
    );
    try {
      expect(await roomy.pullImage(`${registry.host}/many/files:v1`, join(dir, 'b2'))).toMatch(/^sha256:/);
    } finally {
      roomy.close();
    }
  });
});
