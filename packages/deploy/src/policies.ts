// The policy texts and reference-value layout a BrokerConfig renders. Written for this project: the
// attestation policy appraises the Azure-style vTPM evidence (az-snp-vtpm, az-tdx-vtpm) by the five PCRs
// the spec names; the resource policies gate release on that appraisal.
import type { ProfileType } from './broker-config.js';

/** PCRs the attestation policy compares, as the spec's "Reference values" section lists them. */
export const POLICY_PCRS = ['03', '08', '09', '11', '12'] as const;
/** Reference-value name prefix per vTPM platform (the claims' TEE name). */
export const VTPM_PLATFORMS = { 'az-snp-vtpm': 'snp', 'az-tdx-vtpm': 'tdx' } as const;

/** `snp_pcr03` … `tdx_pcr12`: the reference-value names the policy queries. */
export function referenceValueNames(): string[] {
  return Object.values(VTPM_PLATFORMS).flatMap((p) => POLICY_PCRS.map((n) => `${p}_pcr${n}`));
}

/**
 * Attestation policy `default_cpu` (Rego v1, package `policy`, trust claims as the EAR token wants them).
 * Every PCR must be in its reference-value list; a missing list matches nothing, so attestation fails
 * closed until the reference values are applied.
 */
export const ATTESTATION_POLICY = `package policy

import rego.v1

# broker default attestation policy.
#
# Appraises the vTPM evidence of Azure-style confidential VMs (az-snp-vtpm, az-tdx-vtpm). The evidence is
# "affirming" only when PCR 03, 08, 09, 11 and 12 all equal one of their reference values:
#   PCR03 firmware, PCR09 initrd and load options, PCR11 the unified kernel image (its command line
#   carries the dm-verity root hash, so this also covers the root file system), PCR12 kernel command-line
#   overrides and credentials, PCR08 the initdata (sha256(32 zero bytes || sha256(initdata TOML))).
# Reference values are named <platform>_pcrNN with platform snp or tdx, each a list of lowercase hex
# strings (RVPS sample format). Any other TEE keeps the defaults below and is contraindicated.

# Runtime executables are not recognized until the boot chain matches.
default executables := 33

# Hardware or firmware not recognized.
default hardware := 97

# Security-relevant configuration unavailable.
default configuration := 36

default file_system := 0

default instance_identity := 0

default runtime_opaque := 0

default storage_opaque := 0

default sourced_data := 0

trust_claims := {
	"executables": executables,
	"hardware": hardware,
	"configuration": configuration,
	"file-system": file_system,
	"instance-identity": instance_identity,
	"runtime-opaque": runtime_opaque,
	"storage-opaque": storage_opaque,
	"sourced-data": sourced_data,
}

vtpm_platforms := {"az-snp-vtpm": "snp", "az-tdx-vtpm": "tdx"}

# The claims of the vTPM platform in the evidence, with its reference-value prefix.
platform := [claims, prefix] if {
	some tee, prefix in vtpm_platforms
	claims := input[tee]
}

# PCR n of the evidence is one of the reference values <prefix>_pcr<n>.
pcr_matches(n) if {
	[claims, prefix] := platform
	expected := query_reference_value(sprintf("%s_pcr%s", [prefix, n]))
	is_array(expected)
	claims.tpm[sprintf("pcr%s", [n])] in expected
}

# 3: only approved executables were loaded during boot.
executables := 3 if {
	pcr_matches("03")
	pcr_matches("09")
	pcr_matches("11")
	pcr_matches("12")
}

# 2: the verifier checked the vTPM quote against the hardware report and its vendor certificate chain.
hardware := 2 if {
	platform
}

# 2: the configuration is known and approved: the initdata measured into PCR08.
configuration := 2 if {
	pcr_matches("08")
}
`;

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
