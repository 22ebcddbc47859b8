#!/usr/bin/env bash
# `make dev`: the Worker on http://127.0.0.1:8787, state persisted in .dev-state/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev-state
echo "threadline: serving on http://127.0.0.1:8787 (state in .dev-state/)"
exec npx wrangler dev --ip 127.0.0.1 --port 8787 --persist-to .dev-state "$@"
