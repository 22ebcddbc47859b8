# threadline: the README's commands. Each target installs what it needs first
# (local/setup.sh), and is quick when it already is.
.PHONY: setup build dev lint test test-core test-client test-workerd test-conformance bench soak deploy clean

export WRANGLER_SEND_METRICS := false
# .tools/node: the Node the tools run on, when the machine's is older
# (local/setup.sh installs it from the npm registry).
export PATH := $(CURDIR)/.tools/node/bin:$(HOME)/.cargo/bin:$(PATH)

setup:
	@bash local/setup.sh

build: setup
	@sh local/build.sh >build.log 2>&1 || (cat build.log; exit 1)

# Serves on http://127.0.0.1:8787 with state under .dev-state/ (wrangler runs
# local/build.sh itself, from wrangler.toml's [build] command).
dev: setup
	@bash local/dev.sh

test: lint build test-core test-client test-workerd test-conformance

# rustfmt, clippy with warnings as errors (the core natively, the Worker for
# wasm), the TypeScript of the client and the page type-checked, and every
# JavaScript import of the Worker declared `catch` (local/lint-imports.mjs),
# and no catch-all arm in a protocol's match over the log's events nor more
# string-keyed indexing there (local/lint-mappings.mjs).
lint: setup
	node local/lint-imports.mjs src
	node local/lint-mappings.mjs
	cargo fmt --check
	cargo clippy -p threadline-durable --all-targets --quiet -- -D warnings
	cargo clippy -p threadline --target wasm32-unknown-unknown --quiet -- -D warnings
	cargo clippy -p floor-held-rs --target wasm32-unknown-unknown --quiet -- -D warnings
	node_modules/.bin/tsc -p client --noEmit

# The pure core, natively.
test-core: setup
	cargo test -p threadline-durable

# The TypeScript client: reducer vs the shared fixtures, SSE parser,
# resumable connection, generated types current with the schema.
test-client: build
	node --test "client/test/*.test.mjs"

# Integration tests over real HTTP on workerd (Miniflare), and the page in
# headless Chromium against `wrangler dev` (tests/browser/).
test-workerd: build
	node --test --test-concurrency=1 "tests/**/*.test.mjs"

# The public Durable Streams conformance suite against /v1/stream/* on
# `wrangler dev` (a free port, state in a temporary dir).
test-conformance: build
	node tests/conformance/run.mjs

bench: build
	node tests/bench/run.mjs

# The resilience scenarios at full size, with their figures.
soak: build
	node tests/soak/run.mjs

# Checks the configuration, dry-runs, then `wrangler deploy` (docs/deploy.md).
deploy: setup
	@bash local/deploy.sh

clean:
	rm -rf build target .dev-state build.log web/dist client/dist test-artifacts tests/bench/floor-held-rs/build tests/bench/agents-peer/dist
