// The Thread stream issue, over real HTTP on workerd: every route and rule of
// the Instance AI event protocol with an external agent publishing.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, sleep, until, tempDir, startExternalRun } from "./support/harness.mjs";
import { fold } from "../client/dist/index.js";

let worker, hook, api;

before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "300" } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

/** Sends a message and returns the run with the publish token the agent got. */
const startRun = (thread, message = "hello", a = api, h = hook) => startExternalRun(a, h, thread, message);

const delta = (text, responseId = "s1", agentId = "orchestrator") => ({
  type: "text-delta",
  agentId,
  responseId,
  payload: { text },
});

describe("chat and the run lock", () => {
  test("a send starts a run, signals the agent, and emits run-start first", async () => {
    const thread = newThread();
    const { runId, signal } = await startRun(thread, "what's up?");
    assert.match(runId, new RegExp(`^${thread}\\.run_[0-9a-f]{24}$`));
    assert.equal(signal.threadId, thread);
    assert.equal(signal.message, "what's up?");
    assert.match(signal.messageId, /^msg_/);
    assert.equal(signal.publishUrl, `${worker.url}/instance-ai/threads/${thread}/runs/${runId}/events`);
    assert.match(signal.publishToken, /^tlp_[0-9a-f]{64}$/);

    const sse = api.events(thread);
    await sse.ready;
    const first = await sse.waitFor(() => true);
    assert.equal(first.type, "run-start");
    assert.equal(first.id, 1);
    assert.equal(first.runId, runId);
    assert.equal(first.payload.messageId, signal.messageId);
    assert.equal(typeof first.ts, "number");
    sse.close();
  });

  test("a second send while a run is active is 409 run_active with the runId", async () => {
    const thread = newThread();
    const { runId } = await startRun(thread);
    const again = await api.chat(thread, "again");
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "run_active");
    assert.equal(again.json.error.runId, runId);
  });

  test("bad chat bodies are 4xx JSON errors with stable codes", async () => {
    const thread = newThread();
    const cases = [
      ["{not json", 400, "invalid_json"],
      ["", 400, "invalid_json"],
      [JSON.stringify({}), 400, "message_required"],
      [JSON.stringify({ message: "   " }), 400, "message_required"],
      [JSON.stringify({ message: 42 }), 400, "message_required"],
      [JSON.stringify({ message: "x".repeat(40 * 1024) }), 413, "message_too_large"],
    ];
    for (const [body, status, code] of cases) {
      const r = await api.call("POST", `/instance-ai/chat/${thread}`, body);
      assert.equal(r.status, status, body.slice(0, 40));
      assert.equal(r.json.error.code, code);
      assert.equal(typeof r.json.error.message, "string");
    }
    // A refused send starts nothing and claims nothing: the thread does not
    // exist, so it is an empty one.
    const status = await api.status(thread);
    assert.equal(status.json.hasActiveRun, false, "nothing started");
    assert.equal((await api.messages(thread)).json.nextEventId, 1, "nothing stored");
  });

  test("unknown routes 404, wrong methods 405, malformed ids 400, all JSON with nosniff", async () => {
    const r404 = await api.call("GET", "/instance-ai/nope");
    assert.equal(r404.status, 404);
    assert.equal(r404.json.error.code, "not_found");
    const r405 = await api.call("GET", "/instance-ai/chat/t1");
    assert.equal(r405.status, 405);
    assert.equal(r405.json.error.code, "method_not_allowed");
    assert.equal(r405.headers.get("allow"), "POST");
    const r400 = await api.call("POST", "/instance-ai/chat/bad.id", { message: "x" });
    assert.equal(r400.status, 400);
    assert.equal(r400.json.error.code, "invalid_id");
    // A method the server does not answer is refused, never read as
    // another (WebDAV's PROPFIND on a GET route: a stream, were it read
    // as GET, hence the bound on the wait).
    const odd = await fetch(`${worker.url}/instance-ai/events/t1`, { method: "PROPFIND", signal: AbortSignal.timeout(10_000) });
    assert.equal(odd.status, 405);
    assert.equal((await odd.json()).error.code, "method_not_allowed");
    for (const r of [r404, r405, r400, odd]) assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  });
});

describe("publishing", () => {
  test("a batch is appended in order with runId and ts stamped by the server", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const r = await api.publish(thread, runId, token, [
      { type: "tool-call", agentId: "orchestrator", runId: "forged", ts: 1, payload: { toolCallId: "t1", toolName: "search", args: { q: "x" } } },
      { type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "t1", result: { hits: 3 } } },
      { type: "thread-title-updated", agentId: "orchestrator", payload: { title: "Search" } },
    ]);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.lastEventId, 4);
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.id === 4);
    const ev = sse.durable();
    assert.deepEqual(ev.map((e) => e.id), [1, 2, 3, 4]);
    assert.deepEqual(ev.map((e) => e.type), ["run-start", "tool-call", "tool-result", "thread-title-updated"]);
    for (const e of ev) assert.equal(e.runId, runId);
    assert.ok(ev[1].ts > 1_000_000_000_000, "server-stamped ts");
    // Byte framing: `id:` then one `data:` line of the canonical JSON, blank line.
    const frame = `id: 2\ndata: {"type":"tool-call","runId":"${runId}","agentId":"orchestrator","ts":${ev[1].ts},"payload":{"toolCallId":"t1","toolName":"search","args":{"q":"x"}}}\n\n`;
    assert.ok(sse.raw.includes(frame), `exact frame bytes in ${sse.raw.slice(0, 300)}`);
    sse.close();
  });

  test("a schema error refuses the whole batch with the index of the first invalid event", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const before = (await api.stats(thread)).json.lastEventId;
    const r = await api.publish(thread, runId, token, [
      { type: "status", agentId: "orchestrator", payload: { message: "ok" } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "x", args: {} } },
      { type: "tool-result", agentId: "orchestrator", payload: { result: 1 } },
      { type: "nonsense", agentId: "orchestrator", payload: {} },
    ]);
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, "invalid_event");
    assert.equal(r.json.error.index, 2);
    assert.match(r.json.error.message, /toolCallId/);
    assert.equal((await api.stats(thread)).json.lastEventId, before, "nothing of the batch stored");
    for (const [events, index] of [
      [[{ type: "run-start", agentId: "a", payload: { messageId: "m" } }], 0],
      [[{ type: "run-finish", agentId: "a", payload: { status: "completed" } }, delta("x")], 0],
      [[delta("ok"), { type: "tool-result", agentId: "a", payload: { toolCallId: "t", result: { ["__proto__"]: { polluted: 1 } } } }], 1],
      [[delta("ok"), "not an object"], 1],
      [[{ type: "text-block", agentId: "a", responseId: "s", payload: { text: "blocks are the server's" } }], 0],
    ]) {
      const bad = await api.publish(thread, runId, token, events);
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.json.error.index, index, bad.text);
    }
    const notArray = await api.publish(thread, runId, token, { type: "status" });
    assert.equal(notArray.status, 400);
    assert.equal(notArray.json.error.code, "invalid_batch");
    assert.equal((await api.stats(thread)).json.lastEventId, before);
  });

  test("publish tokens: 401 without, 403 wrong or for another run", async () => {
    const threadA = newThread();
    const a = await startRun(threadA);
    const none = await api.publish(threadA, a.runId, undefined, [delta("x")]);
    assert.equal(none.status, 401);
    assert.equal(none.json.error.code, "unauthorized");
    const wrong = await api.publish(threadA, a.runId, "tlp_" + "0".repeat(64), [delta("x")]);
    assert.equal(wrong.status, 403);
    assert.equal(wrong.json.error.code, "forbidden");
    // A token of another thread's run does not reach this run.
    const threadB = newThread();
    const b = await startRun(threadB);
    const cross = await api.publish(threadA, a.runId, b.token, [delta("x")]);
    assert.equal(cross.status, 403);
    // Nor can it be pointed at a run of another thread.
    const elsewhere = await api.publish(threadA, b.runId, b.token, [delta("x")]);
    assert.equal(elsewhere.status, 404);
    assert.equal(elsewhere.json.error.code, "run_not_found");
  });

  test("run-finish ends the run; later events are 409 run_finished", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const r = await api.publish(thread, runId, token, [
      delta("Hello"),
      { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
    ]);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual((await api.status(thread)).json, { hasActiveRun: false, isSuspended: false, backgroundTasks: [], queue: { items: [], paused: false } });
    const late = await api.publish(thread, runId, token, [delta("late")]);
    assert.equal(late.status, 409);
    assert.equal(late.json.error.code, "run_finished");
    // The thread takes a new message now.
    const next = await startRun(thread, "second");
    assert.notEqual(next.runId, runId);
  });
});

describe("cancel", () => {
  test("cancels the active run, tells the agent, and is idempotent", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const sse = api.events(thread);
    await sse.ready;
    const r = await api.cancel(thread);
    assert.deepEqual(r.json, { ok: true, cancelled: true, runId });
    const fin = await sse.waitFor((e) => e.type === "run-finish");
    assert.deepEqual(fin.payload, { status: "cancelled", reason: "user_cancelled" });
    await hook.next((m) => m.type === "cancel" && m.runId === runId);
    const again = await api.cancel(thread);
    assert.deepEqual(again.json, { ok: true, cancelled: false });
    const late = await api.publish(thread, runId, token, [delta("too late")]);
    assert.equal(late.status, 409);
    assert.equal(late.json.error.code, "run_finished");
    await sleep(100);
    assert.equal(sse.events().filter((e) => e.type === "text-delta").length, 0, "nothing after run-finish");
    sse.close();
  });

  test("cancel on a thread that never existed is the no-op of an idle thread (\"cancels the active run if any\")", async () => {
    const thread = newThread();
    const r = await api.cancel(thread);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { ok: true, cancelled: false });
    assert.equal((await api.messages(thread)).json.nextEventId, 1, "nothing stored");
  });
});

describe("the SSE endpoint", () => {
  test("sends the seed's headers and keep-alive pings", async () => {
    const thread = newThread();
    await startRun(thread);
    const sse = api.events(thread);
    await sse.ready;
    assert.equal(sse.status, 200);
    assert.equal(sse.headers.get("content-type"), "text/event-stream");
    assert.equal(sse.headers.get("cache-control"), "no-cache");
    assert.equal(sse.headers.get("x-accel-buffering"), "no");
    // `Connection: keep-alive` is hop-by-hop: the runtime owns it (HTTP/1.1
    // connections are persistent by default) and strips it from responses.
    await until(() => sse.raw.includes(": ping\n\n"), { timeoutMs: 3000, what: "a ping" });
    assert.ok(sse.frames().some((f) => f.comments.includes("ping")));
    sse.close();
  });

  test("cursor: Last-Event-ID wins, else ?lastEventId, else full history; malformed is 400", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    await api.publish(thread, runId, token, [
      { type: "status", agentId: "orchestrator", payload: { message: "" } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "a", toolName: "x", args: {} } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "b", toolName: "x", args: {} } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "c", toolName: "x", args: {} } },
    ]);
    const ids = async (opts) => {
      const sse = api.events(thread, opts);
      await sse.ready;
      await sse.waitFor((e) => e.id === 4);
      const got = sse.durable().map((e) => e.id);
      sse.close();
      return got;
    };
    assert.deepEqual(await ids({}), [1, 2, 3, 4]);
    assert.deepEqual(await ids({ query: "?lastEventId=2" }), [3, 4]);
    assert.deepEqual(await ids({ query: "?lastEventId=1", headers: { "last-event-id": "3" } }), [4]);
    for (const opts of [{ query: "?lastEventId=abc" }, { query: "?lastEventId=-1" }, { headers: { "last-event-id": "x1" } }]) {
      const sse = api.events(thread, opts);
      await sse.ready;
      assert.equal(sse.status, 400);
      assert.equal(JSON.parse(sse.raw).error.code, "invalid_cursor");
    }
  });

  test("replay then live: no gap, no duplicate, while events are published during the replay", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    // A long history first, so replays take several pages.
    for (let b = 0; b < 6; b++) {
      const batch = Array.from({ length: 250 }, (_, i) => ({
        type: "tool-call",
        agentId: "orchestrator",
        payload: { toolCallId: `h${b}-${i}`, toolName: "x", args: { i } },
      }));
      assert.equal((await api.publish(thread, runId, token, batch)).status, 200);
    }
    // Publish continuously while clients connect at different cursors.
    let publishing = true;
    let n = 0;
    const publisher = (async () => {
      while (publishing) {
        await api.publish(thread, runId, token, [
          { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `l${n++}`, toolName: "x", args: {} } },
        ]);
      }
    })();
    const clients = [];
    for (const cursor of [0, 10, 700, 1499, 1501]) {
      clients.push({ cursor, sse: api.events(thread, { query: `?lastEventId=${cursor}` }) });
      await sleep(15);
    }
    await sleep(200);
    publishing = false;
    await publisher;
    const fin = await api.publish(thread, runId, token, [
      { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
    ]);
    const last = fin.json.lastEventId;
    for (const { cursor, sse } of clients) {
      await sse.waitFor((e) => e.id === last, 10000, `event ${last} at cursor ${cursor}`);
      const ids = sse.durable().map((e) => e.id);
      const expected = Array.from({ length: last - cursor }, (_, i) => cursor + 1 + i);
      assert.deepEqual(ids, expected, `cursor ${cursor}: contiguous, no gap, no duplicate`);
      sse.close();
    }
  });

  test("a disconnected subscriber is dropped promptly", async () => {
    const thread = newThread();
    await startRun(thread);
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor(() => true);
    assert.equal((await api.stats(thread)).json.subscribers, 1);
    sse.close();
    await until(async () => (await api.stats(thread)).json.subscribers === 0, {
      timeoutMs: 2000,
      what: "the subscriber to be dropped",
    });
  });
});

describe("coalescing", () => {
  test("deltas go out live without ids and are stored as one block", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const live = api.events(thread);
    await live.ready;
    await live.waitFor((e) => e.type === "run-start");
    const before = (await api.stats(thread)).json.rowsWritten;
    const deltas = Array.from({ length: 1000 }, (_, i) => delta(`w${i} `));
    for (let i = 0; i < 1000; i += 100) {
      assert.equal((await api.publish(thread, runId, token, deltas.slice(i, i + 100))).status, 200);
    }
    await api.publish(thread, runId, token, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    const rows = (await api.stats(thread)).json.rowsWritten - before;
    // 1 text-block + 1 run-finish + 1 run update (SQLite counts index rows
    // too: 5 in all), and the run's end as its owner's inbox took it (1).
    assert.ok(rows <= 6, `${rows} rows written for 1000 deltas`);
    await live.waitFor((e) => e.type === "run-finish");
    const liveDeltas = live.events().filter((e) => e.type === "text-delta");
    assert.equal(liveDeltas.length, 1000);
    assert.ok(liveDeltas.every((e) => e.id === undefined), "deltas carry no id");
    const text = liveDeltas.map((e) => e.payload.text).join("");
    const replay = api.events(thread);
    await replay.ready;
    await replay.waitFor((e) => e.type === "run-finish");
    const blocks = replay.events().filter((e) => e.type === "text-block");
    assert.equal(blocks.length, 1);
    assert.equal(blocks[0].payload.text, text);
    assert.equal(blocks[0].responseId, "s1");
    assert.ok(blocks[0].id < replay.durable().at(-1).id, "the block comes before run-finish");
    assert.equal(replay.events().filter((e) => e.type === "text-delta").length, 0, "no deltas in the replay");
    live.close();
    replay.close();
  });

  test("a client joining mid-segment gets the text so far as one id-less delta", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    await api.publish(thread, runId, token, [delta("Hel"), delta("lo ")]);
    const late = api.events(thread);
    await late.ready;
    const snap = await late.waitFor((e) => e.type === "text-delta");
    assert.equal(snap.id, undefined);
    assert.deepEqual(snap.payload, { text: "Hello ", snapshot: true, parts: [3, 3] });
    assert.equal(snap.responseId, "s1");
    await api.publish(thread, runId, token, [delta("world"), { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t", toolName: "x", args: {} } }]);
    await late.waitFor((e) => e.type === "tool-call");
    const texts = late.events().filter((e) => e.type === "text-delta").map((e) => e.payload.text);
    assert.deepEqual(texts, ["Hello ", "world"]);
    const blocks = late.events().filter((e) => e.type === "text-block");
    assert.deepEqual(blocks.map((b) => b.payload.text), ["Hello world"], "the block, stored before the tool call, holds it all");
    late.close();
  });

  test("trailing deltas are stored after 3 s idle", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    await api.publish(thread, runId, token, [delta("quiet ", "s9"), delta("now", "s9")]);
    const lastBefore = (await api.stats(thread)).json.lastEventId;
    await until(async () => (await api.stats(thread)).json.lastEventId > lastBefore, {
      timeoutMs: 6000,
      stepMs: 200,
      what: "the idle flush",
    });
    const sse = api.events(thread);
    await sse.ready;
    const block = await sse.waitFor((e) => e.type === "text-block");
    assert.equal(block.payload.text, "quiet now");
    await sleep(100);
    assert.equal(sse.events().filter((e) => e.type === "text-delta").length, 0, "nothing unstored to hand over");
    sse.close();
  });
});

describe("live and replay agree", () => {
  test("a live client's durable frames are the replay's, byte for byte, and its deltas make the blocks", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread);
    const live = api.events(thread);
    await live.ready;
    await live.waitFor((e) => e.type === "run-start");
    const publish = (events) => api.publish(thread, runId, token, events);
    await publish([delta("Let me ", "a"), { type: "reasoning-delta", agentId: "orchestrator", responseId: "a", payload: { text: "hmm" } }]);
    await publish([delta("check.", "a"), { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "x", args: {} } }]);
    await publish([{ type: "agent-spawned", agentId: "sub", payload: { parentId: "orchestrator", role: "helper", tools: [] } }, delta("sub text", "b", "sub")]);
    // A second client reconnects in the middle of a text block.
    const mid = api.events(thread, { query: `?lastEventId=${live.durable().at(-1)?.id ?? 0}` });
    await mid.ready;
    await publish([delta(" more", "b", "sub"), { type: "agent-completed", agentId: "sub", payload: { role: "helper", result: "ok" } }]);
    await publish([{ type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "t1", result: 1 } }, delta("Done", "c")]);
    await publish([{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    await live.waitFor((e) => e.type === "run-finish");
    await mid.waitFor((e) => e.type === "run-finish");
    const replay = api.events(thread);
    await replay.ready;
    await replay.waitFor((e) => e.type === "run-finish");
    const durableFrames = (c) => c.frames().filter((f) => f.id !== undefined).map((f) => `${f.id}|${f.data}`);
    assert.deepEqual(durableFrames(live), durableFrames(replay));
    // Per segment (an agent's run of deltas of one kind and responseId), the
    // deltas a client saw add up to that segment's block, in order.
    const segments = new Map();
    for (const d of live.events().filter((e) => e.type.endsWith("-delta"))) {
      const key = `${d.type.replace("delta", "block")}|${d.responseId}`;
      const list = segments.get(d.agentId) ?? [];
      if (list.at(-1)?.key === key) list.at(-1).text += d.payload.text;
      else list.push({ key, text: d.payload.text });
      segments.set(d.agentId, list);
    }
    const blocks = new Map();
    for (const b of replay.events().filter((e) => e.type.endsWith("-block"))) {
      const list = blocks.get(b.agentId) ?? [];
      list.push({ key: `${b.type}|${b.responseId}`, text: b.payload.text });
      blocks.set(b.agentId, list);
    }
    assert.deepEqual(segments, blocks);
    assert.equal(blocks.get("orchestrator").length, 4, "'Let me ', 'hmm', 'check.', 'Done'");
    // The client that joined mid-block got the text so far once, then the rest.
    const midDeltas = mid.events().filter((e) => e.type === "text-delta" && e.agentId === "sub");
    assert.deepEqual(midDeltas.map((d) => [d.payload.text, d.payload.snapshot ?? false]), [["sub text", true], [" more", false]]);
    assert.equal(mid.events().find((e) => e.type === "text-block" && e.agentId === "sub").payload.text, "sub text more");
    // fold(live) == fold(replay) == the server's fold. (Reconnects at every
    // point are the core's property test: durable/tests/thread.rs.)
    const tree = fold(live.events());
    assert.deepEqual(fold(replay.events()), tree);
    assert.deepEqual((await api.messages(thread)).json.messages[1].agentTree, tree);
    for (const c of [live, mid, replay]) c.close();
  });
});

describe("status and messages", () => {
  test("messages fold the log into agent trees; nextEventId lets a reload see nothing twice", async () => {
    const thread = newThread();
    const { runId, token } = await startRun(thread, "build it");
    await api.publish(thread, runId, token, [
      { type: "reasoning-delta", agentId: "orchestrator", responseId: "r1", payload: { text: "thinking" } },
      delta("On it. ", "r1"),
      { type: "tool-input-start", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "spawn" } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "spawn", args: { role: "builder" } } },
      { type: "agent-spawned", agentId: "a2", payload: { parentId: "orchestrator", role: "builder", tools: ["x"] } },
      delta("building", "b1", "a2"),
      { type: "agent-completed", agentId: "a2", payload: { role: "builder", result: "built" } },
      { type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "t1", result: "built" } },
      delta("Done.", "r2"),
    ]);
    const status = (await api.status(thread)).json;
    assert.deepEqual(status, { hasActiveRun: true, isSuspended: false, backgroundTasks: [], queue: { items: [], paused: false }, runId });

    const m = (await api.messages(thread)).json;
    assert.equal(m.threadId, thread);
    assert.equal(m.messages.length, 2);
    const [user, asst] = m.messages;
    assert.equal(user.role, "user");
    assert.equal(user.content, "build it");
    assert.equal(asst.role, "assistant");
    assert.equal(asst.isStreaming, true);
    const tree = asst.agentTree;
    assert.equal(tree.agentId, "orchestrator");
    assert.equal(tree.reasoning, "thinking");
    assert.equal(tree.textContent, "On it. ", "the open segment 'Done.' is not durable yet");
    assert.equal(tree.toolCalls[0].result, "built");
    assert.equal(tree.children[0].role, "builder");
    assert.equal(tree.children[0].textContent, "building");
    assert.equal(tree.children[0].status, "completed");
    assert.deepEqual(tree.timeline.map((t) => t.type), ["reasoning", "text", "tool-call", "child"]);

    // Reload: messages, then SSE from nextEventId - 1.
    const sse = api.events(thread, { query: `?lastEventId=${m.nextEventId - 1}` });
    await sse.ready;
    const snap = await sse.waitFor((e) => e.type === "text-delta");
    assert.equal(snap.payload.text, "Done.");
    assert.equal(sse.durable().length, 0, "nothing the messages already hold");
    await api.publish(thread, runId, token, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    await sse.waitFor((e) => e.type === "run-finish");
    assert.deepEqual(sse.durable().map((e) => e.type), ["text-block", "run-finish"]);
    assert.equal(sse.durable()[0].id, m.nextEventId);
    sse.close();

    const after = (await api.messages(thread)).json;
    assert.equal(after.messages[1].agentTree.textContent, "On it. Done.");
    assert.equal(after.messages[1].isStreaming, false);
    const bad = await api.messages(thread, "?limit=abc");
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, "invalid_query");
  });

  test("messages page through runs, newest page first", async () => {
    const thread = newThread();
    for (let i = 0; i < 3; i++) {
      const { runId, token } = await startRun(thread, `m${i}`);
      await api.publish(thread, runId, token, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    }
    const p0 = (await api.messages(thread, "?limit=2&page=0")).json;
    assert.deepEqual(p0.messages.filter((m) => m.role === "user").map((m) => m.content), ["m1", "m2"]);
    const p1 = (await api.messages(thread, "?limit=2&page=1")).json;
    assert.deepEqual(p1.messages.filter((m) => m.role === "user").map((m) => m.content), ["m0"]);
  });
});

describe("webhook failures", () => {
  test("an agent webhook that refuses ends the run with an error instead of locking the thread", async () => {
    const bad = await startWebhook({ status: 500 });
    const w = await startWorker({ vars: { AGENT_WEBHOOK_URL: bad.url } });
    try {
      const a = client(w.url);
      const thread = newThread();
      const r = await a.chat(thread, "hi");
      assert.equal(r.status, 200);
      const sse = a.events(thread);
      await sse.ready;
      const fin = await sse.waitFor((e) => e.type === "run-finish");
      assert.equal(fin.payload.status, "error");
      assert.equal(fin.payload.reason, "agent webhook failed");
      const err = sse.events().find((e) => e.type === "error");
      assert.match(err.payload.content, /HTTP 500/);
      assert.equal((await a.status(thread)).json.hasActiveRun, false);
      sse.close();
    } finally {
      await w.stop();
      await bad.close();
    }
  });
});

describe("restarts and silent agents", () => {
  test("ids continue across a restart; a silent open run is swept as crash_interrupted", async () => {
    const dir = tempDir();
    const h = await startWebhook();
    const vars = { AGENT_WEBHOOK_URL: h.url, RUN_RESTART_GRACE_MS: "800" };
    let w = await startWorker({ vars, persist: dir });
    const thread = newThread();
    let runId;
    try {
      const a = client(w.url);
      ({ runId } = await startRun(thread, "first", a, h));
      const token = h.received.find((m) => m.runId === runId).publishToken;
      await a.publish(thread, runId, token, [
        { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "open1", toolName: "slow", args: {} } },
        { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "done1", toolName: "fast", args: {} } },
        { type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "done1", result: 1 } },
      ]);
      assert.equal((await a.stats(thread)).json.lastEventId, 4);
      await w.kill();
      w = await startWorker({ vars, persist: dir });
      const b = client(w.url);
      const sse = b.events(thread);
      await sse.ready;
      const fin = await sse.waitFor((e) => e.type === "run-finish", 8000);
      assert.deepEqual(fin.payload, { status: "interrupted", reason: "crash_interrupted" });
      const durable = sse.durable();
      assert.deepEqual(durable.map((e) => e.id), [1, 2, 3, 4, 5, 6], "every event once, ids continue");
      assert.equal(durable[4].type, "tool-interrupted");
      assert.equal(durable[4].payload.toolCallId, "open1");
      assert.equal((await b.status(thread)).json.hasActiveRun, false);
      // The thread goes on: the next run's ids continue.
      const next = await startRun(thread, "second", b, h);
      await sse.waitFor((e) => e.type === "run-start" && e.runId === next.runId);
      assert.equal(sse.durable().at(-1).id, 7);
      sse.close();
    } finally {
      await w.stop();
      await h.close();
    }
  });

  test("the sweep does not fire on a healthy run that keeps publishing after a restart", async () => {
    const dir = tempDir();
    const h = await startWebhook();
    const vars = { AGENT_WEBHOOK_URL: h.url, RUN_RESTART_GRACE_MS: "1500" };
    let w = await startWorker({ vars, persist: dir });
    const thread = newThread();
    try {
      const { runId, token } = await startRun(thread, "first", client(w.url), h);
      await w.kill();
      w = await startWorker({ vars, persist: dir });
      const b = client(w.url);
      for (let i = 0; i < 6; i++) {
        const r = await b.publish(thread, runId, token, [{ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `k${i}`, toolName: "x", args: {} } }]);
        assert.equal(r.status, 200, r.text);
        await sleep(400);
      }
      assert.equal((await b.status(thread)).json.runId, runId, "still running well past the grace");
    } finally {
      await w.stop();
      await h.close();
    }
  });

  test("a run with no published event for RUN_IDLE_TIMEOUT_MS ends with timeout and the agent is told", async () => {
    const h = await startWebhook();
    const w = await startWorker({ vars: { AGENT_WEBHOOK_URL: h.url, RUN_IDLE_TIMEOUT_MS: "1000" } });
    try {
      const a = client(w.url);
      const thread = newThread();
      const { runId } = await startRun(thread, "hi", a, h);
      const sse = a.events(thread);
      await sse.ready;
      const fin = await sse.waitFor((e) => e.type === "run-finish", 6000);
      assert.deepEqual(fin.payload, { status: "error", reason: "timeout" });
      await h.next((m) => m.type === "cancel" && m.runId === runId && m.reason === "timeout");
      assert.equal((await a.status(thread)).json.hasActiveRun, false);
      sse.close();
    } finally {
      await w.stop();
      await h.close();
    }
  });
});
