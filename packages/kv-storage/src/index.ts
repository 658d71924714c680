export { BoundedCache, type CacheLimits, type CacheUsage } from './bounded-cache.js';
export type { PostgresStorageErrorCode } from './errors.js';
export { KvStorageError, type KvStorageErrorCode, StorageUnavailable, storageFault } from './errors.js';
export { InvalidStorageKey, isValidSegment } from './keys.js';
export { DEFAULT_LOCAL_FS_DIR, type LocalFsOptions, LocalFsStorage } from './local-fs.js';
export { DEFAULT_LOCAL_JSON_DIR, LocalJsonStorage } from './local-json.js';
export { MemoryStorage } from './memory.js';
export {
  createPostgresPool,
  DEFAULT_POSTGRES_CONFIG,
  DEFAULT_POSTGRES_POOL_SIZE,
  describePostgresTarget,
  POSTGRES_URL_ENV,
  type PostgresConfig,
  type PostgresEvent,
  PostgresStorage,
  PostgresStorageError,
  type PostgresStorageOptions,
  type PostgresTarget,
  postgresTarget,
  redactPostgresUrl,
} from './postgres.js';
export {
  DEFAULT_REDIS_URL,
  REDIS_URL_ENV,
  type RedisEvent,
  RedisStorage,
  type RedisStorageOptions,
  redactRedisUrl,
} from './redis.js';
export { RoutedStorage } from './routed.js';
export type { KvStorage, Namespace, SetOptions } from './types.js';
