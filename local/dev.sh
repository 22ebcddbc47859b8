#!/usr/bin/env bash
# `make dev`: the Worker on http://127.0.0.1:8787 with state in .dev-state/,
# the built-in agent answering from the offline fake model (local/fake-llm.mjs)
# with the demo tools (local/demo-tools.mjs). To use a real provider instead:
#   LLM_BASE_URL=https://api.openai.com/v1 LLM_API_KEY=sk-... LLM_MODEL=gpt-4o-mini make dev
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev-state
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

node local/demo-tools.mjs --port 8789 >/dev/null & pids+=($!)
tools=$(node -e 'import("./local/demo-tools.mjs").then(m => console.log(JSON.stringify(m.toolDeclarations("http://127.0.0.1:8789"))))')
if [ -z "${LLM_BASE_URL:-}" ]; then
  node local/fake-llm.mjs --port 8788 >/dev/null & pids+=($!)
  LLM_BASE_URL=http://127.0.0.1:8788/v1
  LLM_API_KEY=dev-key
  LLM_MODEL=fake-model
  echo "threadline: the built-in agent uses the offline fake model (set LLM_BASE_URL to use a real one)."
  echo "            try a message with [[reason]], [[tool:weather:{\"city\":\"Oslo\"}]], [[parallel]], [[spawn]] or [[tasks]]."
fi
echo "threadline: serving on http://127.0.0.1:8787: open it for the chat page (state in .dev-state/)"
echo "threadline: development mode (AUTH_MODE=dev): every request acts as the local actor \`dev\`."
npx wrangler dev --ip 127.0.0.1 --port 8787 --persist-to .dev-state \
  --var "LLM_BASE_URL:$LLM_BASE_URL" --var "LLM_API_KEY:${LLM_API_KEY:-}" --var "LLM_MODEL:${LLM_MODEL:-fake-model}" \
  --var "TOOLS:$tools" --var "AUTH_MODE:dev" "$@"
