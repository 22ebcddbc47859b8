// The Trust issue's "Nothing lost" scenarios, bounded in time for `make test`.
// `make soak` runs the same scenarios long and prints their figures.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook } from "./support/harness.mjs";
import { reconnectStorm, restartChaos, load } from "./support/scenarios.mjs";

let hook, worker;
before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "500" } });
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

test("reconnect storm: 20 clients, 8 runs, every client folds the same trees, nothing lost or twice", async () => {
  const r = await reconnectStorm({ clients: 20, runs: 8, seed: 1, worker, hook });
  assert.equal(r.lost, 0);
  assert.equal(r.duplicated, 0);
  assert.ok(r.reconnects > 40, `${r.reconnects} reconnects`);
});

test("restart: SIGKILL during runs, every durable event once after, ids continue, runs end interrupted", async () => {
  const r = await restartChaos({ threads: 2, kills: 1, seed: 3 });
  assert.equal(r.interruptedRuns, 2);
});

test("load: 100 subscribers over 10 threads while every thread runs, nothing lost", async () => {
  const r = await load({ threads: 10, subscribers: 100, events: 30, worker, hook });
  assert.equal(r.lost, 0);
});
