// The policy texts and reference-value layout a BrokerConfig renders. Written for this project: the
// attestation policy appraises the Azure-style vTPM evidence (az-snp-vtpm, az-tdx-vtpm) by the five PCRs
// the spec names; the resource policies gate release on that appraisal.

import { BROKER_DEFAULT_POLICY_CPU, POLICY_PCRS, VTPM_REFERENCE_PREFIXES } from '@broker/attestation';
import type { ProfileType } from './broker-config.js';

export { POLICY_PCRS };

/** Reference-value name prefix per vTPM platform the rendered reference values cover (the claims' TEE name). */
export const VTPM_PLATFORMS = {
  'az-snp-vtpm': VTPM_REFERENCE_PREFIXES['az-snp-vtpm'],
  'az-tdx-vtpm': VTPM_REFERENCE_PREFIXES['az-tdx-vtpm'],
} as const;

/** `snp_pcr03` … `tdx_pcr12`: the reference-value names the policy queries. */
export function referenceValueNames(): string[] {
  return Object.values(VTPM_PLATFORMS).flatMap((p) => POLICY_PCRS.map((n) => `${p}_pcr${n}`));
}

/**
 * Attestation policy `default_cpu` of a rendered deployment: broker's five-PCR policy, the KBS's
 * `broker_default_cpu` (PCR 03, 08, 09, 11 and 12 against the reference values for the vTPM TEEs,
 * trustee's rules for the others; see packages/kbs/src/attestation), stricter than the KBS's built-in
 * `default_cpu`, which is trustee's. Every PCR must be in its reference-value list; a missing list
 * matches nothing, so attestation fails closed until the reference values are applied.
 */
export const ATTESTATION_POLICY: string = BROKER_DEFAULT_POLICY_CPU;

/**
 * Resource policy (package `policy`, rule `allow`, input = the EAR token claims, data.plugin = "resource").
 * Restricted releases only to an affirming appraisal from a real TEE; Permissive to any real TEE.
 */
export function resourcePolicy(profile: ProfileType): string {
  if (profile === 'Restricted') {
    return `package policy

import rego.v1

# broker resource policy (Restricted): release a resource only when the attestation was appraised
# "affirming", i.e. every PCR matched its reference value, and the evidence came from a real TEE.

default allow := false

allow if {
	data.plugin == "resource"
	cpu := input.submods.cpu0
	cpu["ear.status"] == "affirming"
	not cpu["ear.veraison.annotated-evidence"].sample
}
`;
  }
  return `package policy

import rego.v1

# broker resource policy (Permissive): release a resource to any attester that runs in a TEE, whatever the
# appraisal (the sample attester is refused).

default allow := false

allow if {
	data.plugin == "resource"
	cpu := input.submods.cpu0
	not cpu["ear.veraison.annotated-evidence"].sample
}
`;
}

/**
 * The reference-values file (`reference-values.json`): RVPS messages, as the admin API takes them and the
 * KBS loads them from `[mounted_files] reference_values`. One `sample` message carries every name; names
 * without given values get an empty list, which the policy never matches, so attestation fails closed
 * until the reference-value tool's ConfigMap replaces this one.
 */
export function referenceValuesJson(values: Readonly<Record<string, readonly string[]>> = {}): string {
  const names = [...new Set([...referenceValueNames(), ...Object.keys(values)])].sort();
  const payload: Record<string, string[]> = {};
  for (const name of names) payload[name] = Object.hasOwn(values, name) ? [...(values[name] ?? [])] : [];
  const message = {
    version: '0.1.0',
    type: 'sample',
    payload: Buffer.from(JSON.stringify(payload), 'utf8').toString('base64'),
  };
  return `${JSON.stringify([message], null, 2)}\n`;
}

/** Intel's provisioning certification service, the collateral source trustee's samples use for TDX. */
export const INTEL_PCS_URL = 'https://api.trustedservices.intel.com/sgx/certification/v4/';

/** `sgx_default_qcnl.conf` of the TDX ConfigMap: where the DCAP library fetches collateral. */
export function tdxQcnlConfig(collateralService = INTEL_PCS_URL): string {
  return `${JSON.stringify({ collateral_service: collateralService, pccs_url: collateralService }, null, 2)}\n`;
}
