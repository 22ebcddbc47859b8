// Held streams and their hand-over, over real HTTP on workerd. While a run
// keeps a thread's object awake, a subscriber that connects reads a stream
// the object writes itself; when the run ends (or its agent goes quiet) the
// object hands each such stream over to a hibernatable socket the Worker
// claims, at a frame boundary, so that it can sleep. The client's stream
// never breaks: this test holds 20 subscribers across many run/idle cycles,
// publishes while each hand-over is under way, connects more clients during
// it, and checks every subscriber's stream byte for byte against a fresh
// replay of the thread.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startWorker, startWebhook, client, newThread, sleep, until, startExternalRun, streamsSettled, openSse } from "./support/harness.mjs";

let worker, hook, api;


before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, DEBUG_WAKES: "1" } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

const title = (text) => ({ type: "thread-title-updated", agentId: "orchestrator", payload: { title: text } });
const tool = (id) => ({ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: id, toolName: "t", args: { id } } });
const finish = { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } };

/** The stored frames of an SSE stream's raw bytes (those with an id), as
 * they were written. */
const stored = (raw) =>
  raw
    .slice(0, raw.lastIndexOf("\n\n") + 2)
    .split("\n\n")
    .filter((f) => f.startsWith("id: "))
    .map((f) => f + "\n\n");
const idOf = (frame) => Number(frame.slice(4, frame.indexOf("\n")));

test("20 subscribers across run/idle cycles: held, handed over, held again; every stream equals a fresh replay, byte for byte", async () => {
  const thread = newThread("handover");
  const subs = [];
  const cycles = 8;
  let last = 0;
  for (let c = 0; c < cycles; c++) {
    const { runId, token } = await startExternalRun(api, hook, thread, `cycle ${c}`);
    // New subscribers connect during the run: the object holds their
    // streams (a fresh client from the start, another from a cursor).
    while (subs.length < Math.min(20, 3 * (c + 1))) {
      const from = subs.length % 2 ? `?lastEventId=${Math.max(0, last - 3)}` : "";
      const s = api.events(thread, { query: from });
      await s.ready;
      assert.equal(s.status, 200);
      s.from = from ? Math.max(0, last - 3) : 0;
      subs.push(s);
    }
    for (let i = 0; i < 5; i++) {
      const r = await api.publish(thread, runId, token, [tool(`c${c}-${i}`), title(`c${c}-${i}`)]);
      assert.equal(r.status, 200, r.text);
    }
    // The run ends; at once, while the streams move, the next message is
    // sent (its run-start lands during the hand-over) and a client joins.
    const ended = await api.publish(thread, runId, token, [finish]);
    assert.equal(ended.status, 200, ended.text);
    const during = api.events(thread);
    if (c % 2 === 0) {
      const next = await api.chat(thread, `queued ${c}`);
      assert.ok([200, 202].includes(next.status), next.text);
      const sig = await hook.next((m) => m.type === "run" && m.runId === next.json.runId);
      const late = await api.publish(thread, next.json.runId, sig.publishToken, [title(`during ${c}`), finish]);
      assert.equal(late.status, 200, late.text);
    }
    await during.ready;
    during.from = 0;
    subs.push(during);
    last = (await api.stats(thread)).json.lastEventId;
    // Idle: every stream has moved to a socket, or the agent's quiet
    // period passes and they move.
    await until(async () => streamsSettled((await api.stats(thread)).json), { timeoutMs: 10_000, what: "every stream handed over" });
    await Promise.all(subs.map((s) => until(() => stored(s.raw).some((f) => idOf(f) === last), { timeoutMs: 10_000, what: `seq ${last}` })));
  }
  // A fresh replay of the whole thread, as a new client reads it.
  const fresh = api.events(thread);
  await fresh.ready;
  await until(() => stored(fresh.raw).some((f) => idOf(f) === last), { timeoutMs: 10_000, what: "the replay" });
  const replay = stored(fresh.raw);
  fresh.close();
  for (const [i, s] of subs.entries()) {
    assert.ok(!s.closed, `subscriber ${i}'s stream never ended`);
    const got = stored(s.raw);
    const want = replay.filter((f) => idOf(f) > s.from && idOf(f) <= last);
    assert.deepEqual(got.filter((f) => idOf(f) <= last), want, `subscriber ${i} (from ${s.from}): no gap, no duplicate, the same bytes`);
    s.close();
  }
});

test("an idle thread whose streams were held sleeps: they move to sockets, and the next publish reaches them", async () => {
  // A workerd of its own: the one above has just closed a few dozen
  // streams of another thread, and this one must see its object evicted.
  const hook = await startWebhook();
  const worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, DEBUG_WAKES: "1" } });
  const api = client(worker.url);
  try {
    await idleThreadSleeps(api, hook);
  } finally {
    await worker.stop();
    await hook.close();
  }
});

async function idleThreadSleeps(api, hook) {
  const thread = newThread("handsleep");
  const { runId, token } = await startExternalRun(api, hook, thread);
  const subs = [];
  for (let i = 0; i < 10; i++) {
    subs.push(api.events(thread));
    await subs.at(-1).ready;
  }
  assert.equal((await api.publish(thread, runId, token, [title("one")])).status, 200);
  const held = (await api.stats(thread)).json;
  assert.equal(held.held, 10, "connected during the run: held by the object");
  // The agent goes quiet: the streams move, and the object is evicted,
  // though requests reach it all through the moves (four callers asking
  // for its stats back to back until they are done: a workerd before
  // 1.20260805 never let an object hibernate whose socket upgrades
  // overlapped another request, cloudflare/workerd#6862).
  const deadline = Date.now() + 10_000;
  let settled = false;
  const watch = async () => {
    while (!settled) {
      settled ||= streamsSettled((await api.stats(thread)).json);
      assert.ok(settled || Date.now() < deadline, "the hand-over within 10 s");
    }
  };
  await Promise.all([watch(), watch(), watch(), watch()]);
  const moved = (await api.stats(thread)).json;
  assert.equal(moved.subscribers, 10, "each is a socket now");
  await sleep(12_000);
  assert.equal((await api.publish(thread, runId, token, [title("two")])).status, 200);
  const woke = (await api.stats(thread)).json;
  assert.notEqual(woke.instance.id, moved.instance.id, "the idle object was evicted and constructed again");
  const lastId = woke.lastEventId;
  await Promise.all(subs.map((s) => s.waitFor((e) => e.id === lastId, 10_000)));
  for (const s of subs) {
    const ids = s.durable().map((e) => e.id);
    assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), "in order, once each");
    assert.ok(!s.closed);
    s.close();
  }
}

test("clients that leave while their streams move free their places at once, not when the moves expire", async () => {
  // A client that went away is noticed at the next write (a keep-alive
  // every 200 ms here). Each client leaves a few milliseconds after the
  // last: before the run ends, while its held stream ends for the move,
  // and while its socket is claimed. A move nobody claims waits 30 s; one
  // whose client left must not hold its place (and what is kept for it)
  // that long.
  const hook = await startWebhook();
  const worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "200" } });
  const api = client(worker.url);
  try {
    for (let round = 0; round < 3; round++) {
      const thread = newThread("handleave");
      const { runId, token } = await startExternalRun(api, hook, thread);
      const subs = [];
      for (let i = 0; i < 24; i++) {
        subs.push(api.events(thread));
        await subs.at(-1).ready;
      }
      assert.equal((await api.publish(thread, runId, token, [title("one")])).status, 200);
      assert.equal((await api.stats(thread)).json.held, 24);
      const ended = api.publish(thread, runId, token, [finish]);
      await Promise.all(subs.map(async (s, i) => (await sleep(2 * i), s.close())));
      assert.equal((await ended).status, 200);
      await until(async () => (await api.stats(thread)).json.subscribers === 0, { timeoutMs: 5_000, what: "every place free" });
    }
  } finally {
    await worker.stop();
    await hook.close();
  }
});

test("a held stream whose client stops reading ends, alone: its place is freed, its bytes end at a frame it can resume after, the others read everything", async () => {
  // A client that keeps its connection but reads nothing (a raw socket,
  // paused once the answer's head came): once the connection's buffers are
  // full, the object's writes to it stay unread; past twice the keep-alive
  // interval and a second (200 ms here) with none taken, or past 1,024
  // unread writes, its stream ends, so it pins no memory and no place. The
  // buffers are the machine's: Linux lets a loopback connection's receive
  // side grow to tcp_rmem's most (32 MB on the machine this was written on).
  const hook = await startWebhook();
  const worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "200" } });
  const api = client(worker.url);
  try {
    const thread = newThread("handstall");
    const { runId, token } = await startExternalRun(api, hook, thread);
    const reader = api.events(thread);
    await reader.ready;
    const { port } = new URL(worker.url);
    const stalled = net.connect(Number(port), "127.0.0.1");
    const got = [];
    stalled.on("data", (b) => got.push(b));
    stalled.write(`GET /instance-ai/events/${thread} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    await until(() => Buffer.concat(got).includes("\r\n\r\n"), { what: "the stalled client's answer head" });
    stalled.pause();
    await until(async () => (await api.stats(thread)).json.held === 2, { what: "both held" });
    const big = "x".repeat(16_000);
    let sent = 0;
    while ((await api.stats(thread)).json.held === 2) {
      assert.ok(sent < 5_000, `the stalled stream ended (${sent} events of 16 kB published)`);
      const batch = Array.from({ length: 20 }, (_, i) => title(`${sent + i} ${big}`));
      assert.equal((await api.publish(thread, runId, token, batch)).status, 200);
      sent += batch.length;
    }
    const last = (await api.stats(thread)).json.lastEventId;
    // (Its bytes are searched, not parsed, until the last: tens of MB.)
    await until(() => reader.raw.includes(`id: ${last}\n`), { timeoutMs: 20_000, what: "the reading client's last event" });
    const ids = reader.durable().map((e) => e.id);
    assert.deepEqual(ids, Array.from({ length: last }, (_, i) => i + 1), "the reading client had every event once, in order");
    assert.ok(!reader.closed, "the reading client's stream goes on");
    // The stalled client reads what was written to it before its end: the
    // answer ends after a whole frame, and its ids are in order without a
    // gap, so it resumes from the last one as after any drop. (Connection:
    // close: the socket ends with the answer, not at the server's idle
    // timeout.)
    const ended = new Promise((resolve) => stalled.on("end", resolve));
    stalled.resume();
    await ended;
    const text = Buffer.concat(got).toString("utf8");
    const body = text.slice(text.indexOf("\r\n\r\n") + 4);
    assert.match(body, /\r\n0\r\n\r\n$/, "a chunked answer ended cleanly");
    const theirs = [...body.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.ok(theirs.length > 0 && theirs.length < last, `some, not all (${theirs.length} of ${last})`);
    assert.deepEqual(theirs, Array.from({ length: theirs.length }, (_, i) => i + 1), "in order, without a gap");
    assert.equal((await api.stats(thread)).json.subscribers, 1, "only the reading client holds a place");
    reader.close();
    stalled.destroy();
  } finally {
    await worker.stop();
    await hook.close();
  }
});

/**
 * Readers of a view (`view(query)`: its path with `query` added) across
 * four runs and their idle spells: two join each run, one from the start
 * and one from where the thread stands (the offset a catch-up read gives);
 * each run publishes while they are held, then ends, and they are handed
 * over; a last run reaches them on their sockets. Every reader has, from
 * its `data` frames, what a catch-up read has after its offset: each item
 * once, in order, its stream never broken, its offsets only moving forward.
 */
async function readersAcrossRuns(thread, view) {
  const readers = [];
  /** The items of a reader's `data` frames, in the order they came. */
  const itemsOf = (r) => r.frames().filter((f) => f.event === "data").flatMap((f) => JSON.parse(f.data));
  let heldSeen = 0;
  for (let c = 0; c < 4; c++) {
    const { runId, token } = await startExternalRun(api, hook, thread, `cycle ${c}`);
    const now = await api.call("GET", view("offset=-1"));
    assert.equal(now.status, 200, now.text);
    for (const [offset, had] of [["-1", 0], [now.headers.get("stream-next-offset"), now.json.length]]) {
      const r = openSse(`${worker.url}${view(`offset=${offset}&live=sse`)}`);
      await r.ready;
      assert.equal(r.status, 200, r.raw);
      r.had = had;
      readers.push(r);
    }
    for (let i = 0; i < 4; i++) {
      assert.equal((await api.publish(thread, runId, token, [tool(`c${c}-${i}`), title(`c${c}-${i}`)])).status, 200);
    }
    heldSeen = Math.max(heldSeen, (await api.stats(thread)).json.held);
    assert.equal((await api.publish(thread, runId, token, [finish])).status, 200);
    await until(async () => streamsSettled((await api.stats(thread)).json), { timeoutMs: 10_000, what: "every reader handed over" });
  }
  // Idle, on sockets now: another run reaches them.
  const { runId: next, token } = await startExternalRun(api, hook, thread, "after");
  assert.equal((await api.publish(thread, next, token, [tool("after"), title("after"), finish])).status, 200);
  assert.ok(heldSeen >= 2, `the readers were held by the object during a run (at most ${heldSeen} at once)`);
  const all = await api.call("GET", view("offset=-1"));
  assert.equal(all.status, 200, all.text);
  const want = all.json;
  assert.ok(["c3-3", "after"].every((id) => JSON.stringify(want).includes(id)), all.text);
  await Promise.all(readers.map((r) => until(() => itemsOf(r).length >= want.length - r.had, { timeoutMs: 10_000, what: "every item" })));
  for (const [i, r] of readers.entries()) {
    assert.ok(!r.closed, `reader ${i}'s stream never ended`);
    assert.deepEqual(itemsOf(r), want.slice(r.had), `reader ${i} (had ${r.had}): no gap, no duplicate, in order`);
    const controls = r.frames().filter((f) => f.event === "control").map((f) => JSON.parse(f.data).streamNextOffset);
    assert.deepEqual(controls, [...controls].sort(), `reader ${i}: its offsets only move forward`);
    r.close();
  }
}

test("Durable Streams readers (live=sse) are held during a run and handed over at idle: every event once, in order, as a fresh read has them", async () => {
  const thread = newThread("handover-ds");
  await readersAcrossRuns(thread, (query) => `/v1/threads/${thread}?${query}`);
});

test("Flue's updates view (view=updates, live=sse) is held during a run and handed over at idle: every chunk once, in order, as a fresh read has them", async () => {
  const thread = newThread("handover-flue");
  await readersAcrossRuns(thread, (query) => `/agents/default/${thread}?view=updates&${query}`);
});

/**
 * A run's stream, opened by `open()` (a send's answer), read to its end
 * while the run's agent publishes a short answer across two moves: busy
 * (held by the object), quiet mid-answer (handed over to a socket), busy
 * again (held again), then the run's end. Returns the stream's raw text and
 * the run.
 */
async function acrossMoves(thread, open) {
  const resp = await open();
  if (resp.status !== 200) assert.fail(`the send answered ${resp.status}: ${await resp.text()}`);
  const live = { raw: "", ended: false };
  (async () => {
    const dec = new TextDecoder();
    for await (const chunk of resp.body) live.raw += dec.decode(chunk, { stream: true });
    live.ended = true;
  })();
  const sig = await hook.next((m) => m.type === "run" && m.threadId === thread);
  const publish = async (events) => assert.equal((await api.publish(thread, sig.runId, sig.publishToken, events)).status, 200);
  const delta = (text, rid) => ({ type: "text-delta", agentId: "orchestrator", responseId: rid, payload: { text } });
  const heldNow = async () => (await api.stats(thread)).json.held;
  // Busy: the object holds the stream.
  for (const t of ["He", "llo", " the"]) await publish([delta(t, "a")]);
  await until(async () => (await heldNow()) === 1, { timeoutMs: 5000, what: "the stream held" });
  // The agent goes quiet: the stream moves to a socket, mid-answer.
  await until(async () => streamsSettled((await api.stats(thread)).json), { timeoutMs: 10_000, what: "the hand-over" });
  await publish([delta("re", "a")]);
  // Busy again: it moves back to the object.
  await publish([delta(" world", "a"), tool("x1")]);
  await publish([{ type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "x1", result: { ok: true } } }]);
  await until(async () => (await heldNow()) === 1, { timeoutMs: 5000, what: "the stream held again" });
  await publish([delta("Done", "b"), finish]);
  await until(() => live.ended, { timeoutMs: 10_000, what: "the stream's end" });
  return { raw: live.raw, runId: sig.runId };
}

const post = (path, body, headers = {}) =>
  fetch(`${worker.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

test("an AI SDK stream (useChat's answer to POST /api/chat) moves when its agent goes quiet mid-run and back when it is busy: every chunk once, as the run's replay has them", async () => {
  const thread = newThread("handover-ui");
  const body = { id: thread, messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "hi" }] }], trigger: "submit-message" };
  const { raw, runId } = await acrossMoves(thread, () => post("/api/chat", body));
  const replay = await (await fetch(`${worker.url}/api/chat/${thread}/runs/${runId}/stream`)).text();
  /** A UI message stream's chunks: the text of each text part, and the
   * rest in order (text deltas are cut where the log's blocks are). */
  const read = (raw) => {
    const lines = raw.split("\n\n").filter((f) => f.startsWith("data: ")).map((f) => f.slice(6));
    assert.equal(lines.filter((l) => l === "[DONE]").length, 1, "one end");
    assert.equal(lines.at(-1), "[DONE]");
    const chunks = lines.slice(0, -1).map((l) => JSON.parse(l));
    const text = {};
    for (const c of chunks.filter((c) => c.type === "text-delta")) text[c.id] = (text[c.id] ?? "") + c.delta;
    return { text, rest: chunks.filter((c) => c.type !== "text-delta") };
  };
  const got = read(raw);
  const want = read(replay);
  assert.deepEqual(got.text, { ...want.text }, "each text part's text once, in order");
  assert.deepEqual(Object.values(got.text).join("|"), "Hello there world|Done");
  assert.deepEqual(got.rest, want.rest, "every other chunk once, in order");
});

test("an AG-UI run stream (POST /ag-ui's answer) moves when its agent goes quiet mid-run and back when it is busy: its numbered events byte for byte as the run's re-attach replays them", async () => {
  const thread = newThread("handover-agui");
  const input = { threadId: thread, runId: "client-run", messages: [{ id: "u1", role: "user", content: "hi" }], tools: [], context: [], state: {}, forwardedProps: {} };
  const { raw, runId } = await acrossMoves(thread, () => post("/ag-ui", input, { accept: "text/event-stream" }));
  const replay = await (await fetch(`${worker.url}/ag-ui/threads/${thread}/runs/${runId}`)).text();
  const numbered = (raw) => raw.split("\n\n").filter((f) => /^id: \d+/m.test(f));
  const got = numbered(raw);
  assert.ok(got.some((f) => f.includes("TEXT_MESSAGE_CONTENT")) && got.some((f) => f.includes("RUN_FINISHED")), raw);
  assert.deepEqual(got, numbered(replay), "every numbered event once, in order, the same bytes");
});

test("an agora run stream (POST /agent/chat's answer) moves when its agent goes quiet mid-run and back when it is busy: its numbered frames byte for byte as the run's re-attach replays them", async () => {
  const thread = newThread("handover-agora");
  const { raw, runId } = await acrossMoves(thread, () => post("/agent/chat", { threadId: thread, message: "hi" }));
  const replay = await (await fetch(`${worker.url}/agent/chat/${encodeURIComponent(runId)}/stream`)).text();
  const numbered = (raw) => raw.split("\n\n").filter((f) => /^id: \d+/m.test(f));
  const got = numbered(raw);
  assert.ok(got.length > 5 && raw.includes("event: done"), raw);
  assert.deepEqual(got, numbered(replay), "every numbered frame once, in order, the same bytes");
});
