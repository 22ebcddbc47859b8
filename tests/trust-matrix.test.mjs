// The access matrix over real HTTP on workerd: every route the router has
// (as `GET /debug/routes` lists them) × every kind of caller: the thread's
// owner, a stranger, a holder of the approver role the policy names, a stream
// token of another thread, and no token. A route the router gains without a
// row here fails the first test, so each route arrives with its row.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, hs256Jwt } from "./support/harness.mjs";

const SECRET = "test-secret-0123456789abcdef0123456789";
const token = (sub, extra = {}) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 300, ...extra });

let worker, hook;
const bearer = { owner: token("alice"), stranger: token("bob"), approver: token("frank", { roles: ["FINANCE"] }) };
const CALLERS = ["owner", "stranger", "approver", "otherToken", "none"];

before(async () => {
  hook = await startWebhook();
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      AGENT_WEBHOOK_URL: hook.url,
      APPROVAL_POLICY: JSON.stringify({ pay: { approver: "FINANCE" } }),
      STREAM_TOKEN_SECRET: "0123456789abcdef0123456789abcdef",
    },
  });
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

/** One request as `who`. */
async function call(who, method, path, body, fixture) {
  const headers = {};
  let url = path;
  if (who === "otherToken") url += (path.includes("?") ? "&" : "?") + `token=${encodeURIComponent(fixture.otherToken)}`;
  else if (bearer[who]) headers.authorization = `Bearer ${bearer[who]}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const resp = await fetch(worker.url + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  // A stream that opened is an answer too: its status is what counts.
  const text = resp.headers.get("content-type")?.startsWith("text/event-stream") ? "" : await resp.text();
  await resp.body?.cancel().catch(() => {});
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: resp.status, code: json?.error?.code };
}

/**
 * alice's thread: an external agent's run suspended on two requests (`pay`,
 * which the policy gives to FINANCE, and `wipe`, hers), a queued message,
 * and a second thread whose stream token is the "other thread's" one.
 */
async function fixture() {
  const a = client(worker.url);
  const auth = { authorization: `Bearer ${bearer.owner}` };
  const thread = newThread("mx");
  const sent = await a.call("POST", `/instance-ai/chat/${thread}`, { message: "hello" }, auth);
  assert.equal(sent.status, 200, sent.text);
  const run = sent.json.runId;
  const signal = await hook.next((m) => m.type === "run" && m.runId === run);
  const request = (id, tool) => [
    { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: `call_${id}`, toolName: tool, args: {} } },
    { type: "confirmation-request", agentId: "orchestrator", payload: { requestId: id, toolCallId: `call_${id}`, toolName: tool, args: {}, severity: "warning", message: `${tool}?` } },
  ];
  const pub = await a.publish(thread, run, signal.publishToken, [...request("pay1", "pay"), ...request("wipe1", "wipe")]);
  assert.equal(pub.status, 200, pub.text);
  const queued = await a.call("POST", `/instance-ai/chat/${thread}`, { message: "later", mode: "queue" }, auth);
  assert.equal(queued.status, 202, queued.text);
  const other = newThread("mx2");
  assert.equal((await a.call("POST", `/instance-ai/chat/${other}`, { message: "mine too" }, auth)).status, 200);
  const issued = await a.call("POST", `/instance-ai/threads/${other}/stream-token`, undefined, auth);
  assert.equal(issued.status, 200, issued.text);
  const upload = await fetch(`${worker.url}/v1/threads/${thread}/files?name=n.txt`, { method: "POST", headers: { ...auth, "content-type": "text/plain" }, body: "notes" });
  assert.equal(upload.status, 201, await upload.clone().text());
  const file = (await upload.json()).files[0].fileId;
  return { thread, run, file, publishToken: signal.publishToken, pay: `${thread}.pay1`, wipe: `${thread}.wipe1`, queued: queued.json.messageId, otherToken: issued.json.token };
}

// What each kind of caller gets: a status, with the refusal's code where one
// is stable. `ok` is any 2xx (a stream that opened included).
const ok = { ok: true };
const no = (status, code) => ({ status, code });
const hidden = (code) => ({ owner: ok, stranger: no(404, code), approver: no(404, code), otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") });
const ownerOnly = hidden("thread_not_found");
const reader = (code = "thread_not_found") => hidden(code);
/** Needs a caller, and answers each authenticated one for themselves. */
const anyActor = { owner: ok, stranger: ok, approver: ok, otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") };
/** The deployer's (ADMIN_ROLE): no caller here holds it. */
const deployerOnly = { owner: no(403, "role_required"), stranger: no(403, "role_required"), approver: no(403, "role_required"), otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") };
/** Publishing: the run's token decides, never a caller's. */
const publishing = { owner: no(403, "forbidden"), stranger: no(403, "forbidden"), approver: no(403, "forbidden"), otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") };

/** Every route's row: how to call it on the fixture, and what each caller gets. */
const ROWS = {
  "POST /instance-ai/chat/:threadId": { call: (f) => ["POST", `/instance-ai/chat/${f.thread}`, { message: "more", mode: "queue" }], expect: ownerOnly },
  "POST /instance-ai/chat/:threadId/cancel": { call: (f) => ["POST", `/instance-ai/chat/${f.thread}/cancel`], expect: ownerOnly },
  "GET /instance-ai/events/:threadId": { call: (f) => ["GET", `/instance-ai/events/${f.thread}`], expect: reader() },
  "POST /instance-ai/threads/:threadId/runs/:runId/events": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/runs/${f.run}/events`, []], expect: publishing },
  "GET /instance-ai/threads/:threadId/status": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/status`], expect: ownerOnly },
  "GET /instance-ai/threads/:threadId/messages": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/messages`], expect: ownerOnly },
  "GET /instance-ai/threads/:threadId/usage": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/usage`], expect: ownerOnly },
  "GET /instance-ai/usage": { call: () => ["GET", "/instance-ai/usage"], expect: anyActor },
  "GET /instance-ai/threads/:threadId/debug/stats": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/debug/stats`], expect: ownerOnly },
  "POST /instance-ai/confirm/:requestId": {
    call: (f) => ["POST", `/instance-ai/confirm/${f.pay}`, { approved: true }],
    // The request names FINANCE: its holders decide it, the owner included only if she holds it.
    expect: { owner: no(403, "approver_required"), stranger: no(404, "confirmation_not_found"), approver: ok, otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") },
    also: (f) => ["POST", `/instance-ai/confirm/${f.wipe}`, { approved: true }],
    alsoExpect: hidden("confirmation_not_found"),
  },
  "GET /instance-ai/threads/:threadId/queue": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/queue`], expect: ownerOnly },
  "POST /instance-ai/threads/:threadId/stream-token": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/stream-token`], expect: ownerOnly },
  "DELETE /instance-ai/threads/:threadId": { call: (f) => ["DELETE", `/instance-ai/threads/${f.thread}`], expect: ownerOnly },
  "POST /instance-ai/threads/:threadId/queue/pause": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/queue/pause`], expect: ownerOnly },
  "POST /instance-ai/threads/:threadId/queue/resume": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/queue/resume`], expect: ownerOnly },
  "PATCH /instance-ai/threads/:threadId/queue/:messageId": { call: (f) => ["PATCH", `/instance-ai/threads/${f.thread}/queue/${f.queued}`, { message: "edited" }], expect: ownerOnly },
  "DELETE /instance-ai/threads/:threadId/queue/:messageId": { call: (f) => ["DELETE", `/instance-ai/threads/${f.thread}/queue/${f.queued}`], expect: ownerOnly },
  "POST /instance-ai/threads/:threadId/queue/:messageId/move": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/queue/${f.queued}/move`, { position: 0 }], expect: ownerOnly },
  // The fixture's run is active: its owner is admitted, and the tree waits for the run.
  "POST /instance-ai/threads/:threadId/branch": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/branch`, { messageId: f.run }], expect: { ...ownerOnly, owner: no(409, "run_active") } },
  "POST /instance-ai/threads/:threadId/fork": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/fork`, { messageId: f.run }], expect: { ...ownerOnly, owner: no(409, "run_active") } },
  "POST /instance-ai/threads/:threadId/compact": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/compact`], expect: { ...ownerOnly, owner: no(409, "run_active") } },
  "GET /agent/models": { call: () => ["GET", "/agent/models"], expect: anyActor },
  "GET /agent/threads": { call: () => ["GET", "/agent/threads"], expect: anyActor },
  "POST /agent/chat": { call: (f) => ["POST", "/agent/chat", { threadId: f.thread, message: "more", mode: "queue" }], expect: ownerOnly },
  "GET /agent/chat/:runId/stream": { call: (f) => ["GET", `/agent/chat/${f.run}/stream`], expect: reader("nothing_to_resume") },
  "POST /agent/tool-call/approve": {
    call: (f) => ["POST", "/agent/tool-call/approve", { runId: f.run, toolCallId: "call_pay1" }],
    expect: { owner: no(403, "approver_required"), stranger: no(404, "tool_call_not_found"), approver: ok, otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") },
    also: (f) => ["POST", "/agent/tool-call/approve", { runId: f.run, toolCallId: "call_wipe1" }],
    alsoExpect: hidden("tool_call_not_found"),
  },
  "POST /agent/tool-call/reject": {
    call: (f) => ["POST", "/agent/tool-call/reject", { runId: f.run, toolCallId: "call_wipe1", reason: "no" }],
    expect: hidden("tool_call_not_found"),
  },
  // The fixture's requests are approvals: the owner is let through, and told this route answers questions.
  "POST /agent/tool-call/answer": {
    call: (f) => ["POST", "/agent/tool-call/answer", { runId: f.run, toolCallId: "call_wipe1", answer: "x" }],
    expect: { ...hidden("tool_call_not_found"), owner: no(400, "invalid_decision") },
  },
  "POST /agent/tool-call/skip": {
    call: (f) => ["POST", "/agent/tool-call/skip", { runId: f.run, toolCallId: "call_wipe1" }],
    expect: { ...hidden("tool_call_not_found"), owner: no(400, "invalid_decision") },
  },
  "GET /agent/agents": { call: () => ["GET", "/agent/agents"], expect: anyActor },
  "GET /agent/quota": { call: () => ["GET", "/agent/quota"], expect: anyActor },
  "POST /agent/chat/:runId/cancel": { call: (f) => ["POST", `/agent/chat/${f.run}/cancel`], expect: hidden("run_not_found") },
  "GET /agent/threads/:id": { call: (f) => ["GET", `/agent/threads/${f.thread}`], expect: ownerOnly },
  "PATCH /agent/threads/:id": { call: (f) => ["PATCH", `/agent/threads/${f.thread}`, { model: null }], expect: ownerOnly },
  "DELETE /agent/threads/:id": { call: (f) => ["DELETE", `/agent/threads/${f.thread}`], expect: ownerOnly },
  "GET /agent/threads/:id/queue": { call: (f) => ["GET", `/agent/threads/${f.thread}/queue`], expect: ownerOnly },
  "POST /agent/threads/:id/queue/pause": { call: (f) => ["POST", `/agent/threads/${f.thread}/queue/pause`], expect: ownerOnly },
  "POST /agent/threads/:id/queue/resume": { call: (f) => ["POST", `/agent/threads/${f.thread}/queue/resume`], expect: ownerOnly },
  "PATCH /agent/threads/:id/queue/:messageId": { call: (f) => ["PATCH", `/agent/threads/${f.thread}/queue/${f.queued}`, { message: "edited" }], expect: ownerOnly },
  "DELETE /agent/threads/:id/queue/:messageId": { call: (f) => ["DELETE", `/agent/threads/${f.thread}/queue/${f.queued}`], expect: ownerOnly },
  "POST /agent/threads/:id/queue/:messageId/move": { call: (f) => ["POST", `/agent/threads/${f.thread}/queue/${f.queued}/move`, { position: 0 }], expect: ownerOnly },
  "DELETE /agent/threads/:id/queue": { call: (f) => ["DELETE", `/agent/threads/${f.thread}/queue`], expect: ownerOnly },
  // agora's client names a waiting message by its id alone: the thread is in it.
  "PATCH /agent/queue/:messageId": { call: (f) => ["PATCH", `/agent/queue/${f.queued}`, { content: "edited" }], expect: ownerOnly },
  "DELETE /agent/queue/:messageId": { call: (f) => ["DELETE", `/agent/queue/${f.queued}`], expect: ownerOnly },
  "POST /agent/queue/:messageId/interrupt": { call: (f) => ["POST", `/agent/queue/${f.queued}/interrupt`], expect: ownerOnly },
  "GET /v1/threads/:threadId": { call: (f) => ["GET", `/v1/threads/${f.thread}?offset=-1`], expect: reader() },
  "GET /v1/runs/:runId": { call: (f) => ["GET", `/v1/runs/${f.run}?offset=-1`], expect: reader() },
  "GET /agents/:name/:id": { call: (f) => ["GET", `/agents/default/${f.thread}`], expect: reader() },
  // Flue's send and abort: the same callers as every protocol's send and cancel.
  "POST /agents/:name/:id": { call: (f) => ["POST", `/agents/default/${f.thread}`, { kind: "user", body: "more" }], expect: ownerOnly },
  "POST /agents/:name/:id/abort": { call: (f) => ["POST", `/agents/default/${f.thread}/abort`], expect: ownerOnly },
  "GET /runs/:runId": { call: (f) => ["GET", `/runs/${f.run}?offset=-1`], expect: reader() },
  // An upload is a send's first step: the same callers (its JSON body is a JSON file).
  "POST /v1/threads/:threadId/files": { call: (f) => ["POST", `/v1/threads/${f.thread}/files`, { note: "a JSON file" }], expect: ownerOnly },
  "GET /v1/threads/:threadId/files/:fileId": { call: (f) => ["GET", `/v1/threads/${f.thread}/files/${f.file}`], expect: reader("file_not_found") },
  "GET /agents/:name/:id/attachments/:fileId": { call: (f) => ["GET", `/agents/default/${f.thread}/attachments/${f.file}`], expect: reader("file_not_found") },
  "POST /v1/runs/:runId": { call: (f) => ["POST", `/v1/runs/${f.run}`, { type: "status", agentId: "orchestrator", payload: { message: "x" } }], expect: publishing },
  // Off unless STREAMS_AUTH says who may use it: no such route for anyone.
  ...Object.fromEntries(["GET", "PUT", "POST", "DELETE"].map((m) => [
    `${m} /v1/stream/*`,
    { call: () => [m, "/v1/stream/mx"], expect: Object.fromEntries(CALLERS.map((c) => [c, no(404, m === "HEAD" ? undefined : "not_found")])) },
  ])),
  "OPTIONS /v1/stream/*": { call: () => ["OPTIONS", "/v1/stream/mx"], expect: Object.fromEntries(CALLERS.map((c) => [c, no(404)])) },
  "POST /api/chat": {
    call: (f) => ["POST", "/api/chat", { id: f.thread, mode: "queue", messages: [{ id: `m-${Date.now()}`, role: "user", parts: [{ type: "text", text: "more" }] }] }],
    expect: ownerOnly,
  },
  // Anyone but a reader is told there is nothing to follow, as for a thread with no run.
  "GET /api/chat/:id/stream": { call: (f) => ["GET", `/api/chat/${f.thread}/stream`], expect: { owner: ok, stranger: no(204), approver: no(204), otherToken: no(401, "unauthorized"), none: no(401, "unauthorized") } },
  "GET /api/chat/:id/messages": { call: (f) => ["GET", `/api/chat/${f.thread}/messages`], expect: ownerOnly },
  "POST /api/chat/:id/stop": { call: (f) => ["POST", `/api/chat/${f.thread}/stop`], expect: ownerOnly },
  "GET /api/chat/:id/runs/:runId/stream": { call: (f) => ["GET", `/api/chat/${f.thread}/runs/${f.run}/stream`], expect: reader("nothing_to_resume") },
  "POST /ag-ui": {
    call: (f) => ["POST", "/ag-ui", { threadId: f.thread, runId: "r", messages: [], resume: [{ interruptId: f.wipe, status: "resolved", payload: { approved: true } }] }],
    expect: ownerOnly,
  },
  "GET /ag-ui/threads/:id/messages": { call: (f) => ["GET", `/ag-ui/threads/${f.thread}/messages`], expect: ownerOnly },
  "GET /ag-ui/threads/:id/runs/:runId": { call: (f) => ["GET", `/ag-ui/threads/${f.thread}/runs/${f.run}`], expect: reader("nothing_to_resume") },
  "GET /debug/routes": { call: () => ["GET", "/debug/routes"], expect: anyActor },
  "GET /v1/inbox": { call: () => ["GET", "/v1/inbox"], expect: anyActor },
  "POST /instance-ai/threads/:threadId/read": { call: (f) => ["POST", `/instance-ai/threads/${f.thread}/read`, { eventId: 1 }], expect: ownerOnly },
  "POST /debug/inbox/outage": { call: () => ["POST", "/debug/inbox/outage?ms=0"], expect: anyActor },
  "GET /debug/inbox/stats": { call: () => ["GET", "/debug/inbox/stats"], expect: anyActor },
  "GET /instance-ai/threads/:threadId/schedules": { call: (f) => ["GET", `/instance-ai/threads/${f.thread}/schedules`], expect: ownerOnly },
  "POST /instance-ai/threads/:threadId/schedules": {
    call: (f) => ["POST", `/instance-ai/threads/${f.thread}/schedules`, { message: "later", everySeconds: 3600 }],
    expect: ownerOnly,
  },
  "DELETE /instance-ai/threads/:threadId/schedules/:scheduleId": {
    call: (f) => ["DELETE", `/instance-ai/threads/${f.thread}/schedules/sch_none`],
    expect: { ...ownerOnly, owner: no(404, "schedule_not_found") },
  },
  "GET /v1/webhooks/dead-letters": { call: () => ["GET", "/v1/webhooks/dead-letters"], expect: deployerOnly },
  "POST /v1/webhooks/dead-letters/:id/replay": { call: () => ["POST", "/v1/webhooks/dead-letters/msg_none/replay"], expect: deployerOnly },
};

/** The router's routes, one `METHOD path` each. */
async function routerRoutes() {
  const r = await client(worker.url).call("GET", "/debug/routes", undefined, { authorization: `Bearer ${bearer.owner}` });
  assert.equal(r.status, 200, r.text);
  return r.json.routes.flatMap((route) => route.methods.map((m) => `${m} ${route.path}`));
}

test("every route the router has has a row in the access matrix", async () => {
  const routes = await routerRoutes();
  assert.ok(routes.length > 30, `the router lists its routes (${routes.length})`);
  const missing = routes.filter((r) => !ROWS[r]);
  assert.deepEqual(missing, [], "routes without a row in the access matrix");
  const stale = Object.keys(ROWS).filter((r) => !routes.includes(r));
  assert.deepEqual(stale, [], "rows for routes the router no longer has");
});

test("every caller on every route gets what access allows, and a refusal changes nothing", async () => {
  const routes = await routerRoutes();
  const problems = [];
  const check = (what, got, want) => {
    const fine = want.ok ? got.status >= 200 && got.status < 300 : got.status === want.status && (want.code === undefined || got.code === want.code);
    if (!fine) problems.push(`${what}: got ${got.status} ${got.code ?? ""}, want ${want.ok ? "2xx" : `${want.status} ${want.code ?? ""}`}`);
  };
  for (const route of routes) {
    const row = ROWS[route];
    for (const [make, expect] of [[row.call, row.expect], [row.also, row.alsoExpect]]) {
      if (!make) continue;
      // Refusals first, all on one fixture: none of them may change it.
      const f = await fixture();
      const before = await client(worker.url).call("GET", `/v1/threads/${f.thread}?offset=-1`, undefined, { authorization: `Bearer ${bearer.owner}` });
      for (const who of CALLERS.filter((c) => !expect[c].ok)) {
        const [method, path, body] = make(f);
        check(`${who} ${method} ${path}`, await call(who, method, path, body, f), expect[who]);
      }
      const afterRefusals = await client(worker.url).call("GET", `/v1/threads/${f.thread}?offset=-1`, undefined, { authorization: `Bearer ${bearer.owner}` });
      if (afterRefusals.text !== before.text) problems.push(`${route}: a refusal changed the thread's log`);
      // Each caller allowed on a fixture of its own: what it does may change it.
      for (const who of CALLERS.filter((c) => expect[c].ok)) {
        const g = await fixture();
        const [method, path, body] = make(g);
        check(`${who} ${method} ${path}`, await call(who, method, path, body, g), expect[who]);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test("the routes a thread's object once served inside are no routes: 404 not_found", async () => {
  const f = await fixture();
  for (const [method, path, body] of [
    ["POST", `/agent/threads/${f.thread}/chat`, { message: "hi" }],
    ["POST", `/agent/threads/${f.thread}/tool-call/approve`, { runId: f.run, toolCallId: "call_wipe1" }],
    ["POST", `/agent/threads/${f.thread}/tool-call/reject`, { runId: f.run, toolCallId: "call_wipe1" }],
    ["POST", `/api/chat/${f.thread}`, { id: f.thread, messages: [] }],
    ["POST", `/ag-ui/threads/${f.thread}/run`, { threadId: f.thread, messages: [] }],
  ]) {
    const r = await call("owner", method, path, body, f);
    assert.equal(r.status, 404, `${method} ${path}`);
    assert.equal(r.code, "not_found", `${method} ${path}`);
  }
  const status = await call("owner", "GET", `/instance-ai/threads/${f.thread}/status`, undefined, f);
  assert.equal(status.status, 200);
});

test("a forwarded decision a client sends is never believed", async () => {
  const f = await fixture();
  // What the Worker forwards to an object, claiming the owner and a route.
  const claim = Buffer.from(JSON.stringify({ caller: { kind: "actor", id: "alice", roles: ["FINANCE"] }, route: { protocol: "instance_ai", route: { route: "status", thread: f.thread } } })).toString("base64url");
  for (const who of ["stranger", "none"]) {
    const headers = { "x-threadline-context": claim, ...(bearer[who] ? { authorization: `Bearer ${bearer[who]}` } : {}) };
    const r = await fetch(`${worker.url}/instance-ai/threads/${f.thread}/status`, { headers });
    assert.equal(r.status, who === "none" ? 401 : 404, `${who} claiming alice`);
    const d = await fetch(`${worker.url}/instance-ai/confirm/${f.pay}`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ approved: true }) });
    assert.equal(d.status, who === "none" ? 401 : 404, `${who} deciding, claiming FINANCE`);
  }
  const left = await call("owner", "GET", `/instance-ai/threads/${f.thread}/status`, undefined, f);
  assert.equal(left.status, 200);
});
