// KBS replicas as real processes (dist/bin/kbs) sharing one real redis-server and one token-signing key,
// each on its own HTTPS port, plus a small sample-TEE guest that can send every RCAR step to another
// replica.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { generateTeeKeyPair, runtimeDataDigest, type TeeKeyPair } from '@broker/protocol';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './process.js';
import { makeKbsKeyFiles, renderKbsConfig } from './stack.js';
import type { TlsMaterial } from './tls.js';

export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** redis-server on a free loopback port; append-only file fsynced on every write, no RDB snapshots. */
export async function startRedis(dir: string): Promise<RedisProcess> {
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  let child: ChildProcess | undefined;
  const handle: RedisProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    async start() {
      const args = [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
      ];
      args.push('--appendfsync', 'always', '--daemonize', 'no', '--logfile', join(dir, 'redis.log'));
      const c = spawn('redis-server', args, { stdio: 'ignore' });
      child = c;
      const failed = new Promise<never>((_, reject) => {
        c.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${readLog(dir)}`)));
      });
      await Promise.race([waitForListen({ port }), failed]);
      // Listening is not yet loading the append-only file: wait until it answers PING.
      for (;;) {
        const r = await runToEnd('redis-cli', ['-p', String(port), 'ping']);
        if (r.stdout.trim() === 'PONG') return;
        await new Promise((res) => setTimeout(res, 50));
      }
    },
    async stop(signal = 'SIGTERM') {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((res) => c.once('exit', () => res()));
      c.kill(signal);
      await exited;
    },
  };
  await handle.start();
  return handle;
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, 'redis.log'), 'utf8').slice(-2000);
  } catch {
    return '';
  }
}

export interface Replica {
  readonly port: number;
  readonly url: string;
  readonly configPath: string;
  process: Running | undefined;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface ReplicaSet {
  readonly dir: string;
  readonly tls: TlsMaterial;
  readonly ca: string;
  readonly replicas: Replica[];
  /** kbs-client `config` subcommands with the admin key, against one replica. */
  admin(
    replica: Replica,
    ...args: string[]
  ): Promise<{ code: number | null; stdout: string; stderr: string }>;
  stopAll(): Promise<void>;
}

export interface ReplicaOptions {
  workerCount?: number;
  /**
   * The shared store instead of Redis at `redisUrl`: the `[storage_backend]` tables and the
   * `session_storage_type` to write.
   */
  storage?: { sessionStorageType: string; storageBackend: string };
  /** How to run the KBS instead of dist/bin/kbs: the program and the arguments before `--config-file`. */
  kbsCommand?: { file: string; args: string[] };
}

/** Shared material (HTTPS certificate, token-signing key, admin key) and one config per replica. */
export async function prepareReplicas(
  dir: string,
  redisUrl: string,
  count: number,
  options: ReplicaOptions = {},
): Promise<ReplicaSet> {
  mkdirSync(dir, { recursive: true });
  const keys = makeKbsKeyFiles(dir);
  const { tls } = keys;
  const replicas: Replica[] = [];
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    const configPath = join(dir, `kbs-${i}.toml`);
    writeFileSync(
      configPath,
      renderKbsConfig({
        port,
        keys,
        sessionStorageType: options.storage?.sessionStorageType ?? 'Redis',
        ...(options.workerCount !== undefined ? { workerCount: options.workerCount } : {}),
        storageBackend:
          options.storage?.storageBackend ??
          `[storage_backend]
storage_type = "Redis"

[storage_backend.backends.redis]
url = "${redisUrl}"
`,
      }),
    );
    const replica: Replica = {
      port,
      url: `https://127.0.0.1:${port}`,
      configPath,
      process: undefined,
      async start() {
        const cmd = options.kbsCommand ?? { file: binary('kbs'), args: [] };
        replica.process = start(cmd.file, [...cmd.args, '--config-file', configPath]);
        await waitForListen({ port }, replica.process);
      },
      async stop(signal?: NodeJS.Signals) {
        await replica.process?.stop(signal);
        replica.process = undefined;
      },
    };
    replicas.push(replica);
  }
  return {
    dir,
    tls,
    ca: tls.certPem,
    replicas,
    admin: (replica, ...args) =>
      runToEnd(binary('kbs-client'), [
        '--url',
        replica.url,
        '--cert-file',
        tls.certPath,
        'config',
        '--auth-private-key',
        join(dir, 'admin.key'),
        ...args,
      ]),
    async stopAll() {
      await Promise.all(replicas.map((r) => r.stop()));
    },
  };
}

export interface HttpResult {
  readonly status: number;
  readonly body: string;
  readonly setCookie: string | undefined;
}

/** One HTTPS request; rejects only when the replica cannot be reached (connection refused, reset). */
export function call(
  ca: string,
  url: string,
  method: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<HttpResult> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: `${u.pathname}${u.search}`,
        method,
        ca,
        agent: false,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const sc = res.headers['set-cookie']?.[0];
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            setCookie: sc?.split(';')[0],
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

const AUTH = JSON.stringify({
  version: '0.4.0',
  tee: 'sample',
  'extra-params': { 'supported-hash-algorithms': ['sha256', 'sha384', 'sha512', 'sm3'] },
});

export interface Guest {
  readonly key: TeeKeyPair;
  /** POST /auth; the cookie and nonce. */
  auth(replica: string): Promise<{ cookie: string; nonce: string; status: number; body: string }>;
  /** POST /attest with sample evidence for the nonce. */
  attest(replica: string, cookie: string, nonce: string): Promise<HttpResult>;
  /** GET a resource with the cookie or a Bearer token. */
  resource(replica: string, path: string, auth: { cookie: string } | { token: string }): Promise<HttpResult>;
}

export function sampleGuest(ca: string): Guest {
  const key = generateTeeKeyPair();
  return {
    key,
    async auth(replica) {
      const r = await call(ca, `${replica}/kbs/v0/auth`, 'POST', {}, AUTH);
      const nonce = r.status === 200 ? (JSON.parse(r.body) as { nonce: string }).nonce : '';
      return { cookie: r.setCookie ?? '', nonce, status: r.status, body: r.body };
    },
    attest(replica, cookie, nonce) {
      const digest = runtimeDataDigest({ nonce, 'tee-pubkey': key.publicJwk, 'additional-evidence': '' });
      const body = JSON.stringify({
        'init-data': null,
        'runtime-data': { nonce, 'tee-pubkey': key.publicJwk },
        'tee-evidence': {
          primary_evidence: { svn: '1', report_data: digest.toString('base64') },
          additional_evidence: '',
        },
      });
      return call(ca, `${replica}/kbs/v0/attest`, 'POST', { cookie }, body);
    },
    resource(replica, path, auth) {
      const headers: Record<string, string> =
        'cookie' in auth ? { cookie: auth.cookie } : { authorization: `Bearer ${auth.token}` };
      return call(ca, `${replica}/kbs/v0/resource/${path}`, 'GET', headers);
    },
  };
}
