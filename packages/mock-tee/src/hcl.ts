// Azure's HCL report, as the paravisor (HCL) writes it to the vTPM's NV index 0x01400001:
//
//   0x000  header, 32 bytes: "HCLA", version 1, report size, request type 2, status 0, 12 reserved
//   0x020  the hardware report: an SNP ATTESTATION_REPORT (1184 bytes; the slot fits a TD report too)
//   0x4C0  IGVM request data, 20 bytes: data size, version 1, report type 2 (SNP), hash type 1
//          (SHA-256), variable data size
//   0x4D4  variable data: the runtime claims JSON, whose SHA-256 is the SNP report's REPORT_DATA[0..32]
//
// followed by zeros up to the index size. The runtime claims hold the vTPM's attestation key
// (`HCLAkPub`) and endorsement key (`HCLEkPub`) as JWKs, the VM configuration and the 64 bytes the
// guest last wrote to NV index 0x01400002 (`user-data`, upper-case hex).
import { createHash, type KeyObject } from 'node:crypto';
import { MockTeeError } from './errors.js';
import type { HardwareRoots } from './roots.js';
import { buildSnpReport, SNP_REPORT_SIZE, type SnpReportInput } from './snp-report.js';

/** NV index the HCL report is read from. */
export const HCL_REPORT_NV_INDEX = 0x01400001;
/** NV index the guest writes its report data (user data) to. */
export const HCL_USER_DATA_NV_INDEX = 0x01400002;
/** Persistent handle of the vTPM's attestation key. */
export const AK_PERSISTENT_HANDLE = 0x81000003;
/** Size of the HCL report NV index on Azure (the fixture reports are this long). */
export const HCL_REPORT_NV_SIZE = 2600;
/** The user data the paravisor reads: 64 bytes, like SNP REPORT_DATA. */
export const USER_DATA_SIZE = 64;

export const HCL_HEADER_SIZE = 32;
export const IGVM_REQUEST_DATA_HEADER_SIZE = 20;
const HCL_SIGNATURE = 'HCLA';
const HCL_VERSION = 1;
const REQUEST_TYPE_ATTESTATION = 2;
export const HCL_REPORT_TYPE_SNP = 2;
export const HCL_REPORT_TYPE_TDX = 4;
export const HCL_HASH_TYPE_SHA256 = 1;
const IGVM_REQUEST_DATA_VERSION = 1;
const VAR_DATA_OFFSET = HCL_HEADER_SIZE + SNP_REPORT_SIZE + IGVM_REQUEST_DATA_HEADER_SIZE;
/** The most runtime-claims bytes that fit the NV index. */
export const MAX_RUNTIME_CLAIMS_SIZE = HCL_REPORT_NV_SIZE - VAR_DATA_OFFSET;

export interface VmConfiguration {
  readonly consoleEnabled: boolean;
  readonly secureBoot: boolean;
  readonly tpmEnabled: boolean;
  /** Azure's VM unique ID, an upper-case UUID. */
  readonly vmUniqueId: string;
}

export interface RuntimeClaimsInput {
  /** The attestation key at 0x81000003 (RSA). */
  readonly akPublic: KeyObject;
  /** The endorsement key (RSA). */
  readonly ekPublic: KeyObject;
  /** At most 64 bytes; zero-padded to 64. */
  readonly userData: Uint8Array;
  readonly vmConfiguration: VmConfiguration;
}

function rsaJwk(kid: string, keyOps: string, key: KeyObject): Record<string, unknown> {
  if (key.asymmetricKeyType !== 'rsa') throw new MockTeeError('REPORT_INVALID', `${kid} must be an RSA key`);
  const jwk = key.export({ format: 'jwk' });
  // Member order as the paravisor writes it; the hash covers these exact bytes.
  return { kid, key_ops: [keyOps], kty: 'RSA', e: jwk.e, n: jwk.n };
}

/** The 64 user-data bytes as the claims carry them: zero-padded, upper-case hex. */
export function userDataHex(userData: Uint8Array): string {
  if (userData.length > USER_DATA_SIZE) {
    throw new MockTeeError(
      'REPORT_INVALID',
      `user data is ${userData.length} bytes, more than ${USER_DATA_SIZE}`,
    );
  }
  const padded = Buffer.alloc(USER_DATA_SIZE);
  padded.set(userData);
  return padded.toString('hex').toUpperCase();
}

/** The runtime claims JSON bytes (compact, in Azure's member order). */
export function runtimeClaims(input: RuntimeClaimsInput): Buffer {
  const vm = input.vmConfiguration;
  const claims = {
    keys: [rsaJwk('HCLAkPub', 'sign', input.akPublic), rsaJwk('HCLEkPub', 'encrypt', input.ekPublic)],
    'vm-configuration': {
      'console-enabled': vm.consoleEnabled,
      'secure-boot': vm.secureBoot,
      'tpm-enabled': vm.tpmEnabled,
      vmUniqueId: vm.vmUniqueId,
    },
    'user-data': userDataHex(input.userData),
  };
  return Buffer.from(JSON.stringify(claims), 'utf8');
}

/** REPORT_DATA for runtime claims: their SHA-256, zero-padded to 64 bytes. */
export function reportDataForClaims(claims: Uint8Array): Buffer {
  const out = Buffer.alloc(64);
  createHash('sha256').update(claims).digest().copy(out);
  return out;
}

/** Frames an SNP report and its runtime claims as an HCL report of the NV index's size. */
export function buildHclReport(snpReport: Uint8Array, claims: Uint8Array): Buffer {
  if (snpReport.length !== SNP_REPORT_SIZE) {
    throw new MockTeeError('REPORT_INVALID', `SNP report must be ${SNP_REPORT_SIZE} bytes`);
  }
  if (claims.length > MAX_RUNTIME_CLAIMS_SIZE) {
    throw new MockTeeError(
      'REPORT_INVALID',
      `runtime claims of ${claims.length} bytes do not fit the NV index`,
    );
  }
  const out = Buffer.alloc(HCL_REPORT_NV_SIZE);
  out.write(HCL_SIGNATURE, 0, 'ascii');
  out.writeUInt32LE(HCL_VERSION, 4);
  out.writeUInt32LE(VAR_DATA_OFFSET + claims.length, 8);
  out.writeUInt32LE(REQUEST_TYPE_ATTESTATION, 12);
  out.writeUInt32LE(0, 16);
  out.set(snpReport, HCL_HEADER_SIZE);
  const igvm = HCL_HEADER_SIZE + SNP_REPORT_SIZE;
  out.writeUInt32LE(IGVM_REQUEST_DATA_HEADER_SIZE + claims.length, igvm);
  out.writeUInt32LE(IGVM_REQUEST_DATA_VERSION, igvm + 4);
  out.writeUInt32LE(HCL_REPORT_TYPE_SNP, igvm + 8);
  out.writeUInt32LE(HCL_HASH_TYPE_SHA256, igvm + 12);
  out.writeUInt32LE(claims.length, igvm + 16);
  out.set(claims, VAR_DATA_OFFSET);
  return out;
}

export interface HclReportInput extends RuntimeClaimsInput {
  readonly roots: Pick<HardwareRoots, 'chipId' | 'tcb' | 'vcekPrivateKey'>;
  /** The SNP launch measurement (48 bytes). */
  readonly measurement: Uint8Array;
  /** The SNP report's REPORT_ID (32 bytes). */
  readonly reportId?: Uint8Array;
  /** Other SNP report fields to override (tests). */
  readonly snp?: Partial<Omit<SnpReportInput, 'reportData' | 'measurement' | 'chipId' | 'tcb'>>;
}

/** What the paravisor does on a user-data write: claims, a VCEK-signed SNP report bound to them, the frame. */
export function createHclReport(input: HclReportInput): {
  readonly report: Buffer;
  readonly runtimeClaims: Buffer;
} {
  const claims = runtimeClaims(input);
  const snp = buildSnpReport(
    {
      ...input.snp,
      reportData: reportDataForClaims(claims),
      measurement: input.measurement,
      chipId: input.roots.chipId,
      tcb: input.roots.tcb,
      ...(input.reportId !== undefined && { reportId: input.reportId }),
    },
    input.roots.vcekPrivateKey,
  );
  return { report: buildHclReport(snp, claims), runtimeClaims: claims };
}
