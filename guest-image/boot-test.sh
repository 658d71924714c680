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
# The probe that prints the PCRs and asks for the resource has to be inside the verity root, so the test
# writes it into a copy of the image's root file system (debugfs) and seals that copy with seal.sh,
# exactly as build.sh seals the image: the reference values then come from that seal's measurement
# manifest only (reference-values --measurements podvm-measurements.json), before the boot.
#
# Without --tamper: the KBS releases the resource, and the PCRs the guest reads equal the manifest's
# (printed side by side). --tamper verity flips one byte of /usr/local/bin/broker-guest inside the
# sealed disk: dm-verity fails the read, the chain never starts, nothing reaches the KBS.
# --tamper cmdline appends a word to the UKI's command line: PCR 11 (and 4) differ from the manifest and
# the KBS answers PolicyDeny. Needs: qemu-system-x86, ovmf, swtpm, tpm2-tools, genisoimage, e2fsprogs,
# openssl, mtools, and those of seal.sh, and dist/bin (kbs, reference-values) from make build;
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
for p in qemu-system-x86_64 swtpm tpm2_createprimary tpm2_evictcontrol tpm2_readpublic genisoimage debugfs openssl mcopy objcopy; do
  command -v "$p" >/dev/null ||
    die "$p not found: install the Debian packages qemu-system-x86 swtpm tpm2-tools genisoimage e2fsprogs openssl mtools binutils"
done
for f in "$OVMF_CODE" "$OVMF_VARS"; do [ -f "$f" ] || die "$f is missing: install the Debian package ovmf"; done
for f in vmlinuz initrd.img podvm.ext4 rootfs/usr/lib/os-release podvm-measurements.json; do
  [ -f "$IMAGE/$f" ] || die "$IMAGE/$f is missing: run make guest-image"
done
REFERENCE_VALUES=${REFERENCE_VALUES:-$BIN/reference-values}
[ -x "$BIN/kbs" ] || die "$BIN/kbs is missing: run make build"
[ -x "$REFERENCE_VALUES" ] || die "$REFERENCE_VALUES is missing: run make build (or set REFERENCE_VALUES)"

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
PORT=$((20000 + RANDOM % 20000))
swtpm socket --tpm2 --tpmstate "dir=$W/tpm" --server "type=tcp,port=$PORT,bindaddr=127.0.0.1" \
  --ctrl "type=tcp,port=$((PORT + 1)),bindaddr=127.0.0.1" --flags not-need-init,startup-clear \
  --daemon --pid "file=$W/swtpm-setup.pid"
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
	data.plugin == "resource"
	input.submods.cpu0["ear.status"] == "affirming"
}
REGO
printf '{"version":"0.1.0","type":"sample","payload":"%s"}\n' \
  "$(printf '{"trusted_aks":["%s"]}' "$AK_B64" | base64 -w0)" >"$W/reference-values/trusted-aks.json"
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
authorization_mode = "DenyAll"

[storage_backend]
storage_type = "Memory"

[[plugins]]
name = "resource"
storage_backend_type = "kvstorage"

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

# --- initdata and the cidata disk -----------------------------------------------------------------
CERT=$(cat "$W/https.crt")
AA_TOML="[token_configs.kbs]
url = \"https://10.0.2.2:$KBS_PORT\"
cert = \"\"\"
$CERT
\"\"\"
"
CDH_TOML="socket = \"unix:///run/confidential-containers/cdh.sock\"
credentials = []

[kbc]
name = \"cc_kbc\"
url = \"https://10.0.2.2:$KBS_PORT\"
kbs_cert = \"\"\"
$CERT
\"\"\"
"
printf 'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"aa.toml" = '"'''"'\n%s'"'''"'\n"cdh.toml" = '"'''"'\n%s'"'''"'\n' \
  "$AA_TOML" "$CDH_TOML" >"$W/initdata.toml"
mkdir -p "$W/cidata"
printf '#cloud-config\nwrite_files:\n- path: /run/peerpod/initdata\n  content: %s\n' \
  "$(gzip -9n <"$W/initdata.toml" | base64 -w0)" >"$W/cidata/user-data"
printf 'instance-id: boot-test\nlocal-hostname: podvm\n' >"$W/cidata/meta-data"
genisoimage -quiet -output "$W/cidata.iso" -volid cidata -joliet -rock "$W/cidata"
step "initdata $(sha256sum "$W/initdata.toml" | cut -c1-16)… on a cidata disk"

# --- the probe, written into a copy of the root file system, sealed as build.sh seals it -----------
cp --sparse=always "$IMAGE/podvm.ext4" "$W/podvm.ext4"
cat >"$W/boot-test-probe" <<'PROBE'
#!/bin/bash
# Prints the PCRs the policy compares and the firmware's event log, then asks api-server-rest (in the
# pod's network namespace) for the status resource until it is released.
for n in 3 4 8 9 11 12; do
  printf 'BOOT-TEST-PCR %02d %s\n' "$n" "$(tr 'A-F' 'a-f' </sys/class/tpm/tpm0/pcr-sha256/$n)"
done
# How the chain's first service ended (it runs before this probe).
echo "BOOT-TEST-UNIT process-user-data $(systemctl show -P ActiveState process-user-data) $(systemctl show -P Result process-user-data)"
base64 -w 1000 /sys/kernel/security/tpm0/binary_bios_measurements 2>/dev/null | sed 's/^/BOOT-TEST-EVENTLOG /'
echo BOOT-TEST-EVENTLOG-END
for i in $(seq 1 150); do
  answer=$(ip netns exec podns bash -c 'exec 3<>/dev/tcp/127.0.0.1/8006 &&
    printf "GET /cdh/resource/default/attestation-status/status HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3 &&
    cat <&3' 2>&1 | tr -d '\r' | tail -n 1)
  printf 'BOOT-TEST-POLL %d %s\n' "$i" "${answer:0:120}"
  if [ "$answer" = success ]; then
    echo "BOOT-TEST-UNITS $(systemctl is-active attestation-agent confidential-data-hub api-server-rest agent-policy-gate | tr '\n' ' ')"
    echo BOOT-TEST-RESULT success
    exit 0
  fi
  sleep 2
done
echo BOOT-TEST-RESULT failure
exit 1
PROBE
cat >"$W/boot-test.service" <<'UNIT'
[Unit]
Description=Boot test probe
After=process-user-data.service
Wants=process-user-data.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/boot-test-probe
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
UNIT
debugfs -w "$W/podvm.ext4" >/dev/null 2>&1 <<DEBUGFS
write $W/boot-test-probe /usr/local/sbin/boot-test-probe
sif /usr/local/sbin/boot-test-probe mode 0100755
write $W/boot-test.service /etc/systemd/system/boot-test.service
symlink /etc/systemd/system/multi-user.target.wants/boot-test.service /etc/systemd/system/boot-test.service
DEBUGFS
debugfs -R 'stat /usr/local/sbin/boot-test-probe' "$W/podvm.ext4" 2>/dev/null | grep -q 'Mode:  0755' ||
  die "could not write the probe into the image copy"
seal_start=$SECONDS
"$HERE/seal.sh" --root "$W/podvm.ext4" --kernel "$IMAGE/vmlinuz" --initrd "$IMAGE/initrd.img" \
  --osrel "$IMAGE/rootfs/usr/lib/os-release" --out "$W/sealed" --image-tag boot-test >"$W/seal.log" 2>&1 ||
  die "seal.sh failed (see $W/seal.log)"
MANIFEST=$W/sealed/podvm-measurements.json
DISK=$W/sealed/podvm.raw
step "sealed the probe's image in $((SECONDS - seal_start)) s: root hash $(cat "$W/sealed/roothash")"

# --- reference values: from the seal's manifest and the initdata, nothing from the guest -------------
"$REFERENCE_VALUES" --platform libvirt --tee tpm --initdata "$W/initdata.toml" \
  --measurements "$MANIFEST" --image-tag boot-test --format rvps-message >"$W/pcrs.json"
mv "$W/pcrs.json" "$W/reference-values/pcrs.json" # whole, never half-written, when the KBS reads it
reference() { # reference <NN>: the reference value of tpm_pcrNN
  sed 's/.*"payload":"\([^"]*\)".*/\1/' "$W/reference-values/pcrs.json" | base64 -d |
    sed "s/.*\"tpm_pcr$1\":\[\"\([0-9a-f]*\)\"\].*/\1/"
}
step "reference values from the build manifest mounted into the KBS"

# --- tampering after the seal -------------------------------------------------------------------
# The partition's first byte in the disk image (sfdisk prints the start in 512-byte sectors).
part_start() { sfdisk --dump "$DISK" | awk -v n="$1" '$1 ~ ("raw" n "$") { sub(",", "", $4); print $4 * 512 }'; }
case "$TAMPER" in
  verity)
    # One byte in the first block of broker-guest: the block the kernel reads first when it executes.
    block=$(debugfs -R 'bmap /usr/local/bin/broker-guest 0' "$W/podvm.ext4" 2>/dev/null)
    [[ "$block" =~ ^[0-9]+$ ]] || die "no block for /usr/local/bin/broker-guest in the root image"
    offset=$(($(part_start 2) + block * 4096 + 64))
    old=$(od -An -tx1 -j "$offset" -N1 "$DISK" | tr -d ' ')
    printf "$(printf '\\%03o' $((0x$old ^ 0xff)))" | dd of="$DISK" bs=1 seek="$offset" conv=notrunc status=none
    step "tamper: flipped the byte at $offset of the disk (block $block of the root, in broker-guest): 0x$old → $(od -An -tx1 -j "$offset" -N1 "$DISK" | tr -d ' ')"
    ;;
  cmdline)
    # The UKI as sealed, its command line with one more word, written back into the ESP.
    printf '%s broker.tampered=1' "$(cat "$W/sealed/cmdline")" >"$W/cmdline.tampered"
    # (objcopy --update-section keeps the old size: the section is replaced instead.)
    objcopy --remove-section .cmdline --add-section .cmdline="$W/cmdline.tampered" \
      --change-section-vma .cmdline=0x30000 "$W/sealed/podvm.efi" "$W/podvm.tampered.efi"
    mcopy -o -i "$DISK@@$(part_start 1)" "$W/podvm.tampered.efi" ::/EFI/BOOT/BOOTX64.EFI
    # What the tampered UKI's boot will measure, for the check that the guest booted exactly it.
    "$REPO/node_modules/.bin/node" "$HERE/measure.ts" --uki "$W/podvm.tampered.efi" --image-tag tampered \
      >"$W/tampered-measurements.json"
    step "tamper: the UKI's command line is now: $(cat "$W/cmdline.tampered")"
    ;;
esac

# --- boot: OVMF, the disk's ESP first ------------------------------------------------------------
swtpm socket --tpm2 --tpmstate "dir=$W/tpm" --ctrl "type=unixio,path=$W/swtpm.sock" \
  --log "file=$W/swtpm.log" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$W/swtpm.sock" ] && break; sleep 0.05; done
cp "$OVMF_VARS" "$W/OVMF_VARS.fd"
: >"$W/console.log"
CPU=max
[ "$ACCEL" = kvm ] && CPU=host
boot_start=$SECONDS
qemu-system-x86_64 -machine "q35,accel=$ACCEL" -cpu "$CPU" -m 2048 -smp 2 -display none -monitor none \
  -serial "file:$W/console.log" -no-reboot \
  -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" \
  -drive "if=pflash,format=raw,unit=1,file=$W/OVMF_VARS.fd" \
  -drive "file=$DISK,if=none,id=disk0,format=raw" -device virtio-blk-pci,drive=disk0,bootindex=0 \
  -drive "file=$W/cidata.iso,if=none,id=cidata,format=raw,readonly=on" -device virtio-blk-pci,drive=cidata \
  -chardev "socket,id=chrtpm,path=$W/swtpm.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm \
  -device tpm-tis,tpmdev=tpm0 \
  -netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile= >"$W/qemu.log" 2>&1 &
QEMU=$!
PIDS+=("$QEMU")
step "booting${TAMPER:+ the tampered ($TAMPER) image} (console: $W/console.log)"

# The probe's lines, without the journal's "[time] unit[pid]: " prefix.
probe_lines() { grep -ao 'BOOT-TEST-[A-Z-]* .*\|BOOT-TEST-EVENTLOG-END' "$W/console.log" | tr -d '\r' || true; }
# Computed (manifest) and booted (guest) PCRs side by side; saves the guest's event log.
pcr_table() {
  local lines=$1 n computed booted
  grep '^BOOT-TEST-EVENTLOG ' <<<"$lines" | cut -d' ' -f2 | base64 -d >"$W/eventlog.bin" 2>/dev/null || true
  printf 'boot-test: PCR  %-64s  %s\n' "computed (build manifest)" "booted (guest)"
  for n in 03 04 09 11 12; do
    computed=$(reference "$n")
    booted=$(grep "^BOOT-TEST-PCR $n " <<<"$lines" | awk '{print $3}')
    printf 'boot-test: %s   %s  %s %s\n' "$n" "$computed" "$booted" "$([ "$computed" = "$booted" ] && echo '=' || echo DIFFERS)"
  done
}
deadline=$((SECONDS + TIMEOUT))
while [ $SECONDS -lt $deadline ]; do
  kill -0 "$QEMU" 2>/dev/null || die "QEMU exited (see $W/qemu.log, $W/console.log)"
  lines=$(probe_lines)
  if [ "$TAMPER" = verity ]; then
    grep -q '^BOOT-TEST-POLL [0-9]* success' <<<"$lines" && die "the tampered image got the resource"
    # dm-verity refuses the block; the chain's first service cannot execute broker-guest.
    if grep -aq 'device-mapper: verity.*data block.*is corrupted' "$W/console.log" &&
      grep -q '^BOOT-TEST-UNIT process-user-data failed ' <<<"$lines" &&
      [ "$(grep -c '^BOOT-TEST-POLL ' <<<"$lines")" -ge 3 ]; then
      step "dm-verity: $(grep -ao -m1 'device-mapper: verity.*data block.*is corrupted' "$W/console.log" | tr -d '\r')"
      step "process-user-data: $(grep -m1 '^BOOT-TEST-UNIT process-user-data ' <<<"$lines" | cut -d' ' -f3-); $(grep -c '^BOOT-TEST-POLL ' <<<"$lines") requests refused in the guest"
      if grep -q '"path":"/kbs/v0/\(auth\|attest\)"' "$W/kbs.log"; then die "the tampered guest reached the KBS"; fi
      step "the KBS saw no attestation: the chain never started"
      step "PASSED (tamper verity: read fails under dm-verity after $((SECONDS - boot_start)) s)"
      exit 0
    fi
  elif [ "$TAMPER" = cmdline ]; then
    grep -q '^BOOT-TEST-POLL [0-9]* success' <<<"$lines" && die "the tampered image got the resource"
    if grep -q '^BOOT-TEST-EVENTLOG-END' <<<"$lines" && grep -q '"kind":"PolicyDeny"' "$W/kbs.log" &&
      [ "$(grep -c '^BOOT-TEST-POLL ' <<<"$lines")" -ge 3 ]; then
      pcr_table "$lines"
      [ "$(reference 11)" != "$(grep '^BOOT-TEST-PCR 11 ' <<<"$lines" | awk '{print $3}')" ] ||
        die "PCR 11 did not change with the command line"
      for n in 04 09 11; do
        predicted=$(sed -n "s/.*\"pcr$n\": \"\([0-9a-f]\{64\}\)\".*/\1/p" "$W/tampered-measurements.json")
        [ "$predicted" = "$(grep "^BOOT-TEST-PCR $n " <<<"$lines" | awk '{print $3}')" ] ||
          die "PCR $n of the tampered boot is not what measure.ts computes for the tampered UKI"
      done
      step "PCR 04, 09 and 11 of the tampered boot are what measure.ts computes for the tampered UKI"
      denied=$(grep -m1 '"kind":"PolicyDeny"' "$W/kbs.log" | sed 's/.*"cause":"\([^"]*\)".*/\1/')
      step "the KBS refused the tampered guest: PolicyDeny ($denied)"
      step "PASSED (tamper cmdline: PCR 11 differs, PolicyDeny after $((SECONDS - boot_start)) s)"
      exit 0
    fi
  elif grep -q '^BOOT-TEST-RESULT success' <<<"$lines"; then
    pcr_table "$lines"
    for n in 03 04 09 11 12; do
      [ "$(reference "$n")" = "$(grep "^BOOT-TEST-PCR $n " <<<"$lines" | awk '{print $3}')" ] ||
        die "PCR $n of the guest is not the build manifest's"
    done
    [ "$(reference 08)" = "$(grep '^BOOT-TEST-PCR 08 ' <<<"$lines" | awk '{print $3}')" ] ||
      die "PCR 8 of the guest is not the one computed from the initdata"
    units=$(grep -m1 '^BOOT-TEST-UNITS ' <<<"$lines" | sed 's/^BOOT-TEST-UNITS //; s/ *$//')
    [ "$units" = "active active active active" ] || die "not every service of the chain is active: $units"
    step "status resource released after $(grep -c '^BOOT-TEST-POLL ' <<<"$lines") requests; attestation-agent, confidential-data-hub, api-server-rest and agent-policy-gate active"
    step "PASSED (measured boot to released resource in $((SECONDS - boot_start)) s)"
    exit 0
  fi
  if grep -q '^BOOT-TEST-RESULT failure' <<<"$lines"; then
    [ -n "$TAMPER" ] || pcr_table "$lines"
    die "the probe gave up (see $W/console.log, $W/kbs.log)"
  fi
  sleep 2
done
lines=$(probe_lines)
grep -q '^BOOT-TEST-EVENTLOG-END' <<<"$lines" && pcr_table "$lines"
die "no result within $TIMEOUT s (see $W/console.log)"
