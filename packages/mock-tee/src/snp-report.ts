// Builds a signed SEV-SNP ATTESTATION_REPORT with @broker/verifier's encoder, so the bytes are laid
// out exactly as the verifier parses them: 1184 bytes, little-endian, ECDSA P-384/SHA-384 over bytes
// 0..0x2A0 by the VCEK, r and s little-endian in 72-byte fields. The values are what a Milan host
// running an Azure confidential VM reports at VMPL 0, with the mock's chip ID and TCB.
import type { KeyObject } from 'node:crypto';
import { encodeSnpReport, type FirmwareVersion, SNP_REPORT_SIZE, type TcbVersion } from '@broker/verifier';
import { signSnpReport } from '@broker/verifier/testing';
import { MockTeeError } from './errors.js';

export { SNP_REPORT_SIZE };

/** GUEST_POLICY of Azure's CVMs: ABI 0.31, SMT allowed, the must-be-one bit 17; no debug, no migration agent. */
export const AZURE_GUEST_POLICY = 0x3001fn;
/** SIG_ALGO: ECDSA P-384 with SHA-384. */
export const SIG_ALGO_ECDSA_P384_SHA384 = 1;

export interface SnpReportInput {
  /** 64 bytes: the guest's REPORT_DATA (for the HCL report, sha256 of the runtime claims, zero-padded). */
  readonly reportData: Uint8Array;
  /** 48 bytes: the launch measurement of the guest's initial image (on Azure, the paravisor's). */
  readonly measurement: Uint8Array;
  readonly chipId: Uint8Array;
  /** Current, reported, committed and launch TCB (one value: the VCEK was issued for it). */
  readonly tcb: TcbVersion;
  /** 32 bytes; zero by default, as on Azure. */
  readonly hostData?: Uint8Array;
  /** 32 bytes: the guest's report ID; zero by default. */
  readonly reportId?: Uint8Array;
  readonly policy?: bigint;
  readonly guestSvn?: number;
  /** 2 or 3 (3 adds the CPUID fields that name the processor generation). Default 3. */
  readonly version?: 2 | 3;
  /** CPUID family, model and stepping (version 3); Milan (0x19, 0x01, 0x01) by default. */
  readonly cpuid?: { readonly family: number; readonly model: number; readonly stepping: number };
  readonly firmware?: FirmwareVersion;
  /** PLATFORM_INFO; SMT enabled by default. */
  readonly platformInfo?: bigint;
  /** VMPL of the requester; the paravisor asks at 0. Tests set others. */
  readonly vmpl?: number;
}

function sized(bytes: Uint8Array | undefined, len: number, what: string): Buffer {
  if (bytes === undefined) return Buffer.alloc(len);
  if (bytes.length !== len)
    throw new MockTeeError('REPORT_INVALID', `${what} must be ${len} bytes, got ${bytes.length}`);
  return Buffer.from(bytes);
}

/** The TCB as the little-endian u64 the firmware writes (Milan layout), which Azure's IMDS prints as `tcbm`. */
export function tcbToU64(tcb: TcbVersion): bigint {
  const b = Buffer.alloc(8);
  b[0] = tcb.bootloader;
  b[1] = tcb.tee;
  b[6] = tcb.snp;
  b[7] = tcb.microcode;
  return b.readBigUInt64LE(0);
}

/** Writes the report fields and signs them with the VCEK's private key. */
export function buildSnpReport(input: SnpReportInput, vcekPrivateKey: KeyObject): Buffer {
  const version = input.version ?? 3;
  const cpuid = input.cpuid ?? { family: 0x19, model: 0x01, stepping: 0x01 };
  const fw = input.firmware ?? { major: 1, minor: 55, build: 21 };
  // Azure's paravisor image: family ID 1, image ID 2 (as in its reports).
  const familyId = Buffer.alloc(16);
  familyId[0] = 1;
  const imageId = Buffer.alloc(16);
  imageId[0] = 2;
  const unsigned = encodeSnpReport({
    version,
    guestSvn: input.guestSvn ?? 0,
    policy: input.policy ?? AZURE_GUEST_POLICY,
    familyId,
    imageId,
    vmpl: input.vmpl ?? 0,
    sigAlgo: SIG_ALGO_ECDSA_P384_SHA384,
    currentTcb: input.tcb,
    platInfo: input.platformInfo ?? 1n,
    // KEY_INFO 0: signed by the VCEK, chip ID not masked.
    keyInfo: 0,
    reportData: sized(input.reportData, 64, 'report data'),
    measurement: sized(input.measurement, 48, 'measurement'),
    hostData: sized(input.hostData, 32, 'host data'),
    idKeyDigest: Buffer.alloc(48),
    authorKeyDigest: Buffer.alloc(48),
    reportId: sized(input.reportId, 32, 'report ID'),
    // No migration agent: REPORT_ID_MA is all ones.
    reportIdMa: Buffer.alloc(32, 0xff),
    reportedTcb: input.tcb,
    ...(version >= 3 && { cpuidFamId: cpuid.family, cpuidModId: cpuid.model, cpuidStep: cpuid.stepping }),
    chipId: sized(input.chipId, 64, 'chip ID'),
    committedTcb: input.tcb,
    current: fw,
    committed: fw,
    launchTcb: input.tcb,
    signature: { r: Buffer.alloc(72), s: Buffer.alloc(72) },
  });
  return signSnpReport(unsigned, vcekPrivateKey);
}
