// Two builds side by side on workerd: both serve the bench's latency
// workload (local/workload.mjs) at once and take turns, a block of requests
// each, so the machine's drift falls on both alike; each pair of
// neighbouring blocks gives one ratio.
//
//   node local/cpu-ab.mjs --a target/ab-base --b build [--blocks 16] [--per-block 200] [--subscribers 1]
//
// Prints, in this order: each build's median workerd CPU per publish and the
// median and quartiles of B's over A's across the pairs; publish→delivery to
// a reader (p50, p99) beside publish→answer; the same CPU figures for an
// answer the Worker gives alone (a CORS preflight: no object), last, as each
// run goes quiet meanwhile and its streams move to sockets. CPU is each
// workerd thread's run time from the scheduler, in nanoseconds.
import { parseArgs } from "node:util";
import { startWebhook, sleep } from "../tests/support/harness.mjs";
import { workload } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    a: { type: "string", default: "target/ab-base" },
    b: { type: "string", default: "build" },
    blocks: { type: "string", default: "16" },
    "per-block": { type: "string", default: "200" },
    subscribers: { type: "string", default: "1" },
  },
});
const blocks = Number(values.blocks);
const per = Number(values["per-block"]);
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** CPU per request (ms) of `n` requests `work(i)` on `w`. */
async function block(w, work, n, from) {
  const c0 = w.cpuMs();
  for (let i = 0; i < n; i++) await work(from + i);
  await sleep(20);
  return (w.cpuMs() - c0) / n;
}

const hook = await startWebhook();
const subscribers = Number(values.subscribers);
const a = await workload({ script: values.a, hook, subscribers });
const b = await workload({ script: values.b, hook, subscribers });
/** Each build's CPU per request of `what` (`pick(w)`), in blocks taken in
 * turn, and B's over A's per pair of neighbouring blocks. */
async function cpu(what, pick) {
  const ra = [];
  const rb = [];
  for (let k = 0; k < blocks; k++) {
    // Alternate which goes first, so neither always follows the other.
    const order = k % 2 ? [b, a] : [a, b];
    for (const w of order) (w === a ? ra : rb).push(await block(w, pick(w), per, 1e6 * (k + 2)));
  }
  const ratios = ra.map((x, i) => rb[i] / x).sort((x, y) => x - y);
  const q = (p) => ratios[Math.min(ratios.length - 1, Math.floor(p * ratios.length))];
  console.log(
    `${what}: A ${median(ra).toFixed(3)} ms, B ${median(rb).toFixed(3)} ms; B/A median ${median(ratios).toFixed(3)} ` +
      `(quartiles ${q(0.25).toFixed(3)}–${q(0.75).toFixed(3)}, ${blocks} pairs of ${per})`,
  );
}

/** Publish→delivery (to the first reader) and publish→answer, the same
 * way: blocks in turn, a short pause between publishes as the bench has.
 * Run while both runs are busy (before the Worker-only answers, during
 * which each run goes quiet and its streams move). */
async function latency() {
  const lat = { a: { deliver: [], ack: [], first: 0 }, b: { deliver: [], ack: [], first: 0 } };
  for (let k = 0; k < blocks; k++) {
    for (const [name, w] of k % 2 ? [["b", b], ["a", a]] : [["a", a], ["b", b]]) {
      for (let i = 0; i < per; i++) {
        const t = await w.timed(1e9 + k * per + i);
        lat[name].deliver.push(t.deliver);
        lat[name].ack.push(t.ack);
        if (t.deliver <= t.ack) lat[name].first++;
        await sleep(2);
      }
    }
  }
  const pct = (xs, p) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  for (const name of ["a", "b"]) {
    const l = lat[name];
    console.log(
      `${name.toUpperCase()} delivery p50 ${pct(l.deliver, 50).toFixed(2)} ms, p99 ${pct(l.deliver, 99).toFixed(2)} ms; ` +
        `answer p50 ${pct(l.ack, 50).toFixed(2)} ms; delivered before the answer ${((100 * l.first) / l.deliver.length).toFixed(0)}%`,
    );
  }
}

try {
  await cpu("publish", (w) => w.publish);
  await latency();
  await cpu("Worker-only answer", (w) => w.preflight);
} finally {
  await a.stop();
  await b.stop();
  await hook.close();
}
