// Webhooks over real HTTP on workerd, through Miniflare's Cloudflare Queues:
// deliveries signed as Standard Webhooks (verified by the reference library,
// with a rotating secret), retried with the same webhook-id until they land,
// dead letters the deployer lists and replays, and an endpoint that hangs
// delaying no run.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { Webhook } from "standardwebhooks";
import { startWorker, client, newThread, until, hs256Jwt, openSse } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "hooks-secret-0123456789abcdef0123";
const as = (sub, roles = []) => ({ authorization: `Bearer ${hs256Jwt(SECRET, { sub, roles, exp: Math.floor(Date.now() / 1000) + 600 })}` });
const OLD = "whsec_" + Buffer.from("the old secret, rotated out soon").toString("base64");
const NEW = "whsec_" + Buffer.from("the new secret, rotated in now!!").toString("base64");
const OTHER = "whsec_" + Buffer.from("another endpoint's own secret!!").toString("base64");

/** A receiver: verifies every delivery with the reference library; each path answers as the test says. */
async function receiver() {
  const got = [];
  const open = new Set();
  const rules = { flaky: { fail: 2 }, dead: { fail: Infinity } };
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    const name = req.url.slice(1);
    const secret = name === "all" ? OTHER : OLD;
    let verified = null;
    try {
      verified = new Webhook(secret).verify(body, req.headers);
    } catch (e) {
      verified = { error: String(e) };
    }
    const entry = { name, id: req.headers["webhook-id"], timestamp: req.headers["webhook-timestamp"], signature: req.headers["webhook-signature"], body, verified };
    got.push(entry);
    if (name === "hang") {
      open.add(res);
      res.on("close", () => open.delete(res));
      return;
    }
    const rule = rules[name];
    if (rule && rule.fail > 0) {
      rule.fail--;
      res.writeHead(503).end("not now");
      return;
    }
    res.writeHead(204).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, got, open, rules, close: () => (server.closeAllConnections(), server.close()) };
}

let llm, tools, hooks, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  hooks = await receiver();
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  const endpoint = (name, events, secret) => ({ url: `${hooks.url}/${name}`, events, secret });
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify([...tools.declarations, guarded]),
      WEBHOOKS: JSON.stringify([
        endpoint("flaky", ["run.finished"], "HOOK_FLAKY"),
        endpoint("dead", ["run.finished"], "HOOK_DEAD"),
        endpoint("hang", ["run.finished"], "HOOK_HANG"),
        endpoint("all", ["*"], "HOOK_ALL"),
      ]),
      HOOK_FLAKY: `${NEW} ${OLD}`,
      HOOK_DEAD: OLD,
      HOOK_HANG: OLD,
      HOOK_ALL: OTHER,
      WEBHOOKS_ALLOW_PRIVATE: "1",
      WEBHOOKS_MAX_ATTEMPTS: "3",
      WEBHOOKS_RETRY_SECONDS: "1",
      WEBHOOKS_TIMEOUT_MS: "3000",
    },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  hooks?.close();
  await llm?.close();
  await tools?.close();
});

const runOn = async (who, thread, message) => {
  const r = await api.call("POST", `/instance-ai/chat/${thread}`, { message }, as(who));
  assert.equal(r.status, 200, r.text);
  return r.json.runId;
};
const forRun = (name, runId) => hooks.got.filter((g) => g.name === name && g.body.includes(runId));

describe("webhooks", () => {
  test("a delivery is signed, retried with the same webhook-id and lands on the third attempt", async () => {
    const thread = newThread("wh");
    const runId = await runOn("alice", thread, "hello hooks");
    const attempts = await until(() => {
      const a = forRun("flaky", runId);
      return a.length >= 3 && a;
    }, { timeoutMs: 20000, what: "three attempts at the flaky endpoint" });
    assert.equal(new Set(attempts.map((a) => a.id)).size, 1, "one webhook-id for every attempt");
    for (const a of attempts) {
      assert.ok(!a.verified.error, a.verified.error);
      assert.equal(a.signature.split(" ").length, 2, "signed with the new and the old secret while rotating");
    }
    const event = attempts[2].verified;
    assert.equal(event.type, "run.finished");
    assert.deepEqual(Object.keys(event.data).sort(), ["actor", "reason", "runId", "status", "threadId"]);
    assert.equal(event.data.threadId, thread);
    assert.equal(event.data.status, "completed");
    assert.ok(!attempts[2].body.includes("hello hooks"), "ids and states, never the message");
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal(forRun("flaky", runId).length, 3, "delivered: no fourth attempt");
  });

  test("an endpoint that always fails ends in the dead letters, and a replay delivers it with the same id", async () => {
    const thread = newThread("dl");
    const runId = await runOn("alice", thread, "to the dead endpoint");
    const letter = await until(async () => {
      const r = await api.call("GET", "/v1/webhooks/dead-letters", undefined, as("ops", ["admin"]));
      assert.equal(r.status, 200, r.text);
      return r.json.deadLetters.find((l) => l.delivery.body.includes(runId) && l.delivery.url.endsWith("/dead"));
    }, { timeoutMs: 25000, stepMs: 250, what: "the dead letter" });
    assert.equal(letter.attempts, 3);
    assert.equal(letter.lastStatus, 503);
    assert.equal(forRun("dead", runId).length, 3, "the configured attempts, no more");
    // Only the deployer lists and replays.
    const refused = await api.call("GET", "/v1/webhooks/dead-letters", undefined, as("alice"));
    assert.equal(refused.status, 403);
    assert.equal(refused.json.error.code, "role_required");
    hooks.rules.dead.fail = 0;
    const replay = await api.call("POST", `/v1/webhooks/dead-letters/${letter.delivery.id}/replay`, undefined, as("ops", ["admin"]));
    assert.equal(replay.status, 202, replay.text);
    const landed = await until(() => forRun("dead", runId).length === 4 && forRun("dead", runId)[3], { timeoutMs: 10000, what: "the replay" });
    assert.equal(landed.id, letter.delivery.id, "the same webhook-id");
    assert.ok(!landed.verified.error);
    const missing = await api.call("POST", "/v1/webhooks/dead-letters/msg_nope/replay", undefined, as("ops", ["admin"]));
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, "dead_letter_not_found");
    hooks.rules.dead.fail = Infinity;
  });

  test("an endpoint that hangs delays no run: the stream ends while its delivery still waits", async () => {
    const thread = newThread("hang");
    const sse = openSse(`${worker.url}/instance-ai/events/${thread}`, { headers: as("alice") });
    await sse.ready;
    const first = await runOn("alice", thread, "one");
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === first, 10000);
    await until(() => forRun("hang", first).length === 1 && hooks.open.size > 0, { timeoutMs: 10000, what: "the hanging delivery" });
    // While that delivery hangs, the next run streams to its end.
    const second = await runOn("alice", thread, "two");
    await sse.waitFor((e) => e.type === "run-finish" && e.runId === second, 10000);
    assert.ok(hooks.open.size > 0, "the first delivery still hangs");
    sse.close();
  });

  test("a confirmation requested and a thread deleted are delivered to an endpoint that wants every event", async () => {
    const thread = newThread("all");
    const runId = await runOn("alice", thread, 'careful [[tool:guarded:{"text":"x"}]]');
    const asked = await until(() => hooks.got.find((g) => g.name === "all" && g.verified.type === "confirmation.requested" && g.verified.data.runId === runId), {
      timeoutMs: 10000,
      what: "confirmation.requested",
    });
    assert.equal(asked.verified.data.toolName, "guarded");
    assert.equal(asked.verified.data.kind, "approval");
    const del = await api.call("DELETE", `/instance-ai/threads/${thread}`, undefined, as("alice"));
    assert.ok(del.status < 300, del.text);
    const gone = await until(() => hooks.got.find((g) => g.name === "all" && g.verified.type === "thread.deleted" && g.verified.data.threadId === thread), {
      timeoutMs: 10000,
      what: "thread.deleted",
    });
    assert.equal(gone.verified.data.actor, "alice");
  });
});
