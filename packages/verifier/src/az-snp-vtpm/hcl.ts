// The Azure HCL report: what the paravisor (HCL) writes to the vTPM's NV index 0x01400001.
//
//   0      header: signature "HCLA", version, report_size, request_type, status, reserved[3] (u32 LE each)
//   32     hardware report, 1184 bytes (an SNP ATTESTATION_REPORT, or a 1024-byte TDREPORT + padding)
//   1216   IGVM request data: data_size, version, report_type (2 SNP, 4 TDX), report_data_hash_type
//          (1 SHA-256), variable_data_size (u32 LE each)
//   1236   variable data: the runtime claims JSON ({"keys":[HCLAkPub, HCLEkPub], "vm-configuration",
//          "user-data"}) whose hash is the hardware report's report_data
//
// The NV index is larger than the report; the bytes after the variable data are padding. Nothing
// outside the hardware report and the variable data is signed.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { VerificationError } from '../errors.js';

export const HCL_HEADER_SIZE = 32;
export const HCL_HW_REPORT_SIZE = 1184;
export const HCL_REQUEST_DATA_OFFSET = HCL_HEADER_SIZE + HCL_HW_REPORT_SIZE;
export const HCL_VAR_DATA_OFFSET = HCL_REQUEST_DATA_OFFSET + 20;
/** The HCL writes 2600 bytes; leave room but refuse anything absurd. */
export const MAX_HCL_REPORT_BYTES = 16 * 1024;
/** The runtime claims are about 1.1 KB. */
export const MAX_HCL_VAR_DATA_BYTES = 8 * 1024;

const HCL_SIGNATURE = 0x414c4348; // "HCLA" little-endian
export const HCL_REPORT_TYPE_SNP = 2;
export const HCL_REPORT_TYPE_TDX = 4;
const HCL_HASH_SHA256 = 1;
const TD_REPORT_SIZE = 1024;

export interface HclReport {
  readonly reportType: 'snp' | 'tdx';
  /** The hardware report: 1184 bytes for SNP, 1024 for TDX. */
  readonly hwReport: Buffer;
  /** The runtime claims JSON; SHA-256 of it is bound into the hardware report's report_data. */
  readonly varData: Buffer;
}

function malformed(msg: string): VerificationError {
  return new VerificationError('REPORT_MALFORMED', `HCL report ${msg}`);
}

export function parseHclReport(input: Uint8Array): HclReport {
  if (input.length > MAX_HCL_REPORT_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `HCL report is larger than ${MAX_HCL_REPORT_BYTES} bytes`,
    );
  }
  if (input.length < HCL_VAR_DATA_OFFSET) {
    throw malformed(`is truncated: ${input.length} bytes, the fixed part alone is ${HCL_VAR_DATA_OFFSET}`);
  }
  const b = Buffer.from(input);
  if (b.readUInt32LE(0) !== HCL_SIGNATURE) throw malformed('does not start with "HCLA"');
  const type = b.readUInt32LE(HCL_REQUEST_DATA_OFFSET + 8);
  if (type !== HCL_REPORT_TYPE_SNP && type !== HCL_REPORT_TYPE_TDX)
    throw malformed(`has report type ${type}`);
  const hashType = b.readUInt32LE(HCL_REQUEST_DATA_OFFSET + 12);
  if (hashType !== HCL_HASH_SHA256) {
    throw new VerificationError(
      'UNSUPPORTED_ALGORITHM',
      `HCL report data hash type ${hashType} is not SHA-256`,
    );
  }
  const varSize = b.readUInt32LE(HCL_REQUEST_DATA_OFFSET + 16);
  if (varSize > MAX_HCL_VAR_DATA_BYTES) {
    throw new VerificationError(
      'EVIDENCE_TOO_LARGE',
      `HCL variable data is larger than ${MAX_HCL_VAR_DATA_BYTES} bytes`,
    );
  }
  if (HCL_VAR_DATA_OFFSET + varSize > b.length) {
    throw malformed(`is truncated: variable data of ${varSize} bytes runs past its ${b.length} bytes`);
  }
  const hwSize = type === HCL_REPORT_TYPE_SNP ? HCL_HW_REPORT_SIZE : TD_REPORT_SIZE;
  return {
    reportType: type === HCL_REPORT_TYPE_SNP ? 'snp' : 'tdx',
    hwReport: b.subarray(HCL_HEADER_SIZE, HCL_HEADER_SIZE + hwSize),
    varData: b.subarray(HCL_VAR_DATA_OFFSET, HCL_VAR_DATA_OFFSET + varSize),
  };
}

/** The runtime claims as JSON. Only the members read below are checked; others pass unread. */
function runtimeClaims(varData: Buffer, code: 'AK_INVALID' | 'REPORT_MALFORMED'): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(varData));
  } catch {
    throw new VerificationError(code, 'HCL variable data is not JSON');
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new VerificationError(code, 'HCL variable data is not a JSON object');
  }
  return v as Record<string, unknown>;
}

const MAX_JWK_MEMBER_CHARS = 2048;

/**
 * The vTPM attestation key: the RSA JWK with `kid` "HCLAkPub" in the runtime claims' `keys`.
 * The first such key counts, as in az-cvm-vtpm.
 */
export function hclAkPub(varData: Buffer): KeyObject {
  // Without readable runtime claims there is no AK, which is how az-cvm-vtpm reports it too.
  const claims = runtimeClaims(varData, 'AK_INVALID');
  const keys = Object.hasOwn(claims, 'keys') ? claims.keys : undefined;
  if (!Array.isArray(keys))
    throw new VerificationError('AK_INVALID', 'HCL runtime claims have no "keys" array');
  const jwk = keys.find(
    (k): k is Record<string, unknown> =>
      k !== null && typeof k === 'object' && (k as Record<string, unknown>).kid === 'HCLAkPub',
  );
  if (jwk === undefined) throw new VerificationError('AK_INVALID', 'HCL runtime claims have no HCLAkPub key');
  const { kty, n, e } = jwk;
  if (kty !== 'RSA') throw new VerificationError('AK_INVALID', 'HCLAkPub is not an RSA key');
  const b64url = /^[A-Za-z0-9_-]+$/;
  if (
    typeof n !== 'string' ||
    typeof e !== 'string' ||
    n.length > MAX_JWK_MEMBER_CHARS ||
    e.length > 16 ||
    !b64url.test(n) ||
    !b64url.test(e)
  ) {
    throw new VerificationError('AK_INVALID', 'HCLAkPub has no usable RSA modulus and exponent');
  }
  try {
    return createPublicKey({ key: { kty: 'RSA', n, e }, format: 'jwk' });
  } catch (err) {
    throw new VerificationError('AK_INVALID', 'HCLAkPub is not a valid RSA public key', { cause: err });
  }
}

/** `user-data` of the runtime claims: the report data the guest wrote to NV index 0x01400002, as hex. */
export function hclUserData(varData: Buffer): Buffer {
  const claims = runtimeClaims(varData, 'REPORT_MALFORMED');
  const v = Object.hasOwn(claims, 'user-data') ? claims['user-data'] : undefined;
  if (typeof v !== 'string' || v.length > 1024 || !/^(?:[0-9a-fA-F]{2})*$/.test(v)) {
    throw new VerificationError('REPORT_MALFORMED', 'HCL runtime claims have no hex "user-data"');
  }
  return Buffer.from(v, 'hex');
}
