#!/bin/sh
# Builds the Worker (build/index.js + wasm) with worker-build, pointing it at
# tools installed from the registries this machine reaches instead of the
# binaries it would download (see local/setup.sh). Skips the build when
# build/index.js is newer than every Rust source and manifest (wrangler dev
# runs this on every start).
set -eu
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if [ -f build/index.js ] && [ -z "$(find src durable/src Cargo.toml Cargo.lock durable/Cargo.toml -newer build/index.js 2>/dev/null | head -1)" ]; then
  echo "build: build/index.js is up to date"
  exit 0
fi
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$(command -v wasm-bindgen)}"
export ESBUILD_BIN="${ESBUILD_BIN:-$PWD/node_modules/.bin/esbuild}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
exec worker-build --release
