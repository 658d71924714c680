import { describe, expect, it } from 'vitest';
import { codec } from './proto.js';
import { parseRuncJson, statsFromRunc } from './stats.js';

// What runc 1.1 printed for a one-process container on cgroup v1 (trimmed).
const EVENT = `{"type":"stats","id":"t3","data":{"cpu":{"usage":{"total":11363306,"percpu":[801824,10561482],"kernel":4000000,"user":8000000},"throttling":{"periods":3,"throttledPeriods":1,"throttledTime":500}},"memory":{"cache":4096,"usage":{"limit":9223372036854771712,"usage":282624,"max":2510848,"failcnt":0},"swap":{"limit":9223372036854771712,"usage":282624,"max":2510848,"failcnt":0},"kernel":{"limit":9223372036854771712,"usage":143360,"max":507904,"failcnt":0},"raw":{"rss":24576,"pgfault":728}},"pids":{"current":1,"limit":42},"blkio":{"ioServiceBytesRecursive":[{"major":8,"minor":0,"op":"Read","value":4096}]},"hugetlb":{"2MB":{"usage":0,"max":2097152,"failcnt":1}},"intel_rdt":{},"network_interfaces":null}}`;

describe('StatsContainer from runc events --stats', () => {
  it("keeps runc's no-limit value exact", () => {
    const event = parseRuncJson(EVENT);
    expect((event.data as { memory: { usage: { limit: unknown } } }).memory.usage.limit).toBe(
      9223372036854771712n,
    );
  });

  it("maps runc's names onto kata's CgroupStats and encodes as StatsContainerResponse", () => {
    const stats = statsFromRunc(parseRuncJson(EVENT).data as Record<string, unknown>);
    const response = codec('StatsContainerResponse');
    const back = response.decode(response.encode(stats)).cgroup_stats;
    expect(back.cpu_stats).toEqual({
      cpu_usage: {
        total_usage: 11363306n,
        percpu_usage: [801824n, 10561482n],
        usage_in_kernelmode: 4000000n,
        usage_in_usermode: 8000000n,
      },
      throttling_data: { periods: 3n, throttled_periods: 1n, throttled_time: 500n },
    });
    expect(back.memory_stats.cache).toBe(4096n);
    expect(back.memory_stats.usage).toEqual({
      usage: 282624n,
      max_usage: 2510848n,
      failcnt: 0n,
      limit: 9223372036854771712n,
    });
    expect(back.memory_stats.kernel_usage.usage).toBe(143360n);
    expect(back.memory_stats.stats).toEqual({ rss: 24576n, pgfault: 728n });
    expect(back.pids_stats).toEqual({ current: 1n, limit: 42n });
    expect(back.blkio_stats.io_service_bytes_recursive).toEqual([
      { major: 8n, minor: 0n, op: 'Read', value: 4096n },
    ]);
    expect(back.blkio_stats.io_serviced_recursive).toEqual([]);
    expect(back.hugetlb_stats).toEqual({ '2MB': { usage: 0n, max_usage: 2097152n, failcnt: 1n } });
  });
});
