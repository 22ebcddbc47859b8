// The Busy threads issue (queue, interrupt, regenerate, models), over real
// HTTP on workerd with the built-in agent and the fake model.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, sleep, until, tempDir } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

let llm, worker, api;

const MODELS = {
  default: "fast",
  models: {
    fast: { model: "fake-model", label: "Fast" },
    big: { model: "fake-big", label: "Big" },
    locked: { model: "fake-locked", label: "Locked", available: false, unavailableReason: "over budget" },
  },
};

async function stack(vars = {}, opts = {}) {
  const w = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", LLM_MODELS: JSON.stringify(MODELS), ...vars }, ...opts });
  return { w, api: client(w.url) };
}

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  ({ w: worker, api } = await stack());
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

const send = (a, thread, message, extra = {}) => a.call("POST", `/instance-ai/chat/${thread}`, { message, ...extra });
const runStarts = (sse) => sse.events().filter((e) => e.type === "run-start");
const userMessages = async (a, thread) =>
  (await a.messages(thread)).json.messages.filter((m) => m.role === "user").map((m) => m.content);

describe("message queue", () => {
  test("a queued send while a run is busy: 202, its run id known up front, started when the run settles", async () => {
    const thread = newThread("q");
    const first = await send(api, thread, "first [[slow:150]]", { mode: "queue" });
    const sse = api.events(thread);
    await sse.ready;
    assert.equal(first.status, 202);
    assert.equal(first.json.queued, true);
    assert.ok(first.json.runId, "started at once: the thread was free");
    assert.equal(first.json.position, 0);
    const second = await send(api, thread, "second", { mode: "queue" });
    assert.equal(second.status, 202);
    assert.equal(second.json.runId, undefined, "waits: no run yet");
    assert.equal(second.json.position, 0);
    assert.deepEqual(second.json.queue.items.map((i) => i.message), ["second"]);
    assert.equal(second.json.queue.items[0].runId, second.json.messageId, "its run id is its message id");
    const upd = await sse.waitFor((e) => e.type === "queue-updated");
    assert.equal(upd.payload.items[0].messageId, second.json.messageId);
    assert.equal((await api.status(thread)).json.queue.items.length, 1);
    const started = await sse.waitFor((e) => e.type === "run-start" && e.runId === second.json.messageId, 10000);
    assert.ok(started);
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === second.json.messageId);
    assert.deepEqual(await userMessages(api, thread), ["first [[slow:150]]", "second"]);
    assert.equal((await api.status(thread)).json.queue.items.length, 0);
    sse.close();
  });

  test("50 concurrent queued sends all run, in order, once each", async () => {
    const thread = newThread("q50");
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => send(api, thread, `m${i}`, { mode: "queue" })));
    const sse = api.events(thread);
    await sse.ready;
    for (const r of replies) assert.equal(r.status, 202, r.text);
    const ids = replies.map((r) => r.json.messageId);
    assert.equal(new Set(ids).size, 50);
    await until(async () => (await userMessages(api, thread)).length === 50 && !(await api.status(thread)).json.hasActiveRun, {
      timeoutMs: 60000,
      stepMs: 200,
      what: "all 50 runs",
    });
    await until(() => sse.events().filter((e) => e.type === "run-finish").length === 50, { timeoutMs: 10000, what: "50 run-finish" });
    const starts = runStarts(sse).map((e) => e.runId);
    assert.equal(new Set(starts).size, 50, "each run started once");
    // In order: the order the queue accepted them (first seen in its snapshots).
    const accepted = replies.filter((r) => r.json.runId).map((r) => r.json.messageId);
    for (const u of sse.events().filter((e) => e.type === "queue-updated")) {
      for (const item of u.payload.items) if (!accepted.includes(item.messageId)) accepted.push(item.messageId);
    }
    assert.deepEqual(starts, accepted);
    assert.equal((await userMessages(api, thread)).length, 50);
    sse.close();
  });

  test("edit, move, remove, pause and resume; each change is one queue-updated snapshot", async () => {
    const thread = newThread("qe");
    const busy = await send(api, thread, "hold [[slow:400]]", { mode: "queue" });
    assert.ok(busy.json.runId);
    const a = (await send(api, thread, "a", { mode: "queue" })).json.messageId;
    const b = (await send(api, thread, "b", { mode: "queue" })).json.messageId;
    const c = (await send(api, thread, "c", { mode: "queue" })).json.messageId;
    const q = (p) => `/instance-ai/threads/${thread}/queue${p}`;
    assert.equal((await api.call("POST", q("/pause"))).json.queue.paused, true);
    assert.equal((await api.call("PATCH", q(`/${b}`), { message: "B edited" })).status, 200);
    const moved = await api.call("POST", q(`/${c}/move`), { position: 0 });
    assert.deepEqual(moved.json.queue.items.map((i) => i.message), ["c", "a", "B edited"]);
    assert.equal((await api.call("DELETE", q(`/${a}`))).status, 200);
    assert.equal((await api.call("DELETE", q(`/${a}`))).status, 404);
    assert.equal((await api.call("POST", q(`/${c}/move`), { position: -1 })).status, 400);
    assert.equal((await api.call("PATCH", q(`/${c}`), { message: "" })).status, 400);
    const listed = (await api.call("GET", q(""))).json.queue;
    assert.deepEqual(listed.items.map((i) => i.message), ["c", "B edited"]);
    // Paused: the busy run settles and nothing starts.
    await until(async () => !(await api.status(thread)).json.hasActiveRun, { timeoutMs: 15000, what: "the busy run to end" });
    await sleep(300);
    assert.equal((await api.status(thread)).json.hasActiveRun, false);
    assert.equal((await api.status(thread)).json.queue.items.length, 2);
    assert.equal((await api.call("POST", q("/resume"))).status, 200);
    await until(async () => (await userMessages(api, thread)).length === 3, { timeoutMs: 15000, what: "the queue to drain" });
    assert.deepEqual(await userMessages(api, thread), ["hold [[slow:400]]", "c", "B edited"]);
    const replay = api.events(thread);
    await replay.ready;
    await replay.waitFor((e) => e.type === "run-finish" && e.runId === b);
    const snapshots = replay.events().filter((e) => e.type === "queue-updated");
    assert.ok(snapshots.length >= 7, `${snapshots.length} snapshots`);
    for (const s of snapshots) assert.ok(Array.isArray(s.payload.items) && typeof s.payload.paused === "boolean");
    replay.close();
  });

  test("interrupt cancels the active run and runs the new message next", async () => {
    const thread = newThread("qi");
    const slow = await send(api, thread, "long one [[slow:300]]");
    const sse = api.events(thread);
    await sse.ready;
    await send(api, thread, "queued behind", { mode: "queue" });
    const r = await send(api, thread, "stop and do this", { mode: "interrupt" });
    assert.equal(r.status, 202, r.text);
    assert.equal(r.json.interrupting, slow.json.runId);
    const fin = await sse.waitFor((e) => e.type === "run-finish" && e.runId === slow.json.runId);
    assert.deepEqual(fin.payload, { status: "cancelled", reason: "interrupted" });
    await sse.waitFor((e) => e.type === "run-start" && e.runId === r.json.runId);
    await until(async () => (await userMessages(api, thread)).length === 3, { timeoutMs: 15000, what: "all three" });
    assert.deepEqual(await userMessages(api, thread), ["long one [[slow:300]]", "stop and do this", "queued behind"]);
    sse.close();
  });

  test("reject mode stays the default: 409 run_active; a bad mode is 400", async () => {
    const thread = newThread("qr");
    await send(api, thread, "busy [[slow:200]]");
    const r = await send(api, thread, "again");
    assert.equal(r.status, 409);
    assert.equal(r.json.error.code, "run_active");
    const bad = await send(api, thread, "x", { mode: "later" });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, "invalid_mode");
    await api.cancel(thread);
  });

  test("a settling run racing a new send: the queued message takes the lock, exactly once", async () => {
    const hook = await startWebhook();
    const w = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url } });
    try {
      const a = client(w.url);
      for (let round = 0; round < 5; round++) {
        const thread = newThread("race");
        const first = await send(a, thread, "first");
        const queued = await send(a, thread, "queued", { mode: "queue" });
        const signal = await hook.next((m) => m.type === "run" && m.runId === first.json.runId);
        const [fin, rival] = await Promise.all([
          a.publish(thread, first.json.runId, signal.publishToken, [
            { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
          ]),
          send(a, thread, "rival"),
        ]);
        assert.equal(fin.status, 200);
        // Whichever arrives first, the rival meets a held lock: the first
        // run's, or the queued message's, which took it in the same step as
        // the run-finish.
        assert.equal(rival.status, 409, rival.text);
        assert.ok([first.json.runId, queued.json.messageId].includes(rival.json.error.runId));
        await hook.next((m) => m.type === "run" && m.runId === queued.json.messageId);
        assert.equal(hook.received.filter((m) => m.type === "run" && m.runId === queued.json.messageId).length, 1);
      }
    } finally {
      await w.stop();
      await hook.close();
    }
  });

  test("a non-empty queue survives a restart and drains after it", async () => {
    const dir = tempDir();
    let { w, api: a } = await stack({}, { persist: dir });
    const thread = newThread("qs");
    try {
      await send(a, thread, "hold [[slow:300]]", { mode: "queue" });
      await send(a, thread, "after restart 1", { mode: "queue" });
      await send(a, thread, "after restart 2", { mode: "queue" });
      await w.kill();
      ({ w, api: a } = await stack({}, { persist: dir }));
      const status = (await a.status(thread)).json;
      assert.deepEqual(status.queue.items.map((i) => i.message), ["after restart 1", "after restart 2"]);
      await until(async () => (await userMessages(a, thread)).length === 3 && !(await a.status(thread)).json.hasActiveRun, {
        timeoutMs: 20000,
        stepMs: 200,
        what: "the queue to drain after the restart",
      });
      assert.deepEqual(await userMessages(a, thread), ["hold [[slow:300]]", "after restart 1", "after restart 2"]);
    } finally {
      await w.stop();
    }
  });
});

describe("regenerate", () => {
  test("answers the last user message again under a new run; the old answer no longer feeds the model", async () => {
    const empty = await send(api, newThread("rg"), undefined, { regenerate: true });
    assert.equal(empty.status, 400);
    assert.equal(empty.json.error.code, "thread_required");
    const thread = newThread("rg");
    const first = await send(api, thread, "regen me");
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === first.json.runId);
    const busy = await send(api, thread, "busy [[slow:200]]");
    const refused = await send(api, thread, undefined, { regenerate: true });
    assert.equal(refused.status, 409);
    assert.equal(refused.json.error.code, "run_active");
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === busy.json.runId, 10000);
    const r = await send(api, thread, undefined, { regenerate: true });
    assert.equal(r.status, 200, r.text);
    assert.notEqual(r.json.runId, busy.json.runId);
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === r.json.runId);
    assert.deepEqual(await userMessages(api, thread), ["regen me", "busy [[slow:200]]"]);
    const req = llm.requests.filter((b) => JSON.stringify(b.messages).includes("busy [[slow:200]]")).at(-1);
    const contents = req.messages.map((m) => m.content);
    assert.equal(contents.filter((c) => typeof c === "string" && c.includes("busy [[slow:200]]")).length, 1, "the replaced answer is not in the history");
    sse.close();
  });
});

describe("models", () => {
  test("the catalog, a per-turn pick, a pin that outlives the turn, and refusals", async () => {
    const cat = await api.call("GET", "/agent/models");
    assert.equal(cat.status, 200);
    assert.equal(cat.json.default, "fast");
    assert.deepEqual(cat.json.models.map((m) => [m.id, m.available]), [["big", true], ["fast", true], ["locked", false]]);
    const thread = newThread("md");
    await send(api, thread, "open the thread");
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-finish");
    const modelOf = (marker) => llm.requests.filter((b) => JSON.stringify(b.messages).includes(marker)).at(-1).model;
    const turn = async (message, extra = {}) => {
      const r = await send(api, thread, message, extra);
      assert.equal(r.status, 200, r.text);
      await sse.waitFor((e) => e.type === "run-finish" && e.runId === r.json.runId);
    };
    await turn("default one");
    assert.equal(modelOf("default one"), "fake-model");
    await turn("big one", { model: "big" });
    assert.equal(modelOf("big one"), "fake-big");
    await turn("back to default");
    assert.equal(modelOf("back to default"), "fake-model", "a send's pick is for that turn only");
    const pin = await api.call("PATCH", `/agent/threads/${thread}`, { model: "big" });
    assert.equal(pin.status, 200, pin.text);
    assert.equal(pin.json.model, "big");
    await turn("pinned");
    assert.equal(modelOf("pinned"), "fake-big");
    for (const [method, path, body] of [
      ["POST", `/instance-ai/chat/${thread}`, { message: "x", model: "locked" }],
      ["POST", `/instance-ai/chat/${thread}`, { message: "x", model: "nope" }],
      ["PATCH", `/agent/threads/${thread}`, { model: "locked" }],
    ]) {
      const r = await api.call(method, path, body);
      assert.equal(r.status, 400, `${method} ${JSON.stringify(body)}`);
      assert.equal(r.json.error.code, "model_not_allowed");
    }
    await api.call("PATCH", `/agent/threads/${thread}`, { model: null });
    await turn("unpinned");
    assert.equal(modelOf("unpinned"), "fake-model");
    const detail = (await api.call("GET", `/agent/threads/${thread}`)).json;
    assert.equal(detail.model, null);
    assert.ok(detail.messages.length >= 10);
    // agora's StoredMessage: one row per model step, each with its step's usage.
    assert.ok(detail.messages.filter((m) => m.role === "assistant").every((m) => m.usage?.inputTokens > 0 && m.usage.outputTokens > 0), "usage per step");
    sse.close();
  });
});
