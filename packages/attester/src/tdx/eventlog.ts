// The `cc_eventlog` of TDX evidence, as guest-components builds it: the ACPI CCEL table cut after
// its last event, then the attestation agent's AAEL events (behind a fixed Spec ID header when
// there is no CCEL), then an 8-byte 0xFF end flag; standard base64, or null when neither exists.
import { readFile } from 'node:fs/promises';
import { AttesterError } from '../attester.js';

/** A Spec ID Event03 in the SHA-1 record format naming SHA-384 (48 bytes) and SM3 (32 bytes). */
export const EVENTLOG_HEADER: Buffer = (() => {
  const b = Buffer.alloc(69);
  b.writeUInt32LE(3, 4); // EV_NO_ACTION
  b.writeUInt32LE(37, 28); // event size
  b.writeUInt32LE(2, 56); // two algorithms
  b.writeUInt16LE(0x0c, 60);
  b.writeUInt16LE(48, 62);
  b.writeUInt16LE(0x12, 64);
  b.writeUInt16LE(32, 66);
  return b;
})();
export const EVENTLOG_END = Buffer.alloc(8, 0xff);
/** The CCEL area is 64 KiB to 1 MiB; the AAEL grows with the events logged. */
export const MAX_EVENTLOG_FILE_BYTES = 4 * 1024 * 1024;

const DIGEST_SIZES: Readonly<Record<number, number>> = { 11: 32, 12: 48, 13: 64, 18: 32 };

function invalid(msg: string): AttesterError {
  return new AttesterError(`invalid ccel: ${msg}`);
}

/** The CCEL up to (not including) its end flag: eight bytes of 0xFF or of zeros. */
export function trimCcel(ccel: Buffer): Buffer {
  let i = 4;
  if (ccel.length < i + 4) throw invalid('not enough length');
  const type = ccel.readUInt32LE(i);
  i += 4 + 20;
  if (type === 3) {
    if (ccel.length < i + 4) throw invalid('not enough length');
    i += 4 + ccel.readUInt32LE(i);
  }
  for (;;) {
    if (ccel.length < i + 8) throw invalid('no end flag');
    const flag = ccel.subarray(i, i + 8);
    if (flag.every((b) => b === 0xff) || flag.every((b) => b === 0)) return ccel.subarray(0, i);
    i += 8; // register index, event type
    if (ccel.length < i + 4) throw invalid('no digest length');
    const count = ccel.readUInt32LE(i);
    i += 4;
    for (let d = 0; d < count; d++) {
      if (ccel.length < i + 2) throw invalid('no digest algorithm');
      const size = DIGEST_SIZES[ccel.readUInt16LE(i)];
      if (size === undefined) throw invalid('unsupported digest algorithm');
      i += 2 + size;
    }
    if (ccel.length < i + 4) throw invalid('no event data size');
    i += 4 + ccel.readUInt32LE(i);
  }
}

async function readIfPresent(path: string): Promise<Buffer | undefined> {
  try {
    const b = await readFile(path);
    if (b.length > MAX_EVENTLOG_FILE_BYTES) {
      throw new AttesterError(`${path} is larger than ${MAX_EVENTLOG_FILE_BYTES} bytes`);
    }
    return b;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The evidence's `cc_eventlog`: base64 of CCEL ‖ AAEL ‖ end flag, or null when there is neither. */
export async function readCcEventLog(ccelPath: string, aaelPath: string): Promise<string | null> {
  const parts: Buffer[] = [];
  const ccel = await readIfPresent(ccelPath);
  if (ccel !== undefined) parts.push(trimCcel(ccel));
  const aael = await readIfPresent(aaelPath);
  if (aael !== undefined) {
    if (parts.length === 0) parts.push(EVENTLOG_HEADER);
    parts.push(aael);
  }
  if (parts.length === 0) return null;
  parts.push(EVENTLOG_END);
  return Buffer.concat(parts).toString('base64');
}
