// What an object-held stream's fan-out costs at many readers, apart from
// everything else threadline does, on the bench's JavaScript object-held
// floor (tests/bench/floor-held/), served four ways:
//   direct  the Worker answers a subscribe with the object's response as it
//           is, and the object writes each publish to every reader's stream;
//   pipe    the same, the Worker piping the object's stream into a stream of
//           its own with the options src/client.rs uses so that a stream
//           can move to a socket (`?pipe`): that hop's cost;
//   tee     the object writes each publish once, to a native tee whose
//           branches are the readers' streams (`?tee`), each piped by the
//           Worker after the reader's own first part;
//   rpc     the Worker hands the object its own stream's writable end over
//           RPC (`?rpc`), which the object writes: no pipe in the Worker,
//           but that stream can never be the Worker's to write again.
// One workerd serves them all, each mode on its own thread with its own
// readers; readers are opened and blocks taken in turns.
//
//   node local/fanout-cost.mjs [--readers 100] [--blocks 12] [--per-block 50] [--modes direct,pipe,tee,rpc]
//   node local/fanout-cost.mjs --stall [--modes direct,pipe,tee,rpc]
//
// Prints, per mode, workerd's CPU per publish (the median over the blocks)
// and publish→delivery p50 and p99 over every reader's every delivery.
// With `--stall`, instead: per mode, two readers that read and one that
// never does, 300 publishes of 64 KiB, and how many of them each reading
// reader had (a shared tee is paced by its slowest branch).
import http from "node:http";
import path from "node:path";
import { parseArgs } from "node:util";
import { startWorker, sleep } from "../tests/support/harness.mjs";
import { workerdCpuMs } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    readers: { type: "string", default: "100" },
    blocks: { type: "string", default: "12" },
    "per-block": { type: "string", default: "50" },
    modes: { type: "string", default: "direct,pipe,tee,rpc" },
    stall: { type: "boolean", default: false },
  },
});
const modes = values.modes.split(",");
const readers = Number(values.readers);
const per = Number(values["per-block"]);

const w = await startWorker({ script: path.resolve("tests/bench/floor-held") });
const query = (mode) => (mode === "direct" ? "" : `?${mode}`);

if (values.stall) {
  const big = JSON.stringify([{ type: "text", payload: "y".repeat(64 * 1024) }]);
  for (const mode of modes) {
    const thread = `fanout-stall-${mode}-${process.pid}`;
    const bytes = [0, 0];
    for (let i = 0; i < 2; i++) {
      const reader = (await fetch(`${w.url}/instance-ai/events/${thread}${query(mode)}`)).body.getReader();
      (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read()) bytes[i] += r.value.length;
      })().catch(() => {});
    }
    // Never read: its socket's buffers fill, then its stream stops.
    http.get(`${w.url}/instance-ai/events/${thread}${query(mode)}`, (res) => res.socket.pause());
    await sleep(300);
    for (let i = 0; i < 300; i++) await (await fetch(`${w.url}/instance-ai/threads/${thread}/runs/r/events`, { method: "POST", body: big })).text();
    await sleep(2000);
    console.log(`${mode.padEnd(10)} readers that read had ${bytes.map((b) => Math.floor(b / 65536)).join(" and ")} of 300 publishes`);
  }
  await w.stop();
  process.exit(0);
}

// Readers are opened in turns across the modes, and each round of blocks
// starts at the next mode, so that no mode is always first or last.
const open = modes.map((mode) => ({ mode, thread: `fanout-cost-${mode}-${process.pid}`, aborts: [], latencies: [], cpu: [], t0: 0, seen: 0 }));
for (let s = 0; s < readers; s++) {
  for (const o of open) {
    const abort = new AbortController();
    const r = await fetch(`${w.url}/instance-ai/events/${o.thread}${query(o.mode)}`, { signal: abort.signal });
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
