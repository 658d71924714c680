#!/usr/bin/env bash
# Installs what a make target needs on a Debian machine, when missing, then the npm workspace (Node 24
# comes from the `node` npm package, so the system Node's version does not matter).
#   scripts/install-deps.sh         the build and lint: a C compiler for the attester's static ioctl shims
#   scripts/install-deps.sh test    and the tests' real peers, the demo's, and the guest image's build
#                                   and boot test
#   scripts/install-deps.sh images  and Debian's arm64 packages for the arm64 container images
# Without Debian's package manager it names, in one line, what to install instead.
set -euo pipefail
cd "$(dirname "$0")/.."

SET=${1:-build}
case "$SET" in
  build | test | images) ;;
  *)
    echo "install-deps: unknown set '$SET' (one of: build, test, images)" >&2
    exit 2
    ;;
esac

# The build's: the attester's ioctl shims are static C (musl-gcc, else gcc -static).
BUILD_PACKAGES=(gcc libc6-dev musl-tools)
# Debian packages the tests use as real peers, the demo's, and the guest image's build and boot test
# (debootstrap, e2fsprogs, qemu-system-x86). Add to this list as new peers come.
TEST_PACKAGES=(openssl curl golang-go golang-github-containerd-ttrpc-dev swtpm swtpm-tools tpm2-tools docker-registry skopeo umoci tinyproxy gpg gpg-agent faketime redis-server postgresql genisoimage systemd debootstrap e2fsprogs cryptsetup-bin systemd-boot-efi ovmf dosfstools mtools fdisk qemu-system-x86 protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf golang-google-grpc-dev python3-cryptography chromium nebula runc qemu-user-static prometheus)
WANTED=("${BUILD_PACKAGES[@]}")
[ "$SET" = build ] || WANTED+=("${TEST_PACKAGES[@]}")

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  # Elsewhere than Debian the build only needs a C compiler that links statically; the rest, by name.
  if [ "$SET" != build ] || ! command -v gcc >/dev/null; then
    echo "install-deps: no Debian package manager (apt-get, dpkg-query) here: install the Debian packages ${WANTED[*]} (or their equivalents), then run this again" >&2
    exit 1
  fi
else
  missing=()
  for p in "${WANTED[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# The container images (make images) are built for linux/amd64 and linux/arm64 from Debian's packages
# of both architectures: apt downloads the arm64 ones once dpkg knows that architecture.
if [ "$SET" = images ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64 || ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
    echo "enabling Debian's arm64 packages (for the arm64 images)"
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
  fi
fi

# `npm ci` installs exactly what the lockfile pins (it never rewrites package-lock.json) and runs the
# approved install scripts (node, esbuild). The lockfile lists every platform's optional packages
# (biome's and esbuild's binaries), so it is the same on every machine. Only when node_modules is
# missing or older than the lockfile: npm ci starts from an empty node_modules.
if [ ! -x node_modules/.bin/node ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  command -v npm >/dev/null || {
    echo "install-deps: npm is missing: install Debian's npm package (or any npm), then run this again" >&2
    exit 1
  }
  npm ci --no-audit --no-fund
fi
node_modules/.bin/node --version
