#!/usr/bin/env bash
# Boot test of the measured guest image (make guest-image-test, run by .ci/run after the tests; it needs
# the image from build.sh, and KVM or the patience of TCG). It boots the image's UKI under OVMF with
# swtpm as the vTPM, the root behind dm-verity, and a cidata disk carrying the pod's initdata, and checks
# that the path-activated chain comes up and fetches default/attestation-status/status from a KBS on the
# host, through the guest's api-server-rest.
#
#   guest-image/boot-test.sh [--image DIR] [--bin DIR] [--timeout SECONDS] [--accel kvm|tcg] [--keep]
#                            [--tamper verity|cmdline]
#
# It boots the shipped disk (podvm.raw) itself, unchanged (QEMU's snapshot mode keeps every write of the
# guest out of the file), and takes the reference values from the build's manifest only
# (reference-values --measurements podvm-measurements.json), before the boot. Nothing is added to the
# root: the chain's own client asks for the resource (the initdata's cdh.toml names it as a credential,
# which the data hub fetches at start), and the PCRs the guest booted with are read from outside, from
# the KBS's verdict log (GET /kbs/v0/admin/verdicts with an admin JWT): the claims the attestation
# service derived from the guest's verified TPM quote.
#
# Every boot has a second virtio disk (serial podvm-data: a blank raw file on the host) and a key made
# for the VM by the KBS's provisioner plugin (an admin-authenticated POST), named in the initdata as
# "trustee.kbs.resource"; the image's encrypted-disk step asks the data hub to open that disk with it.
#
# Without --tamper: the KBS releases the resource, and the booted PCRs equal the manifest's (printed side
# by side). The guest formats the data disk (LUKS2, ext4) with the key it fetched after attestation and
# records its boot on it; a second boot of the same disk opens it and reads the first boot's record back
# (both on the serial console). The host then checks with cryptsetup luksDump that the disk is LUKS2 and
# that the record's bytes appear nowhere in the disk image in clear. The tampered boots get no key: the
# data disk stays all zeros and the KBS never serves the key.
# The good run also drives one pod through the guest's agent policy gate (TCP 15150, forwarded by QEMU
# to a host port) once boot 1's disk is open, with the Go shim of @broker/sandbox-agent/testing
# (guest-image/pod.ts): SetGuestDateTime to the host's time plus a day, CopyFile of a static program,
# CreateContainer of it on a bind storage, StartContainer, its output (its line and the guest's clock)
# read with ReadStdout and its exit status with WaitProcess; the sandbox agent's log lines on the serial
# console show the clock set, the container created, its first output and its exit. Boot 2 is a new
# QEMU whose clock starts from the host's again.
# The tampers work on a copy of the shipped disk. --tamper verity flips one byte of
# /usr/local/bin/broker-guest inside the disk's root partition: dm-verity fails the read, the chain
# never starts, nothing reaches the KBS. --tamper cmdline takes the UKI out of the disk's ESP and appends
# a word to its command line: PCR 11 (and 4, 9) differ from the manifest and the KBS answers PolicyDeny.
# Needs: qemu-system-x86, ovmf, swtpm, tpm2-tools, genisoimage, e2fsprogs, openssl, mtools, binutils,
# fdisk, curl, cryptsetup-bin, the workspace's Node and esbuild, and dist/bin (kbs, reference-values) from
# make build; the good run also Go, protoc, Debian's Go ttrpc and gogo sources and musl-gcc (or gcc), as
# the sandbox agent's interop test;
# $REFERENCE_VALUES overrides the reference-values executable.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
IMAGE=$REPO/dist/guest-image
BIN=$REPO/dist/bin
TIMEOUT=900
KEEP=0
ACCEL=
TAMPER=
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
while [ $# -gt 0 ]; do
  case "$1" in
    --image) IMAGE=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --tamper)
      TAMPER=$2
      case "$TAMPER" in verity|cmdline) ;; *) echo "boot-test.sh: --tamper verity|cmdline" >&2; exit 2 ;; esac
      shift 2 ;;
    *) echo "boot-test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "boot-test: FAILED: $*" >&2; exit 1; }
step() { printf 'boot-test: %s\n' "$*"; }
for p in qemu-system-x86_64 swtpm tpm2_createprimary tpm2_evictcontrol tpm2_readpublic genisoimage debugfs openssl mcopy objcopy sfdisk curl cryptsetup; do
  command -v "$p" >/dev/null ||
    die "$p not found: install the Debian packages qemu-system-x86 swtpm tpm2-tools genisoimage e2fsprogs openssl mtools binutils fdisk curl cryptsetup-bin"
done
for f in "$OVMF_CODE" "$OVMF_VARS"; do [ -f "$f" ] || die "$f is missing: install the Debian package ovmf"; done
for f in vmlinuz podvm.ext4 podvm.raw podvm-measurements.json; do
  [ -f "$IMAGE/$f" ] || die "$IMAGE/$f is missing: run make guest-image"
done
REFERENCE_VALUES=${REFERENCE_VALUES:-$BIN/reference-values}
[ -x "$BIN/kbs" ] || die "$BIN/kbs is missing: run make build"
[ -x "$REFERENCE_VALUES" ] || die "$REFERENCE_VALUES is missing: run make build (or set REFERENCE_VALUES)"
NODE=$REPO/node_modules/.bin/node
[ -x "$NODE" ] || die "$NODE is missing: run make deps"
ESBUILD=$REPO/node_modules/.bin/esbuild
[ -n "$TAMPER" ] || [ -x "$ESBUILD" ] || die "$ESBUILD is missing: run make deps"

# KVM when it works: a nested or restricted KVM can accept a guest and then never run it, so a kernel
# that does not print within 30 s means falling back to emulation (TCG), which is slower but works.
if [ -z "$ACCEL" ]; then
  ACCEL=tcg
  if [ -w /dev/kvm ]; then
    probe=$(mktemp)
    timeout 30 qemu-system-x86_64 -machine q35,accel=kvm -m 512 -display none -monitor none -no-reboot \
      -serial "file:$probe" -kernel "$IMAGE/vmlinuz" -append "console=ttyS0 panic=-1" >/dev/null 2>&1 || true
    if grep -aq 'Linux version' "$probe"; then ACCEL=kvm; else step "KVM does not run guests here; using TCG"; fi
    rm -f "$probe"
  fi
fi

W=$(mktemp -d /tmp/guest-boot-test.XXXXXX)
PIDS=()
cleanup() {
  local code=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$KEEP" = 0 ] && [ "$code" = 0 ]; then rm -rf "$W"; else echo "boot-test: work folder $W (console.log, kbs.log)" >&2; fi
  exit "$code"
}
trap cleanup EXIT
step "work folder $W, accelerator $ACCEL"

# --- vTPM: swtpm state with an attestation key at the tpm attester's handle ------------------------
AK_HANDLE=0x81010002
mkdir -p "$W/tpm"
# tpm2-tools reaches swtpm over TCP only (its swtpm TCTI takes a host and port), so the setup swtpm takes
# two free ports; another process can take a port between the pick and the bind, so a start that fails
# (swtpm exits non-zero when a port is in use) is tried again on new ports. The boot below uses a unix
# socket and needs no port.
for attempt in $(seq 1 20); do
  PORT=$((20000 + RANDOM % 20000))
  if swtpm socket --tpm2 --tpmstate "dir=$W/tpm" --server "type=tcp,port=$PORT,bindaddr=127.0.0.1" \
    --ctrl "type=tcp,port=$((PORT + 1)),bindaddr=127.0.0.1" --flags not-need-init,startup-clear \
    --daemon --pid "file=$W/swtpm-setup.pid" 2>"$W/swtpm-setup.err"; then
    break
  fi
  grep -q 'Address already in use' "$W/swtpm-setup.err" || die "swtpm did not start: $(cat "$W/swtpm-setup.err")"
  [ "$attempt" = 20 ] && die "swtpm found no free port in 20 tries: $(cat "$W/swtpm-setup.err")"
done
export TPM2TOOLS_TCTI="swtpm:host=127.0.0.1,port=$PORT"
tpm2_createprimary -Q -C o -G rsa2048:rsassa-sha256:null \
  -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|sign' -c "$W/ak.ctx"
tpm2_evictcontrol -Q -C o -c "$W/ak.ctx" "$AK_HANDLE"
tpm2_readpublic -Q -c "$AK_HANDLE" -f der -o "$W/ak.der"
unset TPM2TOOLS_TCTI
SETUP_PID=$(cat "$W/swtpm-setup.pid")
kill "$SETUP_PID"
for _ in $(seq 1 100); do kill -0 "$SETUP_PID" 2>/dev/null || break; sleep 0.05; done
AK_B64=$(base64 -w0 "$W/ak.der")
step "vTPM: RSA attestation key persisted at $AK_HANDLE"

# --- KBS on the host: HTTPS for 10.0.2.2 (QEMU user network), policies and values from mounted files --
KBS_PORT=$((PORT + 2))
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 -keyout "$W/https.key" -out "$W/https.crt" \
  -subj "/CN=kbs-boot-test" -addext "subjectAltName=IP:10.0.2.2,IP:127.0.0.1" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/token.key" 2>/dev/null
openssl req -x509 -new -key "$W/token.key" -out "$W/token.crt" -days 2 -subj "/CN=kbs-token" 2>/dev/null
mkdir -p "$W/policies" "$W/resource-policy" "$W/reference-values" "$W/resources/default/attestation-status"
printf success >"$W/resources/default/attestation-status/status"
cat >"$W/policies/default_cpu.rego" <<'REGO'
package policy

import rego.v1

# Boot test: a plain TPM guest is affirmed when its AK is trusted and PCR 03, 04, 08, 09, 11 and 12 equal
# the reference values the reference-values tool made from the image's measurement manifest.
default hardware := 97

default executables := 33

default configuration := 36

trust_claims := {"hardware": hardware, "executables": executables, "configuration": configuration}

pcr_ok(n) if input.tpm[sprintf("pcr%s", [n])] in query_reference_value(sprintf("tpm_pcr%s", [n]))

hardware := 2 if input.tpm.ak_public in query_reference_value("trusted_aks")

executables := 3 if {
	pcr_ok("03")
	pcr_ok("04")
	pcr_ok("09")
	pcr_ok("11")
	pcr_ok("12")
}

configuration := 2 if pcr_ok("08")
REGO
cat >"$W/resource-policy/resource-policy.rego" <<'REGO'
package policy

import rego.v1

default allow := false

allow if {
	data.plugin in {"resource", "provisioner"}
	input.submods.cpu0["ear.status"] == "affirming"
}
REGO
printf '{"version":"0.1.0","type":"sample","payload":"%s"}\n' \
  "$(printf '{"trusted_aks":["%s"]}' "$AK_B64" | base64 -w0)" >"$W/reference-values/trusted-aks.json"
# An admin identity for reading the verdict log and provisioning the VM's disk key, and nothing else.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/admin.key" 2>/dev/null
openssl pkey -in "$W/admin.key" -pubout -out "$W/admin.pub" 2>/dev/null
ADMIN_JWT=$("$NODE" -e '
const { createPrivateKey, sign } = require("node:crypto");
const b64 = (x) => Buffer.from(typeof x === "string" ? x : JSON.stringify(x)).toString("base64url");
const input = `${b64({ alg: "ES256", typ: "JWT" })}.${b64({ role: "boot-test", exp: Math.floor(Date.now() / 1000) + Number(process.argv[2]) })}`;
const key = createPrivateKey(require("node:fs").readFileSync(process.argv[1]));
console.log(`${input}.${sign("sha256", Buffer.from(input), { key, dsaEncoding: "ieee-p1363" }).toString("base64url")}`);
' "$W/admin.key" $((TIMEOUT + 3600)))
cat >"$W/kbs-config.toml" <<TOML
[http_server]
sockets = ["127.0.0.1:$KBS_PORT"]
private_key = "$W/https.key"
certificate = "$W/https.crt"

[attestation_token]
trusted_certs_paths = ["$W/token.crt"]

[attestation_service]
type = "coco_as_builtin"

[attestation_service.attestation_token_broker.signer]
key_path = "$W/token.key"
cert_path = "$W/token.crt"

[attestation_service.rvps_config]
type = "BuiltIn"

[admin]
authorization_mode = "AuthenticatedAuthorization"

[admin.authentication.bearer_jwt]
identity_providers = [{ public_key_uri = "$W/admin.pub" }]

[admin.authorization.regex_acl]
acls = [{ role = "boot-test", allowed_endpoints = "^/kbs/v0/(admin/verdicts(/[0-9]+)?|provisioner/provision)\$" }]

[storage_backend]
storage_type = "Memory"

[[plugins]]
name = "resource"
storage_backend_type = "kvstorage"

[[plugins]]
name = "provisioner"

[mounted_files]
attestation_policies = ["$W/policies"]
resource_policy = "$W/resource-policy"
reference_values = ["$W/reference-values"]
resources = ["$W/resources"]
TOML
"$BIN/kbs" --config-file "$W/kbs-config.toml" >"$W/kbs.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do curl -sf --cacert "$W/https.crt" "https://127.0.0.1:$KBS_PORT/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
curl -sf --cacert "$W/https.crt" "https://127.0.0.1:$KBS_PORT/healthz" >/dev/null || die "KBS did not start (see $W/kbs.log)"
step "KBS on https://127.0.0.1:$KBS_PORT (guest: https://10.0.2.2:$KBS_PORT)"

# --- the VM's disk key: provisioned by the KBS's provisioner plugin, as an operator would ------------
PROVISIONED=$(curl -sf --cacert "$W/https.crt" -X POST -H "Authorization: Bearer $ADMIN_JWT" \
  -H 'Content-Type: application/json' -d '{"vm_name":"boot-test","namespace":"default"}' \
  "https://127.0.0.1:$KBS_PORT/kbs/v0/provisioner/provision") || die "the KBS did not provision a key (see $W/kbs.log)"
KEY_PATH=$(sed -n 's/.*"resource_path":"\([^"]*\)".*/\1/p' <<<"$PROVISIONED")
[[ "$KEY_PATH" =~ ^default/[0-9a-f-]{36}/root$ ]] || die "unexpected provisioner answer: $PROVISIONED"
KEY_URI=kbs+provisioner:///$KEY_PATH
# The data disk: a blank raw file, the guest's second virtio disk (serial podvm-data).
DATA=$W/data.raw
DATA_BYTES=$((64 * 1024 * 1024))
truncate -s "$DATA_BYTES" "$DATA"
step "disk key provisioned at $KEY_PATH; data disk $DATA ($((DATA_BYTES >> 20)) MiB, blank)"

# --- initdata and the cidata disk -----------------------------------------------------------------
CERT=$(cat "$W/https.crt")
AA_TOML="[token_configs.kbs]
url = \"https://10.0.2.2:$KBS_PORT\"
cert = \"\"\"
$CERT
\"\"\"
"
# The data hub fetches its credentials at start (through the AA's attestation), so the chain's own
# client asks for the status resource: nothing has to be added to the root.
CDH_TOML="socket = \"unix:///run/confidential-containers/cdh.sock\"

[kbc]
name = \"cc_kbc\"
url = \"https://10.0.2.2:$KBS_PORT\"
kbs_cert = \"\"\"
$CERT
\"\"\"

[[credentials]]
resource_uri = \"kbs:///default/attestation-status/status\"
path = \"/run/confidential-containers/cdh/kbs/attestation-status\"
"
printf 'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '"'''"'\n%s'"'''"'\n"cdh.toml" = '"'''"'\n%s'"'''"'\n"trustee.kbs.resource" = "%s"\n' \
  "$AA_TOML" "$CDH_TOML" "$KEY_URI" >"$W/initdata.toml"
mkdir -p "$W/cidata"
printf '#cloud-config\nwrite_files:\n- path: /run/peerpod/initdata\n  content: %s\n' \
  "$(gzip -9n <"$W/initdata.toml" | base64 -w0)" >"$W/cidata/user-data"
printf 'instance-id: boot-test\nlocal-hostname: podvm\n' >"$W/cidata/meta-data"
genisoimage -quiet -output "$W/cidata.iso" -volid cidata -joliet -rock "$W/cidata"
step "initdata $(sha256sum "$W/initdata.toml" | cut -c1-16)… on a cidata disk"

# --- the shipped disk and its manifest, as the build wrote them ------------------------------------
MANIFEST=$IMAGE/podvm-measurements.json
DISK=$IMAGE/podvm.raw
SNAPSHOT=on # the good boot: the guest's writes never reach the shipped file
DISK_SHA=$(sha256sum "$DISK" | cut -d' ' -f1)
# The image the manifest describes (build.sh --image-tag); reference-values checks that it is this one.
IMAGE_TAG=$(sed -n 's/^  "image_tag": "\([^"]*\)",$/\1/p' "$MANIFEST")
[ -n "$IMAGE_TAG" ] || die "$MANIFEST names no image_tag"
step "image $DISK (sha256 ${DISK_SHA:0:16}…), manifest $MANIFEST"

# --- reference values: from the build's manifest and the initdata, nothing from the guest ------------
"$REFERENCE_VALUES" --platform libvirt --tee tpm --initdata "$W/initdata.toml" \
  --measurements "$MANIFEST" --image-tag "$IMAGE_TAG" --format rvps-message >"$W/pcrs.json"
mv "$W/pcrs.json" "$W/reference-values/pcrs.json" # whole, never half-written, when the KBS reads it
reference() { # reference <NN>: the reference value of tpm_pcrNN
  sed 's/.*"payload":"\([^"]*\)".*/\1/' "$W/reference-values/pcrs.json" | base64 -d |
    sed "s/.*\"tpm_pcr$1\":\[\"\([0-9a-f]*\)\"\].*/\1/"
}
step "reference values from the build manifest mounted into the KBS"

# --- tampering: a copy of the shipped disk ---------------------------------------------------------
# The partition's first byte in the disk image (sfdisk prints the start in 512-byte sectors).
part_start() { sfdisk --dump "$DISK" | awk -v n="$1" '$1 ~ ("raw" n "$") { sub(",", "", $4); print $4 * 512 }'; }
if [ -n "$TAMPER" ]; then
  cp --sparse=always "$IMAGE/podvm.raw" "$W/podvm.raw"
  DISK=$W/podvm.raw
  SNAPSHOT=off
fi
case "$TAMPER" in
  verity)
    # One byte in the first block of broker-guest: the block the kernel reads first when it executes.
    # The root partition holds podvm.ext4 block for block (seal.sh), so its block map applies.
    block=$(debugfs -R 'bmap /usr/local/bin/broker-guest 0' "$IMAGE/podvm.ext4" 2>/dev/null)
    [[ "$block" =~ ^[0-9]+$ ]] || die "no block for /usr/local/bin/broker-guest in the root image"
    offset=$(($(part_start 2) + block * 4096 + 64))
    cmp -s -n 4096 -i "$((block * 4096)):$(($(part_start 2) + block * 4096))" "$IMAGE/podvm.ext4" "$DISK" ||
      die "the disk's root partition is not podvm.ext4 at block $block"
    old=$(od -An -tx1 -j "$offset" -N1 "$DISK" | tr -d ' ')
    printf "$(printf '\\%03o' $((0x$old ^ 0xff)))" | dd of="$DISK" bs=1 seek="$offset" conv=notrunc status=none
    step "tamper: flipped the byte at $offset of the disk (block $block of the root, in broker-guest): 0x$old → $(od -An -tx1 -j "$offset" -N1 "$DISK" | tr -d ' ')"
    ;;
  cmdline)
    # The UKI as the disk's ESP holds it, its command line with one more word, written back.
    esp="$DISK@@$(part_start 1)"
    mcopy -n -i "$esp" ::/EFI/BOOT/BOOTX64.EFI "$W/podvm.efi"
    objcopy --dump-section .cmdline="$W/cmdline" "$W/podvm.efi" "$W/podvm.efi.copy"
    printf '%s broker.tampered=1' "$(tr -d '\0' <"$W/cmdline")" >"$W/cmdline.tampered"
    # (objcopy --update-section keeps the old size: the section is replaced instead.)
    objcopy --remove-section .cmdline --add-section .cmdline="$W/cmdline.tampered" \
      --change-section-vma .cmdline=0x30000 "$W/podvm.efi" "$W/podvm.tampered.efi"
    mcopy -o -i "$esp" "$W/podvm.tampered.efi" ::/EFI/BOOT/BOOTX64.EFI
    # What the tampered UKI's boot will measure, for the check that the guest booted exactly it.
    "$NODE" "$HERE/measure.ts" --uki "$W/podvm.tampered.efi" --image-tag tampered \
      >"$W/tampered-measurements.json"
    step "tamper: the UKI's command line is now: $(cat "$W/cmdline.tampered")"
    ;;
esac

# --- the pod (good run): the Go shim and the container's program, built before the boot ---------------
HOSTFWD=
if [ -z "$TAMPER" ]; then
  # The agent policy gate's port (CAA's agent-protocol-forwarder port), reached from the host as the
  # peer-pods runtime reaches it.
  GATE_PORT=$((PORT + 3))
  HOSTFWD=",hostfwd=tcp:127.0.0.1:$GATE_PORT-:15150"
  "$ESBUILD" "$HERE/pod.ts" --bundle --platform=node --format=esm --log-level=warning --outfile="$W/pod.mjs" \
    --banner:js="import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" ||
    die "bundling guest-image/pod.ts failed"
  (cd "$REPO" && "$NODE" "$W/pod.mjs" prepare) || die "building the pod's Go shim or program failed"
  step "pod client ready: the Go shim (containerd ttrpc, gogo types from kata's .proto) for tcp://127.0.0.1:$GATE_PORT → guest :15150"
fi

# --- boot: OVMF, the disk's ESP first ------------------------------------------------------------
cp "$OVMF_VARS" "$W/OVMF_VARS.fd"
CPU=max
[ "$ACCEL" = kvm ] && CPU=host
CONSOLE=$W/console.log
# start_vm: the vTPM (its state kept across boots) and QEMU, the serial console into $CONSOLE.
start_vm() {
  rm -f "$W/swtpm.sock"
  swtpm socket --tpm2 --tpmstate "dir=$W/tpm" --ctrl "type=unixio,path=$W/swtpm.sock" \
    --log "file=$W/swtpm.log" >/dev/null 2>&1 &
  SWTPM=$!
  PIDS+=("$SWTPM")
  for _ in $(seq 1 100); do [ -S "$W/swtpm.sock" ] && break; sleep 0.05; done
  : >"$CONSOLE"
  boot_start=$SECONDS
  qemu-system-x86_64 -machine "q35,accel=$ACCEL" -cpu "$CPU" -m 2048 -smp 2 -display none -monitor none \
    -serial "file:$CONSOLE" -no-reboot \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" \
    -drive "if=pflash,format=raw,unit=1,file=$W/OVMF_VARS.fd" \
    -drive "file=$DISK,if=none,id=disk0,format=raw,snapshot=$SNAPSHOT" -device virtio-blk-pci,drive=disk0,bootindex=0 \
    -drive "file=$W/cidata.iso,if=none,id=cidata,format=raw,readonly=on" -device virtio-blk-pci,drive=cidata \
    -drive "file=$DATA,if=none,id=data,format=raw" -device virtio-blk-pci,drive=data,serial=podvm-data \
    -chardev "socket,id=chrtpm,path=$W/swtpm.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm \
    -device tpm-tis,tpmdev=tpm0 \
    -netdev "user,id=net0$HOSTFWD" -device virtio-net-pci,netdev=net0,romfile= >"$W/qemu.log" 2>&1 &
  QEMU=$!
  PIDS+=("$QEMU")
}
# stop_vm: powers the VM off (QEMU ends on SIGTERM after flushing its disks) and stops the vTPM.
stop_vm() {
  kill "$QEMU" 2>/dev/null || true
  wait "$QEMU" 2>/dev/null || true
  kill "$SWTPM" 2>/dev/null || true
  wait "$SWTPM" 2>/dev/null || true
}
start_vm
step "booting${TAMPER:+ the tampered ($TAMPER) image} (console: $CONSOLE)"

# The verdict log, summarised by Node: one line per entry, newest first ("resource <status> <path>",
# "attestation <id> <status>"), then the PCRs of the newest attestation as the attestation service
# read them from the guest's verified quote ("pcr <NN> <hex>").
cat >"$W/verdicts.cjs" <<'JS'
const log = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
const out = [];
let pcrs;
for (const v of log.verdicts ?? []) {
  if (v.kind === 'resource') out.push(`resource ${v.status} ${v.resource}`);
  if (v.kind !== 'attestation') continue;
  out.push(`attestation ${v.id} ${v.status}`);
  if (pcrs !== undefined) continue;
  for (const submod of Object.values(v.claims?.submods ?? {})) {
    const tpm = submod?.['ear.veraison.annotated-evidence']?.tpm;
    if (tpm !== undefined && tpm !== null) pcrs ??= tpm;
  }
}
for (const [k, value] of Object.entries(pcrs ?? {})) {
  const m = /^pcr(\d\d)$/.exec(k);
  if (m !== null && typeof value === 'string') out.push(`pcr ${m[1]} ${value.toLowerCase()}`);
}
console.log(out.join('\n'));
JS
verdicts() {
  curl -sf --cacert "$W/https.crt" -H "Authorization: Bearer $ADMIN_JWT" \
    "https://127.0.0.1:$KBS_PORT/kbs/v0/admin/verdicts" >"$W/verdicts.json" ||
    die "the KBS's verdict log did not answer"
  "$NODE" "$W/verdicts.cjs" <"$W/verdicts.json"
}
booted() { awk -v n="$2" '$1 == "pcr" && $2 == n { print $3 }' <<<"$1"; }
# Computed (build manifest) and booted (the KBS's verified claims) PCRs side by side.
pcr_table() {
  local lines=$1 n computed b
  printf 'boot-test: PCR  %-64s  %s\n' "computed (build manifest)" "booted (KBS verdict log: the guest's quote)"
  for n in 03 04 08 09 11 12; do
    computed=$(reference "$n")
    b=$(booted "$lines" "$n")
    printf 'boot-test: %s   %s  %s %s\n' "$n" "$computed" "${b:--}" "$([ "$computed" = "$b" ] && echo '=' || echo DIFFERS)"
  done
}
# The guest's console, without colours. After journald starts, systemd's own messages go to the journal
# only; the kernel's and process-user-data's (StandardOutput=journal+console) still reach the console.
console_has() { tr -d '\r' <"$CONSOLE" | grep -aq "$1"; }
# The encrypted-disk step's log line with message $1 (JSON, on the console through the unit's stderr).
disk_line() { tr -d '\r' <"$CONSOLE" | grep -ao "{.*\"msg\":\"$1\".*}" | head -n1; }
# A string field of a JSON log line.
field() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1"; }
num_field() { sed -n "s/.*\"$2\":\([0-9a-z]*\).*/\1/p" <<<"$1"; }
# The KBS served the disk key (an access line for its path with status 200).
key_served() { grep -F "\"path\":\"/kbs/v0/provisioner/$KEY_PATH\"" "$W/kbs.log" | grep -q '"status":200'; }
# After a tampered boot: no key, and the disk never touched.
check_disk_closed() {
  ! key_served || die "the KBS served the disk key to the tampered guest"
  ! console_has '"msg":"encrypted disk \(formatted and \)\{0,1\}opened"' || die "the tampered guest opened the data disk"
  cmp -s -n "$DATA_BYTES" "$DATA" /dev/zero || die "the tampered guest wrote to the data disk"
  step "the KBS never served the disk key ($KEY_PATH); no 'encrypted disk opened' line on the console; the data disk is still all zeros"
}
# wait_disk <message>: the encrypted-disk step's line with that message on the console; fails on its
# error line, a QEMU that ended, or the deadline.
wait_disk() {
  local line
  while [ $SECONDS -lt $deadline ]; do
    line=$(disk_line "$1")
    if [ -n "$line" ]; then
      printf '%s\n' "$line"
      return 0
    fi
    line=$(disk_line 'encrypted disk not opened')
    [ -z "$line" ] || die "the guest did not open the data disk: $(field "$line" err)"
    kill -0 "$QEMU" 2>/dev/null || die "QEMU exited (see $W/qemu.log, $CONSOLE)"
    sleep 2
  done
  die "no '$1' on the console within $TIMEOUT s (see $CONSOLE)"
}
# The sandbox agent's log line (JSON, on the console through its unit's stdout) about container $2 with
# message $1.
agent_line() { tr -d '\r' <"$CONSOLE" | grep -ao "{.*\"name\":\"sandbox-agent\".*\"container\":\"$2\".*\"msg\":\"$1\".*}" | head -n1; }
# The good run, once the gate listens (it does once the disk is open): one pod from the host through the
# gate; the container's output read back through ReadStdout, and the agent's lines on the console.
pod() {
  local marker report pod_start created first exited clock_line
  marker=podvm-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
  pod_start=$SECONDS
  report=$(cd "$REPO" && "$NODE" "$W/pod.mjs" run "tcp://127.0.0.1:$GATE_PORT" "$marker" --wait-s 300) ||
    die "the pod did not run through the gate: ${report:-no report} (see $CONSOLE)"
  step "pod through the gate (tcp://127.0.0.1:$GATE_PORT → guest :15150 → sandbox agent): $(sed 's/"stdout":"[^"]*",//' <<<"$report")"
  grep -qF "\"stdout\":\"hello from $marker\\nclock " <<<"$report" || die "ReadStdout did not return the container's lines: $report"
  step "ReadStdout: 'hello from $marker'; exit status 0 (WaitProcess); client: CreateContainer → first output $(sed -n 's/.*"first_output_ms":\([0-9.]*\).*/\1/p' <<<"$report") ms"
  # The guest's clock: SetGuestDateTime (before CreateContainer) set it to the host's plus a day; the
  # container read it back. pod.mjs already checked it: no earlier than the time set, no later than that
  # plus the seconds the host saw pass from sending the call to reading the output (rounded up) plus one.
  local host_s set_s read_s max_s elapsed_ms
  host_s=$(num_field "$report" host_s)
  set_s=$(num_field "$report" set_s)
  read_s=$(num_field "$report" read_s)
  max_s=$(num_field "$report" max_s)
  elapsed_ms=$(num_field "$report" elapsed_ms)
  [[ "$read_s" =~ ^[0-9]+$ && "$set_s" =~ ^[0-9]+$ && "$max_s" =~ ^[0-9]+$ ]] &&
    [ "$set_s" -le "$read_s" ] && [ "$read_s" -le "$max_s" ] ||
    die "the container's clock is not the one SetGuestDateTime set: $report"
  step "guest clock: SetGuestDateTime to $(date -u -d "@$set_s" +%FT%TZ) (host $(date -u -d "@$host_s" +%FT%TZ) + $((set_s - host_s)) s); the container read $(date -u -d "@$read_s" +%FT%TZ) ($((read_s - set_s)) s after the time set; at most $((max_s - set_s)) s allowed, $elapsed_ms ms passed at the host)"
  while :; do
    created=$(agent_line 'container created' web)
    first=$(agent_line 'first output, measured from CreateContainer' web)
    exited=$(agent_line 'container exited' web)
    [ -n "$created" ] && [ -n "$first" ] && [ -n "$exited" ] && break
    [ $((SECONDS - pod_start)) -lt 330 ] || die "the sandbox agent's lines for the container are not on the console (see $CONSOLE)"
    sleep 2
  done
  [ "$(num_field "$exited" status)" = 0 ] || die "the agent logged another exit status: $exited"
  clock_line=$(tr -d '\r' <"$CONSOLE" | grep -ao '{.*"name":"sandbox-agent".*"msg":"guest clock set".*}' | head -n1)
  [ -n "$clock_line" ] || die "the sandbox agent did not log 'guest clock set' (see $CONSOLE)"
  step "console (sandbox agent in the VM): guest clock set from $(field "$clock_line" before) to $(field "$clock_line" after)"
  step "console (sandbox agent in the VM): container web created, first output $(sed -n 's/.*"ms":\([0-9.]*\).*/\1/p' <<<"$first") ms after CreateContainer (the agent's RSS then $(num_field "$first" agentRssKiB) KiB), exited with status 0"
}
# The good run, once the first boot got its resource: the guest formats and opens the data disk and
# records its boot on it; a second boot of the same disk opens it and reads the record back; then the
# host looks at the disk image.
encrypted_disk() {
  local first second boot1 record previous
  first=$(wait_disk 'encrypted disk formatted and opened')
  boot1=$(field "$first" boot)
  [[ "$boot1" =~ ^[0-9a-f-]{36}$ ]] || die "no boot id in the disk step's line: $first"
  [ "$(num_field "$first" previousBoots)" = 0 ] || die "a blank disk had a boot record: $first"
  key_served || die "the KBS's log has no served key at /kbs/v0/provisioner/$KEY_PATH"
  step "boot 1: the guest fetched its key ($KEY_URI), formatted the data disk (LUKS2, ext4), opened it and recorded boot $boot1 on it; SecureMount took $(num_field "$first" ms) ms"
  pod
  stop_vm
  [ "$(head -c 6 "$DATA" | od -An -tx1 | tr -d ' \n')" = 4c554b53babe ] || die "the data disk has no LUKS header after boot 1"
  CONSOLE=$W/console-2.log
  start_vm
  step "boot 2 of the same disks (console: $CONSOLE)"
  second=$(wait_disk 'encrypted disk opened')
  record=$(field "$second" lastBoot)
  previous=$(num_field "$second" previousBoots)
  [ "${record%% *}" = "$boot1" ] && [ "$previous" = 1 ] ||
    die "boot 2 did not read boot 1's record back (previousBoots $previous, lastBoot '$record')"
  step "boot 2: the guest opened the LUKS2 disk (not formatted) in $(num_field "$second" ms) ms and read back the record boot 1 wrote: '$record'"
  local boot2
  boot2=$(field "$second" boot)
  stop_vm
  # On the host: the disk is LUKS2, and what the guest wrote is nowhere in it in clear. The LUKS2
  # header's JSON area is clear text: the cipher's name is found there, so the search sees clear bytes.
  cryptsetup luksDump "$DATA" >"$W/luksDump.txt" 2>&1 || die "cryptsetup luksDump refused the data disk: $(cat "$W/luksDump.txt")"
  grep -q '^Version:[[:space:]]*2$' "$W/luksDump.txt" || die "the data disk is not LUKS2: $(head -n 3 "$W/luksDump.txt")"
  grep -q 'aes-xts-plain64' "$W/luksDump.txt" || die "the data disk's cipher is not aes-xts-plain64"
  grep -aqF aes-xts-plain64 "$DATA" || die "the search found no clear text at all in the disk image (the LUKS2 header's)"
  for clear in "$record" "$boot1" "$boot2" .boots; do
    ! grep -aqF -- "$clear" "$DATA" || die "'$clear' is in clear in the data disk image"
  done
  step "cryptsetup luksDump: LUKS2, $(grep -m1 -o 'aes-xts-plain64' "$W/luksDump.txt"), $(grep -c '^  [0-9]*: luks2' "$W/luksDump.txt") keyslot(s); neither boot's record ('$record', $boot2) nor the file's name is in clear in the $((DATA_BYTES >> 20)) MiB image (its header's cipher name is)"
}
RESOURCE=default/attestation-status/status
run_start=$SECONDS
deadline=$((SECONDS + TIMEOUT))
while [ $SECONDS -lt $deadline ]; do
  kill -0 "$QEMU" 2>/dev/null || die "QEMU exited (see $W/qemu.log, $W/console.log)"
  lines=$(verdicts)
  grep -q "^resource allowed $RESOURCE\$" <<<"$lines" && [ -n "$TAMPER" ] && die "the tampered image got the resource"
  if [ "$TAMPER" = verity ]; then
    # dm-verity refuses the block; the chain's first service cannot execute broker-guest, so it prints
    # nothing. Once the boot is over (the serial login prompt), the KBS is watched for another minute:
    # in a good boot the first attestation reaches it within ~30 s of process-user-data's output.
    if console_has 'device-mapper: verity.*data block.*is corrupted' && console_has 'podvm login:'; then
      step "dm-verity: $(tr -d '\r' <"$W/console.log" | grep -ao -m1 'device-mapper: verity.*data block.*is corrupted')"
      settle=$((SECONDS + 60))
      while [ $SECONDS -lt $settle ]; do
        lines=$(verdicts)
        [ -z "$lines" ] || die "the tampered guest reached the KBS: $(head -n 3 <<<"$lines")"
        sleep 5
      done
      # systemd's start-up status line (the unit fails before the boot is over, so it is printed).
      console_has "See 'systemctl status process-user-data.service' for details" ||
        die "systemd did not report process-user-data failed"
      ! console_has 'process-user-data\[[0-9]*\]:' || die "process-user-data ran in the tampered guest"
      step "process-user-data failed (systemd's console line) and printed nothing: broker-guest could not be read"
      if grep -q '"path":"/kbs/v0/\(auth\|attest\)"' "$W/kbs.log"; then die "the tampered guest reached the KBS"; fi
      step "the KBS saw no attestation (its verdict log is empty 60 s after the boot ended): the chain never started"
      check_disk_closed
      step "PASSED (tamper verity: read fails under dm-verity after $((SECONDS - boot_start)) s)"
      exit 0
    fi
  elif [ "$TAMPER" = cmdline ]; then
    if grep -q "^resource denied $RESOURCE\$" <<<"$lines" && grep -q '^pcr 11 ' <<<"$lines" &&
      grep -q '"kind":"PolicyDeny"' "$W/kbs.log"; then
      pcr_table "$lines"
      [ "$(reference 11)" != "$(booted "$lines" 11)" ] || die "PCR 11 did not change with the command line"
      for n in 04 09 11; do
        predicted=$(sed -n "s/.*\"pcr$n\": \"\([0-9a-f]\{64\}\)\".*/\1/p" "$W/tampered-measurements.json")
        [ "$predicted" = "$(booted "$lines" "$n")" ] ||
          die "PCR $n of the tampered boot is not what measure.ts computes for the tampered UKI"
      done
      step "PCR 04, 09 and 11 of the tampered boot are what measure.ts computes for the tampered UKI"
      denied=$(grep -m1 '"kind":"PolicyDeny"' "$W/kbs.log" | sed 's/.*"cause":"\([^"]*\)".*/\1/')
      step "the KBS refused the tampered guest: PolicyDeny ($denied)"
      # The data hub stops when its start-up credential is refused, so the disk step never runs; its
      # reason reaches the console (the unit's stderr) once the guest has read the KBS's answer.
      until console_has 'confidential-data-hub: '; do
        [ $SECONDS -lt $deadline ] || die "the data hub's failure is not on the console"
        kill -0 "$QEMU" 2>/dev/null || die "QEMU exited (see $W/qemu.log, $CONSOLE)"
        sleep 2
      done
      step "console: $(tr -d '\r' <"$CONSOLE" | grep -ao -m1 'confidential-data-hub: .*' | cut -c1-200)"
      check_disk_closed
      step "PASSED (tamper cmdline: PCR 11 differs, PolicyDeny after $((SECONDS - boot_start)) s)"
      exit 0
    fi
  else
    if grep -q "^resource denied $RESOURCE\$" <<<"$lines"; then
      pcr_table "$lines"
      die "the KBS refused the resource (see $W/kbs.log, $W/verdicts.json)"
    fi
    if grep -q "^resource allowed $RESOURCE\$" <<<"$lines"; then
      pcr_table "$lines"
      for n in 03 04 09 11 12; do
        [ "$(reference "$n")" = "$(booted "$lines" "$n")" ] || die "PCR $n of the guest is not the build manifest's"
      done
      [ "$(reference 08)" = "$(booted "$lines" 08)" ] || die "PCR 8 of the guest is not the one computed from the initdata"
      grep -q '^attestation [0-9]* affirming$' <<<"$lines" || die "no affirming attestation in the verdict log"
      console_has 'process-user-data\[[0-9]*\]:.*Wrote /run/peerpod/aa.toml' || die "process-user-data did not write aa.toml"
      step "status resource released to the confidential data hub (its credential at start), after $(grep -c '^attestation ' <<<"$lines") attestation(s) in the verdict log"
      step "measured boot to released resource in $((SECONDS - boot_start)) s"
      encrypted_disk
      [ "$(sha256sum "$DISK" | cut -d' ' -f1)" = "$DISK_SHA" ] || die "the shipped disk changed during the boots"
      step "the shipped disk booted is unchanged (sha256 ${DISK_SHA:0:16}…)"
      step "PASSED (two measured boots; the data disk formatted, written, reopened and read back; $((SECONDS - run_start)) s from the first QEMU start)"
      exit 0
    fi
  fi
  sleep 5
done
lines=$(verdicts)
grep -q '^pcr ' <<<"$lines" && pcr_table "$lines"
die "no result within $TIMEOUT s (see $W/console.log, $W/kbs.log)"
