import type { Tee } from '@broker/protocol';
import { AzSnpVtpmVerifier } from './az-snp-vtpm/index.js';
import { AzTdxVtpmVerifier } from './az-tdx-vtpm/index.js';
import { CcaVerifier } from './cca/index.js';
import { VerifierNotSupported } from './errors.js';
import { NvidiaVerifier } from './nvidia/index.js';
import { SampleVerifier } from './sample/index.js';
import { SampleDeviceVerifier } from './sample-device/index.js';
import { SnpVerifier } from './snp/index.js';
import { TdxVerifier } from './tdx/index.js';
import { TpmVerifier } from './tpm/index.js';
import type { Verifier } from './verifier.js';

// One entry per TEE folder. Verifiers are stateless, so one instance serves every request.
const VERIFIERS: ReadonlyMap<string, Verifier> = new Map<string, Verifier>([
  ['sample', new SampleVerifier()],
  ['sampledevice', new SampleDeviceVerifier()],
  ['az-snp-vtpm', new AzSnpVtpmVerifier()],
  ['snp', new SnpVerifier()],
  ['tpm', new TpmVerifier()],
  ['tdx', new TdxVerifier()],
  ['az-tdx-vtpm', new AzTdxVtpmVerifier()],
  ['nvidia', new NvidiaVerifier()],
  ['cca', new CcaVerifier()],
]);

/** The verifier for `tee`; throws VerifierNotSupported for a TEE this build cannot verify. */
export function getVerifier(tee: Tee): Verifier {
  // Looked up by string so that an unchecked TEE name from the wire fails cleanly.
  const v = VERIFIERS.get(tee as string);
  if (v === undefined) throw new VerifierNotSupported(String(tee));
  return v;
}

/** TEEs with a verifier in this build. */
export function supportedTees(): Tee[] {
  return [...VERIFIERS.keys()] as Tee[];
}
