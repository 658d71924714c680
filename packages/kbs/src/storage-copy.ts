// `kbs-storage copy --from <kbs-config> --to <kbs-config> [--apply]`: copies what a KBS keeps (the
// resource policy, resources, attestation policies, reference values, the provisioner plugin's keys) from the stores one configuration
// names to those another names, byte for byte — e.g. from LocalFs to a shared PostgreSQL database before
// scaling out. A dry run by default: it reads both sides and reports what it would do. Sessions are not
// copied (they last minutes and the guests redo their handshake).
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { type CommandIo, processIo, runCommand, UsageError } from '@broker/cli';
import type { KvStorage, Namespace } from '@broker/kv-storage';
import {
  describePostgresTarget,
  LocalFsStorage,
  LocalJsonStorage,
  PostgresStorage,
  PostgresStorageError,
  postgresTarget,
  REDIS_URL_ENV,
  RedisStorage,
  redactRedisUrl,
} from '@broker/kv-storage';
import { type KbsConfig, loadKbsConfig, type StorageType } from './config.js';
import { KBS_VERSION } from './metrics.js';

/** What a KBS keeps for good, in the order it is copied. */
export const COPIED_NAMESPACES: readonly Namespace[] = [
  'kbs',
  'repository',
  'attestation_service_policy',
  'reference_value',
  'provisioner',
];

/** Where one namespace of a configuration lives. */
interface Place {
  readonly type: StorageType;
  /** Names the store, for messages and to tell two configurations' stores apart. */
  readonly where: string;
  readonly open: (mode: 'read' | 'write') => Promise<KvStorage | undefined>;
}

function placeOf(config: KbsConfig, ns: Namespace, env: Readonly<Record<string, string | undefined>>): Place {
  const sb = config.storageBackend;
  const as = config.attestationService;
  const plugin = config.resourcePlugin;
  if (ns === 'repository' && plugin?.backend === 'LocalFs') {
    const dir = resolve(plugin.dirPath);
    return {
      type: 'LocalFs',
      where: `LocalFs ${dir} (legacy resource plugin)`,
      open: async (mode) =>
        mode === 'read' && !existsSync(dir)
          ? undefined
          : LocalFsStorage.open({ dirPath: dir, namespaceDirs: { repository: dir } }),
    };
  }
  const type: StorageType =
    ns === 'attestation_service_policy'
      ? (as.storageType ?? sb.storageType)
      : ns === 'reference_value'
        ? (as.rvps.storageType ?? as.storageType ?? sb.storageType)
        : sb.storageType;
  switch (type) {
    case 'Memory':
      return {
        type,
        where: 'Memory',
        open: () => {
          throw new UsageError(
            `${ns} is in a Memory store, which lives only inside a running KBS: nothing to copy from or to`,
          );
        },
      };
    case 'LocalFs': {
      const dir = resolve(sb.localFsDir as string);
      return {
        type,
        where: `LocalFs ${dir}`,
        open: async (mode) =>
          mode === 'read' && !existsSync(dir) ? undefined : LocalFsStorage.open({ dirPath: dir }),
      };
    }
    case 'LocalJson': {
      const dir = resolve(sb.localJsonDir as string);
      return {
        type,
        where: `LocalJson ${dir}`,
        open: async (mode) =>
          mode === 'read' && !existsSync(dir) ? undefined : LocalJsonStorage.open({ dirPath: dir }),
      };
    }
    case 'Redis': {
      const fromEnv = env[REDIS_URL_ENV];
      const url = fromEnv !== undefined && fromEnv !== '' ? fromEnv : (sb.redisUrl as string);
      return { type, where: `Redis ${redactRedisUrl(url)}`, open: async () => RedisStorage.open({ url }) };
    }
    case 'Postgres': {
      const target = postgresTarget(sb.postgres as NonNullable<typeof sb.postgres>, env);
      return {
        type,
        where: `PostgreSQL ${describePostgresTarget(target)}`,
        // Reading never creates a table: a missing one is an empty namespace.
        open: async (mode) => PostgresStorage.open({ target, createTables: mode === 'write' }),
      };
    }
  }
}

export interface NamespaceReport {
  readonly namespace: Namespace;
  readonly from: string;
  readonly to: string;
  /** Keys in the source. */
  readonly keys: number;
  /** Not in the destination: created by --apply. */
  readonly create: number;
  /** The same bytes on both sides. */
  readonly identical: number;
  /** Different bytes in the destination: replaced only with --overwrite, otherwise kept. */
  readonly differ: number;
  /** In the destination only: left alone. */
  readonly onlyInDestination: number;
  /** Written (created or replaced) by --apply, each read back and compared. */
  readonly written: number;
  /** Keys the destination refused or that failed to copy, with the reason. */
  readonly failed: readonly { readonly key: string; readonly reason: string }[];
}

export interface CopyOptions {
  readonly apply: boolean;
  readonly overwrite: boolean;
  readonly namespaces?: readonly Namespace[];
  readonly env?: Readonly<Record<string, string | undefined>>;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
    Buffer.from(b.buffer, b.byteOffset, b.byteLength),
  );
}

async function listOrEmpty(s: KvStorage | undefined, ns: Namespace): Promise<string[]> {
  if (s === undefined) return [];
  try {
    return await s.list(ns);
  } catch (e) {
    if (e instanceof PostgresStorageError && e.code === 'MISSING_TABLE') return [];
    throw e;
  }
}

async function getOrUndefined(
  s: KvStorage | undefined,
  ns: Namespace,
  key: string,
): Promise<Uint8Array | undefined> {
  if (s === undefined) return undefined;
  try {
    return await s.get(ns, key);
  } catch (e) {
    if (e instanceof PostgresStorageError && e.code === 'MISSING_TABLE') return undefined;
    throw e;
  }
}

/** Compares (and with `apply`, copies) every namespace; the stores are closed before it returns. */
export async function copyStores(
  from: KbsConfig,
  to: KbsConfig,
  options: CopyOptions,
): Promise<NamespaceReport[]> {
  const env = options.env ?? process.env;
  const namespaces = options.namespaces ?? COPIED_NAMESPACES;
  const opened = new Map<string, Promise<KvStorage | undefined>>();
  const openOnce = (p: Place, mode: 'read' | 'write') => {
    const k = `${mode}\u0000${p.where}`;
    let s = opened.get(k);
    if (s === undefined) {
      s = p.open(mode);
      opened.set(k, s);
    }
    return s;
  };
  const reports: NamespaceReport[] = [];
  try {
    for (const ns of namespaces) {
      const src = placeOf(from, ns, env);
      const dst = placeOf(to, ns, env);
      if (src.where === dst.where) {
        throw new UsageError(`${ns}: --from and --to name the same store (${src.where}): nothing to copy`);
      }
      const source = await openOnce(src, 'read');
      const dest = await openOnce(dst, options.apply ? 'write' : 'read');
      const keys = (await listOrEmpty(source, ns)).sort();
      const destKeys = new Set(await listOrEmpty(dest, ns));
      let create = 0;
      let identical = 0;
      let differ = 0;
      let written = 0;
      const failed: { key: string; reason: string }[] = [];
      for (const key of keys) {
        const value = await getOrUndefined(source, ns, key);
        // Deleted from the source since it was listed.
        if (value === undefined) continue;
        const there = destKeys.has(key) ? await getOrUndefined(dest, ns, key) : undefined;
        if (there !== undefined && same(value, there)) {
          identical++;
          continue;
        }
        if (there === undefined) create++;
        else differ++;
        if (!options.apply || (there !== undefined && !options.overwrite)) continue;
        try {
          const d = dest as KvStorage;
          const wrote = await d.set(ns, key, value, { overwrite: there !== undefined });
          const back = await d.get(ns, key);
          if (!wrote) failed.push({ key, reason: 'written meanwhile by someone else; left as it is' });
          else if (back === undefined || !same(back, value))
            failed.push({ key, reason: 'the value read back differs from the source' });
          else written++;
        } catch (e) {
          failed.push({ key, reason: (e as Error).message });
        }
      }
      const sourceKeys = new Set(keys);
      reports.push({
        namespace: ns,
        from: src.where,
        to: dst.where,
        keys: keys.length,
        create,
        identical,
        differ,
        onlyInDestination: [...destKeys].filter((k) => !sourceKeys.has(k)).length,
        written,
        failed,
      });
    }
  } finally {
    for (const s of opened.values()) {
      const store = await s.catch(() => undefined);
      await store?.close().catch(() => undefined);
    }
  }
  return reports;
}

const HELP = `Usage: kbs-storage copy --from <KBS-CONFIG> --to <KBS-CONFIG> [--apply] [--overwrite] [--namespace <NS>]... [--json]

Copies what a KBS keeps — the resource policy (kbs), resources (repository), attestation policies
(attestation_service_policy), reference values (reference_value) and the provisioner plugin's LUKS
keys (provisioner) — from the stores of one KBS
configuration file to those of another, byte for byte: e.g. from LocalFs to PostgreSQL or Redis before
running replicas. Each side's stores are the ones its KBS would use ([storage_backend], the attestation
service's storage_type overrides, a legacy LocalFs resource plugin); POSTGRES_URL and REDIS_URL apply to
both sides, as they do to a KBS. Sessions are not copied.

Without --apply nothing is written: the counts say what would be. Values that differ in the destination
are kept unless --overwrite is given; keys only in the destination are always left alone. Every value
written is read back and compared.

Options:
      --from <FILE>       KBS configuration whose stores are read
      --to <FILE>         KBS configuration whose stores are written
      --apply             Write (default: a dry run)
      --overwrite         Replace values that differ in the destination
      --namespace <NS>    Only this namespace (repeatable): ${COPIED_NAMESPACES.join(', ')}
      --json              Print the report as JSON
  -h, --help              Print help
  -V, --version           Print version
`;

export function kbsStorageMain(argv: string[], io: CommandIo = processIo): Promise<number> {
  return runCommand(
    {
      name: 'kbs-storage',
      version: KBS_VERSION,
      help: HELP,
      subcommands: ['copy'],
      exitStatus: [[1, 'a store failed, or some keys could not be copied (listed)']],
    },
    argv,
    async ({ rest }) =>
      runCommand(
        {
          name: 'kbs-storage copy',
          version: KBS_VERSION,
          help: HELP,
          options: {
            from: { type: 'string' },
            to: { type: 'string' },
            apply: { type: 'boolean' },
            overwrite: { type: 'boolean' },
            namespace: { type: 'string', multiple: true },
            json: { type: 'boolean' },
          },
        },
        rest,
        async ({ values }) => {
          if (values.from === undefined) throw new UsageError("missing option '--from'");
          if (values.to === undefined) throw new UsageError("missing option '--to'");
          const namespaces = (values.namespace ?? []) as string[];
          for (const ns of namespaces) {
            if (!(COPIED_NAMESPACES as readonly string[]).includes(ns)) {
              throw new UsageError(
                `--namespace ${JSON.stringify(ns)}: expected one of ${COPIED_NAMESPACES.join(', ')}`,
              );
            }
          }
          const [from, to] = [await loadKbsConfig(values.from), await loadKbsConfig(values.to)];
          const apply = values.apply === true;
          const reports = await copyStores(from, to, {
            apply,
            overwrite: values.overwrite === true,
            ...(namespaces.length > 0 && { namespaces: namespaces as Namespace[] }),
            ...(io.env !== undefined && { env: io.env }),
          });
          if (values.json === true) io.out(`${JSON.stringify({ apply, namespaces: reports }, null, 2)}\n`);
          else io.out(renderReport(reports, apply, values.overwrite === true));
          return reports.some((r) => r.failed.length > 0) ? 1 : 0;
        },
        io,
      ),
    io,
  );
}

function renderReport(reports: readonly NamespaceReport[], apply: boolean, overwrite: boolean): string {
  const lines: string[] = [apply ? 'copied:' : 'dry run (nothing written; --apply copies):'];
  for (const r of reports) {
    lines.push(`${r.namespace}: ${r.from} -> ${r.to}`);
    const differ = `${r.differ} differ${overwrite ? '' : ' (kept; --overwrite replaces them)'}`;
    lines.push(
      `  ${r.keys} keys: ${r.create} ${apply ? 'new' : 'to create'}, ${r.identical} identical, ${differ}, ${r.onlyInDestination} only in the destination (left alone)`,
    );
    if (apply) lines.push(`  ${r.written} written and read back equal`);
    for (const f of r.failed) lines.push(`  failed: ${JSON.stringify(f.key)}: ${f.reason}`);
  }
  return `${lines.join('\n')}\n`;
}
