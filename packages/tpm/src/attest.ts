import { MAX_DIGEST_SIZE, TPM_GENERATED_VALUE, TPM_ST } from './constants.js';
import { TpmParseError } from './errors.js';
import { TpmReader, TpmWriter } from './marshal.js';
import { type PcrSelection, readPcrSelectionList, writePcrSelectionList } from './pcr-selection.js';

/** Largest TPMS_ATTEST accepted (a quote is ~150 bytes; TPM2B_ATTEST holds at most a few hundred). */
export const MAX_ATTEST_SIZE = 2048;
/** TPM2B_NAME capacity: a hash algorithm id plus the largest digest. */
export const MAX_NAME_SIZE = 2 + MAX_DIGEST_SIZE;
/** TPM2B_DATA capacity (sizeof TPMT_HA). */
export const MAX_DATA_SIZE = 2 + MAX_DIGEST_SIZE;

export interface TpmsClockInfo {
  readonly clock: bigint;
  readonly resetCount: number;
  readonly restartCount: number;
  readonly safe: boolean;
}

/** TPMS_QUOTE_INFO: the PCRs quoted and the digest of their values. */
export interface TpmsQuoteInfo {
  readonly pcrSelect: readonly PcrSelection[];
  readonly pcrDigest: Uint8Array;
}

/**
 * TPMS_ATTEST of type TPM_ST_ATTEST_QUOTE, the message a TPM2_Quote signs.
 * `magic` is always TPM_GENERATED_VALUE: anything else is rejected at parse
 * time, since only the TPM can produce that value in a signed structure.
 */
export interface TpmsAttest {
  readonly magic: number;
  readonly type: number;
  readonly qualifiedSigner: Uint8Array;
  readonly extraData: Uint8Array;
  readonly clockInfo: TpmsClockInfo;
  readonly firmwareVersion: bigint;
  readonly attested: TpmsQuoteInfo;
}

const ATTEST_TYPE_NAMES: ReadonlyMap<number, string> = new Map([
  [TPM_ST.ATTEST_CERTIFY, 'certify'],
  [TPM_ST.ATTEST_CREATION, 'creation'],
  [TPM_ST.ATTEST_NV, 'nv'],
  [TPM_ST.ATTEST_NV_DIGEST, 'nv digest'],
  [TPM_ST.ATTEST_TIME, 'time'],
  [TPM_ST.ATTEST_COMMAND_AUDIT, 'command audit'],
  [TPM_ST.ATTEST_SESSION_AUDIT, 'session audit'],
]);

export function readAttest(r: TpmReader): TpmsAttest {
  const magic = r.u32('TPMS_ATTEST.magic');
  if (magic !== TPM_GENERATED_VALUE) {
    r.fail(`magic 0x${magic.toString(16)} is not TPM_GENERATED_VALUE (0xff544347)`);
  }
  const type = r.u16('TPMS_ATTEST.type');
  if (type !== TPM_ST.ATTEST_QUOTE) {
    const known = ATTEST_TYPE_NAMES.get(type);
    r.fail(
      known === undefined
        ? `type 0x${type.toString(16)} is not an attestation type`
        : `type 0x${type.toString(16)} (${known}) is not a quote (TPM_ST_ATTEST_QUOTE 0x8018)`,
    );
  }
  const qualifiedSigner = r.tpm2b('TPMS_ATTEST.qualifiedSigner', MAX_NAME_SIZE);
  const extraData = r.tpm2b('TPMS_ATTEST.extraData', MAX_DATA_SIZE);
  const clock = r.u64('TPMS_CLOCK_INFO.clock');
  const resetCount = r.u32('TPMS_CLOCK_INFO.resetCount');
  const restartCount = r.u32('TPMS_CLOCK_INFO.restartCount');
  const safeByte = r.u8('TPMS_CLOCK_INFO.safe');
  if (safeByte > 1) r.fail(`TPMS_CLOCK_INFO.safe is ${safeByte}, not a TPMI_YES_NO`);
  const firmwareVersion = r.u64('TPMS_ATTEST.firmwareVersion');
  const pcrSelect = readPcrSelectionList(r, 'TPMS_QUOTE_INFO.pcrSelect');
  const pcrDigest = r.tpm2b('TPMS_QUOTE_INFO.pcrDigest', MAX_DIGEST_SIZE);
  return {
    magic,
    type,
    qualifiedSigner,
    extraData,
    clockInfo: { clock, resetCount, restartCount, safe: safeByte === 1 },
    firmwareVersion,
    attested: { pcrSelect, pcrDigest },
  };
}

/**
 * Parses a complete TPMS_ATTEST (the quote message). Rejects oversize input,
 * truncation, trailing bytes, a wrong magic and non-quote types.
 */
export function parseAttest(bytes: Uint8Array): TpmsAttest {
  if (bytes.length > MAX_ATTEST_SIZE) {
    throw new TpmParseError('TPMS_ATTEST', 0, `${bytes.length} bytes exceed the limit of ${MAX_ATTEST_SIZE}`);
  }
  const r = new TpmReader(bytes, 'TPMS_ATTEST');
  const attest = readAttest(r);
  r.end();
  return attest;
}

/** Marshals a quote TPMS_ATTEST (for tests, mocks and re-encoding). */
export function marshalAttest(a: TpmsAttest): Uint8Array {
  const w = new TpmWriter();
  w.u32(a.magic).u16(a.type);
  w.tpm2b(a.qualifiedSigner, MAX_NAME_SIZE, 'qualifiedSigner');
  w.tpm2b(a.extraData, MAX_DATA_SIZE, 'extraData');
  w.u64(a.clockInfo.clock).u32(a.clockInfo.resetCount).u32(a.clockInfo.restartCount);
  w.u8(a.clockInfo.safe ? 1 : 0).u64(a.firmwareVersion);
  writePcrSelectionList(w, a.attested.pcrSelect);
  w.tpm2b(a.attested.pcrDigest, MAX_DIGEST_SIZE, 'pcrDigest');
  return w.finish();
}
