# All targets run on the Node 24 that the workspace pins (node_modules/.bin/node), via npm scripts.
.PHONY: deps build test lint bench demo guest-image guest-image-test clean

deps:
	@scripts/install-deps.sh

build: deps
	npm run --silent build

test: build
	@npm test; code=$$?; node_modules/.bin/node scripts/test-summary.mjs; exit $$code

lint: deps
	npm run --silent lint

bench: build
	npm run --silent bench

demo: build
	scripts/demo.sh

# The pod-VM image (a Debian rootfs with the guest executables and units); needs root, debootstrap, e2fsprogs.
guest-image: build
	guest-image/build.sh

# Boots the image under QEMU (KVM when it runs guests, else TCG) with swtpm as the vTPM against a KBS on
# the host; .ci/run runs it after the tests.
guest-image-test: guest-image
	guest-image/boot-test.sh

clean:
	rm -rf dist .bench-out
