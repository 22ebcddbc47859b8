// What the Worker's hop on an object-held stream costs at many readers,
// apart from everything else threadline does: a JavaScript object-held floor
// (tests/bench/floor-held's object) whose Worker either answers a subscribe
// with the object's response as it is (`direct`) or pipes the object's stream
// into a stream of its own, as src/client.rs does so that the stream can move
// to a socket (`pipesig`: `preventClose` and an abort signal, threadline's
// options; `pipeclose`: `preventClose` only). One workerd serves every mode,
// each on its own thread with its own readers, and the modes take turns.
//
//   node local/pipe-cost.mjs [--modes direct,pipesig,pipeclose] [--readers 100] [--blocks 10] [--per-block 50]
//
// Prints, per mode, workerd's CPU per publish (the median over the blocks)
// and publish→delivery p50 and p99 over every reader's every delivery.
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { startWorker, sleep } from "../tests/support/harness.mjs";
import { workerdCpuMs } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    modes: { type: "string", default: "direct,pipesig,pipeclose" },
    readers: { type: "string", default: "100" },
    blocks: { type: "string", default: "10" },
    "per-block": { type: "string", default: "50" },
  },
});
const modes = values.modes.split(",");
const readers = Number(values.readers);
const per = Number(values["per-block"]);

const WORKER = `import { DurableObject } from "cloudflare:workers";
const enc = new TextEncoder();
export default {
  async fetch(req, env, ctx) {
    const url = new URL(req.url);
    const [, what, thread] = url.pathname.split("/");
    if (req.method === "GET" && what === "events") {
      const resp = await env.THREAD.getByName(thread).fetch("https://thread/subscribe");
      const mode = url.searchParams.get("mode");
      if (mode === "direct") return resp;
      const { readable, writable } = new IdentityTransformStream();
      const options = mode === "pipesig" ? { preventClose: true, signal: new AbortController().signal } : { preventClose: true };
      ctx.waitUntil(resp.body.pipeTo(writable, options).catch(() => {}));
      return new Response(readable, { headers: { "content-type": "text/event-stream" } });
    }
    if (req.method === "POST" && what === "publish") {
      return env.THREAD.getByName(thread).fetch("https://thread/publish", { method: "POST", body: req.body });
    }
    return new Response("not found", { status: 404 });
  },
};
export class ThreadObject extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)");
    this.seq = ctx.storage.sql.exec("SELECT COALESCE(MAX(seq), 0) AS s FROM events").one().s;
    this.writers = new Set();
  }
  async fetch(req) {
    if (new URL(req.url).pathname === "/subscribe") {
      const { readable, writable } = new IdentityTransformStream();
      this.writers.add(writable.getWriter());
      return new Response(readable, { headers: { "content-type": "text/event-stream" } });
    }
    const chunks = [];
    for (const e of await req.json()) {
      const data = JSON.stringify(e);
      this.ctx.storage.sql.exec("INSERT INTO events (seq, data) VALUES (?, ?)", ++this.seq, data);
      chunks.push(enc.encode("id: " + this.seq + "\\ndata: " + data + "\\n\\n"));
    }
    for (const w of this.writers) for (const c of chunks) w.write(c).catch(() => this.writers.delete(w));
    return Response.json({ lastEventId: this.seq });
  }
}
export class Directory extends DurableObject {}
export class StreamObject extends DurableObject {}
`;

const dir = path.resolve("target/pipe-cost");
fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, "index.js"), WORKER);
const w = await startWorker({ script: dir });

// Readers are opened in turns across the modes, and each round of blocks
// starts at the next mode, so that no mode is always first or last.
const open = modes.map((mode) => ({ mode, thread: `pipe-${mode}`, aborts: [], latencies: [], cpu: [], t0: 0, seen: 0 }));
for (let s = 0; s < readers; s++) {
  for (const o of open) {
    const abort = new AbortController();
    const r = await fetch(`${w.url}/events/${o.thread}?mode=${o.mode}`, { signal: abort.signal });
    const reader = r.body.getReader();
    (async () => {
      try {
        for (;;) {
          const { done } = await reader.read();
          if (done) break;
          if (o.t0) o.latencies.push(performance.now() - o.t0), o.seen++;
        }
      } catch {}
    })();
    o.aborts.push(abort);
  }
}
const event = JSON.stringify([{ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "c1", toolName: "search", args: { q: "x".repeat(200) } } }]);

/** `n` publishes on `o`'s thread, each waited for until every reader has it. */
async function block(o, n, keep) {
  const from = o.latencies.length;
  const c0 = workerdCpuMs(w.pid);
  for (let i = 0; i < n; i++) {
    o.seen = 0;
    o.t0 = performance.now();
    await (await fetch(`${w.url}/publish/${o.thread}`, { method: "POST", body: event })).text();
    const deadline = Date.now() + 2000;
    while (o.seen < readers && Date.now() < deadline) await sleep(0);
    o.t0 = 0;
  }
  if (keep) o.cpu.push((workerdCpuMs(w.pid) - c0) / n);
  else o.latencies.length = from;
}

for (const o of open) await block(o, 30, false); // warm-up
for (let k = 0; k < Number(values.blocks); k++) {
  for (let j = 0; j < open.length; j++) await block(open[(j + k) % open.length], per, true);
}
const at = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
for (const o of open) {
  console.log(
    `${o.mode.padEnd(10)} CPU ${at(o.cpu, 0.5).toFixed(3)} ms/publish; delivery p50 ${at(o.latencies, 0.5).toFixed(2)} ms, p99 ${at(o.latencies, 0.99).toFixed(2)} ms (${o.latencies.length} deliveries)`,
  );
}
open.forEach((o) => o.aborts.forEach((a) => a.abort()));
await w.stop();
process.exit(0);
