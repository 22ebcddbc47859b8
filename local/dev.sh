#!/usr/bin/env bash
# `make dev`: the Worker on http://127.0.0.1:8787 with state in .dev-state/,
# the built-in agent answering from the offline fake model (local/fake-llm.mjs)
# with the demo HTTP tools (local/demo-tools.mjs) and a demo MCP server
# (local/demo-mcp.mjs, MCP server `notes`). To use a real provider instead:
#   LLM_BASE_URL=https://api.openai.com/v1 LLM_API_KEY=sk-... LLM_MODEL=gpt-4o-mini make dev
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev-state
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

node local/demo-tools.mjs --port 8789 >/dev/null & pids+=($!)
node local/demo-mcp.mjs --port 8790 >/dev/null & pids+=($!)
mcp='[{"name":"notes","url":"http://127.0.0.1:8790/mcp"}]'
tools=$(node -e 'import("./local/demo-tools.mjs").then(m => console.log(JSON.stringify(m.toolDeclarations("http://127.0.0.1:8789"))))')
if [ -z "${LLM_BASE_URL:-}" ]; then
  node local/fake-llm.mjs --port 8788 >/dev/null & pids+=($!)
  LLM_BASE_URL=http://127.0.0.1:8788/v1
  LLM_API_KEY=dev-key
  LLM_MODEL=fake-model
  LLM_MODEL_INPUT=text,image,file
  echo "threadline: the built-in agent uses the offline fake model (set LLM_BASE_URL to use a real one)."
  echo "            try a message with [[reason]], [[tool:weather:{\"city\":\"Oslo\"}]], [[parallel]], [[spawn]], [[tasks]]"
  echo "            or [[mcp:search_notes]] (the demo MCP server's tools: search_notes, delete_note, render_chart)."
fi
echo "threadline: serving on http://127.0.0.1:8787: open it for the chat page (state in .dev-state/)"
echo "threadline: development mode (AUTH_MODE=dev): every request acts as the local actor \`dev\`."
npx wrangler dev --ip 127.0.0.1 --port 8787 --persist-to .dev-state \
  --var "LLM_BASE_URL:$LLM_BASE_URL" --var "LLM_API_KEY:${LLM_API_KEY:-}" --var "LLM_MODEL:${LLM_MODEL:-fake-model}" \
  --var "TOOLS:$tools" --var "MCP_SERVERS:$mcp" --var "LLM_MODEL_INPUT:${LLM_MODEL_INPUT:-text,image}" --var "AUTH_MODE:dev" "$@"
