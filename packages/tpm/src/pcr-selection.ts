import { algName, hashSize } from './constants.js';
import { TpmUsageError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';

/** Largest sizeofSelect accepted: 4 bytes, 32 PCRs (TPM2_PCR_SELECT_MAX). */
export const PCR_SELECT_MAX = 4;
/** Most banks a TPML_PCR_SELECTION may list (TPM2_NUM_PCR_BANKS). */
export const MAX_PCR_BANKS = 16;
/** PCR bitmaps are at least 3 bytes (PCR_SELECT_MIN for a 24-PCR TPM). */
export const PCR_SELECT_MIN = 3;

/**
 * One TPMS_PCR_SELECTION: a bank and the PCR indices selected in it, in
 * ascending order. `sizeofSelect` is the bitmap length on the wire; when
 * omitted it is the smallest of 3 or more bytes that holds the highest PCR.
 */
export interface PcrSelection {
  readonly hashAlg: number;
  readonly pcrs: readonly number[];
  readonly sizeofSelect?: number;
}

export function readPcrSelection(r: TpmReader, what = 'TPMS_PCR_SELECTION'): PcrSelection {
  const hashAlg = r.u16(`${what}.hash`);
  if (hashSize(hashAlg) === undefined) r.fail(`${what}.hash ${algName(hashAlg)} is not a hash algorithm`);
  const sizeofSelect = r.u8(`${what}.sizeofSelect`);
  if (sizeofSelect > PCR_SELECT_MAX) r.fail(`${what}.sizeofSelect ${sizeofSelect} exceeds ${PCR_SELECT_MAX}`);
  const bitmap = r.bytes(sizeofSelect, `${what}.pcrSelect`);
  const pcrs: number[] = [];
  bitmap.forEach((byte, i) => {
    for (let bit = 0; bit < 8; bit++) if ((byte >> bit) & 1) pcrs.push(i * 8 + bit);
  });
  return { hashAlg, pcrs, sizeofSelect };
}

export function readPcrSelectionList(r: TpmReader, what = 'TPML_PCR_SELECTION'): PcrSelection[] {
  const count = r.u32(`${what}.count`);
  if (count > MAX_PCR_BANKS) r.fail(`${what}.count ${count} exceeds ${MAX_PCR_BANKS}`);
  const out: PcrSelection[] = [];
  for (let i = 0; i < count; i++) out.push(readPcrSelection(r, `${what}.pcrSelections[${i}]`));
  return out;
}

export function writePcrSelection(w: TpmWriter, sel: PcrSelection): void {
  if (hashSize(sel.hashAlg) === undefined) {
    throw new TpmUsageError(`PCR bank ${algName(sel.hashAlg)} is not a hash algorithm`);
  }
  const highest = sel.pcrs.reduce((m, p) => Math.max(m, p), -1);
  const needed = Math.max(PCR_SELECT_MIN, Math.ceil((highest + 1) / 8));
  const size = sel.sizeofSelect ?? needed;
  if (size > PCR_SELECT_MAX || size < Math.ceil((highest + 1) / 8)) {
    throw new TpmUsageError(`sizeofSelect ${size} cannot hold PCR ${highest}`);
  }
  const bitmap = new Uint8Array(size);
  for (const p of sel.pcrs) {
    if (!Number.isInteger(p) || p < 0) throw new TpmUsageError(`invalid PCR index ${p}`);
    bitmap[p >> 3]! |= 1 << (p & 7);
  }
  w.u16(sel.hashAlg).u8(size).bytes(bitmap);
}

export function writePcrSelectionList(w: TpmWriter, list: readonly PcrSelection[]): void {
  if (list.length > MAX_PCR_BANKS) throw new TpmUsageError(`at most ${MAX_PCR_BANKS} PCR banks`);
  w.u32(list.length);
  for (const sel of list) writePcrSelection(w, sel);
}

/** Parses a complete TPML_PCR_SELECTION (no trailing bytes). */
export function parsePcrSelectionList(bytes: Uint8Array): PcrSelection[] {
  const r = new TpmReader(bytes, 'TPML_PCR_SELECTION');
  const list = readPcrSelectionList(r);
  r.end();
  return list;
}

export function marshalPcrSelectionList(list: readonly PcrSelection[]): Uint8Array {
  const w = new TpmWriter();
  writePcrSelectionList(w, list);
  return w.finish();
}

/** A selection of `pcrs` (default 0..23) in one bank. */
export function pcrSelection(hashAlg: number, pcrs: readonly number[] = ALL_PCRS): PcrSelection {
  return { hashAlg, pcrs: [...new Set(pcrs)].sort((a, b) => a - b) };
}

/** PCR 0..23, the set upstream's vTPM attesters quote. */
export const ALL_PCRS: readonly number[] = Object.freeze(Array.from({ length: 24 }, (_, i) => i));
