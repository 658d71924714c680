import { createHash } from 'node:crypto';
import { algName, hashSize, MAX_DIGEST_SIZE, nodeHashName, TPM_HR, TPMA_NV } from './constants.js';
import { TpmParseError, TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';

/** TPMS_NV_PUBLIC: an NV index's handle, name algorithm, attributes, policy and size. */
export interface NvPublic {
  readonly nvIndex: number;
  readonly nameAlg: number;
  readonly attributes: number;
  readonly authPolicy: Uint8Array;
  readonly dataSize: number;
}

/** Largest TPMS_NV_PUBLIC: 4 + 2 + 4 + (2 + 64) + 2. */
export const MAX_NV_PUBLIC_SIZE = 4 + 2 + 4 + 2 + MAX_DIGEST_SIZE + 2;

export function isNvIndexHandle(handle: number): boolean {
  return handle >>> 24 === TPM_HR.NV_INDEX >>> 24;
}

export function readNvPublic(r: TpmReader): NvPublic {
  const nvIndex = r.u32('TPMS_NV_PUBLIC.nvIndex');
  if (!isNvIndexHandle(nvIndex))
    r.fail(`TPMS_NV_PUBLIC.nvIndex 0x${nvIndex.toString(16)} is not an NV index handle`);
  const nameAlg = r.u16('TPMS_NV_PUBLIC.nameAlg');
  if (hashSize(nameAlg) === undefined)
    r.fail(`TPMS_NV_PUBLIC.nameAlg ${algName(nameAlg)} is not a hash algorithm`);
  const attributes = r.u32('TPMS_NV_PUBLIC.attributes');
  const authPolicy = r.tpm2b('TPMS_NV_PUBLIC.authPolicy', MAX_DIGEST_SIZE);
  const dataSize = r.u16('TPMS_NV_PUBLIC.dataSize');
  return { nvIndex, nameAlg, attributes, authPolicy, dataSize };
}

/** Parses a complete TPMS_NV_PUBLIC (the contents of a TPM2B_NV_PUBLIC). */
export function parseNvPublic(bytes: Uint8Array): NvPublic {
  if (bytes.length > MAX_NV_PUBLIC_SIZE) {
    throw new TpmParseError(
      'TPMS_NV_PUBLIC',
      0,
      `${bytes.length} bytes exceed the limit of ${MAX_NV_PUBLIC_SIZE}`,
    );
  }
  const r = new TpmReader(bytes, 'TPMS_NV_PUBLIC');
  const p = readNvPublic(r);
  r.end();
  return p;
}

export function writeNvPublic(w: TpmWriter, p: NvPublic): void {
  if (!isNvIndexHandle(p.nvIndex))
    throw new TpmUsageError(`0x${p.nvIndex.toString(16)} is not an NV index handle`);
  w.u32(p.nvIndex)
    .u16(p.nameAlg)
    .u32(p.attributes >>> 0);
  w.tpm2b(p.authPolicy, MAX_DIGEST_SIZE, 'authPolicy');
  w.u16(p.dataSize);
}

export function marshalNvPublic(p: NvPublic): Uint8Array {
  const w = new TpmWriter();
  writeNvPublic(w, p);
  return w.finish();
}

/** TPM_NT of an NV index (bits 4..7 of its attributes). */
export function nvIndexType(attributes: number): number {
  return (attributes >>> 4) & 0xf;
}

/** Readable names of the TPMA_NV bits set in `attrs`. */
export function nvAttributeNames(attrs: number): string[] {
  return Object.entries(TPMA_NV)
    .filter(([, bit]) => (attrs & bit) !== 0)
    .map(([name]) => name);
}

/** The TPM name of an NV index: nameAlg followed by H_nameAlg(TPMS_NV_PUBLIC). */
export function nvName(p: NvPublic): Uint8Array {
  const hash = nodeHashName(p.nameAlg);
  if (hash === undefined) throw new TpmUsageError(`name algorithm ${algName(p.nameAlg)} is not a hash`);
  const digest = createHash(hash).update(marshalNvPublic(p)).digest();
  const out = new Uint8Array(2 + digest.length);
  new DataView(out.buffer).setUint16(0, p.nameAlg);
  out.set(digest, 2);
  return out;
}
