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
import { MAX_RESOURCE_URI_LENGTH } from '@broker/protocol';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PLUGIN_URI_LENGTH } from './plugins.js';
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
/** The same hub behind an API that allows the nebula-ca plugin. */
let pluginApi: ApiServer;
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
  pluginApi = await startApiServer({
    features: 'resource',
    bind: '127.0.0.1:0',
    cdhAddr: `unix://${join(dir, 'cdh.sock')}`,
    plugins: ['nebula-ca'],
  });
});

afterAll(async () => {
  await api?.close({ graceMs: 100 });
  await pluginApi?.close({ graceMs: 100 });
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

  // The plugin route hands its path and query on raw, as /cdh/resource does: the hub's parser refuses
  // the same things with the same 500.
  it.each([
    '/cdh/plugin/nebula-ca/../../etc/passwd',
    '/cdh/plugin/nebula-ca/%2e%2e/credential',
    '/cdh/plugin/nebula-ca/a%2Fb',
    '/cdh/plugin/nebula-ca/..%2f..%2f/credential',
    '/cdh/plugin/nebula-ca/.hidden',
    '/cdh/plugin/nebula-ca/',
    '/cdh/plugin/nebula-ca//credential',
    `/cdh/plugin/nebula-ca/${'a/'.repeat(16)}b`,
    '/cdh/plugin/nebula-ca/credential?name=%zz',
    '/cdh/plugin/nebula-ca/credential?name="pod-1"',
  ])('%s is refused by the hub with a clean 500', async (path) => {
    const r = await get(pluginApi, path);
    expect(r.status).toBe(500);
    expect(r.body).toMatch(/^ttrpc request error: INTERNAL: \[CDH\] \[ERROR\]: /);
    const reason = r.body.endsWith('Get Resource failed') ? lastReason() : r.body;
    expect(reason).toMatch(/resource uri/i);
    expect(reason).not.toMatch(/token|attestation agent/i);
  });

  it('a well-formed plugin URI passes the hub parser; a longer one than it takes is refused first', async () => {
    expect(MAX_PLUGIN_URI_LENGTH).toBe(MAX_RESOURCE_URI_LENGTH);
    const prefix = '/cdh/plugin/nebula-ca/credential?name=';
    const fill = MAX_PLUGIN_URI_LENGTH - 'kbs+nebula-ca:///credential?name='.length;
    const longest = await get(pluginApi, `${prefix}${'a'.repeat(fill)}`);
    expect(longest.body).toBe('ttrpc request error: INTERNAL: [CDH] [ERROR]: Get Resource failed');
    // Parsed, then failed for want of a token: the URI was within the hub's limit.
    expect(lastReason()).toMatch(/token.*no-aa\.sock/i);
    const over = await get(pluginApi, `${prefix}${'a'.repeat(fill + 1)}`);
    expect([over.status, over.body]).toEqual([500, 'KBS plugin URI is longer than 4096 characters']);
  });

  it('the API without the opt-in does not reach the hub for a plugin', async () => {
    const before = hubLog.length;
    const r = await get(api, '/cdh/plugin/nebula-ca/credential?name=pod-1');
    expect(r.status).toBe(403);
    expect(hubLog.length).toBe(before);
  });
});
