// The fourth trust pass, over real HTTP on workerd: what one ordinary account
// could do to everyone else, each finding as a test that failed before its fix.
//
// - Schemas and patterns (findings 1, 2): a schema the engine could not apply
//   is refused when it is declared; patterns match in linear time; a check
//   that would do unbounded work stops, and its exception never leaves the
//   JavaScript engine as a trap (another user's run goes on).
// - Usage (findings 3 to 6): every token a turn causes is charged to its
//   sender once, however the turn ends; the budget holds under concurrency.
// - Agents (findings 7, 8): a sub-agent gets at most its agent's tools; a
//   locked model is still subject to the caller's roles.
// - Files (findings 9, 10): the media sniff skips what browsers skip; a
//   multipart body is counted as it streams, whatever its framing.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startWorker, newThread, parseSse, until, hs256Jwt } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "attack-secret-0123456789abcdef012345";
const token = (sub, extra = {}) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 600, ...extra });
const JWT = { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET };

const started = [];
async function worker(vars) {
  const w = await startWorker({ vars: { ...JWT, ...vars } });
  started.push(w);
  return w;
}
let llm, tools;
before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
});
after(async () => {
  for (const w of started) await w.stop();
  await llm?.close();
  await tools?.close();
});

/** A caller `sub` (with `roles`) of worker `w`. Every request gives up
 *  after `timeoutMs`, so a frozen isolate fails the test instead of
 *  hanging it. */
function as(w, sub, roles = []) {
  const auth = { authorization: `Bearer ${token(sub, { roles })}` };
  const call = async (method, p, body, timeoutMs = 20_000) => {
    const init = { method, headers: { ...auth }, signal: AbortSignal.timeout(timeoutMs) };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    const resp = await fetch(w.url + p, init);
    const text = await resp.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: resp.status, headers: resp.headers, json, text };
  };
  /** POSTs to `path` and reads the whole SSE answer (or the refusal). */
  const stream = async (path, body, timeoutMs = 20_000) => {
    const resp = await fetch(w.url + path, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await resp.text();
    if (!resp.ok) return { status: resp.status, json: JSON.parse(text) };
    const events = parseSse(text).filter((f) => f.data !== undefined && f.data !== "[DONE]").map((f) => JSON.parse(f.data));
    return { status: resp.status, events };
  };
  return { call, stream, sub };
}

let seq = 0;
const userMessage = (content) => ({ id: `u${++seq}-${Date.now().toString(36)}`, role: "user", content });
const clientTool = (name, parameters) => ({ name, description: `the client's ${name}`, parameters });
/** The thread's stored events, as its owner replays them. */
async function storedEvents(w, owner, thread) {
  const resp = await fetch(`${w.url}/v1/threads/${thread}?offset=-1`, { headers: { authorization: `Bearer ${token(owner)}` } });
  assert.equal(resp.status, 200);
  return resp.json();
}
const runOver = (caller, thread) =>
  until(async () => (await caller.call("GET", `/instance-ai/threads/${thread}/status`)).json?.hasActiveRun === false, {
    timeoutMs: 15_000,
    what: `the run on ${thread} to end`,
  });

describe("schemas and patterns", () => {
  let w;
  before(async () => {
    w = await worker({ LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations), QUOTA: JSON.stringify({ period: "day", tokens: 10_000_000 }) });
  });

  test("finding 1: a schema the engine could not apply is refused at declaration (client tools, output schemas)", async () => {
    const alice = as(w, "alice");
    for (const parameters of [
      { $ref: "#" },
      { type: "object", properties: { a: { $ref: "http://127.0.0.1:9/x" } } },
      { allOf: [{ $ref: "#/$defs/a" }], $defs: { a: { anyOf: [{ $ref: "#" }] } } },
      { type: "object", properties: { s: { type: "string", pattern: "(?<=a)b" } } },
      { type: "object", properties: { s: { type: "string", pattern: "(a)\\1" } } },
    ]) {
      const thread = newThread("decl");
      const r = await alice.stream("/ag-ui", { threadId: thread, runId: "r", messages: [userMessage('go [[tool:t:{"a":1}]]')], tools: [clientTool("t", parameters)] });
      assert.equal(r.status, 400, JSON.stringify({ parameters, r }));
      assert.equal(r.json.error.code, "invalid_client_tools", JSON.stringify(parameters));
      assert.equal((await alice.call("GET", `/instance-ai/threads/${thread}/messages`)).json.nextEventId, 1, "nothing stored");
    }
    for (const schema of [
      { type: "object", properties: { a: { $ref: "http://127.0.0.1:9/x" } } },
      { $ref: "#" },
      { $schema: "http://json-schema.org/draft-07/schema#", definitions: { a: { $ref: "#/definitions/a" } }, properties: { x: { $ref: "#/definitions/a" } } },
    ]) {
      const r = await alice.call("POST", "/agent/chat", { message: '[[say:{"a":1}]]', output: { schema } });
      assert.equal(r.status, 400, JSON.stringify({ schema, r: r.json }));
      assert.equal(r.json.error.code, "invalid_output", JSON.stringify(schema));
      assert.match(r.json.error.message, /output\.schema/);
    }
    // What the engine can apply still runs: a recursive schema that descends.
    const tree = { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#" } } }, required: ["name"] };
    const ok = await alice.call("POST", "/agent/chat", { message: '[[say:{"name":"a","children":[{"name":"b","children":[]}]}]]', output: { schema: tree } });
    assert.equal(ok.status, 200, ok.text);
    assert.match(ok.text, /"kind":\s*"done"|event: done/);
  });

  test("finding 2: a backtracking pattern is matched in linear time; another user's request is not held", async () => {
    const alice = as(w, "alice");
    const bob = as(w, "bob");
    const thread = newThread("redos");
    const evil = "a".repeat(40) + "!";
    const parameters = { type: "object", properties: { s: { type: "string", pattern: "^(a|a)*$" } }, required: ["s"] };
    const going = alice.stream("/ag-ui", {
      threadId: thread,
      runId: "r",
      messages: [userMessage(`match [[tool:check:{"s":"${evil}"}]]`)],
      tools: [clientTool("check", parameters)],
    });
    // Bob's requests, on other objects, while Alice's arguments are checked.
    const waits = [];
    for (let i = 0; i < 15; i++) {
      const t0 = Date.now();
      const q = await bob.call("GET", "/agent/quota", undefined, 10_000);
      assert.equal(q.status, 200, q.text);
      waits.push(Date.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
    const done = await going;
    assert.equal(done.status, 200);
    assert.equal(done.events.at(-1).type, "RUN_FINISHED");
    const result = done.events.find((e) => e.type === "TOOL_CALL_RESULT");
    assert.ok(result, "the call was refused back to the model");
    assert.match(result.content, /invalid arguments: \/s: String does not match pattern/);
    assert.ok(Math.max(...waits) < 5_000, `bob waited ${Math.max(...waits)} ms`);
    // The same pattern still accepts what it should.
    const fine = await alice.stream("/ag-ui", { threadId: newThread("redos"), runId: "r", messages: [userMessage(`match [[tool:check:{"s":"aaaa"}]]`)], tools: [clientTool("check", parameters)] });
    assert.deepEqual(fine.events.at(-1).outcome?.pendingToolCallIds?.length, 1, "valid arguments reach the client");
  });

  test("finding 2: the `url` format's backtracking expression is not run on a long host", async () => {
    const alice = as(w, "alice");
    const parameters = { type: "object", properties: { u: { type: "string", format: "url" } }, required: ["u"] };
    const long = "http://" + "a".repeat(3000) + "!";
    const r = await alice.stream("/ag-ui", { threadId: newThread("url"), runId: "r", messages: [userMessage(`open [[tool:open:{"u":"${long}"}]]`)], tools: [clientTool("open", parameters)] });
    assert.equal(r.status, 200);
    assert.match(r.events.find((e) => e.type === "TOOL_CALL_RESULT").content, /does not match format "url"/);
  });

  test("a check that throws in the JavaScript engine ends as an error for its run alone: another user's run in flight completes", async () => {
    const alice = as(w, "alice");
    const bob = as(w, "bob");
    // Bob's run waits on a slow HTTP tool in another thread.
    const bobThread = newThread("bystander");
    const sent = await bob.call("POST", `/instance-ai/chat/${bobThread}`, { message: '[[tool:slow:{"ms":2500}]]' });
    assert.equal(sent.status, 200, sent.text);
    await until(() => tools.calls.some((c) => c.body.threadId === bobThread), { what: "bob's slow tool call" });
    // Alice's arguments would be checked against 2^40 subschemas: the
    // engine's bound on work throws, in the middle of Bob's tool call.
    const parameters = { type: "object", properties: { a: { allOf: [{ $ref: "#" }, { $ref: "#" }] } } };
    let deep = "{}";
    for (let i = 0; i < 40; i++) deep = `{"a":${deep}}`;
    const r = await alice.stream("/ag-ui", { threadId: newThread("thrower"), runId: "r", messages: [userMessage(`[[tool:deep:${deep}]]`)], tools: [clientTool("deep", parameters)] });
    assert.equal(r.status, 200);
    assert.equal(r.events.at(-1).type, "RUN_FINISHED");
    assert.match(r.events.find((e) => e.type === "TOOL_CALL_RESULT").content, /could not be checked: checking this value would take more than/);
    await runOver(bob, bobThread);
    const finish = (await storedEvents(w, "bob", bobThread)).filter((e) => e.type === "run-finish");
    assert.deepEqual(finish.map((e) => e.payload.status), ["completed"], JSON.stringify(finish));
    const results = (await storedEvents(w, "bob", bobThread)).filter((e) => e.type === "tool-result");
    assert.equal(results.length, 1, "bob's tool call settled with its own result");
  });
});

/** What the model reported for every call of `thread` (its step-finish
 *  events, sub-agents' included), in tokens. */
async function reportedTokens(w, owner, thread) {
  const steps = (await storedEvents(w, owner, thread)).filter((e) => e.type === "step-finish" && e.payload.usage);
  return steps.reduce((n, e) => n + e.payload.usage.prompt_tokens + e.payload.usage.completion_tokens, 0);
}

describe("usage: every token a turn causes is charged to its sender, once, however the turn ends", () => {
  let w, big;
  before(async () => {
    // A sub-agent's calls, and calls whose messages say BIG, report 6,000
    // prompt tokens.
    const isBig = (text) => text.includes("BIG") || text.includes("You are a sub-agent");
    big = await startFakeLlm({
      port: 0,
      delayMs: 1,
      usage: (body, usage) => (isBig(JSON.stringify(body.messages)) ? { ...usage, prompt_tokens: 6000, total_tokens: 6000 + usage.completion_tokens } : usage),
    });
    w = await worker({
      LLM_BASE_URL: big.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify(tools.declarations),
      QUOTA: JSON.stringify({ period: "day", tokens: 10_000_000, roles: { SMALL: { tokens: 1000 } } }),
    });
  });
  after(() => big?.close());

  const used = async (caller) => (await caller.call("GET", "/agent/quota")).json.used.tokens;
  /** Waits until `caller`'s budget shows `tokens` used. */
  const charged = (caller, tokens, what) =>
    until(async () => (await used(caller)) === tokens, { timeoutMs: 10_000, what }).catch(async (e) => {
      throw new Error(`${e.message}: used ${await used(caller)}, expected ${tokens}`);
    });

  test("finding 3: a sub-agent's calls are charged to the turn's sender", async () => {
    const who = as(w, "sub-spender");
    const thread = newThread("sub");
    const sent = await who.call("POST", `/instance-ai/chat/${thread}`, { message: "[[spawn]]" });
    assert.equal(sent.status, 200, sent.text);
    await runOver(who, thread);
    const reported = await reportedTokens(w, "sub-spender", thread);
    // (The orchestrator's own two calls count their tool schemas: about 900 each.)
    assert.ok(reported > 6000 && reported < 9000, `the sub-agent's call reported 6,000: ${reported}`);
    await charged(who, reported, "the sub-agent's tokens charged");
    const mine = await who.call("GET", "/instance-ai/usage");
    assert.equal(mine.json.total.totalTokens, reported);
    assert.equal(mine.json.total.runs, 1, "one turn, however many calls");
  });

  test("finding 3: a background sub-agent's calls are charged after its run ended", async () => {
    const who = as(w, "bg-spender");
    const thread = newThread("bg");
    const sent = await who.call("POST", `/instance-ai/chat/${thread}`, { message: "[[spawn-bg]] [[slow:50]]" });
    assert.equal(sent.status, 200, sent.text);
    await until(async () => (await storedEvents(w, "bg-spender", thread)).some((e) => e.type === "agent-completed"), { timeoutMs: 15_000, what: "the background agent to finish" });
    await charged(who, await reportedTokens(w, "bg-spender", thread), "the background agent's tokens charged");
  });

  test("finding 4: deleting a thread whose turn waits on an approval keeps the turn's cost", async () => {
    const who = as(w, "deleter");
    const thread = newThread("del");
    await who.call("POST", `/instance-ai/chat/${thread}`, { message: 'BIG [[tool:delete-note:{"id":"n1"}]]' });
    await until(async () => (await who.call("GET", `/instance-ai/threads/${thread}/status`)).json?.isSuspended === true, { what: "the approval wait" });
    const reported = await reportedTokens(w, "deleter", thread);
    assert.ok(reported >= 6000, `${reported}`);
    const gone = await who.call("DELETE", `/instance-ai/threads/${thread}`);
    assert.equal(gone.status, 200, gone.text);
    await charged(who, reported, "the deleted turn's tokens charged");
    // A cancelled one the same.
    const other = newThread("del");
    await who.call("POST", `/instance-ai/chat/${other}`, { message: 'BIG [[tool:delete-note:{"id":"n2"}]]' });
    await until(async () => (await who.call("GET", `/instance-ai/threads/${other}/status`)).json?.isSuspended === true, { what: "the approval wait" });
    const more = await reportedTokens(w, "deleter", other);
    await who.call("POST", `/instance-ai/chat/${other}/cancel`);
    await charged(who, reported + more, "the cancelled turn's tokens charged");
  });

  test("finding 5: a step cut by length, and a step whose tool call is cancelled, are charged", async () => {
    const who = as(w, "cutter");
    const cut = newThread("len");
    await who.call("POST", `/instance-ai/chat/${cut}`, { message: "BIG [[length]]" });
    await runOver(who, cut);
    const lengthReported = await reportedTokens(w, "cutter", cut);
    assert.ok(lengthReported >= 6000, `${lengthReported}`);
    await charged(who, lengthReported, "the cut step charged");
    const slow = newThread("len");
    await who.call("POST", `/instance-ai/chat/${slow}`, { message: 'BIG [[tool:slow:{"ms":4000}]]' });
    await until(() => tools.calls.some((c) => c.body.threadId === slow), { what: "the slow call" });
    await who.call("POST", `/instance-ai/chat/${slow}/cancel`);
    await runOver(who, slow);
    await charged(who, lengthReported + (await reportedTokens(w, "cutter", slow)), "the step of the cancelled tool charged");
  });

  test("finding 6: concurrent turns pass the budget by at most one call's hold", async () => {
    const eve = as(w, "eve", ["SMALL"]);
    const marker = `eve-${Date.now().toString(36)}`;
    const threads = Array.from({ length: 5 }, () => newThread("conc"));
    const sends = await Promise.all(threads.map((t) => eve.call("POST", `/instance-ai/chat/${t}`, { message: `${marker} hello` })));
    for (const s of sends) assert.equal(s.status, 200, s.text);
    for (const t of threads) await runOver(eve, t);
    const reached = big.requests.filter((r) => JSON.stringify(r.messages).includes(marker)).length;
    assert.equal(reached, 1, "one call held the budget; the others were refused before the model");
    const ends = [];
    for (const t of threads) ends.push((await storedEvents(w, "eve", t)).find((e) => e.type === "run-finish").payload);
    assert.deepEqual(ends.filter((p) => p.reason === "quota_exceeded").length, 4, JSON.stringify(ends));
    const spent = await used(eve);
    // One call's hold: its request (bytes / 3) and the output cap (4,096).
    assert.ok(spent <= 1000 + 4096 + 2000, `spent ${spent}`);
    const quota = await eve.call("GET", "/agent/quota");
    assert.equal(quota.json.limit.tokens, 1000);
  });
});

describe("agents: a sub-agent's tools and a locked model's roles", () => {
  let w;
  before(async () => {
    w = await worker({
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify(tools.declarations),
      LLM_MODELS: JSON.stringify({ default: "fast", models: { fast: { model: "fake-model" }, pro: { model: "fake-model", roles: ["PRO"] } } }),
      AGENTS: JSON.stringify({ support: { label: "Support", tools: ["weather"] }, vip: { label: "VIP", locked: { model: "pro" } } }),
    });
  });

  test("finding 7: spawn-agent cannot give a sub-agent a tool its agent does not have", async () => {
    const alice = as(w, "alice");
    const thread = newThread("spawn");
    const spawn = JSON.stringify({ role: "r", instructions: "go", tools: ["echo"] });
    const sent = await alice.call("POST", `/instance-ai/chat/${thread}`, { message: `[[tool:spawn-agent:${spawn}]]`, agent: "support" });
    assert.equal(sent.status, 200, sent.text);
    await runOver(alice, thread);
    const log = await storedEvents(w, "alice", thread);
    assert.ok(!log.some((e) => e.type === "agent-spawned"), "no sub-agent ran");
    const refused = log.find((e) => e.type === "tool-error");
    assert.match(refused?.payload.error ?? "", /`echo` is not one of this agent's tools/);
    // Its own tools it may give.
    const fine = newThread("spawn");
    const ok = JSON.stringify({ role: "r", instructions: "go", tools: ["weather"] });
    await alice.call("POST", `/instance-ai/chat/${fine}`, { message: `[[tool:spawn-agent:${ok}]]`, agent: "support" });
    await runOver(alice, fine);
    assert.ok((await storedEvents(w, "alice", fine)).some((e) => e.type === "agent-spawned"));
  });

  test("finding 8: an agent locked to a role-restricted model is refused to a caller without the role", async () => {
    const plain = as(w, "plain");
    const refused = await plain.call("POST", `/instance-ai/chat/${newThread("vip")}`, { message: "hi", agent: "vip" });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.error.code, "model_not_allowed");
    assert.match(refused.json.error.message, /PRO/);
    const view = await plain.call("GET", "/agent/models?agent=vip");
    assert.equal(view.status, 200);
    assert.equal(view.json.default, null, "no default is offered that they may not use");
    const pro = as(w, "pro-user", ["PRO"]);
    const thread = newThread("vip");
    const sent = await pro.call("POST", `/instance-ai/chat/${thread}`, { message: "hi", agent: "vip" });
    assert.equal(sent.status, 200, sent.text);
    assert.equal((await pro.call("GET", "/agent/models?agent=vip")).json.default, "pro");
  });
});

describe("files: the sniff and the form's size", () => {
  let w;
  before(async () => {
    w = await worker({ MAX_FILE_BYTES: "1000000", MAX_FILES_PER_MESSAGE: "2" });
  });

  test("finding 9: a page behind a byte-order mark or a comment, declared as text, is refused", async () => {
    const alice = as(w, "alice");
    const thread = newThread("sniff");
    for (const [type, body] of [
      ["text/plain", "\ufeff<!DOCTYPE html><script>alert(1)</script>"],
      ["text/markdown", "<!-- a note -->\n<!DOCTYPE html><p>hi"],
      ["text/plain", "\ufeff<!-- x --> <html><body>hi"],
    ]) {
      const r = await fetch(`${w.url}/v1/threads/${thread}/files`, { method: "POST", headers: { authorization: `Bearer ${token("alice")}`, "content-type": type }, body });
      assert.equal(r.status, 415, `${type}: ${JSON.stringify(body)}`);
      assert.equal((await r.json()).error.code, "file_type_mismatch");
    }
    const fine = await fetch(`${w.url}/v1/threads/${thread}/files`, { method: "POST", headers: { authorization: `Bearer ${token("alice")}`, "content-type": "text/markdown" }, body: "<!-- badges -->\n# Notes" });
    assert.equal(fine.status, 201, await fine.text());
    void alice;
  });

  test("finding 10: a multipart upload is counted as it streams: chunked as declared", async () => {
    const boundary = "XyZ";
    const field = "x".repeat(300_000);
    let body = "";
    for (let i = 0; i < 28; i++) body += `--${boundary}\r\nContent-Disposition: form-data; name="note${i}"\r\n\r\n${field}\r\n`;
    body += `--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhi\r\n--${boundary}--\r\n`;
    const bytes = Buffer.from(body);
    assert.ok(bytes.length > 8_000_000);
    const thread = newThread("form");
    // Writes with backpressure and stops once the answer is in; a server
    // that answers early may reset the connection while the body is still
    // being written, so its answer gets a moment to be read first.
    const send = (chunked) =>
      new Promise((resolve) => {
        const u = new URL(w.url);
        const headers = { authorization: `Bearer ${token("alice")}`, "content-type": `multipart/form-data; boundary=${boundary}` };
        if (!chunked) headers["content-length"] = String(bytes.length);
        let answered = false;
        let settled = false;
        const done = (r) => {
          if (settled) return;
          settled = true;
          req.destroy();
          resolve(r);
        };
        const req = http.request({ host: u.hostname, port: u.port, method: "POST", path: `/v1/threads/${thread}/files`, headers, agent: false }, (res) => {
          answered = true;
          let text = "";
          res.on("data", (d) => (text += d));
          res.on("end", () => done({ status: res.statusCode, json: JSON.parse(text || "{}") }));
          res.on("error", () => done({ status: res.statusCode, json: JSON.parse(text || "{}") }));
        });
        req.on("error", (e) => setTimeout(() => done({ error: e.code ?? e.message }), 300));
        (async () => {
          if (!chunked) {
            req.flushHeaders();
            for (let waited = 0; !answered && waited < 1000; waited += 20) await new Promise((r) => setTimeout(r, 20));
          }
          for (let at = 0; at < bytes.length && !answered && !settled; at += 65536) {
            if (!req.write(bytes.subarray(at, at + 65536))) await new Promise((r) => req.once("drain", r).once("close", r));
          }
          if (!answered && !settled) req.end();
        })();
      });
    for (const chunked of [false, true]) {
      const r = await send(chunked);
      assert.equal(r.status, 413, `${chunked ? "chunked" : "declared"}: ${JSON.stringify(r)}`);
      assert.equal(r.json.error.code, "body_too_large");
    }
  });
});
