// Memory under sustained handshakes: a KBS process (this module forked, with --expose-gc) serves sample-TEE
// handshakes (auth, attest, resource) from a few keep-alive loops for KBS_SOAK_SECONDS (default 300 s),
// and its memory is read at regular points: RSS from /proc/<pid>/status, the V8 heap before and after a
// full collection, and the live RCAR sessions (count and bytes). The curve goes to
// dist/bench/kbs.soak.curve.json.
//
// Growth that levels off and a leak look alike at first; what tells them apart is what a full collection
// leaves against what the KBS has to keep. Sessions live for `[attestation_service] timeout` (here
// KBS_SOAK_SESSION_MINUTES, default 1) and are swept every 60 s, so under a steady load their number, and
// the memory they hold (their records are byte arrays: external memory, not heap), settle; the rest
// (the residual) must not follow the number of handshakes. RSS itself is mostly the heap V8 has committed
// (`heapTotal`), which grows with the allocation rate and is kept, not what is live.
// The run fails when RSS exceeds KBS_SOAK_MAX_RSS_MB (default 512), or when the residual grew by more
// than KBS_SOAK_MAX_RESIDUAL_GROWTH_MB (default 32) between the baseline (the first sample after a fifth
// of the run) and the last sample, either of which a leak would cross given time. The residual still
// holds the sessions' map entries (a few hundred bytes each), so it moves a little with their number.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { fileURLToPath } from 'node:url';
import { getHeapStatistics } from 'node:v8';
import { generateTeeKeyPair, type TeeKeyPair } from '@broker/protocol';
import pino from 'pino';
import { parseKbsConfigText } from '../../packages/kbs/src/config.js';
import { startKbs } from '../../packages/kbs/src/kbs.js';
import { call, sampleHandshake } from '../helpers.js';

const SERVER_ENV = 'KBS_SOAK_SERVER';
const CONCURRENCY = 4;
const MB = 1024 * 1024;

const envNumber = (name: string, fallback: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
};

interface ServerStats {
  readonly rss: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly arrayBuffers: number;
  readonly heapUsedAfterGc: number;
  readonly externalAfterGc: number;
  readonly heapLimit: number;
  readonly sessions: number;
  readonly sessionBytes: number;
}

/** The KBS side: serves until the parent disconnects; answers `stats` with its memory. */
async function serve(): Promise<void> {
  const minutes = envNumber('KBS_SOAK_SESSION_MINUTES', 1);
  const config = parseKbsConfigText(`
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[attestation_service]
timeout = ${minutes}
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "resource"
`);
  // As the `kbs` command logs: a line per request, written synchronously (here to /dev/null).
  const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true }));
  const kbs = await startKbs(config, { logger });
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on('message', (m) => {
    if (m !== 'stats') return;
    const before = process.memoryUsage();
    gc?.();
    const after = process.memoryUsage();
    const stats: ServerStats = {
      rss: rssOf(process.pid),
      heapUsed: before.heapUsed,
      heapTotal: before.heapTotal,
      external: before.external,
      arrayBuffers: before.arrayBuffers,
      heapUsedAfterGc: after.heapUsed,
      externalAfterGc: after.external,
      heapLimit: getHeapStatistics().heap_size_limit,
      sessions: kbs.sessions.size,
      sessionBytes: kbs.sessions.bytes,
    };
    process.send?.(stats);
  });
  process.on('disconnect', () => {
    void kbs.close().then(() => process.exit(0));
  });
  process.send?.({ url: kbs.urls[0] });
}

if (process.env[SERVER_ENV] === '1') void serve();

/** VmRSS of a process, in bytes (from /proc, as `ps` and the kubelet read it). */
function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? Number.NaN : Number(m[1]) * 1024;
}

const AUTH = JSON.stringify({
  version: '0.4.0',
  tee: 'sample',
  'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
});

async function handshake(agent: Agent, base: URL, key: TeeKeyPair): Promise<void> {
  await sampleHandshake(agent, base, key, AUTH, '/kbs/v0/resource/default/soak/secret');
}

interface Sample {
  readonly seconds: number;
  readonly handshakes: number;
  readonly rssMb: number;
  readonly heapUsedMb: number;
  readonly heapTotalMb: number;
  readonly externalMb: number;
  readonly heapAfterGcMb: number;
  readonly externalAfterGcMb: number;
  readonly sessions: number;
  readonly sessionMb: number;
  /** What a full collection leaves (heap and external memory) besides the session records. */
  readonly residualMb: number;
}

const round = (v: number) => Math.round(v * 10) / 10;

export async function run(): Promise<Record<string, number>> {
  const seconds = envNumber('KBS_SOAK_SECONDS', 300);
  const every = Math.max(1, seconds / 30);
  const maxRssMb = envNumber('KBS_SOAK_MAX_RSS_MB', 512);
  const maxResidualGrowthMb = envNumber('KBS_SOAK_MAX_RESIDUAL_GROWTH_MB', 32);
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [SERVER_ENV]: '1' },
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const next = <T>() =>
    new Promise<T>((resolve, reject) => {
      const onExit = () => reject(new Error('the KBS process exited'));
      child.once('exit', onExit);
      child.once('message', (m) => {
        child.off('exit', onExit);
        resolve(m as T);
      });
    });
  const { url } = await next<{ url: string }>();
  const base = new URL(url);
  const admin = new Agent({ keepAlive: true });
  await call(
    admin,
    base,
    'POST',
    '/kbs/v0/resource/default/soak/secret',
    {},
    randomBytes(32).toString('hex'),
  );
  const allow = Buffer.from('package policy\ndefault allow := true\n').toString('base64url');
  await call(admin, base, 'POST', '/kbs/v0/resource-policy', {}, JSON.stringify({ policy: allow }));
  admin.destroy();

  const keys = Array.from({ length: CONCURRENCY }, () => generateTeeKeyPair());
  let handshakes = 0;
  let failure: Error | undefined;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const loops = keys.map(async (key) => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (performance.now() < deadline && failure === undefined) {
        await handshake(agent, base, key);
        handshakes++;
      }
    } catch (e) {
      failure = e as Error;
    } finally {
      agent.destroy();
    }
  });

  const samples: Sample[] = [];
  const sample = async () => {
    child.send('stats');
    const s = await next<ServerStats>();
    samples.push({
      seconds: round((performance.now() - started) / 1000),
      handshakes,
      rssMb: round(s.rss / MB),
      heapUsedMb: round(s.heapUsed / MB),
      heapTotalMb: round(s.heapTotal / MB),
      externalMb: round(s.external / MB),
      heapAfterGcMb: round(s.heapUsedAfterGc / MB),
      externalAfterGcMb: round(s.externalAfterGc / MB),
      sessions: s.sessions,
      sessionMb: round(s.sessionBytes / MB),
      residualMb: round((s.heapUsedAfterGc + s.externalAfterGc - s.sessionBytes) / MB),
    });
  };
  await sample();
  const sampler = (async () => {
    while (performance.now() < deadline && failure === undefined) {
      await new Promise((r) => setTimeout(r, every * 1000));
      await sample();
    }
  })();
  await Promise.all([...loops, sampler]);
  child.disconnect();
  await exited;
  if (failure !== undefined) throw failure;

  // The first seconds fill the code and the bounded caches (verdict log, token and key caches): the
  // baseline is the first sample after a fifth of the run (at least 10 s).
  const warm = Math.max(10, seconds / 5);
  const first = samples.find((s) => s.seconds >= warm) ?? samples[samples.length - 1];
  const last = samples[samples.length - 1];
  if (first === undefined || last === undefined) throw new Error('no memory samples');
  const peakRss = Math.max(...samples.map((s) => s.rssMb));
  const result = {
    seconds: round((performance.now() - started) / 1000),
    handshakes,
    handshakes_per_s: round(handshakes / seconds),
    baseline_s: first.seconds,
    rss_baseline_mb: first.rssMb,
    rss_end_mb: last.rssMb,
    rss_peak_mb: peakRss,
    heap_after_gc_baseline_mb: first.heapAfterGcMb,
    heap_after_gc_end_mb: last.heapAfterGcMb,
    heap_total_end_mb: last.heapTotalMb,
    external_after_gc_end_mb: last.externalAfterGcMb,
    sessions_end: last.sessions,
    session_mb_end: last.sessionMb,
    sessions_baseline: first.sessions,
    residual_baseline_mb: first.residualMb,
    residual_end_mb: last.residualMb,
    residual_growth_mb: round(last.residualMb - first.residualMb),
  };
  writeFileSync(
    new URL('./kbs.soak.curve.json', import.meta.url),
    `${JSON.stringify({ result, samples }, null, 2)}\n`,
  );
  if (peakRss > maxRssMb) {
    throw new Error(`KBS RSS reached ${peakRss} MB, over the bound of ${maxRssMb} MB (KBS_SOAK_MAX_RSS_MB)`);
  }
  if (result.residual_growth_mb > maxResidualGrowthMb) {
    throw new Error(
      `what a full collection leaves in the KBS besides its session records grew by ${result.residual_growth_mb} MB over ${handshakes} handshakes, over the bound of ${maxResidualGrowthMb} MB (KBS_SOAK_MAX_RESIDUAL_GROWTH_MB): a leak?`,
    );
  }
  return result;
}
