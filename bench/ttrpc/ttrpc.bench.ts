// Unary ttrpc round trips over a unix socket against the floor: a raw
// unix-socket echo of a same-sized message, measured in the same run.
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TtrpcClient } from '../../packages/ttrpc/src/client.js';
import { TtrpcServer } from '../../packages/ttrpc/src/server.js';
import { percentile, timeEach } from '../helpers.js';

const WARMUP = 500;
const SEQUENTIAL = 5000;
const CONCURRENT_TOTAL = 20000;
const IN_FLIGHT = 64;
const PAYLOAD = new Uint8Array(64).fill(0x61);

/** A raw echo over a unix socket: write a message of the same size as the ttrpc frame, wait for all of it back. */
async function rawEcho(
  path: string,
  size: number,
): Promise<{ once: () => Promise<void>; close: () => void }> {
  const server = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => server.listen(path, r));
  const sock = net.createConnection({ path });
  await new Promise<void>((r) => sock.once('connect', () => r()));
  const msg = Buffer.alloc(size, 0x61);
  let want = 0;
  let wake: (() => void) | null = null;
  sock.on('data', (chunk: Buffer) => {
    want -= chunk.length;
    if (want <= 0 && wake) {
      const w = wake;
      wake = null;
      w();
    }
  });
  return {
    once: () =>
      new Promise<void>((resolve) => {
        want = size;
        wake = resolve;
        sock.write(msg);
      }),
    close: () => {
      sock.destroy();
      server.close();
    },
  };
}

export async function run(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'ttrpc-bench-'));
  const server = new TtrpcServer();
  server.register('bench.Echo', { Echo: async (req) => req });
  const path = join(dir, 'ttrpc.sock');
  await server.listen({ path });
  const client = await TtrpcClient.connect({ path });
  const call = async () => {
    await client.call('bench.Echo', 'Echo', PAYLOAD);
  };
  // Request frame: 10-byte header + envelope (service, method, payload) — the raw echo moves as many bytes.
  const frameSize = 10 + 2 + 'bench.Echo'.length + 2 + 'Echo'.length + 2 + PAYLOAD.length;
  const raw = await rawEcho(join(dir, 'raw.sock'), frameSize);
  try {
    await timeEach(WARMUP, raw.once);
    await timeEach(WARMUP, call);
    // Interleave the two measurements in halves so drift on a shared machine hits both.
    const rawTimes: number[] = [];
    const ttrpcTimes: number[] = [];
    for (let half = 0; half < 2; half++) {
      rawTimes.push(...(await timeEach(SEQUENTIAL / 2, raw.once)));
      ttrpcTimes.push(...(await timeEach(SEQUENTIAL / 2, call)));
    }
    rawTimes.sort((a, b) => a - b);
    ttrpcTimes.sort((a, b) => a - b);
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

    // Pipelined: IN_FLIGHT calls outstanding on one connection.
    const t0 = process.hrtime.bigint();
    let issued = 0;
    const worker = async () => {
      while (issued < CONCURRENT_TOTAL) {
        issued++;
        await call();
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    const concurrentSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

    const ttrpcRps = 1e6 / mean(ttrpcTimes);
    const rawRps = 1e6 / mean(rawTimes);
    return {
      ttrpc_unary_rps_sequential: ttrpcRps,
      ttrpc_unary_p50_us: percentile(ttrpcTimes, 50),
      ttrpc_unary_p99_us: percentile(ttrpcTimes, 99),
      raw_unix_echo_rps_sequential: rawRps,
      raw_unix_echo_p50_us: percentile(rawTimes, 50),
      raw_unix_echo_p99_us: percentile(rawTimes, 99),
      ratio_p50_ttrpc_over_raw: percentile(ttrpcTimes, 50) / percentile(rawTimes, 50),
      ratio_rps_raw_over_ttrpc: rawRps / ttrpcRps,
      ttrpc_unary_rps_64_in_flight: CONCURRENT_TOTAL / concurrentSeconds,
      payload_bytes: PAYLOAD.length,
    };
  } finally {
    raw.close();
    client.close();
    await server.close({ graceMs: 0 });
    await rm(dir, { recursive: true, force: true });
  }
}
