// Threads and runs as Durable Streams, over real HTTP on workerd: the
// thread's log (catch-up, long-poll, SSE, view=history|updates, offsets
// refused after a delete and re-create), a run's events (tail, closed on
// run-finish), an agent's idempotent appends, and the /v1/stream/* server's
// auth switch.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, openSse, until, tempDir, startExternalRun, jwtFor } from "./support/harness.mjs";

let worker, hook, api;

before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "300", STREAMS_LONG_POLL_MS: "800" } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

const startRun = (thread, message = "hello", a = api, h = hook) => startExternalRun(a, h, thread, message);

// A durable (structural) event with a label of our choosing.
const status = (title) => ({ type: "thread-title-updated", agentId: "orchestrator", payload: { title } });
const TITLE = "thread-title-updated";
const finish = { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } };
const OFFSET = /^\d{16}_\d{16}$/;

/** POST /v1/runs/:runId with optional producer headers. */
function append(runId, token, events, producer) {
  const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
  if (producer) Object.assign(headers, { "producer-id": producer.id, "producer-epoch": String(producer.epoch), "producer-seq": String(producer.seq) });
  return fetch(`${worker.url}/v1/runs/${runId}`, { method: "POST", headers, body: JSON.stringify(events) });
}

const get = async (p) => {
  const r = await fetch(worker.url + p);
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, headers: r.headers, json, text };
};

describe("a thread's log as a Durable Stream", () => {
  test("catch-up from -1 is a JSON array with an opaque, increasing next offset", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    assert.equal((await api.publish(thread, runId, token, [status("a"), status("b")])).status, 200);
    const r = await get(`/v1/threads/${thread}?offset=-1`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get("content-type"), /^application\/json/);
    assert.equal(r.headers.get("cache-control"), "no-store");
    assert.equal(r.headers.get("stream-up-to-date"), "true");
    assert.equal(r.headers.get("stream-closed"), null, "a conversation never closes");
    assert.deepEqual(r.json.map((e) => e.type), ["run-start", TITLE, TITLE]);
    const o1 = r.headers.get("stream-next-offset");
    assert.match(o1, OFFSET);
    // Resuming strictly after it: nothing yet, same offset.
    const empty = await get(`/v1/threads/${thread}?offset=${o1}`);
    assert.deepEqual(empty.json, []);
    assert.equal(empty.headers.get("stream-next-offset"), o1);
    await api.publish(thread, runId, token, [status("c")]);
    const more = await get(`/v1/threads/${thread}?offset=${o1}`);
    assert.deepEqual(more.json.map((e) => e.payload.title), ["c"]);
    const o2 = more.headers.get("stream-next-offset");
    assert.ok(o2 > o1, "offsets increase as strings");
  });

  test("long-poll answers when a publish lands, and 204 with the same offset on timeout", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const tail = (await get(`/v1/threads/${thread}?offset=-1`)).headers.get("stream-next-offset");
    const t0 = Date.now();
    const timeout = await get(`/v1/threads/${thread}?offset=${tail}&live=long-poll`);
    assert.equal(timeout.status, 204);
    assert.ok(Date.now() - t0 >= 700, "held for the long-poll interval");
    assert.equal(timeout.headers.get("stream-next-offset"), tail);
    assert.equal(timeout.headers.get("stream-up-to-date"), "true");
    assert.ok(timeout.headers.get("stream-cursor"));
    const waiting = get(`/v1/threads/${thread}?offset=${tail}&live=long-poll`);
    await new Promise((r) => setTimeout(r, 150));
    await api.publish(thread, runId, token, [status("late")]);
    const got = await waiting;
    assert.equal(got.status, 200);
    assert.deepEqual(got.json.map((e) => e.payload.title), ["late"]);
    assert.ok(got.headers.get("stream-next-offset") > tail);
  });

  test("SSE: data frames carry JSON arrays, control frames the next offset; no gap, no duplicate", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    await api.publish(thread, runId, token, [status("before")]);
    const sse = openSse(`${worker.url}/v1/threads/${thread}?offset=-1&live=sse`);
    await sse.ready;
    assert.equal(sse.status, 200);
    assert.equal(sse.headers.get("content-type"), "text/event-stream");
    assert.equal(sse.headers.get("cache-control"), "no-cache");
    for (let i = 0; i < 5; i++) await api.publish(thread, runId, token, [status(`live${i}`)]);
    const seen = () => sse.frames().filter((f) => f.event === "data").flatMap((f) => JSON.parse(f.data));
    await until(() => seen().length === 7, { what: "7 events" });
    assert.deepEqual(seen().map((e) => e.payload?.title ?? e.type), ["run-start", "before", "live0", "live1", "live2", "live3", "live4"]);
    const frames = sse.frames();
    frames.forEach((f, i) => {
      if (f.event === "data") assert.equal(frames[i + 1]?.event, "control", "a control frame follows every data frame");
    });
    const controls = frames.filter((f) => f.event === "control").map((f) => JSON.parse(f.data));
    for (const c of controls) assert.match(c.streamNextOffset, OFFSET);
    assert.ok(controls.at(-1).upToDate);
    // Reconnecting from the last control offset misses nothing and repeats nothing.
    const resumeAt = controls.at(-1).streamNextOffset;
    sse.close();
    await api.publish(thread, runId, token, [status("while away")]);
    const again = await get(`/v1/threads/${thread}?offset=${resumeAt}`);
    assert.deepEqual(again.json.map((e) => e.payload.title), ["while away"]);
  });

  test("view=history is Flue's snapshot with its offset; view=updates is its UI projection, strictly after it", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread, "hi there");
    await api.publish(thread, runId, token, [{ type: "text-delta", agentId: "orchestrator", payload: { text: "Hello" } }, finish]);
    const h = await get(`/v1/threads/${thread}?view=history`);
    assert.equal(h.status, 200, h.text);
    assert.match(h.json.offset, OFFSET);
    assert.equal(h.headers.get("stream-next-offset"), h.json.offset);
    assert.equal(h.json.v, 1);
    assert.equal(h.json.conversationId, thread);
    const [user, assistant] = h.json.messages;
    assert.deepEqual(user.parts, [{ type: "text", text: "hi there", state: "done" }]);
    assert.deepEqual(assistant.parts, [{ type: "text", text: "Hello", state: "done" }]);
    assert.equal(assistant.id, `${runId}:assistant`);
    const none = await get(`/v1/threads/${thread}?view=updates&offset=${h.json.offset}`);
    assert.deepEqual(none.json, []);
    const next = await startRun(thread, "again");
    const upd = await get(`/v1/threads/${thread}?view=updates&offset=${h.json.offset}`);
    // The user's message, then the answer's skeleton: one chunk both Flue releases fold alike.
    assert.deepEqual(upd.json.map((c) => c.type), ["message-appended", "message-appended"], "chunks, not the log's records");
    assert.deepEqual(
      [upd.json[1].message.role, upd.json[1].message.purpose, upd.json[1].message.display, upd.json[1].message.submissionId],
      ["assistant", "assistant", "visible", next.runId],
    );
    assert.ok(upd.json.every((c) => c.conversationId === thread && Number.isFinite(c.position.batch)));
    const missing = await get(`/v1/threads/${thread}?view=updates`);
    assert.equal(missing.status, 400);
    assert.equal(missing.json.error.code, "offset_required");
    const tail = await get(`/v1/threads/${thread}?offset=-1&tail=2`);
    assert.equal(tail.json.error.code, "tail_not_supported");
  });

  test("a record Flue's projection omits advances the offset without an update", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread, "plan it");
    const before = (await get(`/v1/threads/${thread}?offset=-1`)).headers.get("stream-next-offset");
    const tasks = { type: "tasks-update", agentId: "orchestrator", payload: { tasks: [{ id: "t1", description: "d", status: "pending" }] } };
    await api.publish(thread, runId, token, [tasks]);
    const after = (await get(`/v1/threads/${thread}?offset=-1`)).headers.get("stream-next-offset");
    assert.notEqual(after, before, "the log grew by the record");
    const upd = await get(`/v1/threads/${thread}?view=updates&offset=${before}`);
    assert.deepEqual(upd.json, [], "no update");
    assert.equal(upd.headers.get("stream-next-offset"), after, "the offset moved past it");
    assert.equal(upd.headers.get("stream-up-to-date"), "true");
    // The history ends on that omitted record: its offset includes it.
    const h = await get(`/v1/threads/${thread}?view=history`);
    assert.equal(h.json.offset, after, "the history's offset is past the omitted record");
    assert.notEqual(h.json.offset, before);
    assert.deepEqual((await get(`/v1/threads/${thread}?view=updates&offset=${h.json.offset}`)).json, []);
  });

  test("bad offsets are 4xx with stable codes; an offset of a deleted and re-created thread is refused", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    await api.publish(thread, runId, token, [status("x"), finish]);
    const old = (await get(`/v1/threads/${thread}?offset=-1`)).headers.get("stream-next-offset");
    for (const [q, code] of [["offset=abc", "invalid_offset"], ["offset=-1&offset=-1", "invalid_offset"], ["offset=-1&live=forever", "invalid_live"], ["live=sse", "offset_required"], ["view=nope", "invalid_view"]]) {
      const r = await get(`/v1/threads/${thread}?${q}`);
      assert.equal(r.status, 400, q);
      assert.equal(r.json.error.code, code, q);
    }
    const gen = old.split("_")[0];
    const past = await get(`/v1/threads/${thread}?offset=${gen}_9999999999999999`);
    assert.equal(past.json.error.code, "invalid_offset");
    assert.equal((await api.call("DELETE", `/instance-ai/threads/${thread}`)).status, 200);
    await startRun(thread);
    const refused = await get(`/v1/threads/${thread}?offset=${old}`);
    assert.equal(refused.status, 410);
    assert.equal(refused.json.error.code, "stale_offset");
    const fresh = await get(`/v1/threads/${thread}?offset=-1`);
    assert.deepEqual(fresh.json.map((e) => e.type), ["run-start"]);
    assert.notEqual(fresh.headers.get("stream-next-offset").split("_")[0], gen, "a new generation");
  });

  test("offsets stay valid across a restart", async () => {
    const dir = tempDir();
    const w = await startWorker({ persist: dir, vars: { AGENT_WEBHOOK_URL: hook.url } });
    const a = client(w.url);
    const thread = newThread();
    const { runId, token } = await startRun(thread, "x", a);
    await a.publish(thread, runId, token, [status("one")]);
    const off = (await fetch(`${w.url}/v1/threads/${thread}?offset=-1`)).headers.get("stream-next-offset");
    await w.kill();
    const w2 = await startWorker({ persist: dir, vars: { AGENT_WEBHOOK_URL: hook.url } });
    try {
      const r = await fetch(`${w2.url}/v1/threads/${thread}?offset=${off}`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("stream-next-offset"), off);
    } finally {
      await w2.stop();
    }
  });

  test("a thread read follows the thread's ownership and takes stream tokens, like its events route", async () => {
    const SECRET = "test-secret-0123456789abcdef0123456789";
    const jwt = (sub) => jwtFor(SECRET, sub);
    const w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET, AGENT_WEBHOOK_URL: hook.url } });
    try {
      const as = (who) => ({ authorization: `Bearer ${jwt(who)}` });
      const thread = newThread("own");
      const sent = await fetch(`${w.url}/instance-ai/chat/${thread}`, { method: "POST", headers: { ...as("alice"), "content-type": "application/json" }, body: JSON.stringify({ message: "hi" }) });
      assert.equal(sent.status, 200);
      const { runId } = await sent.json();
      assert.equal((await fetch(`${w.url}/v1/threads/${thread}?offset=-1`)).status, 401);
      const bob = await fetch(`${w.url}/v1/threads/${thread}?offset=-1`, { headers: as("bob") });
      assert.equal(bob.status, 404);
      assert.equal((await bob.json()).error.code, "thread_not_found");
      assert.equal((await fetch(`${w.url}/v1/threads/${thread}?offset=-1`, { headers: as("alice") })).status, 200);
      const issued = await (await fetch(`${w.url}/instance-ai/threads/${thread}/stream-token`, { method: "POST", headers: as("alice") })).json();
      const t = encodeURIComponent(issued.token);
      assert.equal((await fetch(`${w.url}/v1/threads/${thread}?offset=-1&token=${t}`)).status, 200);
      assert.equal((await fetch(`${w.url}/v1/runs/${runId}?offset=-1&token=${t}`)).status, 200);
      const write = await fetch(`${w.url}/v1/runs/${runId}?token=${t}`, { method: "POST", headers: { "content-type": "application/json" }, body: "[]" });
      assert.equal(write.status, 401, "a stream token is read-only");
    } finally {
      await w.stop();
    }
  });
});

describe("a run as a Durable Stream", () => {
  test("offset=-1, tail=N, and closed once run-finish is stored", async () => {
    const thread = newThread();
    const first = await startRun(thread);
    await api.publish(thread, first.runId, first.token, [status("1"), status("2"), finish]);
    const second = await startRun(thread, "next");
    const r = await get(`/v1/runs/${first.runId}?offset=-1`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.map((e) => e.type), ["run-start", TITLE, TITLE, "run-finish"]);
    assert.ok(r.json.every((e) => e.runId === first.runId));
    assert.equal(r.headers.get("stream-closed"), "true");
    const tail = await get(`/v1/runs/${first.runId}?offset=-1&tail=2`);
    assert.deepEqual(tail.json.map((e) => e.type), [TITLE, "run-finish"]);
    const open = await get(`/v1/runs/${second.runId}?offset=-1`);
    assert.equal(open.headers.get("stream-closed"), null);
    // SSE on a finished run: its events, then a control frame with streamClosed, then the end.
    const sse = openSse(`${worker.url}/v1/runs/${first.runId}?offset=-1&live=sse`);
    await sse.ready;
    await until(() => sse.closed, { what: "the closed run's SSE to end" });
    const controls = sse.frames().filter((f) => f.event === "control").map((f) => JSON.parse(f.data));
    assert.equal(controls.at(-1).streamClosed, true);
    const closedPoll = await get(`/v1/runs/${first.runId}?offset=${r.headers.get("stream-next-offset")}&live=long-poll`);
    assert.equal(closedPoll.headers.get("stream-closed"), "true");
    const none = await get(`/v1/runs/${thread}.run_000000000000000000000000?offset=-1`);
    assert.equal(none.status, 404);
    assert.equal(none.json.error.code, "run_not_found");
  });

  test("a live run stream closes when run-finish lands", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const sse = openSse(`${worker.url}/v1/runs/${runId}?offset=-1&live=sse`);
    await sse.ready;
    await append(runId, token, [status("working")]);
    await append(runId, token, [finish]);
    await until(() => sse.closed, { what: "the run's SSE to end" });
    const data = sse.frames().filter((f) => f.event === "data").flatMap((f) => JSON.parse(f.data));
    assert.deepEqual(data.map((e) => e.type), ["run-start", TITLE, "run-finish"]);
  });

  test("an agent's append with producer headers lands once however often it is retried", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const p = { id: "agent-1", epoch: 0, seq: 0 };
    const r1 = await append(runId, token, [status("once")], p);
    assert.equal(r1.status, 200);
    assert.match(r1.headers.get("stream-next-offset"), OFFSET);
    const retry = await append(runId, token, [status("once")], p);
    assert.equal(retry.status, 204);
    assert.equal(retry.headers.get("producer-seq"), "0");
    const gap = await append(runId, token, [status("skip")], { ...p, seq: 5 });
    assert.equal(gap.status, 409);
    assert.equal((await gap.json()).error.code, "producer_seq_gap");
    assert.equal(gap.headers.get("producer-expected-seq"), "1");
    assert.equal((await append(runId, token, [status("two")], { ...p, seq: 1 })).status, 200);
    const fenced = await append(runId, token, [status("new epoch")], { ...p, epoch: 1, seq: 0 });
    assert.equal(fenced.status, 200);
    const stale = await append(runId, token, [status("zombie")], { ...p, seq: 2 });
    assert.equal(stale.status, 403);
    assert.equal((await stale.json()).error.code, "stale_producer_epoch");
    const events = (await get(`/v1/runs/${runId}?offset=-1`)).json.map((e) => e.payload?.title).filter(Boolean);
    assert.deepEqual(events, ["once", "two", "new epoch"]);
    // Without the run's token nothing lands.
    const noAuth = await fetch(`${worker.url}/v1/runs/${runId}`, { method: "POST", headers: { "content-type": "application/json" }, body: "[]" });
    assert.equal(noAuth.status, 401);
    const bad = await append(runId, token, [status("x")], { id: "a", epoch: "x", seq: 0 });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, "invalid_producer");
  });
});

describe("the /v1/stream/* server", () => {
  test("is off unless STREAMS_AUTH says who may use it; with jwt it needs a caller", async () => {
    const off = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: "s3cret-s3cret-s3cret-s3cret-s3cret" } });
    try {
      const r = await fetch(`${off.url}/v1/stream/x`, { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.equal(r.status, 404);
      assert.equal((await r.json()).error.code, "not_found");
    } finally {
      await off.stop();
    }
    const closed = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: "s3cret-s3cret-s3cret-s3cret-s3cret", STREAMS_AUTH: "jwt" } });
    try {
      const r = await fetch(`${closed.url}/v1/stream/x`, { method: "PUT", headers: { "content-type": "text/plain" } });
      assert.equal(r.status, 401);
      assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    } finally {
      await closed.stop();
    }
    const open = await startWorker({ vars: { STREAMS_AUTH: "none" } });
    try {
      const r = await fetch(`${open.url}/v1/stream/x`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "hi" });
      assert.equal(r.status, 201);
      const read = await fetch(`${open.url}/v1/stream/x?offset=-1`);
      assert.equal(await read.text(), "hi");
    } finally {
      await open.stop();
    }
  });
});
