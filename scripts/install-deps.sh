#!/usr/bin/env bash
# Installs everything the build, the tests and the demo need on a fresh Debian machine:
# Debian packages (when missing) and the npm workspace (Node 24 comes from the `node` npm package).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use as real peers, and the guest image's build and boot test (debootstrap,
# e2fsprogs, qemu-system-x86). Add to this list as issues bring new peers.
DEB_PACKAGES=(openssl curl golang-go golang-github-containerd-ttrpc-dev swtpm swtpm-tools tpm2-tools docker-registry skopeo umoci tinyproxy gpg gpg-agent faketime redis-server postgresql genisoimage systemd debootstrap e2fsprogs cryptsetup-bin systemd-boot-efi ovmf dosfstools mtools fdisk qemu-system-x86 gcc libc6-dev musl-tools protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf python3-cryptography chromium nebula runc qemu-user-static prometheus)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The container images (make images) are built for linux/amd64 and linux/arm64 from Debian's packages
# of both architectures: apt downloads the arm64 ones once dpkg knows that architecture.
if ! dpkg --print-foreign-architectures | grep -qx arm64 || ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
  echo "enabling Debian's arm64 packages (for the arm64 images)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi

# `npm ci` installs exactly what the lockfile pins (it never rewrites package-lock.json) and runs the
# approved install scripts (node, esbuild). The lockfile lists every platform's optional packages
# (biome's and esbuild's binaries), so it is the same on every machine. Only when node_modules is
# missing or older than the lockfile: npm ci starts from an empty node_modules.
if [ ! -x node_modules/.bin/node ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
node_modules/.bin/node --version
