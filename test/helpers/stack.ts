// A KBS over HTTPS with trustee-style configuration, and helpers to administer it with kbs-client.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { binary, freePort, type Running, runToEnd, start, waitForListen } from './process.js';
import { makeServerCert, type TlsMaterial } from './tls.js';

export function openssl(...args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export interface KbsHandle {
  dir: string;
  port: number;
  url: string;
  tls: TlsMaterial;
  configPath: string;
  process: Running;
  /** Starts (or restarts) the KBS process; `wrapper` runs it under another command, e.g. faketime. */
  start(wrapper?: string[]): Promise<void>;
  stop(): Promise<void>;
  admin(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  client(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** The key material a test KBS needs: HTTPS certificate, token-signing key and certificate, admin key pair. */
export interface KbsKeyFiles {
  readonly tls: TlsMaterial;
  readonly tokenKey: string;
  readonly tokenCert: string;
  readonly adminKey: string;
  readonly adminPub: string;
}

/** Generates the KBS key material in `dir` (token.key/.crt, admin.key/.pub and the TLS files). */
export function makeKbsKeyFiles(dir: string): KbsKeyFiles {
  const tls = makeServerCert(['localhost', '127.0.0.1'], dir);
  const tokenKey = join(dir, 'token.key');
  const tokenCert = join(dir, 'token.crt');
  const adminKey = join(dir, 'admin.key');
  const adminPub = join(dir, 'admin.pub');
  openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', tokenKey);
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    tokenKey,
    '-out',
    tokenCert,
    '-days',
    '30',
    '-subj',
    '/CN=token-signer',
  );
  openssl('genpkey', '-algorithm', 'ed25519', '-out', adminKey);
  openssl('pkey', '-in', adminKey, '-pubout', '-out', adminPub);
  return { tls, tokenKey, tokenCert, adminKey, adminPub };
}

export interface KbsConfigOptions {
  readonly port: number;
  readonly keys: KbsKeyFiles;
  /** The `[storage_backend]` tables, as TOML text. */
  readonly storageBackend: string;
  /** Lines of the resource plugin table after its name. */
  readonly resourcePlugin?: string;
  /** `session_storage_type`; the KBS default (in memory) when absent. */
  readonly sessionStorageType?: string;
  readonly workerCount?: number;
}

/** Trustee-style KBS configuration: HTTPS on loopback, built-in AS and RVPS, JWT-authenticated admin. */
export function renderKbsConfig(o: KbsConfigOptions): string {
  const session =
    o.sessionStorageType !== undefined ? `session_storage_type = "${o.sessionStorageType}"\n\n` : '';
  return `${session}[http_server]
sockets = ["127.0.0.1:${o.port}"]
private_key = "${o.keys.tls.keyPath}"
certificate = "${o.keys.tls.certPath}"
${o.workerCount !== undefined ? `worker_count = ${o.workerCount}\n` : ''}
[attestation_token]
trusted_certs_paths = ["${o.keys.tokenCert}"]

[attestation_service]
type = "coco_as_builtin"

[attestation_service.attestation_token_broker.signer]
key_path = "${o.keys.tokenKey}"
cert_path = "${o.keys.tokenCert}"

[attestation_service.rvps_config]
type = "BuiltIn"

[admin]
authorization_mode = "AuthenticatedAuthorization"

[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "${o.keys.adminPub}" }]

[admin.authorization.regex_acl]
acls = [{ role = "admin", allowed_endpoints = "^/kbs/v0/.+$" }]

${o.storageBackend}
[[plugins]]
name = "resource"
${o.resourcePlugin ?? ''}`;
}

export async function prepareKbs(dir: string): Promise<KbsHandle> {
  const port = await freePort();
  const keys = makeKbsKeyFiles(dir);
  const { tls } = keys;
  const configPath = join(dir, 'kbs-config.toml');
  writeFileSync(
    configPath,
    renderKbsConfig({
      port,
      keys,
      storageBackend: `[storage_backend]
storage_type = "LocalFs"

[storage_backend.backends.local_fs]
dir_path = "${join(dir, 'kbs-storage')}"
`,
      resourcePlugin: 'storage_backend_type = "kvstorage"\n',
    }),
  );
  const url = `https://127.0.0.1:${port}`;
  const client = (...args: string[]) =>
    runToEnd(binary('kbs-client'), ['--url', url, '--cert-file', tls.certPath, ...args]);
  const handle: KbsHandle = {
    dir,
    port,
    url,
    tls,
    configPath,
    process: undefined as unknown as Running,
    async start(wrapper: string[] = []) {
      const argv = [...wrapper, binary('kbs'), '--config-file', configPath];
      handle.process = start(argv[0]!, argv.slice(1));
      await waitForListen({ port }, handle.process);
    },
    async stop() {
      await handle.process?.stop();
    },
    client,
    admin: (...args: string[]) => client('config', '--auth-private-key', join(dir, 'admin.key'), ...args),
  };
  return handle;
}

/** Reference values that make the sample TEE affirming under trustee's default attestation policy. */
export const SAMPLE_REFERENCE_VALUES: string[][] = [
  ['launch_digest', 'abcde'],
  ['svn', '1'],
  ['major_version', '1', '--as-integer', '--as-single-value'],
  ['minimum_minor_version', '4', '--as-integer', '--as-single-value'],
];

export async function mustSucceed(
  p: Promise<{ code: number | null; stdout: string; stderr: string }>,
): Promise<string> {
  const r = await p;
  if (r.code !== 0) throw new Error(`command failed (${r.code}):\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

export interface GuestHandle {
  aaSock: string;
  cdhSock: string;
  restPort: number;
  aa: Running;
  cdh: Running;
  rest: Running;
  get(path: string, timeoutMs?: number): Promise<Response>;
  stop(): Promise<void>;
}

export interface GuestOptions {
  /** TOML appended to cdh.toml after its `[kbc]` table, e.g. an `[image]` table. */
  cdhTomlExtra?: string;
  /** Variables set over this process's environment for the guest processes, e.g. a mock TEE's `env`. */
  env?: Readonly<Record<string, string>>;
  /** The agent policy, as initdata's `[data]."policy.rego"` (read by the agent-policy gate). */
  policyRego?: string;
}

export interface GuestConfig {
  aaSock: string;
  cdhSock: string;
  aaToml: string;
  cdhToml: string;
  /** The initdata document the guest is launched with; its digest is what the TEE binds. */
  initdata: string;
}

/** The configuration `startGuest` gives a guest in `dir`: known before the start, to bind its initdata. */
export function guestConfig(kbs: KbsHandle, dir: string, options: GuestOptions = {}): GuestConfig {
  const aaSock = join(dir, 'aa', 'attestation-agent.sock');
  const cdhSock = join(dir, 'cdh', 'cdh.sock');
  const cert = kbs.tls.certPem.trim();
  const aaToml = `[token_configs]\n[token_configs.coco_as]\nurl = "${kbs.url}"\n\n[token_configs.kbs]\nurl = "${kbs.url}"\ncert = """\n${cert}\n"""\n`;
  const cdhToml = `socket = 'unix://${cdhSock}'\ncredentials = []\n\n[aa]\naa_socket = 'unix://${aaSock}'\n\n[kbc]\nname = "cc_kbc"\nurl = "${kbs.url}"\nkbs_cert = """\n${cert}\n"""\n${options.cdhTomlExtra === undefined ? '' : `\n${options.cdhTomlExtra.trim()}\n`}`;
  const policy =
    options.policyRego === undefined ? '' : `\n"policy.rego" = '''\n${options.policyRego.trim()}\n'''\n`;
  const initdata = `algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '''\n${aaToml}'''\n\n"cdh.toml" = '''\n${cdhToml}'''\n${policy}`;
  return { aaSock, cdhSock, aaToml, cdhToml, initdata };
}

/**
 * The guest components of one CVM as real processes on their own sockets, configured from an initdata
 * TOML the way kata extracts it: aa.toml and cdh.toml from its [data] table.
 */
export async function startGuest(
  kbs: KbsHandle,
  dir: string,
  options: GuestOptions = {},
): Promise<GuestHandle> {
  const { aaSock, cdhSock, aaToml, cdhToml, initdata } = guestConfig(kbs, dir, options);
  const initdataDir = join(dir, 'initdata');
  mkdirSync(initdataDir, { recursive: true });
  writeFileSync(join(initdataDir, 'aa.toml'), aaToml);
  writeFileSync(join(initdataDir, 'cdh.toml'), cdhToml);
  writeFileSync(join(initdataDir, 'initdata.toml'), initdata);

  const opts = options.env === undefined ? {} : { env: { ...process.env, ...options.env } };
  const aa = start(
    binary('attestation-agent'),
    [
      '-c',
      join(initdataDir, 'aa.toml'),
      '--attestation_sock',
      `unix://${aaSock}`,
      '--initdata-toml',
      join(initdataDir, 'initdata.toml'),
    ],
    opts,
  );
  await waitForListen({ path: aaSock }, aa);
  const cdh = start(binary('confidential-data-hub'), ['-c', join(initdataDir, 'cdh.toml')], opts);
  await waitForListen({ path: cdhSock }, cdh);
  const { rest, restPort } = await startApiServerRest({ aaSock, cdhSock, env: opts.env });
  await waitForListen({ port: restPort }, rest);
  return {
    aaSock,
    cdhSock,
    restPort,
    aa,
    cdh,
    rest,
    get: (path, timeoutMs = 60_000) =>
      fetch(`http://127.0.0.1:${restPort}${path}`, { signal: AbortSignal.timeout(timeoutMs) }),
    async stop() {
      await Promise.all([rest.stop(), cdh.stop(), aa.stop()]);
    },
  };
}

/**
 * api-server-rest on a free loopback port in front of the agent's socket and, when given, the data
 * hub's (`--features all`; `attestation` without a hub). Not waited for: callers wait on its port.
 */
export async function startApiServerRest(o: {
  aaSock: string;
  cdhSock?: string;
  env?: NodeJS.ProcessEnv;
}): Promise<{ rest: Running; restPort: number }> {
  const restPort = await freePort();
  const hub = o.cdhSock === undefined ? [] : ['--cdh_addr', `unix://${o.cdhSock}`];
  const rest = start(
    binary('api-server-rest'),
    [
      '--features',
      o.cdhSock === undefined ? 'attestation' : 'all',
      ...hub,
      '--aa_addr',
      `unix://${o.aaSock}`,
      '--bind',
      `127.0.0.1:${restPort}`,
    ],
    o.env === undefined ? {} : { env: o.env },
  );
  return { rest, restPort };
}
