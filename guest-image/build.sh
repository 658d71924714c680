#!/usr/bin/env bash
# Builds the pod-VM guest image: a Debian root file system (debootstrap) carrying the guest multi-call
# executable, its command links and the systemd units of guest-image/rootfs, enabled.
#
#   guest-image/build.sh [--out DIR] [--bin DIR] [--suite bookworm] [--mirror URL] [--size 2G] [--no-kernel]
#
# Outputs in --out (default dist/guest-image):
#   rootfs/        the tree
#   rootfs.tar     the tree as a tar archive (numeric owners)
#   podvm.ext4     an ext4 file system image of the tree (mke2fs -d; no loop mount, no partition table)
#   vmlinuz, initrd.img   the image's kernel and initramfs, for a direct kernel boot:
#                  qemu ... -kernel vmlinuz -initrd initrd.img -append "root=/dev/vda rw console=ttyS0"
# --no-kernel leaves out the kernel (a container-style tree for other boot chains), and so the last two.
#
# Needs root (debootstrap, chroot), the Debian packages debootstrap and e2fsprogs, and network access to
# the Debian mirror. The guest executable comes from `make build` (dist/bin/broker-guest).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")

# Commands of the guest executable that the image links in /usr/local/bin.
COMMANDS=(attestation-agent confidential-data-hub api-server-rest agent-policy-gate sealed-secret-init process-user-data)
# Units enabled at boot: the provisioning step and the path units that start the rest.
ENABLE=(process-user-data.service attestation-agent.path confidential-data-hub.path api-server-rest.path agent-policy-gate.path sealed-secret-init.path systemd-networkd.service)

OUT=$REPO/dist/guest-image
BIN=$REPO/dist/bin
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
SIZE=2G
KERNEL=1

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    --mirror) MIRROR=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --no-kernel) KERNEL=0; shift ;;
    -h|--help) usage ;;
    *) echo "build.sh: unknown argument $1" >&2; usage ;;
  esac
done

die() { echo "build.sh: $*" >&2; exit 1; }
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

PACKAGES=systemd,systemd-sysv,udev,dbus,iproute2,ca-certificates,kmod,tpm-udev
[ "$KERNEL" = 1 ] && PACKAGES=$PACKAGES,linux-image-amd64,initramfs-tools

ROOTFS=$OUT/rootfs
# debootstrap mounts /proc (and more) inside the tree while it works: never remove a tree that still has
# mounts, and leave none behind when this script stops early.
unmount_tree() {
  if command -v findmnt >/dev/null; then
    { findmnt -rn -o TARGET | grep -F "$ROOTFS/" || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  fi
}
trap unmount_tree EXIT
mkdir -p "$OUT"
unmount_tree
rm -rf --one-file-system "$ROOTFS" "$OUT/rootfs.tar" "$OUT/podvm.ext4" "$OUT/vmlinuz" "$OUT/initrd.img"
echo "build.sh: debootstrap $SUITE ($PACKAGES) from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$OUT/debootstrap.log" 2>&1 ||
  die "debootstrap failed; see $OUT/debootstrap.log"

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

# A fresh identity per boot, no login for anyone.
echo podvm >"$ROOTFS/etc/hostname"
: >"$ROOTFS/etc/machine-id"
chroot "$ROOTFS" passwd --lock root >/dev/null
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log

tar --numeric-owner -C "$ROOTFS" -cf "$OUT/rootfs.tar" .
if [ "$KERNEL" = 1 ]; then
  cp "$(readlink -f "$ROOTFS/vmlinuz")" "$OUT/vmlinuz"
  cp "$(readlink -f "$ROOTFS/initrd.img")" "$OUT/initrd.img"
  mke2fs -q -t ext4 -L podvm-root -d "$ROOTFS" "$OUT/podvm.ext4" "$SIZE"
fi
echo "build.sh: guest image in $OUT ($(du -sh "$ROOTFS" | cut -f1) root file system)"
