#!/bin/sh
# Runs worker-build (release) in the crate at DIR, pointed at the tools
# installed from the registries this machine reaches instead of the binaries
# it would download (see local/setup.sh): the Worker (local/build.sh), a
# previous release (local/baseline.sh), the bench's Rust floor
# (tests/bench/run.mjs). A caller's own WASM_BINDGEN_BIN, ESBUILD_BIN,
# WASM_OPT_BIN or CARGO_TARGET_DIR is kept.
#
#   sh local/worker-build.sh DIR
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen)}"
export ESBUILD_BIN="${ESBUILD_BIN:-$root/node_modules/.bin/esbuild}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$root/node_modules/.bin/wasm-opt}"
cd "$1"
worker-build --release
