// Where the verdict log lives: in Redis or PostgreSQL when the KBS's store is one of them (replicas then
// share one log, and the console counts the replicas), else in this process's memory.

import type { AttestationService } from '@broker/attestation';
import type { KvStorage } from '@broker/kv-storage';
import {
  createPostgresPool,
  describePostgresTarget,
  postgresTarget,
  REDIS_URL_ENV,
} from '@broker/kv-storage';
import { isExpired, readReferenceValue } from '@broker/rvps-core';
import type { Logger } from 'pino';
import type { KbsConfig } from '../config.js';
import { ReplicaPresence } from '../console/replicas.js';
import { VerdictLog, type VerdictStore } from './log.js';
import { PolicyVersions } from './policy-versions.js';
import { createVerdictTables, PostgresReplicaPresence, PostgresVerdictLog } from './postgres-log.js';
import type { VerdictRecorderOptions } from './recorder.js';
import { RedisLink } from './redis-link.js';
import { RedisVerdictLog } from './redis-log.js';

export interface OpenedVerdicts {
  readonly store: VerdictStore;
  /** Present over Redis and PostgreSQL, with the console on. */
  readonly replicas?: Pick<ReplicaPresence, 'count'>;
  close(): Promise<void>;
}

/** The Redis URL the storage uses (trustee's `REDIS_URL` override first), when the store is Redis. */
export function sharedRedisUrl(config: KbsConfig): string | undefined {
  if (config.storageBackend.storageType !== 'Redis') return undefined;
  const fromEnv = process.env[REDIS_URL_ENV];
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : config.storageBackend.redisUrl;
}

export async function openVerdicts(
  config: KbsConfig,
  logger: Logger,
  now?: () => number,
): Promise<OpenedVerdicts> {
  const size = config.console.verdictLogSize;
  if (config.storageBackend.storageType === 'Postgres' && config.storageBackend.postgres !== undefined) {
    return openPostgresVerdicts(config, logger, now);
  }
  const url = sharedRedisUrl(config);
  if (url === undefined) {
    const store = new VerdictLog(size, now);
    return { store, close: () => store.close() };
  }
  const log = logger.child({ component: 'verdict-log' });
  const link = new RedisLink({
    url,
    onState: (up, reason) => {
      if (up) log.info('verdict log: Redis connection restored');
      else log.warn({ reason }, 'verdict log: Redis connection lost; verdicts are dropped until it returns');
    },
  });
  const store = new RedisVerdictLog(link, {
    size,
    ...(now !== undefined && { now }),
    onDropped: (count, reason) => log.warn({ count, reason }, 'verdicts not recorded in Redis'),
  });
  const replicas = config.console.enabled ? new ReplicaPresence(link) : undefined;
  // Counted from the start: the first announcement is made (or has failed) before the KBS serves.
  await replicas?.start();
  return {
    store,
    ...(replicas !== undefined && { replicas }),
    close: async () => {
      await store.close();
      await replicas?.stop();
      await link.close();
    },
  };
}

async function openPostgresVerdicts(
  config: KbsConfig,
  logger: Logger,
  now?: () => number,
): Promise<OpenedVerdicts> {
  const target = postgresTarget(
    config.storageBackend.postgres as NonNullable<KbsConfig['storageBackend']['postgres']>,
  );
  const log = logger.child({ component: 'verdict-log', postgres: describePostgresTarget(target) });
  // Connections of its own, so that its writes never queue behind the store's.
  const pool = createPostgresPool(target, { max: 2 });
  pool.on('error', (e: Error) => log.debug({ reason: e.message }, 'verdict log: PostgreSQL connection lost'));
  try {
    await createVerdictTables(pool);
  } catch (e) {
    // The store itself was reached at start; the log records nothing until its table can be written.
    log.warn({ reason: (e as Error).message }, 'verdict log: its tables could not be created');
  }
  const store = new PostgresVerdictLog(pool, {
    size: config.console.verdictLogSize,
    ...(now !== undefined && { now }),
    onDropped: (count, reason) => log.warn({ count, reason }, 'verdicts not recorded in PostgreSQL'),
  });
  const replicas = config.console.enabled ? new PostgresReplicaPresence(pool) : undefined;
  await replicas?.start();
  return {
    store,
    ...(replicas !== undefined && { replicas }),
    close: async () => {
      await store.close();
      await replicas?.stop();
      await pool.end().catch(() => undefined);
    },
  };
}

/**
 * What the recorder looks up beside a verdict: the registered reference values (the whole record, with
 * its expiration, from the built-in RVPS's namespace; only the value from a remote RVPS or attestation
 * service), the stored attestation policies (the built-in service's), and where policy versions go.
 */
export function recorderOptions(w: {
  readonly config: KbsConfig;
  readonly storage: KvStorage;
  readonly attestation: Pick<AttestationService, 'getReferenceValue'>;
  readonly logger: Logger;
  readonly now?: (() => number) | undefined;
}): VerdictRecorderOptions {
  const as = w.config.attestationService;
  const now = w.now ?? Date.now;
  const builtin = as.grpc === undefined;
  return {
    referenceValue:
      builtin && as.rvps.type !== 'GrpcRemote'
        ? async (name) => {
            const rv = await readReferenceValue(w.storage, name);
            if (rv === undefined) return undefined;
            return { value: rv.value, expiration: rv.expiration, expired: isExpired(rv, new Date(now())) };
          }
        : async (name) => {
            const value = await w.attestation.getReferenceValue(name);
            return value === undefined ? undefined : { value };
          },
    ...(builtin && { attestationPolicy: recentPolicyText(w.storage, now) }),
    versions: new PolicyVersions(w.storage, {
      now,
      logger: w.logger.child({ component: 'verdict-log' }),
    }),
  };
}

/** Policy ids whose text is kept for reuse, and for how long (as the attestation service revalidates). */
const POLICY_TEXT_IDS = 64;
const POLICY_TEXT_TTL_MS = 1000;

/**
 * The stored text of an attestation policy, read at most once a second per id: a busy KBS records many
 * attestations a second, each naming the policy that appraised it.
 */
function recentPolicyText(
  storage: KvStorage,
  now: () => number,
): (id: string) => Promise<string | undefined> {
  const recent = new Map<string, { text: string | undefined; at: number }>();
  return async (id) => {
    const hit = recent.get(id);
    if (hit !== undefined && now() - hit.at < POLICY_TEXT_TTL_MS) return hit.text;
    const raw = await storage.get('attestation_service_policy', `${id}.rego`);
    const text = raw === undefined ? undefined : Buffer.from(raw).toString('utf8');
    if (recent.size >= POLICY_TEXT_IDS) recent.clear();
    recent.set(id, { text, at: now() });
    return text;
  };
}
