// Claims from an SNP report, named as trustee's verifiers name them (`tcb_claims.md`).
import { guestPolicy, platformInfo, type SnpReport } from './report.js';

/** trustee's `snp` claims: numbers and booleans as they are, byte fields in lowercase hex. */
export interface SnpClaims {
  policy_abi_major: number;
  policy_abi_minor: number;
  policy_smt_allowed: boolean;
  policy_migrate_ma: boolean;
  policy_debug_allowed: boolean;
  policy_single_socket: boolean;
  reported_tcb_bootloader: number;
  reported_tcb_tee: number;
  reported_tcb_snp: number;
  reported_tcb_microcode: number;
  platform_tsme_enabled: boolean;
  platform_smt_enabled: boolean;
  measurement: string;
  report_data: string;
  /** HOST_DATA, where the initdata digest is bound. */
  init_data: string;
  chip_id: string;
}

export function snpClaims(report: SnpReport): SnpClaims {
  const p = guestPolicy(report.policy);
  const plat = platformInfo(report.platInfo);
  return {
    policy_abi_major: p.abiMajor,
    policy_abi_minor: p.abiMinor,
    policy_smt_allowed: p.smtAllowed,
    policy_migrate_ma: p.migrateMaAllowed,
    policy_debug_allowed: p.debugAllowed,
    policy_single_socket: p.singleSocketRequired,
    reported_tcb_bootloader: report.reportedTcb.bootloader,
    reported_tcb_tee: report.reportedTcb.tee,
    reported_tcb_snp: report.reportedTcb.snp,
    reported_tcb_microcode: report.reportedTcb.microcode,
    platform_tsme_enabled: plat.tsmeEnabled,
    platform_smt_enabled: plat.smtEnabled,
    measurement: report.measurement.toString('hex'),
    report_data: report.reportData.toString('hex'),
    init_data: report.hostData.toString('hex'),
    chip_id: report.chipId.toString('hex'),
  };
}

/**
 * trustee's `az-snp-vtpm` view of the same report: every value a string (`"true"`, `"3"`), the
 * byte fields in standard base64, no chip ID. The vTPM verifier then replaces `report_data` and
 * `init_data` with the quote's nonce and PCR8.
 */
export type AzSnpReportClaims = {
  [K in Exclude<keyof SnpClaims, 'chip_id'>]: string;
};

export function azSnpReportClaims(report: SnpReport): AzSnpReportClaims {
  const c = snpClaims(report);
  return {
    policy_abi_major: String(c.policy_abi_major),
    policy_abi_minor: String(c.policy_abi_minor),
    policy_smt_allowed: String(c.policy_smt_allowed),
    policy_migrate_ma: String(c.policy_migrate_ma),
    policy_debug_allowed: String(c.policy_debug_allowed),
    policy_single_socket: String(c.policy_single_socket),
    reported_tcb_bootloader: String(c.reported_tcb_bootloader),
    reported_tcb_tee: String(c.reported_tcb_tee),
    reported_tcb_snp: String(c.reported_tcb_snp),
    reported_tcb_microcode: String(c.reported_tcb_microcode),
    platform_tsme_enabled: String(c.platform_tsme_enabled),
    platform_smt_enabled: String(c.platform_smt_enabled),
    measurement: report.measurement.toString('base64'),
    report_data: report.reportData.toString('base64'),
    init_data: report.hostData.toString('base64'),
  };
}
