// Full RCAR handshakes through trustee's three-service topology against the one-process KBS, same run.
//
// Both shapes run as separate processes (this module forked) on loopback with Memory storage, trustee's
// default attestation policy and the allow_all resource policy, under the same client load:
//  - one process: the KBS with its built-in attestation service and RVPS;
//  - three processes: the RVPS (gRPC), the attestation service (gRPC, its RVPS GrpcRemote) and the KBS
//    (`coco_as_grpc`), in trustee's docker-compose shape. Every attestation then crosses KBS → AS over
//    gRPC, and the policy's reference-value look-ups cross AS → RVPS.
// A handshake is POST /auth, POST /attest (sample evidence), GET /resource with the session cookie. The
// figures: handshakes per second, p50/p99 latency, and the CPU time all server processes spent per
// handshake (from /proc), with the three-process figures as ratios to the one-process ones.
import { fork } from 'node:child_process';
import { Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createLogger } from '@broker/cli';
import { parseKbsConfigText, startKbs } from '@broker/kbs';
import { MemoryStorage } from '@broker/kv-storage';
import { generateTeeKeyPair, type TeeKeyPair } from '@broker/protocol';
import { createRvps, startRvpsServer } from '@broker/rvps-core';
import { parseAsConfig } from '../../packages/attestation-service/src/config.js';
import { startAsGrpcServer } from '../../packages/attestation-service/src/grpc.js';
import { openAttestationService } from '../../packages/attestation-service/src/service.js';
import { call, percentile, processCpuUs, sampleHandshake } from '../helpers.js';

const ROLE_ENV = 'SERVICES_BENCH_ROLE';
const ARG_ENV = 'SERVICES_BENCH_ARG';
const CONCURRENCY = 8;
const WARMUP_MS = 1_000;
const MEASURE_MS = 4_000;
const SECRET = Buffer.alloc(32, 7);

const quiet = () =>
  createLogger({ name: 'bench', env: { RUST_LOG: 'off' }, format: 'json', destination: { write() {} } });

const KBS_COMMON = `
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "resource"
`;

/** One server process of the bench: reports its address, serves until told to close. */
async function serve(role: string, arg: string): Promise<void> {
  const logger = quiet();
  let address: string;
  let close: () => Promise<void>;
  if (role === 'rvps') {
    const storage = new MemoryStorage();
    const server = await startRvpsServer({ rvps: createRvps(storage), address: '127.0.0.1:0' });
    address = `127.0.0.1:${server.port}`;
    close = () => server.close();
  } else if (role === 'as') {
    const opened = await openAttestationService(
      parseAsConfig({ rvps_config: { type: 'GrpcRemote', address: `http://${arg}` } }),
      logger,
    );
    const server = await startAsGrpcServer({
      service: opened.service,
      rvps: opened.rvps,
      address: '127.0.0.1:0',
    });
    address = `127.0.0.1:${server.port}`;
    close = async () => {
      await server.close();
      await opened.close();
    };
  } else {
    const kbs = await startKbs(parseKbsConfigText(arg), { logger });
    address = kbs.urls[0] as string;
    close = () => kbs.close();
  }
  process.on('message', async (m) => {
    if (m !== 'close') return;
    await close();
    process.exit(0);
  });
  process.send?.({ address });
}

const role = process.env[ROLE_ENV];
if (role !== undefined) void serve(role, process.env[ARG_ENV] ?? '');

interface Child {
  readonly pid: number;
  readonly address: string;
  stop(): Promise<void>;
}

async function spawnRole(roleName: string, arg: string): Promise<Child> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [ROLE_ENV]: roleName, [ARG_ENV]: arg },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const address = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { address: string }).address));
    child.once('exit', (code) => reject(new Error(`${roleName} exited with ${code}`)));
  });
  return {
    pid: child.pid as number,
    address,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.send('close');
      }),
  };
}

const AUTH = JSON.stringify({ version: '0.4.0', tee: 'sample', 'extra-params': {} });

async function handshake(agent: Agent, url: URL, key: TeeKeyPair): Promise<void> {
  await sampleHandshake(agent, url, key, AUTH, '/kbs/v0/resource/default/bench/secret');
}

interface Measured {
  perSec: number;
  p50: number;
  p99: number;
  /** CPU microseconds of all server processes per handshake. */
  cpuUs: number;
  /** The same, per process, in the order of `pids`. */
  cpuUsEach: number[];
}

/** Handshakes from CONCURRENCY loops against the KBS at `kbsUrl`; `pids` are the server processes. */
async function measure(kbsUrl: string, pids: readonly number[]): Promise<Measured> {
  const url = new URL(kbsUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  try {
    const admin = async (path: string, body: string) => {
      const r = await call(agent, url, 'POST', path, {}, body);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body}`);
    };
    const allowAll = 'package policy\n\ndefault allow = true\n';
    await admin(
      '/kbs/v0/resource-policy',
      JSON.stringify({ policy: Buffer.from(allowAll).toString('base64url') }),
    );
    await admin('/kbs/v0/resource/default/bench/secret', SECRET.toString('latin1'));
    // The sample TEE's reference values, so the default policy's look-ups find them (through the RVPS).
    const values = { launch_digest: ['abcde'], svn: ['1'], major_version: 1, minimum_minor_version: 4 };
    await admin(
      '/kbs/v0/reference-value',
      JSON.stringify({
        version: '0.1.0',
        type: 'sample',
        payload: Buffer.from(JSON.stringify(values)).toString('base64'),
      }),
    );
    const keys = Array.from({ length: CONCURRENCY }, () => generateTeeKeyPair());
    const latencies: number[] = [];
    let measuring = false;
    let stop = false;
    let count = 0;
    const loop = async (w: number) => {
      while (!stop) {
        const t0 = performance.now();
        await handshake(agent, url, keys[w] as TeeKeyPair);
        if (measuring) {
          latencies.push(performance.now() - t0);
          count++;
        }
      }
    };
    const cpu = () => pids.map(processCpuUs);
    const loops = Array.from({ length: CONCURRENCY }, (_, w) => loop(w));
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const cpu0 = cpu();
    measuring = true;
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, MEASURE_MS));
    measuring = false;
    const elapsed = (performance.now() - t0) / 1000;
    const cpuEach = cpu().map((c, i) => (c - (cpu0[i] as number)) / count);
    stop = true;
    await Promise.all(loops);
    latencies.sort((a, b) => a - b);
    return {
      perSec: count / elapsed,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      cpuUs: cpuEach.reduce((a, b) => a + b, 0),
      cpuUsEach: cpuEach,
    };
  } finally {
    agent.destroy();
  }
}

export async function run(): Promise<Record<string, number>> {
  const kbsOne = await spawnRole('kbs', KBS_COMMON);
  let one: Measured;
  try {
    one = await measure(kbsOne.address, [kbsOne.pid]);
  } finally {
    await kbsOne.stop();
  }

  const rvps = await spawnRole('rvps', '');
  const children: Child[] = [rvps];
  let three: Measured;
  try {
    const as = await spawnRole('as', rvps.address);
    children.push(as);
    const kbs = await spawnRole(
      'kbs',
      `${KBS_COMMON}[attestation_service]\ntype = "coco_as_grpc"\nas_addr = "http://${as.address}"\n`,
    );
    children.push(kbs);
    three = await measure(
      kbs.address,
      children.map((c) => c.pid),
    );
  } finally {
    for (const c of children.reverse()) await c.stop();
  }

  return {
    one_process_handshakes_per_s: one.perSec,
    one_process_handshake_p50_ms: one.p50,
    one_process_handshake_p99_ms: one.p99,
    one_process_server_cpu_us_per_handshake: one.cpuUs,
    three_process_handshakes_per_s: three.perSec,
    three_process_handshake_p50_ms: three.p50,
    three_process_handshake_p99_ms: three.p99,
    three_process_server_cpu_us_per_handshake: three.cpuUs,
    three_process_rvps_cpu_us_per_handshake: three.cpuUsEach[0] as number,
    three_process_as_cpu_us_per_handshake: three.cpuUsEach[1] as number,
    three_process_kbs_cpu_us_per_handshake: three.cpuUsEach[2] as number,
    ratio_three_to_one_handshakes_per_s: three.perSec / one.perSec,
    ratio_three_to_one_p99: three.p99 / one.p99,
    ratio_three_to_one_server_cpu: three.cpuUs / one.cpuUs,
    concurrency: CONCURRENCY,
  };
}
