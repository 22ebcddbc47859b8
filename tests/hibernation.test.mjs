// Sleeping threads, over real HTTP on workerd: a thread's object holds no
// request for its subscribers (each is a hibernatable socket the stateless
// Worker relays), so with open tabs and nothing happening it is evicted, and
// the next publish wakes a new instance that finds every subscriber again.
//
// What workerd lets us observe: the object's debug stats report its
// instance (a random id drawn at construction), the events in progress on
// it, and (with DEBUG_WAKES=1) how many events every instance handled, a
// count kept in storage so it outlives eviction. workerd evicts an object
// whose only connections are hibernatable sockets after 10 s without events.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, sleep, until, startExternalRun, streamsSettled } from "./support/harness.mjs";

let worker, hook, api;


before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url, DEBUG_WAKES: "1" } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

/** How long after its last publish an agent's run is quiet (`QUIET_MS` in
 * durable/src/thread/delivery.rs). */
const QUIET_MS = 2_000;
const title = (text) => ({ type: "thread-title-updated", agentId: "orchestrator", payload: { title: text } });
const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("100 idle subscribers: the object holds no request, is evicted, and each gets the next publish once, in order", async () => {
  const thread = newThread("sleep");
  const { runId, token } = await startExternalRun(api, hook, thread);
  assert.equal((await api.publish(thread, runId, token, [title("one")])).status, 200);
  // The agent goes quiet: a tab that opens now gets a socket at once (one
  // that opens while the run publishes is held by the object, then moved:
  // tests/handover.test.mjs).
  await sleep(QUIET_MS + 500);

  // 100 clients, each on its own HTTP connection to the Worker, all
  // connecting at once: sockets accepted at the same moment must not keep
  // the object awake (a workerd before 1.20260805 never let such an object
  // hibernate: cloudflare/workerd#6862).
  const subs = Array.from({ length: 100 }, () => api.events(thread));
  await Promise.all(subs.map((s) => s.ready));
  assert.ok(subs.every((s) => s.status === 200));
  const first = (await api.stats(thread)).json.lastEventId;
  await Promise.all(subs.map((s) => s.waitFor((e) => e.id === first, 10_000)));
  // Connected while the run was publishing, the streams were held by the
  // object; once its agent is quiet they move to sockets (docs/performance.md).
  await until(async () => streamsSettled((await api.stats(thread)).json), { timeoutMs: 10_000, what: "the hand-over" });

  const idle = (await api.stats(thread)).json;
  assert.equal(idle.subscribers, 100);
  assert.equal(idle.instance.inflight, 0, "no request is held open for a subscriber");
  assert.equal(idle.instance.tasks, 0, "no timer or agent loop keeps it awake");

  await sleep(12_000);

  // The publish wakes it; the stats read after it is the second event since.
  assert.equal((await api.publish(thread, runId, token, [title("two"), title("three")])).status, 200);
  const woke = (await api.stats(thread)).json;
  assert.notEqual(woke.instance.id, idle.instance.id, "the idle object was evicted and constructed again");
  assert.equal(woke.instance.handledEver - idle.instance.handledEver, 2, "nothing woke it while idle");
  assert.equal(woke.subscribers, 100, "on waking it found every subscriber from its sockets");

  await Promise.all(subs.map((s) => s.waitFor((e) => e.id === woke.lastEventId, 10_000)));
  await sleep(200);
  for (const s of subs) {
    assert.deepEqual(s.durable().map((e) => e.id), range(1, woke.lastEventId), "every event once, in order");
    s.close();
  }
});
