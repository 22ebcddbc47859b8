// Security review of the Trust issue, failing first: each test encodes the
// behaviour the review asks for and names its finding. Against the baseline
// build (2369c0a) the tests of a real finding fail; they pass once it is fixed.
// The page's Content-Security-Policy and the stored-HTML check in a browser
// are in tests/browser/csp.test.mjs (they need wrangler's [assets]).
//
// New configuration this file relies on (see each finding): STREAMS_AUTH=jwt,
// STREAMS_ROLE, MAX_QUEUE_BYTES, STREAM_TOKEN_TTL_MS, AGENT_WEBHOOK_TIMEOUT_MS.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import fs from "node:fs";
import zlib from "node:zlib";
import { once } from "node:events";
import { startWorker, startWebhook, client, openSse, newThread, sleep, until, hs256Jwt, startExternalRun } from "./support/harness.mjs";
import { freePort } from "./support/wrangler.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { fold } from "../client/dist/index.js";

const SECRET = "test-secret-0123456789abcdef0123456789";
const now = () => Math.floor(Date.now() / 1000);
const token = (sub, extra = {}) => hs256Jwt(SECRET, { sub, exp: now() + 300, ...extra });
const JWT = { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET };

/** A client that sends a bearer token (as in trust.test.mjs). */
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
    confirm: (requestId, body) => call("POST", `/instance-ai/confirm/${requestId}`, body),
    events: (thread, { query = "", headers = {} } = {}) =>
      openSse(`${base}/instance-ai/events/${thread}${query}`, { headers: bearer ? { authorization: `Bearer ${bearer}`, ...headers } : headers }),
  };
}

/** A worker for one test (or one describe); all are stopped after the file. */
const started = [];
async function worker(vars, opts = {}) {
  const w = await startWorker({ vars, ...opts });
  started.push(w);
  return w;
}
after(async () => {
  for (const w of started) await w.stop();
});

/**
 * One HTTP request through node:http, so the Host header (and anything else
 * fetch forbids) can be set. Answers {status, headers, text, json}.
 */
function rawRequest(base, { method = "GET", path, headers = {}, body }) {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent: false }, (res) => {
      const bufs = [];
      res.on("data", (d) => bufs.push(d));
      res.on("end", () => {
        let buf = Buffer.concat(bufs);
        if (res.headers["content-encoding"] === "gzip") buf = zlib.gunzipSync(buf);
        const text = buf.toString("utf8");
        let json;
        try {
          json = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    req.on("error", reject);
    if (body === undefined) req.end();
    else req.end(typeof body === "string" ? body : JSON.stringify(body));
  });
}

/**
 * POSTs a body of `total` bytes to `path`: with `declared`, its size is in
 * Content-Length, else it goes chunked. Only `sendBytes` (default all) are
 * written, and writing stops as soon as an answer arrives. Resolves with
 * {status, json, elapsedMs, written, bodyComplete} or {error | timedOut}.
 */
function sendOversized(base, { path, total, declared, sendBytes = total, headers = {}, timeoutMs = 30_000, chunk = 1 << 20 }) {
  const u = new URL(base);
  return new Promise((resolve) => {
    const t0 = Date.now();
    let written = 0;
    let answered = false;
    let bodyComplete = false;
    let settled = false;
    const done = (r) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve({ elapsedMs: Date.now() - t0, written, bodyComplete, ...r });
    };
    const h = { "content-type": "application/json", ...headers };
    if (declared) h["content-length"] = String(total);
    const req = http.request({ host: u.hostname, port: u.port, method: "POST", path, headers: h, agent: false }, (res) => {
      answered = true;
      const atHeaders = bodyComplete;
      const bufs = [];
      res.on("data", (d) => bufs.push(d));
      const finish = () => {
        let buf = Buffer.concat(bufs);
        try {
          if (res.headers["content-encoding"] === "gzip") buf = zlib.gunzipSync(buf);
        } catch {}
        let json;
        try {
          json = JSON.parse(buf.toString("utf8"));
        } catch {}
        done({ status: res.statusCode, json, bodyCompleteAtAnswer: atHeaders });
      };
      res.on("end", finish);
      res.on("error", finish);
      res.on("aborted", finish);
    });
    // A server that answers early may reset the connection while the body is
    // still being written: give its answer a moment to be read first.
    req.on("error", (e) => setTimeout(() => done({ error: e.code ?? e.message }), 300));
    const timer = setTimeout(() => done({ timedOut: true }), timeoutMs);
    const buf = Buffer.alloc(chunk, 0x78);
    (async () => {
      // A declared length is refused on the headers alone: the answer comes
      // before any of the body is sent. (Writing at once races it: once the
      // server closes, Linux drops an unread answer when the reset lands.)
      if (declared) {
        req.flushHeaders();
        for (let waited = 0; !answered && !settled && waited < 1000; waited += 20) await new Promise((r) => setTimeout(r, 20));
      }
      while (!answered && !settled && written < sendBytes) {
        const n = Math.min(chunk, sendBytes - written);
        const ok = req.write(n === chunk ? buf : buf.subarray(0, n));
        written += n;
        if (!ok) {
          await new Promise((r) => {
            const go = () => {
              req.off("drain", go);
              req.off("close", go);
              r();
            };
            req.on("drain", go);
            req.on("close", go);
          });
        }
      }
      if (!answered && !settled && written >= total) {
        bodyComplete = true;
        req.end();
      }
    })();
  });
}

/** The workerd process serving a harness worker started on `port`: the node
 * child's process group holds it. */
function workerdPid(port) {
  const procs = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      procs.push({ pid: Number(d), cmdline, comm, pgrp: Number(fields[2]) });
    } catch {}
  }
  const node = procs.find((p) => p.cmdline.some((a) => a.endsWith("serve.mjs")) && p.cmdline.includes(String(port)));
  assert.ok(node, `the harness's node process for port ${port}`);
  const wd = procs.find((p) => p.pgrp === node.pid && p.comm === "workerd");
  assert.ok(wd, "workerd in the harness's process group");
  return wd.pid;
}

const rssMb = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/)[1]) / 1024;

const finish = (status = "completed") => ({ type: "run-finish", agentId: "orchestrator", payload: { status } });
const title = (t) => ({ type: "thread-title-updated", agentId: "orchestrator", payload: { title: t } });

// ---------------------------------------------------------------------------

describe("finding 1: approver roles are per request, not per thread", () => {
  let w, hook;
  before(async () => {
    hook = await startWebhook();
    w = await worker({
      ...JWT,
      AGENT_WEBHOOK_URL: hook.url,
      APPROVAL_POLICY: JSON.stringify({ pay: { approver: "finance" }, wipe: { required: true } }),
    });
  });
  after(() => hook?.close());

  const alice = () => as(w.url, token("alice"));
  const bob = () => as(w.url, token("bob", { roles: ["finance"] }));
  const carol = () => as(w.url, token("carol"));

  /** alice's run, suspended on two requests the agent published: `pay` (approver finance) and `wipe` (none). */
  async function twoRequests() {
    const a = alice();
    const thread = newThread("appr");
    const { runId, token: pt } = await startExternalRun(a, hook, thread);
    const req = (id, tool) => [
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `call_${id}`, toolName: tool, args: { id } } },
      {
        type: "confirmation-request",
        agentId: "orchestrator",
        payload: { requestId: id, toolCallId: `call_${id}`, toolName: tool, args: { id }, severity: "warning", message: `${tool}?`, inputType: "approval" },
      },
    ];
    const pub = await a.publish(thread, runId, pt, [...req("pay1", "pay"), ...req("wipe1", "wipe")]);
    assert.equal(pub.status, 200, pub.text);
    const sse = a.events(thread);
    await sse.ready;
    const pay = (await sse.waitFor((e) => e.type === "confirmation-request" && e.payload.toolName === "pay")).payload;
    const wipe = (await sse.waitFor((e) => e.type === "confirmation-request" && e.payload.toolName === "wipe")).payload;
    return { thread, runId, pay, wipe, sse };
  }

  test("finding 1: a finance holder (not the owner) decides `pay`, but `wipe` is the unknown-id 404 for them, on every decision route", async () => {
    // Each way bob may try `wipe` gets its own pair of requests, so one that
    // wrongly succeeds does not hide what the next would do.
    const attempts = [
      ["confirm once", (b, r) => b.confirm(r.wipe.requestId, { approved: true }), "confirmation_not_found"],
      ["confirm scope session", (b, r) => b.confirm(r.wipe.requestId, { approved: true, scope: "session" }), "confirmation_not_found"],
      ["agora approve", (b, r) => b.call("POST", "/agent/tool-call/approve", { runId: r.runId, toolCallId: r.wipe.toolCallId }), "tool_call_not_found"],
      ["agora reject", (b, r) => b.call("POST", "/agent/tool-call/reject", { runId: r.runId, toolCallId: r.wipe.toolCallId }), "tool_call_not_found"],
    ];
    const problems = [];
    for (const [what, attempt, code] of attempts) {
      const r = await twoRequests();
      const b = bob();
      const unknown = code === "confirmation_not_found"
        ? await b.confirm(`${r.thread}.nope-${Date.now()}`, { approved: true })
        : await b.call("POST", "/agent/tool-call/approve", { runId: r.runId, toolCallId: `call_nope_${Date.now()}` });
      assert.equal(unknown.status, 404, `${what} on an unknown id`);
      assert.equal(unknown.json.error.code, code);
      const got = await attempt(b, r);
      if (got.status !== 404 || got.json?.error?.code !== code) problems.push(`bob ${what} on wipe: ${got.status} ${got.text}`);
      else assert.deepEqual(got.json, unknown.json, `${what}: the same answer as an unknown id`);
      // Still pending: alice (owner, no role needed for wipe) can decide it,
      // and the agent heard of no decision before hers.
      const heard = hook.received.filter((m) => m.type === "confirmation" && m.runId === r.runId && m.requestId === "wipe1").length;
      if (heard) problems.push(`after bob ${what}, the agent was told a decision on wipe`);
      const mine = await alice().confirm(r.wipe.requestId, { approved: false, userInput: "no" });
      if (mine.status !== 200) problems.push(`after bob ${what}, alice deciding wipe: ${mine.status} ${mine.text}`);
      // bob decides pay, the request his role names.
      const pay = await b.confirm(r.pay.requestId, { approved: true });
      if (pay.status !== 200 || pay.json?.state !== "approved") problems.push(`bob deciding pay: ${pay.status} ${pay.text}`);
      r.sse.close();
    }
    assert.deepEqual(problems, []);
  });

  test("finding 1: a caller with no roles gets 404 on both requests", async () => {
    const { pay, wipe, sse, thread } = await twoRequests();
    const c = carol();
    for (const r of [pay, wipe]) {
      const d = await c.confirm(r.requestId, { approved: true });
      assert.equal(d.status, 404, r.toolName);
      assert.equal(d.json.error.code, "confirmation_not_found", r.toolName);
    }
    assert.equal((await alice().status(thread)).json.isSuspended, true);
    sse.close();
  });

  test("finding 1: the owner without the approver role: 403 approver_required on `pay`, 200 on `wipe`", async () => {
    const { pay, wipe, sse } = await twoRequests();
    const a = alice();
    const p = await a.confirm(pay.requestId, { approved: true });
    assert.equal(p.status, 403, p.text);
    assert.equal(p.json.error.code, "approver_required");
    const q = await a.confirm(wipe.requestId, { approved: true });
    assert.equal(q.status, 200, q.text);
    sse.close();
  });
});

// ---------------------------------------------------------------------------

describe("finding 2: /v1/stream/* is off unless STREAMS_AUTH configures it", () => {
  const METHODS = ["PUT", "POST", "GET", "HEAD", "DELETE"];
  const streamCall = (base, method, name, bearer) =>
    fetch(`${base}/v1/stream/${name}${method === "GET" ? "?offset=-1" : ""}`, {
      method,
      headers: { "content-type": "text/plain", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
      body: method === "POST" ? "hello" : undefined,
    });

  /** Every method on one stream path answers 404 not_found. */
  async function allNotFound(base, bearer, what) {
    const name = `off-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    for (const method of METHODS) {
      const r = await streamCall(base, method, name, bearer);
      const text = await r.text();
      assert.equal(r.status, 404, `${what}: ${method} answered ${r.status} ${text}`);
      if (method !== "HEAD") {
        let json;
        try {
          json = JSON.parse(text);
        } catch {}
        assert.equal(json?.error?.code, "not_found", `${what}: ${method} body ${text}`);
      }
    }
  }

  /** A stream's whole life works for `bearer`. */
  async function works(base, bearer, what) {
    const name = `on-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const put = await streamCall(base, "PUT", name, bearer);
    assert.equal(put.status, 201, `${what}: PUT ${put.status} ${await put.text()}`);
    const post = await streamCall(base, "POST", name, bearer);
    assert.ok(post.status >= 200 && post.status < 300, `${what}: POST ${post.status}`);
    const get = await streamCall(base, "GET", name, bearer);
    assert.equal(get.status, 200, `${what}: GET`);
    assert.equal(await get.text(), "hello");
    assert.equal((await streamCall(base, "HEAD", name, bearer)).status, 200, `${what}: HEAD`);
    const del = await streamCall(base, "DELETE", name, bearer);
    assert.ok(del.status >= 200 && del.status < 300, `${what}: DELETE ${del.status}`);
  }

  test("finding 2: STREAMS_AUTH unset with AUTH_MODE=jwt: every method is 404, even with a valid token", async () => {
    const w = await worker({ ...JWT, AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
    await allNotFound(w.url, token("alice", { roles: ["streams"] }), "valid token");
    await allNotFound(w.url, undefined, "no token");
  });

  test("finding 2: STREAMS_AUTH unset with AUTH_MODE=dev: every method is 404", async () => {
    const w = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
    await allNotFound(w.url, undefined, "dev");
  });

  test("finding 2: STREAMS_AUTH=none opens it to anyone, no token needed", async () => {
    const w = await worker({ ...JWT, STREAMS_AUTH: "none", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
    await works(w.url, undefined, "no token");
  });

  test("finding 2: STREAMS_AUTH=jwt: 401 without a token, 403 role_required without the `streams` role, works with it", async () => {
    const w = await worker({ ...JWT, STREAMS_AUTH: "jwt", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
    const name = `jwt-${Date.now()}`;
    for (const method of METHODS) {
      const r = await streamCall(w.url, method, name, undefined);
      assert.equal(r.status, 401, `no token: ${method}`);
      if (method !== "HEAD") assert.equal((await r.json()).error.code, "unauthorized");
    }
    const bad = await streamCall(w.url, "GET", name, token("alice").slice(0, -2) + "xx");
    assert.equal(bad.status, 401, "a token that does not verify");
    for (const method of METHODS) {
      const r = await streamCall(w.url, method, name, token("alice", { roles: ["finance"] }));
      const text = await r.text();
      assert.equal(r.status, 403, `valid token without the role: ${method} answered ${r.status} ${text}`);
      if (method !== "HEAD") assert.equal(JSON.parse(text).error.code, "role_required");
    }
    await works(w.url, token("svc", { roles: ["streams"] }), "with the streams role");
  });

  test("finding 2: STREAMS_ROLE=custom names the role", async () => {
    const w = await worker({ ...JWT, STREAMS_AUTH: "jwt", STREAMS_ROLE: "custom", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
    const r = await streamCall(w.url, "PUT", `custom-${Date.now()}`, token("svc", { roles: ["streams"] }));
    const text = await r.text();
    assert.equal(r.status, 403, `the default role no longer opens it: ${r.status} ${text}`);
    assert.equal(JSON.parse(text).error.code, "role_required");
    await works(w.url, token("svc", { roles: ["custom"] }), "with the custom role");
  });
});

// ---------------------------------------------------------------------------

describe("finding 3: stored content is never served as an active document", () => {
  // The page's own CSP (GET /, GET /app.js) and a real browser opening a
  // stored HTML stream: tests/browser/csp.test.mjs.
  const CSP = "sandbox; default-src 'none'";
  let w;
  before(async () => {
    w = await worker({ STREAMS_AUTH: "none", STREAMS_LONG_POLL_MS: "300", AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook" });
  });

  const assertHeaders = (r, what) => {
    assert.equal(r.headers.get("content-security-policy"), CSP, `${what}: Content-Security-Policy`);
    assert.equal(r.headers.get("x-content-type-options"), "nosniff", `${what}: nosniff`);
  };

  test("finding 3: every /v1/stream/* read carries `Content-Security-Policy: sandbox; default-src 'none'` and nosniff", async () => {
    const name = `html-${Date.now()}`;
    const html = `<script>document.title="pwned"; fetch("/pwned")</script>`;
    const put = await fetch(`${w.url}/v1/stream/${name}`, { method: "PUT", headers: { "content-type": "text/html" } });
    assert.equal(put.status, 201);
    const post = await fetch(`${w.url}/v1/stream/${name}`, { method: "POST", headers: { "content-type": "text/html" }, body: html });
    assert.ok(post.ok, String(post.status));

    const catchUp = await fetch(`${w.url}/v1/stream/${name}?offset=-1`);
    assert.equal(catchUp.status, 200);
    assert.match(catchUp.headers.get("content-type"), /text\/html/);
    assert.equal(await catchUp.text(), html);
    assertHeaders(catchUp, "catch-up GET");

    const plain = await fetch(`${w.url}/v1/stream/${name}`);
    assertHeaders(plain, `GET without offset (${plain.status})`);

    const tail = catchUp.headers.get("stream-next-offset");
    const poll = await fetch(`${w.url}/v1/stream/${name}?offset=${tail}&live=long-poll`);
    assert.equal(poll.status, 204);
    assertHeaders(poll, "long-poll GET");

    const ac = new AbortController();
    const sse = await fetch(`${w.url}/v1/stream/${name}?offset=-1&live=sse`, { signal: ac.signal });
    assert.equal(sse.status, 200);
    assertHeaders(sse, "SSE GET");
    ac.abort();

    const missing = await fetch(`${w.url}/v1/stream/none-${Date.now()}?offset=-1`);
    assert.equal(missing.status, 404);
    assertHeaders(missing, "GET of a missing stream");
  });
});

// ---------------------------------------------------------------------------

describe("finding 4: bodies over a route's limit are refused before they are buffered", () => {
  let w, hook, api, port;
  before(async () => {
    hook = await startWebhook();
    port = await freePort();
    w = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: hook.url, SSE_PING_MS: "500", MAX_FILE_BYTES: "1048576", MAX_FILES_PER_MESSAGE: "2" }, { port });
    api = client(w.url);
  });
  after(() => hook?.close());

  test("finding 4: a publish whose Content-Length is over MAX_BATCH_BYTES is 413 at once, before the body is sent", async () => {
    const thread = newThread("cl");
    const { runId, token: pt } = await startExternalRun(api, hook, thread);
    const r = await sendOversized(w.url, {
      path: `/instance-ai/threads/${thread}/runs/${runId}/events`,
      headers: { authorization: `Bearer ${pt}` },
      total: 100 * 1024 * 1024,
      declared: true,
      sendBytes: 16,
      timeoutMs: 3000,
    });
    assert.ok(!r.timedOut, `no answer within 3 s while the declared body was still owed (${JSON.stringify(r)})`);
    assert.equal(r.status, 413, JSON.stringify(r));
    assert.equal(r.json?.error?.code, "body_too_large");
    assert.equal(r.bodyComplete, false);
  });

  // A send may carry files inline: its cap is MAX_BODY_BYTES and, as
  // base64, MAX_FILES_PER_MESSAGE files of MAX_FILE_BYTES (here 256 KiB and
  // 2 × 1 MiB: about 3 MB).
  test("finding 4: a chat body whose Content-Length is over what a send may carry is 413 at once", async () => {
    const r = await sendOversized(w.url, {
      path: `/instance-ai/chat/${newThread("clc")}`,
      total: 10 * 1024 * 1024,
      declared: true,
      sendBytes: 16,
      timeoutMs: 3000,
    });
    assert.ok(!r.timedOut, `no answer within 3 s while the declared body was still owed (${JSON.stringify(r)})`);
    assert.equal(r.status, 413, JSON.stringify(r));
    assert.equal(r.json?.error?.code, "body_too_large");
  });

  test("finding 4: chunked bodies over the limit are 413 body_too_large (publish and chat)", async () => {
    const thread = newThread("ch");
    const { runId, token: pt } = await startExternalRun(api, hook, thread);
    const pub = await sendOversized(w.url, {
      path: `/instance-ai/threads/${thread}/runs/${runId}/events`,
      headers: { authorization: `Bearer ${pt}` },
      total: 3 * 1024 * 1024,
      declared: false,
      timeoutMs: 10_000,
    });
    assert.equal(pub.status, 413, JSON.stringify(pub));
    assert.equal(pub.json?.error?.code, "body_too_large");
    const chat = await sendOversized(w.url, { path: `/instance-ai/chat/${newThread("chc")}`, total: 1024 * 1024, declared: false, timeoutMs: 10_000 });
    assert.equal(chat.status, 413, JSON.stringify(chat));
    assert.equal(chat.json?.error?.code, "body_too_large");
  });

  test("finding 4: 3 × 60 MB publishes (declared, then chunked; no valid token) are 413 while another thread streams, and workerd's RSS grows < 64 MB", async () => {
    const pid = workerdPid(port);
    // The other thread: a live subscriber and an agent publishing meanwhile.
    const thread = newThread("live");
    const { runId, token: pt } = await startExternalRun(api, hook, thread);
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-start");
    await sleep(300);
    const before = rssMb(pid);
    let peak = before;
    const seenAt = new Map();
    const scan = () => {
      for (const e of sse.events()) if (e.type === "thread-title-updated" && !seenAt.has(e.payload.title)) seenAt.set(e.payload.title, Date.now());
    };
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssMb(pid));
      } catch {}
      scan();
    }, 20);
    let publishing = true;
    const published = [];
    const publisher = (async () => {
      for (let i = 0; publishing; i++) {
        const at = Date.now();
        const r = await api.publish(thread, runId, pt, [title(`tick-${i}`)]);
        published.push({ i, at, status: r.status });
        await sleep(100);
      }
    })();
    const victim = newThread("flood");
    const path = `/instance-ai/threads/${victim}/runs/${victim}.run_x/events`;
    const SIZE = 60 * 1024 * 1024;
    const results = [];
    try {
      for (const declared of [true, false]) {
        const round = await Promise.all(
          [0, 1, 2].map(() => sendOversized(w.url, { path, total: SIZE, declared, headers: { authorization: "Bearer not-a-token" }, timeoutMs: 60_000 })),
        );
        results.push(...round.map((r) => ({ declared, ...r })));
      }
      await sleep(500);
    } finally {
      publishing = false;
      await publisher;
      clearInterval(sampler);
    }
    const afterRss = rssMb(pid);
    const growth = peak - before;
    // Delivery on the other thread: when each tick reached the subscriber.
    await until(() => (scan(), published.every((p) => seenAt.has(`tick-${p.i}`))), { timeoutMs: 3000, stepMs: 20, what: "the ticks" }).catch(() => {});
    const lags = published.map((p) => (seenAt.has(`tick-${p.i}`) ? seenAt.get(`tick-${p.i}`) - p.at : Infinity));
    const figures =
      `workerd RSS ${before.toFixed(1)} MB before, peak ${peak.toFixed(1)} MB (+${growth.toFixed(1)} MB), ${afterRss.toFixed(1)} MB after; ` +
      results.map((r) => `${r.declared ? "declared" : "chunked"}: ${r.status ?? r.error ?? "timeout"} ${r.json?.error?.code ?? ""} in ${r.elapsedMs} ms after ${(r.written / 1048576).toFixed(0)} MB`).join(", ") +
      `; other thread: ${published.length} publishes (${published.filter((p) => p.status !== 200).length} not 200), delivery lag max ${Math.max(...lags)} ms`;
    console.log(`finding 4 figures: ${figures}`);

    const problems = [];
    for (const r of results) {
      if (r.status !== 413 || r.json?.error?.code !== "body_too_large") problems.push(`a ${r.declared ? "declared" : "chunked"} 60 MB publish answered ${r.status ?? r.error ?? "nothing"} ${r.json?.error?.code ?? ""}`);
    }
    if (published.length < 3) problems.push("the other thread's agent could hardly publish");
    if (!published.every((p) => p.status === 200)) problems.push("the other thread's publishes failed");
    if (!lags.every((l) => l < 2000)) problems.push("events published meanwhile did not all reach the subscriber within 2 s");
    if (!(growth < 64)) problems.push(`workerd RSS grew by ${growth.toFixed(1)} MB (limit 64)`);
    assert.deepEqual(problems, [], figures);
    sse.close();
  });
});

// ---------------------------------------------------------------------------

describe("finding 5: a refused send claims nothing", () => {
  let w;
  before(async () => {
    w = await worker({ ...JWT, AGENT_WEBHOOK_URL: "http://127.0.0.1:9/hook", MAX_MESSAGE_BYTES: "100" });
  });

  test("finding 5: alice's invalid send does not make the thread hers: bob's valid send takes it, alice gets 404", async () => {
    const a = as(w.url, token("alice"));
    const b = as(w.url, token("bob"));
    const thread = newThread("claim");
    const bad = await a.call("POST", `/instance-ai/chat/${thread}`, { message: "" });
    assert.equal(bad.status, 400);
    const ok = await b.chat(thread, "hi, this one is mine");
    assert.equal(ok.status, 200, `bob's send: ${ok.status} ${ok.text}`);
    assert.equal((await b.status(thread)).status, 200);
    const theirs = await a.status(thread);
    assert.equal(theirs.status, 404);
    assert.equal(theirs.json.error.code, "thread_not_found");
  });

  test("finding 5: any refused send leaves a fresh thread nonexistent, for its own caller too", async () => {
    const a = as(w.url, token("alice"));
    const cases = [
      [{ message: "" }, 400, "message_required"],
      [{ message: 5 }, 400, "message_required"],
      [{ message: "x".repeat(200) }, 413, "message_too_large"],
      [{ message: "hi", mode: "later" }, 400, "invalid_mode"],
      [{ message: "hi", model: "no-such-model" }, 400, "model_not_allowed"],
      ["not json", 400, "invalid_json"],
      [{ regenerate: true }, 400, "thread_required"],
    ];
    const left = [];
    for (const [body, status, code] of cases) {
      const thread = newThread("refused");
      const r = await a.call("POST", `/instance-ai/chat/${thread}`, body);
      assert.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.json.error.code, code, JSON.stringify(body));
      // Nonexistent: an empty thread, nothing stored, nobody's.
      const m = await a.messages(thread);
      if (m.status !== 200 || m.json.nextEventId !== 1) left.push(`${code}: messages ${m.status} ${m.text}`);
    }
    assert.deepEqual(left, [], "refused sends that left a thread behind");
  });
});

// ---------------------------------------------------------------------------

describe("finding 6: rows the server builds stay under SQLite's 2 MB row limit", () => {
  test("finding 6a: the stored queue is capped by MAX_QUEUE_BYTES (413 queue_too_large with `limit`), and keeps working after a refusal", async () => {
    const hook = await startWebhook();
    try {
      const w = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: hook.url });
      const api = client(w.url);
      const thread = newThread("qbig");
      const { runId, token: pt } = await startExternalRun(api, hook, thread, "hold the thread");
      const heavy = (i) => String.fromCharCode(48 + i) + "\u0001".repeat(29_999); // 30 KB, 180 KB once JSON-escaped
      const accepted = [];
      let refused;
      let lastQueue = { items: [], paused: false };
      for (let i = 0; i < 12; i++) {
        const r = await api.chat(thread, heavy(i), { mode: "queue" });
        if (r.status === 202) {
          accepted.push(r.json.messageId);
          lastQueue = r.json.queue;
          continue;
        }
        refused = { i, r };
        break;
      }
      assert.ok(refused, `all twelve (${(12 * 180) / 1000} MB escaped) were queued`);
      const problems = [];
      const { r } = refused;
      if (r.status !== 413 || r.json?.error?.code !== "queue_too_large" || r.json?.error?.limit !== 1_000_000) {
        problems.push(`send #${refused.i + 1} (${accepted.length} accepted) answered ${r.status} ${r.text.slice(0, 200)}`);
      }
      const size = Buffer.byteLength(JSON.stringify(lastQueue));
      if (size > 1_000_000) problems.push(`the accepted queue is ${size} bytes of JSON`);
      if (size + Buffer.byteLength(JSON.stringify(heavy(refused.i))) <= 1_000_000) problems.push(`send #${refused.i + 1} was refused with room left (${size} bytes queued)`);

      // The queue still works.
      const listed = await api.call("GET", `/instance-ai/threads/${thread}/queue`);
      const ids = listed.json?.queue?.items?.map((i) => i.messageId) ?? [];
      if (listed.status !== 200 || JSON.stringify(ids) !== JSON.stringify(accepted)) {
        problems.push(`GET queue: ${listed.status}, ${ids.length} items for ${accepted.length} accepted`);
      }
      const small = await api.chat(thread, "small one", { mode: "queue" });
      if (small.status !== 202) problems.push(`a small queued send: ${small.status} ${small.text.slice(0, 200)}`);
      const edit = await api.call("PATCH", `/instance-ai/threads/${thread}/queue/${accepted[0]}`, { message: "edited head" });
      if (edit.status !== 200) problems.push(`an edit: ${edit.status} ${edit.text.slice(0, 200)}`);
      const fin = await api.publish(thread, runId, pt, [finish()]);
      if (fin.status !== 200) problems.push(`the run's finish: ${fin.status} ${fin.text.slice(0, 200)}`);
      const next = await hook.next((m) => m.type === "run" && m.runId === accepted[0], 5000).catch(() => undefined);
      if (!next) problems.push("the run's finish did not start the queue's head");
      else if (next.message !== "edited head") problems.push(`the queue's head started with ${JSON.stringify(next.message.slice(0, 20))}, not its edit`);
      assert.deepEqual(problems, []);
    } finally {
      await hook.close();
    }
  });

  test("finding 6b: 3 MB of text in one segment: every publish is 2xx and replay and messages show it exactly once", async () => {
    const hook = await startWebhook();
    try {
      const w = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: hook.url });
      const api = client(w.url);
      const thread = newThread("long");
      const { runId, token: pt } = await startExternalRun(api, hook, thread);
      const PIECE = 100_000;
      const pieces = Array.from({ length: 30 }, (_, i) => `[${String(i).padStart(2, "0")}]`.padEnd(PIECE, "abcdefghij"));
      const expected = pieces.join("");
      const statuses = [];
      for (let b = 0; b < pieces.length; b += 5) {
        const batch = pieces.slice(b, b + 5).map((text) => ({ type: "text-delta", agentId: "orchestrator", responseId: "seg-1", payload: { text } }));
        const r = await api.publish(thread, runId, pt, batch);
        statuses.push(`${r.status}${r.json?.error ? " " + r.json.error.code : ""}`);
      }
      const end = await api.publish(thread, runId, pt, [finish()]);
      statuses.push(`${end.status}${end.json?.error ? " " + end.json.error.code : ""}`);
      assert.ok(statuses.every((s) => s.startsWith("2")), `publish answers: ${statuses.join(", ")}`);

      const fresh = api.events(thread, { query: "?lastEventId=0" });
      await fresh.ready;
      await fresh.waitFor((e) => e.type === "run-finish", 10_000, "run-finish in the replay");
      const tree = fold(fresh.events().filter((e) => e.runId === runId));
      assert.equal(tree.textContent.length, expected.length, "replayed text length");
      assert.ok(tree.textContent === expected, "the replay shows the text exactly once, in order");
      fresh.close();
      const m = await api.messages(thread);
      assert.equal(m.status, 200);
      const answer = m.json.messages.find((x) => x.role === "assistant");
      assert.equal(answer.content.length, expected.length, "messages text length");
      assert.ok(answer.content === expected, "messages show the text exactly once, in order");
    } finally {
      await hook.close();
    }
  });

  test("finding 6c: a built-in tool's 3 MB answer: the run completes and the stored tool-result is under 1 MB with a truncation marker", async () => {
    // The demo tools cannot answer this big: `echo` returns its arguments,
    // which come from the user's message (MAX_MESSAGE_BYTES, 32 KB). So this
    // test serves its own tool.
    const BIG = 3 * 1024 * 1024;
    const big = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ data: "y".repeat(BIG) }));
      });
    });
    big.listen(0, "127.0.0.1");
    await once(big, "listening");
    const llm = await startFakeLlm({ port: 0, delayMs: 1 });
    try {
      const tools = [{ name: "big", description: "A big answer", url: `http://127.0.0.1:${big.address().port}/big`, parameters: { type: "object", properties: {} } }];
      const w = await worker({ AUTH_MODE: "dev", LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools) });
      const api = client(w.url);
      const thread = newThread("bigtool");
      const r = await api.chat(thread, "fetch it [[tool:big]]");
      assert.equal(r.status, 200, r.text);
      const sse = api.events(thread);
      await sse.ready;
      const fin = await sse.waitFor((e) => e.type === "run-finish", 20_000, "run-finish");
      const errs = sse.events().filter((e) => e.type === "error" || e.type === "tool-error").map((e) => JSON.stringify(e.payload).slice(0, 200));
      assert.equal(fin.payload.status, "completed", `run-finish ${JSON.stringify(fin.payload)}; errors: ${errs.join(" | ")}`);
      const result = sse.events().find((e) => e.type === "tool-result");
      assert.ok(result, `a tool-result was stored (errors: ${errs.join(" | ")})`);
      const size = Buffer.byteLength(JSON.stringify(result.payload));
      assert.ok(size < 1_000_000, `tool-result payload is ${size} bytes`);
      assert.match(JSON.stringify(result.payload), /truncat/i, "a truncation marker");
      sse.close();
    } finally {
      await llm.close();
      await new Promise((r) => big.close(r));
    }
  });

  // Finding 6d: a publish that storage refuses ends the run. Over HTTP the
  // only storage refusals left are the oversized rows of 6b and 6c (every
  // published event is size-checked before it is stored), so these tests
  // provoke it with those shapes: on the baseline the refused write leaves
  // the run active (until RUN_IDLE_TIMEOUT_MS, 10 min by default). Once 6b and
  // 6c are fixed nothing is refused here and the runs end normally, so these
  // then only guard the symptom; the refusal path itself belongs in the
  // core's fault-injection tests (durable/src/storage/store.rs's in-memory store).
  test("finding 6d: an external agent's publish that storage refuses does not leave the run active", async () => {
    const hook = await startWebhook();
    try {
      const w = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: hook.url });
      const api = client(w.url);
      const thread = newThread("refused-store");
      const { runId, token: pt } = await startExternalRun(api, hook, thread);
      const text = "z".repeat(100_000);
      for (let b = 0; b < 6; b++) {
        await api.publish(thread, runId, pt, Array.from({ length: 5 }, () => ({ type: "text-delta", agentId: "orchestrator", responseId: "seg-1", payload: { text } })));
      }
      const end = await api.publish(thread, runId, pt, [finish()]);
      const s = await until(async () => {
        const st = await api.status(thread);
        return st.json.hasActiveRun ? undefined : st;
      }, { timeoutMs: 5000, what: "the run to end" }).catch(() => undefined);
      assert.ok(s, `the run is still active after its run-finish publish answered ${end.status} ${end.text.slice(0, 160)}`);
      const sse = api.events(thread);
      await sse.ready;
      await sse.waitFor((e) => e.type === "run-finish" && e.runId === runId, 3000, "a stored run-finish");
      sse.close();
    } finally {
      await hook.close();
    }
  });

  test("finding 6d: a built-in run whose event storage refuses ends with a run-finish", async () => {
    const big = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ data: "y".repeat(3 * 1024 * 1024) }));
      });
    });
    big.listen(0, "127.0.0.1");
    await once(big, "listening");
    const llm = await startFakeLlm({ port: 0, delayMs: 1 });
    try {
      const tools = [{ name: "big", description: "A big answer", url: `http://127.0.0.1:${big.address().port}/big`, parameters: { type: "object", properties: {} } }];
      const w = await worker({ AUTH_MODE: "dev", LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools) });
      const api = client(w.url);
      const thread = newThread("refused-builtin");
      const r = await api.chat(thread, "fetch it [[tool:big]]");
      assert.equal(r.status, 200, r.text);
      const sse = api.events(thread);
      await sse.ready;
      await sse.waitFor((e) => e.type === "run-finish", 10_000, "run-finish (the run is left active)");
      assert.equal((await api.status(thread)).json.hasActiveRun, false);
      sse.close();
    } finally {
      await llm.close();
      await new Promise((r) => big.close(r));
    }
  });
});

// ---------------------------------------------------------------------------

describe("finding 7: publishUrl follows the send that started the run", () => {
  let w, hook;
  const EVIL = "evil.example";
  before(async () => {
    hook = await startWebhook();
    w = await worker({ ...JWT, AGENT_WEBHOOK_URL: hook.url, RUN_IDLE_TIMEOUT_MS: "1500" });
  });
  after(() => hook?.close());

  const path = (thread) => `/instance-ai/threads/${thread}/status`;
  const evil = (p, bearer, method = "GET", body) =>
    rawRequest(w.url, {
      method,
      path: p,
      headers: { host: EVIL, ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...(body ? { "content-type": "application/json" } : {}) },
      body,
    });
  const ownOrigin = () => new URL(w.url).origin;

  test("finding 7: requests with a foreign Host before the owner's send do not steer publishUrl", async () => {
    const thread = newThread("pu");
    const anon = await evil(path(thread));
    assert.equal(anon.status, 401);
    // Publishing needs no caller at the Worker: this one reaches the thread.
    const anonPublish = await evil(`/instance-ai/threads/${thread}/runs/${thread}.run_x/events`, undefined, "POST", [title("x")]);
    assert.ok(anonPublish.status >= 400 && anonPublish.status < 500, String(anonPublish.status));
    // Mallory reads the thread before it exists: an empty one.
    const other = await evil(path(thread), token("mallory"));
    assert.equal(other.status, 200);
    assert.equal(other.json.hasActiveRun, false);
    const otherSend = await evil(`/instance-ai/chat/${newThread("pu-other")}`, token("mallory"), "POST", { message: "mine" });
    assert.equal(otherSend.status, 200, otherSend.text);
    const r = await as(w.url, token("alice")).chat(thread, "hello");
    assert.equal(r.status, 200, r.text);
    const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
    assert.ok(sig.publishUrl.startsWith(`${ownOrigin()}/`), `publishUrl ${sig.publishUrl}`);
  });

  test("finding 7: foreign-Host requests racing the owner's send do not steer its publishUrl", async () => {
    // Foreign requests as the owner's send is served: another user's reads
    // (workerd mostly delivers them before or after the whole send) and
    // anonymous publishes (which reach the thread while the send waits, and
    // steer it on the baseline in about a third of the rounds).
    const urls = [];
    for (let round = 0; round < 10; round++) {
      const thread = newThread("race");
      const send = as(w.url, token("alice")).chat(thread, "hello");
      const foreign = [];
      for (let i = 0; i < 25; i++) {
        foreign.push(evil(path(thread), token("mallory")).catch(() => {}));
        foreign.push(evil(`/instance-ai/threads/${thread}/runs/${thread}.run_x/events`, undefined, "POST", [title("x")]).catch(() => {}));
        await sleep(1);
      }
      const r = await send;
      await Promise.all(foreign);
      assert.equal(r.status, 200, r.text);
      const sig = await hook.next((m) => m.type === "run" && m.runId === r.json.runId);
      urls.push(sig.publishUrl);
    }
    const steered = urls.filter((u) => !u.startsWith(`${ownOrigin()}/`));
    assert.deepEqual(steered, [], `publishUrls built on a foreign origin: ${steered.length} of ${urls.length}`);
  });

  test("finding 7: a queued run started after the idle alarm gets the origin of the send that queued it, whoever knocks next", async () => {
    // The send that started a queued run is the one that queued it. The run
    // ahead ends by the idle alarm (no request of anyone's); the next request
    // to reach the thread is an anonymous publish with a foreign Host (the
    // publish route takes requests without a caller).
    const a = as(w.url, token("alice"));
    const thread = newThread("pq");
    const first = await a.chat(thread, "first");
    assert.equal(first.status, 200, first.text);
    const queued = await a.chat(thread, "second", { mode: "queue" });
    assert.equal(queued.status, 202, queued.text);
    await hook.next((m) => m.type === "cancel" && m.runId === first.json.runId, 8000); // the idle alarm ended the first run
    await sleep(200);
    const knock = await evil(`/instance-ai/threads/${thread}/runs/${thread}.run_x/events`, undefined, "POST", [title("x")]);
    assert.ok(knock.status >= 400 && knock.status < 500, String(knock.status));
    const sig = await hook.next((m) => m.type === "run" && m.runId === queued.json.messageId, 5000);
    assert.ok(sig.publishUrl.startsWith(`${ownOrigin()}/`), `publishUrl ${sig.publishUrl}`);
  });
});

// ---------------------------------------------------------------------------

describe("finding 8: smaller ones", () => {
  let w, hook;
  before(async () => {
    hook = await startWebhook();
    w = await worker({ ...JWT, AGENT_WEBHOOK_URL: hook.url });
  });
  after(() => hook?.close());

  test("finding 8a: a `sub` with surrounding whitespace is 401 invalid_claims and never acts as the trimmed actor", async () => {
    const a = as(w.url, token("alice"));
    const thread = newThread("ws");
    assert.equal((await a.chat(thread, "mine")).status, 200);
    for (const sub of [" alice", "alice ", "\talice", "alice\t"]) {
      const x = as(w.url, token(sub));
      const s = await x.status(thread);
      assert.notEqual(s.status, 200, `${JSON.stringify(sub)} read alice's thread`);
      assert.equal(s.status, 401, `${JSON.stringify(sub)}: ${s.status} ${s.text}`);
      assert.equal(s.json.error.code, "invalid_claims");
      assert.equal((await x.chat(newThread("ws2"), "hi")).status, 401);
    }
  });

  test("finding 8b: a role containing a comma is 401 invalid_claims", async () => {
    const r = await as(w.url, token("bob", { roles: ["finance,admin"] })).status(newThread("comma"));
    assert.equal(r.status, 401, `${r.status} ${r.text}`);
    assert.equal(r.json.error.code, "invalid_claims");
  });

  test("finding 8c: a `sub` with control characters is 401 invalid_claims", async () => {
    const accepted = [];
    for (const sub of ["eve\u0007", "ev\ne", "ev\re", "ev\te", "e\u0000ve", "e\u007fve"]) {
      const r = await as(w.url, token(sub)).status(newThread("ctl"));
      if (r.status !== 401 || r.json?.error?.code !== "invalid_claims") accepted.push(`${JSON.stringify(sub)}: ${r.status} ${r.json?.error?.code ?? ""}`);
    }
    assert.deepEqual(accepted, []);
  });

  test("finding 8c: a printable non-ASCII `sub` works and owns what it creates", async () => {
    for (const sub of ["Zoë", "用户"]) {
      const me = as(w.url, token(sub));
      const thread = newThread("intl");
      const sent = await me.chat(thread, "hello");
      assert.equal(sent.status, 200, `${sub} sends: ${sent.status} ${sent.text}`);
      const s = await me.status(thread);
      assert.equal(s.status, 200, `${sub} reads its own thread: ${s.status} ${s.text}`);
      const other = await as(w.url, token("bob")).status(thread);
      assert.equal(other.status, 404, `bob reads ${sub}'s thread`);
      const list = await me.call("GET", "/agent/threads");
      assert.ok(list.json.some((t) => t.id === thread), `${sub}'s thread list holds it`);
    }
  });

  test("finding 8d: `exp: 1e20` is a token that does not expire, not an overflow into expired", async () => {
    const far = as(w.url, hs256Jwt(SECRET, { sub: "alice", exp: 1e20 }));
    const r = await far.call("GET", `/instance-ai/threads/${newThread("exp")}/queue`);
    assert.equal(r.status, 404, `${r.status} ${r.text}`);
    assert.equal(r.json.error.code, "thread_not_found");
    assert.equal((await far.chat(newThread("exp"), "hi")).status, 200);
  });

  test("finding 8e: an SSE stream opened with a stream token ends when the token expires (STREAM_TOKEN_TTL_MS)", async () => {
    const w2 = await worker({ ...JWT, AGENT_WEBHOOK_URL: hook.url, STREAM_TOKEN_TTL_MS: "1500", SSE_PING_MS: "200" });
    const a = as(w2.url, token("alice"));
    const thread = newThread("stt");
    assert.equal((await a.chat(thread, "hello")).status, 200);
    const issuedAt = Date.now();
    const issued = await a.call("POST", `/instance-ai/threads/${thread}/stream-token`);
    assert.equal(issued.status, 200, issued.text);
    const sse = openSse(`${w2.url}/instance-ai/events/${thread}?token=${encodeURIComponent(issued.json.token)}`);
    await sse.ready;
    const opened = Date.now();
    assert.equal(sse.status, 200);
    await sse.waitFor((e) => e.type === "run-start");
    await sleep(Math.max(0, opened + 1000 - Date.now()));
    assert.equal(sse.closed, false, "open while the token is valid");
    await until(() => sse.closed, { timeoutMs: Math.max(0, opened + 4000 - Date.now()), stepMs: 50, what: "the stream to end once its token expired" }).catch(() => {});
    const endedByServer = sse.closed;
    const openFor = Date.now() - opened;
    const pings = sse.frames().filter((f) => f.comments.includes("ping")).length;
    sse.close();
    assert.ok(pings >= 3, `pings kept flowing (${pings})`);
    assert.ok(endedByServer, `the stream was still open ${openFor} ms after it opened (${pings} pings)`);
    assert.ok(issued.json.expiresAt - issuedAt <= 2000, `expiresAt is ${issued.json.expiresAt - issuedAt} ms after issue: it follows STREAM_TOKEN_TTL_MS`);
  });

  test("finding 8f: with AUTH_MODE=none, sends are counted per client address (CF-Connecting-IP)", async () => {
    const h = await startWebhook();
    try {
      const w3 = await worker({ AUTH_MODE: "none", RUNS_PER_MINUTE: "2", AGENT_WEBHOOK_URL: h.url });
      const api = client(w3.url);
      const from = (ip) => api.call("POST", `/instance-ai/chat/${newThread("ip")}`, { message: "hi" }, { "cf-connecting-ip": ip });
      const codes = [];
      for (let i = 0; i < 3; i++) {
        const r = await from("1.1.1.1");
        codes.push(r.status);
        if (r.status === 429) assert.equal(r.json.error.code, "rate_limited");
      }
      assert.deepEqual(codes, [200, 200, 429]);
      const other = await from("2.2.2.2");
      assert.equal(other.status, 200, `another address: ${other.status} ${other.text}`);
    } finally {
      await h.close();
    }
  });

  test("finding 8g: a webhook that never answers times out (AGENT_WEBHOOK_TIMEOUT_MS): the run ends with `agent webhook failed` and the thread is free", async () => {
    // Accepts connections and never answers.
    const sockets = new Set();
    const silent = net.createServer((s) => {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    });
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    try {
      const w4 = await worker({ AUTH_MODE: "dev", AGENT_WEBHOOK_URL: `http://127.0.0.1:${silent.address().port}/hook`, AGENT_WEBHOOK_TIMEOUT_MS: "1000" });
      const thread = newThread("hang");
      const send = async (message) => {
        const t0 = Date.now();
        try {
          const r = await fetch(`${w4.url}/instance-ai/chat/${thread}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ message }),
            signal: AbortSignal.timeout(8000),
          });
          return { status: r.status, text: await r.text(), ms: Date.now() - t0 };
        } catch (e) {
          return { status: undefined, error: e.name, ms: Date.now() - t0 };
        }
      };
      const first = await send("hello");
      assert.equal(first.status, 200, `the send did not answer within 8 s (${JSON.stringify(first)})`);
      const sse = client(w4.url).events(thread);
      await sse.ready;
      const fin = await sse.waitFor((e) => e.type === "run-finish", 5000, "run-finish");
      assert.deepEqual(fin.payload, { status: "error", reason: "agent webhook failed" });
      const second = await send("again");
      assert.equal(second.status, 200, `the next send: ${JSON.stringify(second)}`);
      sse.close();
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });
});
