#!/usr/bin/env bash
# Builds the pod-VM guest image: a Debian root file system (debootstrap) carrying the guest multi-call
# executable, its command links and the systemd units of guest-image/rootfs, enabled, sealed by seal.sh
# into a measured UKI + dm-verity disk.
#
#   guest-image/build.sh [--out DIR] [--bin DIR] [--suite bookworm] [--mirror URL] [--no-kernel]
#                        [--image-tag TAG] [--base DIR]
#
# Outputs in --out (default dist/guest-image):
#   rootfs/        the tree
#   rootfs.tar     the tree as a tar archive (numeric owners)
#   podvm.ext4     the root file system image (ext4, mke2fs -d; no loop mount), before sealing
#   vmlinuz, initrd.img   the image's kernel and initramfs (the initramfs opens a verity root)
#   podvm.efi, podvm.raw, roothash, cmdline, podvm-measurements.json
#                  the measured image (seal.sh): the UKI, the GPT disk that boots it under OVMF with
#                  the root behind dm-verity, and the PCRs its boot extends, computed from the UKI
# --no-kernel leaves out the kernel (a container-style tree for other boot chains), and so all but the
# first two. --base copies an already debootstrapped tree (of the same packages) instead of running
# debootstrap: for iterating on the later steps.
#
# Needs root (debootstrap, chroot), the Debian packages debootstrap, e2fsprogs and those seal.sh names,
# and network access to the Debian mirror. The guest executable comes from `make build`
# (dist/bin/broker-guest).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
# shellcheck source=guest-image/progress.sh
. "$HERE/progress.sh"

# Commands of the guest executable that the image links in /usr/local/bin.
COMMANDS=(attestation-agent confidential-data-hub api-server-rest agent-policy-gate sealed-secret-init encrypted-disk process-user-data sandbox-agent)
# Units enabled at boot: the provisioning step and the path units that start the rest, and the sandbox
# agent (started on its own, as kata's agent: the gate connects to it on first use).
ENABLE=(process-user-data.service attestation-agent.path api-server-rest.path sandbox-agent.service systemd-networkd.service)

OUT=$REPO/dist/guest-image
BIN=$REPO/dist/bin
SUITE=bookworm
# The Debian mirror: --mirror, else $DEBIAN_MIRROR, else this machine's apt sources.
MIRROR=
KERNEL=1
TAG=podvm:dev
BASE=

usage() {
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    --mirror) MIRROR=$2; shift 2 ;;
    --image-tag) TAG=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --no-kernel) KERNEL=0; shift ;;
    -h|--help) usage ;;
    *) echo "build.sh: unknown argument $1" >&2; usage ;;
  esac
done

die() {
  progress_abort
  echo "build.sh: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
for p in debootstrap mke2fs chroot; do
  command -v "$p" >/dev/null || die "$p not found: run scripts/install-deps.sh (Debian packages debootstrap, e2fsprogs)"
done
GUEST=$BIN/broker-guest
[ -x "$GUEST" ] || die "$GUEST is missing: run make build"
# The attester's ioctl shims (static C, for kernels without configfs-tsm) go beside it.
SHIMS=(broker-snp-report broker-tdx-report)
for s in "${SHIMS[@]}"; do [ -x "$BIN/$s" ] || die "$BIN/$s is missing: run make build"; done
# Every command must be one the executable answers to (the provisioning step included).
"$GUEST" process-user-data default-initdata >/dev/null 2>&1 ||
  die "$GUEST has no process-user-data command: add it to packages/executables/src/guest.ts and run make build"

# cryptsetup-bin: cryptsetup, with which the data hub opens the encrypted data disk (LUKS2), and
# veritysetup, which the initramfs hook copies to open the verity root; e2fsprogs: mkfs.ext4 for that disk.
# runc runs the sandbox agent's containers; bsdextrautils has `script` (the pseudo-terminal of a terminal
# process); the agent's other tools (stty, mount, umount, ip) are in minbase's coreutils and mount, and
# iproute2.
PACKAGES=systemd,systemd-sysv,udev,dbus,iproute2,ca-certificates,kmod,tpm-udev,cryptsetup-bin,e2fsprogs,runc,bsdextrautils
[ "$KERNEL" = 1 ] && PACKAGES=$PACKAGES,linux-image-amd64,initramfs-tools

ROOTFS=$OUT/rootfs
# debootstrap mounts /proc (and more) inside the tree while it works: never remove a tree that still has
# mounts, and leave none behind when this script stops early.
unmount_tree() {
  if command -v findmnt >/dev/null; then
    { findmnt -rn -o TARGET | grep -F "$ROOTFS/" || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  fi
}
trap 'progress_abort; unmount_tree' EXIT
mkdir -p "$OUT"
unmount_tree
rm -rf --one-file-system "$ROOTFS" "$OUT/rootfs.tar" "$OUT/podvm.ext4" "$OUT/vmlinuz" "$OUT/initrd.img" \
  "$OUT/podvm.efi" "$OUT/podvm.raw" "$OUT/roothash" "$OUT/cmdline" "$OUT/podvm-measurements.json"
if [ -n "$BASE" ]; then
  echo "build.sh: copying the debootstrapped tree $BASE"
  progress_start "copying $BASE"
  cp -a "$BASE" "$ROOTFS"
  progress_end
else
  [ -n "$MIRROR" ] || MIRROR=$("$REPO/scripts/debian-mirror.sh" "$SUITE")
  echo "build.sh: debootstrap $SUITE ($PACKAGES) from $MIRROR"
  progress_start "debootstrap $SUITE" "$OUT/debootstrap.log"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $OUT/debootstrap.log"
  progress_end
fi

# The guest executable and its command links (dispatch on argv[0]).
install -D -m 0755 "$GUEST" "$ROOTFS/usr/local/bin/broker-guest"
for s in "${SHIMS[@]}"; do install -D -m 0755 "$BIN/$s" "$ROOTFS/usr/local/bin/$s"; done
for c in "${COMMANDS[@]}"; do ln -sf broker-guest "$ROOTFS/usr/local/bin/$c"; done

# Units, defaults, network and the documentation.
cp -a "$HERE/rootfs/." "$ROOTFS/"
install -D -m 0644 "$HERE/README.md" "$ROOTFS/usr/share/doc/broker-guest/README.md"
mkdir -p "$ROOTFS/etc/systemd/network"
cat >"$ROOTFS/etc/systemd/network/20-wired.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET
systemctl --root="$ROOTFS" --quiet enable "${ENABLE[@]}"

# PCR 11 holds what systemd-stub measured and nothing else: systemd's boot-phase measurements
# (systemd-pcrphase) would extend it again at sysinit and when the system is up, so the value an
# attestation sees would depend on when it runs.
systemctl --root="$ROOTFS" --quiet mask systemd-pcrphase.service systemd-pcrphase-sysinit.service \
  systemd-pcrphase-initrd.service

# A fresh identity per boot, no login for anyone.
echo podvm >"$ROOTFS/etc/hostname"
: >"$ROOTFS/etc/machine-id"
chroot "$ROOTFS" passwd --lock root >/dev/null
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log

if [ "$KERNEL" = 1 ]; then
  # The initramfs again, now with the verity and overlay scripts of rootfs/etc/initramfs-tools.
  progress_start "update-initramfs" "$OUT/update-initramfs.log"
  chroot "$ROOTFS" update-initramfs -u -k all >"$OUT/update-initramfs.log" 2>&1 ||
    die "update-initramfs failed; see $OUT/update-initramfs.log"
  progress_end
fi
progress_start "rootfs.tar"
tar --numeric-owner -C "$ROOTFS" -cf "$OUT/rootfs.tar" .
progress_end
if [ "$KERNEL" = 1 ]; then
  cp "$(readlink -f "$ROOTFS/vmlinuz")" "$OUT/vmlinuz"
  cp "$(readlink -f "$ROOTFS/initrd.img")" "$OUT/initrd.img"
  # Read-only once sealed: the tree plus a quarter for the file system's own blocks.
  ROOT_MIB=$(($(du -sm --apparent-size "$ROOTFS" | cut -f1) * 5 / 4 + 64))
  progress_start "podvm.ext4 (${ROOT_MIB} MiB)"
  mke2fs -q -t ext4 -L podvm-root -d "$ROOTFS" "$OUT/podvm.ext4" "${ROOT_MIB}M"
  progress_end
  "$HERE/seal.sh" --root "$OUT/podvm.ext4" --kernel "$OUT/vmlinuz" --initrd "$OUT/initrd.img" \
    --osrel "$ROOTFS/usr/lib/os-release" --out "$OUT" --image-tag "$TAG"
fi
echo "build.sh: guest image in $OUT ($(du -sh "$ROOTFS" | cut -f1) root file system)"
