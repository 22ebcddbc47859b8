// `make soak`: the resilience scenarios at full size, with their figures.
//   restart:   SIGKILL workerd during runs on several threads, several times
//   storm:     20 clients reconnecting at random through 50 runs
//   load:      1,000 SSE subscribers over 50 threads while every thread runs
import { startWorker, startWebhook } from "../support/harness.mjs";
import { reconnectStorm, restartChaos, load } from "../support/scenarios.mjs";

const hook = await startWebhook();
const worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, MAX_SUBSCRIBERS: "2000" } });
try {
  console.log("threadline soak (Miniflare, one workerd, loopback)\n");
  const t0 = Date.now();
  const restart = await restartChaos({ threads: 5, kills: 4, seed: 11 });
  console.log(`restart: ${restart.kills} SIGKILLs × ${restart.threads} threads: ${restart.interruptedRuns} runs ended interrupted, every durable event kept once (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  const t1 = Date.now();
  const storm = await reconnectStorm({ clients: 20, runs: 50, seed: 99, worker, hook });
  console.log(`reconnect storm: ${storm.clients} clients, ${storm.runs} runs, ${storm.reconnects} reconnects, ${storm.durableEvents} durable events: ${storm.lost} lost, ${storm.duplicated} duplicated, every tree equal (${((Date.now() - t1) / 1000).toFixed(1)} s)`);
  const t2 = Date.now();
  const l = await load({ threads: 50, subscribers: 1000, events: 40, worker, hook });
  console.log(`load: ${l.subscribers} subscribers over ${l.threads} threads, ${l.eventsPerThread} events each: ${l.lost} lost, ${l.duplicated} duplicated, delivery p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, workerd RSS ${l.workerdRssMb} MB (${((Date.now() - t2) / 1000).toFixed(1)} s)`);
} finally {
  await worker.stop();
  await hook.close();
}
