// Scheduled runs over real HTTP on workerd: a thread's schedules fire on
// its own alarm as its owner, wait in the queue behind a run, survive a
// SIGKILL of the server without losing or doubling a firing, and answer
// clear errors.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until, tempDir, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;
const vars = () => {
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  return { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify([...tools.declarations, guarded]) };
};

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  worker = await startWorker({ vars: vars() });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** The times (ms) the thread's runs of `message` started, from its log. */
async function starts(a, thread, message) {
  const r = await a.call("GET", `/v1/threads/${thread}?offset=-1`);
  if (r.status !== 200) return [];
  return r.json.filter((e) => e.type === "run-start" && e.payload.message === message).map((e) => e.ts);
}

const settle = (a, thread) =>
  until(async () => !(await a.status(thread)).json.hasActiveRun, { timeoutMs: 10000, what: "the thread to settle" });

describe("schedules", () => {
  test("a schedule every 2 s runs three times in 7 s, as the owner, each run its own", async () => {
    const thread = newThread("sch");
    assert.equal((await api.chat(thread, "set up")).status, 200);
    await settle(api, thread);
    const made = Date.now();
    const r = await api.call("POST", `/instance-ai/threads/${thread}/schedules`, { message: "tick", everySeconds: 2 });
    assert.equal(r.status, 201, r.text);
    assert.match(r.json.scheduleId, /^sch_/);
    const nextAt = Date.parse(r.json.nextAt);
    assert.ok(nextAt >= made + 1500 && nextAt <= Date.now() + 2500, r.json.nextAt);
    await sleep(Math.max(0, made + 7000 - Date.now()));
    const ticks = await starts(api, thread, "tick");
    assert.equal(ticks.length, 3, JSON.stringify(ticks.map((t) => t - made)));
    for (let i = 1; i < ticks.length; i++) assert.ok(ticks[i] - ticks[i - 1] >= 1500, "one firing per period");
    const list = await api.call("GET", `/instance-ai/threads/${thread}/schedules`);
    assert.equal(list.json.schedules[0].fired, 3);
    assert.equal(list.json.schedules[0].everySeconds, 2);
    const removed = await api.call("DELETE", `/instance-ai/threads/${thread}/schedules/${r.json.scheduleId}`);
    assert.equal(removed.status, 200, removed.text);
    await sleep(2500);
    assert.equal((await starts(api, thread, "tick")).length, 3, "no firing once removed");
  });

  test("a schedule that fires during a run waits in the queue, then runs", async () => {
    const thread = newThread("schq");
    assert.equal((await api.chat(thread, 'careful [[tool:guarded:{"text":"x"}]]')).status, 200);
    await until(async () => (await api.status(thread)).json.isSuspended, { timeoutMs: 10000, what: "the run to wait for approval" });
    const at = new Date(Date.now() + 1500).toISOString();
    const r = await api.call("POST", `/instance-ai/threads/${thread}/schedules`, { message: "later", at });
    assert.equal(r.status, 201, r.text);
    const queued = await until(async () => {
      const q = (await api.status(thread)).json.queue.items;
      return q.length === 1 && q;
    }, { timeoutMs: 6000, what: "the firing in the queue" });
    assert.equal(queued[0].message, "later");
    assert.equal((await api.call("GET", `/instance-ai/threads/${thread}/schedules`)).json.schedules.length, 0, "a one-time schedule is spent");
    // The person approves: the run ends, the queued firing runs.
    const pending = await api.call("GET", `/instance-ai/threads/${thread}/messages`);
    const requestId = JSON.stringify(pending.json).match(/"requestId":"([^"]+)"/)[1];
    const ok = await api.call("POST", `/instance-ai/confirm/${requestId}`, { approved: true });
    assert.equal(ok.status, 200, ok.text);
    await until(async () => (await starts(api, thread, "later")).length === 1, { timeoutMs: 10000, what: "the queued firing to run" });
  });

  test("a SIGKILL of the server between two firings loses none and doubles none", async () => {
    const dir = tempDir();
    let w = await startWorker({ vars: vars(), persist: dir });
    let a = client(w.url);
    const thread = newThread("schk");
    try {
      assert.equal((await a.chat(thread, "set up")).status, 200);
      await settle(a, thread);
      const r = await a.call("POST", `/instance-ai/threads/${thread}/schedules`, { message: "beat", everySeconds: 2 });
      assert.equal(r.status, 201, r.text);
      await until(async () => (await starts(a, thread, "beat")).length === 1, { timeoutMs: 6000, what: "the first firing" });
      await w.kill();
      w = await startWorker({ vars: vars(), persist: dir });
      a = client(w.url);
      const restarted = Date.now();
      // The storage alarm outlives the process: the schedule goes on.
      const beats = await until(async () => {
        const b = await starts(a, thread, "beat");
        return b.length >= 3 && b;
      }, { timeoutMs: 12000, stepMs: 200, what: "firings after the restart" });
      assert.ok(beats.at(-1) > restarted, "it fired after the restart");
      for (let i = 1; i < beats.length; i++) assert.ok(beats[i] - beats[i - 1] >= 1500, `no double: ${JSON.stringify(beats)}`);
      const fired = (await a.call("GET", `/instance-ai/threads/${thread}/schedules`)).json.schedules[0].fired;
      assert.equal(fired, (await starts(a, thread, "beat")).length, "each firing is one run");
    } finally {
      await w.stop();
    }
  });

  test("schedules are the owner's, and bad ones are refused with a stable code", async () => {
    const thread = newThread("schb");
    assert.equal((await api.chat(thread, "mine")).status, 200);
    await settle(api, thread);
    for (const [body, code] of [
      [{ message: "x" }, "invalid_schedule"],
      [{ message: "x", cron: "61 * * * *" }, "invalid_schedule"],
      [{ message: "x", at: "2001-01-01T00:00:00Z" }, "invalid_schedule"],
      [{ message: "x", everySeconds: 0 }, "invalid_schedule"],
      [{ message: "x", everySeconds: 2, cron: "* * * * *" }, "invalid_schedule"],
    ]) {
      const r = await api.call("POST", `/instance-ai/threads/${thread}/schedules`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.error.code, code);
    }
    const cron = await api.call("POST", `/instance-ai/threads/${thread}/schedules`, { message: "weekly", cron: "30 9 * * MON" });
    assert.equal(cron.status, 201, cron.text);
    const next = new Date(cron.json.nextAt);
    assert.equal(next.getUTCDay(), 1);
    assert.equal(next.getUTCHours(), 9);
    assert.equal(next.getUTCMinutes(), 30);
    const none = await api.call("DELETE", `/instance-ai/threads/${thread}/schedules/sch_nope`);
    assert.equal(none.status, 404);
    assert.equal(none.json.error.code, "schedule_not_found");
  });
});
