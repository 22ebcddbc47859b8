// adonis-agora's seed, feature by feature (docs/protocols/agora.md, "Conformance"):
// agents, the per-caller catalog, quota, page context, structured output, the
// envelope's frames and fields, its routes and the thread detail, read as a
// client written to the seed reads them: the run's stream over HTTP, and
// GET /agent/threads/:id.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { startWorker, parseSse, hs256Jwt, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "agora-seed-secret-0123456789abcdef";
const token = (sub, roles = []) => hs256Jwt(SECRET, { sub, roles, exp: Math.floor(Date.now() / 1000) + 600 });
const ALICE = token("alice");
const PRO = token("pat", ["PRO"]);

const MODELS = {
  default: "fake/fast",
  providerLabels: { fake: "Fake Labs" },
  models: {
    "fake/fast": { model: "fake-model", label: "Fast", badges: ["fast"], inputUsdPerMTok: 1, outputUsdPerMTok: 2 },
    "fake/big": { model: "fake-model", label: "Big" },
    "fake/pro": { model: "fake-model", label: "Pro", roles: ["PRO"] },
  },
};
const AGENTS = {
  support: { label: "Support", systemPrompt: "You are Support, terse.", tools: ["weather"], locked: { model: "fake/big", reason: "support runs on Big" } },
  writer: { label: "Writer", model: "fake/big" },
};

let llm, tools, check, worker, quotaWorker;

/** The deployment's output check: refuses an answer about Atlantis. */
async function startOutputCheck() {
  const seen = [];
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const c of req) body += c;
    const asked = JSON.parse(body);
    seen.push(asked);
    const refused = asked.output?.city === "Atlantis";
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(refused ? { ok: false, reason: "no such city" } : { ok: true }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${server.address().port}/check`, seen, close: () => new Promise((r) => server.close(r)) };
}

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  check = await startOutputCheck();
  const echo = tools.declarations.find((t) => t.name === "echo");
  const declared = [
    ...tools.declarations,
    { ...echo, name: "guarded", approval: "required" },
    { ...echo, name: "lapsing", approval: "required", kind: "payment" },
  ];
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify(declared),
      LLM_MODELS: JSON.stringify(MODELS),
      AGENTS: JSON.stringify(AGENTS),
      APPROVAL_POLICY: JSON.stringify({ ttlMs: 600_000, tools: { lapsing: { ttlMs: 1200 } } }),
      AGENT_MESSAGE_TIMESTAMPS: "1",
      OUTPUT_CHECK_URL: check.url,
    },
  });
  quotaWorker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", QUOTA: JSON.stringify({ period: "day", tokens: 1, roles: { VIP: {} } }) },
  });
});
after(async () => {
  await worker?.stop();
  await quotaWorker?.stop();
  await llm?.close();
  await tools?.close();
  await check?.close();
});

/** A JSON call as `bearer` on `w`. */
async function call(method, path, body, { bearer = ALICE, w = worker } = {}) {
  const headers = bearer ? { authorization: `Bearer ${bearer}` } : {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const resp = await fetch(w.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: resp.status, json, text, headers: resp.headers };
}

/**
 * A run's stream as a seed client reads it: `meta`, unnamed frames parsed as
 * AgentStreamEvents, then `done` or `error`.
 */
class RunStream {
  constructor(resp) {
    this.resp = resp;
    this.raw = "";
    this.ended = (async () => {
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        this.raw += dec.decode(value, { stream: true });
      }
    })();
  }
  get runId() {
    return this.resp.headers.get("x-agent-run-id");
  }
  get threadId() {
    return this.resp.headers.get("x-agent-thread-id");
  }
  /** Every complete frame so far. */
  sse() {
    const complete = this.raw.slice(0, this.raw.lastIndexOf("\n\n") + 2);
    return parseSse(complete).filter((f) => f.data !== undefined);
  }
  /** The AgentStreamEvents so far. */
  frames() {
    return this.sse().filter((f) => !f.event).map((f) => JSON.parse(f.data));
  }
  async waitFor(pred, what) {
    await until(() => this.frames().some(pred), { timeoutMs: 15_000, what });
    return this.frames().find(pred);
  }
  /** The stream to its end: its frames and its terminal event. */
  async end() {
    await this.ended;
    const last = this.sse().at(-1);
    return { frames: this.frames(), terminal: { event: last.event, data: JSON.parse(last.data) } };
  }
}

async function chat(body, { bearer = ALICE, w = worker } = {}) {
  const resp = await fetch(`${w.url}/agent/chat`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
    body: JSON.stringify(body),
  });
  if (!resp.headers.get("content-type")?.startsWith("text/event-stream")) {
    const text = await resp.text();
    return { status: resp.status, json: JSON.parse(text) };
  }
  return new RunStream(resp);
}

/** The request the fake model got whose last user message holds `marker`. */
function requestWith(marker) {
  return llm.requests.findLast((r) => r.messages.some((m) => m.role === "user" && String(m.content).includes(marker)));
}

const detail = (thread, opts) => call("GET", `/agent/threads/${thread}`, undefined, opts);
const assistantOf = (d, runId) => d.json.messages.find((m) => m.role === "assistant" && m.runId === runId);

describe("agents and the catalog", () => {
  test("GET /agent/agents lists the declared agents, a default built from the settings, and a lock", async () => {
    const r = await call("GET", "/agent/agents");
    assert.equal(r.status, 200, r.text);
    // agora's client reads a bare array of {name, description, isDefault?, lockedModel?}, the default first.
    assert.ok(Array.isArray(r.json), r.text);
    assert.equal(r.json[0].name, "default");
    assert.equal(r.json[0].isDefault, true);
    assert.equal(r.json.filter((a) => a.isDefault).length, 1);
    for (const a of r.json) assert.equal(typeof a.description, "string", a.name);
    const byId = Object.fromEntries(r.json.map((a) => [a.name, a]));
    assert.deepEqual(Object.keys(byId).sort(), ["default", "support", "writer"]);
    assert.equal(byId.support.lockedModel, "fake/big");
    assert.equal(byId.support.label, "Support");
    assert.equal(byId.writer.model, "fake/big");
    assert.equal(byId.writer.lockedModel, undefined);
  });

  test("GET /agent/models answers for the caller and the agent, with badges and provider labels", async () => {
    const mine = await call("GET", "/agent/models");
    assert.equal(mine.status, 200, mine.text);
    assert.deepEqual(mine.json.providerLabels, { fake: "Fake Labs" });
    // agora's ModelCatalogView: models grouped by provider, and the agent's lock.
    assert.deepEqual(mine.json.providers.map((p) => [p.id, p.label]), [["fake", "Fake Labs"]]);
    assert.deepEqual(mine.json.providers[0].models.map((m) => m.id), mine.json.models.map((m) => m.id), "the catalog's order");
    assert.deepEqual(mine.json.providers[0].models.map((m) => m.id).sort(), ["fake/big", "fake/fast", "fake/pro"]);
    assert.equal(mine.json.locked, undefined);
    const m = Object.fromEntries(mine.json.models.map((x) => [x.id, x]));
    assert.deepEqual(m["fake/fast"].badges, ["fast"]);
    assert.equal(m["fake/fast"].provider, "fake");
    assert.equal(m["fake/pro"].available, false, "a model for another role");
    assert.match(m["fake/pro"].unavailableReason, /PRO/);
    const pro = await call("GET", "/agent/models", undefined, { bearer: PRO });
    assert.equal(pro.json.models.find((x) => x.id === "fake/pro").available, true);
    const support = await call("GET", "/agent/models?agent=support");
    assert.equal(support.json.default, "fake/big");
    assert.deepEqual(support.json.locked, { model: "fake/big", reason: "support runs on Big" });
    for (const x of support.json.models) {
      assert.equal(x.available, x.id === "fake/big", x.id);
      if (x.id !== "fake/big") assert.equal(x.unavailableReason, "support runs on Big");
    }
    const none = await call("GET", "/agent/models?agent=nobody");
    assert.equal(none.status, 400);
    assert.equal(none.json.error.code, "agent_not_found");
  });

  test("a send's agent: its prompt, its tools and its locked model, stored with the message", async () => {
    const refused = await chat({ message: "hi", agent: "support", model: "fake/fast" });
    assert.equal(refused.status, 400);
    assert.equal(refused.json.error.code, "model_not_allowed");
    const unknown = await chat({ message: "hi", agent: "nobody" });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.error.code, "agent_not_found");
    const notMine = await chat({ message: "hi", model: "fake/pro" });
    assert.equal(notMine.json.error.code, "model_not_allowed");

    const s = await chat({ message: "as support agent-marker-1", agent: "support" });
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done", JSON.stringify(terminal));
    const req = requestWith("agent-marker-1");
    assert.equal(req.messages[0].content, "You are Support, terse.");
    const offered = (req.tools ?? []).map((t) => t.function.name);
    assert.ok(offered.includes("weather") && !offered.includes("echo"), offered.join(","));
    assert.equal(frames.find((f) => f.kind === "step-finish").costUsd, undefined, "Big has no prices");
    const d = await detail(s.threadId);
    const user = d.json.messages.find((m) => m.role === "user" && m.runId === s.runId);
    assert.equal(user.agent, "support");
    assert.equal(assistantOf(d, s.runId).model, "fake/big", "the locked model, though the default is Fast");

    // A queued send carries its agent, and so does regenerate.
    const q = await call("POST", "/agent/chat", { threadId: s.threadId, message: "queued as writer", agent: "writer", mode: "queue" });
    assert.equal(q.status, 202, q.text);
    await until(async () => (await detail(s.threadId)).json.messages.filter((m) => m.role === "assistant" && m.status === "completed").length === 2, { what: "queued turn" });
    const d2 = await detail(s.threadId);
    assert.equal(d2.json.messages.find((m) => m.runId === q.json.runId && m.role === "user").agent, "writer");
    assert.equal(assistantOf(d2, q.json.runId).model, "fake/big", "the writer's own model");
    const again = await chat({ threadId: s.threadId, regenerate: true, agent: "support" });
    assert.equal((await again.end()).terminal.event, "done");
    assert.equal(assistantOf(await detail(s.threadId), again.runId).agent, "support");
  });

  test("step-finish carries costUsd from the catalog's prices, and the picked id labels the usage", async () => {
    const s = await chat({ message: "priced" });
    const { frames } = await s.end();
    const finish = frames.find((f) => f.kind === "step-finish");
    assert.ok(finish.usage.inputTokens > 0);
    const want = (finish.usage.inputTokens * 1 + finish.usage.outputTokens * 2) / 1e6;
    assert.ok(Math.abs(finish.costUsd - want) < 1e-12, `${finish.costUsd} vs ${want}`);
    const a = assistantOf(await detail(s.threadId), s.runId);
    assert.equal(a.model, "fake/fast");
    assert.ok(a.usage.costUsd > 0);
  });
});

describe("what a send asks of its turn", () => {
  test("pageContext is checked, stored with the message and given to the model for that turn", async () => {
    for (const [bad, why] of [[5, "a number"], [["x"], "an array"], ["x".repeat(17 * 1024), "too large"]]) {
      const r = await chat({ message: "hi", pageContext: bad });
      assert.equal(r.status, 400, why);
      assert.equal(r.json.error.code, "invalid_page_context", why);
    }
    const s = await chat({ message: "page-marker-1", pageContext: { url: "/orders/7", title: "Order 7" } });
    assert.equal((await s.end()).terminal.event, "done");
    const req = requestWith("page-marker-1");
    const sys = req.messages.filter((m) => m.role === "system").map((m) => m.content).join("\n");
    assert.match(sys, /\/orders\/7/);
    const user = (await detail(s.threadId)).json.messages.find((m) => m.role === "user");
    assert.deepEqual(user.pageContext, { url: "/orders/7", title: "Order 7" });
    // The next turn does not see it.
    const next = await chat({ threadId: s.threadId, message: "page-marker-2" });
    await next.end();
    assert.doesNotMatch(requestWith("page-marker-2").messages.filter((m) => m.role === "system").map((m) => m.content).join("\n"), /orders\/7/);
  });

  test("sentAt: the model is told when a message was sent, not when its turn began", async () => {
    const s = await chat({ message: "time-marker-1", sentAt: 1_700_000_000_000 });
    await s.end();
    const user = requestWith("time-marker-1").messages.findLast((m) => m.role === "user").content;
    assert.ok(user.startsWith("[sent 2023-11-14T22:13:20.000Z]"), user);
    const d = await detail(s.threadId);
    assert.equal(d.json.messages.find((m) => m.role === "user").sentAt, "2023-11-14T22:13:20.000Z");
    const bad = await chat({ message: "x", sentAt: "yesterday" });
    assert.equal(bad.json.error.code, "invalid_sent_at");
  });

  test("structured output: validated against its schema, refused by the output check, or stored", async () => {
    const output = { name: "place", schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } } };
    const good = await chat({ message: '[[say:{"city":"Lisbon"}]]', output });
    assert.equal((await good.end()).terminal.event, "done");
    const req = llm.requests.findLast((r) => r.response_format);
    assert.equal(req.response_format.type, "json_schema");
    assert.equal(req.response_format.json_schema.name, "place");
    assert.deepEqual(assistantOf(await detail(good.threadId), good.runId).output, { city: "Lisbon" });
    assert.deepEqual(check.seen.at(-1).output, { city: "Lisbon" });

    const invalid = await chat({ message: '[[say:{"town":1}]]', output });
    const bad = await invalid.end();
    assert.equal(bad.terminal.event, "error");
    assert.equal(bad.terminal.data.code, "structured_output_invalid");

    const refused = await (await chat({ message: '[[say:{"city":"Atlantis"}]]', output })).end();
    assert.equal(refused.terminal.event, "error");
    assert.equal(refused.terminal.data.code, "output_rejected");

    const schema = await chat({ message: "x", output: { schema: { type: 7 } } });
    assert.equal(schema.status, 400);
    assert.equal(schema.json.error.code, "invalid_output");
    // A schema is checked against its draft's whole metaschema, nested
    // subschemas too, and names where it is wrong.
    const nested = await chat({ message: "x", output: { schema: { type: "object", properties: { city: { type: "string", minLength: "x" } } } } });
    assert.equal(nested.status, 400);
    assert.equal(nested.json.error.code, "invalid_output");
    assert.match(nested.json.error.message, /\/properties\/city\/minLength/);
    const unknown = await chat({ message: "x", output: { schema: { $schema: "https://example.com/my-draft", type: "object" } } });
    assert.equal(unknown.status, 400);
    assert.match(unknown.json.error.message, /names a draft/);
    const draft7 = { schema: { $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: { city: { type: "string" } }, required: ["city"] }, name: "place" };
    const seven = await (await chat({ message: '[[say:{"city":"Porto"}]]', output: draft7 })).end();
    assert.equal(seven.terminal.event, "done");
  });
});

describe("frames, decisions and the thread detail", () => {
  test("toolKind on tool-input-available, from the tool's declaration", async () => {
    const { frames } = await (await chat({ message: '[[tool:weather:{"city":"Lisbon"}]]' })).end();
    assert.equal(frames.find((f) => f.kind === "tool-input-available").toolKind, "read");
  });

  test("approval-requested names its approver and expiresAt; the detail shows the pending call; approval-settled names who, how, remembered", async () => {
    const s = await chat({ message: '[[tool:guarded:{"text":"one"}]]' });
    const asked = await s.waitFor((f) => f.kind === "approval-requested", "approval-requested");
    assert.equal(asked.approver, "requester");
    assert.ok(Date.parse(asked.expiresAt) > Date.now() + 500_000, asked.expiresAt);
    const input = s.frames().find((f) => f.kind === "tool-input-available");
    assert.equal(input.toolKind, "action");
    const d = await detail(s.threadId);
    assert.equal(d.json.activeRunId, s.runId);
    const pendingCall = assistantOf(d, s.runId).toolCalls.find((c) => c.id === asked.id);
    assert.equal(pendingCall.status, "pending_approval");
    const pending = assistantOf(d, s.runId).approvals[0];
    assert.deepEqual({ ...pending, expiresAt: undefined }, { toolCallId: asked.id, approver: "requester", status: "pending", expiresAt: undefined });

    // runId may be omitted: the call's id names its run.
    const ok = await call("POST", "/agent/tool-call/approve", { toolCallId: asked.id, via: "slack", remember: true });
    assert.equal(ok.status, 200, ok.text);
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done");
    const settled = frames.find((f) => f.kind === "approval-settled");
    assert.deepEqual(
      { status: settled.status, decidedBy: settled.decidedBy, decidedVia: settled.decidedVia, remember: settled.remember },
      { status: "approved", decidedBy: "alice", decidedVia: "slack", remember: true },
    );
    assert.ok(frames.findIndex((f) => f.kind === "approval-settled") < frames.findIndex((f) => f.kind === "tool-output"));
    const after = assistantOf(await detail(s.threadId), s.runId);
    assert.equal(after.toolCalls[0].status, "completed");
    assert.equal(after.toolResults[0].toolCallId, asked.id);
    assert.deepEqual(
      { ...after.approvals[0], expiresAt: undefined },
      { toolCallId: asked.id, approver: "requester", status: "approved", remember: true, decidedBy: "alice", decidedVia: "slack", expiresAt: undefined },
    );
    assert.equal((await detail(s.threadId)).json.activeRunId, null);

    // Remembered for the thread: the next call settles without asking.
    const next = await (await chat({ threadId: s.threadId, message: '[[tool:guarded:{"text":"two"}]]' })).end();
    assert.equal(next.frames.some((f) => f.kind === "approval-requested"), false);
    assert.equal(next.frames.find((f) => f.kind === "approval-settled").decidedVia, "remembered");
    assert.ok(next.frames.some((f) => f.kind === "tool-output"));
  });

  test("a rejection: approval-settled with the reason, then tool-output-denied, and the model goes on", async () => {
    const s = await chat({ message: '[[tool:guarded:{"text":"no"}]]' });
    const asked = await s.waitFor((f) => f.kind === "approval-requested", "approval-requested");
    const r = await call("POST", "/agent/tool-call/reject", { runId: s.runId, toolCallId: asked.id, reason: "not this account" });
    assert.equal(r.status, 200, r.text);
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done");
    const settled = frames.find((f) => f.kind === "approval-settled");
    assert.deepEqual([settled.status, settled.reason, settled.decidedBy], ["rejected", "not this account", "alice"]);
    const denied = frames.find((f) => f.kind === "tool-output-denied");
    assert.deepEqual([denied.id, denied.reason], [asked.id, "not this account"]);
    assert.equal(frames.some((f) => f.kind === "tool-output-error"), false, "the denial is not also an error");
    const a = assistantOf(await detail(s.threadId), s.runId);
    assert.equal(a.toolCalls[0].status, "denied");
    assert.equal(a.approvals[0].reason, "not this account");
    const bad = await call("POST", "/agent/tool-call/approve", { toolCallId: asked.id, via: "" });
    assert.equal(bad.status, 400);
  });

  test("an approval nobody gives in time: approval-settled expired, tool-output-denied 'approval expired', a late decision 410", async () => {
    const s = await chat({ message: '[[tool:lapsing:{"text":"pay"}]]' });
    const asked = await s.waitFor((f) => f.kind === "approval-requested", "approval-requested");
    assert.equal(s.frames().find((f) => f.kind === "tool-input-available").toolKind, "payment");
    assert.ok(Date.parse(asked.expiresAt) - Date.now() < 5_000, "its own ttlMs, not the global one");
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done");
    assert.equal(frames.find((f) => f.kind === "approval-settled").status, "expired");
    assert.equal(frames.find((f) => f.kind === "tool-output-denied").reason, "approval expired");
    const late = await call("POST", "/agent/tool-call/approve", { toolCallId: asked.id });
    assert.equal(late.status, 410);
    assert.equal(assistantOf(await detail(s.threadId), s.runId).approvals[0].status, "expired");
  });

  test("POST /agent/tool-call/answer and /skip settle the agent's questions, runId optional", async () => {
    const s = await chat({ message: "[[ask:text]]" });
    const asked = await s.waitFor((f) => f.kind === "approval-requested", "the question");
    assert.equal(asked.inputType, "text");
    assert.equal(assistantOf(await detail(s.threadId), s.runId).toolCalls[0].status, "pending_input");
    const wrong = await call("POST", "/agent/tool-call/approve", { toolCallId: asked.id });
    assert.equal(wrong.status, 400);
    const r = await call("POST", "/agent/tool-call/answer", { toolCallId: asked.id, answer: "blue" });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.status, "answered");
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done");
    assert.match(frames.find((f) => f.kind === "tool-output").output.answers?.[0]?.customText ?? JSON.stringify(frames.find((f) => f.kind === "tool-output").output), /blue/);

    const t = await chat({ threadId: s.threadId, message: "[[ask:text]]" });
    const q = await t.waitFor((f) => f.kind === "approval-requested", "the second question");
    const skipped = await call("POST", "/agent/tool-call/skip", { runId: t.runId, toolCallId: q.id });
    assert.equal(skipped.status, 200, skipped.text);
    assert.equal((await t.end()).terminal.event, "done");
    const unknown = await call("POST", "/agent/tool-call/answer", { toolCallId: `${s.threadId}.tc_nope`, answer: "x" });
    assert.equal(unknown.status, 404);
  });
});

describe("queue, cancel and delete under agora's routes", () => {
  test("queue changes during a turn are whole snapshots in its stream, and the handoff is its last event", async () => {
    const s = await chat({ message: "slow one [[slow:60]]" });
    await s.waitFor((f) => f.kind === "text", "the first text");
    const thread = s.threadId;
    const q1 = await call("POST", "/agent/chat", { threadId: thread, message: "second", mode: "queue", pageContext: { url: "/q" } });
    assert.equal(q1.status, 202, q1.text);
    assert.equal(q1.json.position, 0);
    const q2 = await call("POST", "/agent/chat", { threadId: thread, message: "third", mode: "queue" });
    const listed = await call("GET", `/agent/threads/${thread}/queue`);
    // agora's ChatQueueState, bare: {items: [{id, content, createdAt, updatedAt}], paused: null}.
    assert.deepEqual(listed.json.items.map((i) => i.content), ["second", "third"]);
    assert.deepEqual(listed.json.items.map((i) => i.id), [q1.json.messageId, q2.json.messageId]);
    assert.equal(listed.json.paused, null);
    assert.ok(Date.parse(listed.json.items[0].createdAt) > 0, listed.text);
    assert.equal((await call("PATCH", `/agent/threads/${thread}/queue/${q2.json.messageId}`, { message: "third, edited" })).status, 200);
    assert.equal((await call("POST", `/agent/threads/${thread}/queue/${q2.json.messageId}/move`, { position: 0 })).status, 200);
    const { frames, terminal } = await s.end();
    assert.equal(terminal.event, "done");
    const snapshots = frames.filter((f) => f.kind === "queue");
    assert.ok(snapshots.length >= 4, `${snapshots.length} queue frames`);
    assert.deepEqual(snapshots[1].queue.items.map((i) => i.content), ["second", "third"], "a whole snapshot, not a delta");
    const last = frames.at(-1);
    assert.equal(last.kind, "queue", "the handoff is the stream's last event");
    // A queued message's run id is its own message id.
    assert.deepEqual(last.started, { messageId: q2.json.messageId, runId: q2.json.messageId });
    assert.deepEqual(last.queue.items.map((i) => i.content), ["second"]);
    assert.equal(last.queue.paused, null);
    // The started run streams under its own id.
    const next = await fetch(`${worker.url}/agent/chat/${encodeURIComponent(last.started.runId)}/stream`, { headers: { authorization: `Bearer ${ALICE}` } });
    const nextRun = await new RunStream(next).end();
    assert.equal(nextRun.terminal.event, "done");
    // Pause, resume, remove.
    await until(async () => (await detail(thread)).json.activeRunId === null, { what: "the thread settles" });
    const paused = await call("POST", `/agent/threads/${thread}/queue/pause`);
    assert.equal(paused.json.paused.reason, "paused", paused.text);
    assert.ok(Date.parse(paused.json.paused.at) > 0, paused.text);
    const held = await call("POST", "/agent/chat", { threadId: thread, message: "held", mode: "queue" });
    await sleep(200);
    assert.deepEqual((await call("GET", `/agent/threads/${thread}/queue`)).json.items.map((i) => i.content), ["held"]);
    assert.equal((await call("DELETE", `/agent/threads/${thread}/queue/${held.json.messageId}`)).status, 200);
    const resumed = await call("POST", `/agent/threads/${thread}/queue/resume`);
    assert.deepEqual([resumed.json.paused, resumed.json.items.length], [null, 0]);
  });

  test("POST /agent/chat/:runId/cancel ends the run with a cancelled frame and done, answers {aborted}; DELETE /agent/threads/:id removes the thread", async () => {
    const s = await chat({ message: "slow to cancel [[slow:200]]" });
    await s.waitFor((f) => f.kind === "text", "the first text");
    const r = await call("POST", `/agent/chat/${encodeURIComponent(s.runId)}/cancel`);
    assert.deepEqual([r.status, r.json.aborted, r.json.cancelled], [200, true, true], r.text);
    const { frames, terminal } = await s.end();
    // As agora's server ends it ("ends a cancelled run with a cancelled frame"): no fifth error code.
    assert.equal(terminal.event, "done");
    assert.deepEqual(frames.at(-1), { kind: "cancelled" });
    const again = await call("POST", `/agent/chat/${encodeURIComponent(s.runId)}/cancel`);
    assert.deepEqual([again.status, again.json.aborted, again.json.cancelled], [200, false, false]);
    assert.equal((await call("POST", `/agent/chat/${s.threadId}.run_nope/cancel`)).status, 404);
    assert.equal((await call("DELETE", `/agent/threads/${s.threadId}`)).status, 200);
    assert.equal((await detail(s.threadId)).status, 404);
  });
});

describe("quota", () => {
  const q = { w: null, bearer: null };
  before(() => (q.w = quotaWorker));

  test("usage counts against the actor's budget: GET /agent/quota, a direct send ends quota_exceeded, the queue pauses and says why", async () => {
    const fresh = await call("GET", "/agent/quota", undefined, q);
    assert.equal(fresh.status, 200, fresh.text);
    assert.deepEqual([fresh.json.period, fresh.json.limit, fresh.json.used.tokens], ["day", { tokens: 1 }, 0]);
    // agora's QuotaReport: one window per period.
    assert.deepEqual(
      fresh.json.windows.map((w) => [w.period, w.usedTokens, w.limitTokens, w.resetsAt]),
      [["day", 0, 1, fresh.json.resetsAt]],
    );
    assert.equal(fresh.json.blocked, undefined);
    assert.ok(Date.parse(fresh.json.resetsAt) > Date.now());
    // The first turn starts with nothing used; a message queued behind it is
    // checked as it starts, against the budget the first one spent.
    const first = await chat({ message: "spend [[slow:40]]" }, q);
    await first.waitFor((f) => f.kind === "text", "the first text");
    const queued = await call("POST", "/agent/chat", { threadId: first.threadId, message: "after", mode: "queue" }, q);
    assert.equal(queued.status, 202, queued.text);
    const { frames, terminal } = await first.end();
    assert.equal(terminal.event, "done");
    const last = frames.at(-1);
    assert.equal(last.kind, "queue");
    assert.equal(last.queue.paused.reason, "quota_exceeded");
    assert.ok(Date.parse(last.queue.paused.at) > 0, JSON.stringify(last.queue.paused));
    assert.equal(last.started, undefined);
    assert.equal(last.queue.items.length, 1, "a paused queue keeps its messages");
    await until(async () => (await call("GET", "/agent/quota", undefined, q)).json.used.tokens > 1, { what: "usage reaches the directory" });
    const direct = await (await chat({ message: "one more" }, q)).end();
    assert.deepEqual([direct.terminal.event, direct.terminal.data.code], ["error", "quota_exceeded"]);
    const more = await call("POST", "/agent/chat", { threadId: first.threadId, message: "and more", mode: "queue" }, q);
    assert.deepEqual([more.status, more.json.error.code], [429, "quota_exceeded"]);
    // Resuming checks again: still spent, still paused.
    const resumed = await call("POST", `/agent/threads/${first.threadId}/queue/resume`, undefined, q);
    assert.equal(resumed.json.paused?.reason, "quota_exceeded", resumed.text);
  });
});
