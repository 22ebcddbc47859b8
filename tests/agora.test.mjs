// agora's routes (docs/protocols/agora-streaming-and-http.md): run streams in its SSE envelope, re-attaching by
// frame number, and approve/reject by tool call.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, openSse, parseSse, newThread, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify([...tools.declarations, guarded]) },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** POST /agent/chat, reading the streamed response to its end. */
async function agentChat(body, { untilEnd = true } = {}) {
  const resp = await fetch(`${worker.url}/agent/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!untilEnd) return resp;
  return { resp, raw: await resp.text() };
}

/** GET /agent/chat/:runId/stream to its end. */
async function reattach(runId, { after, lastEventId } = {}) {
  const q = after === undefined ? "" : `?after=${after}`;
  const headers = lastEventId === undefined ? {} : { "last-event-id": String(lastEventId) };
  const resp = await fetch(`${worker.url}/agent/chat/${encodeURIComponent(runId)}/stream${q}`, { headers });
  return { resp, raw: await resp.text() };
}

/** The numbered frames' raw bytes, by id. */
function numbered(raw) {
  const out = new Map();
  for (const block of raw.split("\n\n")) {
    const m = block.match(/^id: (\d+)\n/);
    if (m) out.set(Number(m[1]), block + "\n\n");
  }
  return out;
}

describe("run streams", () => {
  test("POST /agent/chat streams meta, numbered frames and done, with the run's headers", async () => {
    const { resp, raw } = await agentChat({ message: 'weather? [[tool:weather:{"city":"Lisbon"}]]' });
    assert.equal(resp.status, 200);
    assert.equal(resp.headers.get("content-type"), "text/event-stream");
    assert.equal(resp.headers.get("cache-control"), "no-cache, no-transform");
    assert.equal(resp.headers.get("x-accel-buffering"), "no");
    const runId = resp.headers.get("x-agent-run-id");
    const threadId = resp.headers.get("x-agent-thread-id");
    assert.ok(runId.startsWith(`${threadId}.`));
    const frames = parseSse(raw);
    assert.equal(frames[0].event, "meta");
    assert.equal(frames[0].id, undefined);
    assert.deepEqual(JSON.parse(frames[0].data), { runId, threadId });
    assert.equal(frames.at(-1).event, "done");
    assert.equal(frames.at(-1).id, undefined);
    const body = frames.slice(1, -1);
    assert.deepEqual(body.map((f) => Number(f.id)), body.map((_, i) => i + 1), "ids are 1-based positions");
    const kinds = body.map((f) => JSON.parse(f.data).kind);
    // The order of agora's streaming page: a step closes after its tools, the title comes last.
    assert.equal(kinds[0], "step-start");
    assert.equal(kinds.at(-1), "title");
    assert.equal(kinds.at(-2), "step-finish");
    const firstFinish = kinds.indexOf("step-finish");
    assert.ok(kinds.indexOf("tool-output") < firstFinish, kinds.join(" "));
    assert.ok(kinds.indexOf("tool-input-available") < firstFinish, kinds.join(" "));
    assert.equal(kinds[firstFinish + 1], "step-start", "the next step opens after the last one closes");
    const input = body.map((f) => JSON.parse(f.data)).find((f) => f.kind === "tool-input-available");
    assert.equal(input.name, "weather");
    assert.deepEqual(input.input, { city: "Lisbon" });
    const output = body.map((f) => JSON.parse(f.data)).find((f) => f.kind === "tool-output");
    assert.equal(output.id, input.id);
    assert.equal(output.output.forecast, "sunny");
    const finish = body.map((f) => JSON.parse(f.data)).find((f) => f.kind === "step-finish");
    assert.ok(finish.usage.inputTokens > 0 && finish.usage.outputTokens > 0);
    const text = body.map((f) => JSON.parse(f.data)).filter((f) => f.kind === "text").map((f) => f.text).join("");
    assert.match(text, /Tool results: weather/);
  });

  test("re-attaching at several after values gives byte-identical frames", async () => {
    const { resp, raw } = await agentChat({ message: "tell me [[reason]]" });
    const runId = resp.headers.get("x-agent-run-id");
    const original = numbered(raw);
    const n = original.size;
    assert.ok(n > 10, `${n} frames`);
    for (const after of [0, 1, Math.floor(n / 2), n - 1, n]) {
      const again = await reattach(runId, { after });
      assert.equal(again.resp.status, 200);
      const frames = parseSse(again.raw);
      assert.equal(frames[0].event, "meta");
      assert.equal(frames.at(-1).event, "done");
      const got = numbered(again.raw);
      assert.deepEqual([...got.keys()], [...original.keys()].filter((k) => k > after));
      for (const [id, bytes] of got) assert.equal(bytes, original.get(id), `frame ${id}`);
    }
    // Last-Event-ID works; `after` wins over it.
    assert.deepEqual([...numbered((await reattach(runId, { lastEventId: n - 2 })).raw).keys()], [n - 1, n]);
    assert.deepEqual([...numbered((await reattach(runId, { after: n - 1, lastEventId: 1 })).raw).keys()], [n]);
    const bad = await reattach(runId, { after: "x" });
    assert.equal(bad.resp.status, 400);
  });

  test("a live re-attach mid-run sees the same frames, and closing a stream never cancels the run", async () => {
    const resp = await agentChat({ message: "slow answer [[slow:120]]" }, { untilEnd: false });
    const runId = resp.headers.get("x-agent-run-id");
    const reader = resp.body.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /event: meta/);
    await reader.cancel(); // the client goes away
    await sleep(400);
    const live = openSse(`${worker.url}/agent/chat/${encodeURIComponent(runId)}/stream?after=2`);
    await live.ready;
    await until(() => live.raw.includes("event: done"), { timeoutMs: 10000, what: "the run to finish" });
    const replay = await reattach(runId, { after: 2 });
    assert.equal(live.raw, replay.raw, "live and replayed bytes match");
    const threadId = resp.headers.get("x-agent-thread-id");
    const status = (await api.status(threadId)).json;
    assert.equal(status.hasActiveRun, false);
    const m = (await api.messages(threadId)).json;
    assert.equal(m.messages[1].status, "completed", "the run finished although its first stream closed");
  });

  test("a failed run ends with event: error; an unknown run is 404 nothing_to_resume", async () => {
    const { raw } = await agentChat({ message: "fail [[error:500]]" });
    const last = parseSse(raw).at(-1);
    assert.equal(last.event, "error");
    assert.deepEqual(JSON.parse(last.data), { code: "run_failed", message: "LLM provider unavailable" });
    for (const id of [`${newThread()}.run_000000000000000000000000`, "not-scoped"]) {
      const r = await reattach(id);
      assert.equal(r.resp.status, 404);
      assert.equal(JSON.parse(r.raw).error.code, "nothing_to_resume");
    }
  });

  test("a queued send on a busy thread answers 202", async () => {
    const threadId = newThread("ag");
    const busy = await agentChat({ threadId, message: "busy [[slow:100]]" }, { untilEnd: false });
    const r = await agentChat({ threadId, message: "next", mode: "queue" }, { untilEnd: false });
    assert.equal(r.status, 202);
    const body = await r.json();
    assert.equal(body.queued, true);
    assert.equal(body.threadId, threadId);
    await busy.body.cancel();
  });
});

describe("approve and reject by tool call", () => {
  async function pending(message) {
    const threadId = newThread("tc");
    const resp = await agentChat({ threadId, message }, { untilEnd: false });
    const runId = resp.headers.get("x-agent-run-id");
    const sse = api.events(threadId);
    await sse.ready;
    const req = await sse.waitFor((e) => e.type === "confirmation-request");
    return { threadId, runId, resp, sse, toolCallId: req.payload.toolCallId };
  }
  const decide = (action, body) => api.call("POST", `/agent/tool-call/${action}`, body);

  test("approve with only the toolCallId; the run stream carries the approval and goes on", async () => {
    const p = await pending('ok? [[tool:guarded:{"text":"agora-approve"}]]');
    const r = await decide("approve", { toolCallId: p.toolCallId });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, "approved");
    const raw = await p.resp.text();
    const kinds = parseSse(raw).filter((f) => f.id).map((f) => JSON.parse(f.data).kind);
    assert.ok(kinds.includes("approval-requested"));
    assert.ok(kinds.includes("tool-output"));
    assert.equal(parseSse(raw).at(-1).event, "done", "one continuous stream across the suspend");
    p.sse.close();
  });

  test("reject with a reason is fed back to the model; bad bodies are 400; unknown calls 404", async () => {
    const p = await pending('no? [[tool:guarded:{"text":"agora-reject"}]]');
    for (const body of [{}, { toolCallId: p.toolCallId, via: "" }, { toolCallId: p.toolCallId, remember: true }]) {
      const bad = await decide("reject", body);
      assert.equal(bad.status, body.toolCallId ? 400 : 404, JSON.stringify(body));
    }
    const r = await decide("reject", { runId: p.runId, toolCallId: p.toolCallId, reason: "not this account", via: "email" });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, "denied");
    const err = await p.sse.waitFor((e) => e.type === "tool-error");
    assert.match(err.payload.error, /not this account/);
    const again = await decide("approve", { toolCallId: p.toolCallId });
    assert.equal(again.status, 409);
    const unknown = await decide("approve", { runId: p.runId, toolCallId: `${p.threadId}.tc_000000000000000000000000` });
    assert.equal(unknown.status, 404);
    await p.resp.body.cancel();
    p.sse.close();
  });

  test("GET /agent/threads/:id shows messages with tool calls and confirmations, and the queue", async () => {
    const p = await pending('detail [[tool:guarded:{"text":"detail"}]]');
    const detail = (await api.call("GET", `/agent/threads/${p.threadId}`)).json;
    assert.equal(detail.status.isSuspended, true);
    const tc = detail.messages[1].agentTree.toolCalls[0];
    assert.equal(tc.toolCallId, p.toolCallId);
    // The request, as n8n's reducer keeps it, without its call's own fields.
    assert.equal(tc.toolName, "guarded");
    assert.match(tc.confirmation.requestId, /\.cr_/);
    assert.equal(tc.confirmation.toolName, undefined);
    assert.deepEqual(detail.queue, { items: [], paused: null });
    await api.cancel(p.threadId);
    await p.resp.body.cancel();
    p.sse.close();
  });

  test("GET /agent/threads lists the threads, newest first", async () => {
    const a = await agentChat({ message: "first thread here" });
    await sleep(5);
    const b = await agentChat({ message: "second thread here" });
    const list = (await api.call("GET", "/agent/threads")).json;
    const ids = list.map((t) => t.threadId);
    const ta = a.resp.headers.get("x-agent-thread-id");
    const tb = b.resp.headers.get("x-agent-thread-id");
    assert.ok(ids.indexOf(tb) < ids.indexOf(ta), "newest first");
    assert.equal(list.find((t) => t.threadId === ta).title, "first thread here");
    assert.equal((await api.call("POST", "/agent/threads")).status, 405);
  });
});
