// The latency workload the profilers drive (local/profile.mjs, local/cpu-ab.mjs):
// a Worker build on workerd with one thread, an open run and SSE readers of
// Instance AI's events route; one-event publishes into the run, and an
// answer the Worker gives alone (a CORS preflight of the publish route); and
// how much CPU the workerd serving it has used.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { startWorker, client, newThread } from "../tests/support/harness.mjs";

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

function post(base, pathname, body, token) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const headers = { "content-type": "application/json", authorization: `Bearer ${token}`, "content-length": Buffer.byteLength(data) };
    const req = http.request(`${base}${pathname}`, { method: "POST", agent, headers }, (res) => {
      let out = "";
      res.on("data", (d) => (out += d));
      res.on("end", () => (res.statusCode === 200 ? resolve(out) : reject(new Error(`${res.statusCode} ${out}`))));
    });
    req.on("error", reject);
    req.end(data);
  });
}

/** An SSE reader that counts the events it is sent; `next()` settles
 * with the time the next one arrives. */
function reader(base, thread) {
  let seen = 0;
  let waiting = [];
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/instance-ai/events/${thread}`, { agent }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`SSE ${res.statusCode}`));
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        const n = chunk.split("\n\n").length - 1;
        seen += n;
        if (n > 0) {
          const now = performance.now();
          waiting.forEach((w) => w(now));
          waiting = [];
        }
      });
      const next = () => new Promise((r) => waiting.push(r));
      resolve({ seen: () => seen, next, close: () => req.destroy() });
    });
    req.on("error", () => {});
  });
}

/** CPU time (ms) the workerd under serving process `pid` has used: each
 * of its threads' run time from the scheduler (`/proc/…/task/…/schedstat`,
 * in nanoseconds; `/proc/…/stat` counts 10 ms ticks, too coarse for a
 * block of requests). */
export function workerdCpuMs(pid) {
  let ns = 0;
  for (const d of fs.readdirSync("/proc").filter((x) => /^\d+$/.test(x))) {
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[1]) !== pid || !stat.includes("(workerd)")) continue;
      for (const t of fs.readdirSync(`/proc/${d}/task`)) ns += Number(fs.readFileSync(`/proc/${d}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    } catch {}
  }
  return ns / 1e6;
}

/**
 * The build in `script` serving the workload: `publish(i)` posts one
 * tool-call event into the open run (`timed(i)` also says when the first
 * reader had it and when the answer came), `preflight()` asks for an answer the
 * Worker gives without an object, `cpuMs()` reads its workerd's CPU.
 * Warmed up (50 of each) before it is handed over.
 */
export async function workload({ script, hook, subscribers = 1 }) {
  const worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url }, script: path.resolve(script) });
  const api = client(worker.url);
  const thread = newThread("prof");
  const r = await api.chat(thread, "profile");
  const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
  const route = `/instance-ai/threads/${thread}/runs/${r.json.runId}/events`;
  const publish = (i) =>
    post(worker.url, route, [{ type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `m${i}`, toolName: "bench", args: {} } }], sig.publishToken);
  const preflight = () =>
    new Promise((resolve, reject) => {
      const headers = { origin: "http://127.0.0.1", "access-control-request-method": "POST" };
      const req = http.request(`${worker.url}${route}`, { method: "OPTIONS", agent, headers }, (res) => {
        res.resume();
        res.on("end", resolve);
      });
      req.on("error", reject);
      req.end();
    });
  const readers = [];
  for (let s = 0; s < subscribers; s++) readers.push(await reader(worker.url, thread));
  /** A publish's delivery to the first reader and its answer, in ms from
   * its send. */
  const timed = async (i) => {
    const t0 = performance.now();
    const delivered = readers[0].next();
    await publish(i);
    const ack = performance.now() - t0;
    return { deliver: (await delivered) - t0, ack };
  };
  for (let i = 0; i < 50; i++) await publish(-1 - i);
  for (let i = 0; i < 50; i++) await preflight();
  return {
    worker,
    publish,
    timed,
    preflight,
    readers,
    cpuMs: () => workerdCpuMs(worker.pid),
    stop: async () => {
      readers.forEach((x) => x.close());
      await worker.stop();
    },
  };
}
