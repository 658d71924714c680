# All targets run on the Node 24 that the workspace pins (node_modules/.bin/node), via npm scripts.
.PHONY: deps deps-test deps-images build test lint bench demo images guest-image guest-image-test clean

# What the build and lint need (a C compiler for the static ioctl shims, the npm workspace); deps-test adds the tests' real peers (qemu, chromium,
# Go, redis, swtpm, PostgreSQL, …), which the demo and the guest image use too; deps-images Debian's arm64
# packages for the arm64 images.
deps:
	@scripts/install-deps.sh

deps-test:
	@scripts/install-deps.sh test

deps-images:
	@scripts/install-deps.sh images

build: deps
	npm run --silent build

test: deps-test build
	@npm test; code=$$?; node_modules/.bin/node scripts/test-summary.mjs; exit $$code

lint: deps
	npm run --silent lint

bench: deps-test build
	npm run --silent bench

demo: deps-test build
	scripts/demo.sh

# The container images (kbs, attestation-service, rvps, tools) as OCI image layouts in dist/images, for
# linux/amd64 and linux/arm64; IMAGE_SIGN_KEY=<PEM private key> signs them in cosign's format.
images: deps-images build
	node_modules/.bin/node scripts/images.mjs

# The pod-VM image (a Debian rootfs with the guest executables and units); needs root, debootstrap, e2fsprogs.
guest-image: deps-test build
	guest-image/build.sh

# Boots the measured image (UKI + dm-verity) under QEMU and OVMF (KVM when it runs guests, else TCG)
# with swtpm as the vTPM against a KBS whose reference values come from the build's manifest; then the
# two tampered boots (a byte of the verity root, a word of the UKI's command line), which must not get
# the resource. .ci/run runs the same after the tests.
guest-image-test: guest-image
	guest-image/boot-test.sh
	guest-image/boot-test.sh --tamper verity
	guest-image/boot-test.sh --tamper cmdline

clean:
	rm -rf dist .bench-out
