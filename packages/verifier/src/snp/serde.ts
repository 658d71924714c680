// The virtee `sev` crate's serde JSON of an AttestationReport and CertTableEntry, as the AA's snp
// attester sends them: byte arrays as arrays of numbers, bitfields (policy, plat_info, key_info)
// as integers, Option fields as null or absent.
import { VerificationError } from '../errors.js';
import {
  arrayMember,
  byteArrayMember,
  type EvidenceObject,
  member,
  objectMember,
  uintMember,
} from '../evidence.js';
import { MAX_CERT_DER_BYTES } from './certs.js';
import type { FirmwareVersion, SnpReportFields, TcbVersion } from './report.js';

const U8 = 0xff;
const U32 = 0xffffffff;

function optionalUint(obj: EvidenceObject, key: string, max: number): number | undefined {
  const v = member(obj, key);
  return v === undefined || v === null ? undefined : uintMember(obj, key, max);
}

/** A u64 as JSON carries it: only values up to 2^53 - 1 survive JSON parsing exactly. */
function u64(obj: EvidenceObject, key: string): bigint {
  return BigInt(uintMember(obj, key, Number.MAX_SAFE_INTEGER));
}

function optionalU64(obj: EvidenceObject, key: string): bigint | undefined {
  const v = member(obj, key);
  return v === undefined || v === null ? undefined : u64(obj, key);
}

function tcb(obj: EvidenceObject, key: string): TcbVersion {
  const t = objectMember(obj, key);
  const fmc = optionalUint(t, 'fmc', U8);
  return {
    bootloader: uintMember(t, 'bootloader', U8),
    tee: uintMember(t, 'tee', U8),
    snp: uintMember(t, 'snp', U8),
    microcode: uintMember(t, 'microcode', U8),
    ...(fmc !== undefined ? { fmc } : {}),
  };
}

function version(obj: EvidenceObject, key: string): FirmwareVersion {
  const v = objectMember(obj, key);
  return {
    major: uintMember(v, 'major', U8),
    minor: uintMember(v, 'minor', U8),
    build: uintMember(v, 'build', U8),
  };
}

/** The report fields from the sev crate's JSON. */
export function reportFieldsFromSevJson(r: EvidenceObject): SnpReportFields {
  const bytes = (key: string, length: number) => byteArrayMember(r, key, { length });
  const sig = objectMember(r, 'signature');
  const cpuidFamId = optionalUint(r, 'cpuid_fam_id', U8);
  const cpuidModId = optionalUint(r, 'cpuid_mod_id', U8);
  const cpuidStep = optionalUint(r, 'cpuid_step', U8);
  const launchMitVector = optionalU64(r, 'launch_mit_vector');
  const currentMitVector = optionalU64(r, 'current_mit_vector');
  return {
    version: uintMember(r, 'version', U32),
    guestSvn: uintMember(r, 'guest_svn', U32),
    policy: u64(r, 'policy'),
    familyId: bytes('family_id', 16),
    imageId: bytes('image_id', 16),
    vmpl: uintMember(r, 'vmpl', U32),
    sigAlgo: uintMember(r, 'sig_algo', U32),
    currentTcb: tcb(r, 'current_tcb'),
    platInfo: u64(r, 'plat_info'),
    keyInfo: uintMember(r, 'key_info', U32),
    reportData: bytes('report_data', 64),
    measurement: bytes('measurement', 48),
    hostData: bytes('host_data', 32),
    idKeyDigest: bytes('id_key_digest', 48),
    authorKeyDigest: bytes('author_key_digest', 48),
    reportId: bytes('report_id', 32),
    reportIdMa: bytes('report_id_ma', 32),
    reportedTcb: tcb(r, 'reported_tcb'),
    ...(cpuidFamId !== undefined ? { cpuidFamId } : {}),
    ...(cpuidModId !== undefined ? { cpuidModId } : {}),
    ...(cpuidStep !== undefined ? { cpuidStep } : {}),
    chipId: bytes('chip_id', 64),
    committedTcb: tcb(r, 'committed_tcb'),
    current: version(r, 'current'),
    committed: version(r, 'committed'),
    launchTcb: tcb(r, 'launch_tcb'),
    ...(launchMitVector !== undefined ? { launchMitVector } : {}),
    ...(currentMitVector !== undefined ? { currentMitVector } : {}),
    signature: { r: byteArrayMember(sig, 'r', { length: 72 }), s: byteArrayMember(sig, 's', { length: 72 }) },
  };
}

export type CertTableType = 'ARK' | 'ASK' | 'VCEK' | 'VLEK' | 'CRL' | 'Empty' | 'OTHER';

export interface CertTableEntry {
  readonly type: CertTableType;
  readonly data: Buffer;
}

const CERT_TYPES = new Set<string>(['ARK', 'ASK', 'VCEK', 'VLEK', 'CRL', 'Empty']);
/** The host's certificate table holds a handful of entries. */
export const MAX_CERT_TABLE_ENTRIES = 16;

/** `cert_chain`: null or absent → undefined; otherwise the entries, `{"OTHER": uuid}` types kept as OTHER. */
export function certTableFromSevJson(obj: EvidenceObject, key: string): CertTableEntry[] | undefined {
  const v = member(obj, key);
  if (v === undefined || v === null) return undefined;
  return arrayMember(obj, key, MAX_CERT_TABLE_ENTRIES).map((e) => {
    if (e === null || typeof e !== 'object' || Array.isArray(e)) {
      throw new VerificationError('EVIDENCE_MALFORMED', 'cert_chain entries must be objects');
    }
    const entry = e as EvidenceObject;
    const t = member(entry, 'cert_type');
    let type: CertTableType;
    if (typeof t === 'string' && CERT_TYPES.has(t)) type = t as CertTableType;
    else if (
      t !== null &&
      typeof t === 'object' &&
      !Array.isArray(t) &&
      typeof (t as EvidenceObject).OTHER === 'string'
    )
      type = 'OTHER';
    else throw new VerificationError('EVIDENCE_MALFORMED', 'cert_chain entry has an unknown cert_type');
    return { type, data: byteArrayMember(entry, 'data', { maxLength: MAX_CERT_DER_BYTES }) };
  });
}

function tcbJson(t: TcbVersion): Record<string, number | null> {
  return { fmc: t.fmc ?? null, bootloader: t.bootloader, tee: t.tee, snp: t.snp, microcode: t.microcode };
}

const arr = (b: Buffer) => [...b];

/**
 * The sev crate's JSON for a report, member order as its serde derive writes it. u64 values are
 * written as JSON numbers, exact up to 2^53 - 1 (every field a real report sets stays far below).
 */
export function sevJsonFromReport(r: SnpReportFields): Record<string, unknown> {
  return {
    version: r.version,
    guest_svn: r.guestSvn,
    policy: Number(r.policy),
    family_id: arr(r.familyId),
    image_id: arr(r.imageId),
    vmpl: r.vmpl,
    sig_algo: r.sigAlgo,
    current_tcb: tcbJson(r.currentTcb),
    plat_info: Number(r.platInfo),
    key_info: r.keyInfo,
    report_data: arr(r.reportData),
    measurement: arr(r.measurement),
    host_data: arr(r.hostData),
    id_key_digest: arr(r.idKeyDigest),
    author_key_digest: arr(r.authorKeyDigest),
    report_id: arr(r.reportId),
    report_id_ma: arr(r.reportIdMa),
    reported_tcb: tcbJson(r.reportedTcb),
    cpuid_fam_id: r.cpuidFamId ?? null,
    cpuid_mod_id: r.cpuidModId ?? null,
    cpuid_step: r.cpuidStep ?? null,
    chip_id: arr(r.chipId),
    committed_tcb: tcbJson(r.committedTcb),
    current: { major: r.current.major, minor: r.current.minor, build: r.current.build },
    committed: { major: r.committed.major, minor: r.committed.minor, build: r.committed.build },
    launch_tcb: tcbJson(r.launchTcb),
    launch_mit_vector: r.launchMitVector !== undefined ? Number(r.launchMitVector) : null,
    current_mit_vector: r.currentMitVector !== undefined ? Number(r.currentMitVector) : null,
    signature: { r: arr(r.signature.r), s: arr(r.signature.s) },
  };
}
