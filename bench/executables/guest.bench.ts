// The guest executable, as real processes from dist/bin against a KBS over HTTPS and a registry:
// start to socket ready and idle RSS of the attestation agent against `node -e 0` (the floor any Node
// program pays); the guest chain (attestation-agent, confidential-data-hub, api-server-rest and the
// agent-policy gate) through the pod's flows A (image pulls under a sigstore policy), B (a cold
// /cdh/resource fetch, attestation included, against warm ones) and C (sealed-secret-init), with
// start_to_info_ms (AA started to api-server-rest answering /info) and each service's RSS after the
// flows. Three layouts run: the one the guest image's units use gives the unprefixed keys, the others
// their keys prefixed `separate_` (four processes), `together_` (AA and the hub in one process,
// `broker-guest --together`) or `together_gate_` (the gate in that process too);
// `units_run_aa_cdh_together` and `units_run_gate_together` say which is which.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  checkFlowC,
  daemon,
  flowA,
  flowC,
  gateRequests,
  initdataToml,
  publishImage,
  sealFlowC,
} from '../../packages/executables/src/testing/guest-flows.js';
import { percentile } from '../helpers.js';

// Benchmarks run from the repository root (make bench); BROKER_BIN points elsewhere.
const BIN = resolve(process.env.BROKER_BIN ?? 'dist/bin');
const NODE = process.execPath;
// The agent policy and kata agent requests of regorus' `web` suite (copied upstream vectors).
const GATE_VECTORS = resolve('test/vectors/regorus/kata/web');

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

/**
 * RSS, its anonymous part (heap, stacks: the process's own) and PSS (shared pages, such as the
 * executable's text every service maps, divided among the processes that map them), in MiB.
 */
function memoryOf(pid: number): { rss: number; anon: number; pss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (text: string, key: string) =>
    Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 'NaN') / 1024;
  return { rss: kib(status, 'VmRSS'), anon: kib(status, 'RssAnon'), pss: kib(rollup, 'Pss') };
}

/** Polls api-server-rest's /info until it answers 200. */
async function untilInfo(port: number, deadlineMs = 10_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/info`).then(
      async (r) => {
        await r.arrayBuffer();
        return r.status === 200;
      },
      () => false,
    );
    if (ok) return;
    if (Date.now() > end) throw new Error('api-server-rest: /info never answered');
    await new Promise((r) => setTimeout(r, 2));
  }
}

/**
 * Drops `file` from the page cache (dd's iflag=nocache with count=0 does it for the whole file), so
 * that the services map it as a booted pod VM does, from disk. A file just written (a fresh build)
 * sits in the cache in large folios that a page fault maps whole: the same executable then showed
 * ~15 MiB more file-backed RSS per process. Pages other running processes map stay.
 */
function dropPageCache(file: string): void {
  execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}

function nodeFloorMs(): number {
  const t0 = performance.now();
  execFileSync(NODE, ['-e', '0']);
  return performance.now() - t0;
}

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

interface Stack {
  /** The bench's folder: the KBS's certificate `c` and flow C's keys are in it. */
  readonly dir: string;
  /** The KBS's HTTPS port and the registry's host:port. */
  readonly port: number;
  readonly reg: string;
  readonly guestExecutables: ReadonlySet<string>;
  readonly running: ChildProcess[];
  /** The guest services' environment: the bench's, plus the units' `Environment=`. */
  readonly env: NodeJS.ProcessEnv;
}

/**
 * The layouts the bench runs: which services share one `broker-guest --together` process, in the
 * order given (sealed-secret-init, a one-shot step there, runs flow C's unsealing at start).
 */
const LAYOUTS = {
  separate: [],
  together: ['attestation-agent', 'confidential-data-hub'],
  together_gate: ['attestation-agent', 'confidential-data-hub', 'sealed-secret-init', 'agent-policy-gate'],
} as const satisfies Record<string, readonly string[]>;
type Layout = keyof typeof LAYOUTS;

/**
 * The `Environment=` the shipped units give the guest services (MALLOC_ARENA_MAX), which every layout
 * runs with; one value per variable across the units.
 */
function unitsEnvironment(): Record<string, string> {
  const units = resolve('guest-image/rootfs/etc/systemd/system');
  const env: Record<string, string> = {};
  for (const f of readdirSync(units).filter((n) => n.endsWith('.service'))) {
    for (const [, assignments] of readFileSync(join(units, f), 'utf8').matchAll(/^Environment=(.*)$/gm)) {
      for (const a of (assignments ?? '').trim().split(/\s+/)) {
        const eq = a.indexOf('=');
        const [k, v] = [a.slice(0, eq), a.slice(eq + 1)];
        if (eq <= 0 || (env[k] !== undefined && env[k] !== v)) {
          throw new Error(`${f}: Environment=${a} is not one value across the units`);
        }
        env[k] = v;
      }
    }
  }
  return env;
}

/** The layout of the shipped units: the commands their `--together` line runs, if any. */
function unitsLayout(): Layout {
  const units = resolve('guest-image/rootfs/etc/systemd/system');
  for (const f of readdirSync(units).filter((n) => n.endsWith('.service'))) {
    // systemd joins a line ending in a backslash with the next.
    const text = readFileSync(join(units, f), 'utf8').replace(/\\\n/g, ' ');
    const line = /^ExecStart=.*\s--together\s.*$/m.exec(text)?.[0];
    if (line === undefined) continue;
    const words = line.split(/\s+/);
    const commands = words.filter((_, i) => words[i - 1] === '--together' || words[i - 1] === '--and');
    const found = (Object.keys(LAYOUTS) as Layout[]).find(
      (l) => LAYOUTS[l].length === commands.length && LAYOUTS[l].every((c) => commands.includes(c)),
    );
    if (found === undefined) throw new Error(`${f}: a --together layout the bench does not know`);
    return found;
  }
  return 'separate';
}

/**
 * The guest chain started in its units' order (AA, then the hub once AA serves, then api-server-rest,
 * and the gate), the services of `layout` in one `broker-guest --together` process, driven through
 * flows A, B and C; then each service's RSS, a process serving several counted once.
 */
async function chainThroughFlows(stack: Stack, layout: Layout): Promise<Record<string, number>> {
  const { port, reg } = stack;
  const out: Record<string, number> = {};
  const dir = mkdtempSync(join(stack.dir, `${layout}-`));
  const mine: ChildProcess[] = [];
  const spawnGuest = (command: string, args: string[]) => {
    const p = daemon(join(BIN, command), args, stack.env);
    stack.running.push(p);
    mine.push(p);
    return p;
  };
  const aaSock = join(dir, 'aa.sock');
  const cdhSock = join(dir, 'cdh.sock');
  const cert = readFileSync(join(stack.dir, 'c'), 'utf8').trim();
  const aaToml = `[token_configs.kbs]\nurl = "https://127.0.0.1:${port}"\ncert = """\n${cert}\n"""\n`;
  const cdhToml = `socket = 'unix://${cdhSock}'\ncredentials = []\n[aa]\naa_socket = 'unix://${aaSock}'\n[kbc]\nname = "cc_kbc"\nurl = "https://127.0.0.1:${port}"\nkbs_cert = """\n${cert}\n"""\n[image]\nimage_security_policy_uri = "kbs:///default/image-policy/policy"\nwork_dir = "${join(dir, 'image-work')}"\n[[image.registry_config.registry]]\nlocation = "${reg}"\ninsecure = true\n`;
  writeFileSync(join(dir, 'aa.toml'), aaToml);
  writeFileSync(join(dir, 'cdh.toml'), cdhToml);
  writeFileSync(
    join(dir, 'initdata.toml'),
    initdataToml(aaToml, cdhToml, readFileSync(join(GATE_VECTORS, 'policy.rego'), 'utf8')),
  );
  const gatePort = await freePort();
  const args: Record<string, string[]> = {
    'attestation-agent': ['-c', join(dir, 'aa.toml'), '--attestation_sock', `unix://${aaSock}`],
    'confidential-data-hub': ['-c', join(dir, 'cdh.toml')],
    'sealed-secret-init': ['--root', join(dir, 'sealed'), '--cdh-socket', `unix://${cdhSock}`],
    'agent-policy-gate': [
      'serve',
      '--listen',
      `tcp://127.0.0.1:${gatePort}`,
      '--agent',
      `unix://${join(dir, 'agent.sock')}`,
      '--initdata',
      join(dir, 'initdata.toml'),
    ],
  };
  const shared: readonly string[] = LAYOUTS[layout];
  const unsealAtStart = shared.includes('sealed-secret-init');
  try {
    if (unsealAtStart) sealFlowC(BIN, stack.dir, dir);
    for (const f of stack.guestExecutables) dropPageCache(f);
    const restPort = await freePort();
    const t0 = performance.now();
    const pids: Record<string, number> = {};
    if (shared.length > 0) {
      const line = shared.flatMap((c, i) => [i === 0 ? '--together' : '--and', c, ...(args[c] ?? [])]);
      const one = spawnGuest('broker-guest', line);
      // The services it serves (a one-shot step has ended by now).
      for (const c of shared) if (c !== 'sealed-secret-init') pids[c] = one.pid!;
      await untilListening({ path: cdhSock });
    } else {
      pids['attestation-agent'] = spawnGuest('attestation-agent', args['attestation-agent']!).pid!;
      await untilListening({ path: aaSock });
      const tCdh = performance.now();
      pids['confidential-data-hub'] = spawnGuest('confidential-data-hub', args['confidential-data-hub']!)
        .pid!;
      await untilListening({ path: cdhSock });
      out['confidential-data-hub_start_to_socket_ms'] = performance.now() - tCdh;
    }
    const tRest = performance.now();
    const rest = spawnGuest('api-server-rest', [
      '--features',
      'all',
      '--cdh_addr',
      `unix://${cdhSock}`,
      '--aa_addr',
      `unix://${aaSock}`,
      '--bind',
      `127.0.0.1:${restPort}`,
    ]);
    pids['api-server-rest'] = rest.pid!;
    await untilListening({ port: restPort });
    out['api-server-rest_start_to_socket_ms'] = performance.now() - tRest;
    await untilInfo(restPort);
    out.start_to_info_ms = performance.now() - t0;
    if (!shared.includes('agent-policy-gate')) {
      pids['agent-policy-gate'] = spawnGuest('agent-policy-gate', args['agent-policy-gate']!).pid!;
    }
    await untilListening({ port: gatePort });

    await flowA(cdhSock, `${reg}/signed/hello-unsigned:v1`, `${reg}/signed/hello:v1`, dir);

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
    out.warm_fetch_ms_p50 = percentile(warm, 50);
    out.warm_fetch_ms_p99 = percentile(warm, 99);
    out.cold_to_warm_ratio = out.cold_fetch_with_attestation_ms / out.warm_fetch_ms_p50;
    await new Promise((r) => setTimeout(r, 1000));
    out['confidential-data-hub_rss_after_fetches_mib'] = rssMiB(pids['confidential-data-hub']!);
    out['api-server-rest_rss_after_fetches_mib'] = rssMiB(rest.pid!);

    if (unsealAtStart) checkFlowC(dir, 'db-password-bench');
    else flowC(BIN, stack.dir, dir, cdhSock, 'db-password-bench');
    out.gate_requests = await gateRequests(gatePort, GATE_VECTORS);

    // After flows A, B and C.
    await new Promise((r) => setTimeout(r, 1000));
    const counted = new Set<number>();
    out.guest_total_rss_mib = 0;
    out.guest_total_rss_anon_mib = 0;
    out.guest_total_pss_mib = 0;
    for (const [name, pid] of Object.entries(pids)) {
      const m = memoryOf(pid);
      out[`${name}_rss_mib`] = m.rss;
      out[`${name}_rss_anon_mib`] = m.anon;
      if (counted.has(pid)) continue;
      counted.add(pid);
      out.guest_total_rss_mib += m.rss;
      out.guest_total_rss_anon_mib += m.anon;
      out.guest_total_pss_mib += m.pss;
    }
    return out;
  } finally {
    for (const p of mine) p.kill('SIGTERM');
    await Promise.all(
      mine.map((p) => (p.exitCode === null && p.signalCode === null ? once(p, 'exit') : undefined)),
    );
  }
}

export async function run(): Promise<Record<string, number>> {
  for (const b of [
    'kbs',
    'kbs-client',
    'image-policy',
    'secret',
    'attestation-agent',
    'confidential-data-hub',
    'api-server-rest',
    'agent-policy-gate',
    'sealed-secret-init',
  ]) {
    if (!existsSync(join(BIN, b))) throw new Error(`${join(BIN, b)} missing: run make build`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'broker-guest-bench-'));
  const out: Record<string, number> = {};
  const running: ChildProcess[] = [];
  try {
    // Start-up and idle memory of each guest service, alone.
    const floors: number[] = [];
    for (let i = 0; i < 10; i++) floors.push(nodeFloorMs());
    floors.sort((a, b) => a - b);
    out.node_e0_start_ms_p50 = percentile(floors, 50);
    writeFileSync(join(dir, 'aa.toml'), '');
    const guestExecutables = new Set(
      ['attestation-agent', 'confidential-data-hub', 'api-server-rest', 'agent-policy-gate'].map((c) =>
        realpathSync(join(BIN, c)),
      ),
    );
    for (const f of guestExecutables) dropPageCache(f);
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
      out[`${name}_start_to_socket_ms_p50`] = percentile(ms, 50);
      out[`${name}_start_ratio_to_node_e0`] = percentile(ms, 50) / out.node_e0_start_ms_p50;
      out[`${name}_idle_rss_mib`] = Math.max(...runs.map((r) => r.rss));
    }

    // The whole stack: KBS over HTTPS, a registry, then the guest chain through flows A, B and C.
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
    const kbs = daemon(join(BIN, 'kbs'), ['--config-file', join(dir, 'kbs.toml')]);
    running.push(kbs);
    await untilListening({ port });
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
    const store = (path: string, file: string) =>
      admin('set-resource', '--path', path, '--resource-file', file);
    writeFileSync(join(dir, 'key'), Buffer.alloc(32, 7));
    store('default/bench/key', join(dir, 'key'));
    admin('set-resource-policy', '--allow-all');

    // Flow A's registry: the same image in two repositories, one signed; the policy wants a signature.
    const regPort = await freePort();
    const reg = `127.0.0.1:${regPort}`;
    writeFileSync(
      join(dir, 'registry.yml'),
      `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'registry')}\nhttp:\n  addr: ${reg}\n`,
    );
    running.push(daemon('docker-registry', ['serve', join(dir, 'registry.yml')]));
    await untilListening({ port: regPort });
    for (const repo of ['signed/hello', 'signed/hello-unsigned']) {
      await publishImage(reg, repo, 'v1', { 'hello.txt': 'hello' });
    }
    const imagePolicy = (...args: string[]) =>
      execFileSync(join(BIN, 'image-policy'), args, { stdio: 'ignore' });
    imagePolicy('generate-key', join(dir, 'workshop'));
    imagePolicy(
      'sign',
      '--key',
      join(dir, 'workshop.key'),
      '--plain-http',
      `docker://${reg}/signed/hello:v1`,
    );
    writeFileSync(
      join(dir, 'image-policy.json'),
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: {
            [`${reg}/signed`]: [
              { type: 'sigstoreSigned', keyPath: 'kbs:///default/signature-secret/pub-key' },
            ],
          },
        },
      }),
    );
    store('default/image-policy/policy', join(dir, 'image-policy.json'));
    store('default/signature-secret/pub-key', join(dir, 'workshop.pub'));
    // Flow C's keys: the pointer's signing key and the secret it names.
    mkdirSync(join(dir, 'keys'));
    execFileSync(
      join(BIN, 'secret'),
      ['keygen', '--kid', 'sealed-signing', '--output-dir', join(dir, 'keys')],
      { stdio: 'ignore' },
    );
    store('default/signing-key/jwk_public', join(dir, 'keys', 'sealed-signing-public.json'));
    writeFileSync(join(dir, 'db-password'), 'db-password-bench');
    store('default/db/password', join(dir, 'db-password'));

    const units = unitsLayout();
    out.units_run_aa_cdh_together = units === 'separate' ? 0 : 1;
    out.units_run_gate_together = units === 'together_gate' ? 1 : 0;
    const env = unitsEnvironment();
    out.units_malloc_arena_max = Number(env.MALLOC_ARENA_MAX ?? 0);
    const stack = { dir, port, reg, guestExecutables, running, env: { ...process.env, ...env } };
    for (const layout of Object.keys(LAYOUTS) as Layout[]) {
      const r = await chainThroughFlows(stack, layout);
      for (const [k, v] of Object.entries(r)) out[layout === units ? k : `${layout}_${k}`] = v;
    }
    return out;
  } finally {
    for (const p of running) p.kill('SIGTERM');
    // Every process gone before the folder goes: one still writing in it made rmSync fail.
    const killer = setTimeout(() => {
      for (const p of running) p.kill('SIGKILL');
    }, 10_000);
    await Promise.all(
      running.map((p) => (p.exitCode === null && p.signalCode === null ? once(p, 'exit') : undefined)),
    );
    clearTimeout(killer);
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}
