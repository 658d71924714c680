// The guest executable: start to socket ready and idle RSS of each guest service, against `node -e 0`
// (the floor any Node program pays), and a cold /cdh/resource fetch (attestation included) against a
// warm one, with the whole stack running as real processes from dist/bin.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

// Benchmarks run from the repository root (make bench); BROKER_BIN points elsewhere.
const BIN = resolve(process.env.BROKER_BIN ?? 'dist/bin');
const NODE = process.execPath;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => res(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

async function untilListening(
  target: { path: string } | { port: number },
  deadlineMs = 10_000,
): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const ok = await new Promise<boolean>((res) => {
      const s = 'path' in target ? connect(target.path) : connect(target.port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        res(true);
      });
      s.once('error', () => res(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`not listening: ${JSON.stringify(target)}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 'NaN');
  return kb / 1024;
}

/** Spawn → socket accepting, in ms, and the RSS after a second of idling. */
async function startup(cmd: string, args: string[], target: { path: string } | { port: number }) {
  const t0 = performance.now();
  const child = spawn(cmd, args, { stdio: 'ignore' });
  await untilListening(target);
  const ms = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 1000));
  const rss = rssMiB(child.pid!);
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return { ms, rss };
}

function nodeFloorMs(): number {
  const t0 = performance.now();
  execFileSync(NODE, ['-e', '0']);
  return performance.now() - t0;
}

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function run(): Promise<Record<string, number>> {
  for (const b of ['kbs', 'kbs-client', 'attestation-agent', 'confidential-data-hub', 'api-server-rest']) {
    if (!existsSync(join(BIN, b))) throw new Error(`${join(BIN, b)} missing: run make build`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'broker-guest-bench-'));
  const out: Record<string, number> = {};
  const running: { kill: (s: NodeJS.Signals) => boolean }[] = [];
  try {
    // Start-up and idle memory of each guest service, alone.
    const floors: number[] = [];
    for (let i = 0; i < 10; i++) floors.push(nodeFloorMs());
    floors.sort((a, b) => a - b);
    out.node_e0_start_ms_p50 = percentile(floors, 0.5);
    writeFileSync(join(dir, 'aa.toml'), '');
    const services: [string, string[], () => { path: string } | { port: number }][] = [
      [
        'attestation-agent',
        ['-c', join(dir, 'aa.toml'), '--attestation_sock', `unix://${join(dir, 'aa.sock')}`],
        () => ({ path: join(dir, 'aa.sock') }),
      ],
    ];
    for (const [name, args, target] of services) {
      const runs: { ms: number; rss: number }[] = [];
      for (let i = 0; i < 5; i++) runs.push(await startup(join(BIN, name), args, target()));
      const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
      out[`${name}_start_to_socket_ms_p50`] = percentile(ms, 0.5);
      out[`${name}_start_ratio_to_node_e0`] = percentile(ms, 0.5) / out.node_e0_start_ms_p50;
      out[`${name}_idle_rss_mib`] = Math.max(...runs.map((r) => r.rss));
    }

    // The whole stack: KBS over HTTPS, AA, CDH, api-server-rest.
    const port = await freePort();
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-sha256',
      '-days',
      '1',
      '-keyout',
      join(dir, 'k'),
      '-out',
      join(dir, 'c'),
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    );
    openssl('genpkey', '-algorithm', 'ed25519', '-out', join(dir, 'admin.key'));
    openssl('pkey', '-in', join(dir, 'admin.key'), '-pubout', '-out', join(dir, 'admin.pub'));
    writeFileSync(
      join(dir, 'kbs.toml'),
      `[http_server]\nsockets = ["127.0.0.1:${port}"]\nprivate_key = "${join(dir, 'k')}"\ncertificate = "${join(dir, 'c')}"\n[attestation_token]\ninsecure_header_jwk = true\n[attestation_service]\ntype = "coco_as_builtin"\n[admin]\nauthorization_mode = "AuthenticatedAuthorization"\n[admin.authentication.bearer_jwt]\nidentity_providers = [{ public_key_uri = "${join(dir, 'admin.pub')}" }]\n[admin.authorization.regex_acl]\nacls = [{ role = "admin", allowed_endpoints = "^/kbs/v0/.+$" }]\n[[plugins]]\nname = "resource"\n`,
    );
    const kbs = spawn(join(BIN, 'kbs'), ['--config-file', join(dir, 'kbs.toml')], { stdio: 'ignore' });
    running.push(kbs);
    await untilListening({ port });
    writeFileSync(join(dir, 'key'), Buffer.alloc(32, 7));
    const admin = (...args: string[]) =>
      execFileSync(
        join(BIN, 'kbs-client'),
        [
          '--url',
          `https://127.0.0.1:${port}`,
          '--cert-file',
          join(dir, 'c'),
          'config',
          '--auth-private-key',
          join(dir, 'admin.key'),
          ...args,
        ],
        { stdio: 'ignore' },
      );
    admin('set-resource', '--path', 'default/bench/key', '--resource-file', join(dir, 'key'));
    admin('set-resource-policy', '--allow-all');
    const cert = readFileSync(join(dir, 'c'), 'utf8').trim();
    writeFileSync(
      join(dir, 'aa.toml'),
      `[token_configs.kbs]\nurl = "https://127.0.0.1:${port}"\ncert = """\n${cert}\n"""\n`,
    );
    writeFileSync(
      join(dir, 'cdh.toml'),
      `socket = 'unix://${join(dir, 'cdh.sock')}'\ncredentials = []\n[aa]\naa_socket = 'unix://${join(dir, 'aa.sock')}'\n[kbc]\nname = "cc_kbc"\nurl = "https://127.0.0.1:${port}"\nkbs_cert = """\n${cert}\n"""\n`,
    );
    const aa = spawn(
      join(BIN, 'attestation-agent'),
      ['-c', join(dir, 'aa.toml'), '--attestation_sock', `unix://${join(dir, 'aa.sock')}`],
      { stdio: 'ignore' },
    );
    running.push(aa);
    await untilListening({ path: join(dir, 'aa.sock') });
    const cdhStart = await (async () => {
      const t0 = performance.now();
      const cdh = spawn(join(BIN, 'confidential-data-hub'), ['-c', join(dir, 'cdh.toml')], {
        stdio: 'ignore',
      });
      running.push(cdh);
      await untilListening({ path: join(dir, 'cdh.sock') });
      return { ms: performance.now() - t0, pid: cdh.pid! };
    })();
    out['confidential-data-hub_start_to_socket_ms'] = cdhStart.ms;
    const restPort = await freePort();
    const t0 = performance.now();
    const rest = spawn(
      join(BIN, 'api-server-rest'),
      [
        '--features',
        'resource',
        '--cdh_addr',
        `unix://${join(dir, 'cdh.sock')}`,
        '--bind',
        `127.0.0.1:${restPort}`,
      ],
      { stdio: 'ignore' },
    );
    running.push(rest);
    await untilListening({ port: restPort });
    out['api-server-rest_start_to_socket_ms'] = performance.now() - t0;

    const url = `http://127.0.0.1:${restPort}/cdh/resource/default/bench/key`;
    const fetchOnce = async () => {
      const s = performance.now();
      const r = await fetch(url);
      const body = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200 || body.length !== 32) throw new Error(`fetch failed: ${r.status}`);
      return performance.now() - s;
    };
    out.cold_fetch_with_attestation_ms = await fetchOnce();
    const warm: number[] = [];
    for (let i = 0; i < 300; i++) warm.push(await fetchOnce());
    warm.sort((a, b) => a - b);
    out.warm_fetch_ms_p50 = percentile(warm, 0.5);
    out.warm_fetch_ms_p99 = percentile(warm, 0.99);
    out.cold_to_warm_ratio = out.cold_fetch_with_attestation_ms / out.warm_fetch_ms_p50;
    await new Promise((r) => setTimeout(r, 1000));
    out['confidential-data-hub_rss_after_fetches_mib'] = rssMiB(cdhStart.pid);
    out['api-server-rest_rss_after_fetches_mib'] = rssMiB(rest.pid!);
    return out;
  } finally {
    for (const p of running) p.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    rmSync(dir, { recursive: true, force: true });
  }
}
