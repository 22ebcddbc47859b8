#!/bin/sh
# Builds what the Worker serves:
#  1. the page (web/ → web/dist/, wrangler's [assets]) and the TypeScript
#     client (client/ → client/dist/), type-checked first: seconds;
#  2. the Worker (build/index.js + wasm) with worker-build (local/worker-build.sh), pointing it at
#     tools installed from the registries this machine reaches instead of the
#     binaries it would download (see local/setup.sh). Skipped when build/ is
#     newer than every Rust source, so `wrangler dev` starts at once.
#     KEEP_NAMES=1 builds it anyway and leaves a copy whose wasm keeps its
#     function names in target/named/ (for local/profile.mjs).
set -eu
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
bin=node_modules/.bin

$bin/tsc -p client
$bin/tsc -p client/tsconfig.build.json # client/dist/*.d.ts, the package's declarations
$bin/esbuild client/src/index.ts --bundle --format=esm --target=es2022 --sourcemap --log-level=warning --outfile=client/dist/index.js
mkdir -p web/dist
$bin/esbuild web/src/app.ts --bundle --format=esm --target=es2020 --minify --sourcemap --log-level=warning --outfile=web/dist/app.js
cp web/index.html web/style.css web/_headers web/dist/
# The AI SDK example (examples/ai-sdk-chat: React + useChat), served at
# /examples/ai-sdk-chat/ next to the page.
mkdir -p web/dist/examples/ai-sdk-chat
$bin/esbuild examples/ai-sdk-chat/app.jsx --bundle --format=esm --target=es2020 --minify --jsx=automatic --define:process.env.NODE_ENV=\"production\" --log-level=warning --outfile=web/dist/examples/ai-sdk-chat/app.js
cp examples/ai-sdk-chat/index.html examples/ai-sdk-chat/style.css web/dist/examples/ai-sdk-chat/

if [ -z "${KEEP_NAMES:-}" ] && [ -f build/index.js ] && [ -z "$(find src durable/src Cargo.toml Cargo.lock durable/Cargo.toml wrangler.toml -newer build/index.js -print -quit)" ]; then
  echo "build/: up to date"
  exit 0
fi
sh local/worker-build.sh .
if [ -n "${KEEP_NAMES:-}" ]; then
  rm -rf target/named && cp -r build target/named
fi
# The name section (function names, 0.56 MB) is only for reading stack
# traces by hand: strip it from what is uploaded (about 0.3 MB before gzip).
# The same pass shrinks the code once more (-Oz after worker-build's -O):
# 8 KB less gzip, with workerd's CPU per publish and per Worker-only answer
# within the noise of alternated runs (local/profile.mjs), and about 50 s
# more build time.
"${WASM_OPT_BIN:-$bin/wasm-opt}" build/index_bg.wasm -Oz --strip-debug --strip-producers -o build/index_bg.wasm \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals
touch build/index.js
