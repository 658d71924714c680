// Reference values for one TEE: the pod-VM image's PCRs plus PCR8 from the initdata, named as the
// attestation policies query them (`snp_pcr11` is the name trustee's default policy uses for
// az-snp-vtpm; our default policy compares snp_pcr03/08/09/11/12 the same way).
import {
  type HashAlgorithm,
  InitDataError,
  initDataDigest,
  initDataReportField,
  MAX_INITDATA_BYTES,
  parseInitData,
  pcr8FromInitDataDigest,
} from '@broker/protocol';
import {
  ImageTagMismatchError,
  InitDataInputError,
  MissingPcrError,
  pcrLabel,
  UsageError,
} from './errors.js';
import { INITDATA_PCR, imageTagMatches, type PodVmMeasurements } from './manifest.js';

/** TEEs whose evidence carries the vTPM PCRs a measurement manifest describes. */
export const TEE_PREFIXES = { 'az-snp-vtpm': 'snp', 'az-tdx-vtpm': 'tdx', tpm: 'tpm' } as const;
export type ReferenceTee = keyof typeof TEE_PREFIXES;

/**
 * Bare-metal TEEs: kata binds the initdata digest into a report field (kata-types' `adjust_digest`:
 * cut or zero-padded at the end), and the reference values name that field, and the launch
 * measurement under the name trustee's default policy queries.
 */
export const BARE_METAL_TEES = {
  snp: { field: 'snp_host_data', bytes: 32, launch: 'snp_launch_measurement', hardware: 'HOSTDATA' },
  tdx: { field: 'tdx_mr_config_id', bytes: 48, launch: 'mr_td', hardware: 'MRCONFIGID' },
} as const;
export type BareMetalTee = keyof typeof BARE_METAL_TEES;

export function isBareMetalTee(s: string): s is BareMetalTee {
  return Object.hasOwn(BARE_METAL_TEES, s);
}

/** Platforms and the TEEs their pod VMs attest with. */
export const PLATFORM_TEES: Readonly<Record<string, readonly (ReferenceTee | BareMetalTee)[]>> =
  Object.freeze({
    // Azure confidential VMs (Standard_DC*as_v5 SNP, Standard_DC*es_v5 TDX) attest through the paravisor's
    // vTPM; the mock TEE device emulates the SNP one.
    azure: ['az-snp-vtpm', 'az-tdx-vtpm'],
    // A QEMU/libvirt pod VM with a (software) TPM and no hardware report.
    libvirt: ['tpm'],
    // kata on an SEV-SNP or TDX host: the guest's own hardware report.
    baremetal: ['snp', 'tdx'],
  });

/** PCRs that the image's boot must define: the attestation policy compares them with PCR 08. */
export const REQUIRED_IMAGE_PCRS: readonly number[] = Object.freeze([3, 9, 11, 12]);

export function isReferenceTee(s: string): s is ReferenceTee {
  return Object.hasOwn(TEE_PREFIXES, s);
}

/** Checks the --platform/--tee pair; bare-metal snp/tdx on another platform get the platform to use. */
export function checkPlatformTee(platform: string, tee: string): ReferenceTee | BareMetalTee {
  const tees = Object.hasOwn(PLATFORM_TEES, platform) ? PLATFORM_TEES[platform] : undefined;
  if (tees === undefined) {
    throw new UsageError(
      `unknown --platform ${JSON.stringify(platform)}; known: ${Object.keys(PLATFORM_TEES).join(', ')}`,
    );
  }
  if (isBareMetalTee(tee) && !tees.includes(tee)) {
    throw new UsageError(
      `--tee ${tee} is a bare-metal ${tee.toUpperCase()} guest (its own hardware report, the initdata in ${BARE_METAL_TEES[tee].hardware}): use --platform baremetal; on ${platform} use ${tees.join(' or ')}`,
    );
  }
  if (!(isReferenceTee(tee) || isBareMetalTee(tee)) || !tees.includes(tee)) {
    throw new UsageError(
      `--tee ${JSON.stringify(tee)} is not a TEE of platform ${platform}; use ${tees.join(' or ')}`,
    );
  }
  return tee;
}

export interface BareMetalInitData {
  readonly algorithm: HashAlgorithm;
  /** Digest of the exact file bytes, hex. */
  readonly digest: string;
  /** The report field kata sets from it (HOSTDATA, MRCONFIGID), hex. */
  readonly field: string;
}

/** The report field kata binds `bytes` (an initdata file) into on a bare-metal TEE. */
export function bareMetalInitData(bytes: Uint8Array, tee: BareMetalTee): BareMetalInitData {
  if (bytes.byteLength > MAX_INITDATA_BYTES) {
    throw new InitDataInputError(`initdata is larger than ${MAX_INITDATA_BYTES} bytes`);
  }
  let algorithm: HashAlgorithm;
  try {
    algorithm = parseInitData(bytes).algorithm;
  } catch (e) {
    throw new InitDataInputError((e as Error).message, { cause: e });
  }
  const digest = initDataDigest(bytes, algorithm);
  return {
    algorithm,
    digest: digest.toString('hex'),
    field: initDataReportField(digest, BARE_METAL_TEES[tee].bytes).toString('hex'),
  };
}

/**
 * The RVPS entries of a bare-metal guest: its initdata field (`snp_host_data`, `tdx_mr_config_id`),
 * and, when given, its launch measurement (`snp_launch_measurement`, `mr_td`: 48 bytes in hex).
 */
export function bareMetalReferenceValues(
  tee: BareMetalTee,
  initData: BareMetalInitData,
  launchMeasurement?: string,
): ReferenceValues {
  const t = BARE_METAL_TEES[tee];
  const out: Record<string, string[]> = {};
  if (launchMeasurement !== undefined) {
    const m = launchMeasurement.toLowerCase().replace(/^0x/, '');
    if (!/^[0-9a-f]{96}$/.test(m)) {
      throw new UsageError(
        `--launch-measurement must be 48 bytes in hex (${tee === 'snp' ? 'the SNP MEASUREMENT' : 'the TD MRTD'})`,
      );
    }
    out[t.launch] = [m];
  }
  out[t.field] = [initData.field];
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** `snp_pcr03` for (az-snp-vtpm, 3). */
export function referenceValueName(tee: ReferenceTee, pcr: number): string {
  return `${TEE_PREFIXES[tee]}_pcr${pcrLabel(pcr)}`;
}

export interface InitDataPcr8 {
  readonly algorithm: HashAlgorithm;
  /** Digest of the exact file bytes, hex. */
  readonly digest: string;
  /** sha256(32 zero bytes ‖ digest[0..32]), hex. */
  readonly pcr8: string;
}

/**
 * PCR8 for an initdata file. Only sha256 initdata is defined for vTPM binding; with `truncate`, a
 * longer digest gives what a peer-pod guest extends (its first 32 bytes).
 */
export function initDataPcr8(bytes: Uint8Array, options: { truncate?: boolean } = {}): InitDataPcr8 {
  if (bytes.byteLength > MAX_INITDATA_BYTES) {
    throw new InitDataInputError(`initdata is larger than ${MAX_INITDATA_BYTES} bytes`);
  }
  let algorithm: HashAlgorithm;
  try {
    algorithm = parseInitData(bytes).algorithm;
  } catch (e) {
    throw new InitDataInputError((e as Error).message, { cause: e });
  }
  if (algorithm !== 'sha256' && options.truncate !== true) {
    throw new InitDataInputError(
      `initdata algorithm ${algorithm}: vTPM platforms bind initdata through PCR8, which is defined for sha256 (--truncate gives what a peer-pod guest extends: the first 32 bytes of the digest)`,
    );
  }
  const digest = initDataDigest(bytes, algorithm);
  try {
    const pcr8 = pcr8FromInitDataDigest(digest, { truncate: true });
    return { algorithm, digest: digest.toString('hex'), pcr8: pcr8.toString('hex') };
  } catch (e) {
    if (e instanceof InitDataError) throw new InitDataInputError(e.message, { cause: e });
    throw e;
  }
}

export interface ReferenceValueInput {
  readonly tee: ReferenceTee;
  readonly measurements: PodVmMeasurements;
  /** The image tag the values are for; the manifest must name it. */
  readonly imageTag: string;
  /**
   * Set when the manifest came from a source that already proves the tag (an artifact pulled by that
   * tag), so a manifest without its own `image_tag` is accepted.
   */
  readonly tagFromSource?: boolean;
  readonly initData: InitDataPcr8;
}

/** Name → list of lowercase hex values (RVPS sample form: policies match with `in`). */
export type ReferenceValues = Readonly<Record<string, readonly string[]>>;

/**
 * The reference values: every PCR the manifest gives, plus PCR 08, under the TEE's names. Refuses a
 * manifest for another image tag and one without PCR 03, 09, 11 or 12.
 */
export function computeReferenceValues(input: ReferenceValueInput): ReferenceValues {
  const { measurements: m, imageTag } = input;
  if (m.imageTag === undefined) {
    if (input.tagFromSource !== true) {
      throw new ImageTagMismatchError(
        `the measurement manifest names no image tag, so it cannot be shown to describe ${imageTag}; add "image_tag" to it or pull it as an artifact by that tag (--image)`,
      );
    }
  } else if (!imageTagMatches(m.imageTag, imageTag)) {
    throw new ImageTagMismatchError(
      `the measurement manifest describes image ${JSON.stringify(m.imageTag)}, not --image-tag ${JSON.stringify(imageTag)}`,
    );
  }
  const missing = REQUIRED_IMAGE_PCRS.filter((p) => !m.pcrs.has(p));
  if (missing.length > 0) throw new MissingPcrError(missing);
  const pcrs = new Map(m.pcrs);
  pcrs.set(INITDATA_PCR, input.initData.pcr8);
  const out: Record<string, string[]> = {};
  for (const [pcr, value] of [...pcrs].sort((a, b) => a[0] - b[0])) {
    out[referenceValueName(input.tee, pcr)] = [value];
  }
  return out;
}
