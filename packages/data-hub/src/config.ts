/**
 * `cdh.toml`: guest-components' `CdhConfig` with image-rs' `ImageConfig`
 * under `[image]`, read with upstream's defaults.
 *
 * Upstream deserializes with serde and no `deny_unknown_fields`, so unknown
 * keys are accepted (its own tests feed `[image] some_undefined_field`). We
 * accept them too, for configs written for newer upstream versions, but list
 * them in `unknownKeys` so the CLI can warn about a misspelt key. Known keys
 * are strictly typed: a wrong type is an error, never a silent default.
 */

import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Section, type SectionStyle, withHint } from '@broker/cli';
import {
  aaKbcParamsFormatMessage,
  findAaKbcParams,
  kernelCmdlineValue,
  splitAaKbcParams,
} from '@broker/guest-api';
import {
  DEFAULT_EXPANSION_LIMITS,
  DEFAULT_POLICY_SEMANTICS,
  type ExpansionLimits,
  LIMIT_NAMES,
  POLICY_SEMANTICS,
  type PolicySemantics,
} from '@broker/image';
import { parseTtrpcAddress, type TtrpcAddress, type UnixAddress } from '@broker/ttrpc';
import { parse as parseToml } from 'smol-toml';
import { DataHubError } from './errors.js';

export const DEFAULT_CDH_SOCKET_ADDR = 'unix:///run/confidential-containers/cdh.sock';
export const DEFAULT_AA_SOCKET_ADDR =
  'unix:///run/confidential-containers/attestation-agent/attestation-agent.sock';
export const DEFAULT_LOG_LEVEL = 'info';
/** image-rs `DEFAULT_WORK_DIR`: `/run` is tmpfs in encrypted memory in a confidential guest. */
export const DEFAULT_IMAGE_WORK_DIR = '/run/kata-containers/image/';
export const DEFAULT_MAX_CONCURRENT_LAYER_DOWNLOADS = 3;
/** Env var that overrides `[image] authenticated_registry_credentials_uri` (upstream `read_config`). */
export const REGISTRY_CREDENTIALS_ENV = 'CDH_DEFAULT_IMAGE_AUTHENTICATED_REGISTRY_CREDENTIALS';
/** A config file is a few KiB with certificates; anything far larger is not one. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

export type KbcName = 'cc_kbc' | 'offline_fs_kbc';
export const KBC_NAMES: readonly KbcName[] = Object.freeze(['cc_kbc', 'offline_fs_kbc'] as const);

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'off';

export class CdhConfigError extends DataHubError {
  override readonly name: string = 'CdhConfigError';
  override readonly code = 'CONFIG_INVALID';
}

export interface KbcConfig {
  readonly name: KbcName;
  /** KBS root URL; empty when none is configured (offline_fs_kbc, or the default without `-c`). */
  readonly url: string;
  /** PEM certificate(s) trusted for the KBS in addition to the system roots; null when absent or empty. */
  readonly kbsCert: string | null;
}

export interface Credential {
  readonly resourceUri: string;
  readonly path: string;
}

export interface ProxyConfig {
  readonly httpsProxy: string | null;
  readonly httpProxy: string | null;
  readonly noProxy: string | null;
}

export interface RegistryMirror {
  readonly location: string;
  readonly insecure: boolean;
}

/** A `[[registry]]` of containers-registries.conf(5), as image-rs reads it. */
export interface RegistryEntry {
  readonly prefix: string;
  readonly insecure: boolean;
  readonly blocked: boolean;
  readonly location: string;
  readonly mirror: readonly RegistryMirror[];
}

export interface RegistryConfig {
  readonly unqualifiedSearchRegistries: readonly string[];
  readonly registry: readonly RegistryEntry[];
}

/** image-rs `ImageConfig`, kept for the image pull service. */
export interface ImageConfig {
  readonly workDir: string;
  readonly imageSecurityPolicyUri: string | null;
  /** Inline policy JSON; `imageSecurityPolicyUri` wins when both are set. */
  readonly imageSecurityPolicy: string | null;
  readonly sigstoreConfigUri: string | null;
  readonly sigstoreConfig: string | null;
  readonly authenticatedRegistryCredentialsUri: string | null;
  readonly registryConfigurationUri: string | null;
  readonly registryConfig: RegistryConfig | null;
  readonly maxConcurrentLayerDownloadsPerImage: number;
  readonly imagePullProxy: ProxyConfig | null;
  readonly extraRootCertificates: readonly string[];
  /** Our addition: caps on what layers expand to (`max_layer_bytes`, …; none upstream). */
  readonly expansionLimits: ExpansionLimits;
  /**
   * Our addition (`decryption_keys`, none upstream): ocicrypt `jwe`, `pgp` and `pkcs7` private keys,
   * `PROTOCOL:FILE-OR-KBS-URI[:PASSWORD]`; read by `image/decryption-keys.ts`.
   */
  readonly decryptionKeys: readonly string[];
  /**
   * Our addition (`index_signatures`, default true as image-rs behaves): for an image pulled through
   * an index whose platform manifest has no signature, the index's signatures count. false:
   * containers/image's rule (the platform manifest's own signatures only).
   */
  readonly indexSignatures: boolean;
  /**
   * Our addition (`policy_semantics`, default `image-rs`): how `sigstoreSigned` rules read `keyData`
   * (PEM text or base64) and a missing `signedIdentity` (no identity check), as image-rs does;
   * `containers-image` keeps containers/image's meanings (base64 only; `matchRepoDigestOrExact`).
   */
  readonly policySemantics: PolicySemantics;
}

export interface CdhConfig {
  /** The listening socket, `unix://` only (upstream refuses other schemes). */
  readonly socket: string;
  readonly socketAddress: UnixAddress;
  readonly aa: { readonly aaSocket: string; readonly aaAddress: TtrpcAddress };
  readonly kbc: KbcConfig;
  readonly credentials: readonly Credential[];
  readonly image: ImageConfig;
  readonly skipSealedSecretVerification: boolean;
  readonly log: { readonly level: LogLevel };
  /** Keys upstream would ignore, as dotted paths; reported as warnings. */
  readonly unknownKeys: readonly string[];
}

/** Where values that upstream reads outside the file come from; injectable for tests. */
export interface ConfigEnvironment {
  /** Process environment (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** The kernel command line text (default: `/proc/cmdline`, empty when unreadable). */
  readonly kernelCmdline?: string;
}

// ---------------------------------------------------------------------------------------------
// Typed reading of tables (`@broker/cli`'s reader, keys named with dots)

type Table = Section;
const STYLE: SectionStyle = { naming: 'dotted', error: (message) => new CdhConfigError(message) };

function tableOf(v: unknown, where: string): Table {
  return Section.of(v, where, undefined, STYLE);
}

// ---------------------------------------------------------------------------------------------
// Sections

function logLevelOf(text: string): LogLevel {
  // RUST_LOG / EnvFilter syntax: `info`, or directives such as `info,ttrpc=warn`. The bare
  // directive is the default level; per-target ones have no equivalent in our logger.
  const directives = text
    .split(',')
    .map((d) => d.trim())
    .filter((d) => d !== '');
  const bare = directives.filter((d) => !d.includes('='));
  const level = (bare.at(-1) ?? (directives.length > 0 ? DEFAULT_LOG_LEVEL : text)).toLowerCase();
  if (level === 'trace' || level === 'debug' || level === 'info' || level === 'off' || level === 'error')
    return level;
  if (level === 'warn' || level === 'warning') return 'warn';
  throw new CdhConfigError(`Invalid log level: ${text.slice(0, 64)}`);
}

/** A log level as upstream's `[log] level` or `RUST_LOG` gives it. */
export function parseLogLevel(text: string): LogLevel {
  return logLevelOf(text);
}

function parseKbsCert(pem: string | null): string | null {
  if (pem === null || pem.trim() === '') return null;
  if (pem.length > MAX_CONFIG_BYTES) throw new CdhConfigError('kbc.kbs_cert is too long');
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
  if (blocks === null) throw new CdhConfigError('kbc.kbs_cert: no PEM certificate found');
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch (e) {
      throw new CdhConfigError(`kbc.kbs_cert: not a valid certificate: ${(e as Error).message}`);
    }
  }
  return pem;
}

export function parseKbcName(name: string): KbcName {
  if ((KBC_NAMES as readonly string[]).includes(name)) return name as KbcName;
  // Upstream's words (kms `KbcClient::new`).
  throw new CdhConfigError(
    `unknown kbc name ${name.slice(0, 64)}, only support \`cc_kbc\`(feature \`kbs\`) and \`offline_fs_kbc\`.`,
  );
}

function checkKbsUrl(name: KbcName, url: string): string {
  if (name !== 'cc_kbc' || url === '') return url;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new CdhConfigError(`kbc.url: ${JSON.stringify(url.slice(0, 200))} is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new CdhConfigError(`kbc.url: ${JSON.stringify(url.slice(0, 200))} is not an http(s) URL`);
  }
  return url;
}

function readKbc(t: Table): KbcConfig {
  const name = parseKbcName(t.string('name'));
  return {
    name,
    url: checkKbsUrl(name, t.string('url', '')),
    kbsCert: parseKbsCert(t.optString('kbs_cert') ?? null),
  };
}

function readCredentials(tables: Table[]): Credential[] {
  return tables.map((t) => ({ resourceUri: t.string('resource_uri'), path: t.string('path') }));
}

function readProxy(t: Table): ProxyConfig {
  return {
    httpsProxy: t.optString('https_proxy') ?? null,
    httpProxy: t.optString('http_proxy') ?? null,
    noProxy: t.optString('no_proxy') ?? null,
  };
}

function readRegistryConfig(t: Table, unknown: string[]): RegistryConfig {
  const registry = t.sectionArray('registry').map((r) => {
    const mirror = r.sectionArray('mirror').map((m) => {
      const out = { location: m.string('location'), insecure: m.bool('insecure', false) };
      unknown.push(...m.unknownKeys());
      return out;
    });
    const out: RegistryEntry = {
      prefix: r.string('prefix', ''),
      insecure: r.bool('insecure', false),
      blocked: r.bool('blocked', false),
      location: r.string('location', ''),
      mirror,
    };
    unknown.push(...r.unknownKeys());
    return out;
  });
  return {
    unqualifiedSearchRegistries: t.stringArray('unqualified-search-registries', ['docker.io']),
    registry,
  };
}

/**
 * A containers-registries.conf(5) document fetched through
 * `registry_configuration_uri` (TOML), read like `[image.registry_config]`.
 * Used by the image-pull service (`./image/`).
 */
export function parseRegistryConfiguration(text: string): RegistryConfig {
  let doc: unknown;
  try {
    doc = parseToml(text);
  } catch (e) {
    throw new CdhConfigError(`invalid registry configuration: ${(e as Error).message}`);
  }
  return readRegistryConfig(tableOf(doc, ''), []);
}

const EMPTY_IMAGE_CONFIG: ImageConfig = Object.freeze({
  workDir: DEFAULT_IMAGE_WORK_DIR,
  imageSecurityPolicyUri: null,
  imageSecurityPolicy: null,
  sigstoreConfigUri: null,
  sigstoreConfig: null,
  authenticatedRegistryCredentialsUri: null,
  registryConfigurationUri: null,
  registryConfig: null,
  maxConcurrentLayerDownloadsPerImage: DEFAULT_MAX_CONCURRENT_LAYER_DOWNLOADS,
  imagePullProxy: null,
  extraRootCertificates: Object.freeze([]) as readonly string[],
  expansionLimits: DEFAULT_EXPANSION_LIMITS,
  decryptionKeys: Object.freeze([]) as readonly string[],
  indexSignatures: true,
  policySemantics: DEFAULT_POLICY_SEMANTICS,
});

/** `[image] max_layer_bytes` and the other caps, spelt like `image-pull`'s options with `_`. */
function readExpansionLimits(t: Table): ExpansionLimits {
  const out: Record<string, number> = {};
  for (const [key, name] of Object.entries(LIMIT_NAMES) as [keyof ExpansionLimits, string][]) {
    out[key] = t.int(name.replaceAll('-', '_'), DEFAULT_EXPANSION_LIMITS[key], 1, Number.MAX_SAFE_INTEGER);
  }
  return out as unknown as ExpansionLimits;
}

function readPolicySemantics(t: Table): PolicySemantics {
  const v = t.string('policy_semantics', DEFAULT_POLICY_SEMANTICS);
  const known = POLICY_SEMANTICS.find((s) => s === v);
  if (known === undefined) {
    throw new CdhConfigError(
      `image.policy_semantics must be ${POLICY_SEMANTICS.map((s) => `"${s}"`).join(' or ')}, got ${JSON.stringify(v)}`,
    );
  }
  return known;
}

function readImage(t: Table, unknown: string[]): ImageConfig {
  const registry = t.optSection('registry_config') ?? null;
  const proxy = t.optSection('image_pull_proxy') ?? null;
  const image: ImageConfig = {
    workDir: t.string('work_dir', DEFAULT_IMAGE_WORK_DIR),
    imageSecurityPolicyUri: t.optString('image_security_policy_uri') ?? null,
    imageSecurityPolicy: t.optString('image_security_policy') ?? null,
    sigstoreConfigUri: t.optString('sigstore_config_uri') ?? null,
    sigstoreConfig: t.optString('sigstore_config') ?? null,
    authenticatedRegistryCredentialsUri: t.optString('authenticated_registry_credentials_uri') ?? null,
    registryConfigurationUri: t.optString('registry_configuration_uri') ?? null,
    registryConfig: registry === null ? null : readRegistryConfig(registry, unknown),
    // usize upstream; 0 would never download anything, so it is refused.
    maxConcurrentLayerDownloadsPerImage: t.int(
      'max_concurrent_layer_downloads_per_image',
      DEFAULT_MAX_CONCURRENT_LAYER_DOWNLOADS,
      1,
      1024,
    ),
    imagePullProxy: proxy === null ? null : readProxy(proxy),
    extraRootCertificates: t.stringArray('extra_root_certificates'),
    expansionLimits: readExpansionLimits(t),
    decryptionKeys: t.stringArray('decryption_keys'),
    indexSignatures: t.bool('index_signatures', true),
    policySemantics: readPolicySemantics(t),
  };
  if (registry !== null) unknown.push(...registry.unknownKeys());
  if (proxy !== null) unknown.push(...proxy.unknownKeys());
  return image;
}

// ---------------------------------------------------------------------------------------------
// Kernel command line (upstream reads these when the file does not say)

function cmdlineParams(cmdline: string): string[] {
  return cmdline.split(/[\t\n\f\r ]+/).filter((p) => p !== '');
}

/**
 * `cdh.kbs_resources=<uri>::<path>,…` on the kernel command line: extra
 * credentials. Items without `::` are skipped, as upstream does.
 */
export function credentialsFromKernelCmdline(cmdline: string): Credential[] {
  const value = kernelCmdlineValue(cmdline, 'cdh.kbs_resources') ?? '';
  const out: Credential[] = [];
  for (const item of value.split(',')) {
    const sep = item.indexOf('::');
    if (item === '' || sep < 0) continue;
    out.push({ resourceUri: item.slice(0, sep), path: item.slice(sep + 2) });
  }
  return out;
}

/**
 * image-rs `ImageConfig::from_kernel_cmdline`, used when `[image]` is absent:
 * `agent.image_registry_auth`, `agent.image_policy_file` (only with
 * `agent.enable_signature_verification=true`) and `agent.{https,http,no}_proxy`.
 */
export function imageConfigFromKernelCmdline(cmdline: string): ImageConfig {
  const params = new Map<string, string>();
  for (const p of cmdlineParams(cmdline)) {
    const eq = p.indexOf('=');
    if (eq >= 0) params.set(p.slice(0, eq), p.slice(eq + 1));
  }
  const verify = params.get('agent.enable_signature_verification') === 'true';
  const https = params.get('agent.https_proxy') ?? null;
  const http = params.get('agent.http_proxy') ?? null;
  const no = params.get('agent.no_proxy') ?? null;
  return {
    ...EMPTY_IMAGE_CONFIG,
    authenticatedRegistryCredentialsUri: params.get('agent.image_registry_auth') ?? null,
    imageSecurityPolicyUri: verify ? (params.get('agent.image_policy_file') ?? null) : null,
    imagePullProxy:
      https !== null || http !== null || no !== null
        ? { httpsProxy: https, httpProxy: http, noProxy: no }
        : null,
  };
}

/**
 * `AA_KBC_PARAMS` (env first, then `agent.aa_kbc_params` on the kernel
 * command line) as `<kbc>::<url>`; `offline_fs_kbc` with no URL when neither
 * is set, as upstream's `AaKbcParams::new`.
 */
export function kbcFromAaKbcParams(
  env: Readonly<Record<string, string | undefined>>,
  cmdline: string,
): KbcConfig {
  const found = findAaKbcParams(env, cmdline);
  if (found === undefined) return { name: 'offline_fs_kbc', url: '', kbsCert: null };
  const params = splitAaKbcParams(found.value);
  if (params === undefined) throw new CdhConfigError(aaKbcParamsFormatMessage(found.value));
  const name = parseKbcName(params.kbc);
  return { name, url: checkKbsUrl(name, params.uri), kbsCert: null };
}

// ---------------------------------------------------------------------------------------------

function socketAddress(text: string): UnixAddress {
  if (!text.startsWith('unix://')) throw new CdhConfigError('socket address scheme is not expected');
  try {
    return parseTtrpcAddress(text) as UnixAddress;
  } catch (e) {
    throw new CdhConfigError(`socket: ${(e as Error).message}`);
  }
}

function aaAddress(text: string): TtrpcAddress {
  try {
    return parseTtrpcAddress(text);
  } catch (e) {
    throw new CdhConfigError(`aa.aa_socket: ${(e as Error).message}`);
  }
}

function dedupeCredentials(list: readonly Credential[]): Credential[] {
  const byPath = new Map<string, Credential>();
  for (const c of list) {
    const prev = byPath.get(c.path);
    if (prev !== undefined && prev.resourceUri !== c.resourceUri) {
      // Upstream keys a map by path and keeps one of them; an ambiguous list is refused here.
      throw new CdhConfigError(
        `credential path ${c.path} is given twice, for ${prev.resourceUri} and ${c.resourceUri}`,
      );
    }
    byPath.set(c.path, c);
  }
  return [...byPath.values()];
}

function readRoot(doc: unknown, envs: ConfigEnvironment): CdhConfig {
  const env = envs.env ?? process.env;
  const cmdline = envs.kernelCmdline ?? '';
  const unknown: string[] = [];
  const t = tableOf(doc, '');
  const kbcTable = t.optSection('kbc') ?? null;
  if (kbcTable === null) throw new CdhConfigError('kbc is required: the [kbc] section is missing');
  const kbc = readKbc(kbcTable);
  unknown.push(...kbcTable.unknownKeys());

  const aaTable = t.optSection('aa') ?? null;
  const aaSocket =
    aaTable === null ? DEFAULT_AA_SOCKET_ADDR : aaTable.string('aa_socket', DEFAULT_AA_SOCKET_ADDR);
  if (aaTable !== null) unknown.push(...aaTable.unknownKeys());

  const credTables = t.sectionArray('credentials');
  const credentials = readCredentials(credTables);
  for (const c of credTables) unknown.push(...c.unknownKeys());

  const imageTable = t.optSection('image') ?? null;
  let image = imageTable === null ? imageConfigFromKernelCmdline(cmdline) : readImage(imageTable, unknown);
  if (imageTable !== null) unknown.push(...imageTable.unknownKeys());

  const socket = t.string('socket', DEFAULT_CDH_SOCKET_ADDR);
  const skip = t.bool('skip_sealed_secret_verification', false);
  const logTable = t.optSection('log') ?? null;
  const level = logLevelOf(
    logTable === null ? DEFAULT_LOG_LEVEL : logTable.string('level', DEFAULT_LOG_LEVEL),
  );
  if (logTable !== null) unknown.push(...logTable.unknownKeys());
  unknown.push(...t.unknownKeys());

  const registryCredentials = env[REGISTRY_CREDENTIALS_ENV];
  if (registryCredentials !== undefined) {
    image = { ...image, authenticatedRegistryCredentialsUri: registryCredentials };
  }
  return {
    socket,
    socketAddress: socketAddress(socket),
    aa: { aaSocket, aaAddress: aaAddress(aaSocket) },
    kbc,
    credentials: dedupeCredentials([...credentials, ...credentialsFromKernelCmdline(cmdline)]),
    image,
    skipSealedSecretVerification: skip,
    log: { level },
    unknownKeys: unknown,
  };
}

export type ConfigFormat = 'toml' | 'json';

/** Parses config text; `envs` supplies the env var and kernel command line upstream also reads. */
export function parseCdhConfig(
  text: string,
  format: ConfigFormat = 'toml',
  envs: ConfigEnvironment = {},
): CdhConfig {
  if (text.length > MAX_CONFIG_BYTES)
    throw new CdhConfigError(`config is larger than ${MAX_CONFIG_BYTES} bytes`);
  let doc: unknown;
  try {
    doc = parseDocument(text, format);
  } catch (e) {
    throw new CdhConfigError(`invalid config: ${(e as Error).message}`, { cause: e });
  }
  return readRoot(doc, envs);
}

/**
 * The document of a configuration text. The parser's error is the cause, so the dialect's one line
 * gives its line and column (smol-toml's TomlError carries them).
 */
function parseDocument(text: string, format: ConfigFormat): unknown {
  return format === 'json' ? JSON.parse(text) : parseToml(text);
}

const SYNTAX_HINT = 'correct the file at that place and start confidential-data-hub again';

/**
 * The configuration without a file (`confidential-data-hub` with no `-c`):
 * defaults, the KBC from `AA_KBC_PARAMS`, the image settings and credentials
 * from the kernel command line.
 */
export function defaultCdhConfig(envs: ConfigEnvironment = {}): CdhConfig {
  const env = envs.env ?? process.env;
  const cmdline = envs.kernelCmdline ?? '';
  const kbc = kbcFromAaKbcParams(env, cmdline);
  const registryCredentials = env[REGISTRY_CREDENTIALS_ENV];
  const image = imageConfigFromKernelCmdline(cmdline);
  return {
    socket: DEFAULT_CDH_SOCKET_ADDR,
    socketAddress: socketAddress(DEFAULT_CDH_SOCKET_ADDR),
    aa: { aaSocket: DEFAULT_AA_SOCKET_ADDR, aaAddress: aaAddress(DEFAULT_AA_SOCKET_ADDR) },
    kbc,
    credentials: dedupeCredentials(credentialsFromKernelCmdline(cmdline)),
    image:
      registryCredentials === undefined
        ? image
        : { ...image, authenticatedRegistryCredentialsUri: registryCredentials },
    skipSealedSecretVerification: false,
    log: { level: DEFAULT_LOG_LEVEL },
    unknownKeys: [],
  };
}

async function readKernelCmdline(): Promise<string> {
  try {
    return await readFile('/proc/cmdline', 'utf8');
  } catch {
    // Upstream fails here; outside a VM (or without /proc) there is simply nothing to read.
    return '';
  }
}

/**
 * Reads the config file (`.json` as JSON, anything else as TOML), or the
 * defaults when `path` is undefined.
 */
export async function loadCdhConfig(
  path: string | undefined,
  envs: ConfigEnvironment = {},
): Promise<CdhConfig> {
  const withCmdline: ConfigEnvironment = {
    ...envs,
    kernelCmdline: envs.kernelCmdline ?? (await readKernelCmdline()),
  };
  if (path === undefined) return defaultCdhConfig(withCmdline);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new CdhConfigError(`failed to read config file ${path}: ${(e as Error).message}`, { cause: e });
  }
  if (bytes.length > MAX_CONFIG_BYTES) {
    throw new CdhConfigError(`config file ${path} is larger than ${MAX_CONFIG_BYTES} bytes`);
  }
  let doc: unknown;
  try {
    doc = parseDocument(bytes.toString('utf8'), path.endsWith('.json') ? 'json' : 'toml');
  } catch (e) {
    const error = new CdhConfigError(`failed to read config file ${path}: ${(e as Error).message}`, {
      cause: e,
    });
    throw withHint(error, SYNTAX_HINT);
  }
  try {
    return readRoot(doc, withCmdline);
  } catch (e) {
    if (e instanceof CdhConfigError) {
      throw new CdhConfigError(`failed to read config file ${path}: ${e.message}`, { cause: e });
    }
    throw e;
  }
}
