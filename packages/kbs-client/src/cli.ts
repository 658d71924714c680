/**
 * `kbs-client`: the command line of trustee's tools/kbs-client, on our
 * library. Commands, flags and stdout lines follow upstream so scripts
 * written for it work unchanged; extensions are marked in the help.
 */
import { generateKeyPairSync } from 'node:crypto';
import { chmod, mkdir, open, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  type Attester,
  type AttesterLogger,
  detectAdditionalDevices,
  detectTee,
  getAttester,
} from '@broker/attester';
import { ADMIN_TOKEN_LIFETIME_SECONDS, signAdminToken } from '@broker/auth';
import {
  backtraceOf,
  createLogger,
  describeError,
  helpText,
  hintOf,
  reportUsageError,
  versionLine,
  wantsBacktrace,
} from '@broker/cli';
import { KbsAdminClient, type VerdictFilter } from './admin.js';
import { type OptionSpec, oneOf, type ParsedLevel, parseLevel, requireValue, UsageError } from './args.js';
import { KbsClient } from './client.js';
import {
  KbsClientError,
  KbsRejected,
  KbsResourceMissing,
  KbsResourceNotFound,
  KbsUnauthorized,
  KbsUnreachable,
  KbsUntrustedCertificate,
} from './errors.js';
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
  'get-resource-policy': [{ name: 'text', value: false }],
  'get-attestation-policy': [{ name: 'id', value: true }],
  'list-resources': [],
  'list-verdicts': [
    { name: 'status', value: true },
    { name: 'tee', value: true },
    { name: 'kind', value: true },
    { name: 'request-id', value: true },
    { name: 'limit', value: true },
  ],
  'delete-reference-value': [{ name: 'id', value: true }],
  health: [],
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

const KEYGEN_OPTS: OptionSpec[] = [
  { name: 'output-file', value: true, short: 'f' },
  { name: 'algorithm', value: true },
];
const ADMIN_TOKEN_OPTS: OptionSpec[] = [
  { name: 'auth-private-key', value: true },
  { name: 'auth-role', value: true },
  { name: 'auth-issuer', value: true },
  { name: 'auth-audience', value: true },
  { name: 'expiry', value: true },
];
/** Key types of `keygen`: upstream's trustee-cli makes Ed25519 keys; ES256 is the other JWS choice. */
const KEYGEN_ALGORITHMS = ['ed25519', 'es256'] as const;

const HELP_MAIN = `A command line client for the key broker service (KBS).

Usage: kbs-client [OPTIONS] <COMMAND>

Commands:
  config        Administer the KBS: resources, policies, reference values
  get-resource  Attest (or use a token) and fetch a resource
  attest        Attest and print the attestation token
  keygen        Make an admin key pair: private key file and <file>.pub (as trustee-cli keygen)
  admin-token   Print an admin JWT signed with an admin private key (extension)

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

const HELP_KEYGEN = `Make a key pair for the KBS admin API: the private key (PKCS#8 PEM, mode 0600) and the
public key beside it with the extension .pub (SPKI PEM), as trustee-cli keygen writes them.
Neither file may exist already. Give the public key to the KBS ([admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "<file>.pub" }]) and sign tokens with
'kbs-client admin-token --auth-private-key <file>'.

Usage: kbs-client keygen [OPTIONS]

Options:
  -f, --output-file <FILE>  Private key file [default: $TRUSTEE_HOME/key, else ~/.trustee/key]
      --algorithm <ALG>     ed25519 (JWS EdDSA, as upstream) or es256 (EC P-256) [default: ed25519]
  -h, --help                Print help
`;

const HELP_ADMIN_TOKEN = `Print an admin bearer token: a JWT signed with an admin private key, carrying role, iat and exp
(and iss, aud when given). The KBS admin API, the console sign-in and the attestation service's
writes accept it when the key's public half is configured there.

Usage: kbs-client admin-token --auth-private-key <FILE> [OPTIONS]

Options:
      --auth-private-key <FILE>  PEM private key (Ed25519 → EdDSA, EC → ES256/384/512, RSA → RS256)
      --auth-role <ROLE>         role claim [default: admin]
      --auth-issuer <ISS>        iss claim
      --auth-audience <AUD>      aud claim
      --expiry <DURATION>        Lifetime: seconds, or a number with s, m, h or d [default: 2h]
  -h, --help                     Print help
`;

const HELP_CONFIG = `Administer the KBS.

Usage: kbs-client config [OPTIONS] <COMMAND>

Commands:
  set-attestation-policy      Store an attestation policy
  set-resource-policy         Replace the resource policy
  get-resource-policy         List the stored resource policy ids, or print the policy (--text) (extension)
  get-attestation-policy      List the attestation policy ids, or print one (--id) (extension)
  list-resources              List the stored resources (extension)
  list-verdicts               List the KBS's recent verdicts (extension)
  delete-reference-value      Expire a reference value of the built-in RVPS (extension)
  health                      Print the KBS's health report (extension)
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
  'get-resource-policy': `Usage: kbs-client config get-resource-policy [--text]

Prints the JSON array of stored resource policy ids.

Options:
      --text  Print the resource policy's Rego text instead (needs [admin] console = true at the KBS)
`,
  'get-attestation-policy': `Usage: kbs-client config get-attestation-policy [--id <ID>]

Prints the JSON array of the attestation policy ids, or with --id that policy's Rego text. Needs
[admin] console = true at the KBS and its built-in attestation service.

Options:
      --id <ID>  Policy id, e.g. default_cpu
`,
  'list-resources': `Usage: kbs-client config list-resources

Prints the stored resources as JSON, [{"path": "<repository>/<type>/<tag>", "size": <bytes>}, …]
(the first 1000). Needs [admin] console = true at the KBS.
`,
  'list-verdicts': `Usage: kbs-client config list-verdicts [OPTIONS]

Prints the KBS's verdict log, newest first, as JSON ({"size": <kept>, "verdicts": […]}).

Options:
      --status <STATUS>   Only this status: affirming, warning, contraindicated, none, failed (attestation);
                          allowed, denied, error (resource)
      --tee <TEE>         Only this TEE, e.g. snp, tdx, az-snp-vtpm, sample
      --kind <KIND>       attestation or resource
      --request-id <ID>   Only the verdict of this request id (the KBS's x-request-id header)
      --limit <N>         At most N verdicts
`,
  'delete-reference-value': `Usage: kbs-client config delete-reference-value --id <ID>

Expires the reference value ID in the KBS's built-in RVPS. Needs [admin] console = true at the KBS.

Options:
      --id <ID>  Reference value name
`,
  health: `Usage: kbs-client config health

Prints the KBS's health report as JSON: uptime, storage backends, counters and their rate per minute.
Needs [admin] console = true at the KBS.
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

/** A command-line failure: a message and, when known, what to do about it. */
class CliFailure extends KbsClientError {
  override readonly name: string = 'CliFailure';
  readonly hint: string | undefined;
  constructor(message: string, options?: { cause?: unknown; hint?: string }) {
    super(message, { code: 'INVALID_INPUT', ...(options?.cause !== undefined && { cause: options.cause }) });
    this.hint = options?.hint;
  }
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

/** Reads the file of option `--<flag>`; a failure names the file, the option and the reason, in one line. */
async function readInput(io: CliIo, path: string, flag: string): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await io.readFile(path);
  } catch (err) {
    // Upstream's words first ("Failed to read: <path>"), then which option and why.
    const reason = describeError(err).replace(`${path}: `, '');
    throw new CliFailure(`Failed to read: ${path} (--${flag}): ${reason}`, {
      cause: err,
      hint: hintOf(err) ?? `check the path given to --${flag}`,
    });
  }
  if (data.length > MAX_INPUT_FILE_BYTES)
    throw new CliFailure(`${path} (--${flag}) is larger than ${MAX_INPUT_FILE_BYTES} bytes`);
  return data;
}

async function readText(io: CliIo, path: string, flag: string): Promise<string> {
  return (await readInput(io, path, flag)).toString('utf8');
}

/** The `--cert-file` PEM: at least one certificate, or a one-line error naming the option. */
async function readCertFile(io: CliIo, path: string): Promise<string> {
  const pem = await readText(io, path, 'cert-file');
  if (!/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.test(pem)) {
    throw new CliFailure(`${path} (--cert-file) holds no PEM certificate`, {
      hint: "give the KBS's HTTPS certificate, or the CA that issued it, in PEM (-----BEGIN CERTIFICATE-----)",
    });
  }
  return pem;
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
  if (file !== undefined) return readText(ctx.io, file, 'init-data');
  return inline ?? null;
}

async function teeKeyOf(ctx: Context, level: ParsedLevel): Promise<TeeKeyPair | undefined> {
  const file = level.values.get('tee-key-file');
  return file === undefined ? undefined : TeeKeyPair.fromPem(await readText(ctx.io, file, 'tee-key-file'));
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
    // A person is waiting: a resource the KBS does not have is reported after one try.
    missingResourceIsFinal: true,
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
    const token = (await readText(ctx.io, tokenFile, 'attestation-token')).trim();
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
    const pem = await readText(ctx.io, keyFile, 'auth-private-key');
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
  if (tokenFile !== undefined) return (await readText(ctx.io, tokenFile, 'admin-token-file')).trim();

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
  // No logger: the missing token was warned about once, above.
  const admin = new KbsAdminClient({
    url: ctx.url,
    adminToken: token,
    ...(ctx.certPem !== undefined ? { certPem: ctx.certPem } : {}),
  });
  try {
    await run(admin);
  } finally {
    admin.close();
  }
  return 0;
}

function verdictFilter(sub: ParsedLevel): VerdictFilter {
  const limitText = sub.values.get('limit');
  let limit: number | undefined;
  if (limitText !== undefined) {
    limit = /^[0-9]{1,7}$/.test(limitText) ? Number(limitText) : 0;
    if (limit < 1)
      throw new UsageError(`invalid value '${limitText.slice(0, 32)}' for '--limit' (a positive integer)`);
  }
  const kind = sub.values.get('kind');
  if (kind !== undefined && kind !== 'attestation' && kind !== 'resource') {
    throw new UsageError(
      `invalid value '${kind.slice(0, 32)}' for '--kind' (allowed: attestation, resource)`,
    );
  }
  const status = sub.values.get('status');
  const tee = sub.values.get('tee');
  const requestId = sub.values.get('request-id');
  return {
    ...(status !== undefined && { status }),
    ...(tee !== undefined && { tee }),
    ...(kind !== undefined && { kind }),
    ...(requestId !== undefined && { requestId }),
    ...(limit !== undefined && { limit }),
  };
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
        const policy = await readInput(io, file, 'policy-file');
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
        if (choice === 'policy-file')
          policy = await readInput(io, sub.values.get('policy-file') as string, 'policy-file');
        else if (choice === 'allow-all') policy = Buffer.from(ALLOW_ALL_RESOURCE_POLICY, 'utf8');
        else if (choice === 'affirming') policy = Buffer.from(AFFIRMING_RESOURCE_POLICY, 'utf8');
        // Upstream quirk kept on purpose: `--default` embeds deny_all.rego, not default.rego.
        else policy = Buffer.from(DENY_ALL_RESOURCE_POLICY, 'utf8');
        await admin.setResourcePolicy(policy);
        io.stdout(`Set resource policy success \n policy: ${policy.toString('base64')}\n`);
      };
    }
    case 'get-resource-policy':
      if (sub.flags.has('text')) {
        return async (admin) => {
          const text = await admin.getResourcePolicyText();
          if (text === null) throw new CliFailure('the KBS has no resource policy stored');
          io.stdout(text.endsWith('\n') ? text : `${text}\n`);
        };
      }
      return async (admin) => {
        io.stdout(`${JSON.stringify(await admin.getResourcePolicyIds())}\n`);
      };
    case 'get-attestation-policy': {
      const id = sub.values.get('id');
      return async (admin) => {
        if (id === undefined) {
          io.stdout(`${JSON.stringify(await admin.listAttestationPolicies())}\n`);
          return;
        }
        const text = await admin.getAttestationPolicy(id);
        io.stdout(text.endsWith('\n') ? text : `${text}\n`);
      };
    }
    case 'list-resources':
      return async (admin) => {
        io.stdout(`${JSON.stringify(await admin.listResources())}\n`);
      };
    case 'list-verdicts': {
      const filter = verdictFilter(sub);
      return async (admin) => {
        io.stdout(`${JSON.stringify(await admin.listVerdicts(filter))}\n`);
      };
    }
    case 'delete-reference-value': {
      const id = requireValue(sub, 'id');
      return async (admin) => {
        if (!(await admin.deleteReferenceValue(id))) {
          throw new CliFailure(`delete reference value: the RVPS has no reference value named ${id}`, {
            hint: 'list them in the console, or read one with get-reference-value --id',
          });
        }
        io.stdout('Delete reference value success\n');
      };
    }
    case 'health':
      return async (admin) => {
        io.stdout(`${JSON.stringify(await admin.health())}\n`);
      };
    case 'set-resource': {
      const path = requireValue(sub, 'path');
      const file = requireValue(sub, 'resource-file');
      return async (admin) => {
        const bytes = await readInput(io, file, 'resource-file');
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

/** Seconds of `--expiry`: `N`, `Ns`, `Nm`, `Nh` or `Nd`, at most a year. */
export function parseExpiry(text: string): number {
  const m = /^([0-9]{1,9})([smhd]?)$/.exec(text);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[m?.[2] ?? ''] ?? 1;
  const seconds = m === null ? 0 : Number(m[1]) * unit;
  if (!(seconds >= 1 && seconds <= 366 * 86400)) {
    throw new UsageError(
      `invalid value '${text.slice(0, 32)}' for '--expiry' (seconds, or a number with s, m, h or d; at most 366d)`,
    );
  }
  return seconds;
}

async function cmdKeygen(io: CliIo, level: ParsedLevel): Promise<void> {
  const algorithm = level.values.get('algorithm') ?? 'ed25519';
  if (!(KEYGEN_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new UsageError(
      `invalid value '${algorithm.slice(0, 32)}' for '--algorithm' (allowed: ${KEYGEN_ALGORITHMS.join(', ')})`,
    );
  }
  let file = level.values.get('output-file');
  if (file === undefined) {
    const home =
      io.env.TRUSTEE_HOME ?? (io.env.HOME !== undefined ? join(io.env.HOME, '.trustee') : undefined);
    if (home === undefined)
      throw new UsageError('no --output-file, and neither TRUSTEE_HOME nor HOME is set');
    file = join(home, 'key');
  }
  // As trustee-cli: the public key's file is the private key's with the extension `pub`.
  const pub = file.replace(/(\.[^./]*)?$/, '.pub');
  if (pub === file) throw new UsageError(`--output-file ${file} already ends in .pub: name the private key`);
  const pair =
    algorithm === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const privatePem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const publicPem = pair.publicKey.export({ type: 'spki', format: 'pem' }) as string;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeNew(file, privatePem, 0o600, 'output-file');
  await writeNew(pub, publicPem, 0o644, 'output-file');
  io.stdout(`Wrote new private key: ${file}\nWrote new public key: ${pub}\n`);
}

/** Creates `path` (never over an existing file) with `mode`, holding `text`. */
async function writeNew(path: string, text: string, mode: number, flag: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'wx', mode);
  } catch (err) {
    const exists = (err as NodeJS.ErrnoException).code === 'EEXIST';
    throw new CliFailure(
      `cannot create ${path} (--${flag}): ${describeError(err).replace(`${path}: `, '')}`,
      {
        cause: err,
        hint: exists
          ? 'keygen never overwrites a key: remove the old pair or choose another --output-file'
          : (hintOf(err) ?? 'choose another --output-file'),
      },
    );
  }
  try {
    await handle.writeFile(text);
    await chmod(path, mode);
  } finally {
    await handle.close();
  }
}

async function cmdAdminToken(io: CliIo, level: ParsedLevel): Promise<void> {
  const keyFile = requireValue(level, 'auth-private-key');
  const expiry = level.values.get('expiry');
  const lifetimeSeconds = expiry === undefined ? ADMIN_TOKEN_LIFETIME_SECONDS : parseExpiry(expiry);
  const pem = await readText(io, keyFile, 'auth-private-key');
  const role = level.values.get('auth-role');
  const issuer = level.values.get('auth-issuer');
  const audience = level.values.get('auth-audience');
  const token = await signAdminToken(pem, {
    lifetimeSeconds,
    ...(role !== undefined ? { role } : {}),
    ...(issuer !== undefined ? { issuer } : {}),
    ...(audience !== undefined ? { audience } : {}),
  });
  io.stdout(`${token}\n`);
}

const EXIT_STATUS = [
  [1, 'the command failed: `Error: …` on stderr, one line (its causes and stack with RUST_LOG=debug)'],
] as const;

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
  const top = parseLevel(argv, GLOBAL_OPTS, ['attest', 'get-resource', 'config', 'keygen', 'admin-token']);
  if (top.help) return printHelp(io, 'kbs-client', HELP_MAIN);
  if (top.command === undefined) return printVersion(io);
  // The local commands: no KBS, no logger.
  if (top.command === 'keygen' || top.command === 'admin-token') {
    const keygen = top.command === 'keygen';
    const level = parseLevel(top.rest, keygen ? KEYGEN_OPTS : ADMIN_TOKEN_OPTS);
    if (level.help) {
      return printHelp(io, `kbs-client ${top.command}`, keygen ? HELP_KEYGEN : HELP_ADMIN_TOKEN);
    }
    if (level.flags.has('version')) return printVersion(io);
    if (level.positionals.length > 0)
      throw new UsageError(`unexpected argument '${level.positionals[0]}' found`);
    await (keygen ? cmdKeygen(io, level) : cmdAdminToken(io, level));
    return 0;
  }
  const url = top.values.get('url') ?? DEFAULT_KBS_URL;
  const certFile = top.values.get('cert-file');
  const logger = cliLogger(io);
  const certPem = certFile !== undefined ? await readCertFile(io, certFile) : undefined;
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

/** What the user can do about a failure of kbs-client, in its own options' terms. */
export function kbsClientHint(err: unknown): string | undefined {
  for (let c = err, depth = 0; c instanceof Error && depth < 8; c = c.cause, depth++) {
    if (c instanceof KbsRejected && c.hint !== undefined) return c.hint;
    if (c instanceof KbsUntrustedCertificate) {
      return "pass --cert-file with the KBS's HTTPS certificate (or the CA that issued it), in PEM";
    }
    if (c instanceof KbsResourceNotFound || c instanceof KbsResourceMissing) {
      return "check --path; 'kbs-client config list-resources' lists what the KBS stores";
    }
    if (c instanceof KbsRejected && (c.kind === 'AdminAuthAccess' || c.kind === 'AdminAuthInitialization')) {
      return 'give an admin token the KBS accepts: --admin-token-file, or --auth-private-key with a key whose public half the KBS trusts';
    }
    if (c instanceof KbsUnauthorized && c.kind === 'PolicyDeny') {
      return "the resource policy refused this TEE's claims: see 'kbs-client config list-verdicts --kind resource'";
    }
    if (c instanceof KbsUnreachable) return hintOf(c) ?? 'check --url, and that the KBS is running there';
  }
  return hintOf(err);
}

/** One line: the failure, and what to do when known. */
function describe(err: unknown): string {
  const text = describeError(err);
  const hint = kbsClientHint(err);
  return hint === undefined || text.includes(hint) ? text : `${text}; ${hint}`;
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
    // Failures read as upstream's anyhow report, `Error: …`, on one line; the causes and stacks
    // with RUST_LOG=debug or RUST_BACKTRACE=1.
    full.stderr(`Error: ${describe(err)}\n`);
    if (wantsBacktrace(full.env)) full.stderr(backtraceOf(err));
    return 1;
  }
}
