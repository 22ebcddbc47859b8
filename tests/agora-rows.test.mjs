// agora's rows that need a restart, two runs or a policy change to prove
// (docs/protocols/agora.md, "Conformance"): a run resumed after a restart
// runs on the model its turn picked; a queued message's `sentAt` is when it
// was queued; one run never approves another's call; a tool the policy does
// not require approval for runs without asking; a TTL lapses across a
// restart; the approver a waiting call needs stays what it was when asked,
// whatever the policy says later; and reasoning on a reloaded message.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startWorker, parseSse, hs256Jwt, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "agora-rows-secret-0123456789abcdef";
const token = (sub, roles = []) => hs256Jwt(SECRET, { sub, roles, exp: Math.floor(Date.now() / 1000) + 600 });
const ALICE = token("alice");
const FRANK = token("frank", ["FINANCE"]);
const MODELS = {
  default: "fake/fast",
  models: { "fake/fast": { model: "fake-fast", label: "Fast" }, "fake/big": { model: "fake-big", label: "Big" } },
};

let llm, tools, dir, declared;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  const echo = tools.declarations.find((t) => t.name === "echo");
  declared = [
    ...tools.declarations,
    { ...echo, name: "guarded", approval: "required" },
    { ...echo, name: "waived", approval: "required" },
    { ...echo, name: "pay", approval: "required" },
    { ...echo, name: "lapsing", approval: "required" },
  ];
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "agora-rows-"));
});
after(async () => {
  await llm?.close();
  await tools?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A worker on the shared state folder, with `policy` as APPROVAL_POLICY. */
function worker(policy = {}) {
  return startWorker({
    persist: dir,
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify(declared),
      LLM_MODELS: JSON.stringify(MODELS),
      AGENT_MESSAGE_TIMESTAMPS: "1",
      APPROVAL_POLICY: JSON.stringify(policy),
    },
  });
}

async function call(w, method, p, body, bearer = ALICE) {
  const headers = { authorization: `Bearer ${bearer}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const resp = await fetch(w.url + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = resp.headers.get("content-type")?.startsWith("text/event-stream") ? "" : await resp.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: resp.status, json, text, resp };
}

/** Starts an agora send; resolves once its run is known: `{runId, threadId, frames()}`. */
async function send(w, body) {
  const resp = await fetch(`${w.url}/agent/chat`, {
    method: "POST",
    headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(resp.status, 200);
  // A stream a restart cuts ends the read, never the test.
  const text = resp.text().catch(() => "");
  return { runId: resp.headers.get("x-agent-run-id"), threadId: resp.headers.get("x-agent-thread-id"), frames: async () => parseSse(await text) };
}

const detail = async (w, thread) => (await call(w, "GET", `/agent/threads/${thread}`)).json;
const pendingCall = (d) => d.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.status === "pending_approval");
const waitPending = (w, thread) => until(async () => pendingCall(await detail(w, thread)), { what: "a call waiting for approval" });

describe("agora's rows across restarts, runs and policies", () => {
  test("a run resumed after a restart runs on the model its turn picked", async () => {
    let w = await worker();
    const s = await send(w, { message: '[[tool:guarded:{"text":"big"}]]', model: "fake/big" });
    const tc = await waitPending(w, s.threadId);
    await w.stop();
    const seen = llm.requests.length;
    w = await worker();
    try {
      const r = await call(w, "POST", "/agent/tool-call/approve", { runId: s.runId, toolCallId: tc.id });
      assert.equal(r.status, 200, r.text);
      await until(async () => (await detail(w, s.threadId)).activeRunId === null, { what: "the run ends" });
      const after = llm.requests.slice(seen);
      assert.ok(after.length > 0, "the model was asked again");
      assert.deepEqual([...new Set(after.map((q) => q.model))], ["fake-big"], "the turn's model, not the default");
      assert.equal((await detail(w, s.threadId)).model, null, "the pick was the turn's, not a pin");
    } finally {
      await w.stop();
    }
  });

  test("a queued message's sentAt is when it was queued, not when it ran", async () => {
    const w = await worker();
    try {
      const s = await send(w, { message: "slow first [[slow:60]]" });
      const queuedAt = Date.now();
      const q = await call(w, "POST", "/agent/chat", { threadId: s.threadId, message: "queued one", mode: "queue" });
      assert.equal(q.status, 202, q.text);
      await s.frames();
      await until(async () => (await detail(w, s.threadId)).messages.filter((m) => m.role === "user").length === 2 && (await detail(w, s.threadId)).activeRunId === null, {
        what: "the queued message ran",
      });
      const d = await detail(w, s.threadId);
      const user = d.messages.find((m) => m.role === "user" && m.content === "queued one");
      const sentAt = Date.parse(user.sentAt);
      assert.ok(Math.abs(sentAt - queuedAt) < 1000, `sentAt ${user.sentAt} is the queueing time (${new Date(queuedAt).toISOString()})`);
      const ran = llm.requests.findLast((r) => JSON.stringify(r.messages).includes("queued one"));
      assert.match(JSON.stringify(ran.messages), new RegExp(new Date(sentAt).toISOString().slice(0, 16)), "the model is told when it was queued");
    } finally {
      await w.stop();
    }
  });

  test("one run never approves another's call: run A's runId with run B's toolCallId is 404, B still waits", async () => {
    const w = await worker();
    try {
      const a = await send(w, { message: '[[tool:guarded:{"text":"a"}]]' });
      const b = await send(w, { message: '[[tool:guarded:{"text":"b"}]]' });
      await waitPending(w, a.threadId);
      const tcB = await waitPending(w, b.threadId);
      const r = await call(w, "POST", "/agent/tool-call/approve", { runId: a.runId, toolCallId: tcB.id });
      assert.deepEqual([r.status, r.json.error.code], [404, "tool_call_not_found"], r.text);
      assert.equal(pendingCall(await detail(w, b.threadId))?.id, tcB.id, "B's call still waits");
      assert.ok(pendingCall(await detail(w, a.threadId)), "A's call still waits");
      for (const x of [a, b]) await call(w, "POST", `/agent/chat/${x.runId}/cancel`);
    } finally {
      await w.stop();
    }
  });

  test("a tool whose policy says required: false runs without asking", async () => {
    const w = await worker({ tools: { waived: { required: false } } });
    try {
      const s = await send(w, { message: '[[tool:waived:{"text":"go"}]]' });
      const kinds = (await s.frames()).filter((f) => f.data && f.event === undefined).map((f) => JSON.parse(f.data).kind);
      assert.ok(kinds.includes("tool-output"), kinds.join(" "));
      assert.equal(kinds.includes("approval-requested"), false, "never asked");
    } finally {
      await w.stop();
    }
  });

  test("a TTL lapses across a restart: the call settles expired, and a late decision is 410", async () => {
    let w = await worker({ tools: { lapsing: { ttlMs: 1500 } } });
    const s = await send(w, { message: '[[tool:lapsing:{"text":"pay"}]]' });
    const tc = await waitPending(w, s.threadId);
    await w.stop();
    await sleep(1800); // it lapses while no process holds the thread
    w = await worker({ tools: { lapsing: { ttlMs: 1500 } } });
    try {
      await until(async () => (await detail(w, s.threadId)).activeRunId === null, { what: "the run goes on after the lapse", timeoutMs: 10_000 });
      const d = await detail(w, s.threadId);
      const approvals = d.messages.flatMap((m) => m.approvals ?? []);
      assert.deepEqual(approvals.map((a) => [a.toolCallId, a.status]), [[tc.id, "expired"]]);
      const late = await call(w, "POST", "/agent/tool-call/approve", { toolCallId: tc.id });
      assert.equal(late.status, 410, late.text);
    } finally {
      await w.stop();
    }
  });

  test("the approver a waiting call needs is fixed when it is asked, whatever the policy says later", async () => {
    let w = await worker({ tools: { pay: { approver: "FINANCE" } } });
    const s = await send(w, { message: '[[tool:pay:{"text":"1000"}]]' });
    const tc = await waitPending(w, s.threadId);
    await w.stop();
    // The policy no longer names an approver: the call still needs FINANCE.
    w = await worker({});
    try {
      const owner = await call(w, "POST", "/agent/tool-call/approve", { runId: s.runId, toolCallId: tc.id });
      assert.deepEqual([owner.status, owner.json.error.code], [403, "approver_required"], owner.text);
      const frank = await call(w, "POST", "/agent/tool-call/approve", { runId: s.runId, toolCallId: tc.id }, FRANK);
      assert.equal(frank.status, 200, frank.text);
      await until(async () => (await detail(w, s.threadId)).activeRunId === null, { what: "the run ends" });
      const [approval] = (await detail(w, s.threadId)).messages.flatMap((m) => m.approvals ?? []);
      assert.deepEqual([approval.approver, approval.decidedBy], ["FINANCE", "frank"]);
    } finally {
      await w.stop();
    }
  });

  test("reasoning: its frames stream the thought, and the reloaded message has the text and how long it took", async () => {
    const w = await worker();
    try {
      const started = Date.now();
      const s = await send(w, { message: "think first [[reason]]" });
      const frames = (await s.frames()).filter((f) => f.event === undefined && f.data).map((f) => JSON.parse(f.data));
      const elapsed = Date.now() - started;
      const thought = frames.filter((f) => f.kind === "reasoning").map((f) => f.text).join("");
      assert.equal(thought, "Let me think about this step by step... The user wants an answer, so I will echo their message.");
      assert.ok(frames.findIndex((f) => f.kind === "reasoning") < frames.findIndex((f) => f.kind === "text"), "the thought comes before the answer");
      const row = (await detail(w, s.threadId)).messages.findLast((m) => m.role === "assistant");
      assert.equal(row.reasoning, thought);
      assert.ok(Number.isInteger(row.reasoningMs) && row.reasoningMs >= 0 && row.reasoningMs <= elapsed, `reasoningMs ${row.reasoningMs} within the run's ${elapsed} ms`);
    } finally {
      await w.stop();
    }
  });
});
