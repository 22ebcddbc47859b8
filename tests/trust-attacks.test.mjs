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
      assert.equal((await alice.call("GET", `/instance-ai/threads/${thread}/status`)).status, 404, "nothing stored");
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
