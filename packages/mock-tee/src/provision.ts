// What Azure's host and paravisor set up in a CVM's vTPM before the guest runs: an endorsement key,
// the attestation key at 0x81000003, the HCL report and user-data NV indices; then the guest's
// firmware and boot loader measure the boot into the PCRs, which the mock replays from a manifest.
import type { KeyObject } from 'node:crypto';
import {
  attestationKeyTemplate,
  type NvPublic,
  publicKeyFromTpmt,
  TPM_ALG,
  TPM_RC,
  TPM_RH,
  TPMA_NV,
  TPMA_OBJECT,
  type Tpm,
  TpmError,
  type TpmtPublic,
  taggedDigest,
} from '@broker/tpm';
import { MockTeeError } from './errors.js';
import { AK_PERSISTENT_HANDLE, HCL_REPORT_NV_INDEX, HCL_USER_DATA_NV_INDEX, USER_DATA_SIZE } from './hcl.js';
import type { MeasurementManifest } from './manifest.js';

/** Where the endorsement key is persisted (the TCG's EK handle). */
export const EK_PERSISTENT_HANDLE = 0x81010001;

/** Azure's AK: a restricted RSA-2048 signing key, RSASSA with SHA-256, exempt from dictionary-attack lockout. */
export const AK_TEMPLATE: TpmtPublic = (() => {
  const t = attestationKeyTemplate('rsa2048', TPM_ALG.SHA256);
  return { ...t, objectAttributes: t.objectAttributes | TPMA_OBJECT.noDA };
})();

/** The TCG EK Credential Profile's default RSA-2048 template (L-1). */
export const EK_TEMPLATE: TpmtPublic = {
  type: TPM_ALG.RSA,
  nameAlg: TPM_ALG.SHA256,
  objectAttributes:
    TPMA_OBJECT.fixedTPM |
    TPMA_OBJECT.fixedParent |
    TPMA_OBJECT.sensitiveDataOrigin |
    TPMA_OBJECT.adminWithPolicy |
    TPMA_OBJECT.restricted |
    TPMA_OBJECT.decrypt,
  // PolicySecret(TPM_RH_ENDORSEMENT).
  authPolicy: Buffer.from('837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa', 'hex'),
  parameters: {
    symmetric: { algorithm: TPM_ALG.AES, keyBits: 128, mode: TPM_ALG.CFB },
    scheme: { scheme: TPM_ALG.NULL },
    keyBits: 2048,
    exponent: 0,
  },
  unique: new Uint8Array(256),
};

/**
 * The HCL report index as guests see it: written by the platform (the paravisor), readable with
 * owner or index authorization. swtpm cannot hold an index of the report's 2600 bytes (its limit
 * is 2048), so the index in swtpm is a one-byte stand-in and the interposer serves the contents.
 */
export const HCL_REPORT_NV_ATTRIBUTES =
  TPMA_NV.PPWRITE |
  TPMA_NV.PPREAD |
  TPMA_NV.OWNERREAD |
  TPMA_NV.AUTHREAD |
  TPMA_NV.NO_DA |
  TPMA_NV.PLATFORMCREATE;

/** The user-data index: owner-defined, as az-snp-vtpm defines it when missing, plus index auth. */
export const USER_DATA_NV_ATTRIBUTES =
  TPMA_NV.OWNERWRITE | TPMA_NV.OWNERREAD | TPMA_NV.AUTHWRITE | TPMA_NV.AUTHREAD | TPMA_NV.NO_DA;

const STAND_IN_SIZE = 1;

export function hclReportStandIn(): NvPublic {
  return {
    nvIndex: HCL_REPORT_NV_INDEX,
    nameAlg: TPM_ALG.SHA256,
    attributes: HCL_REPORT_NV_ATTRIBUTES,
    authPolicy: new Uint8Array(),
    dataSize: STAND_IN_SIZE,
  };
}

function userDataPublic(): NvPublic {
  return {
    nvIndex: HCL_USER_DATA_NV_INDEX,
    nameAlg: TPM_ALG.SHA256,
    attributes: USER_DATA_NV_ATTRIBUTES,
    authPolicy: new Uint8Array(),
    dataSize: USER_DATA_SIZE,
  };
}

function sameTemplate(have: TpmtPublic, want: TpmtPublic): boolean {
  if (have.type !== TPM_ALG.RSA || want.type !== TPM_ALG.RSA) return false;
  return (
    have.nameAlg === want.nameAlg &&
    have.objectAttributes === want.objectAttributes &&
    have.parameters.keyBits === want.parameters.keyBits &&
    have.parameters.scheme.scheme === want.parameters.scheme.scheme &&
    have.parameters.scheme.hashAlg === want.parameters.scheme.hashAlg &&
    Buffer.compare(have.authPolicy, want.authPolicy) === 0
  );
}

/** A primary key of `template` persisted at `handle`: the existing one when it matches, else a new one. */
async function persistentPrimary(
  tpm: Tpm,
  hierarchy: number,
  template: TpmtPublic,
  handle: number,
): Promise<TpmtPublic> {
  const existing = await tpm.readPublic(handle).catch((err: unknown) => {
    if (err instanceof TpmError && err.code === TPM_RC.HANDLE) return undefined;
    throw err;
  });
  if (existing !== undefined) {
    if (sameTemplate(existing.public, template)) return existing.public;
    await tpm.evictControl(TPM_RH.OWNER, handle, handle);
  }
  const created = await tpm.createPrimary(hierarchy, template);
  try {
    await tpm.evictControl(TPM_RH.OWNER, created.handle, handle);
  } finally {
    await tpm.flushContext(created.handle);
  }
  return created.public;
}

async function defineIndex(tpm: Tpm, authHandle: number, want: NvPublic): Promise<void> {
  const have = await tpm.nvReadPublicIfDefined(want.nvIndex);
  if (have !== undefined) {
    const p = have.nvPublic;
    // WRITTEN is state, not definition.
    if (p.dataSize === want.dataSize && (p.attributes & ~TPMA_NV.WRITTEN) === want.attributes) return;
    await tpm.nvUndefineSpace(authHandle, want.nvIndex);
  }
  await tpm.nvDefineSpace(authHandle, want);
}

export interface ProvisionedKeys {
  readonly akPublic: KeyObject;
  readonly ekPublic: KeyObject;
  readonly akTpmPublic: TpmtPublic;
}

/**
 * Provisions the vTPM: EK at 0x81010001, AK at 0x81000003 (kept when already there with Azure's
 * template), the HCL report index stand-in and the 64-byte user-data index, zeroed as at boot.
 */
export async function provisionVtpm(tpm: Tpm): Promise<ProvisionedKeys> {
  try {
    const ek = await persistentPrimary(tpm, TPM_RH.ENDORSEMENT, EK_TEMPLATE, EK_PERSISTENT_HANDLE);
    const ak = await persistentPrimary(tpm, TPM_RH.OWNER, AK_TEMPLATE, AK_PERSISTENT_HANDLE);
    await defineIndex(tpm, TPM_RH.PLATFORM, hclReportStandIn());
    await tpm.nvWrite(TPM_RH.PLATFORM, HCL_REPORT_NV_INDEX, new Uint8Array(STAND_IN_SIZE));
    await defineIndex(tpm, TPM_RH.OWNER, userDataPublic());
    await tpm.nvWrite(TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX, new Uint8Array(USER_DATA_SIZE));
    return { akPublic: publicKeyFromTpmt(ak), ekPublic: publicKeyFromTpmt(ek), akTpmPublic: ak };
  } catch (err) {
    throw new MockTeeError('PROVISIONING_FAILED', `vTPM provisioning failed: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Replays the manifest's measurements into the SHA-256 bank, PCR by PCR, in order. */
export async function simulateBoot(tpm: Tpm, manifest: MeasurementManifest): Promise<void> {
  for (const [pcr, digests] of [...manifest.pcrs].sort((a, b) => a[0] - b[0])) {
    for (const d of digests) await tpm.pcrExtend(pcr, [taggedDigest(TPM_ALG.SHA256, d)]);
  }
}
