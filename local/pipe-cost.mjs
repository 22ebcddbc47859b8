// What the Worker's hop on an object-held stream costs at many readers,
// apart from everything else threadline does: the bench's JavaScript
// object-held floor (tests/bench/floor-held/), whose Worker answers a
// subscribe with the object's response as it is (`direct`) or, with
// `?pipe`, pipes the object's stream into a stream of its own with the
// options src/client.rs uses so that a stream can move to a socket
// (`pipe`). One workerd serves both, each mode on its own thread with its
// own readers; readers are opened and blocks taken in turns.
//
//   node local/pipe-cost.mjs [--readers 100] [--blocks 12] [--per-block 50]
//
// Prints, per mode, workerd's CPU per publish (the median over the blocks)
// and publish→delivery p50 and p99 over every reader's every delivery.
import path from "node:path";
import { parseArgs } from "node:util";
import { startWorker, sleep } from "../tests/support/harness.mjs";
import { workerdCpuMs } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    readers: { type: "string", default: "100" },
    blocks: { type: "string", default: "12" },
    "per-block": { type: "string", default: "50" },
  },
});
const modes = ["direct", "pipe"];
const readers = Number(values.readers);
const per = Number(values["per-block"]);

const w = await startWorker({ script: path.resolve("tests/bench/floor-held") });

// Readers are opened in turns across the modes, and each round of blocks
// starts at the next mode, so that no mode is always first or last.
const open = modes.map((mode) => ({ mode, thread: `pipe-cost-${mode}-${process.pid}`, aborts: [], latencies: [], cpu: [], t0: 0, seen: 0 }));
for (let s = 0; s < readers; s++) {
  for (const o of open) {
    const abort = new AbortController();
    const r = await fetch(`${w.url}/instance-ai/events/${o.thread}${o.mode === "pipe" ? "?pipe" : ""}`, { signal: abort.signal });
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
    await (await fetch(`${w.url}/instance-ai/threads/${o.thread}/runs/r/events`, { method: "POST", body: event })).text();
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
