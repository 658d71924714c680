// The measurement manifest: what a pod-VM image's boot extends into the vTPM's PCRs, which the mock
// replays as its simulated boot. JSON:
//
//   {
//     "image_tag": "mock-podvm:0.1.0",              // the image this describes (required)
//     "description": "...",                          // optional, free text
//     "pcrs": { "3": ["<sha256 hex>", ...], ... },    // per PCR, the digests extended, in order
//     "snp_measurement": "<96 hex digits>"           // optional SNP launch measurement
//   }
//
// Digests go into the SHA-256 bank. PCR 8 is left out (the attestation agent extends the initdata
// digest into it), and so are PCRs 17-22, which need localities a guest does not have.
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { replayPcr } from '@broker/tpm';
import { MockTeeError } from './errors.js';

export const MAX_MANIFEST_BYTES = 64 * 1024;
export const MAX_DIGESTS_PER_PCR = 64;
export const MAX_IMAGE_TAG_LENGTH = 256;
/** PCRs a manifest may extend. */
export const MANIFEST_PCRS: readonly number[] = Object.freeze([
  0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 23,
]);

/**
 * The SNP launch measurement when a manifest gives none: a fixed stand-in for the measurement of
 * Azure's paravisor firmware, which does not depend on the pod-VM image.
 */
export const DEFAULT_SNP_MEASUREMENT: Buffer = createHash('sha384')
  .update('broker mock-tee paravisor')
  .digest();

export interface MeasurementManifest {
  readonly imageTag: string;
  readonly description?: string;
  /** PCR index → SHA-256 digests extended into it, in order. */
  readonly pcrs: ReadonlyMap<number, readonly Buffer[]>;
  readonly snpMeasurement?: Buffer;
}

function fail(why: string): never {
  throw new MockTeeError('MANIFEST_INVALID', `measurement manifest: ${why}`);
}

function hexDigest(value: unknown, bytes: number, what: string): Buffer {
  if (typeof value !== 'string' || !new RegExp(`^[0-9a-fA-F]{${bytes * 2}}$`).test(value)) {
    fail(`${what} must be ${bytes * 2} hex digits`);
  }
  return Buffer.from(value, 'hex');
}

/** Parses a manifest from JSON text or an already-parsed value. Unknown members are ignored. */
export function parseMeasurementManifest(input: string | unknown): MeasurementManifest {
  let doc: unknown = input;
  if (typeof input === 'string') {
    if (input.length > MAX_MANIFEST_BYTES) fail(`longer than ${MAX_MANIFEST_BYTES} characters`);
    try {
      doc = JSON.parse(input);
    } catch {
      fail('not valid JSON');
    }
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) fail('not a JSON object');
  const o = doc as Record<string, unknown>;
  const tag = o.image_tag;
  if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_IMAGE_TAG_LENGTH) {
    fail(`image_tag must be a string of 1 to ${MAX_IMAGE_TAG_LENGTH} characters`);
  }
  if (o.description !== undefined && typeof o.description !== 'string') fail('description must be a string');
  const pcrsIn = o.pcrs;
  if (typeof pcrsIn !== 'object' || pcrsIn === null || Array.isArray(pcrsIn)) fail('pcrs must be an object');
  const pcrs = new Map<number, Buffer[]>();
  for (const [key, list] of Object.entries(pcrsIn as Record<string, unknown>)) {
    if (!/^\d{1,2}$/.test(key)) fail(`PCR key ${JSON.stringify(key.slice(0, 16))} is not a PCR number`);
    const pcr = Number(key);
    if (pcr === 8) fail('PCR 8 is reserved for the initdata digest');
    if (!MANIFEST_PCRS.includes(pcr)) fail(`PCR ${pcr} cannot be extended by a guest's boot`);
    if (pcrs.has(pcr)) fail(`PCR ${pcr} is listed twice`);
    if (!Array.isArray(list)) fail(`pcrs.${key} must be an array of digests`);
    if (list.length > MAX_DIGESTS_PER_PCR) fail(`pcrs.${key} has more than ${MAX_DIGESTS_PER_PCR} digests`);
    pcrs.set(
      pcr,
      list.map((d, i) => hexDigest(d, 32, `pcrs.${key}[${i}]`)),
    );
  }
  const snp = o.snp_measurement;
  return {
    imageTag: tag,
    ...(typeof o.description === 'string' && { description: o.description }),
    pcrs,
    ...(snp !== undefined && { snpMeasurement: hexDigest(snp, 48, 'snp_measurement') }),
  };
}

/** Reads and parses a manifest file (at most MAX_MANIFEST_BYTES). */
export async function loadMeasurementManifest(path: string): Promise<MeasurementManifest> {
  const info = await stat(path);
  if (info.size > MAX_MANIFEST_BYTES) fail(`${path} is larger than ${MAX_MANIFEST_BYTES} bytes`);
  return parseMeasurementManifest(await readFile(path, 'utf8'));
}

/**
 * The SHA-256 PCR values after the manifest's boot, from reset (all zero), as lower-case hex: what
 * reference values for the image are. PCRs the manifest does not list are not included.
 */
export function expectedPcrValues(manifest: MeasurementManifest): Map<number, string> {
  const out = new Map<number, string>();
  for (const [pcr, digests] of [...manifest.pcrs].sort((a, b) => a[0] - b[0])) {
    out.set(pcr, Buffer.from(replayPcr(digests)).toString('hex'));
  }
  return out;
}

/** The manifest as JSON (the file format), e.g. to write the built-in sample out. */
export function formatMeasurementManifest(manifest: MeasurementManifest): string {
  const pcrs: Record<string, string[]> = {};
  for (const [pcr, digests] of [...manifest.pcrs].sort((a, b) => a[0] - b[0])) {
    pcrs[String(pcr)] = digests.map((d) => d.toString('hex'));
  }
  return `${JSON.stringify(
    {
      image_tag: manifest.imageTag,
      ...(manifest.description !== undefined && { description: manifest.description }),
      pcrs,
      ...(manifest.snpMeasurement !== undefined && {
        snp_measurement: manifest.snpMeasurement.toString('hex'),
      }),
    },
    null,
    2,
  )}\n`;
}
