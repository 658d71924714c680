// api-server-rest in front of the real confidential data hub (@broker/data-hub)
// on a unix socket: the hub's own resource-URI parser judges hostile paths,
// and a hub whose attestation agent and KBS are unreachable gives a prompt
// error rather than a hang. The 500 body (readable by every container of the
// pod) carries upstream's text only; the reason is in the hub's log.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseCdhConfig, type RunningDataHub, startDataHub } from '@broker/data-hub';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiServer, startApiServer } from './server.js';

function get(server: ApiServer, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: server.address.port, path, agent: false }, (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

let dir: string;
let hub: RunningDataHub;
let api: ApiServer;
const hubLog: string[] = [];
/** The reason the hub logged for its last GetResource failure. */
const lastReason = () =>
  hubLog
    .map((l) => JSON.parse(l) as { msg: string; err?: string })
    .filter((e) => e.msg === 'GetResource failed')
    .at(-1)?.err ?? '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'api-server-rest-cdh-'));
  const config = parseCdhConfig(
    [
      `socket = "unix://${join(dir, 'cdh.sock')}"`,
      '[kbc]',
      'name = "cc_kbc"',
      'url = "http://127.0.0.1:9"',
      '[aa]',
      `aa_socket = "unix://${join(dir, 'no-aa.sock')}"`,
    ].join('\n'),
    'toml',
    { env: {}, kernelCmdline: '' },
  );
  hub = await startDataHub(config, {
    aaConnectTimeoutMs: 1000,
    kbsTimeoutMs: 2000,
    logger: pino({ level: 'info' }, { write: (l: string) => hubLog.push(l) }),
  });
  api = await startApiServer({
    features: 'resource',
    bind: '127.0.0.1:0',
    cdhAddr: `unix://${join(dir, 'cdh.sock')}`,
  });
});

afterAll(async () => {
  await api?.close({ graceMs: 100 });
  await hub?.close({ graceMs: 0 });
  await rm(dir, { recursive: true, force: true });
});

describe('against the real data hub', () => {
  it.each([
    '/cdh/resource/../../etc/passwd',
    '/cdh/resource/default/%2e%2e/key',
    '/cdh/resource/default/..%2f..%2f/key',
    '/cdh/resource/default/key/.hidden',
    '/cdh/resource/',
    '/cdh/resource/default',
    '/cdh/resource/a/b/c/d',
    '/cdh/resource//key/1',
    '/cdh/resource/a%zz/b/c',
    `/cdh/resource/a/b/${'c'.repeat(300)}`,
  ])('%s is refused by the hub with a clean 500', async (path) => {
    const r = await get(api, path);
    expect(r.status).toBe(500);
    expect(r.body).toMatch(/^ttrpc request error: INTERNAL: \[CDH\] \[ERROR\]: /);
    // The hub's URI parser refuses it before any token or KBS work happens.
    const reason = r.body.endsWith('Get Resource failed') ? lastReason() : r.body;
    expect(reason).toMatch(/resource uri/i);
    expect(reason).not.toMatch(/token|attestation agent/i);
  });

  it('reports an unreachable attestation agent / KBS as a 500, the reason in the log only', async () => {
    const r = await get(api, '/cdh/resource/default/key/1');
    expect(r.status).toBe(500);
    expect(r.body).toBe('ttrpc request error: INTERNAL: [CDH] [ERROR]: Get Resource failed');
    expect(lastReason()).toMatch(/token.*no-aa\.sock/i);
    expect((await get(api, '/info')).status).toBe(200);
  });
});
