import type { Tee } from '@broker/protocol';
import {
  type Attester,
  type AttesterModule,
  AttesterNotSupported,
  type PlatformOptions,
} from './attester.js';
import { azSnpVtpmModule } from './az-snp-vtpm/index.js';
import { azTdxVtpmModule } from './az-tdx-vtpm/index.js';
import { ccaModule } from './cca/index.js';
import { nvidiaModule } from './nvidia/index.js';
import { platformContext } from './platform.js';
import { sampleModule } from './sample/index.js';
import { sampleDeviceModule } from './sample-device/index.js';
import { snpModule } from './snp/index.js';
import { tdxModule } from './tdx/index.js';
import { tpmModule } from './tpm/index.js';

/**
 * Primary TEEs in guest-components' detection order (`detect_tee_type`): the
 * first one whose probe succeeds wins; `sample` is the fallback. vTPM-only
 * `tpm` stays last so the Azure vTPM flavours, which also have a TPM, win.
 */
export const PRIMARY_DETECTION_ORDER: readonly Tee[] = Object.freeze([
  'tdx',
  'sgx',
  'az-tdx-vtpm',
  'az-snp-vtpm',
  'snp',
  'csv',
  'cca',
  'se',
  'tpm',
] as const);

/**
 * Additional devices in upstream's order (`detect_attestable_devices`). `tpm` counts only when the
 * primary TEE is not itself a TPM (see TPM_PRIMARIES).
 */
export const DEVICE_DETECTION_ORDER: readonly Tee[] = Object.freeze([
  'nvidia',
  'sampledevice',
  'hygondcu',
  'tpm',
] as const);

/**
 * Primary TEEs whose evidence is already a TPM's quote: a TPM beside them is theirs, not another
 * device. guest-components skips only `tpm` (b33a965f); the Azure vTPM flavours' TPM would be quoted
 * twice there, in builds with both attesters.
 */
export const TPM_PRIMARIES: readonly Tee[] = Object.freeze(['tpm', 'az-snp-vtpm', 'az-tdx-vtpm'] as const);

/** Attesters built into this program. A new TEE adds its folder's module here. */
export const BUILTIN_ATTESTERS: readonly AttesterModule[] = Object.freeze([
  tdxModule,
  azTdxVtpmModule,
  azSnpVtpmModule,
  snpModule,
  ccaModule,
  tpmModule,
  sampleModule,
  nvidiaModule,
  sampleDeviceModule,
]);

export interface DetectOptions extends PlatformOptions {
  /** Attester modules to consider instead of the built-in ones (tests, the mock TEE). */
  readonly modules?: readonly AttesterModule[];
}

export type ProbeOutcome = 'detected' | 'absent' | 'not-built' | 'error';

export interface ProbeResult {
  readonly tee: Tee;
  readonly outcome: ProbeOutcome;
  readonly reason: string;
}

/** The detected TEE plus every probe that ran before the decision, for logs and `/info`-style reports. */
export interface TeeDetection {
  readonly tee: Tee;
  readonly fallback: boolean;
  readonly probes: readonly ProbeResult[];
}

function moduleMap(options: DetectOptions): Map<Tee, AttesterModule> {
  return new Map((options.modules ?? BUILTIN_ATTESTERS).map((m) => [m.tee, m]));
}

async function probe(
  module: AttesterModule | undefined,
  tee: Tee,
  options: DetectOptions,
): Promise<ProbeResult> {
  if (module === undefined) return { tee, outcome: 'not-built', reason: 'no attester for it in this build' };
  try {
    const d = await module.detect(platformContext(options));
    return { tee, outcome: d.detected ? 'detected' : 'absent', reason: d.reason };
  } catch (err) {
    // Upstream's probes swallow device errors and report "not this platform"; keep going likewise.
    return { tee, outcome: 'error', reason: err instanceof Error ? err.message : String(err) };
  }
}

/** Runs the probes in upstream order and says which TEE wins and why. */
export async function explainTeeDetection(options: DetectOptions = {}): Promise<TeeDetection> {
  const modules = moduleMap(options);
  const probes: ProbeResult[] = [];
  for (const tee of PRIMARY_DETECTION_ORDER) {
    const result = await probe(modules.get(tee), tee, options);
    probes.push(result);
    if (result.outcome === 'detected') return { tee, fallback: false, probes };
  }
  return { tee: 'sample', fallback: true, probes };
}

/**
 * The primary TEE of this machine, in upstream's detection order, with
 * `sample` as the fallback (logged as a warning, as upstream does).
 */
export async function detectTee(options: DetectOptions = {}): Promise<Tee> {
  const result = await explainTeeDetection(options);
  const log = options.logger;
  if (log !== undefined) {
    for (const p of result.probes) log.debug(`TEE probe ${p.tee}: ${p.outcome} (${p.reason})`);
    if (result.fallback) {
      log.warn(
        'No TEE platform detected; using the sample attester. Evidence from it proves nothing: ' +
          'either this is not a confidential guest, or this build has no attester for its platform.',
      );
    } else {
      const chosen = result.probes[result.probes.length - 1];
      log.info(`TEE detected: ${result.tee} (${chosen?.reason ?? ''})`);
      if (result.tee === 'tpm') {
        log.warn('A TPM was detected, but it is not bound to a TEE: its evidence carries security risks.');
      }
    }
  }
  return result.tee;
}

export interface DeviceDetectOptions extends DetectOptions {
  /** The primary TEE when the caller knows it; otherwise it is detected when the TPM's turn comes. */
  readonly primary?: Tee;
}

/**
 * Additional attestable devices (GPUs, the sample device, a TPM beside a TEE that is not one)
 * present, in upstream order.
 */
export async function detectAdditionalDevices(options: DeviceDetectOptions = {}): Promise<Tee[]> {
  const modules = moduleMap(options);
  const found: Tee[] = [];
  for (const tee of DEVICE_DETECTION_ORDER) {
    if (tee === 'tpm') {
      const primary = options.primary ?? (await explainTeeDetection(options)).tee;
      if (TPM_PRIMARIES.includes(primary)) {
        options.logger?.debug(`device probe tpm: skipped (the primary TEE ${primary} is the TPM's)`);
        continue;
      }
    }
    const result = await probe(modules.get(tee), tee, options);
    const line = `device probe ${tee}: ${result.outcome} (${result.reason})`;
    // A device that is there but cannot be attested (e.g. a CC GPU without its tools) is worth a warning.
    if (result.outcome === 'error') options.logger?.warn(line);
    else options.logger?.debug(line);
    if (result.outcome === 'detected') found.push(tee);
  }
  return found;
}

/** The attester for `tee`; throws `AttesterNotSupported` when this build has none. */
export function getAttester(tee: Tee, options: DetectOptions = {}): Attester {
  const module = moduleMap(options).get(tee);
  if (module === undefined) throw new AttesterNotSupported(tee);
  return module.create(options);
}
