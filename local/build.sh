#!/bin/sh
# Builds the Worker (build/index.js + wasm) with worker-build, pointing it at
# tools installed from the registries this machine reaches instead of the
# binaries it would download (see local/setup.sh).
set -eu
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen)}"
export ESBUILD_BIN="${ESBUILD_BIN:-$PWD/node_modules/.bin/esbuild}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
exec worker-build --release
