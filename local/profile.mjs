// Where a publish's CPU goes on workerd: V8's sampling profiler over the
// bench's latency workload (one thread, an open run, `--subscribers` SSE
// readers of Instance AI's events route, `--publishes` one-event publishes).
//
//   KEEP_NAMES=1 sh local/build.sh   # a build whose wasm keeps its names: target/named/
//   node local/profile.mjs [--script target/named] [--subscribers 1] [--publishes 2000] [--out FILE]
//                          [--profile publish|preflight|heap|crossings]
//
// Prints workerd's CPU per publish measured without the profiler (and per
// answer the Worker gives without an object, for the front's share), then the
// functions with the most self time and with the most time under them;
// writes the whole profile to FILE (default test-artifacts/publish.cpuprofile,
// which Chrome's DevTools opens). With the inspector attached, every
// console line also goes to it: the request log's share is far larger in
// the profile than when unprofiled (about 5 µs a line).
//
// Two more views of a publish (any build, names kept or not):
//   --profile heap       the JavaScript heap it allocates (V8's sampling heap
//                        profiler, objects a collection freed included), per
//                        allocating function: what the young generation's
//                        collections are paid for;
//   --profile crossings  its calls from wasm into JavaScript, per import (a
//                        copy of the build whose imports count their calls).
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { startWebhook, sleep } from "../tests/support/harness.mjs";
import { freePort } from "../tests/support/wrangler.mjs";
import { workload } from "./workload.mjs";

const { values } = parseArgs({
  options: {
    script: { type: "string", default: "target/named" },
    subscribers: { type: "string", default: "1" },
    publishes: { type: "string", default: "2000" },
    out: { type: "string", default: "test-artifacts/publish.cpuprofile" },
    top: { type: "string", default: "40" },
    // What the profiler samples: publishes, or the Worker's answers alone.
    profile: { type: "string", default: "publish" },
  },
});
/** One DevTools-protocol session on the isolate's inspector target. */
async function inspect(port) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  const target = targets.find((t) => t.id?.includes("core:user")) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl ?? `ws://127.0.0.1:${port}/${target.id}`);
  await new Promise((r, j) => (ws.addEventListener("open", r, { once: true }), ws.addEventListener("error", j, { once: true })));
  let id = 0;
  const pending = new Map();
  ws.addEventListener("message", (e) => {
    const msg = JSON.parse(e.data);
    if (msg.id && pending.has(msg.id)) pending.get(msg.id)(msg), pending.delete(msg.id);
  });
  const send = (method, params = {}) =>
    new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close() };
}

/** Self time per function, and the time under each function (inclusive,
 * counted once per sample however deep it recurs), in ms. */
function summarize(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n) => `${n.callFrame.functionName || "(anonymous)"}${n.callFrame.url ? ` ${path.basename(n.callFrame.url)}` : ""}`;
  const dt = profile.timeDeltas;
  const self = new Map();
  const total = new Map();
  let all = 0;
  profile.samples.forEach((sid, i) => {
    const ms = (dt[i + 1] ?? dt[i] ?? 0) / 1000;
    all += ms;
    const n = byId.get(sid);
    self.set(name(n), (self.get(name(n)) ?? 0) + ms);
    const seen = new Set();
    for (let id = sid; id !== undefined; id = parent.get(id)) {
      const k = name(byId.get(id));
      if (!seen.has(k)) seen.add(k), total.set(k, (total.get(k) ?? 0) + ms);
    }
  });
  return { self, total, all };
}

/** A copy of the build in `script` whose wasm imports count their calls;
 * the counts are printed (to stderr, as `CROSSINGS {...}`) and reset by
 * the request log line of any request whose path has `MARK` in it. */
const MARK = "__crossings";
function countingCopy(script) {
  // Beside the build: workerd serves modules from under the working directory.
  const dir = fs.mkdtempSync(path.resolve("target", "crossings-"));
  fs.cpSync(script, dir, { recursive: true });
  const file = path.join(dir, "index.js");
  let js = fs.readFileSync(file, "utf8");
  const count = `globalThis.__crossings = new Map();
globalThis.__counting = (imports) => {
  for (const module of Object.values(imports)) for (const [name, f] of Object.entries(module)) {
    if (typeof f !== "function") continue;
    const log = name.startsWith("__wbg_log_");
    module[name] = function (...args) {
      __crossings.set(name, (__crossings.get(name) ?? 0) + 1);
      if (log && String(args[0]).includes(${JSON.stringify(MARK)})) console.error("CROSSINGS " + JSON.stringify([...__crossings])), __crossings.clear();
      return f.apply(this, args);
    };
  }
  return imports;
};\n`;
  const instance = /new WebAssembly\.Instance\(([^,()]+),([^()]+)\(\)\)/g;
  if (!instance.test(js)) throw new Error(`${file}: no wasm instantiation found to count`);
  js = js.replace(instance, "new WebAssembly.Instance($1,__counting($2()))");
  fs.writeFileSync(file, js.replace(/^(import[^;]*;)?/, (m) => m + count));
  return dir;
}

const hook = await startWebhook();
const port = await freePort();
process.env.MINIFLARE_INSPECT = String(port);
const script = values.profile === "crossings" ? countingCopy(values.script) : values.script;
const w = await workload({ script, hook, subscribers: Number(values.subscribers) });
try {
  if (values.profile === "crossings") await crossings(w, Number(values.publishes), Number(values.top));
  else if (values.profile === "heap") await heap(w, Number(values.publishes), Number(values.top));
  else await cpu(w);
} finally {
  await w.stop();
  await hook.close();
  if (script !== values.script) fs.rmSync(script, { recursive: true, force: true });
}

/** Each import's calls per publish: the counts between two marks, less a
 * window that holds only a mark (a Worker-only 404). */
async function crossings(w, n, top) {
  const mark = () => fetch(`${w.worker.url}/${MARK}`).then((r) => r.arrayBuffer());
  const windows = () => (w.worker.stderr + w.worker.stdout).split("\n").filter((l) => l.includes("CROSSINGS ")).map((l) => new Map(JSON.parse(l.slice(l.indexOf("CROSSINGS ") + 10))));
  await mark();
  await mark();
  for (let i = 0; i < n; i++) await w.publish(1e6 + i);
  await mark();
  await sleep(50);
  const [alone, published] = windows().slice(-2);
  const per = [...published].map(([k, v]) => [k, (v - (alone.get(k) ?? 0)) / n]).filter(([, v]) => v > 0.01);
  const total = per.reduce((a, [, v]) => a + v, 0);
  console.log(`${total.toFixed(1)} calls from wasm into JavaScript per publish (${n} publishes, Worker and object):`);
  for (const [k, v] of per.sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${v.toFixed(2).padStart(8)}  ${k}`);
}

/** The JavaScript heap a publish allocates, per allocating function. */
async function heap(w, n, top) {
  const inspector = await inspect(port);
  // The isolate answers the inspector between its requests: each command
  // is sent, then a publish gives it a turn.
  let nudges = 0;
  const command = async (method, params) => {
    const answer = inspector.send(method, params);
    await w.publish(-1000 - nudges++);
    return answer;
  };
  await command("HeapProfiler.enable");
  await command("HeapProfiler.startSampling", { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let i = 0; i < n; i++) await w.publish(1e6 + i);
  const { result } = await command("HeapProfiler.stopSampling");
  inspector.close();
  const bytes = new Map();
  const walk = (node) => {
    const k = `${node.callFrame.functionName || "(anonymous)"}${node.callFrame.url ? ` ${path.basename(node.callFrame.url)}` : ""}`;
    bytes.set(k, (bytes.get(k) ?? 0) + node.selfSize);
    (node.children ?? []).forEach(walk);
  };
  walk(result.profile.head);
  const total = [...bytes.values()].reduce((a, b) => a + b, 0);
  console.log(`${(total / n / 1024).toFixed(2)} KiB of JavaScript heap allocated per publish (sampled, ${n} publishes):`);
  for (const [k, b] of [...bytes].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${(b / n).toFixed(0).padStart(8)} B  ${k}`);
}

/** Where a publish's (or a preflight's) CPU goes. */
async function cpu(w) {
  // workerd's CPU per publish, unprofiled (the profiler's own cost and the
  // console's trip to the inspector are left out): user + system from /proc.
  const n = Number(values.publishes);
  const { publish, preflight } = w;
  const cpu0 = w.cpuMs();
  for (let i = 0; i < n; i++) await publish(1e6 + i);
  await sleep(20);
  const cpuPerPublish = (w.cpuMs() - cpu0) / n;
  // The same for an answer the Worker gives alone (no object, no body): the
  // part of a publish's CPU that is the front (Miniflare's entry worker, the
  // Worker's entry, its log line and headers), whatever the route does.
  const cpu1 = w.cpuMs();
  for (let i = 0; i < n; i++) await preflight();
  await sleep(20);
  const cpuPerPreflight = (w.cpuMs() - cpu1) / n;
  const inspector = await inspect(port);
  await inspector.send("Profiler.enable");
  await inspector.send("Profiler.setSamplingInterval", { interval: 50 });
  await inspector.send("Profiler.start");
  const t0 = performance.now();
  const work = values.profile === "preflight" ? preflight : publish;
  for (let i = 0; i < n; i++) await work(i);
  const wall = performance.now() - t0;
  await sleep(50);
  const { result } = await inspector.send("Profiler.stop");
  inspector.close();
  fs.mkdirSync(path.dirname(values.out), { recursive: true });
  fs.writeFileSync(values.out, JSON.stringify(result.profile));
  const { self, total, all } = summarize(result.profile);
  const idle = (self.get("(idle)") ?? 0) + (self.get("(program)") ?? 0);
  const busy = all - idle;
  const per = (ms) => `${((ms / n) * 1000).toFixed(1).padStart(7)} µs/publish ${((100 * ms) / busy).toFixed(1).padStart(5)}%`;
  console.log(`workerd CPU, unprofiled: ${cpuPerPublish.toFixed(3)} ms/publish; ${cpuPerPreflight.toFixed(3)} ms per answer the Worker gives alone (a preflight)`);
  console.log(`${n} publishes in ${wall.toFixed(0)} ms; isolate busy ${(busy / n).toFixed(3)} ms/publish (idle and (program) left out)\n`);
  console.log("self time:");
  const top = Number(values.top);
  for (const [k, ms] of [...self].filter(([k]) => k !== "(idle)" && k !== "(program)").sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${per(ms)}  ${k}`);
  console.log("\ntotal time (inclusive):");
  for (const [k, ms] of [...total].filter(([k]) => k !== "(root)" && k !== "(idle)" && k !== "(program)").sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${per(ms)}  ${k}`);
  console.log(`\nprofile: ${values.out}`);
}
