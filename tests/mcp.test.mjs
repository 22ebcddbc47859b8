// MCP tools over real HTTP on workerd: the built-in agent against demo MCP
// servers written with the official SDK (@modelcontextprotocol/sdk, its
// Streamable HTTP server transport), started by the test. Discovery across
// two servers (a name clash, an allow list), calls with text, structured
// content, an error and an image, a destructive tool's approval, cancel
// during a slow call, SSE and JSON answers, a forgotten session, a server
// that is down and one that answers with malformed JSON-RPC.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoMcp, CHART_PNG } from "../local/demo-mcp.mjs";

let llm, notes, notes2, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  notes = await startDemoMcp({ json: false, name: "notes" }); // answers with SSE streams
  notes2 = await startDemoMcp({ json: true, name: "notes2" }); // answers with JSON
  const servers = [
    { name: "notes", url: notes.url },
    { name: "notes2", url: notes2.url, allow: ["search_notes", "fail"] },
    { name: "down", url: "http://127.0.0.1:9/mcp", timeoutMs: 2000 },
  ];
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", MCP_SERVERS: JSON.stringify(servers) },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await notes?.close();
  await notes2?.close();
});

const runOver = (thread) =>
  until(async () => !(await api.status(thread)).json?.hasActiveRun, { timeoutMs: 15000, what: "the run to end" });

/** The thread's events, as its history stream replays them. */
async function events(thread) {
  const sse = api.events(thread);
  await sse.ready;
  await until(() => sse.events().some((e) => e.type === "run-finish"), { timeoutMs: 15000, what: "run-finish" });
  const out = sse.events();
  sse.close();
  return out;
}

/** The last request the model got for a message containing `marker`. */
const modelRequests = (marker) => llm.requests.filter((r) => JSON.stringify(r.messages).includes(marker));

describe("MCP tools", () => {
  test("discovery: two servers whose tools clash are named apart, an allow list holds, a server that is down is left out", async () => {
    const thread = newThread("mcp-disc");
    assert.equal((await api.chat(thread, "hello discovery-marker")).status, 200);
    await runOver(thread);
    const [first] = modelRequests("discovery-marker");
    const names = first.tools.map((t) => t.function.name);
    for (const n of ["notes__search_notes", "notes__delete_note", "notes__render_chart", "notes__slow_task", "notes__fail", "notes2__search_notes", "notes2__fail"]) {
      assert.ok(names.includes(n), `${n} in ${names}`);
    }
    assert.ok(!names.includes("notes2__delete_note"), "notes2 allows search_notes and fail only");
    assert.ok(!names.some((n) => n.startsWith("down__")));
    const search = first.tools.find((t) => t.function.name === "notes__search_notes").function;
    assert.match(search.description, /MCP server `notes`/);
    assert.deepEqual(search.parameters.required, ["query"]);
    for (const n of names) assert.match(n, /^[a-zA-Z0-9_-]{1,64}$/);
    // The SDK's server saw the handshake, and the version the client asked for.
    assert.equal(notes.requests[0].body.method, "initialize");
    assert.equal(notes.requests[0].body.params.protocolVersion, "2025-11-25");
    const listed = notes.requests.find((r) => r.body?.method === "tools/list");
    assert.ok(listed.session, "tools/list carries Mcp-Session-Id");
    assert.equal(listed.version, "2025-11-25", "and the negotiated MCP-Protocol-Version");
  });

  test("a call with text and structured results (SSE), one with an error (JSON), and an image", async () => {
    const thread = newThread("mcp-call");
    assert.equal((await api.chat(thread, 'find [[mcp:search_notes:{"query":"milk"}]] call-marker')).status, 200);
    await runOver(thread);
    let evs = await events(thread);
    const call = evs.find((e) => e.type === "tool-call");
    assert.deepEqual([call.payload.toolName, call.payload.server, call.payload.toolKind], ["notes__search_notes", "notes", "read"]);
    const result = evs.find((e) => e.type === "tool-result").payload.result;
    assert.deepEqual(result.structuredContent, { notes: [{ id: "n1", title: "Groceries" }] });
    assert.equal(result.content[0].text, "1 note(s): Groceries");
    const next = modelRequests("call-marker").at(-1);
    assert.match(next.messages.at(-1).content, /Structured result: \{"notes":\[\{"id":"n1","title":"Groceries"\}\]\}/);

    const failing = newThread("mcp-fail");
    assert.equal((await api.chat(failing, "[[tool:notes2__fail:{}]] fail-marker")).status, 200);
    await runOver(failing);
    evs = await events(failing);
    assert.equal(evs.find((e) => e.type === "tool-error").payload.error, "The note store is offline.");
    assert.equal((await api.status(failing)).json.hasActiveRun, false);
    assert.match(modelRequests("fail-marker").at(-1).messages.at(-1).content, /^Error: The note store is offline\./);

    const chart = newThread("mcp-chart");
    assert.equal((await api.chat(chart, "[[mcp:render_chart]] chart-marker")).status, 200);
    await runOver(chart);
    evs = await events(chart);
    const image = evs.find((e) => e.type === "tool-result").payload.result.content[0];
    assert.equal(image.mediaType, "image/png");
    const res = await fetch(worker.url + image.url);
    assert.equal(res.status, 200);
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), CHART_PNG, "the image is a file of the thread");
    const shown = modelRequests("chart-marker").at(-1).messages.at(-1);
    assert.equal(shown.role, "user");
    assert.equal(shown.content[1].image_url.url, `data:image/png;base64,${CHART_PNG.toString("base64")}`);
  });

  test("a destructive tool waits for approval, names its server, and runs once approved", async () => {
    const thread = newThread("mcp-del");
    const before = notes.calls.filter((c) => c.tool === "delete_note").length;
    assert.equal((await api.chat(thread, '[[mcp:delete_note:{"id":"n2"}]]')).status, 200);
    await until(async () => (await api.status(thread)).json.isSuspended, { what: "the approval request" });
    const sse = api.events(thread);
    await sse.ready;
    const request = await sse.waitFor((e) => e.type === "confirmation-request");
    sse.close();
    assert.equal(request.payload.server, "notes");
    assert.equal(request.payload.severity, "destructive");
    assert.match(request.payload.message, /MCP server `notes`/);
    assert.equal(notes.calls.filter((c) => c.tool === "delete_note").length, before, "nothing ran before the decision");
    const decided = await api.call("POST", `/instance-ai/confirm/${request.payload.requestId}`, { approved: true });
    assert.equal(decided.status, 200, decided.text);
    await runOver(thread);
    assert.deepEqual(notes.calls.filter((c) => c.tool === "delete_note").slice(before), [{ tool: "delete_note", args: { id: "n2" } }]);
    const evs = await events(thread);
    assert.equal(evs.find((e) => e.type === "tool-result").payload.result, "Deleted note n2.");
  });

  test("cancel during a slow call: the server sees notifications/cancelled and the run ends within a second", async () => {
    const thread = newThread("mcp-slow");
    assert.equal((await api.chat(thread, '[[mcp:slow_task:{"ms":20000}]]')).status, 200);
    await until(() => notes.calls.some((c) => c.tool === "slow_task"), { what: "the slow call to start" });
    const t0 = Date.now();
    assert.equal((await api.cancel(thread)).status, 200);
    await runOver(thread);
    assert.ok(Date.now() - t0 < 1000, `the run ended ${Date.now() - t0} ms after the cancel`);
    await until(() => notes.cancelled.length > 0, { what: "notifications/cancelled at the server" });
    const note = notes.requests.find((r) => r.body?.method === "notifications/cancelled");
    assert.equal(typeof note.body.params.requestId, "number");
    assert.equal(note.body.params.reason, "the run was cancelled");
  });

  test("a session the server forgot is initialized again and the call succeeds", async () => {
    const thread = newThread("mcp-gone");
    notes.forgetSessions();
    const inits = notes.requests.filter((r) => r.body?.method === "initialize").length;
    assert.equal((await api.chat(thread, '[[mcp:search_notes:{"query":"*"}]]')).status, 200);
    await runOver(thread);
    const evs = await events(thread);
    assert.equal(evs.find((e) => e.type === "tool-result").payload.result.content[0].text, "2 note(s): Groceries, Standup");
    assert.equal(notes.requests.filter((r) => r.body?.method === "initialize").length, inits + 1);
  });

  test("a server that is down: the run goes on without its tools, and says which", async () => {
    const thread = newThread("mcp-down");
    assert.equal((await api.chat(thread, "first")).status, 200);
    await runOver(thread);
    // The status goes out live (it is not stored): follow the thread first.
    const sse = api.events(thread);
    await sse.ready;
    assert.equal((await api.chat(thread, "hello down-marker")).status, 200);
    const status = await sse.waitFor((e) => e.type === "status" && /`down`/.test(e.payload.message), 10000);
    assert.match(status.payload.message, /MCP server `down` is unavailable/);
    await sse.waitFor((e) => e.type === "run-finish" && e.payload.status === "completed", 10000);
    sse.close();
  });

  test("malformed JSON-RPC is a clear tool error, never a crash", async () => {
    const thread = newThread("mcp-broken");
    notes2.broken = true;
    try {
      assert.equal((await api.chat(thread, '[[tool:notes2__search_notes:{"query":"x"}]]')).status, 200);
      await runOver(thread);
      const evs = await events(thread);
      const error = evs.find((e) => e.type === "tool-error").payload.error;
      assert.match(error, /MCP server `notes2`.*not valid JSON-RPC/);
      assert.equal(evs.find((e) => e.type === "run-finish").payload.status, "completed");
    } finally {
      notes2.broken = false;
    }
  });

  test("a server's tool call frames name the server on every protocol", async () => {
    const thread = newThread("mcp-frames");
    // The AI SDK: the tool part carries the server.
    const res = await fetch(`${worker.url}/api/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: thread, messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: '[[mcp:search_notes:{"query":"milk"}]]' }] }] }),
    });
    const text = await res.text();
    const start = text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6))).find((c) => c.type === "tool-input-available");
    assert.deepEqual(start.toolMetadata, { mcpServer: "notes" });
    assert.equal(start.title, "Search notes (notes)");
    const run = `${thread}.u_m1`;
    await runOver(thread);
    // AG-UI: TOOL_CALL_START's metadata, on a re-attach to the run.
    const ag = await (await fetch(`${worker.url}/ag-ui/threads/${thread}/runs/${run}`)).text();
    const agStart = ag.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6))).find((e) => e.type === "TOOL_CALL_START");
    assert.deepEqual(agStart.metadata, { mcpServer: "notes" });
    // agora: tool-input-available names it beside its toolKind.
    const agora = await (await fetch(`${worker.url}/agent/chat/${run}/stream`)).text();
    const input = agora.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6))).find((f) => f.kind === "tool-input-available");
    assert.deepEqual([input.server, input.toolKind], ["notes", "read"]);
    // Instance AI: the tool-call event and the agent tree.
    const tree = (await api.messages(thread)).json.messages.find((m) => m.role === "assistant").agentTree;
    assert.equal(tree.toolCalls[0].server, "notes");
  });
});
