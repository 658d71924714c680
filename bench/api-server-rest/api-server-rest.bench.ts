// GET /cdh/resource through api-server-rest against a CDH ttrpc server that
// answers at once (warm path: the ttrpc connection is open, no attestation),
// against the floor: a bare node:http server on loopback answering the same
// 32 bytes, measured in the same run with the same client. Sequential
// requests, reported as p50/p99 in microseconds. Target (ARCHITECTURE §7):
// p50 < 2 ms.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { registerDataHubServices } from '@broker/guest-api';
import { TtrpcServer } from '@broker/ttrpc';
import { startApiServer } from '../../packages/api-server-rest/src/server.js';
import { percentile, timeEach } from '../helpers.js';

const WARMUP = 500;
const ROUNDS = 4000;
const FRESH_ROUNDS = 1000;
const KEY = new Uint8Array(32).fill(0x6b);
const TARGET_P50_US = 2000;

/** One GET; resolves once the whole body is read. */
function get(agent: http.Agent, port: number, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => {
        n += c.length;
      });
      res.on('end', () => {
        if (res.statusCode !== 200 || n !== KEY.length)
          reject(new Error(`unexpected reply ${res.statusCode}, ${n} bytes`));
        else resolve();
      });
    });
    req.on('error', reject);
  });
}

export async function run(): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'api-server-rest-bench-'));
  const cdhSock = join(dir, 'cdh.sock');
  const cdh = new TtrpcServer();
  registerDataHubServices(cdh, { getResource: async () => KEY });
  await cdh.listen({ path: cdhSock });

  const api = await startApiServer({
    features: 'resource',
    bind: '127.0.0.1:0',
    cdhAddr: `unix://${cdhSock}`,
  });

  const floor = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': KEY.length });
    res.end(KEY);
  });
  await new Promise<void>((r) => floor.listen(0, '127.0.0.1', r));
  const floorPort = (floor.address() as net.AddressInfo).port;

  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const fresh = new http.Agent({ keepAlive: false });
  const path = '/cdh/resource/default/key/1';
  try {
    const viaApi = () => get(keepAlive, api.address.port, path);
    const viaFloor = () => get(keepAlive, floorPort, path);
    // Interleave warm-up so both paths are JIT-compiled before timing.
    for (let i = 0; i < WARMUP; i++) {
      await viaApi();
      await viaFloor();
    }
    const apiTimes = await timeEach(ROUNDS, viaApi);
    const floorTimes = await timeEach(ROUNDS, viaFloor);
    // curl in an init container opens a new connection per request.
    const apiFresh = await timeEach(FRESH_ROUNDS, () => get(fresh, api.address.port, path));
    const floorFresh = await timeEach(FRESH_ROUNDS, () => get(fresh, floorPort, path));

    const p50 = percentile(apiTimes, 50);
    const floorP50 = percentile(floorTimes, 50);
    return {
      resource_keepalive_p50_us: p50,
      resource_keepalive_p99_us: percentile(apiTimes, 99),
      floor_keepalive_p50_us: floorP50,
      floor_keepalive_p99_us: percentile(floorTimes, 99),
      ratio_keepalive_p50: p50 / floorP50,
      resource_new_connection_p50_us: percentile(apiFresh, 50),
      resource_new_connection_p99_us: percentile(apiFresh, 99),
      floor_new_connection_p50_us: percentile(floorFresh, 50),
      floor_new_connection_p99_us: percentile(floorFresh, 99),
      ratio_new_connection_p50: percentile(apiFresh, 50) / percentile(floorFresh, 50),
      target_p50_us: TARGET_P50_US,
      target_met: p50 < TARGET_P50_US && percentile(apiFresh, 50) < TARGET_P50_US ? 1 : 0,
    };
  } finally {
    keepAlive.destroy();
    fresh.destroy();
    await api.close({ graceMs: 100 });
    await new Promise((r) => floor.close(r));
    await cdh.close({ graceMs: 0 });
    await rm(dir, { recursive: true, force: true });
  }
}
