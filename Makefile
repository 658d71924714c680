# All targets run on the Node 24 that the workspace pins (node_modules/.bin/node), via npm scripts.
.PHONY: deps build test lint bench demo clean

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

clean:
	rm -rf dist .bench-out
