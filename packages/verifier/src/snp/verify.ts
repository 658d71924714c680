// The hardware-rooted checks shared by the `snp` and `az-snp-vtpm` verifiers: the endorsement key
// chains to a trusted ARK at the verification time, signs the report, and certifies its TCB.
import { VerificationError } from '../errors.js';
import {
  type AmdRootSet,
  builtinAmdRoots,
  configuredRoots,
  type VekCertificate,
  type VekChain,
  type VekKind,
  verifyReportTcb,
  verifyVekChain,
} from './certs.js';
import { type SnpReport, signingKeyOf } from './report.js';
import { verifySnpReportSignature } from './signature.js';

export interface SnpTrustOptions {
  /** Verification time for certificate validity; the current time by default. */
  readonly now?: Date;
  /**
   * Roots trusted besides AMD's built-in ones: PEM bundles (ARK + ASK/ASVK) or parsed sets. Only
   * for test hardware such as the mock TEE; never needed for real AMD processors.
   */
  readonly trustedArks?: readonly (string | AmdRootSet)[];
}

/** AMD's built-in roots followed by the configured ones. */
export function trustedRoots(options: SnpTrustOptions): AmdRootSet[] {
  return [...builtinAmdRoots(), ...configuredRoots(options.trustedArks)];
}

/** The kind of key KEY_INFO says signed the report. */
export function vekKindOf(report: SnpReport): VekKind {
  const k = signingKeyOf(report.keyInfo);
  if (k === 'vcek' || k === 'vlek') return k;
  if (k === 'none')
    throw new VerificationError('REPORT_SIGNATURE_INVALID', 'SNP report is not signed (signing key: none)');
  throw new VerificationError('UNSUPPORTED_ALGORITHM', 'SNP report names a reserved signing key');
}

/**
 * Verifies that `vek` chains to one of `roots` (valid at `now`), signed `report`, and certifies
 * the report's reported TCB (and chip, for a VCEK). Returns the chain used.
 */
export function verifySnpReport(
  report: SnpReport,
  vek: VekCertificate,
  roots: readonly AmdRootSet[],
  now: Date,
): VekChain {
  const kind = vekKindOf(report);
  const chain = verifyVekChain(vek, kind, roots, now, report.generation);
  verifySnpReportSignature(report, vek.publicKey);
  verifyReportTcb(report, vek, kind);
  return chain;
}

/** The report must come from the given VMPL (0: the most privileged, where the guest kernel or paravisor runs). */
export function checkVmpl(report: SnpReport, expected = 0): void {
  if (report.vmpl !== expected) {
    throw new VerificationError('VMPL_MISMATCH', `SNP report VMPL is ${report.vmpl}, expected ${expected}`);
  }
}
