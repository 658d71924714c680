// api-server-rest against real ttrpc servers on unix sockets, built with
// @broker/ttrpc and the guest-api registration helpers.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AttestationAgentServiceImpl,
  dataHubError,
  type ExtendRuntimeMeasurementRequest,
  RuntimeMeasurementResult,
  registerAttestationAgentService,
  registerDataHubServices,
} from '@broker/guest-api';
import { TtrpcServer } from '@broker/ttrpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ApiServer, startApiServer } from './server.js';
import { attestationAgentBackend, dataHubBackend } from './ttrpc-backends.js';

interface Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

function send(server: ApiServer, method: string, path: string, body?: string): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: server.address.port, method, path, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const utf8 = (s: string) => new TextEncoder().encode(s);

/**
 * What the data hub does with a resource URI, reduced to the part that
 * matters here: `kbs:///<repo>/<type>/<tag>` with three non-empty segments,
 * no `.`/`..` (also percent-encoded), else an INTERNAL `[CDH] [ERROR]` status.
 */
function resolveResource(store: Map<string, Uint8Array>, uri: string): Uint8Array {
  const m = /^kbs:\/\/[^/]*\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(uri);
  const segments = m?.slice(1) ?? [];
  const dots = segments.some((s) => /^(\.|%2e){1,2}$/i.test(s));
  if (m === null || dots) throw dataHubError(`Illegal resource uri: ${uri}`);
  const r = store.get(segments.join('/'));
  if (r === undefined) throw dataHubError('get resource failed: KBS resource Not Found (Error 404)');
  return r;
}

let dir: string;
let cdhSock: string;
let aaSock: string;
const cleanups: (() => Promise<void>)[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'api-server-rest-'));
  cdhSock = join(dir, 'cdh.sock');
  aaSock = join(dir, 'aa', 'attestation-agent.sock');
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rm(dir, { recursive: true, force: true });
});

interface Cdh {
  server: TtrpcServer;
  store: Map<string, Uint8Array>;
  seen: string[];
  /** Replaces the handler; default: `resolveResource`. */
  handler: ((uri: string) => Promise<Uint8Array>) | null;
}

async function startCdh(): Promise<Cdh> {
  const server = new TtrpcServer();
  const cdh: Cdh = {
    server,
    store: new Map([['default/key/1', utf8('0123456789abcdef0123456789abcdef')]]),
    seen: [],
    handler: null,
  };
  registerDataHubServices(server, {
    async getResource(uri) {
      cdh.seen.push(uri);
      if (cdh.handler) return cdh.handler(uri);
      return resolveResource(cdh.store, uri);
    },
  });
  await server.listen({ path: cdhSock });
  cleanups.push(() => server.close({ graceMs: 0 }));
  return cdh;
}

interface Aa {
  server: TtrpcServer;
  extends: ExtendRuntimeMeasurementRequest[];
  evidence: Uint8Array[];
  extendResult: number;
}

async function startAa(): Promise<Aa> {
  const server = new TtrpcServer();
  const aa: Aa = { server, extends: [], evidence: [], extendResult: RuntimeMeasurementResult.OK };
  const impl: AttestationAgentServiceImpl = {
    async getEvidence(runtimeData) {
      aa.evidence.push(runtimeData);
      return utf8(JSON.stringify({ svn: '1', report_data: Buffer.from(runtimeData).toString('base64') }));
    },
    async getAdditionalEvidence() {
      return new Uint8Array(0);
    },
    async getToken(tokenType) {
      if (tokenType !== 'kbs') throw new Error('Unsupported token type');
      return utf8('{"token":"eyJ.x.y","tee_keypair":"-----BEGIN PRIVATE KEY-----"}');
    },
    async extendRuntimeMeasurement(req) {
      aa.extends.push(req);
      return aa.extendResult as RuntimeMeasurementResult;
    },
    async getTeeType() {
      return 'sample';
    },
    async getAdditionalTees() {
      return ['sampledevice'];
    },
  };
  registerAttestationAgentService(server, impl);
  await server.listen({ path: aaSock });
  cleanups.push(() => server.close({ graceMs: 0 }));
  return aa;
}

async function startApi(features: 'resource' | 'attestation' | 'all' = 'all', timeoutMs?: number) {
  const api = await startApiServer({
    features,
    bind: '127.0.0.1:0',
    cdhAddr: `unix://${cdhSock}`,
    aaAddr: `unix://${aaSock}`,
    ...(timeoutMs === undefined ? {} : { ttrpc: { timeoutMs } }),
  });
  cleanups.push(() => api.close({ graceMs: 100 }));
  return api;
}

describe('with real CDH and AA ttrpc servers', () => {
  it('serves every route', async () => {
    const cdh = await startCdh();
    const aa = await startAa();
    const api = await startApi('all');

    const res = await send(api, 'GET', '/cdh/resource/default/key/1');
    expect([res.status, res.headers['content-type'], res.body.toString()]).toEqual([
      200,
      'application/octet-stream',
      '0123456789abcdef0123456789abcdef',
    ]);
    expect(cdh.seen).toEqual(['kbs:///default/key/1']);

    const info = await send(api, 'GET', '/info');
    expect(JSON.parse(info.body.toString())).toMatchObject({
      tee: 'sample',
      additional_tees: ['sampledevice'],
      feature: 'all',
    });

    const token = await send(api, 'GET', '/aa/token?token_type=kbs');
    expect(JSON.parse(token.body.toString())).toEqual({
      token: 'eyJ.x.y',
      tee_keypair: '-----BEGIN PRIVATE KEY-----',
    });

    const ev = await send(api, 'GET', '/aa/evidence?runtime_data=-_8&encoding=base64');
    expect(ev.status).toBe(200);
    expect(aa.evidence.map((e) => [...e])).toEqual([[0xfb, 0xff]]);

    const add = await send(api, 'GET', '/aa/additional-evidence?runtime_data=x');
    expect([add.status, add.body.length]).toEqual([200, 0]);

    const aael = await send(api, 'POST', '/aa/aael', '{"domain":"d","operation":"o","content":"c d"}');
    expect([aael.status, aael.body.toString()]).toEqual([200, '{"success":"true"}']);
    expect(aa.extends).toHaveLength(1);
    expect(aa.extends[0]).toMatchObject({ Domain: 'd', Operation: 'o', Content: 'c d' });
    expect(aa.extends[0]?.RegisterIndex).toBeUndefined();
  });

  it('reports NOT_ENABLED and NOT_SUPPORTED with upstream bodies', async () => {
    await startCdh();
    const aa = await startAa();
    const api = await startApi('attestation');
    aa.extendResult = RuntimeMeasurementResult.NOT_ENABLED;
    const a = await send(api, 'POST', '/aa/aael', '{"domain":"d","operation":"o","content":"c"}');
    expect(a.body.toString()).toBe(
      '{"success":"false","message": "Attestation Agent does not enable eventlog recording"}',
    );
    aa.extendResult = RuntimeMeasurementResult.NOT_SUPPORTED;
    const b = await send(api, 'POST', '/aa/aael', '{"domain":"d","operation":"o","content":"c"}');
    expect(b.body.toString()).toBe(
      '{"success":"false","message": "The platform does not support runtime measurement"}',
    );
  });

  it('answers 500 with the CDH error text', async () => {
    await startCdh();
    const api = await startApi('resource');
    const r = await send(api, 'GET', '/cdh/resource/default/key/404');
    expect([r.status, r.body.toString()]).toEqual([
      500,
      'ttrpc request error: INTERNAL: [CDH] [ERROR]: get resource failed: KBS resource Not Found (Error 404)',
    ]);
  });

  it('answers 500 with the AA error text', async () => {
    await startAa();
    const api = await startApi('attestation');
    const r = await send(api, 'GET', '/aa/token?token_type=foo');
    expect([r.status, r.body.toString()]).toEqual([
      500,
      'ttrpc request error: INTERNAL: [ERROR:attestation-agent] AA-KBC get token failed: Unsupported token type',
    ]);
  });

  it.each([
    '/cdh/resource/../../etc/passwd',
    '/cdh/resource/default/%2e%2e/key',
    '/cdh/resource/default/key/%2E%2E',
    '/cdh/resource/',
    '/cdh/resource/default',
    '/cdh/resource/a/b/c/d',
    '/cdh/resource//key/1',
  ])('gets the data hub refusal for %s as a clean 500', async (path) => {
    const cdh = await startCdh();
    const api = await startApi('resource');
    const r = await send(api, 'GET', path);
    expect(r.status).toBe(500);
    expect(r.body.toString()).toBe(
      `ttrpc request error: INTERNAL: [CDH] [ERROR]: Illegal resource uri: kbs://${path.slice('/cdh/resource'.length)}`,
    );
    expect(cdh.seen).toHaveLength(1);
  });
});

describe('availability of the CDH and AA', () => {
  it('starts without the CDH and gives a clear connect error per request', async () => {
    const api = await startApi('resource');
    const r = await send(api, 'GET', '/cdh/resource/default/key/1');
    expect(r.status).toBe(500);
    expect(r.body.toString()).toBe(
      `ttrpc connect to CDH addr: unix://${cdhSock} failed: UNAVAILABLE: ttrpc: cannot connect to unix://${cdhSock}: connect ENOENT ${cdhSock}`,
    );
    // The CDH comes up later: the next request connects.
    await startCdh();
    expect((await send(api, 'GET', '/cdh/resource/default/key/1')).status).toBe(200);
  });

  it('gives a clear error for /info when the AA is down', async () => {
    const api = await startApi('attestation');
    const r = await send(api, 'GET', '/info');
    expect(r.status).toBe(500);
    expect(r.body.toString()).toMatch(
      /^ttrpc connect to Attestation Agent addr: unix:\/\/.* failed: UNAVAILABLE: /,
    );
  });

  it('picks up a restarted CDH', async () => {
    const first = await startCdh();
    const api = await startApi('resource');
    expect((await send(api, 'GET', '/cdh/resource/default/key/1')).status).toBe(200);
    await first.server.close({ graceMs: 0 });
    const second = await startCdh();
    second.store.set('default/key/1', utf8('after restart'));
    const r = await send(api, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, r.body.toString()]).toEqual([200, 'after restart']);
  });

  it('answers 500 when the CDH dies during the call and does not come back', async () => {
    const cdh = await startCdh();
    const api = await startApi('resource');
    let called!: () => void;
    const inCall = new Promise<void>((r) => {
      called = r;
    });
    cdh.handler = () => {
      called();
      return new Promise(() => undefined);
    };
    const pending = send(api, 'GET', '/cdh/resource/default/key/1');
    await inCall;
    await cdh.server.close({ graceMs: 0 });
    const r = await pending;
    expect(r.status).toBe(500);
    expect(r.body.toString()).toMatch(
      /^failed to reconnect to CDH after LocalClosed: UNAVAILABLE: ttrpc: cannot connect/,
    );
  });

  it('bounds a call the CDH never answers by the ttrpc deadline', async () => {
    const cdh = await startCdh();
    cdh.handler = () => new Promise(() => undefined);
    const api = await startApi('resource', 300);
    const r = await send(api, 'GET', '/cdh/resource/default/key/1');
    expect([r.status, r.body.toString()]).toEqual([
      500,
      'ttrpc request error: DEADLINE_EXCEEDED: context deadline exceeded',
    ]);
  });
});

describe('backend factories', () => {
  it('reject a malformed address at start-up', () => {
    expect(() => dataHubBackend('http://x')).toThrow(/invalid ttrpc address/);
    expect(() => attestationAgentBackend('')).toThrow(/invalid ttrpc address/);
  });

  it('close() without any call is a no-op, and later calls fail', async () => {
    const b = dataHubBackend(`unix://${cdhSock}`);
    await b.close();
    await expect(b.getResource('kbs:///a/b/c')).rejects.toThrow(/shutting down/);
  });

  it('startApiServer fails on a malformed CDH address', async () => {
    await expect(
      startApiServer({ features: 'resource', bind: '127.0.0.1:0', cdhAddr: 'vsock://3:1' }),
    ).rejects.toThrow(/invalid ttrpc address/);
  });
});
