/**
 * `aa.toml`: guest-components' attestation-agent configuration keys
 * (`config/{mod,kbs,coco_as}.rs`, `config.example.toml`).
 *
 * Upstream deserializes with serde without `deny_unknown_fields`, so unknown
 * keys are ignored; we ignore them too but report them, so a typo (or the
 * spec's `token_configs.cc_as`) shows up in the log instead of vanishing.
 * Every table and key is optional: an empty file is a valid configuration.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { Section, type SectionStyle } from '@broker/cli';
import {
  AA_KBC_PARAMS_ENV,
  type AaKbcParams,
  aaKbcParamsFormatMessage,
  findAaKbcParams,
  splitAaKbcParams,
} from '@broker/guest-api';
import type { TeeKeyAlgorithm } from '@broker/kbs-client';
import { AttestationAgentError, type AttestationAgentErrorCode } from './errors.js';

export { AA_KBC_PARAMS_CMDLINE_KEY, AA_KBC_PARAMS_ENV, type AaKbcParams } from '@broker/guest-api';

import { parse as parseToml } from 'smol-toml';

/** Upstream `DEFAULT_PCR_INDEX`: PCR 17 (dynamic root of trust), where AAEL events go by default. */
export const DEFAULT_INIT_PCR = 17;
export const DEFAULT_LOG_LEVEL = 'info';
/** `tee_key_algorithm` values (upstream `kbs_protocol::TeeKeyAlgorithm`), default first. */
export const TEE_KEY_ALGORITHM_NAMES: readonly TeeKeyAlgorithm[] = Object.freeze([
  'ECDH-ES+A256KW-P256',
  'ECDH-ES+A256KW-P521',
  'RSA-OAEP-256',
] as const);
export const DEFAULT_TEE_KEY_ALGORITHM: TeeKeyAlgorithm = 'ECDH-ES+A256KW-P256';
/** Where the kernel command line is read from when no config file is given. */
export const DEFAULT_CMDLINE_PATH = '/proc/cmdline';

const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
const MAX_CMDLINE_BYTES = 64 * 1024;
const TOML_MAX_DEPTH = 32;

export interface AaKbsConfig {
  /** KBS root URL. */
  readonly url: string;
  /** PEM certificate(s) trusted for the KBS in addition to the system roots. */
  readonly cert?: string;
  readonly teeKeyAlgorithm: TeeKeyAlgorithm;
}

export interface AaCocoAsConfig {
  /** Attestation service root URL; tokens come from `POST {url}/attestation`. */
  readonly url: string;
}

export interface AaConfig {
  readonly tokenConfigs: {
    readonly kbs?: AaKbsConfig;
    readonly cocoAs?: AaCocoAsConfig;
  };
  readonly eventlog: {
    /** Register extended when an event names none (upstream `init_pcr`). */
    readonly initPcr: number;
    readonly enableEventlog: boolean;
  };
  /** tracing-style level or directive (`info`, `debug`, `attestation_agent=debug,warn`). */
  readonly log: { readonly level: string };
  /** Dotted paths of keys upstream ignores, for a warning. */
  readonly ignoredKeys: readonly string[];
}

export class AaConfigError extends AttestationAgentError {
  override readonly code: AttestationAgentErrorCode = 'CONFIG_INVALID';
  override readonly name: string = 'AaConfigError';
}

export const DEFAULT_AA_CONFIG: AaConfig = Object.freeze({
  tokenConfigs: Object.freeze({}),
  eventlog: Object.freeze({ initPcr: DEFAULT_INIT_PCR, enableEventlog: false }),
  log: Object.freeze({ level: DEFAULT_LOG_LEVEL }),
  ignoredKeys: Object.freeze([]),
});

/** `@broker/cli`'s reader, keys named with dots, JSON nulls read as absent (serde's `Option`). */
const STYLE: SectionStyle = {
  naming: 'dotted',
  error: (message) => new AaConfigError(message),
  nullIsAbsent: true,
};

function parseTeeKeyAlgorithm(v: string | undefined, path: string): TeeKeyAlgorithm {
  if (v === undefined) return DEFAULT_TEE_KEY_ALGORITHM;
  if ((TEE_KEY_ALGORITHM_NAMES as readonly string[]).includes(v)) return v as TeeKeyAlgorithm;
  throw new AaConfigError(
    `${path}: unknown variant \`${v.slice(0, 64)}\`, expected one of ${TEE_KEY_ALGORITHM_NAMES.map((a) => `\`${a}\``).join(', ')}`,
  );
}

/** Checks a parsed document (TOML or JSON) against upstream's keys. */
export function parseAaConfig(doc: unknown): AaConfig {
  const root = Section.of(doc, '', undefined, STYLE);
  const ignored: string[] = [];

  const tokens = root.optSection('token_configs');
  let kbs: AaKbsConfig | undefined;
  let cocoAs: AaCocoAsConfig | undefined;
  if (tokens !== undefined) {
    const k = tokens.optSection('kbs');
    if (k !== undefined) {
      const url = k.requiredField('url');
      const cert = k.optString('cert');
      const teeKeyAlgorithm = parseTeeKeyAlgorithm(
        k.optString('tee_key_algorithm'),
        k.path('tee_key_algorithm'),
      );
      kbs = { url, teeKeyAlgorithm, ...(cert !== undefined && { cert }) };
      ignored.push(...k.unknownKeys());
    }
    const c = tokens.optSection('coco_as');
    if (c !== undefined) {
      cocoAs = { url: c.requiredField('url') };
      ignored.push(...c.unknownKeys());
    }
    ignored.push(...tokens.unknownKeys());
  }

  const ev = root.optSection('eventlog_config');
  const eventlog = {
    initPcr: ev?.looseUint('init_pcr', DEFAULT_INIT_PCR, 0x7fff_ffff) ?? DEFAULT_INIT_PCR,
    enableEventlog: ev?.looseBool('enable_eventlog', false) ?? false,
  };
  if (ev !== undefined) ignored.push(...ev.unknownKeys());

  const log = root.optSection('log');
  const level = log?.optString('level') ?? DEFAULT_LOG_LEVEL;
  if (log !== undefined) ignored.push(...log.unknownKeys());
  ignored.push(...root.unknownKeys());

  return {
    tokenConfigs: { ...(kbs !== undefined && { kbs }), ...(cocoAs !== undefined && { cocoAs }) },
    eventlog,
    log: { level },
    ignoredKeys: ignored,
  };
}

/**
 * Parses configuration text. A `.json` file is JSON (upstream's config crate
 * picks the format from the extension); anything else is read as TOML.
 */
export function parseAaConfigText(text: string, fileName = 'aa.toml'): AaConfig {
  let doc: unknown;
  try {
    doc =
      extname(fileName).toLowerCase() === '.json'
        ? JSON.parse(text)
        : parseToml(text, { maxDepth: TOML_MAX_DEPTH });
  } catch (cause) {
    throw new AaConfigError(`${fileName}: ${(cause as Error).message}`, { cause });
  }
  try {
    return parseAaConfig(doc);
  } catch (cause) {
    if (cause instanceof AaConfigError) throw new AaConfigError(`${fileName}: ${cause.message}`, { cause });
    throw cause;
  }
}

/** Reads and parses a configuration file (at most 1 MiB). */
export async function loadAaConfig(path: string): Promise<AaConfig> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (cause) {
    throw new AaConfigError(`cannot read ${path}: ${(cause as Error).message}`, { cause });
  }
  if (bytes.length > MAX_CONFIG_FILE_BYTES) {
    throw new AaConfigError(`${path}: larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (cause) {
    throw new AaConfigError(`${path}: not valid UTF-8`, { cause });
  }
  return parseAaConfigText(text, path);
}

export class AaKbcParamsError extends AaConfigError {
  override readonly code: AttestationAgentErrorCode = 'KBC_PARAMS_INVALID';
}

/** `<kbc>::<uri>`, exactly one `::` (upstream `AaKbcParams::try_from`). */
export function parseAaKbcParams(value: string): AaKbcParams {
  const params = splitAaKbcParams(value);
  if (params === undefined) throw new AaKbcParamsError(aaKbcParamsFormatMessage(value));
  return params;
}

export interface KbcParamsSources {
  /** Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Default `/proc/cmdline`. */
  readonly cmdlinePath?: string;
}

/** Where `aa_kbc_params` was found: env `AA_KBC_PARAMS` first, then the kernel command line. */
export async function readAaKbcParams(
  sources: KbcParamsSources = {},
): Promise<{ readonly value: string; readonly from: 'env' | 'cmdline' } | undefined> {
  const env = sources.env ?? process.env;
  if (env[AA_KBC_PARAMS_ENV] !== undefined) return findAaKbcParams(env, '');
  let cmdline: string;
  try {
    const bytes = await readFile(sources.cmdlinePath ?? DEFAULT_CMDLINE_PATH);
    cmdline = bytes.subarray(0, MAX_CMDLINE_BYTES).toString('utf8');
  } catch {
    return undefined;
  }
  return findAaKbcParams(env, cmdline);
}

/**
 * The configuration used without `-c`: upstream defaults, with the KBS URL
 * from `aa_kbc_params` when its KBC is `cc_kbc`. Anything else (absent,
 * malformed, another KBC) leaves the KBS unconfigured, as upstream does;
 * `note` says which case applied.
 */
export async function configFromKbcParams(
  sources: KbcParamsSources = {},
): Promise<{ readonly config: AaConfig; readonly note: string }> {
  const found = await readAaKbcParams(sources);
  if (found === undefined) {
    return {
      config: DEFAULT_AA_CONFIG,
      note: 'no aa_kbc_params in env AA_KBC_PARAMS or the kernel command line: no KBS configured',
    };
  }
  let params: AaKbcParams;
  try {
    params = parseAaKbcParams(found.value);
  } catch (e) {
    return {
      config: DEFAULT_AA_CONFIG,
      note: `${(e as Error).message} (from ${found.from}): no KBS configured`,
    };
  }
  if (params.kbc !== 'cc_kbc') {
    return {
      config: DEFAULT_AA_CONFIG,
      note: `aa_kbc_params names KBC ${JSON.stringify(params.kbc.slice(0, 64))}, not cc_kbc: no KBS configured`,
    };
  }
  return {
    config: {
      ...DEFAULT_AA_CONFIG,
      tokenConfigs: { kbs: { url: params.uri, teeKeyAlgorithm: DEFAULT_TEE_KEY_ALGORITHM } },
    },
    note: `KBS ${params.uri} from aa_kbc_params (${found.from})`,
  };
}
