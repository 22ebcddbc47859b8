// The Confirmations issue, over real HTTP on workerd: approval-required
// tools and ask-user suspend a run until a person decides.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, sleep, until, tempDir } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;

/** An echo tool that needs approval (the declaration's own flag). */
const guarded = () => ({ ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required", severity: "destructive" });

async function stack(vars = {}, opts = {}) {
  const w = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify([...tools.declarations, guarded()]), ...vars },
    ...opts,
  });
  return { w, api: client(w.url) };
}

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  ({ w: worker, api } = await stack({ RUN_IDLE_TIMEOUT_MS: "1000" }));
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

const confirm = (a, requestId, body) => a.call("POST", `/instance-ai/confirm/${requestId}`, body);

/** Starts a run and waits for its confirmation-request. */
async function suspendOn(message, { a = api, thread = newThread("cf") } = {}) {
  const r = await a.chat(thread, message);
  assert.equal(r.status, 200, r.text);
  const sse = a.events(thread);
  await sse.ready;
  const request = await sse.waitFor((e) => e.type === "confirmation-request", 8000);
  return { thread, runId: r.json.runId, sse, request };
}

const guardedCalls = (marker) => tools.calls.filter((c) => c.path === "/echo" && JSON.stringify(c.body).includes(marker));

describe("approval", () => {
  test("an approval-required tool suspends the run; approve runs it and the run completes", async () => {
    const { thread, sse, request } = await suspendOn('do it [[tool:guarded:{"text":"approve-me"}]]');
    const p = request.payload;
    assert.match(p.requestId, new RegExp(`^${thread}\\.cr_`));
    assert.equal(p.toolName, "guarded");
    assert.deepEqual(p.args, { text: "approve-me" });
    assert.equal(p.severity, "destructive");
    assert.equal(p.inputType, "approval");
    assert.match(p.message, /guarded/);
    assert.ok(p.toolCallId);

    // Suspended, the run holds; the idle timeout (1 s here) does not end it.
    await sleep(1500);
    const status = (await api.status(thread)).json;
    assert.equal(status.hasActiveRun, true);
    assert.equal(status.isSuspended, true);
    const tc = (await api.messages(thread)).json.messages[1].agentTree.toolCalls[0];
    assert.equal(tc.confirmation.requestId, p.requestId, "messages show the pending card on its tool call");
    assert.equal(tc.isLoading, true);
    assert.equal(guardedCalls("approve-me").length, 0, "nothing ran before approval");

    const ok = await confirm(api, p.requestId, { approved: true });
    assert.deepEqual(ok.json, { ok: true, requestId: p.requestId, state: "approved" });
    const result = await sse.waitFor((e) => e.type === "tool-result");
    assert.equal(result.payload.toolCallId, p.toolCallId);
    const fin = await sse.waitFor((e) => e.type === "run-finish");
    assert.equal(fin.payload.status, "completed");
    assert.equal(guardedCalls("approve-me").length, 1);
    assert.equal((await api.status(thread)).json.isSuspended, false);

    const again = await confirm(api, p.requestId, { approved: true });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "confirmation_decided");
    sse.close();
  });

  test("deny with a reason: tool-error, and the model is told why and continues", async () => {
    const { sse, request } = await suspendOn('no [[tool:guarded:{"text":"deny-me"}]]');
    const r = await confirm(api, request.payload.requestId, { approved: false, userInput: "not on a Friday" });
    assert.equal(r.json.state, "denied");
    const err = await sse.waitFor((e) => e.type === "tool-error");
    assert.equal(err.payload.error, "The user denied this tool call: not on a Friday");
    const fin = await sse.waitFor((e) => e.type === "run-finish");
    assert.equal(fin.payload.status, "completed");
    const followUp = llm.requests.filter((b) => JSON.stringify(b.messages).includes("deny-me")).at(-1);
    assert.match(followUp.messages.at(-1).content, /denied this tool call: not on a Friday/);
    assert.equal(guardedCalls("deny-me").length, 0, "a denied tool never runs");
    sse.close();
  });

  test("scope session approves later calls of the same tool in the thread without asking", async () => {
    const first = await suspendOn('once [[tool:guarded:{"text":"s1"}]]');
    await confirm(api, first.request.payload.requestId, { approved: true, scope: "session" });
    await first.sse.waitFor((e) => e.type === "run-finish");
    first.sse.close();
    const r = await api.chat(first.thread, 'again [[tool:guarded:{"text":"s2"}]]');
    const sse = api.events(first.thread, { query: `?lastEventId=${first.sse.durable().at(-1).id}` });
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === r.json.runId);
    assert.ok(!sse.events().some((e) => e.type === "confirmation-request"), "no second question");
    assert.equal(guardedCalls('"s2"').length, 1);
    // Another thread still asks.
    const other = await suspendOn('elsewhere [[tool:guarded:{"text":"s3"}]]');
    assert.equal(other.request.payload.toolName, "guarded");
    await api.cancel(other.thread);
    other.sse.close();
    sse.close();
  });

  test("bad decisions: 404 unknown or another thread's, 400 malformed, 409 after cancel", async () => {
    const { thread, sse, request } = await suspendOn('check [[tool:guarded:{"text":"bad"}]]');
    const rid = request.payload.requestId;
    const local = rid.split(".")[1];
    for (const id of [`${thread}.cr_000000000000000000000000`, `${newThread("other")}.${local}`, "no-dot-here", "a.b.c"]) {
      const r = await confirm(api, id, { approved: true });
      assert.equal(r.status, 404, id);
      assert.equal(r.json.error.code, "confirmation_not_found");
    }
    for (const body of ['{"approved":"yes"}', "{}", "[1]", "not json", '{"approved":true,"scope":"forever"}']) {
      const r = await api.call("POST", `/instance-ai/confirm/${rid}`, body);
      assert.equal(r.status, 400, body);
      assert.ok(["invalid_decision", "invalid_json"].includes(r.json.error.code), r.text);
    }
    assert.equal((await api.status(thread)).json.isSuspended, true, "bad decisions change nothing");
    // Cancel while suspended: the run ends cleanly and the request is settled.
    await api.cancel(thread);
    const fin = await sse.waitFor((e) => e.type === "run-finish");
    assert.deepEqual(fin.payload, { status: "cancelled", reason: "user_cancelled" });
    // The call that waited on its decision settles as a cancelled result.
    const settled = sse.events().find((e) => e.type === "tool-result" && e.payload.toolCallId === request.payload.toolCallId);
    assert.equal(settled.payload.result, '[Tool call cancelled. User said: "Run aborted"]');
    const late = await confirm(api, rid, { approved: true });
    assert.equal(late.status, 409);
    assert.equal(late.json.error.state, "cancelled");
    assert.deepEqual((await api.status(thread)).json, { hasActiveRun: false, isSuspended: false, backgroundTasks: [], queue: { items: [], paused: false } });
    sse.close();
  });

  test("a reload while suspended shows the pending card exactly once", async () => {
    const { thread, sse, request } = await suspendOn('reload [[tool:guarded:{"text":"reload"}]]');
    sse.close();
    const m = (await api.messages(thread)).json;
    const cards = m.messages[1].agentTree.toolCalls.filter((t) => t.confirmation);
    assert.equal(cards.length, 1);
    const status = (await api.status(thread)).json;
    assert.equal(status.isSuspended, true);
    const fresh = api.events(thread, { query: `?lastEventId=${m.nextEventId - 1}` });
    await fresh.ready;
    await sleep(300);
    assert.equal(fresh.events().filter((e) => e.type === "confirmation-request").length, 0, "not again over SSE");
    await confirm(api, request.payload.requestId, { approved: true });
    await fresh.waitFor((e) => e.type === "run-finish");
    assert.equal(fresh.events().filter((e) => e.type === "confirmation-request").length, 0);
    fresh.close();
  });
});

describe("ask-user", () => {
  test("questions: the answers reach the model as the tool's result", async () => {
    const { sse, request } = await suspendOn("choose [[ask]]");
    assert.equal(request.payload.toolName, "ask-user");
    assert.equal(request.payload.inputType, "questions");
    assert.equal(request.payload.questions[0].id, "q1");
    const bad = await confirm(api, request.payload.requestId, { approved: true });
    assert.equal(bad.status, 400, "questions need answers");
    const answers = [{ questionId: "q1", selectedOptions: ["b"], customText: "b please" }];
    assert.equal((await confirm(api, request.payload.requestId, { answers })).status, 200);
    const result = await sse.waitFor((e) => e.type === "tool-result");
    assert.deepEqual(result.payload.result, { approved: true, answers });
    await sse.waitFor((e) => e.type === "run-finish");
    const followUp = llm.requests.filter((b) => JSON.stringify(b.messages).includes("choose [[ask]]")).at(-1);
    assert.match(followUp.messages.at(-1).content, /b please/);
    sse.close();
  });

  test("text and plan-review inputs", async () => {
    const text = await suspendOn("say something [[ask:text]]");
    assert.equal(text.request.payload.inputType, "text");
    await confirm(api, text.request.payload.requestId, { answers: [{ questionId: "text", selectedOptions: [], customText: "hello" }] });
    assert.equal((await text.sse.waitFor((e) => e.type === "tool-result")).payload.result.answers[0].customText, "hello");
    text.sse.close();

    const plan = await suspendOn("review [[ask:plan-review]]");
    assert.equal(plan.request.payload.inputType, "plan-review");
    assert.ok(plan.request.payload.tasks);
    await confirm(api, plan.request.payload.requestId, { approved: false, userInput: "add tests first" });
    const err = await plan.sse.waitFor((e) => e.type === "tool-error");
    assert.match(err.payload.error, /add tests first/);
    plan.sse.close();
  });
});

describe("policy", () => {
  test("APPROVAL_POLICY: required and ttlMs; a lapsed request settles as expired and the model goes on", async () => {
    const { w, api: a } = await stack({ APPROVAL_POLICY: JSON.stringify({ echo: { required: true, ttlMs: 800 } }) });
    try {
      const { sse, request } = await suspendOn('policy [[tool:echo:{"text":"ttl"}]]', { a });
      assert.equal(request.payload.toolName, "echo");
      const err = await sse.waitFor((e) => e.type === "tool-error", 8000);
      assert.match(err.payload.error, /expired/);
      assert.doesNotMatch(err.payload.error, /denied/);
      const fin = await sse.waitFor((e) => e.type === "run-finish");
      assert.equal(fin.payload.status, "completed");
      const late = await confirm(a, request.payload.requestId, { approved: true });
      assert.equal(late.status, 410);
      assert.equal(late.json.error.code, "confirmation_expired");
      sse.close();
    } finally {
      await w.stop();
    }
  });

  test("an invalid APPROVAL_POLICY refuses runs instead of skipping approvals", async () => {
    const { w, api: a } = await stack({ APPROVAL_POLICY: "{not json" });
    try {
      const r = await a.chat(newThread(), "hi");
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, "invalid_approval_policy");
    } finally {
      await w.stop();
    }
  });
});

describe("restarts and external agents", () => {
  test("approve after a workerd restart resumes the run where it paused", async () => {
    const dir = tempDir();
    let { w, api: a } = await stack({}, { persist: dir });
    try {
      const { thread, sse, request } = await suspendOn('restart [[tool:guarded:{"text":"after-restart"}]]', { a });
      sse.close();
      await w.kill();
      ({ w, api: a } = await stack({}, { persist: dir }));
      assert.equal((await a.status(thread)).json.isSuspended, true, "still waiting after the restart");
      const ok = await confirm(a, request.payload.requestId, { approved: true });
      assert.equal(ok.status, 200, ok.text);
      const after = a.events(thread);
      await after.ready;
      const fin = await after.waitFor((e) => e.type === "run-finish", 8000);
      assert.equal(fin.payload.status, "completed");
      assert.ok(after.events().some((e) => e.type === "tool-result" && e.payload.toolCallId === request.payload.toolCallId));
      assert.equal(guardedCalls("after-restart").length, 1);
      after.close();
    } finally {
      await w.stop();
    }
  });

  test("an external agent's confirmation-request is decided through its webhook", async () => {
    const hook = await startWebhook();
    const w = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url } });
    try {
      const a = client(w.url);
      const thread = newThread("ext");
      const r = await a.chat(thread, "hi");
      const signal = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
      const pub = await a.publish(thread, r.json.runId, signal.publishToken, [
        { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "drop-table", args: {} } },
        {
          type: "confirmation-request",
          agentId: "orchestrator",
          payload: { requestId: "mine-1", toolCallId: "t1", toolName: "drop-table", args: {}, severity: "destructive", message: "Drop it?" },
        },
      ]);
      assert.equal(pub.status, 200, pub.text);
      const sse = a.events(thread);
      await sse.ready;
      const req = await sse.waitFor((e) => e.type === "confirmation-request");
      assert.equal(req.payload.requestId, `${thread}.mine-1`);
      assert.equal((await a.status(thread)).json.isSuspended, true);
      const ok = await confirm(a, req.payload.requestId, { approved: false, userInput: "keep it" });
      assert.equal(ok.status, 200, ok.text);
      const cb = await hook.next((m) => m.type === "confirmation");
      assert.deepEqual(cb, {
        type: "confirmation",
        runId: r.json.runId,
        requestId: "mine-1",
        toolCallId: "t1",
        decision: { userInput: "keep it", approved: false, state: "denied" },
      });
      assert.equal((await a.status(thread)).json.isSuspended, false);
      sse.close();
    } finally {
      await w.stop();
      await hook.close();
    }
  });
});
