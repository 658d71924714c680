// Builds a signed SEV-SNP ATTESTATION_REPORT (AMD SEV-SNP firmware ABI, "ATTESTATION_REPORT
// Structure"): 1184 bytes, little-endian, ECDSA P-384/SHA-384 over bytes 0..0x2A0 by the VCEK,
// r and s written little-endian into 72-byte fields. The values are what a Milan host running an
// Azure confidential VM reports at VMPL 0, with the mock's chip ID and TCB.
import { KeyObject, sign, verify, X509Certificate } from 'node:crypto';
import { MockTeeError } from './errors.js';
import type { TcbVersion } from './roots.js';

export const SNP_REPORT_SIZE = 1184;
export const SNP_SIGNED_LENGTH = 0x2a0;
const P384_BYTES = 48;
const SIG_FIELD_BYTES = 72;

/** Field offsets of the ABI structure. */
export const SNP_OFFSET = Object.freeze({
  version: 0x00,
  guestSvn: 0x04,
  policy: 0x08,
  familyId: 0x10,
  imageId: 0x20,
  vmpl: 0x30,
  sigAlgo: 0x34,
  currentTcb: 0x38,
  platInfo: 0x40,
  keyInfo: 0x48,
  reportData: 0x50,
  measurement: 0x90,
  hostData: 0xc0,
  idKeyDigest: 0xe0,
  authorKeyDigest: 0x110,
  reportId: 0x140,
  reportIdMa: 0x160,
  reportedTcb: 0x180,
  cpuidFamId: 0x188,
  cpuidModId: 0x189,
  cpuidStep: 0x18a,
  chipId: 0x1a0,
  committedTcb: 0x1e0,
  current: 0x1e8,
  committed: 0x1ec,
  launchTcb: 0x1f0,
  signatureR: 0x2a0,
  signatureS: 0x2e8,
} as const);

/** GUEST_POLICY of Azure's CVMs: ABI 0.31, SMT allowed, the must-be-one bit 17; no debug, no migration agent. */
export const AZURE_GUEST_POLICY = 0x3001fn;
/** SIG_ALGO: ECDSA P-384 with SHA-384. */
export const SIG_ALGO_ECDSA_P384_SHA384 = 1;

export interface FirmwareVersion {
  readonly major: number;
  readonly minor: number;
  readonly build: number;
}

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
}

function put(out: Buffer, off: number, bytes: Uint8Array | undefined, len: number, what: string): void {
  if (bytes === undefined) return;
  if (bytes.length !== len)
    throw new MockTeeError('REPORT_INVALID', `${what} must be ${len} bytes, got ${bytes.length}`);
  out.set(bytes, off);
}

function putTcb(out: Buffer, off: number, tcb: TcbVersion): void {
  // Milan/Genoa TCB_VERSION: boot loader, TEE, 4 reserved bytes, SNP, microcode.
  out[off] = tcb.bootloader;
  out[off + 1] = tcb.tee;
  out[off + 6] = tcb.snp;
  out[off + 7] = tcb.microcode;
}

function putVersion(out: Buffer, off: number, v: FirmwareVersion): void {
  out[off] = v.build;
  out[off + 1] = v.minor;
  out[off + 2] = v.major;
}

/** The TCB as the little-endian u64 the firmware writes (and Azure's IMDS prints as `tcbm`). */
export function tcbToU64(tcb: TcbVersion): bigint {
  const b = Buffer.alloc(8);
  putTcb(b, 0, tcb);
  return b.readBigUInt64LE(0);
}

/** The r and s of a P1363 signature as the firmware stores them: little-endian, zero-extended to 72 bytes. */
export function signatureFields(p1363: Uint8Array): { readonly r: Buffer; readonly s: Buffer } {
  if (p1363.length !== 2 * P384_BYTES) throw new RangeError('P-384 P1363 signature must be 96 bytes');
  const r = Buffer.alloc(SIG_FIELD_BYTES);
  const s = Buffer.alloc(SIG_FIELD_BYTES);
  for (let i = 0; i < P384_BYTES; i++) {
    r[i] = p1363[P384_BYTES - 1 - i]!;
    s[i] = p1363[2 * P384_BYTES - 1 - i]!;
  }
  return { r, s };
}

/** Writes the report fields and signs them with the VCEK's private key. */
export function buildSnpReport(input: SnpReportInput, vcekPrivateKey: KeyObject): Buffer {
  const out = Buffer.alloc(SNP_REPORT_SIZE);
  const version = input.version ?? 3;
  const O = SNP_OFFSET;
  out.writeUInt32LE(version, O.version);
  out.writeUInt32LE(input.guestSvn ?? 0, O.guestSvn);
  out.writeBigUInt64LE(input.policy ?? AZURE_GUEST_POLICY, O.policy);
  // Azure's paravisor image: family ID 1, image ID 2 (as in its reports).
  out[O.familyId] = 1;
  out[O.imageId] = 2;
  out.writeUInt32LE(0, O.vmpl);
  out.writeUInt32LE(SIG_ALGO_ECDSA_P384_SHA384, O.sigAlgo);
  putTcb(out, O.currentTcb, input.tcb);
  out.writeBigUInt64LE(input.platformInfo ?? 1n, O.platInfo);
  // KEY_INFO 0: signed by the VCEK, chip ID not masked.
  out.writeUInt32LE(0, O.keyInfo);
  put(out, O.reportData, input.reportData, 64, 'report data');
  put(out, O.measurement, input.measurement, 48, 'measurement');
  put(out, O.hostData, input.hostData, 32, 'host data');
  put(out, O.reportId, input.reportId, 32, 'report ID');
  // No migration agent: REPORT_ID_MA is all ones.
  out.fill(0xff, O.reportIdMa, O.reportIdMa + 32);
  putTcb(out, O.reportedTcb, input.tcb);
  if (version >= 3) {
    const cpuid = input.cpuid ?? { family: 0x19, model: 0x01, stepping: 0x01 };
    out[O.cpuidFamId] = cpuid.family;
    out[O.cpuidModId] = cpuid.model;
    out[O.cpuidStep] = cpuid.stepping;
  }
  put(out, O.chipId, input.chipId, 64, 'chip ID');
  putTcb(out, O.committedTcb, input.tcb);
  const fw = input.firmware ?? { major: 1, minor: 55, build: 21 };
  putVersion(out, O.current, fw);
  putVersion(out, O.committed, fw);
  putTcb(out, O.launchTcb, input.tcb);
  const p1363 = sign('sha384', out.subarray(0, SNP_SIGNED_LENGTH), {
    key: vcekPrivateKey,
    dsaEncoding: 'ieee-p1363',
  });
  const { r, s } = signatureFields(p1363);
  r.copy(out, O.signatureR);
  s.copy(out, O.signatureS);
  return out;
}

/** Checks a report's signature with a VCEK (certificate or key); for tests and self-checks. */
export function snpReportSignatureValid(report: Uint8Array, vcek: KeyObject | string | Uint8Array): boolean {
  if (report.length !== SNP_REPORT_SIZE) return false;
  const key = vcek instanceof KeyObject ? vcek : publicKeyOfCertificate(vcek);
  const b = Buffer.from(report);
  const r = b.subarray(SNP_OFFSET.signatureR, SNP_OFFSET.signatureR + SIG_FIELD_BYTES);
  const s = b.subarray(SNP_OFFSET.signatureS, SNP_OFFSET.signatureS + SIG_FIELD_BYTES);
  const p1363 = Buffer.alloc(2 * P384_BYTES);
  for (let i = 0; i < P384_BYTES; i++) {
    p1363[P384_BYTES - 1 - i] = r[i]!;
    p1363[2 * P384_BYTES - 1 - i] = s[i]!;
  }
  return verify('sha384', b.subarray(0, SNP_SIGNED_LENGTH), { key, dsaEncoding: 'ieee-p1363' }, p1363);
}

function publicKeyOfCertificate(cert: string | Uint8Array): KeyObject {
  return new X509Certificate(typeof cert === 'string' ? cert : Buffer.from(cert)).publicKey;
}
