// The raw SEV-SNP ATTESTATION_REPORT (AMD SEV-SNP firmware ABI; 1184 bytes, little-endian) as the
// virtee `sev` crate 6.x parses it (`AttestationReport::from_bytes`) and serde writes it to JSON:
// byte arrays as arrays of numbers, the policy, platform-info and key-info bitfields as integers,
// Option fields as null, members in struct order. The verifier rebuilds the signed bytes from this
// JSON, so every signed field must survive the trip.
import { EvidenceCollectionFailed } from '../attester.js';

export const SNP_REPORT_SIZE = 1184;
/** Versions the sev crate parses: 2, then 3-4 (CPUID fields), then 5+ (mitigation vectors). */
export const SNP_REPORT_MIN_VERSION = 2;

export interface SevTcbJson {
  readonly fmc: number | null;
  readonly bootloader: number;
  readonly tee: number;
  readonly snp: number;
  readonly microcode: number;
}

export interface SevVersionJson {
  readonly major: number;
  readonly minor: number;
  readonly build: number;
}

/** The sev crate's `AttestationReport` as serde_json writes it. */
export interface SevAttestationReportJson {
  readonly version: number;
  readonly guest_svn: number;
  readonly policy: number;
  readonly family_id: number[];
  readonly image_id: number[];
  readonly vmpl: number;
  readonly sig_algo: number;
  readonly current_tcb: SevTcbJson;
  readonly plat_info: number;
  readonly key_info: number;
  readonly report_data: number[];
  readonly measurement: number[];
  readonly host_data: number[];
  readonly id_key_digest: number[];
  readonly author_key_digest: number[];
  readonly report_id: number[];
  readonly report_id_ma: number[];
  readonly reported_tcb: SevTcbJson;
  readonly cpuid_fam_id: number | null;
  readonly cpuid_mod_id: number | null;
  readonly cpuid_step: number | null;
  readonly chip_id: number[];
  readonly committed_tcb: SevTcbJson;
  readonly current: SevVersionJson;
  readonly committed: SevVersionJson;
  readonly launch_tcb: SevTcbJson;
  readonly launch_mit_vector: number | null;
  readonly current_mit_vector: number | null;
  readonly signature: { readonly r: number[]; readonly s: number[] };
}

type TcbLayout = 'legacy' | 'turin';

/**
 * The sev crate's processor identification (`Generation::identify_cpu`): family 0x19 models
 * 0x00-0x0F Milan, 0x10-0x1F and 0xA0-0xAF Genoa; family 0x1A models 0x00-0x11 Turin.
 */
function layoutFromCpuid(family: number, model: number): TcbLayout | undefined {
  if (
    family === 0x19 &&
    (model <= 0x0f || (model >= 0x10 && model <= 0x1f) || (model >= 0xa0 && model <= 0xaf))
  )
    return 'legacy';
  if (family === 0x1a && model <= 0x11) return 'turin';
  return undefined;
}

const isZero = (b: Uint8Array) => b.every((x) => x === 0);

function tcb(b: Buffer, off: number, layout: TcbLayout): SevTcbJson {
  return layout === 'legacy'
    ? { fmc: null, bootloader: b[off]!, tee: b[off + 1]!, snp: b[off + 6]!, microcode: b[off + 7]! }
    : { fmc: b[off]!, bootloader: b[off + 1]!, tee: b[off + 2]!, snp: b[off + 3]!, microcode: b[off + 7]! };
}

function version(b: Buffer, off: number): SevVersionJson {
  return { major: b[off + 2]!, minor: b[off + 1]!, build: b[off]! };
}

/** A u64 as serde_json writes it; refused above 2^53 - 1, which a JavaScript number cannot hold. */
function u64(b: Buffer, off: number, what: string): number {
  const v = b.readBigUInt64LE(off);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new EvidenceCollectionFailed(
      `SNP report ${what} 0x${v.toString(16)} does not fit a JSON number exactly`,
    );
  }
  return Number(v);
}

/**
 * Converts a raw report to the sev crate's JSON. Refuses, as the sev crate does, a report of
 * another size, a version below 2, a version 3+ report from an unknown processor, and a version 2
 * report whose masked chip ID hides its TCB layout.
 */
export function sevReportJson(raw: Uint8Array): SevAttestationReportJson {
  if (raw.length !== SNP_REPORT_SIZE) {
    throw new EvidenceCollectionFailed(
      `Failed to parse attestation report: ${raw.length} bytes, expected ${SNP_REPORT_SIZE}`,
    );
  }
  const b = Buffer.from(raw);
  const v = b.readUInt32LE(0x00);
  if (v < SNP_REPORT_MIN_VERSION) {
    throw new EvidenceCollectionFailed(`Failed to parse attestation report: version ${v} is not supported`);
  }
  const v3 = v >= 3;
  const v5 = v >= 5;
  const chipId = b.subarray(0x1a0, 0x1e0);
  let layout: TcbLayout;
  if (v3) {
    const found = layoutFromCpuid(b[0x188]!, b[0x189]!);
    if (found === undefined) {
      throw new EvidenceCollectionFailed(
        `Failed to parse attestation report: unknown processor (CPUID family 0x${b[0x188]!.toString(16)}, model 0x${b[0x189]!.toString(16)})`,
      );
    }
    layout = found;
  } else {
    if (isZero(chipId)) {
      throw new EvidenceCollectionFailed(
        'Failed to parse attestation report: a version 2 report with a masked chip ID has no known TCB layout',
      );
    }
    layout = isZero(chipId.subarray(8)) ? 'turin' : 'legacy';
  }
  const arr = (off: number, len: number) => [...b.subarray(off, off + len)];
  return {
    version: v,
    guest_svn: b.readUInt32LE(0x04),
    policy: u64(b, 0x08, 'policy'),
    family_id: arr(0x10, 16),
    image_id: arr(0x20, 16),
    vmpl: b.readUInt32LE(0x30),
    sig_algo: b.readUInt32LE(0x34),
    current_tcb: tcb(b, 0x38, layout),
    plat_info: u64(b, 0x40, 'platform info'),
    key_info: b.readUInt32LE(0x48),
    report_data: arr(0x50, 64),
    measurement: arr(0x90, 48),
    host_data: arr(0xc0, 32),
    id_key_digest: arr(0xe0, 48),
    author_key_digest: arr(0x110, 48),
    report_id: arr(0x140, 32),
    report_id_ma: arr(0x160, 32),
    reported_tcb: tcb(b, 0x180, layout),
    cpuid_fam_id: v3 ? b[0x188]! : null,
    cpuid_mod_id: v3 ? b[0x189]! : null,
    cpuid_step: v3 ? b[0x18a]! : null,
    chip_id: [...chipId],
    committed_tcb: tcb(b, 0x1e0, layout),
    current: version(b, 0x1e8),
    committed: version(b, 0x1ec),
    launch_tcb: tcb(b, 0x1f0, layout),
    launch_mit_vector: v5 ? u64(b, 0x1f8, 'launch mitigation vector') : null,
    current_mit_vector: v5 ? u64(b, 0x200, 'current mitigation vector') : null,
    signature: { r: arr(0x2a0, 72), s: arr(0x2e8, 72) },
  };
}

/** REPORT_DATA (64 bytes at 0x50) of a raw report. */
export function rawReportData(raw: Uint8Array): Buffer {
  return Buffer.from(raw.subarray(0x50, 0x90));
}

/** HOST_DATA (32 bytes at 0xC0) of a raw report: where the host put the initdata digest. */
export function rawHostData(raw: Uint8Array): Buffer {
  return Buffer.from(raw.subarray(0xc0, 0xe0));
}
