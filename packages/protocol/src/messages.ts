/**
 * KBS protocol 0.4.0 messages (serde shapes of kbs-types): the guest's
 * Request, the KBS Challenge and the guest's Attestation.
 */
import { ProtocolError } from './errors.js';
import { parseTeePubKey, type TeePubKey } from './jwk.js';
import { isTee, PROTOCOL_VERSION, type Tee } from './tee.js';

export interface KbsRequest {
  version: string;
  tee: Tee;
  'extra-params': unknown;
}

export interface Challenge {
  nonce: string;
  'extra-params': unknown;
}

/** kbs-types `InitData`: the AS only accepts `format: "toml"`. */
export interface InitDataWire {
  format: string;
  body: string;
}

export interface RuntimeData {
  nonce: string;
  'tee-pubkey': TeePubKey;
}

export interface CompositeEvidence {
  primary_evidence: unknown;
  /** JSON text of a map tee → evidence, or "" when there are no extra devices. */
  additional_evidence: string;
}

export interface Attestation {
  'init-data': InitDataWire | null;
  'runtime-data': RuntimeData;
  'tee-evidence': CompositeEvidence;
}

/** Upper bounds on single string members; whole bodies are capped by the HTTP layer. */
export const MAX_NONCE_LENGTH = 1024;
export const MAX_VERSION_LENGTH = 64;
export const MAX_INIT_DATA_BODY_LENGTH = 1024 * 1024;
export const MAX_ADDITIONAL_EVIDENCE_LENGTH = 16 * 1024 * 1024;
/** Default byte limit of {@link parseJson}. */
export const MAX_JSON_BODY_BYTES = 2 * 1024 * 1024;

function record(v: unknown, field: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ProtocolError(field, 'must be a JSON object');
  }
  return v as Record<string, unknown>;
}

function boundedString(obj: Record<string, unknown>, key: string, field: string, max: number): string {
  const v = obj[key];
  const name = field ? `${field}.${key}` : key;
  if (typeof v !== 'string') throw new ProtocolError(name, 'must be a string');
  if (v.length > max) throw new ProtocolError(name, `longer than ${max} characters`);
  return v;
}

function required(obj: Record<string, unknown>, key: string, field: string): unknown {
  if (!Object.hasOwn(obj, key)) throw new ProtocolError(field ? `${field}.${key}` : key, 'is missing');
  return obj[key];
}

/**
 * Parse JSON text with a byte limit. Throws ProtocolError("body") for oversize
 * or malformed input, never a SyntaxError.
 */
export function parseJson(input: string | Uint8Array, maxBytes = MAX_JSON_BODY_BYTES): unknown {
  const size = typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.byteLength;
  if (size > maxBytes) throw new ProtocolError('body', `larger than ${maxBytes} bytes`);
  let text: string;
  if (typeof input === 'string') {
    text = input;
  } else {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(input);
    } catch {
      throw new ProtocolError('body', 'is not valid UTF-8');
    }
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ProtocolError('body', 'is not valid JSON', { cause });
  }
}

// semver 2.0.0 build metadata; trustee matches `=0.4.0`, which ignores build metadata.
const VERSION_RE = /^0\.4\.0(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$/;

/** Parse the guest's `/auth` body. The version must satisfy `=0.4.0` as trustee requires. */
export function parseKbsRequest(body: unknown): KbsRequest {
  const obj = record(body, 'request');
  const version = boundedString(obj, 'version', '', MAX_VERSION_LENGTH);
  if (!VERSION_RE.test(version)) {
    throw new ProtocolError(
      'version',
      `protocol version ${JSON.stringify(version)} is not ${PROTOCOL_VERSION}`,
    );
  }
  const tee = obj.tee;
  if (typeof tee !== 'string') throw new ProtocolError('tee', 'must be a string');
  if (!isTee(tee)) throw new ProtocolError('tee', `unknown TEE ${JSON.stringify(tee.slice(0, 32))}`);
  const extra = required(obj, 'extra-params', '');
  return { version, tee, 'extra-params': extra };
}

/** Parse the KBS `/auth` response (client side). */
export function parseChallenge(body: unknown): Challenge {
  const obj = record(body, 'challenge');
  const nonce = boundedString(obj, 'nonce', '', MAX_NONCE_LENGTH);
  if (nonce.length === 0) throw new ProtocolError('nonce', 'is empty');
  const extra = required(obj, 'extra-params', '');
  return { nonce, 'extra-params': extra };
}

function parseInitDataWire(v: unknown): InitDataWire | null {
  // serde treats a missing Option field like null.
  if (v === undefined || v === null) return null;
  const obj = record(v, 'init-data');
  return {
    format: boundedString(obj, 'format', 'init-data', 64),
    body: boundedString(obj, 'body', 'init-data', MAX_INIT_DATA_BODY_LENGTH),
  };
}

/** Parse the guest's `/attest` body. The TEE key is parsed (known members only). */
export function parseAttestation(body: unknown): Attestation {
  const obj = record(body, 'attestation');
  const initData = parseInitDataWire(obj['init-data']);

  const rd = record(required(obj, 'runtime-data', ''), 'runtime-data');
  const nonce = boundedString(rd, 'nonce', 'runtime-data', MAX_NONCE_LENGTH);
  const teePubkey = parseTeePubKey(required(rd, 'tee-pubkey', 'runtime-data'), 'runtime-data.tee-pubkey');

  const te = record(required(obj, 'tee-evidence', ''), 'tee-evidence');
  const primary = required(te, 'primary_evidence', 'tee-evidence');
  const additional = boundedString(te, 'additional_evidence', 'tee-evidence', MAX_ADDITIONAL_EVIDENCE_LENGTH);

  return {
    'init-data': initData,
    'runtime-data': { nonce, 'tee-pubkey': teePubkey },
    'tee-evidence': { primary_evidence: primary, additional_evidence: additional },
  };
}
