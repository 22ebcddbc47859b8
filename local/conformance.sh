#!/usr/bin/env bash
# Runs the Durable Streams conformance suite (@durable-streams/server-conformance-tests)
# against `wrangler dev` on a free port, with state in a fresh temporary dir.
# STREAMS_AUTH=none opens /v1/stream/* (the suite sends no credentials);
# STREAMS_LONG_POLL_MS=1000 holds long-polls well under the suite's timeouts.
set -euo pipefail
cd "$(dirname "$0")/.."
export WRANGLER_SEND_METRICS=false
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
state=$(mktemp -d)
log="$state/wrangler.log"
node_modules/.bin/wrangler dev --port "$port" --ip 127.0.0.1 --persist-to "$state/state" \
  --var STREAMS_AUTH:none --var STREAMS_LONG_POLL_MS:1000 >"$log" 2>&1 &
pid=$!
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$state"; }
trap stop EXIT
for _ in $(seq 1 120); do
  if curl -s -o /dev/null "http://127.0.0.1:$port/v1/stream/_ready"; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; exit 1; fi
  sleep 0.5
done
CONFORMANCE_TEST_URL="http://127.0.0.1:$port" node_modules/.bin/vitest run tests/conformance/conformance.spec.js "$@"
