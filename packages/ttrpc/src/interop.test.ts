// Interop with the reference implementation: containerd/ttrpc (Go, Debian's
// golang-github-containerd-ttrpc-dev). Our client calls a Go server and a Go
// client calls our server. Needs `go`; scripts/install-deps.sh installs it.
// Set BROKER_SKIP_GO_INTEROP=1 to skip deliberately.
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TtrpcClient } from './client.js';
import { Code } from './codes.js';
import { requestCodec } from './envelope.js';
import { TtrpcError } from './errors.js';
import { TtrpcServer } from './server.js';
import { tempDir, text, utf8 } from './testing/helpers.js';

const SKIP = process.env.BROKER_SKIP_GO_INTEROP === '1';
const PEER_SOURCE = resolve(dirname(fileURLToPath(import.meta.url)), '../testdata/peer/main.go');
const GOPATH = '/usr/share/gocode';
const TTRPC_SRC = join(GOPATH, 'src/github.com/containerd/ttrpc');
const SERVICE = 'broker.interop.Peer';
const run = promisify(execFile);

/** Builds the Go peer once per source version, caching the binary under the temp dir. */
async function buildPeer(): Promise<string> {
  const missing =
    'the Go ttrpc interop test needs `go` and containerd/ttrpc sources: run scripts/install-deps.sh ' +
    '(Debian packages golang-go golang-github-containerd-ttrpc-dev), or set BROKER_SKIP_GO_INTEROP=1 to skip';
  try {
    await run('go', ['version']);
  } catch {
    throw new Error(`go not found on PATH; ${missing}`);
  }
  if (!existsSync(TTRPC_SRC)) throw new Error(`${TTRPC_SRC} is missing; ${missing}`);
  const source = await readFile(PEER_SOURCE);
  const { stdout: goVersion } = await run('go', ['version']);
  const key = createHash('sha256').update(source).update(goVersion).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), `broker-ttrpc-peer-${key}`);
  const bin = join(dir, 'peer');
  if (existsSync(bin)) return bin;
  await mkdir(dir, { recursive: true });
  const tmp = `${bin}.${process.pid}.tmp`;
  try {
    await run('go', ['build', '-o', tmp, PEER_SOURCE], {
      cwd: dirname(PEER_SOURCE),
      env: { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: join(dir, 'gocache'), GOFLAGS: '' },
      timeout: 180_000,
    });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`building the Go ttrpc peer failed: ${err.stderr || err.message}`);
  }
  await rename(tmp, bin); // atomic, so a concurrent run never executes a half-written binary
  return bin;
}

interface GoCall {
  service: string;
  method: string;
  payload?: string; // base64, as Go's encoding/json writes []byte
  metadata?: Record<string, string[]>;
  timeout_ms?: number;
  timeout_nano?: number;
}
interface GoResult {
  code: number;
  message: string;
  details: { type_url: string; value: string }[];
  payload: string | null;
  error?: string;
}

const b64 = (s: string | Uint8Array) => Buffer.from(s).toString('base64');
const unb64 = (s: string | null) => Buffer.from(s ?? '', 'base64').toString();

/** Runs `peer call`: the Go client makes all calls concurrently on one connection. */
function goCalls(peer: string, socket: string, calls: GoCall[]): Promise<GoResult[]> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(peer, ['call', socket], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`peer call exited ${code}: ${err}`));
      else resolvePromise(JSON.parse(out) as GoResult[]);
    });
    child.stdin.end(JSON.stringify(calls));
  });
}

describe.skipIf(SKIP)('interop with Go containerd/ttrpc', () => {
  let peer: string;
  let dir: string;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    peer = await buildPeer();
    ({ dir, cleanup } = await tempDir());
  }, 200_000);

  afterAll(async () => {
    await cleanup?.();
  });

  describe('our client → Go server', () => {
    let goServer: ChildProcessWithoutNullStreams;
    let client: TtrpcClient;

    beforeAll(async () => {
      const socket = join(dir, 'go-server.sock');
      goServer = spawn(peer, ['serve', socket], { stdio: ['pipe', 'pipe', 'pipe'] });
      await new Promise<void>((ready, fail) => {
        let out = '';
        goServer.stdout.on('data', (d) => {
          out += d;
          if (out.includes('READY')) ready();
        });
        goServer.on('exit', (code) => fail(new Error(`Go server exited early (${code})`)));
      });
      client = await TtrpcClient.connect({ path: socket });
    });

    afterAll(async () => {
      client?.close();
      if (goServer && goServer.exitCode === null) {
        const exited = new Promise((r) => goServer.once('exit', r));
        goServer.stdin.end(); // the peer exits when its stdin closes
        await exited;
      }
    });

    const call = (method: string, payload: string | Uint8Array = '', options = {}) =>
      client.call(SERVICE, method, typeof payload === 'string' ? utf8(payload) : payload, options);
    const failure = (p: Promise<unknown>) =>
      p.then(
        () => {
          throw new Error('expected failure');
        },
        (e: TtrpcError) => e,
      );

    it('echoes empty, small and 1 MiB payloads', async () => {
      expect((await call('Echo')).length).toBe(0);
      expect(text(await call('Echo', 'hello go'))).toBe('hello go');
      const big = new Uint8Array(1 << 20).map((_, i) => i & 0xff);
      expect(Buffer.from(await call('Echo', big)).equals(Buffer.from(big))).toBe(true);
    });

    it('multiplexes concurrent calls that complete out of order', async () => {
      const results = await Promise.all([
        call('Sleep', '60'),
        call('Sleep', '0'),
        call('Echo', 'x'),
        call('Sleep', '30'),
      ]);
      expect(results.map(text)).toEqual(['60', '0', 'x', '30']);
    });

    it('receives status code, message and details from a Go handler', async () => {
      const e = await failure(call('Fail', '7:blocked by policy'));
      expect(e).toBeInstanceOf(TtrpcError);
      expect([e.code, e.message]).toEqual([Code.PERMISSION_DENIED, 'blocked by policy']);
      expect(e.details.map((d) => [d.type_url, text(d.value)])).toEqual([
        ['type.googleapis.com/broker.interop.Detail', 'detail'],
      ]);
      const plain = await failure(call('Plain'));
      expect([plain.code, plain.message]).toEqual([Code.UNKNOWN, 'plain failure']);
    });

    it("gets Go's UNIMPLEMENTED texts, which our server copies", async () => {
      const a = await failure(client.call('no.Such', 'X', new Uint8Array(0)));
      expect([a.code, a.message]).toEqual([Code.UNIMPLEMENTED, 'service no.Such']);
      const b = await failure(client.call(SERVICE, 'Nope', new Uint8Array(0)));
      expect([b.code, b.message]).toEqual([Code.UNIMPLEMENTED, 'method Nope']);
    });

    it('sends metadata the Go server reads', async () => {
      const md = JSON.parse(text(await call('Metadata', '', { metadata: { 'X-Key': ['a', 'b'], k: 'v' } })));
      expect(md).toEqual({ 'X-Key': ['a', 'b'], k: ['v'] });
    });

    it('sends timeout_nano the Go server turns into a context deadline', async () => {
      expect(text(await call('Deadline'))).toBe('none');
      const left = Number(text(await call('Deadline', '', { timeoutMs: 5000 })));
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThanOrEqual(5e9);
      const e = await failure(call('Sleep', '60000', { timeoutMs: 50 }));
      expect([e.code, e.message]).toEqual([Code.DEADLINE_EXCEEDED, 'context deadline exceeded']);
    });

    it('discards an oversize response from the Go server (ttrpc 1.1.1 does not cap sends) and stays in sync', async () => {
      const e = await failure(call('Big', String(5 << 20)));
      expect(e.code).toBe(Code.RESOURCE_EXHAUSTED);
      expect(e.message).toMatch(/^message length 52428\d\d exceed maximum message size of 4194304$/);
      expect(text(await call('Echo', 'after big'))).toBe('after big');
    });
  });

  describe('Go client → our server', () => {
    let server: TtrpcServer;
    let socket: string;
    const aborted = (signal: AbortSignal) =>
      new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));

    beforeAll(async () => {
      server = new TtrpcServer();
      server.register(SERVICE, {
        Echo: async (req) => req,
        Fail: async (req) => {
          const [code, ...rest] = text(req).split(':');
          throw new TtrpcError(Number(code), rest.join(':'), {
            details: [{ type_url: 'type.googleapis.com/broker.interop.Detail', value: utf8('from ts') }],
          });
        },
        Plain: async () => {
          throw new Error('plain failure');
        },
        Metadata: async (_req, ctx) => utf8(JSON.stringify(Object.fromEntries(ctx.metadata))),
        Deadline: async (_req, ctx) =>
          utf8(ctx.deadline === undefined ? 'none' : String(ctx.deadline - Date.now())),
        Sleep: async (req, ctx) => {
          await Promise.race([new Promise((r) => setTimeout(r, Number(text(req)))), aborted(ctx.signal)]);
          return req;
        },
      });
      socket = join(dir, 'ts-server.sock');
      await server.listen({ path: socket });
    });

    afterAll(async () => {
      await server?.close({ graceMs: 0 });
    });

    it('serves echo, errors, unknown names, metadata and deadlines to the Go client', async () => {
      const calls: GoCall[] = [
        { service: SERVICE, method: 'Echo', payload: b64('hello ts') },
        { service: SERVICE, method: 'Echo' },
        { service: SERVICE, method: 'Fail', payload: b64('16:who are you') },
        { service: SERVICE, method: 'Plain' },
        { service: 'no.Such', method: 'X' },
        { service: SERVICE, method: 'Nope' },
        { service: SERVICE, method: 'Metadata', metadata: { Trace: ['1', '2'], k: ['v'] } },
        { service: SERVICE, method: 'Deadline' },
        { service: SERVICE, method: 'Deadline', timeout_ms: 5000 },
        // timeout_nano on the wire without a local deadline: only our server can end this call.
        { service: SERVICE, method: 'Sleep', payload: b64('60000'), timeout_nano: 50_000_000 },
      ];
      const r = await goCalls(peer, socket, calls);
      expect(r.map((x) => x.error ?? '')).toEqual(calls.map(() => ''));
      expect([r[0]!.code, unb64(r[0]!.payload)]).toEqual([0, 'hello ts']);
      expect([r[1]!.code, unb64(r[1]!.payload)]).toEqual([0, '']);
      expect([r[2]!.code, r[2]!.message]).toEqual([Code.UNAUTHENTICATED, 'who are you']);
      expect(r[2]!.details.map((d) => [d.type_url, unb64(d.value)])).toEqual([
        ['type.googleapis.com/broker.interop.Detail', 'from ts'],
      ]);
      expect([r[3]!.code, r[3]!.message]).toEqual([Code.UNKNOWN, 'plain failure']);
      expect([r[4]!.code, r[4]!.message]).toEqual([Code.UNIMPLEMENTED, 'service no.Such']);
      expect([r[5]!.code, r[5]!.message]).toEqual([Code.UNIMPLEMENTED, 'method Nope']);
      // Go's MD.Append lowercases keys before sending; we pass keys through as received.
      expect(JSON.parse(unb64(r[6]!.payload))).toEqual({ trace: ['1', '2'], k: ['v'] });
      expect(unb64(r[7]!.payload)).toBe('none');
      const left = Number(unb64(r[8]!.payload));
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThanOrEqual(5000);
      expect([r[9]!.code, r[9]!.message]).toEqual([Code.DEADLINE_EXCEEDED, 'context deadline exceeded']);
    });

    it('answers an oversize Go request with RESOURCE_EXHAUSTED and keeps serving that connection', async () => {
      const big = Buffer.alloc(5 << 20, 1).toString('base64');
      const calls: GoCall[] = [
        { service: SERVICE, method: 'Echo', payload: big },
        ...Array.from({ length: 50 }, (_, i) => ({
          service: SERVICE,
          method: 'Echo',
          payload: b64(`m${i}`),
        })),
      ];
      const r = await goCalls(peer, socket, calls);
      expect(r[0]!.code).toBe(Code.RESOURCE_EXHAUSTED);
      const envelope = requestCodec.encode({
        service: SERVICE,
        method: 'Echo',
        payload: Buffer.alloc(5 << 20),
        timeout_nano: 0n,
        metadata: [],
      });
      expect(r[0]!.message).toBe(`message length ${envelope.length} exceed maximum message size of 4194304`);
      expect(r.slice(1).map((x) => [x.code, unb64(x.payload)])).toEqual(
        Array.from({ length: 50 }, (_, i) => [0, `m${i}`]),
      );
    });
  });
});
