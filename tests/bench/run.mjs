// `make bench`: figures on this machine, with the Worker served by Miniflare
// directly (no wrangler proxy), today's build beside the release it replaces.
// `BENCH_ONLY=latency,reconnect make bench` runs some of them.
//
//   1. publish-to-delivery latency p50/p99 with 1, 10 and 100 subscribers,
//      and workerd's CPU time per publish; beside the two builds, the
//      runtime's floor (tests/bench/floor/: the same path in a minimal
//      JavaScript Worker, no checks), so the figures say how much is ours;
//      and three peers: floor-held (tests/bench/floor-held/: the least an
//      object-held stream costs, the object writing to every subscriber's
//      open response), floor-held-rs (tests/bench/floor-held-rs/: the same
//      in Rust on the worker crate, built here with worker-build: what the
//      toolchain adds) and agents (tests/bench/agents-peer/: the path on
//      Cloudflare's Agents SDK as its docs write it, bundled with esbuild
//      here; its subscribers are the SDK's WebSockets). All six are
//      sampled in turns, a block of publishes each, so load on this shared
//      machine falls on every one alike
//   2. durable appends per second on one thread, with 0 and 10 subscribers,
//      beside the same three peers
//   3. SQLite rows written per 1,000 text-deltas
//   4. reconnect after 100 missed events on a 1k and a 100k-event thread:
//      time to the first replayed event and to the 100th
//   5. the same through the Durable Streams route (GET /v1/threads/:id with
//      the offset the client held): first byte of the SSE data frame, and the
//      whole catch-up answer
//   6. cost: how long the thread's object is awake (billed) per published
//      event and per idle hour with 1, 100 and 1,000 open subscribers, and
//      what that costs a month at Cloudflare's published prices
//   8. MCP (today's build): the time from a send to its run's first model
//      call with two MCP servers configured (their tool lists cached) and
//      with none, side by side
//   9. JSON Schema (in Node, the engine the Worker runs): a typical tool
//      call's arguments checked as the previous engine did (@cfworker's
//      Validator alone, the platform's RegExp) and as today's does (its
//      declaration checks done once, patterns on RE2, the work counted), and
//      a backtracking pattern under both
//  10. branches (today's build; the release has none): a thread of 1,000
//      messages on its active path with 100 edits branching off it, beside
//      a linear thread of the same length: the history's newest and oldest
//      pages (n8n's and the AI SDK's) and a reconnect 100 events behind
//  11. the inbox (today's build; the release has none): a thread's state
//      change (a confirmation requested, a run's end, published by its
//      agent) to the inbox subscriber's row, p50/p99; and what an open
//      inbox tab costs idle: the directory's wakes and held requests over
//      40 s with 1 and 100 open inbox streams
//   7. files (today's build; the release has none): upload throughput of a
//      10 MB file, a send carrying a 5 MB image as a data: URL (as useChat
//      sends one) against a text-only send, time to the run's start; and
//      workerd's resident memory across the uploads, to show it bounded
//
// Prints a table and writes the figures as JSON to test-artifacts/bench.json.
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { execFileSync, spawnSync } from "node:child_process";
import { builtinModules } from "node:module";
import { startWorker, startWebhook, client, newThread, sleep, tempDir } from "../support/harness.mjs";
// workerd's CPU from the scheduler's nanosecond run times: a turn's block
// is tens of milliseconds of CPU, finer than /proc/…/stat's 10 ms ticks.
import { workerdCpuMs } from "../../local/workload.mjs";

// No socket cap: the cost figure holds 1,000 streams open at once.
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

function pct(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const ms = (x) => `${x.toFixed(2)} ms`;

/** A lightweight subscriber: records when each marked event arrives. */
function subscribe(base, thread, { lastEventId, onMark }) {
  return new Promise((resolve, reject) => {
    const headers = {};
    const q = lastEventId === undefined ? "" : `?lastEventId=${lastEventId}`;
    const req = http.get(`${base}/instance-ai/events/${thread}${q}`, { agent, headers }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`SSE ${res.statusCode}`));
      res.setEncoding("utf8");
      let tail = "";
      res.on("data", (chunk) => {
        const now = performance.now();
        const text = tail + chunk;
        const re = /"toolCallId":"m(\d+)"/g;
        let m;
        let lastEnd = 0;
        while ((m = re.exec(text))) {
          onMark(Number(m[1]), now);
          lastEnd = re.lastIndex;
        }
        tail = text.slice(Math.max(lastEnd, text.length - 40));
      });
      resolve({ close: () => req.destroy() });
    });
    req.on("error", () => {});
  });
}

/** The same over the Agents SDK's WebSocket (the agents peer): the route
 * its client connects to, /agents/<binding in kebab case>/<name>; each
 * message is one event. */
function subscribeAgent(base, thread, { onMark }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, "ws")}/agents/thread/${thread}`);
    ws.addEventListener("message", (e) => {
      const now = performance.now();
      const re = /"toolCallId":"m(\d+)"/g;
      let m;
      while ((m = re.exec(e.data))) onMark(Number(m[1]), now);
    });
    ws.addEventListener("open", () => resolve({ close: () => ws.close() }), { once: true });
    ws.addEventListener("error", () => reject(new Error("WebSocket failed")), { once: true });
  });
}

function toolCall(i, pad = 0) {
  return {
    type: "tool-call",
    agentId: "orchestrator",
    payload: { toolCallId: `m${i}`, toolName: "bench", args: pad ? { pad: "x".repeat(pad) } : {} },
  };
}

async function post(base, pathname, body, token) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      `${base}${pathname}`,
      { method: "POST", agent, headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "content-length": Buffer.byteLength(data) } },
      (res) => {
        let out = "";
        res.on("data", (d) => (out += d));
        res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(out)) : reject(new Error(`${res.statusCode} ${out}`))));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

async function newRun(api, hook, thread) {
  const r = await api.chat(thread, "bench");
  const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
  const publish = (events) => post(api.base, `/instance-ai/threads/${thread}/runs/${r.json.runId}/events`, events, sig.publishToken);
  return { runId: r.json.runId, publish };
}


/** Where `b` publishes on `thread`: threadline's route into an open run,
 * or a peer's (the floors, the agents peer: no runs, no auth) directly. */
async function openRun(b, thread) {
  if (!b.peer) return newRun(b.api, hook, thread);
  return { publish: (events) => post(b.api.base, `/instance-ai/threads/${thread}/runs/${b.name}/events`, events, b.name) };
}

/** Publish→delivery with `subscribers` on one thread of `b`: threadline's
 * publish route into an open run, or a peer's (the minimal JavaScript
 * Workers, the Agents SDK's; `b.subscribe` when its subscribers are not
 * SSE). Opened, then sampled a block at a time (`sample(n)`), then read. */
async function openLatency(b, subscribers) {
  const thread = newThread("lat");
  const run = await openRun(b, thread);
  const api = b.api;
  const sub = b.subscribe ?? subscribe;
  const sent = new Map();
  const lat = [];
  const acks = [];
  const subs = [];
  let cpuMs = 0;
  let next = 0;
  let unmarked = 0;
  for (let s = 0; s < subscribers; s++) {
    subs.push(await sub(api.base, thread, { onMark: (i, t) => sent.has(i) && lat.push(t - sent.get(i)) }));
  }
  await sleep(300);
  return {
    /** `n` publishes, 2 ms apart; `warm`: not marked, nor counted. */
    async sample(n, warm = false) {
      if (warm) {
        for (let k = 0; k < n; k++) await run.publish([toolCall(-1 - unmarked++)]), await sleep(2);
        return;
      }
      const cpu0 = workerdCpuMs(b.worker.pid);
      for (let k = 0; k < n; k++, next++) {
        const t0 = performance.now();
        sent.set(next, t0);
        await run.publish([toolCall(next)]);
        acks.push(performance.now() - t0);
        await sleep(2);
      }
      // Everything workerd did for the samples (the publishes, the
      // deliveries and the Miniflare entry worker in front).
      await sleep(20);
      cpuMs += workerdCpuMs(b.worker.pid) - cpu0;
    },
    async read() {
      await sleep(480);
      subs.forEach((s) => s.close());
      lat.sort((x, y) => x - y);
      acks.sort((x, y) => x - y);
      return { subscribers, deliveries: lat.length, expected: next * subscribers, p50: pct(lat, 50), p99: pct(lat, 99), ackP50: pct(acks, 50), ackP99: pct(acks, 99), cpuPerPublishMs: cpuMs / next };
    },
  };
}

/** {@link openLatency} on every server in `servers` at once, `samples` each,
 * taken in turns of a block per server (the order rotating each turn), so a
 * burst of load on this shared machine falls on every server alike rather
 * than on whichever was being measured. A block is short enough that no
 * threadline run goes quiet (2 s) while the others take theirs, and the
 * first turns are warm-up: the figures are of a run in progress, its
 * streams held. */
async function latencies(servers, subscribers, samples = 1000) {
  // A turn takes about a second at 100 subscribers with blocks of 10.
  const block = subscribers >= 100 ? 10 : 25;
  const open = [];
  for (const b of servers) open.push(await openLatency(b, subscribers));
  // Warm-up turns, not marked: every run busy again, and a stream that moved
  // to a socket while the others were being opened moved back (locally
  // one object's claims go 20 ms apart: 2 s for 100 streams).
  for (let k = 0; k < 4; k++) for (const o of open) await o.sample(block, true);
  for (let k = 0; k * block < samples; k++) {
    for (let j = 0; j < open.length; j++) await open[(j + k) % open.length].sample(Math.min(block, samples - k * block));
  }
  const out = {};
  for (let j = 0; j < servers.length; j++) out[servers[j].name] = await open[j].read();
  return out;
}

/** Durable appends per second into one thread of `b` (a build or a peer,
 * as `latency` takes them) in batches of `batch`, and with `subscribers`
 * when every reader had them all. */
async function appendRate(b, subscribers, total = 60_000, batch = 1000) {
  const thread = newThread("rate");
  const run = await openRun(b, thread);
  const sub = b.subscribe ?? subscribe;
  let received = 0;
  const subs = [];
  for (let s = 0; s < subscribers; s++) {
    subs.push(await sub(b.api.base, thread, { onMark: () => received++ }));
  }
  await run.publish(Array.from({ length: batch }, (_, i) => toolCall(1e9 + i))); // warm-up
  const t0 = performance.now();
  for (let i = 0; i < total; i += batch) {
    await run.publish(Array.from({ length: batch }, (_, k) => toolCall(i + k)));
  }
  const appendMs = performance.now() - t0;
  // Readers must also have received everything.
  const deadline = Date.now() + 60_000;
  while (subscribers && received < (total + batch) * subscribers && Date.now() < deadline) await sleep(20);
  const deliveredMs = performance.now() - t0;
  subs.forEach((s) => s.close());
  return {
    subscribers,
    events: total,
    perSecond: Math.round(total / (appendMs / 1000)),
    allDeliveredPerSecond: subscribers ? Math.round(total / (deliveredMs / 1000)) : undefined,
    delivered: subscribers ? received / subscribers - batch : undefined,
  };
}

async function rowsPerThousandDeltas(api, hook) {
  const thread = newThread("rows");
  const run = await newRun(api, hook, thread);
  const before = (await api.stats(thread)).json.rowsWritten;
  for (let b = 0; b < 10; b++) {
    await run.publish(
      Array.from({ length: 100 }, (_, i) => ({ type: "text-delta", agentId: "orchestrator", responseId: "r1", payload: { text: `tok${b * 100 + i} ` } })),
    );
  }
  await run.publish([{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
  return (await api.stats(thread)).json.rowsWritten - before;
}

/** The outside benchmark's scenario: `size` events written into one open
 * run in batches of 5,000 through the publish route, then clients that
 * reconnect 100 events behind. */
async function reconnect(api, hook, size, trials = 15) {
  const thread = newThread("rc");
  const run = await newRun(api, hook, thread);
  for (let i = 1; i < size; i += 5000) {
    const n = Math.min(5000, size - i);
    await run.publish(Array.from({ length: n }, (_, k) => toolCall(i + k, 64)));
  }
  const last = (await api.stats(thread)).json.lastEventId;
  const firsts = [];
  const hundredths = [];
  for (let t = 0; t < trials; t++) {
    let count = 0;
    const t0 = performance.now();
    let first, hundredth;
    const done = new Promise((resolve) => {
      subscribe(api.base, thread, {
        lastEventId: last - 100,
        onMark: (_, now) => {
          count++;
          if (count === 1) first = now - t0;
          if (count === 100) {
            hundredth = now - t0;
            resolve();
          }
        },
      }).then((s) => done.then(() => s.close()));
    });
    await done;
    firsts.push(first);
    hundredths.push(hundredth);
  }
  firsts.sort((a, b) => a - b);
  hundredths.sort((a, b) => a - b);
  return { events: last, first: pct(firsts, 50), hundredth: pct(hundredths, 50) };
}


// Cloudflare's published prices (../shared/reference/CLOUDFLARE.md): an
// object is billed $12.50 per million GB-s at 128 MB while awake; incoming
// WebSocket messages count as requests at 20:1, $0.15 per million.
const GB_S_USD = 12.5 / 1e6;
const OBJECT_GB = 0.125;
const DO_REQUEST_USD = 0.15 / 1e6;
const HOUR_MS = 3_600_000;
const MONTH_H = 720;
/** The relay's keep-alive on each subscriber's socket (src/relay.rs). */
const SOCKET_PING_MS = 30_000;

/** Opens `n` subscribers on a new thread with an open run. */
async function idleThread(api, hook, n) {
  const thread = newThread("cost");
  const run = await newRun(api, hook, thread);
  await run.publish([toolCall(-1)]);
  const subs = [];
  for (let s = 0; s < n; s++) subs.push(await subscribe(api.base, thread, { onMark: () => {} }));
  await sleep(500);
  // Streams opened while the run published are held by the object until
  // its agent goes quiet, then moved to sockets (one claim each, once per
  // run's end): the idle window starts once they have all moved. A build
  // without held streams reports neither count.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { held, moving } = (await api.stats(thread)).json;
    if (!held && !moving) break;
    if (Date.now() > deadline) throw new Error(`the streams did not move: ${held} held, ${moving} moving`);
    await sleep(100);
  }
  return { thread, run, subs };
}

/** An event's awake time, bounded above by its publish round trip (the
 * object is billed while it handles the publish, fan-out included). */
async function publishAwake(api, hook, n, publishes = 60) {
  const { run, subs } = await idleThread(api, hook, n);
  const rtt = [];
  for (let i = 0; i < publishes; i++) {
    const t0 = performance.now();
    await run.publish([toolCall(i)]);
    rtt.push(performance.now() - t0);
    await sleep(20);
  }
  subs.forEach((s) => s.close());
  rtt.sort((a, b) => a - b);
  return pct(rtt, 50);
}

/** How long the object is awake over an idle window with `n` open
 * subscribers, per hour. An object is billed while it handles an event or
 * holds an open response; with only hibernatable sockets it is not (it may
 * stay in memory, unbilled, until evicted). Its stats say which: open
 * responses (release: one per subscriber) or, with DEBUG_WAKES, the events
 * every instance handled (a stored count that outlives eviction). */
async function idleAwake(api, hook, n, idleMs = 40_000) {
  const { thread, subs } = await idleThread(api, hook, n);
  const idle0 = (await api.stats(thread)).json;
  await sleep(idleMs);
  const idle1 = (await api.stats(thread)).json;
  subs.forEach((s) => s.close());
  if (idle1.instance === undefined) {
    // Each subscriber is an open response the object holds: awake throughout.
    return { idleMs, heldOpen: idle1.subscribers, wakes: 0, evicted: false, awakeMsPerHour: idle1.subscribers > 0 ? HOUR_MS : 0, sleeps: false };
  }
  // Events handled while idle, the closing stats read excluded.
  const wakes = idle1.instance.handledEver - idle0.instance.handledEver - 1;
  return { idleMs, heldOpen: idle0.instance.inflight, wakes, evicted: idle1.instance.id !== idle0.instance.id, sleeps: true };
}

/** A month of one thread with `n` open tabs, idle: its object's awake time,
 * and (sleeping design) the relays' socket keep-alives as billed requests. */
function monthlyIdleUsd(n, idle, perEventMs) {
  const awakeMsPerHour = idle.sleeps ? (idle.wakes * perEventMs * HOUR_MS) / idle.idleMs : idle.awakeMsPerHour;
  const durationUsd = (awakeMsPerHour / 1000) * MONTH_H * OBJECT_GB * GB_S_USD;
  const pingUsd = idle.sleeps ? ((n * (HOUR_MS / SOCKET_PING_MS) * MONTH_H) / 20) * DO_REQUEST_USD : 0;
  return { awakeMsPerHour, usd: durationUsd + pingUsd };
}

/** Time until the first chunk holding `marker` arrives on a GET. */
function firstChunk(url, marker) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let text = "";
    const req = http.get(url, { agent }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`GET ${res.statusCode}`));
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
        if (text.includes(marker)) {
          resolve(performance.now() - t0);
          req.destroy();
        }
      });
      res.on("end", () => resolve(performance.now() - t0));
    });
    req.on("error", () => {});
  });
}

/** Reconnect through /v1/threads/:id after missing 100 events: the client
 * holds the offset a read gave it before the last 100 were published. */
async function streamReconnect(api, hook, size, trials = 51) {
  const thread = newThread("ds");
  const run = await newRun(api, hook, thread);
  for (let i = 1; i < size - 100; i += 1000) {
    const n = Math.min(1000, size - 100 - i);
    await run.publish(Array.from({ length: n }, (_, k) => toolCall(i + k, 64)));
  }
  const held = (await fetch(`${api.base}/v1/threads/${thread}?offset=now`)).headers.get("stream-next-offset");
  await run.publish(Array.from({ length: 100 }, (_, k) => toolCall(size - 100 + k, 64)));
  const sse = [];
  const catchUp = [];
  for (let t = 0; t < trials; t++) {
    sse.push(await firstChunk(`${api.base}/v1/threads/${thread}?offset=${held}&live=sse`, "event: data"));
    catchUp.push(await firstChunk(`${api.base}/v1/threads/${thread}?offset=${held}`, "\u0000never"));
  }
  sse.sort((a, b) => a - b);
  catchUp.sort((a, b) => a - b);
  const events = (await api.stats(thread)).json.lastEventId;
  return { events, sseFirstByte: pct(sse, 50), catchUp100: pct(catchUp, 50) };
}

/** The AI SDK's reconnect after a reload (`GET /api/chat/:id/stream`, the
 * open run from its start): time to the first data byte. */
async function uiReconnect(api, hook, size, trials = 15) {
  const thread = newThread("ui");
  const run = await newRun(api, hook, thread);
  for (let i = 1; i < size; i += 5000) {
    const n = Math.min(5000, size - i);
    await run.publish(Array.from({ length: n }, (_, k) => toolCall(i + k, 64)));
  }
  const firsts = [];
  for (let t = 0; t < trials; t++) {
    firsts.push(await firstChunk(`${api.base}/api/chat/${thread}/stream`, "data: "));
    // The reconnect replays the whole run: let the stream just left notice
    // its client is gone before the next, so trials do not overlap.
    await new Promise((r) => setTimeout(r, 500));
  }
  firsts.sort((a, b) => a - b);
  const events = (await api.stats(thread)).json.lastEventId;
  return { events, firstByte: pct(firsts, 50) };
}

// Every figure is measured on this build and on a baseline, alternately in
// the same run (figures from different runs of a shared machine do not
// compare): the release in local/RELEASE, or BENCH_BASELINE=<commit> (e.g.
// `BENCH_BASELINE=main make bench` to hold a change against main), built
// once by local/baseline.sh.
/** workerd's pid: the child of the harness's serving process. */
function workerdPid(servePid) {
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const pgrp = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
      if (comm === "workerd" && pgrp === servePid) return Number(d);
    } catch {}
  }
  return undefined;
}
/** A process's resident memory now and at its peak, in MB. */
function memoryMb(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field) => Number(status.match(new RegExp(`${field}:\\s+(\\d+) kB`))[1]);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/** A PNG signature and `size` random bytes: accepted as image/png. */
function pngOf(size) {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i += 65536) b.set(crypto.randomBytes(Math.min(65536, size - i)), i);
  Buffer.from("89504e470d0a1a0a", "hex").copy(b);
  return b;
}

/** Time from a send's request to the run's `start` on its stream. */
async function timeToStart(base, body) {
  const t0 = performance.now();
  const res = await fetch(`${base}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body });
  if (res.status !== 200) throw new Error(`send ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  let text = "";
  const dec = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (text.includes('"type":"start"')) break;
  }
  const took = performance.now() - t0;
  await reader.cancel();
  return took;
}

async function filesBench(hook, trials = 10) {
  // State on disk: Miniflare keeps an in-memory bucket's bytes in workerd's
  // process, which would count the stored files as the isolate's memory.
  const w = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url }, persist: tempDir("threadline-bench-files-") });
  try {
    const pid = workerdPid(w.pid);
    const before = memoryMb(pid);
    const upload = [];
    const rss = [];
    for (let i = 0; i < trials; i++) {
      const bytes = pngOf(10 * 1024 * 1024);
      const t0 = performance.now();
      const r = await fetch(`${w.url}/v1/threads/${newThread("bench-up")}/files?name=big.png`, { method: "POST", headers: { "content-type": "image/png" }, body: bytes });
      if (r.status !== 201) throw new Error(`upload ${r.status}: ${await r.text()}`);
      await r.arrayBuffer();
      upload.push((bytes.length / 1e6) / ((performance.now() - t0) / 1000));
      rss.push(memoryMb(pid).rss);
    }
    const send = (parts) => JSON.stringify({ id: newThread("bench-send"), messages: [{ id: "m1", role: "user", parts }], trigger: "submit-message" });
    const text = [];
    const image = [];
    for (let i = 0; i < trials; i++) {
      text.push(await timeToStart(w.url, send([{ type: "text", text: "hello" }])));
      const url = `data:image/png;base64,${pngOf(5 * 1024 * 1024).toString("base64")}`;
      image.push(await timeToStart(w.url, send([{ type: "text", text: "look" }, { type: "file", mediaType: "image/png", filename: "a.png", url }])));
      rss.push(memoryMb(pid).rss);
    }
    // Memory: 40 more 10 MB uploads; workerd's resident memory every 10
    // transfers (it holds Miniflare's bucket simulator too, so it is an
    // upper bound on the Worker's isolate). Bounded: it levels off while the
    // bytes sent grow by 100 MB each 10.
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${w.url}/v1/threads/${newThread("bench-mem")}/files?name=m.png`, { method: "POST", headers: { "content-type": "image/png" }, body: pngOf(10 * 1024 * 1024) });
      await r.arrayBuffer();
      rss.push(memoryMb(pid).rss);
    }
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const after = memoryMb(pid);
    return {
      uploadMBps: median(upload),
      textStartMs: median(text),
      imageStartMs: median(image),
      rssBeforeMb: before.rss,
      rssEvery10Mb: rss.filter((_, i) => i % 10 === 9),
      peakMb: after.peak,
      transfers: rss.length,
    };
  } finally {
    await w.stop();
  }
}

/** Send → the run's first model call, with and without two MCP servers. */
async function mcpBench(trials = 30) {
  const { startFakeLlm } = await import("../../local/fake-llm.mjs");
  const { startDemoMcp } = await import("../../local/demo-mcp.mjs");
  const llm = await startFakeLlm({ port: 0, delayMs: 0 });
  const arrivals = [];
  const push = llm.requests.push.bind(llm.requests);
  llm.requests.push = (r) => (arrivals.push(performance.now()), push(r));
  const servers = [await startDemoMcp({ json: false }), await startDemoMcp({ json: true })];
  const base = { LLM_BASE_URL: llm.url, LLM_API_KEY: "k" };
  const mcp = JSON.stringify(servers.map((m, i) => ({ name: `notes${i}`, url: m.url })));
  const workers = { none: await startWorker({ vars: base }), two: await startWorker({ vars: { ...base, MCP_SERVERS: mcp } }) };
  const out = { none: [], two: [] };
  try {
    for (let i = 0; i < trials + 2; i++) {
      for (const name of ["none", "two"]) {
        const thread = newThread(`bench-mcp-${name}`);
        const seen = arrivals.length;
        const t0 = performance.now();
        const r = await fetch(`${workers[name].url}/instance-ai/chat/${thread}`, { method: "POST", body: JSON.stringify({ message: "hi" }) });
        await r.text();
        while (arrivals.length === seen) await sleep(1);
        // The first two runs of each warm the isolate and fill the cache.
        if (i >= 2) out[name].push(arrivals[seen] - t0);
      }
    }
  } finally {
    for (const w of Object.values(workers)) await w.stop();
    for (const m of servers) await m.close();
    await llm.close();
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return { trials, noneMs: median(out.none), twoMs: median(out.two) };
}

/**
 * The context budget's token estimate (three bytes a token: agent/charge.rs
 * `text_tokens`) against real tokenizers (OpenAI's o200k_base and
 * cl100k_base, from gpt-tokenizer) on real text cut into 4 KB messages:
 * this project's docs (English prose), the protocols' own notes, the
 * protocols' transcripts (the golden SSE and JSON of every route), and
 * Rust source. Over 1 is the estimate erring high (safe).
 */
async function tokensBench() {
  const o200k = await import("gpt-tokenizer/encoding/o200k_base");
  const cl100k = await import("gpt-tokenizer/encoding/cl100k_base");
  const read = (dir, ext) =>
    fs.existsSync(dir)
      ? fs.readdirSync(dir, { recursive: true }).filter((f) => f.endsWith(ext)).map((f) => fs.readFileSync(path.join(dir, f), "utf8"))
      : [];
  const corpora = {
    "docs (English prose)": read("docs", ".md"),
    "protocol notes (technical prose)": read("../shared/seeds", ".txt"),
    "transcripts (SSE and JSON)": read("tests/golden", ".txt"),
    "Rust source": read("durable/src", ".rs"),
  };
  const out = {};
  for (const [name, texts] of Object.entries(corpora)) {
    if (!texts.length) continue;
    const pieces = texts.flatMap((t) => t.match(/[\s\S]{1,4096}/g) ?? []);
    let bytes = 0, est = 0, a = 0, b = 0, worst = Infinity;
    for (const p of pieces) {
      const n = Buffer.byteLength(p);
      const e = Math.ceil(n / 3);
      const t = o200k.countTokens(p);
      bytes += n;
      est += e;
      a += t;
      b += cl100k.countTokens(p);
      worst = Math.min(worst, e / t);
    }
    out[name] = { pieces: pieces.length, bytes, estimate: est, o200k: a, cl100k: b, o200kRatio: est / a, cl100kRatio: est / b, worstPieceRatio: worst };
  }
  return out;
}

/**
 * A thread of `turns` turns with a tool call each, on the built-in agent and
 * the fake model (a 32,768-token window: `AGENT_CONTEXT_WINDOW`'s default):
 * at each mark, what SQLite holds (rows by table, the database's bytes), the
 * time to open the history's newest page and to reconnect 100 events behind,
 * and the size of the model's requests (the largest and the mean over the
 * last 100 turns, in the fake's tokens: four bytes a token).
 */
async function contextBench(turns = Number(process.env.BENCH_CONTEXT_TURNS ?? 5_000), trials = 7) {
  const { startFakeLlm } = await import("../../local/fake-llm.mjs");
  const { startDemoTools } = await import("../../local/demo-tools.mjs");
  const llm = await startFakeLlm({ port: 0, delayMs: 0 });
  const tools = await startDemoTools();
  const worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations), DEBUG_ROUTES: "1" },
  });
  const base = worker.url;
  const api = client(base);
  const thread = newThread("bench-context");
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const marks = new Set([100, 500, 1_000, 2_000, 3_000, 4_000, 5_000, turns].filter((m) => m <= turns));
  const tokens = (b) => Math.ceil((JSON.stringify(b.messages).length + JSON.stringify(b.tools ?? null).length) / 4);
  const isSummary = (b) => String(b.messages[0]?.content ?? "").startsWith("You compact a conversation");
  const curve = [];
  let window = [];
  const t0 = performance.now();
  try {
    for (let i = 1; i <= turns; i++) {
      const seen = llm.requests.length;
      const r = await api.chat(thread, `turn ${i}: what is the weather? [[tool:weather:{"city":"City ${i}"}]]`);
      if (r.status !== 200) throw new Error(`turn ${i}: ${r.status} ${r.text}`);
      while ((await api.status(thread)).json.hasActiveRun) await sleep(2);
      window.push(...llm.requests.slice(seen).filter((b) => !isSummary(b)).map(tokens));
      // The fake keeps every request; the bench only needs the newest.
      llm.requests.length = 0;
      window = window.slice(-200);
      if (!marks.has(i)) continue;
      const stats = (await api.stats(thread)).json;
      const pages = [];
      for (let t = 0; t < trials; t++) {
        const s = performance.now();
        await (await fetch(`${base}/instance-ai/threads/${thread}/messages?limit=50`)).arrayBuffer();
        pages.push(performance.now() - s);
      }
      const reconnects = [];
      for (let t = 0; t < trials; t++) reconnects.push(await catchUpMs(base, thread, stats.lastEventId - 100, stats.lastEventId));
      const usage = (await api.call("GET", `/instance-ai/threads/${thread}/usage`)).json;
      curve.push({
        turns: i,
        events: stats.lastEventId,
        rows: stats.rows,
        databaseBytes: stats.instance.databaseBytes,
        historyMs: median(pages),
        reconnectMs: median(reconnects),
        largestRequest: Math.max(...window),
        meanRequest: Math.round(window.reduce((a, b) => a + b, 0) / window.length),
        tokensPerTurn: Math.round(usage.total.totalTokens / i),
        elapsedS: Math.round((performance.now() - t0) / 1000),
      });
      const c = curve.at(-1);
      console.log(
        `  ${String(i).padStart(5)} turns: ${c.events.toLocaleString("en")} events, rows ${JSON.stringify(c.rows)}, SQLite ${(c.databaseBytes / 1e6).toFixed(1)} MB; history ${ms(c.historyMs)}, reconnect ${ms(c.reconnectMs)}; model request largest ${c.largestRequest.toLocaleString("en")} tokens, mean ${c.meanRequest.toLocaleString("en")}; ${c.tokensPerTurn.toLocaleString("en")} tokens/turn (${c.elapsedS} s)`,
      );
    }
  } finally {
    await worker.stop();
    await tools.close();
    await llm.close();
  }
  return curve;
}

/** One answered turn through the webhook agent: the send's body, then its run's text and finish. */
async function answeredTurn(api, hook, thread, body) {
  const r = await api.call("POST", `/instance-ai/chat/${thread}`, body);
  if (r.status !== 200) throw new Error(`send ${r.status}: ${r.text}`);
  const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
  const events = [
    { type: "text-delta", agentId: "orchestrator", payload: { text: `an answer of some length to ${body.message ?? "it"}, `.repeat(4) } },
    { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
  ];
  await post(api.base, `/instance-ai/threads/${thread}/runs/${r.json.runId}/events`, events, sig.publishToken);
  return r.json.runId;
}

/**
 * Milliseconds for the events route, read from `lastEventId`, until
 * `enough(ids)` holds for the ids of the complete frames read so far.
 */
async function eventsRouteMs(base, thread, lastEventId, enough) {
  const t0 = performance.now();
  const ac = new AbortController();
  const res = await fetch(`${base}/instance-ai/events/${thread}?lastEventId=${lastEventId}`, { signal: ac.signal });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  const ids = [];
  let text = "";
  while (!enough(ids)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    const frames = text.split("\n\n");
    text = frames.pop();
    for (const f of frames) {
      const id = f.match(/^id: (\d+)$/m);
      if (id) ids.push(Number(id[1]));
    }
  }
  const took = performance.now() - t0;
  ac.abort();
  return took;
}

/**
 * Milliseconds for the events route to bring a client from `lastEventId` to
 * `last` (the route carries n8n's kinds only, so frames are not counted: the
 * last id is waited for).
 */
const catchUpMs = (base, thread, lastEventId, last) => eventsRouteMs(base, thread, lastEventId, (ids) => ids.some((id) => id >= last));

/** Milliseconds for `n` durable frames of the events route after `lastEventId`. */
const replayMs = (base, thread, lastEventId, n) => eventsRouteMs(base, thread, lastEventId, (ids) => ids.length >= n);

/** History and reconnect on a branched thread against a linear one. */
async function branchBench(api, hook, turns = 500, edits = 100, trials = 15) {
  const build = async (branched) => {
    const thread = newThread(branched ? "tree" : "line");
    let runs = 0;
    for (let i = 0, made = 0; made < turns; i++) {
      // Every fifth turn is edited once: a second version beside it.
      if (branched && made % Math.floor(turns / edits) === 1 && i % 2 === 1) {
        const view = await fetch(`${api.base}/instance-ai/threads/${thread}/messages?limit=1`).then((r) => r.json());
        const user = view.messages.find((m) => m.role === "user");
        await answeredTurn(api, hook, thread, { message: `turn ${made}, edited`, editOf: user.id });
        runs++;
        continue;
      }
      await answeredTurn(api, hook, thread, { message: `turn ${made}` });
      made++;
      runs++;
    }
    const view = await fetch(`${api.base}/instance-ai/threads/${thread}/messages?limit=1`).then((r) => r.json());
    return { thread, last: view.nextEventId - 1, runs, pathRuns: view.totalRuns };
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const timed = async (url) => {
    const out = [];
    for (let t = 0; t < trials; t++) {
      const t0 = performance.now();
      const r = await fetch(url);
      await r.arrayBuffer();
      out.push(performance.now() - t0);
    }
    return median(out);
  };
  const out = {};
  for (const [name, branched] of [["linear", false], ["branched", true]]) {
    const t0 = performance.now();
    const { thread, last, runs, pathRuns } = await build(branched);
    const buildMs = performance.now() - t0;
    const pages = Math.ceil(turns / 200);
    const reconnects = [];
    for (let t = 0; t < trials; t++) reconnects.push(await replayMs(api.base, thread, last - 100, 100));
    out[name] = {
      runs,
      pathRuns,
      buildMs,
      newestPageMs: await timed(`${api.base}/instance-ai/threads/${thread}/messages?limit=50`),
      oldestPageMs: await timed(`${api.base}/instance-ai/threads/${thread}/messages?limit=200&page=${pages - 1}`),
      aiSdkMs: await timed(`${api.base}/api/chat/${thread}/messages`),
      reconnectMs: median(reconnects),
    };
    if (!branched) {
      // A fork of the whole linear thread (at its last answer) against
      // copying it: writing its 1,000 messages again, as building it took.
      const view = await fetch(`${api.base}/instance-ai/threads/${thread}/messages?limit=1`).then((r) => r.json());
      const lastRun = view.messages.find((m) => m.role === "assistant").runId;
      const forks = [];
      let fork;
      for (let t = 0; t < trials; t++) {
        const t0 = performance.now();
        const r = await api.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: lastRun });
        forks.push(performance.now() - t0);
        if (r.status !== 201) throw new Error(`fork ${r.status}: ${r.text}`);
        fork = r.json.threadId;
      }
      out.fork = {
        createMs: median(forks),
        copyMs: buildMs,
        newestPageMs: await timed(`${api.base}/instance-ai/threads/${fork}/messages?limit=50`),
        sourceNewestPageMs: out.linear.newestPageMs,
      };
    }
  }
  return out;
}

/** An inbox subscriber (SSE): calls `onRow(row, at)` for each change. */
function inboxStream(base, onRow) {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/v1/inbox`, { agent, headers: { accept: "text/event-stream", "last-event-id": "0" } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`inbox SSE ${res.statusCode}`));
      res.setEncoding("utf8");
      let buf = "";
      res.on("data", (chunk) => {
        const now = performance.now();
        buf += chunk;
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const frame = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = frame.split("\n").find((l) => l.startsWith("data: "));
          if (data) onRow(JSON.parse(data.slice(6)), now);
        }
      });
      resolve({ close: () => req.destroy() });
    });
    req.on("error", () => {});
  });
}

/** A thread's state change → the inbox subscriber's row: an agent
 * publishes a confirmation request (waiting), then its run's end (idle). */
async function inboxLatency(api, hook, trials = 50) {
  let waitFor;
  const sub = await inboxStream(api.base, (row, at) => waitFor?.(row, at));
  const seen = (pred) => new Promise((resolve) => (waitFor = (row, at) => pred(row) && resolve(at)));
  const samples = [];
  try {
    for (let i = 0; i < trials; i++) {
      const thread = newThread("inbox");
      const running = seen((r) => r.threadId === thread && r.state === "running");
      const run = await newRun(api, hook, thread);
      await running;
      const ask = { type: "confirmation-request", agentId: "orchestrator", payload: { requestId: `r${i}`, toolCallId: `c${i}`, toolName: "deploy", args: {}, severity: "warning", message: "ok?" } };
      let arrived = seen((r) => r.threadId === thread && r.state === "waiting");
      let t0 = performance.now();
      await run.publish([{ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `c${i}`, toolName: "deploy", args: {} } }, ask]);
      samples.push((await arrived) - t0);
      arrived = seen((r) => r.threadId === thread && r.state === "idle" && r.lastRun);
      t0 = performance.now();
      await run.publish([{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
      samples.push((await arrived) - t0);
    }
  } finally {
    sub.close();
  }
  samples.sort((a, b) => a - b);
  return { p50: pct(samples, 50), p99: pct(samples, 99), samples: samples.length };
}

/** What `n` open inbox tabs cost idle: the directory's events handled and
 * requests held over `idleMs` (DEBUG_WAKES counts them across evictions). */
async function inboxIdle(api, hook, n, idleMs = 40_000) {
  const thread = newThread("inboxidle");
  const run = await newRun(api, hook, thread);
  await run.publish([{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
  const subs = [];
  for (let i = 0; i < n; i++) subs.push(await inboxStream(api.base, () => {}));
  await sleep(500);
  const stats = async () => (await api.call("GET", "/debug/inbox/stats")).json;
  const before = await stats();
  await sleep(idleMs);
  const after = await stats();
  subs.forEach((s) => s.close());
  return {
    subscribers: n,
    readers: before.readers,
    idleMs,
    heldOpen: before.instance.inflight,
    wakes: after.instance.handledEver - before.instance.handledEver - 1,
    evicted: after.instance.id !== before.instance.id,
  };
}

const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(",")) : null;
const want = (name) => !only || only.has(name);
const baselineCommit = process.env.BENCH_BASELINE ? [process.env.BENCH_BASELINE] : [];
const release = execFileSync("sh", ["local/baseline.sh", ...baselineCommit], { encoding: "utf8" }).trim();
const hook = await startWebhook();
const vars = { AGENT_WEBHOOK_URL: hook.url, MAX_BATCH_EVENTS: "5000", MAX_BATCH_BYTES: "8388608" };
const builds = [
  { name: "release", worker: await startWorker({ vars, script: release }) },
  { name: "current", worker: await startWorker({ vars }) },
];
for (const b of builds) b.api = { ...client(b.worker.url), base: b.worker.url };
const results = { machine: `${(await import("node:os")).cpus().length} cores`, at: new Date().toISOString(), release: path.basename(path.dirname(release)) };
const ratio = (cur, rel) => `${(cur / rel).toFixed(2)}×`;
/** Runs `fn` on the release, then on today's build; returns both. */
/** Microseconds per call of `f`: the median of 7 batches of `n`. */
function perCallUs(f, n) {
  for (let i = 0; i < n; i++) f();
  const batches = [];
  for (let b = 0; b < 7; b++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) f();
    batches.push(((performance.now() - t0) * 1000) / n);
  }
  return batches.sort((a, b) => a - b)[3];
}

/** Checking a typical tool call's arguments, before and after. */
async function schemaBench() {
  const { Validator } = await import("@cfworker/json-schema");
  const engine = await import("../../src/json_schema.js");
  const meta = (f) => fs.readFileSync(path.join("src/metaschemas", f), "utf8");
  const docs = ["draft2020-12/schema.json", ...["applicator", "content", "core", "format-annotation", "meta-data", "unevaluated", "validation"].map((v) => `draft2020-12/meta/${v}.json`)];
  engine.install("[" + docs.map(meta).join(",") + "]");
  const schema = {
    type: "object",
    properties: {
      city: { type: "string", minLength: 1, maxLength: 80, pattern: "^[\\p{L} .'-]+$" },
      days: { type: "integer", minimum: 1, maximum: 14 },
      units: { enum: ["metric", "imperial"] },
      at: { type: "string", format: "date-time" },
      stops: { type: "array", maxItems: 10, items: { type: "object", properties: { name: { type: "string" }, lat: { type: "number" }, lon: { type: "number" } }, required: ["name"] } },
    },
    required: ["city"],
    additionalProperties: false,
  };
  const args = JSON.stringify({ city: "São Paulo", days: 3, units: "metric", at: "2026-12-04T10:00:00Z", stops: [{ name: "Sé", lat: -23.55, lon: -46.63 }, { name: "Luz", lat: -23.53, lon: -46.63 }] });
  // The previous engine: compile once, validate with the platform's RegExp.
  const before = new Validator(JSON.parse(JSON.stringify(schema)), "2020-12", false);
  const beforeCheck = (text) => JSON.stringify(before.validate(JSON.parse(text)).valid ? [] : ["x"]);
  const after = engine.compile(JSON.stringify(schema));
  const afterCheck = (text) => engine.check(after, text, 5);
  if (beforeCheck(args) !== "[]" || afterCheck(args) !== "[]") throw new Error("the bench's arguments must be valid");
  const typical = { beforeUs: perCallUs(() => beforeCheck(args), 5_000), afterUs: perCallUs(() => afterCheck(args), 5_000) };
  const evil = { type: "object", properties: { s: { type: "string", pattern: "^(a|a)*$" } } };
  const evilArgs = JSON.stringify({ s: "a".repeat(22) + "!" });
  const evilBefore = new Validator(evil, "2020-12", false);
  const evilAfter = engine.compile(JSON.stringify(evil));
  const backtracking = {
    aCount: 22,
    beforeMs: perCallUs(() => evilBefore.validate(JSON.parse(evilArgs)), 1) / 1000,
    afterMs: perCallUs(() => engine.check(evilAfter, evilArgs, 5), 100) / 1000,
  };
  return { typical, backtracking };
}

/** The Agents SDK peer, bundled: tests/bench/agents-peer/src.js and the
 * SDK (ESM with dependencies) into one module in its dist/ (git ignores
 * it; under the checkout, where Miniflare takes a script's modules from).
 * Node's built-ins stay imports: workerd has them with nodejs_compat. */
let agentsPeerDir;
async function buildAgentsPeer() {
  if (agentsPeerDir) return agentsPeerDir;
  const esbuild = await import("esbuild");
  const dir = path.resolve("tests/bench/agents-peer/dist");
  await esbuild.build({
    entryPoints: [path.resolve("tests/bench/agents-peer/src.js")],
    outfile: path.join(dir, "index.js"),
    bundle: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*", "node:*", ...builtinModules],
    logLevel: "error",
  });
  return (agentsPeerDir = dir);
}

/** The Rust floor (tests/bench/floor-held-rs/, a member of the workspace)
 * built with worker-build into its build/ as the Worker is
 * (local/worker-build.sh; its dependencies are the Worker's, compiled
 * already: seconds);
 * skipped when build/ is newer than its sources. */
function buildRustFloor() {
  const dir = path.resolve("tests/bench/floor-held-rs");
  const out = path.join(dir, "build/index.js");
  const sources = ["src/lib.rs", "Cargo.toml", "../../../Cargo.lock"].map((f) => fs.statSync(path.join(dir, f)).mtimeMs);
  if (fs.existsSync(out) && fs.statSync(out).mtimeMs > Math.max(...sources)) return path.dirname(out);
  const built = spawnSync("sh", ["local/worker-build.sh", dir], { encoding: "utf8" });
  if (built.status !== 0) throw new Error(`tests/bench/floor-held-rs: worker-build failed\n${built.stdout}${built.stderr}`);
  return path.dirname(out);
}

/** The peers of the latency and appends figures, each a worker of its own:
 * floor-held (an object-held stream's floor), floor-held-rs (the same in
 * Rust on the worker crate: what the toolchain adds) and agents (the Agents
 * SDK's, which needs nodejs_compat; its subscribers are WebSockets). All
 * started, or none. */
async function startPeers() {
  const agentsScript = await buildAgentsPeer();
  const rustScript = buildRustFloor();
  const peers = [];
  try {
    peers.push({ name: "floor-held", peer: true, worker: await startWorker({ vars, script: path.resolve("tests/bench/floor-held") }) });
    peers.push({ name: "floor-held-rs", peer: true, worker: await startWorker({ vars, script: rustScript }) });
    const worker = await startWorker({ vars, script: agentsScript, compatibilityFlags: ["nodejs_compat"] });
    peers.push({ name: "agents", peer: true, subscribe: subscribeAgent, worker });
  } catch (e) {
    for (const p of peers) await p.worker.stop();
    throw e;
  }
  for (const p of peers) p.api = { base: p.worker.url };
  return peers;
}

async function both(fn) {
  const out = {};
  for (const b of builds) out[b.name] = await fn(b.api);
  return out;
}
try {
  console.log(`threadline bench (Miniflare, one workerd per build, loopback): release ${results.release.slice(0, 7)} vs current\n`);
  if (want("latency")) {
    // Beside both builds, the runtime's floor: a minimal JavaScript Worker
    // and object doing only what the path must (tests/bench/floor/); then
    // the peers: an object-held stream's floor, and the Agents SDK's path.
    const floor = { name: "floor", peer: true, worker: await startWorker({ vars, script: path.resolve("tests/bench/floor") }) };
    floor.api = { base: floor.worker.url };
    let peers = [];
    results.latency = [];
    try {
      peers = await startPeers();
      for (const n of [1, 10, 100]) {
        const r = await latencies([...builds, floor, ...peers], n);
        results.latency.push({ subscribers: n, ...r });
        const line = (x) =>
          `p50 ${ms(x.p50)} p99 ${ms(x.p99)} (${x.deliveries}/${x.expected}; publish answered p50 ${ms(x.ackP50)}; workerd CPU ${ms(x.cpuPerPublishMs)}/publish)`;
        console.log(
          `publish→delivery, ${String(n).padStart(3)} subscribers: release ${line(r.release)} | current ${line(r.current)} | p99 ${ratio(r.current.p99, r.release.p99)}, CPU ${ratio(r.current.cpuPerPublishMs, r.release.cpuPerPublishMs)} | floor ${line(r.floor)}`,
        );
        console.log(
          `  peers: floor-held ${line(r["floor-held"])} | floor-held-rs ${line(r["floor-held-rs"])} | agents ${line(r.agents)} | p99 current / agents ${ratio(r.current.p99, r.agents.p99)}, current / floor-held ${ratio(r.current.p99, r["floor-held"].p99)}, current / floor-held-rs ${ratio(r.current.p99, r["floor-held-rs"].p99)}`,
        );
      }
    } finally {
      await floor.worker.stop();
      for (const p of peers) await p.worker.stop();
    }
  }
  if (want("appends")) {
    // Beside both builds, the peers (as in the latency figures).
    const peers = await startPeers();
    results.appends = [];
    try {
      for (const n of [0, 10]) {
        const r = {};
        for (const b of [...builds, ...peers]) r[b.name] = await appendRate(b, n);
        results.appends.push({ subscribers: n, ...r });
        const rate = (x) => `${x.perSecond.toLocaleString("en")}/s`;
        const all = (x) => `every reader had all at ${x.allDeliveredPerSecond.toLocaleString("en")}/s, ${x.delivered}/${x.events} each`;
        console.log(
          `appends, ${String(n).padStart(2)} subscribers: release ${rate(r.release)} | current ${rate(r.current)} | ${ratio(r.current.perSecond, r.release.perSecond)}` +
            (n ? ` (current: ${all(r.current)})` : ""),
        );
        const peer = (x) => rate(x) + (n ? ` (${all(x)})` : "");
        console.log(
          `  peers: floor-held ${peer(r["floor-held"])} | floor-held-rs ${peer(r["floor-held-rs"])} | agents ${peer(r.agents)} | current / agents ${ratio(r.current.perSecond, r.agents.perSecond)}, current / floor-held ${ratio(r.current.perSecond, r["floor-held"].perSecond)}, current / floor-held-rs ${ratio(r.current.perSecond, r["floor-held-rs"].perSecond)}` +
            (n ? ` (every reader had all: ${ratio(r.current.allDeliveredPerSecond, r.agents.allDeliveredPerSecond)}, ${ratio(r.current.allDeliveredPerSecond, r["floor-held"].allDeliveredPerSecond)}, ${ratio(r.current.allDeliveredPerSecond, r["floor-held-rs"].allDeliveredPerSecond)})` : ""),
        );
      }
    } finally {
      for (const p of peers) await p.worker.stop();
    }
  }
  if (want("rows")) {
    results.rowsPer1000Deltas = await both((api) => rowsPerThousandDeltas(api, hook));
    console.log(`SQLite rows written per 1,000 text-deltas: release ${results.rowsPer1000Deltas.release} | current ${results.rowsPer1000Deltas.current}`);
  }
  if (want("reconnect")) {
    results.reconnect = [];
    for (const size of [1_000, 100_000]) {
      const r = await both((api) => reconnect(api, hook, size));
      results.reconnect.push({ size, ...r });
      console.log(`reconnect after 100 missed on a ${r.current.events.toLocaleString("en")}-event thread: first event release ${ms(r.release.first)} | current ${ms(r.current.first)}; 100th release ${ms(r.release.hundredth)} | current ${ms(r.current.hundredth)}`);
    }
    const [small, big] = results.reconnect;
    console.log(`  100k / 1k ratio (current): first ${ratio(big.current.first, small.current.first)}, 100th ${ratio(big.current.hundredth, small.current.hundredth)}`);
  }
  if (want("streams")) {
    results.streamReconnect = [];
    for (const size of [1_000, 100_000]) {
      const r = await both((api) => streamReconnect(api, hook, size));
      results.streamReconnect.push({ size, ...r });
      console.log(
        `Durable Streams reconnect after 100 missed on a ${r.current.events.toLocaleString("en")}-event thread: SSE first data byte release ${ms(r.release.sseFirstByte)} | current ${ms(r.current.sseFirstByte)}; catch-up release ${ms(r.release.catchUp100)} | current ${ms(r.current.catchUp100)}`,
      );
    }
    const [dsSmall, dsBig] = results.streamReconnect;
    console.log(`  100k / 1k ratio (current): SSE first byte ${ratio(dsBig.current.sseFirstByte, dsSmall.current.sseFirstByte)}, catch-up ${ratio(dsBig.current.catchUp100, dsSmall.current.catchUp100)}`);
  }
  if (want("aisdk")) {
    // The release in local/RELEASE has no /api/chat: a baseline without
    // the route is left out of this row.
    const serving = [];
    for (const b of builds) if ((await fetch(`${b.api.base}/api/chat/probe/stream`)).status !== 404) serving.push(b);
    results.uiReconnect = [];
    for (const size of [1_000, 100_000]) {
      const r = { size };
      for (const b of serving) r[b.name] = await uiReconnect(b.api, hook, size);
      results.uiReconnect.push(r);
      const line = serving.map((b) => `${b.name} ${ms(r[b.name].firstByte)}`).join(" | ");
      console.log(`AI SDK reconnect (GET /api/chat/:id/stream, the open run from its start) on a ${r.current.events.toLocaleString("en")}-event thread: first data byte ${line}`);
    }
    const [uiSmall, uiBig] = results.uiReconnect;
    console.log(`  100k / 1k ratio (current): first byte ${ratio(uiBig.current.firstByte, uiSmall.current.firstByte)}`);
  }
  if (want("cost")) {
    const perEvent = {};
    for (const n of [1, 100, 1000]) perEvent[n] = await both((api) => publishAwake(api, hook, n));
    // Workers of their own for the idle windows: counting wakes
    // (DEBUG_WAKES) is a storage write per event, which no other figure pays.
    for (const b of builds) await b.worker.stop();
    const costVars = { ...vars, DEBUG_WAKES: "1", MAX_SUBSCRIBERS: "2000" };
    builds[0].worker = await startWorker({ vars: costVars, script: release });
    builds[1].worker = await startWorker({ vars: costVars });
    for (const b of builds) b.api = { ...client(b.worker.url), base: b.worker.url };
    results.cost = [];
    const usd = (x) => `$${x < 0.01 ? x.toFixed(4) : x.toFixed(2)}`;
    for (const n of [1, 100, 1000]) {
      const idle = await both((api) => idleAwake(api, hook, n));
      const row = { subscribers: n };
      for (const b of ["release", "current"]) {
        const month = monthlyIdleUsd(n, idle[b], perEvent[n][b]);
        row[b] = { perEventMs: perEvent[n][b], ...idle[b], awakeMsPerHour: month.awakeMsPerHour, monthlyIdleUsd: month.usd };
      }
      results.cost.push(row);
      const line = (x) =>
        `${ms(x.perEventMs)}/event, ${Math.round(x.awakeMsPerHour).toLocaleString("en")} ms/idle hour (${x.heldOpen} requests held, ${x.wakes} wakes in ${x.idleMs / 1000} s${x.evicted ? ", evicted" : ""}) → ${usd(x.monthlyIdleUsd)}/month idle`;
      console.log(`object awake, ${String(n).padStart(4)} idle subscribers: release ${line(row.release)} | current ${line(row.current)}`);
    }
  }
  if (want("inbox")) {
    const current = builds[1];
    const l = await inboxLatency(current.api, hook);
    // A worker of its own for the idle window: DEBUG_WAKES counts each event in storage.
    const idleWorker = await startWorker({ vars: { ...vars, DEBUG_WAKES: "1" } });
    const idleApi = { ...client(idleWorker.url), base: idleWorker.url };
    const idle = [];
    try {
      for (const n of [1, 100]) idle.push(await inboxIdle(idleApi, hook, n));
    } finally {
      await idleWorker.stop();
    }
    results.inbox = { latency: l, idle };
    console.log(`inbox (current): thread state change → inbox subscriber p50 ${ms(l.p50)} p99 ${ms(l.p99)} (${l.samples} changes: a confirmation requested, a run's end)`);
    for (const x of idle) {
      console.log(
        `  ${String(x.subscribers).padStart(3)} open inbox streams idle ${x.idleMs / 1000} s: the directory held ${x.heldOpen} requests, handled ${x.wakes} events${x.evicted ? " (evicted)" : ""}, ${x.readers} reader sockets`,
      );
    }
  }
  if (want("files")) {
    const f = (results.files = await filesBench(hook, 20));
    console.log(
      `files (current): upload of 10 MB ${f.uploadMBps.toFixed(1)} MB/s (median of 20); time to the run's start: text-only send ${ms(f.textStartMs)} | with a 5 MB image as a data: URL ${ms(f.imageStartMs)} (${ratio(f.imageStartMs, f.textStartMs)})`,
    );
    console.log(
      `  workerd resident memory (the Worker, its objects and Miniflare's bucket): ${f.rssBeforeMb.toFixed(0)} MB before; every 10 of ${f.transfers} transfers: ${f.rssEvery10Mb.map((m) => m.toFixed(0)).join(", ")} MB (peak ${f.peakMb.toFixed(0)} MB; /proc/<workerd>/status VmRSS, VmHWM)`,
    );
  }
  if (want("branches")) {
    const r = (results.branches = await branchBench(builds[1].api, hook));
    const line = (x) =>
      `newest page (50 turns) ${ms(x.newestPageMs)}, oldest page (200) ${ms(x.oldestPageMs)}, AI SDK history ${ms(x.aiSdkMs)}, reconnect 100 behind ${ms(x.reconnectMs)}`;
    console.log(`branches (current), ${r.linear.pathRuns * 2} messages shown: linear (${r.linear.runs} runs) ${line(r.linear)}`);
    console.log(`  branched (${r.branched.runs} runs, ${r.branched.runs - r.branched.pathRuns} versions off the path) ${line(r.branched)} | newest page ${ratio(r.branched.newestPageMs, r.linear.newestPageMs)}, oldest ${ratio(r.branched.oldestPageMs, r.linear.oldestPageMs)}, reconnect ${ratio(r.branched.reconnectMs, r.linear.reconnectMs)}`);
    console.log(`  fork of the linear thread: made in ${ms(r.fork.createMs)} (copying it, its 1,000 messages written again: ${ms(r.fork.copyMs)}); the fork's newest page ${ms(r.fork.newestPageMs)} (read from its source) vs the source's ${ms(r.fork.sourceNewestPageMs)}`);
  }
  if (want("tokens")) {
    results.tokens = await tokensBench();
    console.log("token estimate (3 bytes a token) against real tokenizers, text cut into 4 KB messages:");
    for (const [name, r] of Object.entries(results.tokens)) {
      console.log(
        `  ${name}: ${r.pieces} pieces, ${(r.bytes / 1e3).toFixed(0)} KB: estimate ${r.estimate.toLocaleString("en")} tokens; o200k ${r.o200k.toLocaleString("en")} (estimate ${r.o200kRatio.toFixed(2)}×), cl100k ${r.cl100k.toLocaleString("en")} (${r.cl100kRatio.toFixed(2)}×); lowest piece ${r.worstPieceRatio.toFixed(2)}×`,
      );
    }
  }
  if (want("context")) {
    console.log(`long conversations (current): a thread of tool-calling turns on a 32,768-token window`);
    results.context = await contextBench();
    const [first, last] = [results.context[0], results.context.at(-1)];
    console.log(
      `  ${first.turns} → ${last.turns} turns (x${last.turns / first.turns}): SQLite bytes ${ratio(last.databaseBytes, first.databaseBytes)}, history ${ratio(last.historyMs, first.historyMs)}, reconnect ${ratio(last.reconnectMs, first.reconnectMs)}, largest request ${ratio(last.largestRequest, first.largestRequest)}`,
    );
  }
  if (want("mcp")) {
    const m = (results.mcp = await mcpBench());
    console.log(
      `MCP (current): send → first model call, median of ${m.trials}: no MCP server ${ms(m.noneMs)} | two MCP servers, discovery cached ${ms(m.twoMs)} (+${ms(m.twoMs - m.noneMs)})`,
    );
  }
  if (want("schema")) {
    const j = (results.schema = await schemaBench());
    console.log(
      `JSON Schema, a typical tool call's arguments (Node, median of 7 × 5,000): previous engine ${j.typical.beforeUs.toFixed(1)} µs | current ${j.typical.afterUs.toFixed(1)} µs (${ratio(j.typical.afterUs, j.typical.beforeUs)})`,
    );
    console.log(
      `  ^(a|a)*$ against ${j.backtracking.aCount} a's and a !: previous engine ${ms(j.backtracking.beforeMs)} (doubling with each a) | current ${ms(j.backtracking.afterMs)}`,
    );
  }
  fs.mkdirSync("test-artifacts", { recursive: true });
  fs.writeFileSync(path.join("test-artifacts", "bench.json"), JSON.stringify(results, null, 2));
} finally {
  for (const b of builds) await b.worker.stop();
  await hook.close();
  agent.destroy();
}
