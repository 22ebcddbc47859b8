#!/bin/sh
# Builds the Worker as it was at a given commit, once, into
# target/baseline/<commit>/build (index.js + wasm), for the upgrade test (the
# previous release writes the state the current one must read) and for
# `make bench` (today's code against the release in the same run).
#
#   sh local/baseline.sh [commit]     # default: the release in local/RELEASE
#
# Prints the build directory. Cached: a second call returns at once. The
# release's sources ship in local/release/<commit>.tar.gz (what building it
# needs: its Cargo.toml, Cargo.lock, src/, durable/, wrangler.toml), so the
# upgrade test needs no git history: a shallow clone or a source tarball
# works. Another commit's come from `git archive` (a clone that has it). Its
# Cargo.lock pins its crates, and it shares one cargo target directory with
# every other baseline so rebuilds are incremental.
set -eu
cd "$(dirname "$0")/.."
root=$PWD
release=$(cat local/RELEASE)
commit=${1:-$release}
shipped="$root/local/release/$release.tar.gz"
if [ "$commit" = "$release" ] || [ "$commit" = "$(printf %.7s "$release")" ]; then
  full=$release
else
  full=$(git rev-parse --verify "$commit^{commit}")
fi
out="$root/target/baseline/$full"
if [ -f "$out/build/index.js" ]; then
  echo "$out/build"
  exit 0
fi
export PATH="$HOME/.cargo/bin:$PATH"
src="$out/src"
rm -rf "$src"
mkdir -p "$src"
if [ "$full" = "$release" ]; then
  tar -xzf "$shipped" -C "$src"
else
  git archive "$full" | tar -x -C "$src"
fi
export CARGO_TARGET_DIR="$root/target/baseline/cargo"
sh "$root/local/worker-build.sh" "$src" >"$out/build.log" 2>&1 || { cat "$out/build.log" >&2; exit 1; }
rm -rf "$out/build"
mv "$src/build" "$out/build"
echo "$out/build"
