// Resilience scenarios, sized by their options: `make test` runs them small
// (tests/resilience.test.mjs), `make soak` runs them long and prints figures
// (tests/soak/run.mjs). Each returns its figures and throws on any loss,
// duplicate or divergence.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { startWorker, startWebhook, client, openSse, newThread, sleep, until, tempDir } from "./harness.mjs";
import { fold } from "../../client/dist/index.js";

/** A seeded PRNG (mulberry32), so a failing run can be replayed. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An external agent's run: deltas in segments, tool calls, a sub-agent. */
function runScript(random, r) {
  const batches = [];
  const n = 4 + Math.floor(random() * 6);
  for (let b = 0; b < n; b++) {
    const batch = [];
    const seg = `s${r}-${Math.floor(random() * 3)}`;
    for (let i = 0; i < 1 + Math.floor(random() * 8); i++) {
      batch.push({ type: random() < 0.2 ? "reasoning-delta" : "text-delta", agentId: "orchestrator", responseId: seg, payload: { text: `w${b}.${i} ` } });
    }
    if (random() < 0.4) {
      const id = `t${r}-${b}`;
      batch.push({ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: id, toolName: "x", args: { b } } });
      batch.push({ type: "tool-result", agentId: "orchestrator", payload: { toolCallId: id, result: { ok: b } } });
    }
    if (b === 1 && random() < 0.5) {
      batch.push({ type: "agent-spawned", agentId: `sub${r}`, payload: { parentId: "orchestrator", role: "helper", tools: [] } });
      batch.push({ type: "text-delta", agentId: `sub${r}`, responseId: `sub${r}`, payload: { text: "sub work" } });
      batch.push({ type: "agent-completed", agentId: `sub${r}`, payload: { role: "helper", result: "done" } });
    }
    batches.push(batch);
  }
  batches.push([{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
  return batches;
}

function byRun(events) {
  const runs = new Map();
  for (const e of events) {
    if (!runs.has(e.runId)) runs.set(e.runId, []);
    runs.get(e.runId).push(e);
  }
  return runs;
}

/**
 * Reconnect storm: `clients` clients on one thread drop and reconnect at
 * random points (Last-Event-ID, ?lastEventId, or a reload: messages, then SSE
 * from nextEventId - 1) through `runs` runs. Every client must fold the same
 * trees as a client that never disconnected, and see each durable event once.
 */
export async function reconnectStorm({ clients = 20, runs = 50, seed = 42, worker, hook } = {}) {
  const random = rng(seed);
  const api = client(worker.url);
  const thread = newThread("storm");
  const firstRun = await api.chat(thread, "storm 0");
  const reference = api.events(thread);
  await reference.ready;
  let done = false;
  let reconnects = 0;
  const modes = ["header", "query", "reload"];

  async function stormClient(k) {
    const mode = modes[k % modes.length];
    const seen = []; // durable ids across sessions (header/query)
    const events = []; // everything received, in order, across sessions
    let maxId = 0;
    while (!done) {
      let conn;
      if (mode === "reload") {
        const m = (await api.messages(thread)).json;
        conn = api.events(thread, { query: `?lastEventId=${m.nextEventId - 1}` });
        await conn.ready;
        await sleep(5 + random() * 120);
        conn.close();
        const ids = conn.durable().map((e) => e.id);
        assert.equal(new Set(ids).size, ids.length, "a reload sees no durable event twice");
        if (ids.length) assert.ok(ids[0] >= m.nextEventId, "nothing the messages already held");
      } else {
        conn = api.events(thread, mode === "header" ? { headers: { "last-event-id": String(maxId) } } : { query: `?lastEventId=${maxId}` });
        await conn.ready;
        await sleep(5 + random() * 120);
        conn.close();
        await sleep(5);
        for (const e of conn.events()) {
          events.push(e);
          if (e.id !== undefined) {
            seen.push(e.id);
            maxId = Math.max(maxId, e.id);
          }
        }
      }
      reconnects++;
    }
    // Catch up to the end.
    if (mode !== "reload") {
      const last = api.events(thread, { query: `?lastEventId=${maxId}` });
      await last.ready;
      await sleep(300);
      last.close();
      for (const e of last.events()) {
        events.push(e);
        if (e.id !== undefined) seen.push(e.id);
      }
    }
    return { mode, seen, events };
  }

  const stormers = Array.from({ length: clients }, (_, k) => stormClient(k));
  // The agent side: `runs` runs published in batches with small pauses.
  let runId = firstRun.json.runId;
  for (let r = 0; r < runs; r++) {
    if (r > 0) runId = (await api.chat(thread, `storm ${r}`)).json.runId;
    const sig = await hook.next((m) => m.type === "run" && m.runId === runId);
    for (const batch of runScript(random, r)) {
      const p = await api.publish(thread, runId, sig.publishToken, batch);
      assert.equal(p.status, 200, p.text);
      await sleep(random() * 15);
    }
  }
  const last = (await api.stats(thread)).json.lastEventId;
  await reference.waitFor((e) => e.id === last, 10000, "the reference to catch up");
  done = true;
  const results = await Promise.all(stormers);
  reference.close();

  const refRuns = byRun(reference.events());
  const expectedTrees = new Map([...refRuns].map(([id, evs]) => [id, fold(evs)]));
  const served = (await api.messages(thread, "?limit=200")).json.messages.filter((m) => m.role === "assistant");
  for (const m of served) assert.deepEqual(m.agentTree, expectedTrees.get(m.runId), `messages tree of ${m.runId}`);
  let lost = 0;
  let duplicated = 0;
  for (const r of results) {
    if (r.mode === "reload") continue; // checked per session above, and by the messages trees
    const ids = r.seen;
    duplicated += ids.length - new Set(ids).size;
    lost += last - new Set(ids).size;
    for (const [id, evs] of byRun(r.events)) {
      assert.deepEqual(fold(evs), expectedTrees.get(id), `${r.mode} client's tree of ${id}`);
    }
  }
  assert.equal(duplicated, 0, "no durable event twice");
  assert.equal(lost, 0, "no durable event lost");
  return { clients, runs, reconnects, durableEvents: last, lost, duplicated };
}

/**
 * Restart: runs in flight on several threads when workerd is SIGKILLed (state
 * on disk); after a restart every durable event from before is there once,
 * ids continue, and the interrupted runs end `interrupted`.
 */
export async function restartChaos({ threads = 3, kills = 2, seed = 7 } = {}) {
  const random = rng(seed);
  const dir = tempDir();
  const hook = await startWebhook();
  const vars = { AGENT_WEBHOOK_URL: hook.url, RUN_RESTART_GRACE_MS: "600", AUTH_MODE: "dev" };
  let w = await startWorker({ vars, persist: dir });
  const ids = Array.from({ length: threads }, () => newThread("chaos"));
  const before = new Map();
  const current = new Map();
  let interrupted = 0;
  try {
    for (let k = 0; k < kills; k++) {
      const api = client(w.url);
      for (const thread of ids) {
        const r = await api.chat(thread, `round ${k}`);
        assert.equal(r.status, 200, r.text);
        current.set(thread, r.json.runId);
        const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
        const script = runScript(random, k).slice(0, -1); // never finishes: killed mid-run
        for (const batch of script) await api.publish(thread, r.json.runId, sig.publishToken, batch);
        const s = api.events(thread);
        await s.ready;
        const lastId = (await api.stats(thread)).json.lastEventId;
        await s.waitFor((e) => e.id === lastId);
        s.close();
        before.set(thread, s.frames().filter((f) => f.id !== undefined).map((f) => `${f.id}|${f.data}`));
      }
      await w.kill();
      w = await startWorker({ vars, persist: dir });
      const after = client(w.url);
      for (const thread of ids) {
        const s = after.events(thread);
        await s.ready;
        const fin = await s.waitFor((e) => e.type === "run-finish" && e.runId === current.get(thread), 10000);
        assert.deepEqual(fin.payload, { status: "interrupted", reason: "crash_interrupted" });
        interrupted++;
        const frames = s.frames().filter((f) => f.id !== undefined).map((f) => `${f.id}|${f.data}`);
        const old = before.get(thread);
        assert.deepEqual(frames.slice(0, old.length), old, "every durable event from before, once, unchanged");
        const idsAfter = s.durable().map((e) => e.id);
        assert.deepEqual(idsAfter, idsAfter.map((_, i) => i + 1), "ids continue, no gap, no duplicate");
        s.close();
      }
    }
    return { threads, kills, interruptedRuns: interrupted };
  } finally {
    await w.stop();
    await hook.close();
  }
}

/**
 * Load: `subscribers` SSE clients over `threads` threads while every thread
 * runs (an external agent publishing): zero lost events; p99 delivery
 * latency; the workerd process's memory.
 */
export async function load({ threads = 10, subscribers = 100, events = 60, worker, hook } = {}) {
  const api = client(worker.url);
  const perThread = Math.ceil(subscribers / threads);
  const ids = Array.from({ length: threads }, () => newThread("load"));
  const runs = [];
  for (const thread of ids) {
    const r = await api.chat(thread, "load");
    const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
    runs.push({ thread, runId: r.json.runId, token: sig.publishToken });
  }
  const subs = [];
  const latencies = [];
  for (const thread of ids) {
    for (let i = 0; i < perThread; i++) {
      subs.push({ thread, s: lightSubscriber(`${worker.url}/instance-ai/events/${thread}`, latencies) });
    }
  }
  await Promise.all(subs.map((x) => x.s.ready));
  const sentAt = new Map();
  await Promise.all(
    runs.map(async ({ thread, runId, token }) => {
      for (let i = 0; i < events; i++) {
        sentAt.set(`${thread}:${i}`, performance.now());
        const r = await api.publish(thread, runId, token, [
          { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `L${i}`, toolName: "x", args: { t: 0 } } },
        ]);
        assert.equal(r.status, 200, r.text);
      }
      await api.publish(thread, runId, token, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    }),
  );
  await until(() => subs.every(({ s }) => s.finished), { timeoutMs: 120000, stepMs: 100, what: "every subscriber to see its run end" });
  const rss = workerdRssMb();
  let lost = 0;
  let duplicated = 0;
  for (const { s } of subs) {
    lost += events - s.calls.size;
    duplicated += s.duplicated;
  }
  assert.equal(duplicated, 0, "no event delivered twice");
  subs.forEach(({ s }) => s.close());
  latencies.sort((a, b) => a - b);
  const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { threads, subscribers: subs.length, eventsPerThread: events, lost, duplicated, p50Ms: p(0.5), p99Ms: p(0.99), workerdRssMb: rss };
}

/**
 * A subscriber that keeps only what the load figures need: which tool calls
 * arrived, and each one's delay from its server-stamped `ts` (same clock).
 */
function lightSubscriber(url, latencies) {
  const ac = new AbortController();
  const sub = { calls: new Set(), duplicated: 0, finished: false, close: () => ac.abort() };
  sub.ready = fetch(url, { signal: ac.signal }).then(async (resp) => {
    assert.equal(resp.status, 200);
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let tail = "";
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const at = Date.now();
          const text = tail + dec.decode(value, { stream: true });
          const cut = text.lastIndexOf("\n\n");
          const whole = cut < 0 ? "" : text.slice(0, cut);
          tail = cut < 0 ? text : text.slice(cut + 2);
          for (const m of whole.matchAll(/"ts":(\d+),"payload":\{"toolCallId":"(L\d+)"/g)) {
            if (!sub.calls.has(m[2])) latencies.push(at - Number(m[1]));
            else sub.duplicated++;
            sub.calls.add(m[2]);
          }
          if (whole.includes('"type":"run-finish"')) sub.finished = true;
        }
      } catch {}
    })();
  });
  return sub;
}

/** Resident memory of the workerd processes on this machine, in MB. */
export function workerdRssMb() {
  try {
    const out = execFileSync("ps", ["-C", "workerd", "-o", "rss="], { encoding: "utf8" });
    return Math.round(out.split("\n").filter(Boolean).reduce((a, b) => a + Number(b), 0) / 1024);
  } catch {
    return undefined;
  }
}
