// trustee's rvps.json (rvps/src/config.rs): `storage` (key_value_storage's StorageBackendConfig) and
// `extractors`. Unknown keys are ignored, as serde does there, but reported as warnings so that a
// misspelt key (trustee's own docker-compose rvps.json says `type`/`file_path`) is visible.
import { readFileSync, statSync } from 'node:fs';
import { extname } from 'node:path';
import {
  DEFAULT_LOCAL_FS_DIR,
  DEFAULT_LOCAL_JSON_DIR,
  DEFAULT_POSTGRES_CONFIG,
  type PostgresConfig,
} from '@broker/kv-storage';
import { parse as parseToml } from 'smol-toml';
import { RvpsConfigError } from './errors.js';

export const DEFAULT_RVPS_CONFIG_PATH = '/etc/rvps.json';
export const DEFAULT_RVPS_ADDRESS = '127.0.0.1:50003';
const MAX_CONFIG_BYTES = 1024 * 1024;

export type RvpsStorageType = 'Memory' | 'LocalFs' | 'LocalJson' | 'Postgres';

const STORAGE_ALIASES: Readonly<Record<string, RvpsStorageType>> = {
  memory: 'Memory',
  local_fs: 'LocalFs',
  local_json: 'LocalJson',
  postgres: 'Postgres',
};

export interface RvpsConfig {
  readonly storageType: RvpsStorageType;
  /** `storage.backends.local_fs.dir_path` */
  readonly localFsDir?: string;
  /** `storage.backends.local_json.file_dir_path` */
  readonly localJsonDir?: string;
  /** `storage.backends.postgres` (`POSTGRES_URL` overrides it at start, as in trustee). */
  readonly postgres?: PostgresConfig;
  readonly warnings: readonly string[];
}

export const DEFAULT_RVPS_CONFIG: RvpsConfig = { storageType: 'Memory', warnings: [] };

type Obj = Record<string, unknown>;

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function section(parent: Obj, key: string, where: string): Obj | undefined {
  const v = parent[key];
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw new RvpsConfigError(`${where}${key} must be an object`);
  return v;
}

function text(parent: Obj, key: string, where: string): string | undefined {
  const v = parent[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v === '')
    throw new RvpsConfigError(`${where}${key} must be a non-empty string`);
  return v;
}

function unknownKeys(o: Obj, known: readonly string[], where: string, warnings: string[]): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) warnings.push(`${where}${k} is not an rvps setting; ignored`);
  }
}

/** The parsed document (JSON or TOML already decoded) as a configuration. */
export function parseRvpsConfig(doc: unknown): RvpsConfig {
  if (!isObject(doc)) throw new RvpsConfigError('the configuration must be an object');
  const warnings: string[] = [];
  unknownKeys(doc, ['storage', 'extractors'], '', warnings);
  const extractors = section(doc, 'extractors', '');
  if (extractors !== undefined) {
    // Only the sample extractor exists here; swid and corim messages are refused when registered.
    unknownKeys(extractors, ['swid_extractor'], 'extractors.', warnings);
  }
  return { ...parseStorageBackend(doc.storage, 'storage.', warnings), warnings };
}

export interface StorageBackendSettings {
  readonly storageType: RvpsStorageType;
  readonly localFsDir?: string;
  readonly localJsonDir?: string;
  readonly postgres?: PostgresConfig;
}

/** key_value_storage's PostgreSQL table: `db`, `username`, `password`, `port`, `host`, with its defaults. */
function parsePostgres(o: Obj, where: string, warnings: string[]): PostgresConfig {
  unknownKeys(o, ['db', 'username', 'password', 'port', 'host', 'table'], where, warnings);
  if (o.table !== undefined) {
    warnings.push(
      `${where}table is ignored: each namespace has its own table, named after it (reference_value, attestation_service_policy), as in trustee`,
    );
  }
  const d = DEFAULT_POSTGRES_CONFIG;
  const port = o.port ?? d.port;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RvpsConfigError(`${where}port must be an integer from 1 to 65535`);
  }
  const password = o.password;
  if (password !== undefined && password !== null && typeof password !== 'string') {
    throw new RvpsConfigError(`${where}password must be a string`);
  }
  return {
    db: text(o, 'db', where) ?? d.db,
    username: text(o, 'username', where) ?? d.username,
    ...(typeof password === 'string' && { password }),
    port,
    host: text(o, 'host', where) ?? d.host,
  };
}

/**
 * key_value_storage's StorageBackendConfig (`{storage_type, backends}`), shared by trustee's rvps.json
 * (`storage`) and its attestation service's config (`storage_backend`). `where` prefixes messages.
 */
export function parseStorageBackend(
  storage: unknown,
  where: string,
  warnings: string[],
): StorageBackendSettings {
  if (storage === undefined || storage === null) return { storageType: 'Memory' };
  if (!isObject(storage)) throw new RvpsConfigError(`${where.replace(/\.$/, '')} must be an object`);
  unknownKeys(storage, ['storage_type', 'backends'], where, warnings);
  const given = text(storage, 'storage_type', where) ?? 'Memory';
  // key_value_storage also takes the snake_case spellings.
  const type = STORAGE_ALIASES[given] ?? given;
  if (type !== 'Memory' && type !== 'LocalFs' && type !== 'LocalJson' && type !== 'Postgres') {
    throw new RvpsConfigError(
      `${where}storage_type ${JSON.stringify(type.slice(0, 64))} is not supported (supported: Memory, LocalFs, LocalJson, Postgres)`,
    );
  }
  const backends = section(storage, 'backends', where) ?? {};
  const localFs = section(backends, 'local_fs', `${where}backends.`);
  const localJson = section(backends, 'local_json', `${where}backends.`);
  const pgTable = section(backends, 'postgres', `${where}backends.`);
  const postgres = pgTable && parsePostgres(pgTable, `${where}backends.postgres.`, warnings);
  // A backend table without its path takes key_value_storage's default directory.
  const localFsDir =
    localFs && (text(localFs, 'dir_path', `${where}backends.local_fs.`) ?? DEFAULT_LOCAL_FS_DIR);
  const localJsonDir =
    localJson && (text(localJson, 'file_dir_path', `${where}backends.local_json.`) ?? DEFAULT_LOCAL_JSON_DIR);
  if (type === 'LocalFs' && localFsDir === undefined) {
    throw new RvpsConfigError(
      `${where}storage_type "LocalFs" needs ${where}backends.local_fs.dir_path (Local FS configuration is required)`,
    );
  }
  if (type === 'LocalJson' && localJsonDir === undefined) {
    throw new RvpsConfigError(
      `${where}storage_type "LocalJson" needs ${where}backends.local_json.file_dir_path (Local JSON configuration is required)`,
    );
  }
  if (type === 'Postgres' && postgres === undefined) {
    throw new RvpsConfigError(
      `${where}storage_type "Postgres" needs ${where}backends.postgres (PostgreSQL configuration is required)`,
    );
  }
  return {
    storageType: type,
    ...(localFsDir !== undefined && { localFsDir }),
    ...(localJsonDir !== undefined && { localJsonDir }),
    ...(postgres !== undefined && { postgres }),
  };
}

/** Decodes by extension as trustee's `config` crate does: `.toml` is TOML, anything else JSON. */
export function parseRvpsConfigText(source: string, path: string): RvpsConfig {
  let doc: unknown;
  try {
    doc = extname(path) === '.toml' ? parseToml(source) : JSON.parse(source);
  } catch (e) {
    throw new RvpsConfigError(`${path}: ${(e as Error).message}`);
  }
  try {
    return parseRvpsConfig(doc);
  } catch (e) {
    throw new RvpsConfigError(`${path}: ${(e as Error).message}`);
  }
}

/**
 * Reads the file. A missing file gives the defaults (Memory) with a warning, as trustee's rvps starts
 * without one; a file that exists but is unreadable or invalid is an error here (trustee falls back to
 * the defaults then too, which would silently drop a configured persistent store).
 */
export function loadRvpsConfig(path: string): RvpsConfig {
  let source: string;
  try {
    if (statSync(path).size > MAX_CONFIG_BYTES)
      throw new RvpsConfigError(`${path} is larger than ${MAX_CONFIG_BYTES} bytes`);
    source = readFileSync(path, 'utf8');
  } catch (e) {
    if (e instanceof RvpsConfigError) throw e;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      return {
        storageType: 'Memory',
        warnings: [`${path} does not exist; using the defaults (Memory storage)`],
      };
    }
    throw new RvpsConfigError(`${path}: ${(e as Error).message}`);
  }
  return parseRvpsConfigText(source, path);
}
