/**
 * `kbs-client`: the command line of trustee's tools/kbs-client, on our
 * library. Commands, flags and stdout lines follow upstream so scripts
 * written for it work unchanged; extensions are marked in the help.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type Attester,
  type AttesterLogger,
  detectAdditionalDevices,
  detectTee,
  getAttester,
} from '@broker/attester';
import { createLogger, helpText, reportUsageError, versionLine } from '@broker/cli';
import { KbsAdminClient } from './admin.js';
import { signAdminToken } from './admin-token.js';
import { type OptionSpec, oneOf, type ParsedLevel, parseLevel, requireValue, UsageError } from './args.js';
import { KbsClient } from './client.js';
import {
  AFFIRMING_RESOURCE_POLICY,
  ALLOW_ALL_RESOURCE_POLICY,
  DENY_ALL_RESOURCE_POLICY,
} from './policies.js';
import { TeeKeyPair } from './tee-key.js';

export const KBS_CLIENT_VERSION = '0.1.0';
export const DEFAULT_KBS_URL = 'http://127.0.0.1:8080';
/** Admin-token fallbacks of upstream, tried in order when no token option is given. */
export const DOCKER_COMPOSE_ADMIN_TOKEN_PATH = 'kbs/config/docker-compose/admin-token';
const HOME_ADMIN_TOKEN_PATH = ['.trustee', 'admin-token'] as const;
/** Bound on files the CLI reads (keys, tokens, policies, resources). */
const MAX_INPUT_FILE_BYTES = 64 * 1024 * 1024;

/** Process surroundings, injectable for tests. */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  readonly readFile: (path: string) => Promise<Buffer>;
  /** Pause between RCAR retries. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Attester override (tests); otherwise detected like upstream's native evidence provider. */
  readonly attester?: Attester;
  readonly additionalAttesters?: readonly Attester[];
}

const processStderr = (t: string) => void process.stderr.write(t);

function defaultIo(): CliIo {
  return {
    stdout: (t) => process.stdout.write(t),
    stderr: processStderr,
    env: process.env,
    cwd: process.cwd(),
    readFile: (p) => readFile(p),
  };
}

const GLOBAL_OPTS: OptionSpec[] = [
  { name: 'url', value: true },
  { name: 'cert-file', value: true },
  { name: 'version', value: false, short: 'V' },
];
const ATTEST_OPTS: OptionSpec[] = [
  { name: 'tee-key-file', value: true },
  { name: 'init-data', value: true },
];
const GET_RESOURCE_OPTS: OptionSpec[] = [
  { name: 'path', value: true },
  { name: 'plugin', value: true },
  { name: 'tee-key-file', value: true },
  { name: 'attestation-token', value: true },
  { name: 'init-data', value: true },
];
const CONFIG_OPTS: OptionSpec[] = [
  { name: 'admin-token-file', value: true },
  { name: 'auth-private-key', value: true },
  { name: 'auth-role', value: true },
  { name: 'auth-issuer', value: true },
  { name: 'auth-audience', value: true },
];
const CONFIG_COMMANDS: Record<string, OptionSpec[]> = {
  'set-attestation-policy': [
    { name: 'type', value: true },
    { name: 'id', value: true },
    { name: 'policy-file', value: true },
  ],
  'set-resource-policy': [
    { name: 'policy-file', value: true },
    { name: 'allow-all', value: false },
    { name: 'deny-all', value: false },
    { name: 'affirming', value: false },
    { name: 'default', value: false },
  ],
  'get-resource-policy': [],
  'set-resource': [
    { name: 'path', value: true },
    { name: 'resource-file', value: true },
  ],
  'delete-resource': [{ name: 'path', value: true }],
  'get-reference-value': [{ name: 'id', value: true }],
  'set-sample-reference-value': [
    { name: 'as-integer', value: false },
    { name: 'as-bool', value: false },
    { name: 'as-single-value', value: false },
  ],
};

const HELP_MAIN = `A command line client for the key broker service (KBS).

Usage: kbs-client [OPTIONS] <COMMAND>

Commands:
  config        Administer the KBS: resources, policies, reference values
  get-resource  Attest (or use a token) and fetch a resource
  attest        Attest and print the attestation token

Options:
      --url <URL>              KBS root URL [default: ${DEFAULT_KBS_URL}]
      --cert-file <CERT_FILE>  PEM certificate to trust for an https KBS, besides the system roots
  -h, --help                   Print help
  -V, --version                Print version
`;

const HELP_ATTEST = `Attest to the KBS and print the attestation token.

Usage: kbs-client attest [OPTIONS] [INIT_DATA]

Arguments:
  [INIT_DATA]  Init-data TOML text measured into the TEE at boot, sent along with the evidence

Options:
      --tee-key-file <TEE_KEY_FILE>  TEE private key (PEM, RSA or EC P-256/P-521) to certify;
                                     a fresh EC P-256 key is generated when absent
      --init-data <FILE>             Read the init-data TOML from a file (extension)
  -h, --help                         Print help
`;

const HELP_GET_RESOURCE = `Fetch a resource, attesting first or presenting a token.

Usage: kbs-client get-resource [OPTIONS] --path <PATH> [INIT_DATA]

Arguments:
  [INIT_DATA]  Init-data TOML text, as for attest

Options:
      --path <PATH>                            Resource path repository/type/tag
      --plugin <PLUGIN>                        Ask KBS plugin PLUGIN instead: GET /kbs/v0/<PLUGIN>/<PATH>, the
                                               request of a kbs+<PLUGIN>:///<PATH> URI (extension)
      --tee-key-file <TEE_KEY_FILE>            TEE private key (PEM); required with --attestation-token
      --attestation-token <ATTESTATION_TOKEN>  File holding a token for the TEE key; sent as Bearer
                                               instead of attesting
      --init-data <FILE>                       Read the init-data TOML from a file (extension)
  -h, --help                                   Print help

Prints the resource in standard base64.
`;

const HELP_CONFIG = `Administer the KBS.

Usage: kbs-client config [OPTIONS] <COMMAND>

Commands:
  set-attestation-policy      Store an attestation policy
  set-resource-policy         Replace the resource policy
  get-resource-policy         List the stored resource policy ids (extension)
  set-resource                Store a resource
  delete-resource             Delete a resource
  get-reference-value         Print a reference value from the RVPS
  set-sample-reference-value  Register a reference value through the RVPS sample extractor

Options:
      --admin-token-file <FILE>  File holding the admin bearer token. Without it (and without
                                 --auth-private-key) the token is read from
                                 ./${DOCKER_COMPOSE_ADMIN_TOKEN_PATH} or ~/.trustee/admin-token,
                                 else requests go out anonymous
      --auth-private-key <FILE>  Sign a 2-hour admin JWT with this PEM private key (Ed25519 → EdDSA,
                                 EC → ES256/384/512, RSA → RS256) instead of reading a token
      --auth-role <ROLE>         role claim of that JWT [default: admin]
      --auth-issuer <ISS>        iss claim of that JWT
      --auth-audience <AUD>      aud claim of that JWT
  -h, --help                     Print help
`;

const HELP_CONFIG_COMMANDS: Record<string, string> = {
  'set-attestation-policy': `Usage: kbs-client config set-attestation-policy [OPTIONS] --policy-file <POLICY_FILE>

Options:
      --type <TYPE>                Policy type [default: rego]
      --id <ID>                    Policy id [default: default_cpu]
      --policy-file <POLICY_FILE>  Policy file
`,
  'set-resource-policy': `Usage: kbs-client config set-resource-policy <--policy-file <POLICY_FILE>|--allow-all|--deny-all|--affirming|--default>

Options:
      --policy-file <POLICY_FILE>  Policy file
      --allow-all                  Built-in policy releasing every resource
      --deny-all                   Built-in policy releasing nothing
      --affirming                  Built-in policy releasing only to affirming attestation results
      --default                    The flag upstream labels "default"; it sends the deny-all policy
`,
  'get-resource-policy': `Usage: kbs-client config get-resource-policy

Prints the JSON array of stored resource policy ids.
`,
  'set-resource': `Usage: kbs-client config set-resource --path <PATH> --resource-file <RESOURCE_FILE>

Options:
      --path <PATH>                    Resource path repository/type/tag
      --resource-file <RESOURCE_FILE>  File with the resource bytes
`,
  'delete-resource': `Usage: kbs-client config delete-resource --path <PATH>

Options:
      --path <PATH>  Resource path repository/type/tag
`,
  'get-reference-value': `Usage: kbs-client config get-reference-value --id <ID>

Options:
      --id <ID>  Reference value id
`,
  'set-sample-reference-value': `Usage: kbs-client config set-sample-reference-value [OPTIONS] <NAME> <VALUE>

Arguments:
  <NAME>   Reference value name
  <VALUE>  Value; a string unless --as-integer or --as-bool

Options:
      --as-integer       Parse the value as a 32-bit integer
      --as-bool          Parse the value as true or false
      --as-single-value  Store the value itself rather than a one-element list
`,
};

class CliFailure extends Error {
  override readonly name: string = 'CliFailure';
}

/** Rust `{:?}` of a string, which upstream uses to print a reference value. */
export function rustDebugString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) as number;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (cp === 0) out += '\\0';
    else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) out += `\\u{${cp.toString(16)}}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Rust `str::parse::<i32>()`. */
export function parseI32(s: string): number {
  if (s === '') throw new CliFailure('cannot parse integer from empty string');
  if (!/^[+-]?\d+$/.test(s)) throw new CliFailure('invalid digit found in string');
  const n = Number(s);
  if (n > 2147483647) throw new CliFailure('number too large to fit in target type');
  if (n < -2147483648) throw new CliFailure('number too small to fit in target type');
  return n;
}

/** Rust `str::parse::<bool>()`. */
export function parseBool(s: string): boolean {
  if (s === 'true') return true;
  if (s === 'false') return false;
  throw new CliFailure('provided string was not `true` or `false`');
}

interface Context {
  readonly io: CliIo;
  readonly url: string;
  readonly certPem: string | undefined;
  readonly logger: AttesterLogger;
}

async function readInput(io: CliIo, path: string): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await io.readFile(path);
  } catch (err) {
    io.stderr(`Failed to read: ${path}\n`);
    throw err;
  }
  if (data.length > MAX_INPUT_FILE_BYTES)
    throw new CliFailure(`${path} is larger than ${MAX_INPUT_FILE_BYTES} bytes`);
  return data;
}

async function readText(io: CliIo, path: string): Promise<string> {
  return (await readInput(io, path)).toString('utf8');
}

/** The shared logger on stderr (stdout carries tokens and resources): warnings, more with RUST_LOG. */
function cliLogger(io: CliIo): AttesterLogger {
  const logger = createLogger({
    name: 'kbs-client',
    env: io.env,
    fd: 2,
    fallback: 'warn',
    ...(io.stderr !== processStderr && { destination: { write: io.stderr } }),
  });
  return {
    debug: (m) => logger.debug(m),
    info: (m) => logger.info(m),
    warn: (m) => logger.warn(m),
  };
}

async function initDataOf(ctx: Context, level: ParsedLevel): Promise<string | null> {
  const file = level.values.get('init-data');
  if (level.positionals.length > 1)
    throw new UsageError(`unexpected argument '${level.positionals[1]}' found`);
  const inline = level.positionals[0];
  if (file !== undefined && inline !== undefined)
    throw new UsageError('give init-data either as INIT_DATA or with --init-data, not both');
  if (file !== undefined) return readText(ctx.io, file);
  return inline ?? null;
}

async function teeKeyOf(ctx: Context, level: ParsedLevel): Promise<TeeKeyPair | undefined> {
  const file = level.values.get('tee-key-file');
  return file === undefined ? undefined : TeeKeyPair.fromPem(await readText(ctx.io, file));
}

/** Upstream's native evidence provider: the detected TEE plus any additional devices. */
async function attesters(
  ctx: Context,
): Promise<{ attester: Attester; additionalAttesters: readonly Attester[] }> {
  if (ctx.io.attester !== undefined) {
    return { attester: ctx.io.attester, additionalAttesters: ctx.io.additionalAttesters ?? [] };
  }
  const opts = { env: ctx.io.env, logger: ctx.logger };
  const tee = await detectTee(opts);
  const devices = await detectAdditionalDevices(opts);
  return { attester: getAttester(tee, opts), additionalAttesters: devices.map((d) => getAttester(d, opts)) };
}

function clientBase(ctx: Context) {
  return {
    url: ctx.url,
    logger: ctx.logger,
    ...(ctx.certPem !== undefined ? { certPem: ctx.certPem } : {}),
    ...(ctx.io.sleep !== undefined ? { sleep: ctx.io.sleep } : {}),
  };
}

async function cmdAttest(ctx: Context, level: ParsedLevel): Promise<void> {
  if (level.positionals.length > 1)
    throw new UsageError(`unexpected argument '${level.positionals[1]}' found`);
  const teeKeyPair = await teeKeyOf(ctx, level);
  const initData = await initDataOf(ctx, level);
  const client = new KbsClient({
    ...clientBase(ctx),
    ...(await attesters(ctx)),
    ...(teeKeyPair !== undefined ? { teeKeyPair } : {}),
    initData,
  });
  try {
    const { token } = await client.getToken();
    ctx.io.stdout(`${token}\n`);
  } finally {
    client.close();
  }
}

async function cmdGetResource(ctx: Context, level: ParsedLevel): Promise<void> {
  const path = requireValue(level, 'path');
  const plugin = level.values.get('plugin');
  // Upstream builds `kbs:///<path>`, so a query after the path is passed through; with --plugin the URI
  // is guest-components' `kbs+<plugin>:///<path>`.
  const uri = `${plugin === undefined ? 'kbs' : `kbs+${plugin}`}:///${path}`;
  const teeKeyPair = await teeKeyOf(ctx, level);
  const tokenFile = level.values.get('attestation-token');
  let client: KbsClient;
  if (tokenFile !== undefined) {
    if (teeKeyPair === undefined) {
      throw new CliFailure(
        'if `--attestation-token` is set, `--tee-key-file` must be set too, and the public part of the TEE key must be the tee-pubkey in the token.',
      );
    }
    if (level.positionals.length > 0 || level.values.has('init-data')) {
      ctx.logger.warn('init-data is ignored with --attestation-token: no attestation takes place');
    }
    const token = (await readText(ctx.io, tokenFile)).trim();
    client = new KbsClient({ ...clientBase(ctx), token, teeKeyPair });
  } else {
    const initData = await initDataOf(ctx, level);
    client = new KbsClient({
      ...clientBase(ctx),
      ...(await attesters(ctx)),
      ...(teeKeyPair !== undefined ? { teeKeyPair } : {}),
      initData,
    });
  }
  try {
    const bytes = await client.getResource(uri);
    ctx.io.stdout(`${bytes.toString('base64')}\n`);
  } finally {
    client.close();
  }
}

async function adminToken(
  ctx: Context,
  level: ParsedLevel,
): Promise<string | null | (() => Promise<string>)> {
  const keyFile = level.values.get('auth-private-key');
  const tokenFile = level.values.get('admin-token-file');
  if (keyFile !== undefined && tokenFile !== undefined) {
    throw new UsageError("the argument '--auth-private-key' cannot be used with '--admin-token-file'");
  }
  if (keyFile === undefined) {
    for (const name of ['auth-role', 'auth-issuer', 'auth-audience']) {
      if (level.values.has(name)) throw new UsageError(`'--${name}' needs '--auth-private-key'`);
    }
  }
  if (keyFile !== undefined) {
    const pem = await readText(ctx.io, keyFile);
    const role = level.values.get('auth-role');
    const issuer = level.values.get('auth-issuer');
    const audience = level.values.get('auth-audience');
    const token = await signAdminToken(pem, {
      ...(role !== undefined ? { role } : {}),
      ...(issuer !== undefined ? { issuer } : {}),
      ...(audience !== undefined ? { audience } : {}),
    });
    return token;
  }
  if (tokenFile !== undefined) return (await readText(ctx.io, tokenFile)).trim();

  // Upstream's fallbacks, in its order.
  try {
    return (await ctx.io.readFile(join(ctx.io.cwd, DOCKER_COMPOSE_ADMIN_TOKEN_PATH))).toString('utf8').trim();
  } catch {}
  const home = ctx.io.env.HOME;
  if (home !== undefined) {
    try {
      return (await ctx.io.readFile(join(home, ...HOME_ADMIN_TOKEN_PATH))).toString('utf8').trim();
    } catch {}
  }
  ctx.logger.warn(
    'No admin token configured. Sending anonymous admin requests; this only works when KBS admin authorization_mode is InsecureAllowAll.',
  );
  return null;
}

async function cmdConfig(ctx: Context, args: readonly string[]): Promise<number> {
  const level = parseLevel(args, CONFIG_OPTS, Object.keys(CONFIG_COMMANDS));
  if (level.help) return printHelp(ctx.io, 'kbs-client config', HELP_CONFIG);
  if (level.command === undefined) return printVersion(ctx.io);
  const sub = parseLevel(level.rest, CONFIG_COMMANDS[level.command] ?? []);
  if (sub.help) {
    return printHelp(ctx.io, `kbs-client config ${level.command}`, HELP_CONFIG_COMMANDS[level.command] ?? '');
  }
  if (sub.flags.has('version')) return printVersion(ctx.io);
  if (level.command !== 'set-sample-reference-value' && sub.positionals.length > 0) {
    throw new UsageError(`unexpected argument '${sub.positionals[0]}' found`);
  }
  // Validate the subcommand's arguments before reading any token or key.
  const run = prepareConfigCommand(ctx, level.command, sub);
  const token = await adminToken(ctx, level);
  const admin = new KbsAdminClient({
    url: ctx.url,
    adminToken: token,
    logger: ctx.logger,
    ...(ctx.certPem !== undefined ? { certPem: ctx.certPem } : {}),
  });
  try {
    await run(admin);
  } finally {
    admin.close();
  }
  return 0;
}

function prepareConfigCommand(
  ctx: Context,
  command: string,
  sub: ParsedLevel,
): (admin: KbsAdminClient) => Promise<void> {
  const { io } = ctx;
  switch (command) {
    case 'set-attestation-policy': {
      const file = requireValue(sub, 'policy-file');
      return async (admin) => {
        const policy = await readInput(io, file);
        const id = sub.values.get('id');
        if (id === undefined) ctx.logger.warn('no policy_id set; using default_cpu');
        const type = sub.values.get('type');
        await admin.setAttestationPolicy({
          policy,
          ...(id !== undefined ? { id } : {}),
          ...(type !== undefined ? { type } : {}),
        });
        io.stdout(`Set attestation policy success \n policy: ${policy.toString('base64')}\n`);
      };
    }
    case 'set-resource-policy': {
      const choice = oneOf(sub, ['policy-file', 'allow-all', 'deny-all', 'affirming', 'default']);
      if (choice === undefined) throw new CliFailure('No policy specified');
      return async (admin) => {
        let policy: Buffer;
        if (choice === 'policy-file') policy = await readInput(io, sub.values.get('policy-file') as string);
        else if (choice === 'allow-all') policy = Buffer.from(ALLOW_ALL_RESOURCE_POLICY, 'utf8');
        else if (choice === 'affirming') policy = Buffer.from(AFFIRMING_RESOURCE_POLICY, 'utf8');
        // Upstream quirk kept on purpose: `--default` embeds deny_all.rego, not default.rego.
        else policy = Buffer.from(DENY_ALL_RESOURCE_POLICY, 'utf8');
        await admin.setResourcePolicy(policy);
        io.stdout(`Set resource policy success \n policy: ${policy.toString('base64')}\n`);
      };
    }
    case 'get-resource-policy':
      return async (admin) => {
        io.stdout(`${JSON.stringify(await admin.getResourcePolicyIds())}\n`);
      };
    case 'set-resource': {
      const path = requireValue(sub, 'path');
      const file = requireValue(sub, 'resource-file');
      return async (admin) => {
        const bytes = await readInput(io, file);
        await admin.setResource(path, bytes);
        io.stdout(`Set resource success \n resource: ${bytes.toString('base64')}\n`);
      };
    }
    case 'delete-resource': {
      const path = requireValue(sub, 'path');
      return async (admin) => {
        await admin.deleteResource(path);
        io.stdout('Delete resource success\n');
      };
    }
    case 'get-reference-value': {
      const id = requireValue(sub, 'id');
      return async (admin) => {
        io.stdout(`${rustDebugString(await admin.getReferenceValue(id))}\n`);
      };
    }
    case 'set-sample-reference-value': {
      const [name, value, extra] = sub.positionals;
      if (name === undefined || value === undefined) {
        throw new UsageError('the following required arguments were not provided: <NAME> <VALUE>');
      }
      if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}' found`);
      const kind = oneOf(sub, ['as-integer', 'as-bool']);
      // As upstream: a string unless a flag says otherwise (its help text claims integer).
      const parsed: unknown =
        kind === 'as-integer' ? parseI32(value) : kind === 'as-bool' ? parseBool(value) : value;
      const rv = sub.flags.has('as-single-value') ? parsed : [parsed];
      return async (admin) => {
        await admin.setSampleReferenceValue(name, rv);
        io.stdout('Reference Values Updated\n');
      };
    }
    default:
      throw new UsageError(`unrecognized subcommand '${command}'`);
  }
}

const EXIT_STATUS = [[1, 'the command failed: `Error: …` and its causes on stderr, as upstream']] as const;

function printHelp(io: CliIo, name: string, text: string): number {
  io.stdout(helpText({ name, version: KBS_CLIENT_VERSION, help: text, exitStatus: EXIT_STATUS }));
  return 0;
}

/** Reached for `-V/--version` at any level (a level's command is only absent then). */
function printVersion(io: CliIo): number {
  io.stdout(`${versionLine('kbs-client', KBS_CLIENT_VERSION)}\n`);
  return 0;
}

async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const top = parseLevel(argv, GLOBAL_OPTS, ['attest', 'get-resource', 'config']);
  if (top.help) return printHelp(io, 'kbs-client', HELP_MAIN);
  if (top.command === undefined) return printVersion(io);
  const url = top.values.get('url') ?? DEFAULT_KBS_URL;
  const certFile = top.values.get('cert-file');
  const logger = cliLogger(io);
  const certPem = certFile !== undefined ? await readText(io, certFile) : undefined;
  const ctx: Context = { io, url, certPem, logger };

  switch (top.command) {
    case 'attest': {
      const level = parseLevel(top.rest, ATTEST_OPTS);
      if (level.help) return printHelp(io, 'kbs-client attest', HELP_ATTEST);
      if (level.flags.has('version')) return printVersion(io);
      await cmdAttest(ctx, level);
      return 0;
    }
    case 'get-resource': {
      const level = parseLevel(top.rest, GET_RESOURCE_OPTS);
      if (level.help) return printHelp(io, 'kbs-client get-resource', HELP_GET_RESOURCE);
      if (level.flags.has('version')) return printVersion(io);
      await cmdGetResource(ctx, level);
      return 0;
    }
    default:
      return cmdConfig(ctx, top.rest);
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let text = err.message;
  let cause = err.cause;
  const seen = new Set<unknown>([err]);
  const chain: string[] = [];
  while (cause instanceof Error && !seen.has(cause)) {
    seen.add(cause);
    if (!text.includes(cause.message)) chain.push(cause.message);
    cause = cause.cause;
  }
  if (chain.length > 0) text += `\n\nCaused by:\n${chain.map((c, i) => `    ${i}: ${c}`).join('\n')}`;
  return text;
}

/**
 * Run `kbs-client` with `argv` (the arguments after the program name).
 * Returns the exit status: 0 success, 1 failure, 2 usage error.
 */
export async function main(argv: string[], io: Partial<CliIo> = {}): Promise<number> {
  const full: CliIo = { ...defaultIo(), ...io };
  try {
    return await run(argv, full);
  } catch (err) {
    if (err instanceof UsageError)
      return reportUsageError('kbs-client', err.message, { out: full.stdout, err: full.stderr });
    // Failures read as upstream's anyhow report: `Error: …` and the causes.
    full.stderr(`Error: ${describe(err)}\n`);
    return 1;
  }
}
