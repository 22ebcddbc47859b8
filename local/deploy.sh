#!/usr/bin/env bash
# make deploy: checks that the deployment would work (local/deploy-check.mjs:
# an agent, authentication, secrets kept out of wrangler.toml, the files
# bucket), dry-runs the upload (the build, the bindings, the bundle's size),
# then deploys. FORCE=1 skips the check.
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
wrangler=node_modules/.bin/wrangler
if [ "${FORCE:-}" != "1" ]; then
  node local/deploy-check.mjs
fi
rm -rf build/dry-run
# Builds with local/build.sh ([build] in wrangler.toml) and prints the
# upload's size and gzip size; nothing leaves the machine.
"$wrangler" deploy --dry-run --outdir build/dry-run
"$wrangler" deploy
echo "deploy: done; roll back with \`npx wrangler rollback\` (docs/deploy.md#rolling-back)"
