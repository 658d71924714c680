import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRvpsConfig, parseRvpsConfig, parseRvpsConfigText } from './config.js';
import { RvpsConfigError } from './errors.js';

describe('rvps.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rvps-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads trustee-style LocalFs and LocalJson storage', () => {
    expect(
      parseRvpsConfig({
        storage: { storage_type: 'LocalFs', backends: { local_fs: { dir_path: '/var/rv' } } },
        extractors: { swid_extractor: {} },
      }),
    ).toEqual({ storageType: 'LocalFs', localFsDir: '/var/rv', warnings: [] });
    expect(
      parseRvpsConfig({
        storage: { storage_type: 'LocalJson', backends: { local_json: { file_dir_path: '/j' } } },
      }),
    ).toEqual({ storageType: 'LocalJson', localJsonDir: '/j', warnings: [] });
  });

  it("takes key_value_storage's default directory for a backend table without its path, and the snake_case type names", () => {
    expect(parseRvpsConfig({ storage: { storage_type: 'LocalFs', backends: { local_fs: {} } } })).toEqual({
      storageType: 'LocalFs',
      localFsDir: '/opt/confidential-containers/storage/local_fs',
      warnings: [],
    });
    expect(
      parseRvpsConfig({ storage: { storage_type: 'local_json', backends: { local_json: {} } } }),
    ).toEqual({
      storageType: 'LocalJson',
      localJsonDir: '/opt/confidential-containers/storage/local_json',
      warnings: [],
    });
    expect(parseRvpsConfig({ storage: { storage_type: 'memory' } }).storageType).toBe('Memory');
  });

  it("runs trustee's docker-compose rvps.json on Memory, as trustee does, and says why", () => {
    const c = parseRvpsConfig({
      storage: {
        type: 'LocalFs',
        file_path: '/opt/confidential-containers/attestation-service/reference_values',
      },
    });
    expect(c.storageType).toBe('Memory');
    expect(c.warnings).toEqual([
      'storage.type is not an rvps setting; ignored',
      'storage.file_path is not an rvps setting; ignored',
    ]);
  });

  it.each([
    [{ storage: { storage_type: 'LocalFs' } }, /Local FS configuration is required/],
    [{ storage: { storage_type: 'LocalJson', backends: {} } }, /Local JSON configuration is required/],
    [{ storage: { storage_type: 'Postgres' } }, /PostgreSQL configuration is required/],
    [{ storage: { storage_type: 'Redis' } }, /"Redis" is not supported/],
    [
      { storage: { storage_type: 'Postgres', backends: { postgres: { port: 0 } } } },
      /port must be an integer/,
    ],
    [{ storage: { storage_type: 'Postgres', backends: { postgres: { port: '5432' } } } }, /port must be/],
    [{ storage: { storage_type: 'Postgres', backends: { postgres: { host: '' } } } }, /host must be/],
    [{ storage: { storage_type: 'Postgres', backends: { postgres: { password: 1 } } } }, /password must be/],
    [{ storage: 'LocalFs' }, /storage must be an object/],
    [[], /must be an object/],
    [{ storage: { storage_type: 'LocalFs', backends: { local_fs: { dir_path: 3 } } } }, /dir_path must be/],
  ])('refuses %j', (doc, message) => {
    expect(() => parseRvpsConfig(doc)).toThrow(message);
  });

  it("reads trustee's PostgreSQL table with its keys and defaults", () => {
    expect(
      parseRvpsConfig({
        storage: {
          storage_type: 'postgres',
          backends: {
            postgres: { db: 'rv', username: 'rvps', password: 'pw', port: 6432, host: 'db', table: 'x' },
          },
        },
      }),
    ).toEqual({
      storageType: 'Postgres',
      postgres: { db: 'rv', username: 'rvps', password: 'pw', port: 6432, host: 'db' },
      warnings: [
        'storage.backends.postgres.table is ignored: each namespace has its own table, named after it (reference_value, attestation_service_policy), as in trustee',
      ],
    });
    expect(parseRvpsConfig({ storage: { storage_type: 'Postgres', backends: { postgres: {} } } })).toEqual({
      storageType: 'Postgres',
      postgres: { db: 'postgres', username: 'postgres', port: 5432, host: 'localhost' },
      warnings: [],
    });
  });

  it('reads TOML by extension and names the file in errors', () => {
    expect(
      parseRvpsConfigText(
        '[storage]\nstorage_type = "LocalFs"\n[storage.backends.local_fs]\ndir_path = "/d"\n',
        'r.toml',
      ).localFsDir,
    ).toBe('/d');
    expect(() => parseRvpsConfigText('{', '/etc/rvps.json')).toThrow(/^\/etc\/rvps\.json: /);
  });

  it('falls back to Memory only when the file is missing; an invalid file is an error', () => {
    expect(loadRvpsConfig(join(dir, 'missing.json')).storageType).toBe('Memory');
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"storage": {"storage_type": "Redis"}}');
    expect(() => loadRvpsConfig(bad)).toThrow(RvpsConfigError);
  });
});
