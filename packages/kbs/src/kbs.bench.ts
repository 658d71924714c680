// KBS throughput on loopback with the sample TEE (ARCHITECTURE §7), against the cost of its own crypto
// measured in the same run.
//
// The KBS runs in a worker thread (its own event loop and core, as a separate process would have) over
// plain HTTP on 127.0.0.1 with Memory storage, structured access logs written to /dev/null, trustee's
// default attestation policy and the allow_all resource policy. The client side runs keep-alive
// connections from the main thread. A bare HTTP server on the worker's loop gives the transport floor.
//  - handshake: POST /auth, POST /attest (sample evidence), GET /resource with the session cookie;
//  - resource: GET /resource with a valid Bearer token (verified on every request, policy, JWE);
//  - floor: ES256 sign + verify (the EAR token), ECDH-ES+A256KW on P-256 and AES-256-GCM of the 32-byte
//    secret (the JWE): what one handshake cannot avoid, measured alone on one core.
import { createCipheriv, diffieHellman, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { Agent, createServer, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { concatKdf, generateTeeKeyPair, runtimeDataDigest, type TeeKeyPair } from '@broker/protocol';
import pino from 'pino';
import { parseKbsConfigText } from './config.js';
import { startKbs } from './kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from './policy/resource-policy.js';

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
  const logger = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false }));
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

interface Res {
  status: number;
  body: string;
  cookie: string | undefined;
}

function call(
  agent: Agent,
  url: URL,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const sc = res.headers['set-cookie']?.[0];
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            cookie: sc?.split(';')[0],
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const AUTH = JSON.stringify({
  version: '0.4.0',
  tee: 'sample',
  'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
});

async function handshake(agent: Agent, url: URL, key: TeeKeyPair): Promise<string> {
  const auth = await call(agent, url, 'POST', '/kbs/v0/auth', {}, AUTH);
  if (auth.status !== 200 || auth.cookie === undefined) throw new Error(`auth ${auth.status} ${auth.body}`);
  const { nonce } = JSON.parse(auth.body) as { nonce: string };
  const digest = runtimeDataDigest({ nonce, 'tee-pubkey': key.publicJwk, 'additional-evidence': '' });
  const attestation = JSON.stringify({
    'init-data': null,
    'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
    'tee-evidence': {
      primary_evidence: { svn: '1', report_data: digest.toString('base64') },
      additional_evidence: '',
    },
  });
  const cookie = { cookie: auth.cookie };
  const attest = await call(agent, url, 'POST', '/kbs/v0/attest', cookie, attestation);
  if (attest.status !== 200) throw new Error(`attest ${attest.status} ${attest.body}`);
  const res = await call(agent, url, 'GET', '/kbs/v0/resource/default/bench/secret', cookie);
  if (res.status !== 200) throw new Error(`resource ${res.status} ${res.body}`);
  return (JSON.parse(attest.body) as { token: string }).token;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

interface LoadResult {
  perSec: number;
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
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const cpu0 = await cpu();
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, MEASURE_MS));
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  const cpuUs = (await cpu()) - cpu0;
  stop = true;
  await Promise.all(loops);
  latencies.sort((a, b) => a - b);
  return {
    perSec: count / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    cpuUs: cpuUs / count,
  };
}

/** Microseconds per call of `f`: the best of three runs of about `ms` (least disturbed by other load). */
function timeOp(f: () => void, ms = 300): number {
  for (let i = 0; i < 50; i++) f();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 3; round++) {
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < ms) {
      for (let i = 0; i < 20; i++) f();
      n += 20;
    }
    best = Math.min(best, ((performance.now() - t0) * 1000) / n);
  }
  return best;
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
  const handshakeUs = es256Sign + es256Verify + ecdhEs + aesGcm;
  const resourceUs = es256Verify + ecdhEs + aesGcm;
  return {
    floor_es256_sign_us: es256Sign,
    floor_es256_verify_us: es256Verify,
    floor_ecdh_es_a256kw_us: ecdhEs,
    floor_aes256gcm_32B_us: aesGcm,
    floor_handshake_per_s: 1e6 / handshakeUs,
    floor_resource_per_s: 1e6 / resourceUs,
  };
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
    const keys = Array.from({ length: 64 }, () => generateTeeKeyPair());

    const bareUrl = new URL(bare);
    const http = await load(async () => {
      const r = await call(agent, bareUrl, 'GET', '/', {});
      if (r.status !== 200) throw new Error(`bare ${r.status}`);
    }, cpu);
    const hs = await load((w) => handshake(agent, base, keys[w % keys.length] as TeeKeyPair), cpu);
    const token = await handshake(agent, base, keys[0] as TeeKeyPair);
    const bearer = { authorization: `Bearer ${token}` };
    const rs = await load(async () => {
      const r = await call(agent, base, 'GET', '/kbs/v0/resource/default/bench/secret', bearer);
      if (r.status !== 200) throw new Error(`resource ${r.status} ${r.body}`);
    }, cpu);
    const floorHandshakeUs = 1e6 / (floor.floor_handshake_per_s as number);
    const floorResourceUs = 1e6 / (floor.floor_resource_per_s as number);
    return {
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
      /** Share of the server's CPU per operation that is the unavoidable crypto. */
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
    worker.postMessage('close');
    await new Promise((r) => worker.once('message', r));
    await worker.terminate();
  }
}
