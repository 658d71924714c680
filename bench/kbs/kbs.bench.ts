// KBS throughput on loopback with the sample TEE (ARCHITECTURE §7), against the cost of its own crypto
// measured in the same run.
//
// The KBS runs in a worker thread (its own event loop and core, as a separate process would have) over
// plain HTTP on 127.0.0.1 with Memory storage, trustee's default attestation policy and the allow_all
// resource policy. Its structured logs (an access line per request) are written to /dev/null one
// synchronous write per line, as the `kbs` command writes its stdout (an asynchronous destination would
// add a thread-pool round trip per line that the command does not pay). The client side runs one
// keep-alive connection per load loop from the main thread, with a minimal HTTP/1.1 client (RawClient)
// so that the load generator takes as little of the shared cores as it can. A bare HTTP server on the
// worker's loop gives the transport floor.
//  - handshake: POST /auth, POST /attest (sample evidence), GET /resource with the session cookie;
//  - resource: GET /resource with a valid Bearer token (verified on every request, policy, JWE);
//  - floor: ES256 sign + verify (the EAR token), ECDH-ES+A256KW on P-256 and AES-256-GCM of the 32-byte
//    secret (the JWE): what one handshake cannot avoid, measured alone on one core, in wall time (the
//    `*_vs_floor` throughput ratios) and in CPU time (`*_cpu_vs_floor`: floor CPU / server CPU per op).
//
// Then the scale-out table, all in the same run: KBS processes (this module forked) on one real
// redis-server — 1, 2 and 3 replicas, and one KBS with `worker_count = 2` — and the same on one real
// PostgreSQL server (Debian's), against one process with Memory storage, under the same load, with each step of a handshake sent to the next replica in turn
// (sessions cross replicas, as behind a load balancer without affinity). Besides throughput, it reads the
// CPU time of every KBS process and of the store (redis-server, or PostgreSQL's processes) from /proc,
// and counts the store's operations per handshake (Redis commands, PostgreSQL transactions), which is
// what the prediction for larger machines rests on.
import { fork } from 'node:child_process';
import cluster from 'node:cluster';
import { createCipheriv, diffieHellman, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import {
  freeLoopbackPort,
  type PostgresServer,
  startPostgresServer,
  startRedisServer,
} from '@broker/kv-storage/testing';
import { concatKdf, generateTeeKeyPair, type TeeKeyPair } from '@broker/protocol';
import pino from 'pino';
import { createClient } from 'redis';
import { reportListening, superviseWorkers } from '../../packages/kbs/src/cluster.js';
import { parseKbsConfigText } from '../../packages/kbs/src/config.js';
import { startKbs } from '../../packages/kbs/src/kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from '../../packages/kbs/src/policy/resource-policy.js';
import { type Answer, call, percentile, processCpuUs, sampleAttestation } from '../helpers.js';

const ROLE = 'kbs-bench-server';
const CONCURRENCY = 8;
const WARMUP_MS = 1_000;
const MEASURE_MS = 5_000;
const SECRET = randomBytes(32);

async function serve(): Promise<void> {
  const config = parseKbsConfigText(`
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "resource"
`);
  const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true }));
  const kbs = await startKbs(config, { logger });
  // The transport floor: the same event loop answering a fixed JSON body of a JWE's size.
  const body = Buffer.from(
    JSON.stringify({
      protected: 'x'.repeat(200),
      encrypted_key: 'x'.repeat(54),
      iv: 'x'.repeat(16),
      ciphertext: 'x'.repeat(43),
      tag: 'x'.repeat(22),
    }),
  );
  const bare = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) });
    res.end(body);
  });
  await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
  parentPort?.on('message', async (m: unknown) => {
    if (m === 'cpu') {
      // CPU time of this thread only: what the KBS itself spent, whatever else runs on the machine.
      const u = process.threadCpuUsage();
      parentPort?.postMessage({ cpuUs: u.user + u.system });
    } else if (m === 'close') {
      await kbs.close();
      await new Promise((r) => {
        bare.close(r);
        bare.closeAllConnections();
      });
      parentPort?.postMessage('closed');
    }
  });
  const port = (bare.address() as { port: number }).port;
  parentPort?.postMessage({ url: kbs.urls[0], bare: `http://127.0.0.1:${port}` });
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === ROLE) void serve();

/** Set in the environment of a forked KBS process of the scale-out table: its configuration (TOML). */
const REPLICA_ENV = 'KBS_BENCH_REPLICA_CONFIG';

/** A KBS process of the scale-out table: serves until the bench says `close` (or SIGTERM, for workers). */
async function replica(): Promise<void> {
  const config = parseKbsConfigText(process.env[REPLICA_ENV] as string);
  const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true }));
  const closeRequested = new Promise<string>((resolve) => {
    process.on('message', (m) => {
      if (m === 'close') resolve('close');
    });
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  if ((config.httpServer.workerCount ?? 1) > 1 && cluster.isPrimary) {
    const code = await superviseWorkers({
      workerCount: config.httpServer.workerCount as number,
      logger,
      argv: [],
      stop: closeRequested,
    });
    process.exit(code);
  }
  const kbs = await startKbs(config, { logger });
  reportListening(kbs.urls);
  await closeRequested;
  await kbs.close();
  if (cluster.isWorker) cluster.worker?.disconnect();
  process.exit(0);
}

if (isMainThread && process.env[REPLICA_ENV] !== undefined) void replica();

/**
 * The load generator's HTTP/1.1 client for the single-process figures: keep-alive sockets written and
 * parsed by hand. node:http's client costs about as much CPU per request as the KBS's own HTTP layer, and
 * on a small machine the load generator shares the cores with the server, so a heavy client caps the
 * measured throughput below what the server sustains. The KBS answers with Content-Length bodies only.
 */
class RawConnection {
  private buffered: Buffer = Buffer.alloc(0);
  private waiting: { resolve: (r: Answer) => void; reject: (e: Error) => void } | undefined;
  private failed: Error | undefined;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
      this.parse();
    });
    const fail = (e: Error) => {
      this.failed ??= e;
      const w = this.waiting;
      this.waiting = undefined;
      w?.reject(e);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed')));
  }

  static open(url: URL): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: url.hostname, port: Number(url.port) }, () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
    });
  }

  private parse(): void {
    const w = this.waiting;
    if (w === undefined) return;
    const end = this.buffered.indexOf('\r\n\r\n');
    if (end < 0) return;
    const head = this.buffered.toString('latin1', 0, end);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? Number.NaN);
    if (!Number.isFinite(length)) {
      w.reject(new Error(`response without content-length: ${head.slice(0, 200)}`));
      return;
    }
    if (this.buffered.length < end + 4 + length) return;
    const body = this.buffered.toString('utf8', end + 4, end + 4 + length);
    this.buffered = this.buffered.subarray(end + 4 + length);
    this.waiting = undefined;
    w.resolve({
      status: Number(head.slice(9, 12)),
      body,
      cookie: /\r\nset-cookie: *([^;\r]*)/i.exec(head)?.[1],
    });
  }

  request(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
    if (this.failed !== undefined) return Promise.reject(this.failed);
    let head = `${method} ${path} HTTP/1.1\r\nhost: bench\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    if (body !== undefined) {
      head += `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`;
    }
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(body === undefined ? `${head}\r\n` : `${head}\r\n${body}`);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** One RawConnection per load loop, opened on first use. */
class RawClient {
  private readonly connections: Promise<RawConnection>[] = [];

  constructor(private readonly url: URL) {}

  call(loop: number, method: string, path: string, headers: Record<string, string>, body?: string) {
    this.connections[loop] ??= RawConnection.open(this.url);
    return (this.connections[loop] as Promise<RawConnection>).then((c) =>
      c.request(method, path, headers, body),
    );
  }

  async close(): Promise<void> {
    for (const c of this.connections) (await c.catch(() => undefined))?.close();
  }
}

const AUTH = JSON.stringify({
  version: '0.4.0',
  tee: 'sample',
  'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
});

/** The three requests of a handshake as the load generator sends them, on one connection. */
async function handshake(client: RawClient, loop: number, key: TeeKeyPair): Promise<string> {
  const step = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    client.call(loop, method, path, headers, body);
  const auth = await step('POST', '/kbs/v0/auth', {}, AUTH);
  if (auth.status !== 200 || auth.cookie === undefined) throw new Error(`auth ${auth.status} ${auth.body}`);
  const { nonce } = JSON.parse(auth.body) as { nonce: string };
  const cookie = { cookie: auth.cookie };
  const attest = await step('POST', '/kbs/v0/attest', cookie, sampleAttestation(nonce, key));
  if (attest.status !== 200) throw new Error(`attest ${attest.status} ${attest.body}`);
  const res = await step('GET', '/kbs/v0/resource/default/bench/secret', cookie);
  if (res.status !== 200) throw new Error(`resource ${res.status} ${res.body}`);
  return (JSON.parse(attest.body) as { token: string }).token;
}

interface Target {
  readonly agent: Agent;
  readonly url: URL;
}

/** auth, attest and resource, each on the next target from `first` on (round-robin). */
async function handshakeAcross(targets: readonly Target[], first: number, key: TeeKeyPair): Promise<string> {
  const at = (i: number) => targets[(first + i) % targets.length] as Target;
  const auth = await call(at(0).agent, at(0).url, 'POST', '/kbs/v0/auth', {}, AUTH);
  if (auth.status !== 200 || auth.cookie === undefined) throw new Error(`auth ${auth.status} ${auth.body}`);
  const { nonce } = JSON.parse(auth.body) as { nonce: string };
  const cookie = { cookie: auth.cookie };
  const attest = await call(
    at(1).agent,
    at(1).url,
    'POST',
    '/kbs/v0/attest',
    cookie,
    sampleAttestation(nonce, key),
  );
  if (attest.status !== 200) throw new Error(`attest ${attest.status} ${attest.body}`);
  const res = await call(at(2).agent, at(2).url, 'GET', '/kbs/v0/resource/default/bench/secret', cookie);
  if (res.status !== 200) throw new Error(`resource ${res.status} ${res.body}`);
  return (JSON.parse(attest.body) as { token: string }).token;
}

interface LoadResult {
  perSec: number;
  count: number;
  p50: number;
  p99: number;
  /** Server thread CPU microseconds per operation. */
  cpuUs: number;
}

/**
 * Runs `op` from `CONCURRENCY` loops; returns ops/s, latency percentiles (ms) and, through `cpu`, the
 * server's CPU time per op over the measured window.
 */
async function load(
  op: (worker: number) => Promise<unknown>,
  cpu: () => Promise<number>,
  warmupMs = WARMUP_MS,
  measureMs = MEASURE_MS,
): Promise<LoadResult> {
  const latencies: number[] = [];
  let measuring = false;
  let stop = false;
  let count = 0;
  const loop = async (w: number) => {
    while (!stop) {
      const t0 = performance.now();
      await op(w);
      if (measuring) {
        latencies.push(performance.now() - t0);
        count++;
      }
    }
  };
  const loops = Array.from({ length: CONCURRENCY }, (_, w) => loop(w));
  await new Promise((r) => setTimeout(r, warmupMs));
  const cpu0 = await cpu();
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, measureMs));
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  const cpuUs = (await cpu()) - cpu0;
  stop = true;
  await Promise.all(loops);
  latencies.sort((a, b) => a - b);
  return {
    perSec: count / elapsed,
    count,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuUs: cpuUs / count,
  };
}

/** CPU time of the calling thread, in microseconds. */
function threadCpuUs(): number {
  const u = process.threadCpuUsage();
  return u.user + u.system;
}

/**
 * Microseconds per call of `f`: the best of three runs of about `ms` (least disturbed by other load), in
 * wall time (`us`, the figure the `*_vs_floor` ratios have always used) and in this thread's CPU time
 * (`cpuUs`, comparable with the server's CPU per operation whatever else runs on the machine).
 */
function timeOp(f: () => void, ms = 300): { us: number; cpuUs: number } {
  for (let i = 0; i < 50; i++) f();
  let best = Number.POSITIVE_INFINITY;
  let bestCpu = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    let n = 0;
    const t0 = performance.now();
    const c0 = threadCpuUs();
    while (performance.now() - t0 < ms) {
      for (let i = 0; i < 20; i++) f();
      n += 20;
    }
    best = Math.min(best, ((performance.now() - t0) * 1000) / n);
    bestCpu = Math.min(bestCpu, (threadCpuUs() - c0) / n);
  }
  return { us: best, cpuUs: bestCpu };
}

function cryptoFloor(): Record<string, number> {
  const signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const msg = randomBytes(1500).toString('base64url');
  const sig = sign('sha256', Buffer.from(msg), { key: signer.privateKey, dsaEncoding: 'ieee-p1363' });
  const es256Sign = timeOp(() =>
    sign('sha256', Buffer.from(msg), { key: signer.privateKey, dsaEncoding: 'ieee-p1363' }),
  );
  const es256Verify = timeOp(() =>
    verify('sha256', Buffer.from(msg), { key: signer.publicKey, dsaEncoding: 'ieee-p1363' }, sig),
  );
  const recipient = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
  // Ephemeral key, ECDH, Concat KDF and AES key wrap of the CEK: the ECDH-ES+A256KW part of one JWE,
  // with the fastest primitives node:crypto offers (measured: faster than createECDH).
  const ecdhEs = timeOp(() => {
    const eph = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const z = diffieHellman({ privateKey: eph.privateKey, publicKey: recipient });
    const kek = concatKdf(z, 'ECDH-ES+A256KW', 256);
    const wrap = createCipheriv('id-aes256-wrap', kek, Buffer.from('A6A6A6A6A6A6A6A6', 'hex'));
    Buffer.concat([wrap.update(randomBytes(32)), wrap.final()]);
  });
  const aesGcm = timeOp(() => {
    const c = createCipheriv('aes-256-gcm', randomBytes(32), randomBytes(12));
    c.setAAD(Buffer.from('eyJhbGciOiJFQ0RILUVTK0EyNTZLVyIsImVuYyI6IkEyNTZHQ00ifQ'));
    Buffer.concat([c.update(SECRET), c.final()]);
    c.getAuthTag();
  });
  const handshakeUs = es256Sign.us + es256Verify.us + ecdhEs.us + aesGcm.us;
  const resourceUs = es256Verify.us + ecdhEs.us + aesGcm.us;
  const resourceCachedUs = ecdhEs.us + aesGcm.us;
  return {
    floor_es256_sign_us: es256Sign.us,
    floor_es256_verify_us: es256Verify.us,
    floor_ecdh_es_a256kw_us: ecdhEs.us,
    floor_aes256gcm_32B_us: aesGcm.us,
    floor_handshake_per_s: 1e6 / handshakeUs,
    floor_resource_per_s: 1e6 / resourceUs,
    floor_resource_cached_token_per_s: 1e6 / resourceCachedUs,
    // The same floors in CPU time (see timeOp).
    floor_handshake_cpu_us: es256Sign.cpuUs + es256Verify.cpuUs + ecdhEs.cpuUs + aesGcm.cpuUs,
    floor_resource_cpu_us: es256Verify.cpuUs + ecdhEs.cpuUs + aesGcm.cpuUs,
    floor_resource_cached_token_cpu_us: ecdhEs.cpuUs + aesGcm.cpuUs,
  };
}

// ---- scale-out over processes on Redis ----------------------------------------------------------------

const SCALE_WARMUP_MS = 1_000;
const SCALE_MEASURE_MS = 4_000;

/** CPU time of this process (all its threads: the load generator), in microseconds. */
function clientCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

/** Context switches of every thread of a process (0 once it is gone). */
function procSwitches(pid: number): number {
  let total = 0;
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
        for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm))
          total += Number(m[1]);
      } catch {
        // thread exited meanwhile
      }
    }
  } catch {
    return 0;
  }
  return total;
}

/** `pid` and every process below it (cluster workers). */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      // exited meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i] as number) ?? []));
  return out;
}

interface KbsProcess {
  readonly url: URL;
  readonly pid: number;
  stop(): Promise<void>;
}

type StoreKind = 'Memory' | 'Redis' | 'Postgres';

function storeToml(storage: StoreKind, stores: Stores): string {
  if (storage === 'Redis') return `[storage_backend.backends.redis]\nurl = "${stores.redis.url}"`;
  if (storage === 'Postgres') {
    const pg = stores.postgres.server;
    return `[storage_backend.backends.postgres]\nhost = "127.0.0.1"\nport = ${pg.port}\npassword = "${pg.password}"`;
  }
  return '';
}

function replicaToml(port: number, storage: StoreKind, stores: Stores, workers: number): string {
  const sessions = storage !== 'Memory' ? `session_storage_type = "${storage}"\n` : '';
  return `${sessions}[http_server]
sockets = ["127.0.0.1:${port}"]
insecure_http = true
${workers > 1 ? `worker_count = ${workers}` : ''}
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[storage_backend]
storage_type = "${storage}"
${storeToml(storage, stores)}
[[plugins]]
name = "resource"
`;
}

async function startKbsProcess(storage: StoreKind, stores: Stores, workers = 1): Promise<KbsProcess> {
  const port = await freeLoopbackPort();
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [REPLICA_ENV]: replicaToml(port, storage, stores, workers) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = new URL(`http://127.0.0.1:${port}`);
  const agent = new Agent({ keepAlive: false });
  // Ready once every worker answers: enough consecutive new connections succeed.
  for (let ok = 0; ok < 4 * workers; ) {
    if (child.exitCode !== null) throw new Error(`KBS process exited with ${child.exitCode}`);
    try {
      const r = await call(agent, url, 'GET', '/healthz', {});
      ok = r.status === 200 ? ok + 1 : 0;
    } catch {
      ok = 0;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  agent.destroy();
  return {
    url,
    pid: child.pid as number,
    async stop() {
      if (child.exitCode === null) child.send('close');
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(force);
    },
  };
}

export interface ScalingRow {
  readonly name: string;
  readonly storage: StoreKind;
  readonly processes: number;
  readonly perSec: number;
  readonly p50: number;
  readonly p99: number;
  /** CPU of all KBS processes per handshake. */
  readonly kbsCpuUs: number;
  /** CPU of the store (redis-server, PostgreSQL's processes) per handshake. */
  readonly storeCpuUs: number;
  /** CPU of this (client) process per handshake. */
  readonly clientCpuUs: number;
  /** Context switches of all KBS processes per handshake. */
  readonly kbsSwitches: number;
  /** Redis commands, or PostgreSQL transactions (one a statement), per handshake. */
  readonly storeOps: number;
}

/** What the table needs of a Redis client. */
interface RedisStats {
  info(section: string): Promise<string>;
  flushAll(): Promise<unknown>;
}

/** The servers the rows run on. */
interface Stores {
  readonly redis: { url: string; pid: () => number | undefined; client: RedisStats };
  readonly postgres: { server: PostgresServer };
}

/** Transactions committed or rolled back in the database (each statement the KBS sends is one). */
async function postgresTransactions(server: PostgresServer): Promise<number> {
  return Number(
    (
      await server.psql(
        "SELECT pg_stat_clear_snapshot(); SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'postgres'",
      )
    )
      .trim()
      .split('\n')
      .pop(),
  );
}

async function redisCalls(client: RedisStats): Promise<number> {
  const info = await client.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

async function scalingRow(
  name: string,
  storage: StoreKind,
  replicas: number,
  workers: number,
  stores: Stores,
  keys: readonly TeeKeyPair[],
): Promise<ScalingRow> {
  const { redis } = stores;
  const pg = stores.postgres.server;
  if (storage === 'Redis') await redis.client.flushAll();
  if (storage === 'Postgres') {
    await pg.psql(
      ['kbs', 'repository', 'kbs_protocol_session', 'attestation_service_policy', 'reference_value']
        .map((t) => `DROP TABLE IF EXISTS ${t};`)
        .join('\n'),
    );
  }
  const procs: KbsProcess[] = [];
  try {
    for (let i = 0; i < replicas; i++) procs.push(await startKbsProcess(storage, stores, workers));
    const targets = procs.map((p) => ({
      agent: new Agent({ keepAlive: true, maxSockets: CONCURRENCY }),
      url: p.url,
    }));
    const first = targets[0] as Target;
    const admin = async (method: string, path: string, body: string) => {
      const r = await call(first.agent, first.url, method, path, {}, body);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body}`);
    };
    await admin(
      'POST',
      '/kbs/v0/resource-policy',
      JSON.stringify({ policy: Buffer.from(BUILTIN_RESOURCE_POLICIES.allow_all).toString('base64url') }),
    );
    await admin('POST', '/kbs/v0/resource/default/bench/secret', SECRET.toString('latin1'));
    const pids = () => procs.flatMap((p) => processTree(p.pid));
    let measuredPids: number[] = [];
    let start = { kbs: 0, store: 0, client: 0, calls: 0, switches: 0 };
    // PostgreSQL's backends of the measured window (one per pooled connection), with its postmaster.
    let storePids: number[] = [];
    const storeCpu = () => storePids.reduce((a, pid) => a + processCpuUs(pid), 0);
    const snapshot = async () => ({
      kbs: measuredPids.reduce((a, pid) => a + processCpuUs(pid), 0),
      switches: measuredPids.reduce((a, pid) => a + procSwitches(pid), 0),
      store: storeCpu(),
      client: clientCpuUs(),
      calls:
        storage === 'Redis'
          ? await redisCalls(redis.client)
          : storage === 'Postgres'
            ? await postgresTransactions(pg)
            : 0,
    });
    let next = 0;
    let deltas = { kbs: 0, store: 0, client: 0, calls: 0, switches: 0 };
    const result = await load(
      (w) => handshakeAcross(targets, next++, keys[w % keys.length] as TeeKeyPair),
      async () => {
        // Called at the start and at the end of the measured window.
        if (measuredPids.length === 0) {
          measuredPids = pids();
          const rp = redis.pid();
          const pp = pg.pid;
          storePids =
            storage === 'Redis' && rp !== undefined
              ? [rp]
              : storage === 'Postgres' && pp !== undefined
                ? processTree(pp)
                : [];
          start = await snapshot();
          return 0;
        }
        const end = await snapshot();
        deltas = {
          kbs: end.kbs - start.kbs,
          switches: end.switches - start.switches,
          store: end.store - start.store,
          client: end.client - start.client,
          calls: end.calls - start.calls,
        };
        return 0;
      },
      SCALE_WARMUP_MS,
      SCALE_MEASURE_MS,
    );
    for (const t of targets) t.agent.destroy();
    const n = result.count;
    return {
      name,
      storage,
      processes: replicas,
      perSec: result.perSec,
      p50: result.p50,
      p99: result.p99,
      kbsCpuUs: deltas.kbs / n,
      storeCpuUs: deltas.store / n,
      clientCpuUs: deltas.client / n,
      storeOps: deltas.calls / n,
      kbsSwitches: deltas.switches / n,
    };
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
}

function formatTable(rows: readonly ScalingRow[]): string {
  const base = rows.find((r) => r.name === 'redis x1');
  const mem = rows.find((r) => r.name === 'memory x1');
  const head = [
    'setup',
    'handshakes/s',
    'p50 ms',
    'p99 ms',
    'x redis1',
    'x memory',
    'KBS cpu us/hs',
    'store cpu us/hs',
    'client cpu us/hs',
    'store ops/hs',
    'KBS ctx sw/hs',
  ];
  const lines = rows.map((r) => [
    r.name,
    r.perSec.toFixed(0),
    r.p50.toFixed(1),
    r.p99.toFixed(1),
    base ? (r.perSec / base.perSec).toFixed(2) : '-',
    mem ? (r.perSec / mem.perSec).toFixed(2) : '-',
    r.kbsCpuUs.toFixed(0),
    r.storeCpuUs.toFixed(0),
    r.clientCpuUs.toFixed(0),
    r.storeOps.toFixed(1),
    r.kbsSwitches.toFixed(1),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] as number)).join('  ');
  return [fmt(head), ...lines.map(fmt)].join('\n');
}

async function scaling(keys: readonly TeeKeyPair[]): Promise<ScalingRow[]> {
  const server = await startRedisServer({ persistence: 'everysec' });
  const client = createClient({ url: server.url });
  client.on('error', () => undefined);
  await client.connect();
  // PostgreSQL as deployed: every commit flushed to its log (the test server's default turns that off).
  const pg = await startPostgresServer({ durable: true });
  try {
    const stores: Stores = {
      redis: { url: server.url, pid: () => server.pid, client },
      postgres: { server: pg },
    };
    const rows: ScalingRow[] = [];
    rows.push(await scalingRow('memory x1', 'Memory', 1, 1, stores, keys));
    for (const n of [1, 2, 3]) rows.push(await scalingRow(`redis x${n}`, 'Redis', n, 1, stores, keys));
    rows.push(await scalingRow('redis 1x2 workers', 'Redis', 1, 2, stores, keys));
    for (const n of [1, 2, 3]) rows.push(await scalingRow(`postgres x${n}`, 'Postgres', n, 1, stores, keys));
    rows.push(await scalingRow('postgres 1x2 workers', 'Postgres', 1, 2, stores, keys));
    return rows;
  } finally {
    await client.close().catch(() => undefined);
    await server.dispose();
    await pg.dispose();
  }
}

export async function run(): Promise<Record<string, number>> {
  const floor = cryptoFloor();
  const worker = new Worker(new URL(import.meta.url), { workerData: { role: ROLE } });
  const { url, bare } = await new Promise<{ url: string; bare: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const base = new URL(url);
  const cpu = () =>
    new Promise<number>((resolve) => {
      const onMessage = (m: unknown) => {
        if (typeof m === 'object' && m !== null && 'cpuUs' in m) {
          worker.off('message', onMessage);
          resolve((m as { cpuUs: number }).cpuUs);
        }
      };
      worker.on('message', onMessage);
      worker.postMessage('cpu');
    });
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const keys = Array.from({ length: 64 }, () => generateTeeKeyPair());
  let single: Record<string, number> = {};
  const clients: RawClient[] = [];
  try {
    const admin = async (method: string, path: string, body: string) => {
      const r = await call(agent, base, method, path, {}, body);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body}`);
    };
    await admin(
      'POST',
      '/kbs/v0/resource-policy',
      JSON.stringify({ policy: Buffer.from(BUILTIN_RESOURCE_POLICIES.allow_all).toString('base64url') }),
    );
    await admin('POST', '/kbs/v0/resource/default/bench/secret', SECRET.toString('latin1'));

    const bareClient = new RawClient(new URL(bare));
    clients.push(bareClient);
    const http = await load(async (w) => {
      const r = await bareClient.call(w, 'GET', '/', {});
      if (r.status !== 200) throw new Error(`bare ${r.status}`);
    }, cpu);
    const client = new RawClient(base);
    clients.push(client);
    const hs = await load((w) => handshake(client, w, keys[w % keys.length] as TeeKeyPair), cpu);
    const token = await handshake(client, 0, keys[0] as TeeKeyPair);
    const bearer = { authorization: `Bearer ${token}` };
    const rs = await load(async (w) => {
      const r = await client.call(w, 'GET', '/kbs/v0/resource/default/bench/secret', bearer);
      if (r.status !== 200) throw new Error(`resource ${r.status} ${r.body}`);
    }, cpu);
    const floorHandshakeUs = floor.floor_handshake_cpu_us as number;
    // A repeated Bearer token's signature check is cached, so a fetch's own crypto is the JWE alone.
    const floorResourceUs = floor.floor_resource_cached_token_cpu_us as number;
    single = {
      handshakes_per_s: hs.perSec,
      handshake_p50_ms: hs.p50,
      handshake_p99_ms: hs.p99,
      resource_fetches_per_s: rs.perSec,
      resource_p50_ms: rs.p50,
      resource_p99_ms: rs.p99,
      concurrency: CONCURRENCY,
      // Server CPU per operation (its own thread's time): robust against other load on the machine.
      handshake_server_cpu_us: hs.cpuUs,
      resource_server_cpu_us: rs.cpuUs,
      bare_http_server_cpu_us: http.cpuUs,
      /** What one uncontended core would sustain at that CPU cost. */
      handshake_capacity_per_core_s: 1e6 / hs.cpuUs,
      resource_capacity_per_core_s: 1e6 / rs.cpuUs,
      ...floor,
      floor_bare_http_per_s: http.perSec,
      floor_bare_http_p50_ms: http.p50,
      handshake_vs_floor: hs.perSec / (floor.floor_handshake_per_s as number),
      resource_vs_floor: rs.perSec / (floor.floor_resource_per_s as number),
      /**
       * The `*_vs_floor` ratios as they would be with the KBS alone on a core it does not share (its CPU
       * per operation against the floor's, both CPU time): what the code costs, without the machine's
       * other load, which moves the throughput ratios by a factor of two between runs here.
       */
      handshake_cpu_vs_floor: (floor.floor_handshake_cpu_us as number) / hs.cpuUs,
      resource_cpu_vs_floor: (floor.floor_resource_cpu_us as number) / rs.cpuUs,
      /** Share of the server's CPU per operation that is the unavoidable crypto (both in CPU time). */
      handshake_crypto_share_of_cpu: floorHandshakeUs / hs.cpuUs,
      resource_crypto_share_of_cpu: floorResourceUs / rs.cpuUs,
      // One handshake is three HTTP exchanges, one resource fetch is one.
      handshake_vs_bare_http: (3 * hs.perSec) / http.perSec,
      resource_vs_bare_http: rs.perSec / http.perSec,
      target_handshakes_per_s: 1000,
      target_handshake_p99_ms: 20,
      target_resource_fetches_per_s: 5000,
    };
  } finally {
    agent.destroy();
    for (const c of clients) await c.close();
    worker.postMessage('close');
    await new Promise((r) => worker.once('message', r));
    await worker.terminate();
  }

  const rows = await scaling(keys);
  console.log(`\n  scale-out, concurrency ${CONCURRENCY}, each handshake step on the next process:\n`);
  console.log(
    formatTable(rows)
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n'),
  );
  const scale: Record<string, number> = {};
  const redis1 = rows.find((r) => r.name === 'redis x1') as ScalingRow;
  const memory1 = rows.find((r) => r.name === 'memory x1') as ScalingRow;
  for (const r of rows) {
    const k = r.name.replaceAll(' ', '_');
    scale[`scale_${k}_handshakes_per_s`] = r.perSec;
    scale[`scale_${k}_p99_ms`] = r.p99;
    scale[`scale_${k}_kbs_cpu_us`] = r.kbsCpuUs;
    scale[`scale_${k}_store_cpu_us`] = r.storeCpuUs;
    scale[`scale_${k}_store_ops`] = r.storeOps;
    scale[`scale_${k}_kbs_context_switches`] = r.kbsSwitches;
    scale[`scale_${k}_vs_redis_x1`] = r.perSec / redis1.perSec;
    scale[`scale_${k}_vs_memory_x1`] = r.perSec / memory1.perSec;
  }
  // Capacity if each process had a core of its own, and the ceiling a single-threaded Redis sets.
  scale.scale_handshakes_per_core_memory = 1e6 / memory1.kbsCpuUs;
  scale.scale_handshakes_per_core_redis = 1e6 / redis1.kbsCpuUs;
  scale.scale_redis_ceiling_handshakes_per_s = redis1.storeCpuUs > 0 ? 1e6 / redis1.storeCpuUs : 0;
  return { ...single, ...scale };
}
