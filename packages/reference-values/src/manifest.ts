// The measurement manifest of a pod-VM image: what its boot leaves in the vTPM's SHA-256 PCRs.
// Two forms are read:
//
//   extend lists (the mock TEE's manifest, packages/mock-tee; guest-image/measure.ts writes this form
//   for the measured pod-VM image, with the events named and the values it expects):
//     {"image_tag": "podvm:1.0", "description": "...", "pcrs": {"3": ["<sha256 hex>", ...], ...},
//      "expected": {"pcr03": "<hex>", ...}}
//     each list is the digests extended into that PCR, in order, from reset (all zero); "expected",
//     when present, must equal the replay of the PCRs it names (a manifest that disagrees with itself
//     is refused). Other members ("events", "uki", "roothash") are descriptive and not read;
//
//   final values (cloud-api-adaptor's podvm-measure output, published as an OCI artifact):
//     {"measurements": {"sha256": {"pcr03": "<hex>", ...}}}
//     optionally with our "image_tag" beside "measurements".
//
// PCR 8 is never taken from a manifest: it holds the initdata digest and is computed from the
// initdata file.
import { createHash } from 'node:crypto';
import { ManifestError } from './errors.js';

export const MAX_MANIFEST_BYTES = 64 * 1024;
export const MAX_DIGESTS_PER_PCR = 64;
export const MAX_IMAGE_TAG_LENGTH = 256;
/** The PCR that holds the initdata digest. */
export const INITDATA_PCR = 8;

export type ManifestForm = 'extend-list' | 'final-values';

export interface PodVmMeasurements {
  readonly form: ManifestForm;
  /** The image the manifest describes, when it says so. */
  readonly imageTag?: string;
  readonly description?: string;
  /** PCR index → final SHA-256 value, lowercase hex. */
  readonly pcrs: ReadonlyMap<number, string>;
}

function fail(why: string): never {
  throw new ManifestError(`measurement manifest: ${why}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** PCRs 17-22 are reset to all ones and only extended from localities a booting guest lacks. */
function checkPcrIndex(pcr: number, key: string): void {
  if (!Number.isInteger(pcr) || pcr < 0 || pcr > 23) fail(`${key} is not a PCR of 0 to 23`);
  if (pcr === INITDATA_PCR) fail(`${key}: PCR 8 holds the initdata digest; it is computed from --initdata`);
  if (pcr >= 17 && pcr <= 22) fail(`${key}: PCR ${pcr} is a DRTM PCR that a guest's boot does not extend`);
}

function sha256Hex(value: unknown, what: string, allowPrefix: boolean): string {
  if (typeof value !== 'string') fail(`${what} must be a string of 64 hex digits`);
  const hex = allowPrefix && /^0[xX]/.test(value) ? value.slice(2) : value;
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) fail(`${what} must be 64 hex digits (a SHA-256 value)`);
  return hex.toLowerCase();
}

function imageTagOf(o: Record<string, unknown>): string | undefined {
  const tag = o.image_tag;
  if (tag === undefined) return undefined;
  if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_IMAGE_TAG_LENGTH) {
    fail(`image_tag must be a string of 1 to ${MAX_IMAGE_TAG_LENGTH} characters`);
  }
  return tag;
}

/** Final value of a PCR after extending `digests` in order from zero: v = sha256(v ‖ d). */
export function replaySha256(digests: readonly Uint8Array[]): Buffer {
  let value = Buffer.alloc(32);
  for (const d of digests) value = createHash('sha256').update(value).update(d).digest();
  return value;
}

function parseExtendList(o: Record<string, unknown>): Map<number, string> {
  const pcrsIn = o.pcrs;
  if (!isObject(pcrsIn)) fail('pcrs must be an object of PCR number → list of digests');
  const out = new Map<number, string>();
  for (const [key, list] of Object.entries(pcrsIn)) {
    if (!/^\d{1,2}$/.test(key)) fail(`PCR key ${JSON.stringify(key.slice(0, 16))} is not a PCR number`);
    const pcr = Number(key);
    checkPcrIndex(pcr, `pcrs.${key}`);
    if (out.has(pcr)) fail(`PCR ${pcr} is listed twice`);
    if (!Array.isArray(list)) fail(`pcrs.${key} must be an array of digests`);
    if (list.length > MAX_DIGESTS_PER_PCR) fail(`pcrs.${key} has more than ${MAX_DIGESTS_PER_PCR} digests`);
    const digests = list.map((d, i) => Buffer.from(sha256Hex(d, `pcrs.${key}[${i}]`, false), 'hex'));
    out.set(pcr, replaySha256(digests).toString('hex'));
  }
  return out;
}

/** The extend-list form's optional "expected" values: each must be the replay of its PCR's list. */
function checkExpected(o: Record<string, unknown>, replayed: ReadonlyMap<number, string>): void {
  const expected = o.expected;
  if (expected === undefined) return;
  if (!isObject(expected)) fail('expected must be an object of pcrNN → hex value');
  for (const [key, value] of Object.entries(expected)) {
    const match = /^pcr(\d{1,2})$/.exec(key);
    if (match === null) fail(`expected key ${JSON.stringify(key.slice(0, 16))} is not pcrNN`);
    const pcr = Number(match[1]);
    const hex = sha256Hex(value, `expected.${key}`, false);
    const actual = replayed.get(pcr);
    if (actual === undefined) fail(`expected.${key} names a PCR that pcrs does not list`);
    if (actual !== hex) fail(`expected.${key} is not the replay of pcrs.${pcr} (${actual})`);
  }
}

function parseFinalValues(o: Record<string, unknown>): Map<number, string> {
  const m = o.measurements;
  if (!isObject(m)) fail('measurements must be an object');
  const bank = m.sha256;
  if (bank === undefined) {
    fail(
      `measurements has no sha256 bank${Object.keys(m).length > 0 ? ' (only SHA-256 PCRs are compared)' : ''}`,
    );
  }
  if (!isObject(bank)) fail('measurements.sha256 must be an object of pcrNN → hex value');
  const out = new Map<number, string>();
  for (const [key, value] of Object.entries(bank)) {
    const match = /^pcr(\d{1,2})$/i.exec(key);
    if (match === null) fail(`measurements.sha256 key ${JSON.stringify(key.slice(0, 16))} is not pcrNN`);
    const pcr = Number(match[1]);
    checkPcrIndex(pcr, `measurements.sha256.${key}`);
    if (out.has(pcr)) fail(`PCR ${pcr} is listed twice`);
    out.set(pcr, sha256Hex(value, `measurements.sha256.${key}`, true));
  }
  return out;
}

/** Parses a manifest of either form from JSON text (at most MAX_MANIFEST_BYTES) or bytes. */
export function parseMeasurementManifest(input: string | Uint8Array): PodVmMeasurements {
  const size = typeof input === 'string' ? Buffer.byteLength(input, 'utf8') : input.byteLength;
  if (size > MAX_MANIFEST_BYTES) fail(`larger than ${MAX_MANIFEST_BYTES} bytes`);
  let text: string;
  if (typeof input === 'string') text = input;
  else {
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(input);
    } catch {
      fail('not UTF-8 text');
    }
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    fail('not valid JSON');
  }
  if (!isObject(doc)) fail('not a JSON object');
  const hasLists = Object.hasOwn(doc, 'pcrs');
  const hasFinal = Object.hasOwn(doc, 'measurements');
  if (hasLists && hasFinal) fail('has both "pcrs" (extend lists) and "measurements" (final values)');
  if (!hasLists && !hasFinal) {
    fail('neither "pcrs" (extend lists) nor "measurements" (final values) is present');
  }
  const description = doc.description;
  if (description !== undefined && typeof description !== 'string') fail('description must be a string');
  const imageTag = imageTagOf(doc);
  const form: ManifestForm = hasLists ? 'extend-list' : 'final-values';
  if (!hasLists && Object.hasOwn(doc, 'expected')) fail('"expected" belongs to the extend-list form');
  const pcrs = hasLists ? parseExtendList(doc) : parseFinalValues(doc);
  if (hasLists) checkExpected(doc, pcrs);
  return {
    form,
    ...(imageTag !== undefined && { imageTag }),
    ...(typeof description === 'string' && { description }),
    pcrs: new Map([...pcrs].sort((a, b) => a[0] - b[0])),
  };
}

/**
 * Whether a manifest's image tag names the image asked for: equal, or equal to the tag part of a
 * `name:tag` reference (`podvm:1.11.1` matches `1.11.1`). The spec selects reference values by the
 * pod-VM image tag, which is the sandbox operator's version.
 */
export function imageTagMatches(manifestTag: string, wanted: string): boolean {
  if (manifestTag === wanted) return true;
  const colon = manifestTag.lastIndexOf(':');
  if (colon < 0 || manifestTag.indexOf('/', colon) >= 0 || manifestTag.includes('@')) return false;
  return manifestTag.slice(colon + 1) === wanted;
}
