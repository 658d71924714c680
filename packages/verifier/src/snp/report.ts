// The SEV-SNP ATTESTATION_REPORT structure (AMD SEV-SNP firmware ABI, "ATTESTATION_REPORT
// Structure"): 1184 bytes, little-endian, signed over bytes 0..0x2A0. Versions 2 to 5 share the
// size; version 3 added the CPUID fields, version 5 the mitigation vectors. The TCB_VERSION
// layout depends on the processor: Turin moved the fields to make room for the FMC SVN.
import { VerificationError } from '../errors.js';

export const SNP_REPORT_SIZE = 1184;
/** The signature covers bytes 0 up to here; the signature itself starts at this offset. */
export const SNP_SIGNED_LENGTH = 0x2a0;
export const SNP_REPORT_MIN_VERSION = 2;
export const SNP_REPORT_MAX_VERSION = 5;
/** SIG_ALGO value for ECDSA P-384 with SHA-384, the only algorithm the firmware defines. */
export const SNP_SIG_ALGO_ECDSA_P384_SHA384 = 1;

export type SnpGeneration = 'Milan' | 'Genoa' | 'Turin';
/** Byte layout of TCB_VERSION: `legacy` for Milan and Genoa, `turin` from Turin on. */
export type TcbLayout = 'legacy' | 'turin';

export interface TcbVersion {
  readonly bootloader: number;
  readonly tee: number;
  readonly snp: number;
  readonly microcode: number;
  /** FMC SVN, Turin layout only. */
  readonly fmc?: number;
}

export interface FirmwareVersion {
  readonly major: number;
  readonly minor: number;
  readonly build: number;
}

/** ECDSA signature as the firmware writes it: r and s, each 72 bytes little-endian. */
export interface SnpSignature {
  readonly r: Buffer;
  readonly s: Buffer;
}

export interface SnpReport {
  /** The 1184 report bytes as received; the signature covers `bytes.subarray(0, SNP_SIGNED_LENGTH)`. */
  readonly bytes: Buffer;
  readonly version: number;
  readonly guestSvn: number;
  readonly policy: bigint;
  readonly familyId: Buffer;
  readonly imageId: Buffer;
  readonly vmpl: number;
  readonly sigAlgo: number;
  readonly currentTcb: TcbVersion;
  readonly platInfo: bigint;
  readonly keyInfo: number;
  readonly reportData: Buffer;
  readonly measurement: Buffer;
  readonly hostData: Buffer;
  readonly idKeyDigest: Buffer;
  readonly authorKeyDigest: Buffer;
  readonly reportId: Buffer;
  readonly reportIdMa: Buffer;
  readonly reportedTcb: TcbVersion;
  /** Version 3 and later. */
  readonly cpuidFamId?: number;
  readonly cpuidModId?: number;
  readonly cpuidStep?: number;
  readonly chipId: Buffer;
  readonly committedTcb: TcbVersion;
  readonly current: FirmwareVersion;
  readonly committed: FirmwareVersion;
  readonly launchTcb: TcbVersion;
  /** Version 5 and later. */
  readonly launchMitVector?: bigint;
  readonly currentMitVector?: bigint;
  readonly signature: SnpSignature;
  /** From the CPUID fields (version 3 and later); a version 2 report does not say. */
  readonly generation?: SnpGeneration;
  readonly tcbLayout: TcbLayout;
}

// Field offsets of the ABI structure.
const OFF = {
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
  launchMitVector: 0x1f8,
  currentMitVector: 0x200,
  signatureR: 0x2a0,
  signatureS: 0x2e8,
} as const;

/** Processor generation from the CPUID family and model, as AMD's KDS and the sev crate map them. */
export function generationFromCpuid(family: number, model: number): SnpGeneration | undefined {
  if (family === 0x19) {
    if (model <= 0x0f) return 'Milan';
    if ((model >= 0x10 && model <= 0x1f) || (model >= 0xa0 && model <= 0xaf)) return 'Genoa';
    return undefined;
  }
  if (family === 0x1a && model <= 0x11) return 'Turin';
  return undefined;
}

export function tcbLayoutOf(generation: SnpGeneration): TcbLayout {
  return generation === 'Turin' ? 'turin' : 'legacy';
}

function decodeTcb(b: Buffer, off: number, layout: TcbLayout): TcbVersion {
  if (layout === 'legacy') {
    return { bootloader: b[off]!, tee: b[off + 1]!, snp: b[off + 6]!, microcode: b[off + 7]! };
  }
  return {
    fmc: b[off]!,
    bootloader: b[off + 1]!,
    tee: b[off + 2]!,
    snp: b[off + 3]!,
    microcode: b[off + 7]!,
  };
}

function encodeTcb(out: Buffer, off: number, layout: TcbLayout, tcb: TcbVersion): void {
  if (layout === 'legacy') {
    out[off] = tcb.bootloader;
    out[off + 1] = tcb.tee;
    out[off + 6] = tcb.snp;
    out[off + 7] = tcb.microcode;
  } else {
    out[off] = tcb.fmc ?? 0;
    out[off + 1] = tcb.bootloader;
    out[off + 2] = tcb.tee;
    out[off + 3] = tcb.snp;
    out[off + 7] = tcb.microcode;
  }
}

function decodeVersion(b: Buffer, off: number): FirmwareVersion {
  return { build: b[off]!, minor: b[off + 1]!, major: b[off + 2]! };
}

/**
 * Which TCB layout a report uses. Version 3+ names its processor; for version 2 the sev crate's
 * rule applies: a chip ID whose last 56 bytes are zero is Turin's 8-byte ID. A masked (all-zero)
 * chip ID in a version 2 report leaves the layout unknown, and the report is refused.
 */
function layoutOf(version: number, bytes: Buffer): { generation?: SnpGeneration; tcbLayout: TcbLayout } {
  if (version >= 3) {
    const family = bytes[OFF.cpuidFamId]!;
    const model = bytes[OFF.cpuidModId]!;
    const generation = generationFromCpuid(family, model);
    if (generation === undefined) {
      throw new VerificationError(
        'UNSUPPORTED_PROCESSOR',
        `SNP report from CPU family 0x${family.toString(16)} model 0x${model.toString(16)} is not supported`,
      );
    }
    return { generation, tcbLayout: tcbLayoutOf(generation) };
  }
  const chipId = bytes.subarray(OFF.chipId, OFF.chipId + 64);
  if (isZero(chipId)) {
    throw new VerificationError(
      'UNSUPPORTED_PROCESSOR',
      'SNP report version 2 with a masked chip ID does not tell its TCB layout',
    );
  }
  return { tcbLayout: isZero(chipId.subarray(8)) ? 'turin' : 'legacy' };
}

export function isZero(b: Uint8Array): boolean {
  for (const x of b) if (x !== 0) return false;
  return true;
}

/** Parses a raw attestation report. Exactly SNP_REPORT_SIZE bytes, version 2 to 5. */
export function parseSnpReport(input: Uint8Array): SnpReport {
  if (input.length !== SNP_REPORT_SIZE) {
    throw new VerificationError(
      'REPORT_MALFORMED',
      `SNP report must be ${SNP_REPORT_SIZE} bytes, got ${input.length}`,
    );
  }
  // A private copy: later checks must see the bytes that were verified.
  const b = Buffer.from(input);
  const version = b.readUInt32LE(OFF.version);
  if (version < SNP_REPORT_MIN_VERSION || version > SNP_REPORT_MAX_VERSION) {
    throw new VerificationError('UNSUPPORTED_VERSION', `SNP report version ${version} is not supported`);
  }
  const { generation, tcbLayout } = layoutOf(version, b);
  const slice = (off: number, len: number) => b.subarray(off, off + len);
  const v3 = version >= 3;
  const v5 = version >= 5;
  return {
    bytes: b,
    version,
    guestSvn: b.readUInt32LE(OFF.guestSvn),
    policy: b.readBigUInt64LE(OFF.policy),
    familyId: slice(OFF.familyId, 16),
    imageId: slice(OFF.imageId, 16),
    vmpl: b.readUInt32LE(OFF.vmpl),
    sigAlgo: b.readUInt32LE(OFF.sigAlgo),
    currentTcb: decodeTcb(b, OFF.currentTcb, tcbLayout),
    platInfo: b.readBigUInt64LE(OFF.platInfo),
    keyInfo: b.readUInt32LE(OFF.keyInfo),
    reportData: slice(OFF.reportData, 64),
    measurement: slice(OFF.measurement, 48),
    hostData: slice(OFF.hostData, 32),
    idKeyDigest: slice(OFF.idKeyDigest, 48),
    authorKeyDigest: slice(OFF.authorKeyDigest, 48),
    reportId: slice(OFF.reportId, 32),
    reportIdMa: slice(OFF.reportIdMa, 32),
    reportedTcb: decodeTcb(b, OFF.reportedTcb, tcbLayout),
    ...(v3
      ? { cpuidFamId: b[OFF.cpuidFamId]!, cpuidModId: b[OFF.cpuidModId]!, cpuidStep: b[OFF.cpuidStep]! }
      : {}),
    chipId: slice(OFF.chipId, 64),
    committedTcb: decodeTcb(b, OFF.committedTcb, tcbLayout),
    current: decodeVersion(b, OFF.current),
    committed: decodeVersion(b, OFF.committed),
    launchTcb: decodeTcb(b, OFF.launchTcb, tcbLayout),
    ...(v5
      ? {
          launchMitVector: b.readBigUInt64LE(OFF.launchMitVector),
          currentMitVector: b.readBigUInt64LE(OFF.currentMitVector),
        }
      : {}),
    signature: { r: slice(OFF.signatureR, 72), s: slice(OFF.signatureS, 72) },
    ...(generation !== undefined ? { generation } : {}),
    tcbLayout,
  };
}

/** Fields for encodeSnpReport: what parseSnpReport returns, minus the derived members. */
export type SnpReportFields = Omit<SnpReport, 'bytes' | 'generation' | 'tcbLayout'>;

/**
 * Writes report fields in the ABI layout, reserved bytes zero. The bare `snp` evidence carries
 * the report as the sev crate's JSON, so its signed bytes are rebuilt this way, as the sev crate
 * does before verifying.
 */
export function encodeSnpReport(f: SnpReportFields): Buffer {
  if (f.version < SNP_REPORT_MIN_VERSION || f.version > SNP_REPORT_MAX_VERSION) {
    throw new VerificationError('UNSUPPORTED_VERSION', `SNP report version ${f.version} is not supported`);
  }
  const out = Buffer.alloc(SNP_REPORT_SIZE);
  const put = (off: number, bytes: Buffer, len: number) => {
    if (bytes.length !== len) {
      throw new VerificationError(
        'REPORT_MALFORMED',
        `SNP report field at 0x${off.toString(16)} must be ${len} bytes`,
      );
    }
    bytes.copy(out, off);
  };
  out.writeUInt32LE(f.version, OFF.version);
  out.writeUInt32LE(f.guestSvn, OFF.guestSvn);
  out.writeBigUInt64LE(f.policy, OFF.policy);
  put(OFF.familyId, f.familyId, 16);
  put(OFF.imageId, f.imageId, 16);
  out.writeUInt32LE(f.vmpl, OFF.vmpl);
  out.writeUInt32LE(f.sigAlgo, OFF.sigAlgo);
  out.writeBigUInt64LE(f.platInfo, OFF.platInfo);
  out.writeUInt32LE(f.keyInfo, OFF.keyInfo);
  put(OFF.reportData, f.reportData, 64);
  put(OFF.measurement, f.measurement, 48);
  put(OFF.hostData, f.hostData, 32);
  put(OFF.idKeyDigest, f.idKeyDigest, 48);
  put(OFF.authorKeyDigest, f.authorKeyDigest, 48);
  put(OFF.reportId, f.reportId, 32);
  put(OFF.reportIdMa, f.reportIdMa, 32);
  if (f.version >= 3) {
    out[OFF.cpuidFamId] = f.cpuidFamId ?? 0;
    out[OFF.cpuidModId] = f.cpuidModId ?? 0;
    out[OFF.cpuidStep] = f.cpuidStep ?? 0;
  }
  put(OFF.chipId, f.chipId, 64);
  out[OFF.current] = f.current.build;
  out[OFF.current + 1] = f.current.minor;
  out[OFF.current + 2] = f.current.major;
  out[OFF.committed] = f.committed.build;
  out[OFF.committed + 1] = f.committed.minor;
  out[OFF.committed + 2] = f.committed.major;
  if (f.version >= 5) {
    out.writeBigUInt64LE(f.launchMitVector ?? 0n, OFF.launchMitVector);
    out.writeBigUInt64LE(f.currentMitVector ?? 0n, OFF.currentMitVector);
  }
  put(OFF.signatureR, f.signature.r, 72);
  put(OFF.signatureS, f.signature.s, 72);
  // The TCB layout follows from the fields just written (CPUID or chip ID).
  const { tcbLayout } = layoutOf(f.version, out);
  encodeTcb(out, OFF.currentTcb, tcbLayout, f.currentTcb);
  encodeTcb(out, OFF.reportedTcb, tcbLayout, f.reportedTcb);
  encodeTcb(out, OFF.committedTcb, tcbLayout, f.committedTcb);
  encodeTcb(out, OFF.launchTcb, tcbLayout, f.launchTcb);
  return out;
}

/** GUEST_POLICY bits. */
export interface GuestPolicy {
  readonly abiMinor: number;
  readonly abiMajor: number;
  readonly smtAllowed: boolean;
  readonly migrateMaAllowed: boolean;
  readonly debugAllowed: boolean;
  readonly singleSocketRequired: boolean;
}

const bit = (v: bigint, n: number) => ((v >> BigInt(n)) & 1n) === 1n;

export function guestPolicy(policy: bigint): GuestPolicy {
  return {
    abiMinor: Number(policy & 0xffn),
    abiMajor: Number((policy >> 8n) & 0xffn),
    smtAllowed: bit(policy, 16),
    migrateMaAllowed: bit(policy, 18),
    debugAllowed: bit(policy, 19),
    singleSocketRequired: bit(policy, 20),
  };
}

/** PLATFORM_INFO bits. */
export interface PlatformInfo {
  readonly smtEnabled: boolean;
  readonly tsmeEnabled: boolean;
}

export function platformInfo(platInfo: bigint): PlatformInfo {
  return { smtEnabled: bit(platInfo, 0), tsmeEnabled: bit(platInfo, 1) };
}

/** KEY_INFO.SIGNING_KEY: which key signed the report. */
export type SigningKey = 'vcek' | 'vlek' | 'none' | 'reserved';

export function signingKeyOf(keyInfo: number): SigningKey {
  const k = (keyInfo >>> 2) & 0x7;
  return k === 0 ? 'vcek' : k === 1 ? 'vlek' : k === 7 ? 'none' : 'reserved';
}
