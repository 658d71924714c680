// RVPS messages: `{"version":"0.1.0","type":"sample","payload":"<std-b64 JSON>"}`.
import { decodeBase64StdStrict } from '@broker/protocol';
import { quote, RvpsError } from './errors.js';
import { MAX_PROVENANCE_LENGTH, MAX_PROVENANCE_MEMBERS, provenanceOf } from './reference-value.js';

export const RVPS_MESSAGE_VERSION = '0.1.0';
/** Larger than any KBS request body (2 MiB by default); a guard for direct callers. */
export const MAX_RVPS_MESSAGE_LENGTH = 4 * 1024 * 1024;
export const MAX_REFERENCE_VALUES_PER_MESSAGE = 4096;
export const MAX_REFERENCE_VALUE_NAME_LENGTH = 256;
/** Nesting depth of one value; deeper JSON would overflow recursive consumers (stringify, Rego). */
export const MAX_REFERENCE_VALUE_DEPTH = 64;

/** Provenance types trustee knows; only `sample` is extracted here. */
export type ProvenanceType = 'sample' | 'swid' | 'corim';

export interface RvpsMessage {
  readonly version: string;
  readonly type: string;
  readonly payload: string;
  /**
   * This project's own member: where the values come from (`{"image_tag": …, "initdata_digest": …}`),
   * kept with each stored value. trustee's RVPS ignores a member it does not know.
   */
  readonly provenance?: Readonly<Record<string, string>>;
}

/** The message as the admin API receives it: raw bytes, text, or already-parsed JSON. */
export type RvpsMessageInput = string | Uint8Array | Readonly<Record<string, unknown>>;

function parseJsonText(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new RvpsError('MESSAGE_MALFORMED', `${what} is not JSON`, { cause: e });
  }
}

function decodeUtf8(bytes: Uint8Array, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch (e) {
    throw new RvpsError('MESSAGE_MALFORMED', `${what} is not UTF-8`, { cause: e });
  }
}

export function parseRvpsMessage(input: RvpsMessageInput): RvpsMessage {
  let parsed: unknown;
  if (typeof input === 'string' || input instanceof Uint8Array) {
    const size = typeof input === 'string' ? input.length : input.byteLength;
    if (size > MAX_RVPS_MESSAGE_LENGTH) {
      throw new RvpsError(
        'MESSAGE_TOO_LARGE',
        `RVPS message is larger than ${MAX_RVPS_MESSAGE_LENGTH} bytes`,
      );
    }
    const text = typeof input === 'string' ? input : decodeUtf8(input, 'RVPS message');
    parsed = parseJsonText(text, 'RVPS message');
  } else {
    parsed = input;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new RvpsError('MESSAGE_MALFORMED', 'RVPS message must be a JSON object');
  }
  const m = parsed as Record<string, unknown>;
  // trustee defaults a missing version to the current one.
  const version = Object.hasOwn(m, 'version') ? m.version : RVPS_MESSAGE_VERSION;
  if (typeof version !== 'string') {
    throw new RvpsError('MESSAGE_MALFORMED', 'RVPS message member "version" must be a string');
  }
  if (version !== RVPS_MESSAGE_VERSION) {
    throw new RvpsError(
      'VERSION_MISMATCH',
      `RVPS message version ${quote(version)} is not supported; need ${RVPS_MESSAGE_VERSION}`,
    );
  }
  const type = Object.hasOwn(m, 'type') ? m.type : undefined;
  const payload = Object.hasOwn(m, 'payload') ? m.payload : undefined;
  if (typeof type !== 'string') {
    throw new RvpsError('MESSAGE_MALFORMED', 'RVPS message member "type" must be a string');
  }
  if (typeof payload !== 'string') {
    throw new RvpsError('MESSAGE_MALFORMED', 'RVPS message member "payload" must be a string');
  }
  if (payload.length > MAX_RVPS_MESSAGE_LENGTH) {
    throw new RvpsError('MESSAGE_TOO_LARGE', `RVPS payload is larger than ${MAX_RVPS_MESSAGE_LENGTH} bytes`);
  }
  if (Object.hasOwn(m, 'provenance') && m.provenance !== undefined) {
    const provenance = provenanceOf(m.provenance);
    if (provenance === undefined) {
      throw new RvpsError(
        'MESSAGE_MALFORMED',
        `RVPS message member "provenance" must be an object of 1 to ${MAX_PROVENANCE_MEMBERS} strings of at most ${MAX_PROVENANCE_LENGTH} characters`,
      );
    }
    return { version, type, payload, provenance };
  }
  return { version, type, payload };
}

/** Reference value names become storage keys: no separators, dot names or control characters. */
export function checkReferenceValueName(name: string): void {
  if (name.length === 0 || name.length > MAX_REFERENCE_VALUE_NAME_LENGTH) {
    throw new RvpsError(
      'PAYLOAD_MALFORMED',
      `reference value name must have 1 to ${MAX_REFERENCE_VALUE_NAME_LENGTH} characters`,
    );
  }
  if (name === '.' || name === '..' || /[/\\\u0000-\u001f\u007f]/.test(name)) {
    throw new RvpsError('PAYLOAD_MALFORMED', `reference value name ${quote(name)} is not allowed`);
  }
}

/** Iterative, so hostile nesting cannot overflow the stack while we measure it. */
export function jsonDepthExceeds(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return false;
}

/** The sample extractor: payload = std-b64 of a JSON object `{name: value}`. No signature. */
export function extractSample(payload: string): [string, unknown][] {
  const bytes = decodeBase64StdStrict(payload);
  if (bytes === null) throw new RvpsError('PAYLOAD_MALFORMED', 'sample payload is not standard base64');
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    throw new RvpsError('PAYLOAD_MALFORMED', 'sample payload is not UTF-8 JSON', { cause: e });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new RvpsError('PAYLOAD_MALFORMED', 'sample payload must be a JSON object of name → value');
  }
  const entries = Object.entries(parsed as Record<string, unknown>);
  if (entries.length > MAX_REFERENCE_VALUES_PER_MESSAGE) {
    throw new RvpsError(
      'MESSAGE_TOO_LARGE',
      `sample payload has more than ${MAX_REFERENCE_VALUES_PER_MESSAGE} reference values`,
    );
  }
  for (const [name, value] of entries) {
    checkReferenceValueName(name);
    if (jsonDepthExceeds(value, MAX_REFERENCE_VALUE_DEPTH)) {
      throw new RvpsError(
        'MESSAGE_TOO_LARGE',
        `reference value ${quote(name)} is nested deeper than ${MAX_REFERENCE_VALUE_DEPTH} levels`,
      );
    }
  }
  return entries;
}

/** The reference values a message carries, as (name, value) pairs. */
export function extractReferenceValues(message: RvpsMessage): [string, unknown][] {
  switch (message.type) {
    case 'sample':
      return extractSample(message.payload);
    case 'swid':
    case 'corim':
      throw new RvpsError(
        'UNSUPPORTED_TYPE',
        `RVPS provenance type ${quote(message.type)} is not supported by this RVPS; use "sample"`,
      );
    default:
      throw new RvpsError('UNSUPPORTED_TYPE', `no RVPS extractor for provenance type ${quote(message.type)}`);
  }
}
