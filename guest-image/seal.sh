#!/usr/bin/env bash
# Seals a root file system image into the measured pod-VM disk: a dm-verity hash tree over the root,
# a unified kernel image (systemd-stub + kernel + initrd + os-release + a command line carrying the
# root hash), a GPT disk whose EFI system partition boots that UKI under OVMF, and the measurement
# manifest computed from the UKI (guest-image/measure.ts).
#
#   guest-image/seal.sh --root FILE.ext4 --kernel FILE --initrd FILE --osrel FILE --out DIR
#                       [--image-tag TAG] [--cmdline TEXT]
#
# Outputs in --out: podvm.efi (the UKI), podvm.raw (the disk: ESP, root data, root verity),
# roothash, cmdline, podvm-measurements.json. Needs no root: veritysetup (cryptsetup-bin), objcopy
# (binutils), mkfs.vfat and mcopy (dosfstools, mtools), sfdisk (fdisk), the systemd-stub of
# systemd-boot-efi, and the workspace's Node.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=guest-image/progress.sh
. "$HERE/progress.sh"
NODE=${NODE:-$REPO/node_modules/.bin/node}
STUB=${STUB:-/usr/lib/systemd/boot/efi/linuxx64.efi.stub}

# The Discoverable Partitions Specification's type GUIDs (x86-64).
ESP_TYPE=C12A7328-F81F-11D2-BA4B-00A0C93EC93B
ROOT_TYPE=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709
ROOT_VERITY_TYPE=2C7357ED-EBD2-46D9-AEC1-23D3B8F86E1A
# The kernel command line besides root= and roothash= (console on the serial port, the units' names).
# The initramfs opens the verity root; systemd's own generators would set it up a second time
# (veritysetup) or mount the ESP (gpt-auto), so they are off.
CMDLINE="console=ttyS0 systemd.show_status=1 net.ifnames=1 panic=-1 systemd.verity=0 systemd.gpt_auto=0"

ROOT= KERNEL= INITRD= OSREL= OUT= TAG=podvm
die() {
  progress_abort
  echo "seal.sh: $*" >&2
  exit 1
}
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT=$2; shift 2 ;;
    --kernel) KERNEL=$2; shift 2 ;;
    --initrd) INITRD=$2; shift 2 ;;
    --osrel) OSREL=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --image-tag) TAG=$2; shift 2 ;;
    --cmdline) CMDLINE=$2; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
for f in "$ROOT" "$KERNEL" "$INITRD" "$OSREL" "$STUB"; do [ -f "$f" ] || die "missing input: '$f'"; done
[ -n "$OUT" ] || die "--out is required"
for p in veritysetup objcopy mkfs.vfat mcopy sfdisk; do
  command -v "$p" >/dev/null || die "$p not found: install the Debian packages cryptsetup-bin binutils dosfstools mtools fdisk"
done
[ -x "$NODE" ] || die "$NODE is missing: run make deps"
mkdir -p "$OUT"
rm -f "$OUT/podvm.efi" "$OUT/podvm.raw" "$OUT/roothash" "$OUT/cmdline" "$OUT/podvm-measurements.json"
T=$(mktemp -d "$OUT/.seal.XXXXXX")
trap 'progress_abort; rm -rf "$T"' EXIT

# --- dm-verity: the hash tree of the root image; the root hash names both partitions ---------------
progress_start "dm-verity hash tree"
veritysetup format --data-block-size 4096 --hash-block-size 4096 "$ROOT" "$T/root.verity" >"$T/verity.txt"
ROOTHASH=$(sed -n 's/^Root hash:[[:space:]]*\([0-9a-f]\{64\}\)$/\1/p' "$T/verity.txt")
[ -n "$ROOTHASH" ] || die "veritysetup printed no root hash"
as_uuid() { sed 's/^\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)\(.\{12\}\)$/\1-\2-\3-\4-\5/' <<<"$1"; }
DATA_UUID=$(as_uuid "${ROOTHASH:0:32}")
HASH_UUID=$(as_uuid "${ROOTHASH:32:32}")

# --- the UKI: sections placed above the stub's own image, in the order systemd's docs give --------
progress_end
progress_start "UKI and GPT disk"
printf 'root=/dev/mapper/root ro roothash=%s %s' "$ROOTHASH" "$CMDLINE" >"$T/cmdline"
objcopy \
  --add-section .osrel="$OSREL" --change-section-vma .osrel=0x20000 \
  --add-section .cmdline="$T/cmdline" --change-section-vma .cmdline=0x30000 \
  --add-section .linux="$KERNEL" --change-section-vma .linux=0x2000000 \
  --add-section .initrd="$INITRD" --change-section-vma .initrd=0x4000000 \
  "$STUB" "$T/podvm.efi"

# --- the ESP (FAT, the UKI at the removable-media path) and the GPT disk ----------------------------
mib() { echo $((($(stat -c %s "$1") + 1048575) / 1048576)); }
ESP_MIB=$(($(mib "$T/podvm.efi") + 16))
mkfs.vfat -C -n PODVM-ESP "$T/esp.img" $((ESP_MIB * 1024)) >/dev/null
mmd -i "$T/esp.img" ::/EFI ::/EFI/BOOT
mcopy -i "$T/esp.img" "$T/podvm.efi" ::/EFI/BOOT/BOOTX64.EFI
ROOT_MIB=$(mib "$ROOT")
HASH_MIB=$(mib "$T/root.verity")
# 1 MiB before the first partition and after the last (the backup GPT).
TOTAL_MIB=$((1 + ESP_MIB + ROOT_MIB + HASH_MIB + 1))
rm -f "$T/podvm.raw"
truncate -s "${TOTAL_MIB}M" "$T/podvm.raw"
s() { echo $(($1 * 2048)); } # MiB → 512-byte sectors
sfdisk --quiet --no-reread --no-tell-kernel "$T/podvm.raw" <<SFDISK
label: gpt
start=$(s 1), size=$(s "$ESP_MIB"), type=$ESP_TYPE, name="esp"
start=$(s $((1 + ESP_MIB))), size=$(s "$ROOT_MIB"), type=$ROOT_TYPE, uuid=$DATA_UUID, name="root-x86-64"
start=$(s $((1 + ESP_MIB + ROOT_MIB))), size=$(s "$HASH_MIB"), type=$ROOT_VERITY_TYPE, uuid=$HASH_UUID, name="root-x86-64-verity"
SFDISK
put() { dd if="$1" of="$T/podvm.raw" bs=1M seek="$2" conv=notrunc,sparse status=none; }
put "$T/esp.img" 1
put "$ROOT" $((1 + ESP_MIB))
put "$T/root.verity" $((1 + ESP_MIB + ROOT_MIB))

progress_end
# --- the manifest, from the UKI ------------------------------------------------------------------
"$NODE" "$HERE/measure.ts" --uki "$T/podvm.efi" --image-tag "$TAG" --roothash "$ROOTHASH" >"$T/manifest.json"

mv "$T/podvm.efi" "$OUT/podvm.efi"
mv "$T/podvm.raw" "$OUT/podvm.raw"
cp "$T/cmdline" "$OUT/cmdline"
echo "$ROOTHASH" >"$OUT/roothash"
mv "$T/manifest.json" "$OUT/podvm-measurements.json"
echo "seal.sh: $OUT/podvm.raw (ESP ${ESP_MIB} MiB, root ${ROOT_MIB} MiB, verity ${HASH_MIB} MiB), root hash $ROOTHASH"
