/**
 * StatsContainer from `runc events --stats`: runc's cgroup statistics (its JSON names) mapped onto
 * kata's `CgroupStats` (agent.proto). Integers too large for a double (runc's "no limit" is near 2^63)
 * are read as bigint.
 */
import type { Decoded } from './proto.js';

type Json = Record<string, unknown>;

/** runc's JSON, with integers that a double cannot hold as bigint. */
export function parseRuncJson(text: string): Json {
  return JSON.parse(text, (_key, value, context?: { source?: string }) =>
    typeof value === 'number' &&
    !Number.isSafeInteger(value) &&
    context?.source &&
    /^\d+$/.test(context.source)
      ? BigInt(context.source)
      : value,
  ) as Json;
}

const obj = (v: unknown): Json =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const n = (v: unknown): number | bigint => (typeof v === 'number' || typeof v === 'bigint' ? v : 0);

function memoryData(m: unknown): Decoded {
  const d = obj(m);
  return { usage: n(d.usage), max_usage: n(d.max), failcnt: n(d.failcnt), limit: n(d.limit) };
}

const BLKIO: readonly [string, string][] = [
  ['ioServiceBytesRecursive', 'io_service_bytes_recursive'],
  ['ioServicedRecursive', 'io_serviced_recursive'],
  ['ioQueueRecursive', 'io_queued_recursive'],
  ['ioServiceTimeRecursive', 'io_service_time_recursive'],
  ['ioWaitTimeRecursive', 'io_wait_time_recursive'],
  ['ioMergedRecursive', 'io_merged_recursive'],
  ['ioTimeRecursive', 'io_time_recursive'],
  ['sectorsRecursive', 'sectors_recursive'],
];

/** kata's `StatsContainerResponse` from the `data` of runc's stats event. Network statistics are not collected. */
export function statsFromRunc(data: Json): Decoded {
  const cpu = obj(data.cpu);
  const usage = obj(cpu.usage);
  const throttling = obj(cpu.throttling);
  const memory = obj(data.memory);
  const pids = obj(data.pids);
  const blkio = obj(data.blkio);
  const raw = obj(memory.raw);
  return {
    cgroup_stats: {
      cpu_stats: {
        cpu_usage: {
          total_usage: n(usage.total),
          percpu_usage: arr(usage.percpu).map(n),
          usage_in_kernelmode: n(usage.kernel),
          usage_in_usermode: n(usage.user),
        },
        throttling_data: {
          periods: n(throttling.periods),
          throttled_periods: n(throttling.throttledPeriods),
          throttled_time: n(throttling.throttledTime),
        },
      },
      memory_stats: {
        cache: n(memory.cache),
        usage: memoryData(memory.usage),
        swap_usage: memoryData(memory.swap),
        kernel_usage: memoryData(memory.kernel),
        use_hierarchy: memory.use_hierarchy === true,
        stats: Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, n(v)])),
      },
      pids_stats: { current: n(pids.current), limit: n(pids.limit) },
      blkio_stats: Object.fromEntries(
        BLKIO.map(([from, to]) => [
          to,
          arr(blkio[from]).map((e) => {
            const entry = obj(e);
            return {
              major: n(entry.major),
              minor: n(entry.minor),
              op: String(entry.op ?? ''),
              value: n(entry.value),
            };
          }),
        ]),
      ),
      hugetlb_stats: Object.fromEntries(
        Object.entries(obj(data.hugetlb)).map(([size, h]) => {
          const d = obj(h);
          return [size, { usage: n(d.usage), max_usage: n(d.max), failcnt: n(d.failcnt) }];
        }),
      ),
    },
    network_stats: [],
  };
}
