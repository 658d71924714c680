/**
 * Initdata (trustee `kbs/docs/initdata.md`): a TOML document with `version`,
 * `algorithm` and a `[data]` string map, delivered to the guest by the host
 * and bound to the TEE by the digest of its exact bytes.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { parse as parseToml, TomlDate } from 'smol-toml';
import { decodeBase64StdStrict } from './base64.js';
import { InitDataError } from './errors.js';
import { type HashAlgorithm, isHashAlgorithm } from './report-data.js';

export const INITDATA_VERSION = '0.1.0';
/** Upper bound on an initdata document (TOML bytes). */
export const MAX_INITDATA_BYTES = 1024 * 1024;
/** Upper bound on the base64 text of an initdata annotation. */
export const MAX_INITDATA_ANNOTATION_LENGTH = 4 * MAX_INITDATA_BYTES;
const TOML_MAX_DEPTH = 64;
/** Containers serde_json nests before its recursion limit (128) fails; decides whether upstream reads `policy_data`. */
const SERDE_JSON_MAX_DEPTH = 127;

export interface InitData {
  version: typeof INITDATA_VERSION;
  algorithm: HashAlgorithm;
  data: Record<string, string>;
}

function toBuffer(input: Uint8Array | string): Buffer {
  return typeof input === 'string'
    ? Buffer.from(input, 'utf8')
    : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
}

function defineOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  // Plain assignment of "__proto__" would change the prototype instead.
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Parse and check an initdata document: TOML, `version = "0.1.0"`,
 * `algorithm` one of sha256/sha384/sha512, `[data]` of strings. Other
 * top-level keys are ignored, as serde does.
 */
export function parseInitData(input: Uint8Array | string, maxBytes = MAX_INITDATA_BYTES): InitData {
  const bytes = toBuffer(input);
  if (bytes.length > maxBytes) throw new InitDataError(`initdata is larger than ${maxBytes} bytes`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new InitDataError('initdata is not valid UTF-8');
  }
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text, { maxDepth: TOML_MAX_DEPTH });
  } catch (cause) {
    const where = cause instanceof Error && 'line' in cause ? ` (line ${String(cause.line)})` : '';
    throw new InitDataError(`initdata is not valid TOML${where}`, { cause });
  }
  const { version, algorithm, data } = doc;
  if (version === undefined) throw new InitDataError('initdata: missing field `version`');
  if (version !== INITDATA_VERSION) {
    throw new InitDataError(
      `initdata: unsupported version ${JSON.stringify(version)}, expected "${INITDATA_VERSION}"`,
    );
  }
  if (algorithm === undefined) throw new InitDataError('initdata: missing field `algorithm`');
  if (!isHashAlgorithm(algorithm)) {
    throw new InitDataError(
      `initdata: unsupported algorithm ${JSON.stringify(typeof algorithm === 'string' ? algorithm.slice(0, 32) : algorithm)}, expected sha256, sha384 or sha512`,
    );
  }
  if (data === undefined) throw new InitDataError('initdata: missing field `data`');
  if (typeof data !== 'object' || data === null || Array.isArray(data) || data instanceof TomlDate) {
    throw new InitDataError('initdata: `data` must be a table');
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) {
    if (typeof v !== 'string')
      throw new InitDataError(`initdata: data.${JSON.stringify(k)} must be a string`);
    defineOwn(out, k, v);
  }
  return { version: INITDATA_VERSION, algorithm, data: out };
}

/** Digest of the exact initdata bytes (no canonicalization). */
export function initDataDigest(input: Uint8Array | string, alg: HashAlgorithm): Buffer {
  if (!isHashAlgorithm(alg)) throw new InitDataError(`unsupported initdata algorithm ${String(alg)}`);
  return createHash(alg).update(toBuffer(input)).digest();
}

/**
 * PCR8 after extending the initdata digest once from zero:
 * sha256(0x00×32 ‖ digest). Trustee's vTPM/TPM verifiers need a 32-byte
 * (sha256) digest; the peer-pod guest extends the first 32 bytes of longer
 * digests, which `truncate: true` reproduces.
 */
export function pcr8FromInitDataDigest(digest: Uint8Array, options: { truncate?: boolean } = {}): Buffer {
  if (digest.length !== 32 && !(options.truncate && digest.length > 32)) {
    throw new InitDataError(
      `PCR8 binding needs a 32-byte (sha256) initdata digest, got ${digest.length} bytes`,
    );
  }
  return createHash('sha256').update(Buffer.alloc(32)).update(digest.subarray(0, 32)).digest();
}

/**
 * The initdata digest fitted to a TEE field: zero-padded or truncated at the
 * tail (SNP HOSTDATA 32, TDX MRCONFIGID 48, CCA personalization 64, SE 256).
 */
export function initDataReportField(digest: Uint8Array, size: 32 | 48 | 64 | 256): Buffer {
  const out = Buffer.alloc(size);
  out.set(digest.subarray(0, size));
  return out;
}

/** Pod annotation / `peer-pods-cm` INITDATA form: standard base64 of gzip(TOML). */
export function encodeInitDataAnnotation(toml: string | Uint8Array): string {
  return gzipSync(toBuffer(toml)).toString('base64');
}

/**
 * Decode an initdata annotation back to the TOML bytes. The decompressed size
 * is capped so a gzip bomb fails fast instead of exhausting memory.
 */
export function decodeInitDataAnnotation(b64: string, maxBytes = MAX_INITDATA_BYTES): Buffer {
  if (typeof b64 !== 'string') throw new InitDataError('initdata annotation must be a string');
  if (b64.length > MAX_INITDATA_ANNOTATION_LENGTH) throw new InitDataError('initdata annotation is too long');
  // Go's base64 decoder (kata runtime, CAA) skips line breaks.
  const compact = b64.replace(/[\r\n]/g, '');
  if (compact.length === 0) throw new InitDataError('initdata annotation is empty');
  const gz = decodeBase64StdStrict(compact);
  if (gz === null) throw new InitDataError('initdata annotation is not standard base64');
  try {
    return gunzipSync(gz, { maxOutputLength: maxBytes });
  } catch (cause) {
    if (cause instanceof RangeError || (cause as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new InitDataError(`initdata annotation decompresses to more than ${maxBytes} bytes`, { cause });
    }
    throw new InitDataError('initdata annotation is not valid gzip', { cause });
  }
}

// ---- init_data_claims -------------------------------------------------------

/** serde_json::to_value(toml::Value): datetimes become toml's private wrapper object. */
function tomlToJson(v: unknown): unknown {
  if (v instanceof TomlDate) {
    const text = v.toISOString().replace(/\.000(?=$|[Z+-])/, '');
    return { $__toml_private_datetime: text };
  }
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (Array.isArray(v)) return v.map(tomlToJson);
  if (typeof v === 'object' && v !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) defineOwn(out, k, tomlToJson(x));
    return out;
  }
  return v;
}

function jsonDepth(v: unknown, depth: number): number {
  if (typeof v !== 'object' || v === null) return depth;
  let max = depth + 1;
  for (const x of Object.values(v)) {
    max = Math.max(max, jsonDepth(x, depth + 1));
    if (max > SERDE_JSON_MAX_DEPTH) break;
  }
  return max;
}

/** The JSON after `policy_data := ` when the rest of the Rego file is exactly that JSON. */
function extractPolicyData(rego: string): unknown {
  const marker = 'policy_data := {';
  const at = rego.indexOf(marker);
  if (at < 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(rego.slice(at + marker.length - 1));
  } catch {
    return undefined;
  }
  return jsonDepth(value, 0) > SERDE_JSON_MAX_DEPTH ? undefined : value;
}

/**
 * trustee's `init_data_claims`: the `data` map, with `aa.toml`/`cdh.toml`
 * parsed into objects when they are valid TOML, and `policy.rego` replaced by
 * `agent_policy_claims` (the `policy_data` JSON) when that can be extracted.
 */
export function initDataClaims(initData: InitData): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(initData.data)) defineOwn(claims, k, v);
  for (const key of ['cdh.toml', 'aa.toml']) {
    const text = claims[key];
    if (typeof text !== 'string' || !Object.hasOwn(claims, key)) continue;
    try {
      defineOwn(
        claims,
        key,
        tomlToJson(parseToml(text, { maxDepth: TOML_MAX_DEPTH, integersAsBigInt: 'asNeeded' })),
      );
    } catch {
      // Not TOML: upstream keeps the string.
    }
  }
  const rego = Object.hasOwn(claims, 'policy.rego') ? claims['policy.rego'] : undefined;
  if (typeof rego === 'string') {
    const policyData = extractPolicyData(rego);
    if (policyData !== undefined) {
      delete claims['policy.rego'];
      defineOwn(claims, 'agent_policy_claims', policyData);
    }
  }
  return claims;
}
