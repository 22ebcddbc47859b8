// The inbox over real HTTP on workerd: every thread of a caller with its
// live state (running, waiting for them, finished and unread), as a JSON
// page, an SSE stream that resumes with Last-Event-ID, and a JSON-mode
// Durable Stream the public client reads; read marks; callers kept apart;
// reports that outlive an unreachable directory and arrive once.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { stream } from "@durable-streams/client";
import { startWorker, client, newThread, until, hs256Jwt, openSse, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "inbox-secret-0123456789abcdef0123";
const as = (sub) => ({ authorization: `Bearer ${hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 600 })}` });

let llm, tools, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify([...tools.declarations, guarded]),
      DEBUG_ROUTES: "1",
    },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

const inbox = (who, q = "") => api.call("GET", `/v1/inbox${q}`, undefined, as(who));
const send = async (who, thread, message) => {
  const r = await api.call("POST", `/instance-ai/chat/${thread}`, { message }, as(who));
  assert.equal(r.status, 200, r.text);
  return r.json.runId;
};
const row = async (who, thread) => (await inbox(who)).json.rows.find((r) => r.threadId === thread);
const sseInbox = (who, headers = {}) =>
  openSse(`${worker.url}/v1/inbox`, { headers: { ...as(who), accept: "text/event-stream", ...headers } });

describe("inbox", () => {
  test("a caller's inbox shows their threads live: running, waiting, finished and unread, read once marked", async () => {
    const alice = "alice-" + newThread("a");
    const bob = "bob-" + newThread("b");
    const live = sseInbox(alice);
    await live.ready;
    assert.equal(live.status, 200, live.raw);
    assert.match(live.headers.get("content-type"), /text\/event-stream/);
    const [a1, a2, a3, b1] = [newThread("a1"), newThread("a2"), newThread("a3"), newThread("b1")];
    await send(alice, a1, "hello there");
    await send(alice, a2, 'careful [[tool:guarded:{"text":"x"}]]');
    await send(alice, a3, "a third thread");
    await send(bob, b1, "bob's own");
    const seen = (thread, pred) => live.waitFor((e) => e.threadId === thread && pred(e), 10000, `${thread} in the inbox`);
    await seen(a1, (e) => e.state === "running");
    const waiting = await seen(a2, (e) => e.state === "waiting");
    assert.equal(waiting.waiting.kind, "approval");
    assert.equal(waiting.waiting.toolName, "guarded");
    assert.equal(waiting.unread, true, "a request for the person is worth reading");
    const done = await seen(a1, (e) => e.state === "idle" && e.lastRun?.status === "completed");
    assert.equal(done.unread, true, "a finished run is unread");
    await seen(a3, (e) => e.state === "idle" && e.lastRun);
    // Only alice's threads, and no message text: ids, states, a title.
    const events = live.events();
    assert.ok(events.every((e) => [a1, a2, a3].includes(e.threadId)), JSON.stringify(events.map((e) => e.threadId)));
    assert.ok(events.every((e) => !JSON.stringify(e).includes("hello there") || e.title === "hello there"));
    const ids = live.durable().map((e) => e.id);
    assert.deepEqual(ids, [...ids].sort((x, y) => x - y), "changes in order");
    assert.equal(new Set(ids).size, ids.length, "each change once");
    // Read: the mark moves, the row is read, the stream says so.
    const marked = await api.call("POST", `/instance-ai/threads/${a1}/read`, { eventId: done.answerId }, as(alice));
    assert.equal(marked.status, 200, marked.text);
    assert.equal(marked.json.unread, false);
    await seen(a1, (e) => e.unread === false && e.readEventId === done.answerId);
    // Bob sees his one thread; alice's are not his to read or mark.
    const bobs = await inbox(bob);
    assert.deepEqual(bobs.json.rows.map((r) => r.threadId), [b1]);
    const theirs = await api.call("POST", `/instance-ai/threads/${a1}/read`, { eventId: 1 }, as(bob));
    assert.equal(theirs.status, 404, theirs.text);
    assert.equal(theirs.json.error.code, "thread_not_found");
    // The JSON page: newest change first, filtered, paged.
    const page = await inbox(alice);
    assert.deepEqual(page.json.rows.map((r) => r.threadId).sort(), [a1, a2, a3].sort());
    const onlyWaiting = await inbox(alice, "?state=waiting");
    assert.deepEqual(onlyWaiting.json.rows.map((r) => r.threadId), [a2]);
    const first = await inbox(alice, "?limit=2");
    assert.equal(first.json.rows.length, 2);
    const rest = await inbox(alice, `?limit=2&cursor=${encodeURIComponent(first.json.nextCursor)}`);
    assert.deepEqual([...first.json.rows, ...rest.json.rows].map((r) => r.threadId).sort(), [a1, a2, a3].sort());
    assert.equal(rest.json.nextCursor, null);
    for (const bad of ["?limit=0", "?state=asleep", "?cursor=nope"]) {
      const r = await inbox(alice, bad);
      assert.equal(r.status, 400, bad);
      assert.equal(r.json.error.code, "invalid_query");
    }
    live.close();
  });

  test("an SSE reader that reconnects with Last-Event-ID gets exactly what it missed", async () => {
    const who = "resume-" + newThread("r");
    const [t1, t2] = [newThread("r1"), newThread("r2")];
    const first = sseInbox(who);
    await first.ready;
    await send(who, t1, "one");
    await first.waitFor((e) => e.threadId === t1 && e.lastRun, 10000);
    const had = first.durable();
    const last = had.at(-1).id;
    first.close();
    // Missed while away: another thread's run, and a read mark.
    await send(who, t2, "two");
    await until(async () => (await row(who, t2))?.lastRun, { timeoutMs: 10000, what: "t2's run to end" });
    const mark = await api.call("POST", `/instance-ai/threads/${t1}/read`, { eventId: 1_000_000 }, as(who));
    assert.equal(mark.status, 200, mark.text);
    // Every change, from the start, for the record of what was missed.
    const all = sseInbox(who);
    await all.ready;
    const everything = await until(() => {
      const d = all.durable();
      return d.some((e) => e.threadId === t1 && e.unread === false) && d;
    }, { timeoutMs: 10000, what: "the whole log" });
    all.close();
    const resumed = sseInbox(who, { "last-event-id": String(last) });
    await resumed.ready;
    const missed = everything.filter((e) => e.id > last);
    assert.ok(missed.length >= 3, JSON.stringify(missed));
    await until(() => resumed.durable().length >= missed.length, { timeoutMs: 5000, what: "the replay" });
    await sleep(200);
    assert.deepEqual(resumed.durable(), missed, "exactly what was missed, in order");
    resumed.close();
    const bad = await api.call("GET", "/v1/inbox", undefined, { ...as(who), accept: "text/event-stream", "last-event-id": "x" });
    assert.equal(bad.status, 400);
  });

  test("the public Durable Streams client reads the inbox, catch-up and live", async () => {
    const who = "ds-" + newThread("d");
    const [t1, t2] = [newThread("d1"), newThread("d2")];
    await send(who, t1, "first");
    await until(async () => (await row(who, t1))?.lastRun, { timeoutMs: 10000, what: "t1's run to end" });
    const url = `${worker.url}/v1/inbox`;
    const caught = await stream({ url, headers: as(who), offset: "-1", live: false, warnOnHttp: false });
    const items = await caught.json();
    assert.ok(items.length >= 2, JSON.stringify(items));
    assert.ok(items.every((i) => i.threadId === t1));
    assert.equal(items.at(-1).state, "idle");
    const offset = caught.offset;
    assert.match(offset, /^\d+_\d+$/);
    // Live from where it stood: the next thread's changes arrive.
    const ac = new AbortController();
    const live = await stream({ url, headers: as(who), offset, live: "sse", signal: ac.signal, warnOnHttp: false });
    const got = [];
    live.subscribeJson(async (batch) => {
      got.push(...batch.items);
    });
    await send(who, t2, "second");
    await until(() => got.some((i) => i.threadId === t2 && i.lastRun), { timeoutMs: 10000, what: "t2 live" });
    assert.ok(got.every((i) => i.threadId === t2), "nothing before the offset again");
    ac.abort();
    const stale = await api.call("GET", "/v1/inbox?offset=0000000000000009_0000000000000001", undefined, as(who));
    assert.equal(stale.status, 410);
  });

  test("reports made while the directory is unreachable arrive afterwards, each once", async () => {
    const who = "outage-" + newThread("o");
    const thread = newThread("o1");
    await send(who, thread, "before");
    await until(async () => (await row(who, thread))?.lastRun, { timeoutMs: 10000, what: "the first run" });
    const out = await api.call("POST", "/debug/inbox/outage?ms=3000", undefined, as(who));
    assert.equal(out.status, 204, out.text);
    const run = await send(who, thread, "during the outage");
    await until(async () => !(await api.call("GET", `/instance-ai/threads/${thread}/status`, undefined, as(who))).json.hasActiveRun, {
      timeoutMs: 10000,
      what: "the run to end",
    });
    const during = await row(who, thread);
    assert.notEqual(during.lastRun.runId, run, "the directory has not heard yet");
    const after = await until(async () => {
      const r = await row(who, thread);
      return r?.lastRun?.runId === run && r;
    }, { timeoutMs: 20000, what: "the reports after the outage" });
    assert.equal(after.state, "idle");
    const all = sseInbox(who);
    await all.ready;
    const changes = await until(() => {
      const d = all.durable();
      return d.some((e) => e.lastRun?.runId === run) && d;
    }, { timeoutMs: 5000, what: "the log" });
    all.close();
    const versions = changes.map((e) => e.version);
    assert.deepEqual(versions, [...versions].sort((x, y) => x - y), "in order");
    assert.equal(new Set(versions).size, versions.length, "each report once");
    assert.ok(changes.some((e) => e.runId === run && e.state === "running"), "the run's start arrived too");
  });
});
