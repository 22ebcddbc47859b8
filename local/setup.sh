#!/usr/bin/env bash
# Installs what building and testing threadline needs, from the registries
# this machine reaches, and is quick when everything is already there:
#   - the wasm32 Rust target
#   - the wasm-bindgen CLI at exactly the version Cargo.lock pins for the library
#   - worker-build, matching the `worker` crate's minor version
#   - npm packages at the exact versions of package-lock.json
#   - Chromium (Debian package) for the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

lock_version() { # the version Cargo.lock pins for crate $1
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

bindgen=$(lock_version wasm-bindgen)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $NF}')" != "$bindgen" ]; then
  say "installing wasm-bindgen-cli $bindgen (compiles once, several minutes)"
  # Not --locked: the CLI's own lockfile names a crate version the registry
  # no longer serves.
  cargo install wasm-bindgen-cli --version "=$bindgen" --quiet
fi

worker=$(lock_version worker)
if [ "$(worker-build --version 2>/dev/null | awk '{print $NF}')" != "$worker" ]; then
  say "installing worker-build $worker"
  cargo install worker-build --version "=$worker" --quiet
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages (exact versions from package-lock.json)"
  npm ci --no-audit --no-fund --loglevel=error
fi

# Chromium for the browser tests (tests/browser/), from Debian's packages:
# Playwright drives it (playwright-core, no browser download). Set
# CHROMIUM_PATH to use another Chromium.
if [ -z "${CHROMIUM_PATH:-}" ] && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null; then
    say "installing Chromium from Debian's packages (for the browser tests)"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    say "no /usr/bin/chromium and no apt-get: install Chromium, or set CHROMIUM_PATH, for the browser tests"
  fi
fi
