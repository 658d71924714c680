// The project's stricter attestation policy (`broker_default_cpu`; `brokerctl render` and the demo
// install it as `default_cpu`), written for this project. vTPM evidence is appraised by the five PCRs
// the spec names, compared with the reference values the reference-values tool writes
// (`<prefix>_pcrNN`). The other TEEs get the rules and reference-value names of trustee's default
// policy, so flows built for it (the sample TEE) keep working. The KBS's own `default_cpu` is
// trustee's text, so that it gives trustee's verdicts.

/** TEE name → reference-value prefix, as the reference-values tool names its output. */
export const VTPM_REFERENCE_PREFIXES = Object.freeze({
  'az-snp-vtpm': 'snp',
  'az-tdx-vtpm': 'tdx',
  tpm: 'tpm',
} as const);

/** The PCRs the policy compares, as two-digit numbers (`snp_pcr03` …). */
export const POLICY_PCRS = Object.freeze(['03', '08', '09', '11', '12'] as const);

/** Name of the appraisal extension that reports the PCR comparison. */
export const REFERENCE_VALUES_EXTENSION = 'broker.reference-values';
/** Its key: below -65536, the private-use range of CBOR-keyed claims. */
export const REFERENCE_VALUES_EXTENSION_KEY = -65537;

/** The project's five-PCR policy text (`broker_default_cpu`). */
export const BROKER_DEFAULT_POLICY_CPU: string = `package policy

import rego.v1

# broker default attestation policy (default_cpu).
#
# vTPM evidence (az-snp-vtpm, az-tdx-vtpm, tpm) is appraised by five PCRs of its quote:
#   03 firmware, 09 initrd and boot options, 11 unified kernel image (its command line carries the
#   dm-verity root hash), 12 kernel command line and credentials, 08 the initdata
#   (sha256(32 zero bytes || sha256(initdata TOML))).
# Each is compared with the reference value <prefix>_pcrNN, prefix snp, tdx or tpm: a list of hex
# strings (one string counts as a list of one), case-insensitive. The appraisal is affirming only when
# all five match; the "${REFERENCE_VALUES_EXTENSION}" extension names the PCRs that did not and the
# reference values that are not registered.
#
# sample, snp, tdx and se evidence is appraised with the rules and reference-value names of trustee's
# default policy (kept by the KBS as trustee_default_cpu).

# AR4SI values used below: executables 33 (not recognized) / 3 (approved boot); hardware 97 (not
# recognized) / 2 (genuine); configuration 36 (unavailable) / 2 (approved) / 3 (no known weakness).
default executables := 33

default hardware := 97

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

##### vTPM: PCR 03, 08, 09, 11, 12

vtpm_prefixes := {"az-snp-vtpm": "snp", "az-tdx-vtpm": "tdx", "tpm": "tpm"}

compared_pcrs := ["03", "08", "09", "11", "12"]

boot_pcrs := ["03", "09", "11", "12"]

# The vTPM TEE whose claims are appraised (each appraisal holds one TEE's claims).
vtpm_tee := tee if {
	some tee, _ in vtpm_prefixes
	input[tee]
}

# Its PCR claims (pcr00 ... pcr23, hex): flat for tpm, under "tpm" for the Azure vTPMs.
vtpm_pcrs := input.tpm if vtpm_tee == "tpm"

vtpm_pcrs := object.get(input[vtpm_tee], "tpm", {}) if {
	vtpm_tee
	vtpm_tee != "tpm"
}

reference_value_name(n) := concat("", [vtpm_prefixes[vtpm_tee], "_pcr", n])

# The values a reference value accepts, lower-cased; undefined when it is not registered.
accepted_values(name) := {lower(v) | some v in query_reference_value(name); is_string(v)} if {
	is_array(query_reference_value(name))
}

accepted_values(name) := {lower(query_reference_value(name))} if {
	is_string(query_reference_value(name))
}

has_reference_value(n) if count(accepted_values(reference_value_name(n))) > 0

pcr_value(n) := lower(v) if {
	v := vtpm_pcrs[concat("", ["pcr", n])]
	is_string(v)
}

pcr_matches(n) if pcr_value(n) in accepted_values(reference_value_name(n))

# 3: the boot chain (firmware, initrd, kernel image, command line) is the approved one.
executables := 3 if {
	vtpm_tee
	every n in boot_pcrs {
		pcr_matches(n)
	}
}

# 2: the configuration is the approved one: the initdata measured into PCR 08.
configuration := 2 if {
	vtpm_tee
	pcr_matches("08")
}

# 2: genuine hardware. The az-snp-vtpm verifier tied the quote's AK to an SNP report signed by a VCEK
# that chains to a trusted AMD root; the az-tdx-vtpm verifier tied it to a TD quote from a trusted
# PCK chain, whose TCB must also be up to date. A plain TPM proves nothing about its AK, so the AK
# must be one of the trusted_aks reference values.
hardware := 2 if input["az-snp-vtpm"]

hardware := 2 if input["az-tdx-vtpm"].tcb_status == "UpToDate"

hardware := 2 if {
	input.tpm
	trusted_aks := query_reference_value("trusted_aks")
	is_array(trusted_aks)
	input.tpm.ak_public in trusted_aks
}

# PCRs whose reference value is registered but does not hold the evidence's value (null: the quote
# does not cover that PCR), and reference values that are not registered.
mismatched_pcrs := {reference_value_name(n): object.get(vtpm_pcrs, concat("", ["pcr", n]), null) |
	some n in compared_pcrs
	has_reference_value(n)
	not pcr_matches(n)
}

missing_reference_values := [reference_value_name(n) |
	some n in compared_pcrs
	not has_reference_value(n)
]

default reference_values_report := null

reference_values_report := {
	"tee": vtpm_tee,
	"compared": [reference_value_name(n) | some n in compared_pcrs],
	"mismatched": mismatched_pcrs,
	"missing": missing_reference_values,
} if vtpm_tee

##### sample (software TEE, tests and demos)

executables := 3 if {
	input.sample
	input.sample.launch_digest in query_reference_value("launch_digest")
}

hardware := 2 if {
	input.sample
	input.sample.svn in query_reference_value("svn")
	input.sample.platform_version.major == query_reference_value("major_version")
	input.sample.platform_version.minor >= query_reference_value("minimum_minor_version")
}

configuration := 2 if {
	input.sample
	input.sample.debug == false
}

##### snp (bare SEV-SNP)

executables := 3 if {
	input.snp
	input.snp.measurement in query_reference_value("snp_launch_measurement")
}

hardware := 2 if {
	input.snp
	input.snp.reported_tcb_bootloader in query_reference_value("snp_bootloader")
	input.snp.reported_tcb_microcode in query_reference_value("snp_microcode")
	input.snp.reported_tcb_snp in query_reference_value("snp_snp_svn")
	input.snp.reported_tcb_tee in query_reference_value("snp_tee_svn")
}

configuration := 2 if {
	input.snp
	snp_no_debug_no_migration
	input.snp.platform_smt_enabled == query_reference_value("snp_smt_enabled")
	input.snp.platform_tsme_enabled == query_reference_value("snp_tsme_enabled")
	input.snp.policy_abi_major == query_reference_value("snp_guest_abi_major")
	input.snp.policy_abi_minor == query_reference_value("snp_guest_abi_minor")
	input.snp.policy_single_socket == query_reference_value("snp_single_socket")
	input.snp.policy_smt_allowed == query_reference_value("snp_smt_allowed")
} else := 3 if {
	input.snp
	snp_no_debug_no_migration
}

snp_no_debug_no_migration if {
	input.snp.policy_debug_allowed == false
	input.snp.policy_migrate_ma == false
}

##### tdx (bare TDX)

executables := 3 if {
	input.tdx
	tdx_rtmrs_match
	tdx_kernel_event_matches
	tdx_kernel_params_event_matches
} else := 4 if {
	# A GRUB boot (as GKE's) has no such events; the RTMRs still cover kernel, initrd and cmdline.
	input.tdx
	tdx_rtmrs_match
}

tdx_rtmrs_match if {
	input.tdx.quote.body.rtmr_1 in query_reference_value("rtmr_1")
	input.tdx.quote.body.rtmr_2 in query_reference_value("rtmr_2")
}

tdx_kernel_event_matches if {
	some event in input.tdx.uefi_event_logs
	event.type_name == "EV_EFI_BOOT_SERVICES_APPLICATION"
	"File(kernel)" in event.details.device_paths
	some d in event.digests
	d.digest == query_reference_value("tdvfkernel")
}

tdx_kernel_params_event_matches if {
	some event in input.tdx.uefi_event_logs
	event.type_name == "EV_EVENT_TAG"
	event.details.string == "LOADED_IMAGE::LoadOptions"
	some d in event.digests
	d.digest == query_reference_value("tdvfkernelparams")
}

hardware := 2 if {
	input.tdx
	input.tdx.quote.header.tee_type == "81000000"
	input.tdx.quote.header.vendor_id == "939a7233f79c4ca9940a0db3957f0607"
	input.tdx.quote.body.mr_td in query_reference_value("mr_td")
	input.tdx.tcb_status == "UpToDate"
	input.tdx.collateral_expiration_status == "0"
}

configuration := 2 if {
	input.tdx
	input.tdx.td_attributes.debug == false
	input.tdx.quote.body.xfam in query_reference_value("xfam")
}

##### se (IBM Secure Execution): the verifier's checks are the whole appraisal

executables := 3 if input.se

hardware := 2 if input.se

configuration := 2 if input.se

##### Extensions

extensions := [
	{"name": "ear.trustee.identifiers", "key": -18, "value": {"validated": validated_identifiers}},
	{"name": "${REFERENCE_VALUES_EXTENSION}", "key": ${REFERENCE_VALUES_EXTENSION_KEY}, "value": reference_values_report},
]

# Workload identifiers from the agent policy in the initdata, which the evidence binds.
agent_policy_containers := [c | some c in input.init_data_claims.agent_policy_claims.containers]

container_images := [image |
	some c in agent_policy_containers
	image := c.OCI.Annotations["io.kubernetes.cri.image-name"]
]

container_uids := [uid |
	some c in agent_policy_containers
	uid := c.OCI.Process.User.UID
]

images_identifier := {"container_images": container_images} if {
	count(container_images) > 0
} else := {}

uids_identifier := {"container_uids": container_uids} if {
	count(container_uids) > 0
} else := {}

validated_identifiers := object.union(images_identifier, uids_identifier)
`;
