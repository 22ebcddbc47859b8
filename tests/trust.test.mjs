// The Trust issue over real HTTP on workerd: authentication, ownership,
// stream tokens, CORS, limits, concurrency, delete and TTL.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { startWorker, startWebhook, client, openSse, newThread, sleep, until, hs256Jwt } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "test-secret-0123456789abcdef0123456789";
const b64 = (x) => Buffer.from(typeof x === "string" ? x : JSON.stringify(x)).toString("base64url");
const hs256 = (claims) => hs256Jwt(SECRET, claims);
const now = () => Math.floor(Date.now() / 1000);
const token = (sub, extra = {}) => hs256({ sub, exp: now() + 300, ...extra });

/** A client that sends a bearer token. */
function as(base, bearer) {
  const c = client(base);
  const call = (method, p, body, headers = {}) => c.call(method, p, body, bearer ? { authorization: `Bearer ${bearer}`, ...headers } : headers);
  return {
    ...c,
    call,
    chat: (thread, message, extra = {}) => call("POST", `/instance-ai/chat/${thread}`, { message, ...extra }),
    cancel: (thread) => call("POST", `/instance-ai/chat/${thread}/cancel`),
    status: (thread) => call("GET", `/instance-ai/threads/${thread}/status`),
    messages: (thread) => call("GET", `/instance-ai/threads/${thread}/messages`),
    events: (thread, { query = "", headers = {} } = {}) =>
      openSse(`${base}/instance-ai/events/${thread}${query}`, { headers: bearer ? { authorization: `Bearer ${bearer}`, ...headers } : headers }),
  };
}

let llm, tools, worker;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      AUTH_ISSUER: "test-issuer",
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify([...tools.declarations, guarded]),
      APPROVAL_POLICY: JSON.stringify({ guarded: { approver: "FINANCE" } }),
      ALLOWED_ORIGINS: "https://app.example",
      MAX_SUBSCRIBERS: "3",
      // A client that went away is noticed at the next write: a ping here.
      SSE_PING_MS: "200",
      MAX_EVENT_BYTES: "2000",
    },
  });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

const alice = () => as(worker.url, token("alice", { iss: "test-issuer" }));
const bob = () => as(worker.url, token("bob", { iss: "test-issuer" }));

describe("authentication", () => {
  test("a bearer JWT is required and checked: signature, exp, nbf, iss", async () => {
    const thread = newThread("au");
    const cases = [
      [undefined, "no token"],
      ["not-a-jwt", "garbage"],
      [token("alice"), "no issuer"],
      [hs256({ sub: "alice", iss: "test-issuer", exp: now() - 600 }), "expired"],
      [hs256({ sub: "alice", iss: "test-issuer", exp: now() + 600, nbf: now() + 600 }), "not yet valid"],
      [token("alice", { iss: "test-issuer" }).slice(0, -2) + "xx", "bad signature"],
    ];
    for (const [t, what] of cases) {
      const r = await as(worker.url, t).chat(thread, "hi");
      assert.equal(r.status, 401, what);
      assert.equal(r.json.error.code, "unauthorized", what);
    }
    const ok = await alice().chat(thread, "hi");
    assert.equal(ok.status, 200, ok.text);
    // Skew: a token that expired 30 s ago still passes.
    const skewed = as(worker.url, hs256({ sub: "alice", iss: "test-issuer", exp: now() - 30 }));
    assert.equal((await skewed.status(thread)).status, 200);
  });

  test("RS256 and ES256 tokens verify against AUTH_JWKS", async () => {
    const rsa = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
    const ec = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
    const jwks = {
      keys: [
        { ...rsa.publicKey.export({ format: "jwk" }), kid: "r1" },
        { ...ec.publicKey.export({ format: "jwk" }), kid: "e1" },
      ],
    };
    const w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWKS: JSON.stringify(jwks), AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" } });
    try {
      const sign = (alg, kid, key, claims) => {
        const h = b64({ alg, kid });
        const p = b64(claims);
        const data = Buffer.from(`${h}.${p}`);
        const sig = alg === "RS256"
          ? crypto.sign("sha256", data, key)
          : crypto.sign("sha256", data, { key, dsaEncoding: "ieee-p1363" });
        return `${h}.${p}.${sig.toString("base64url")}`;
      };
      const claims = { sub: "carol", exp: now() + 300 };
      for (const t of [sign("RS256", "r1", rsa.privateKey, claims), sign("ES256", "e1", ec.privateKey, claims)]) {
        const r = await as(w.url, t).call("GET", `/instance-ai/threads/${newThread()}/queue`);
        assert.equal(r.status, 404, "authenticated: the thread just does not exist");
        assert.equal(r.json.error.code, "thread_not_found");
      }
      const forged = sign("ES256", "e1", crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey, claims);
      assert.equal((await as(w.url, forged).status(newThread())).status, 401);
    } finally {
      await w.stop();
    }
  });

  test("no auth configured is 503 auth_not_configured; AUTH_MODE=none runs open", async () => {
    const w = await startWorker({ vars: { AUTH_MODE: "", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" } });
    try {
      const r = await client(w.url).status(newThread());
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, "auth_not_configured");
    } finally {
      await w.stop();
    }
    const open = await startWorker({ vars: { AUTH_MODE: "none", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" } });
    try {
      const thread = newThread();
      assert.equal((await client(open.url).chat(thread, "hi")).status, 200);
    } finally {
      await open.stop();
    }
  });
});

describe("ownership", () => {
  test("another actor gets the same 404 on every route of a thread", async () => {
    const a = alice();
    const b = bob();
    const thread = newThread("own");
    const r = await a.chat(thread, 'careful [[tool:guarded:{"text":"own"}]]');
    assert.equal(r.status, 200, r.text);
    const sse = a.events(thread);
    await sse.ready;
    const req = await sse.waitFor((e) => e.type === "confirmation-request");
    const unknown = newThread("never");
    const routes = [
      ["GET", `/instance-ai/threads/${thread}/status`, undefined, "thread_not_found"],
      ["GET", `/instance-ai/threads/${thread}/messages`, undefined, "thread_not_found"],
      ["POST", `/instance-ai/chat/${thread}/cancel`, undefined, "thread_not_found"],
      ["POST", `/instance-ai/chat/${thread}`, { message: "mine now?" }, "thread_not_found"],
      ["GET", `/instance-ai/threads/${thread}/queue`, undefined, "thread_not_found"],
      ["POST", `/instance-ai/threads/${thread}/stream-token`, undefined, "thread_not_found"],
      ["GET", `/agent/threads/${thread}`, undefined, "thread_not_found"],
      ["DELETE", `/instance-ai/threads/${thread}`, undefined, "thread_not_found"],
      ["POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true }, "confirmation_not_found"],
      ["GET", `/agent/chat/${r.json.runId}/stream`, undefined, "nothing_to_resume"],
    ];
    for (const [method, path, body, code] of routes) {
      const theirs = await b.call(method, path, body);
      assert.equal(theirs.status, 404, `${method} ${path}`);
      assert.equal(theirs.json.error.code, code, `${method} ${path}`);
      // The same answer as for a thread that does not exist (a send would
      // create that one), but on n8n's status, messages and cancel, which
      // serve a thread that does not exist yet as an empty one
      // (docs/security.md, "Ownership").
      const servedEmpty = /\/(status|messages|cancel)$/.test(path) && path.startsWith("/instance-ai/");
      if (servedEmpty) {
        const none = await b.call(method, path.replace(thread, unknown), body);
        assert.equal(none.status, 200, `${method} ${path} on an unknown thread: an empty one`);
        assert.ok(!JSON.stringify(none.json).includes(thread), "nothing of alice's");
      } else if (!path.startsWith("/instance-ai/chat/")) {
        const none = await b.call(method, path.replace(thread, unknown), body);
        assert.equal(none.status, 404, `${method} ${path} on an unknown thread`);
        assert.equal(none.json.error.code, code);
      }
    }
    const evs = b.events(thread);
    await evs.ready;
    assert.equal(evs.status, 404);
    assert.equal((await a.status(thread)).json.isSuspended, true, "nothing changed for the owner");
    sse.close();
    await a.cancel(thread);
  });

  test("a caller header a client sends is never believed: the Worker sets its own over it", async () => {
    const a = alice();
    const b = bob();
    const thread = newThread("forge");
    assert.equal((await a.chat(thread, "mine")).status, 200);
    // The header the Worker forwards the caller in, claiming to be the owner.
    const forged = { "x-threadline-caller": b64({ kind: "actor", id: "alice", roles: [] }) };
    for (const [method, path, body] of [
      ["GET", `/instance-ai/threads/${thread}/status`],
      ["GET", `/instance-ai/threads/${thread}/messages`],
      ["POST", `/instance-ai/chat/${thread}/cancel`],
      ["POST", `/instance-ai/chat/${thread}`, { message: "mine now?" }],
    ]) {
      const theirs = await b.call(method, path, body, forged);
      assert.equal(theirs.status, 404, `${method} ${path} as bob claiming alice`);
      const nobody = await client(worker.url).call(method, path, body, forged);
      assert.equal(nobody.status, 401, `${method} ${path} with no token, claiming alice`);
    }
    const evs = b.events(thread, { headers: forged });
    await evs.ready;
    assert.equal(evs.status, 404, "a stream claiming the owner");
    assert.equal((await a.status(thread)).status, 200, "the owner still reads it");
    await a.cancel(thread);
  });

  test("a confirmation obeys its approver role: the owner without it gets 403, a holder decides", async () => {
    const a = alice();
    const thread = newThread("role");
    await a.chat(thread, 'pay [[tool:guarded:{"text":"role"}]]');
    const sse = a.events(thread);
    await sse.ready;
    const req = await sse.waitFor((e) => e.type === "confirmation-request");
    const mine = await a.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true });
    assert.equal(mine.status, 403);
    assert.equal(mine.json.error.code, "approver_required");
    const finance = as(worker.url, token("frank", { iss: "test-issuer", roles: ["FINANCE"] }));
    const ok = await finance.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true });
    assert.equal(ok.status, 200, ok.text);
    await sse.waitFor((e) => e.type === "tool-result");
    // The approver may decide, not read the thread.
    assert.equal((await finance.messages(thread)).status, 404);
    sse.close();
  });
});

describe("stream tokens", () => {
  test("EventSource clients use a short-lived read-only token in ?token=; a JWT in a URL is refused", async () => {
    const a = alice();
    const thread = newThread("st");
    await a.chat(thread, "hello");
    const issued = await a.call("POST", `/instance-ai/threads/${thread}/stream-token`);
    assert.equal(issued.status, 200, issued.text);
    assert.ok(issued.json.expiresAt > Date.now());
    const t = encodeURIComponent(issued.json.token);
    const sse = openSse(`${worker.url}/instance-ai/events/${thread}?token=${t}`);
    await sse.ready;
    assert.equal(sse.status, 200);
    await sse.waitFor((e) => e.type === "run-start");
    sse.close();
    const other = newThread("st2");
    await a.chat(other, "hello");
    const wrongThread = openSse(`${worker.url}/instance-ai/events/${other}?token=${t}`);
    await wrongThread.ready;
    assert.equal(wrongThread.status, 401);
    const readOnly = await client(worker.url).call("GET", `/instance-ai/threads/${thread}/messages?token=${t}`);
    assert.equal(readOnly.status, 401, "not accepted on other routes");
    const jwt = openSse(`${worker.url}/instance-ai/events/${thread}?token=${token("alice", { iss: "test-issuer" })}`);
    await jwt.ready;
    assert.equal(jwt.status, 401);
    assert.equal(JSON.parse(jwt.raw).error.code, "token_in_url");
  });
});

describe("CORS", () => {
  test("preflight and responses carry CORS headers for allowed origins only", async () => {
    const pre = await fetch(`${worker.url}/instance-ai/chat/x`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), "https://app.example");
    assert.match(pre.headers.get("access-control-allow-headers"), /authorization/);
    const denied = await fetch(`${worker.url}/instance-ai/chat/x`, { method: "OPTIONS", headers: { origin: "https://evil.example" } });
    assert.equal(denied.status, 403);
    assert.equal(denied.headers.get("access-control-allow-origin"), null);
    const r = await fetch(`${worker.url}/instance-ai/threads/x/status`, { headers: { origin: "https://app.example" } });
    assert.equal(r.headers.get("access-control-allow-origin"), "https://app.example");
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  });
});

describe("limits", () => {
  test("subscribers per thread: 429 beyond MAX_SUBSCRIBERS", async () => {
    const a = alice();
    const thread = newThread("subs");
    await a.chat(thread, "hi");
    const open = [];
    for (let i = 0; i < 3; i++) {
      const s = a.events(thread);
      await s.ready;
      assert.equal(s.status, 200);
      open.push(s);
    }
    const extra = a.events(thread);
    await extra.ready;
    assert.equal(extra.status, 429);
    assert.equal(JSON.parse(extra.raw).error.code, "too_many_subscribers");
    open.forEach((s) => s.close());
    await until(async () => {
      const s = a.events(thread);
      await s.ready;
      s.close();
      return s.status === 200;
    }, { what: "a slot to free up" });
  });

  test("sends per actor per minute: 429 with Retry-After", async () => {
    const hook = await startWebhook();
    const w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET, RUNS_PER_MINUTE: "3", AGENT_WEBHOOK_URL: hook.url } });
    try {
      const a = as(w.url, token("rita"));
      const codes = [];
      for (let i = 0; i < 4; i++) {
        const r = await a.chat(newThread("rl"), "hi");
        codes.push(r.status);
        if (r.status === 429) {
          assert.equal(r.json.error.code, "rate_limited");
          assert.ok(Number(r.headers.get("retry-after")) >= 1);
        }
      }
      assert.deepEqual(codes, [200, 200, 200, 429]);
      // Another actor has their own budget.
      assert.equal((await as(w.url, token("sam")).chat(newThread("rl"), "hi")).status, 200);
    } finally {
      await w.stop();
      await hook.close();
    }
  });

  test("event payloads over MAX_EVENT_BYTES and oversized batches are 413 with their own codes", async () => {
    const hook = await startWebhook();
    const w = await startWorker({ vars: { AUTH_MODE: "dev", MAX_EVENT_BYTES: "1000", MAX_BATCH_EVENTS: "5", AGENT_WEBHOOK_URL: hook.url } });
    try {
      const c = client(w.url);
      const thread = newThread("big");
      const r = await c.chat(thread, "hi");
      const sig = await hook.next((m) => m.runId === r.json.runId);
      const ev = (text) => ({ type: "text-delta", agentId: "orchestrator", responseId: "r", payload: { text } });
      const big = await c.publish(thread, r.json.runId, sig.publishToken, [ev("ok"), ev("x".repeat(2000))]);
      assert.equal(big.status, 413);
      assert.equal(big.json.error.code, "event_too_large");
      assert.equal(big.json.error.index, 1);
      const many = await c.publish(thread, r.json.runId, sig.publishToken, Array.from({ length: 6 }, () => ev("x")));
      assert.equal(many.status, 413);
      assert.equal(many.json.error.code, "batch_too_large");
    } finally {
      await w.stop();
      await hook.close();
    }
  });
});

describe("concurrency, delete, TTL", () => {
  test("100 simultaneous sends in reject mode: exactly one run starts", async () => {
    const hook = await startWebhook();
    const w = await startWorker({ vars: { AUTH_MODE: "dev", AGENT_WEBHOOK_URL: hook.url } });
    try {
      const c = client(w.url);
      const thread = newThread("cc");
      const replies = await Promise.all(Array.from({ length: 100 }, (_, i) => c.chat(thread, `m${i}`)));
      const ok = replies.filter((r) => r.status === 200);
      assert.equal(ok.length, 1);
      assert.ok(replies.filter((r) => r.status !== 200).every((r) => r.status === 409 && r.json.error.runId === ok[0].json.runId));
      await sleep(200);
      assert.equal(hook.received.filter((m) => m.type === "run" && m.threadId === thread).length, 1);
    } finally {
      await w.stop();
      await hook.close();
    }
  });

  test("DELETE removes the thread and ends its subscribers; idle threads expire by THREAD_TTL_DAYS", async () => {
    const a = alice();
    const thread = newThread("del");
    await a.chat(thread, "to be deleted");
    const sse = a.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-start");
    const d = await a.call("DELETE", `/instance-ai/threads/${thread}`);
    assert.deepEqual(d.json, { ok: true, deleted: thread });
    await until(() => sse.closed, { timeoutMs: 3000, what: "the stream to end" });
    // Gone: its id is a thread that does not exist yet, an empty one.
    assert.deepEqual([(await a.messages(thread)).json.nextEventId, (await a.status(thread)).json.hasActiveRun], [1, false]);
    const list = (await a.call("GET", "/agent/threads")).json.map((t) => t.id);
    assert.ok(!list.includes(thread));
    // The id can start over, as a new thread.
    assert.equal((await a.chat(thread, "again")).status, 200);

    const w = await startWorker({ vars: { AUTH_MODE: "dev", THREAD_TTL_DAYS: String(1500 / 86_400_000), AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" } });
    try {
      const c = client(w.url);
      const old = newThread("ttl");
      await c.chat(old, "short-lived");
      assert.ok((await c.messages(old)).json.nextEventId > 1);
      await until(async () => (await c.messages(old)).json.nextEventId === 1, { timeoutMs: 8000, stepMs: 250, what: "the TTL to delete it" });
    } finally {
      await w.stop();
    }
  });
});
