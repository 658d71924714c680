// The report signature: ECDSA P-384 with SHA-384 over bytes 0..0x2A0, by the VCEK or VLEK.
import { type KeyObject, verify } from 'node:crypto';
import { VerificationError } from '../errors.js';
import {
  isZero,
  SNP_SIG_ALGO_ECDSA_P384_SHA384,
  SNP_SIGNED_LENGTH,
  type SnpReport,
  type SnpSignature,
  signingKeyOf,
} from './report.js';

const P384_SCALAR_BYTES = 48;

/**
 * The firmware's little-endian, zero-extended r and s as IEEE P1363 (big-endian r ‖ s), or null
 * when either value does not fit a P-384 scalar.
 */
export function signatureToP1363(sig: SnpSignature): Buffer | null {
  if (!isZero(sig.r.subarray(P384_SCALAR_BYTES)) || !isZero(sig.s.subarray(P384_SCALAR_BYTES))) return null;
  const out = Buffer.alloc(2 * P384_SCALAR_BYTES);
  for (let i = 0; i < P384_SCALAR_BYTES; i++) {
    out[P384_SCALAR_BYTES - 1 - i] = sig.r[i]!;
    out[2 * P384_SCALAR_BYTES - 1 - i] = sig.s[i]!;
  }
  return out;
}

/** The inverse of signatureToP1363, for producing reports (tests, the mock TEE). */
export function signatureFromP1363(p1363: Uint8Array): SnpSignature {
  if (p1363.length !== 2 * P384_SCALAR_BYTES) throw new RangeError('P-384 P1363 signature must be 96 bytes');
  const r = Buffer.alloc(72);
  const s = Buffer.alloc(72);
  for (let i = 0; i < P384_SCALAR_BYTES; i++) {
    r[i] = p1363[P384_SCALAR_BYTES - 1 - i]!;
    s[i] = p1363[2 * P384_SCALAR_BYTES - 1 - i]!;
  }
  return { r, s };
}

/** Checks that `vekKey` (a P-384 public key) signed the report. Throws REPORT_SIGNATURE_INVALID. */
export function verifySnpReportSignature(report: SnpReport, vekKey: KeyObject): void {
  if (report.sigAlgo !== SNP_SIG_ALGO_ECDSA_P384_SHA384) {
    throw new VerificationError(
      'UNSUPPORTED_ALGORITHM',
      `SNP report signature algorithm ${report.sigAlgo} is not supported`,
    );
  }
  if (signingKeyOf(report.keyInfo) === 'none') {
    throw new VerificationError('REPORT_SIGNATURE_INVALID', 'SNP report is not signed (signing key: none)');
  }
  if (vekKey.asymmetricKeyType !== 'ec' || vekKey.asymmetricKeyDetails?.namedCurve !== 'secp384r1') {
    throw new VerificationError('UNSUPPORTED_ALGORITHM', 'the endorsement key is not a P-384 key');
  }
  const sig = signatureToP1363(report.signature);
  let ok = false;
  if (sig !== null) {
    try {
      const signed = report.bytes.subarray(0, SNP_SIGNED_LENGTH);
      ok = verify('sha384', signed, { key: vekKey, dsaEncoding: 'ieee-p1363' }, sig);
    } catch {
      ok = false;
    }
  }
  if (!ok) {
    throw new VerificationError(
      'REPORT_SIGNATURE_INVALID',
      'SNP report signature does not verify with the endorsement key',
    );
  }
}
