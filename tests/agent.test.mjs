// The Built-in agent issue, over real HTTP on workerd against the fake
// OpenAI-compatible model (local/fake-llm.mjs) and the demo tools.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, sleep, until, tempDir } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";
import { fold } from "../client/dist/index.js";

let llm, tools, worker, api;

async function stack(vars = {}, opts = {}) {
  const w = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", TOOLS: JSON.stringify(tools.declarations), ...vars },
    ...opts,
  });
  return { w, api: client(w.url) };
}

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 2 });
  tools = await startDemoTools();
  ({ w: worker, api } = await stack({ LLM_STALL_TIMEOUT_MS: "1500" }));
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** Sends a message and follows the run to its run-finish. */
async function converse(message, { thread = newThread("ag"), a = api, timeoutMs = 10000 } = {}) {
  const r = await a.chat(thread, message);
  assert.equal(r.status, 200, r.text);
  const sse = a.events(thread);
  await sse.ready;
  const fin = await sse.waitFor((e) => e.type === "run-finish" && e.runId === r.json.runId, timeoutMs, "run-finish");
  sse.close();
  const events = sse.events().filter((e) => e.runId === r.json.runId);
  return { thread, runId: r.json.runId, fin, events, types: events.map((e) => e.type), sse };
}

const requestsFor = (runMarker) => llm.requests.filter((b) => JSON.stringify(b.messages).includes(runMarker));

describe("model stream", () => {
  test("a plain answer streams as text and completes; the title is set once", async () => {
    const thread = newThread("ag");
    const first = await converse("Hello agent, how are you?", { thread });
    assert.deepEqual(first.fin.payload, { status: "completed" });
    assert.equal(first.types[0], "run-start");
    const title = first.events.find((e) => e.type === "thread-title-updated");
    assert.equal(title.payload.title, "Hello agent, how are you?");
    const text = first.events.filter((e) => e.type === "text-block").map((e) => e.payload.text).join("");
    assert.equal(text, 'You said: "Hello agent, how are you?". This is the fake model answering offline.');
    const second = await converse("And again", { thread });
    assert.ok(!second.types.includes("thread-title-updated"), "only after the first message");
    // Conversation memory: the second run's request carried the first exchange.
    const req = requestsFor("And again").at(-1);
    const roles = req.messages.map((m) => m.role);
    assert.deepEqual(roles, ["system", "user", "assistant", "user"]);
    assert.equal(req.messages[1].content, "Hello agent, how are you?");
    assert.match(req.messages[2].content, /You said/);
    assert.equal(req.stream, true);
    assert.equal(req.model, "fake-model");
    // Usage from the stream's last chunk is recorded on the run.
    const m = (await api.messages(thread)).json;
    assert.ok(m.messages[1].usage.total_tokens > 0, JSON.stringify(m.messages[1]));
  });

  test("reasoning deltas (reasoning_content and reasoning) become reasoning-delta", async () => {
    for (const directive of ["[[reason]]", "[[reasoning-field]]"]) {
      const thread = newThread("ag");
      const r = await api.chat(thread, `think ${directive}`);
      const sse = api.events(thread);
      await sse.ready;
      await sse.waitFor((e) => e.type === "run-finish");
      const kinds = sse.events().filter((e) => e.type.endsWith("-delta") || e.type.endsWith("-block")).map((e) => e.type);
      // Live deltas or, if the client connected late, the stored blocks.
      assert.ok(kinds.includes("reasoning-delta") || kinds.includes("reasoning-block"), kinds.join());
      const tree = (await api.messages(thread)).json.messages[1].agentTree;
      assert.match(tree.reasoning, /step by step/);
      assert.equal(tree.timeline[0].type, "reasoning");
      assert.equal(tree.timeline[1].type, "text");
      sse.close();
      assert.ok(r.json.runId);
    }
  });

  test("finish_reason length is reported, not ignored", async () => {
    const r = await converse("cut me off [[length]]");
    const err = r.events.find((e) => e.type === "error");
    assert.match(err.payload.content, /length/);
    assert.equal(r.fin.payload.status, "error");
    assert.match(r.fin.payload.reason, /length/);
  });

  test("a model that answers 500 ends the run: error event with status and body, LLM provider unavailable", async () => {
    const r = await converse("boom [[error:500]]");
    const err = r.events.find((e) => e.type === "error");
    assert.equal(err.payload.statusCode, 500);
    assert.match(err.payload.content, /HTTP 500.*fake upstream failure/);
    assert.deepEqual(r.fin.payload, { status: "error", reason: "LLM provider unavailable" });
  });

  test("a stream that stalls past LLM_STALL_TIMEOUT_MS ends the run", async () => {
    const t0 = Date.now();
    const r = await converse("wait [[stall]]");
    assert.ok(Date.now() - t0 >= 1400);
    assert.match(r.events.find((e) => e.type === "error").payload.content, /stalled/);
    assert.deepEqual(r.fin.payload, { status: "error", reason: "LLM provider unavailable" });
  });

  test("a provider that cannot be reached ends the run with an error", async () => {
    const { w, api: a } = await stack({ LLM_BASE_URL: "http://127.0.0.1:9/v1" });
    try {
      const r = await converse("anyone there?", { a });
      assert.match(r.events.find((e) => e.type === "error").payload.content, /Could not reach/);
      assert.deepEqual(r.fin.payload, { status: "error", reason: "LLM provider unavailable" });
    } finally {
      await w.stop();
    }
  });

  test("with no model and no webhook configured, a send is 503 agent_not_configured", async () => {
    const w = await startWorker({ vars: {} });
    try {
      const r = await client(w.url).chat(newThread(), "hi");
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, "agent_not_configured");
    } finally {
      await w.stop();
    }
  });
});

describe("tools", () => {
  test("an HTTP tool: tool-input-start, tool-call with args, status, tool-result, and the answer", async () => {
    const before = tools.calls.length;
    const r = await converse('weather please [[tool:weather:{"city":"Oslo"}]]');
    const order = r.types.filter((t) => t.startsWith("tool-"));
    assert.deepEqual(order, ["tool-input-start", "tool-call", "tool-result"]);
    const call = r.events.find((e) => e.type === "tool-call");
    assert.deepEqual(call.payload.args, { city: "Oslo" });
    const result = r.events.find((e) => e.type === "tool-result");
    assert.deepEqual(result.payload.result, { city: "Oslo", forecast: "sunny", celsius: 21 });
    const got = tools.calls.slice(before).find((c) => c.path === "/weather");
    assert.deepEqual(got.body, { args: { city: "Oslo" }, toolCallId: call.payload.toolCallId, threadId: r.thread, runId: r.runId });
    assert.match(r.events.filter((e) => e.type === "text-block").at(-1).payload.text, /Tool results: weather/);
    assert.equal(r.fin.payload.status, "completed");
  });

  test("a failing tool is a tool-error with status and body, and the model is told", async () => {
    const r = await converse("break it [[tool:fail]]");
    const err = r.events.find((e) => e.type === "tool-error");
    assert.match(err.payload.error, /HTTP 500.*failed on purpose/);
    const followUp = requestsFor("break it [[tool:fail]]").at(-1);
    assert.match(followUp.messages.at(-1).content, /^Error: HTTP 500/);
    assert.equal(r.fin.payload.status, "completed");
  });

  test("invalid JSON arguments and schema violations are tool-errors the model sees", async () => {
    const bad = await converse("bad [[badargs:weather]]");
    assert.match(bad.events.find((e) => e.type === "tool-error").payload.error, /not a JSON object/);
    assert.equal(bad.fin.payload.status, "completed");
    const schema = await converse('wrong type [[tool:weather:{"city":42}]]');
    assert.match(schema.events.find((e) => e.type === "tool-error").payload.error, /invalid arguments/);
    assert.match(requestsFor("wrong type").at(-1).messages.at(-1).content, /invalid arguments/);
  });

  test("arguments are checked by the draft their schema names, with the platform's Unicode patterns, each violation at its path", async () => {
    const weather = tools.declarations.find((t) => t.name === "weather");
    const strict = {
      ...weather,
      parameters: {
        $schema: "http://json-schema.org/draft-07/schema#",
        type: "object",
        properties: { city: { type: "string", pattern: "^\\p{Lu}\\p{Ll}+$" }, days: { type: "integer", minimum: 1 } },
        required: ["city"],
        additionalProperties: false,
      },
    };
    const { w, api: a } = await stack({ TOOLS: JSON.stringify([strict]) });
    try {
      const ok = await converse('fine [[tool:weather:{"city":"Ørsta"}]]', { a });
      assert.ok(ok.events.some((e) => e.type === "tool-result"), "a city the pattern takes runs the tool");
      const bad = await converse('three wrongs [[tool:weather:{"city":"oslo","days":0,"when":"now"}]]', { a });
      const error = bad.events.find((e) => e.type === "tool-error").payload.error;
      assert.match(error, /^invalid arguments: /);
      assert.match(error, /\/city: .*pattern/);
      assert.match(error, /\/days: 0 is less than 1/);
      assert.match(error, /"when"/);
      assert.equal(bad.fin.payload.status, "completed");
    } finally {
      await w.stop();
    }
    const broken = { ...weather, parameters: { type: "object", properties: { city: { type: "string", minLength: "x" } } } };
    const { w: w2, api: a2 } = await stack({ TOOLS: JSON.stringify([broken]) });
    try {
      const r = await a2.chat(newThread(), "hi");
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, "invalid_tools");
      assert.match(r.json.error.message, /tool `weather`: `parameters` is not a valid JSON Schema: \/properties\/city\/minLength: /);
    } finally {
      await w2.stop();
    }
  });

  test("parallel tool calls run concurrently", async () => {
    // No `ms` parameter: the fake fills declared parameters, and `ms: 1` would not be slow.
    const slowDecl = { ...tools.declarations.find((t) => t.name === "slow"), parameters: { type: "object", properties: {} } };
    const { w, api: a } = await stack({ TOOLS: JSON.stringify([slowDecl, { ...slowDecl, name: "slow2" }]) });
    try {
      const before = tools.calls.length;
      const r = await converse("both at once [[parallel]]", { a });
      const calls = tools.calls.slice(before).filter((c) => c.path === "/slow");
      assert.equal(calls.length, 2);
      assert.ok(calls[1].startedAt < calls[0].endedAt, "the second started before the first ended");
      assert.equal(r.events.filter((e) => e.type === "tool-result").length, 2);
    } finally {
      await w.stop();
    }
  });

  test("the step limit ends the run with an error reason", async () => {
    const { w, api: a } = await stack({ AGENT_MAX_STEPS: "1" });
    try {
      const r = await converse('loop [[tool:weather:{"city":"x"}]]', { a });
      assert.equal(r.fin.payload.status, "error");
      assert.match(r.fin.payload.reason, /step limit/);
    } finally {
      await w.stop();
    }
  });

  test("create-tasks emits tasks-update with the whole list", async () => {
    const r = await converse("plan it [[tasks]]");
    const upd = r.events.find((e) => e.type === "tasks-update");
    assert.deepEqual(upd.payload.tasks.tasks.map((t) => [t.id, t.status]), [["t1", "todo"], ["t2", "todo"]]);
  });

  test("an invalid TOOLS is refused with a clear error before a run starts", async () => {
    const { w, api: a } = await stack({ TOOLS: '[{"name":"x"}]' });
    try {
      const r = await a.chat(newThread(), "hi");
      assert.equal(r.status, 503);
      assert.equal(r.json.error.code, "invalid_tools");
    } finally {
      await w.stop();
    }
  });
});

describe("sub-agents", () => {
  test("spawn-agent runs a sub-agent whose result is the tool result", async () => {
    const r = await converse("delegate [[spawn]]");
    const spawned = r.events.find((e) => e.type === "agent-spawned");
    assert.equal(spawned.payload.parentId, "orchestrator");
    assert.equal(spawned.payload.role, "researcher");
    const child = spawned.agentId;
    const childEvents = r.events.filter((e) => e.agentId === child);
    assert.equal(childEvents[0].type, "agent-spawned");
    assert.equal(childEvents.at(-1).type, "agent-completed");
    assert.equal(childEvents.at(-1).payload.result, "Sub-agent report: done.");
    const result = r.events.find((e) => e.type === "tool-result" && e.agentId === "orchestrator");
    assert.equal(result.payload.result, "Sub-agent report: done.");
    const tree = (await api.messages(r.thread)).json.messages[1].agentTree;
    assert.equal(tree.children[0].agentId, child);
    assert.equal(tree.children[0].status, "completed");
    assert.equal(tree.children[0].textContent, "Sub-agent report: done.");
  });

  test("a background sub-agent outlives the run and is listed in status until it ends", async () => {
    const thread = newThread("bg");
    const r = await api.chat(thread, "in the background [[spawn-bg]] [[slow:250]]");
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "run-finish");
    const result = sse.events().find((e) => e.type === "tool-result");
    assert.match(result.payload.result.taskId, /^task_/);
    const status = (await api.status(thread)).json;
    assert.equal(status.hasActiveRun, false);
    assert.equal(status.backgroundTasks.length, 1);
    assert.equal(status.backgroundTasks[0].status, "running");
    assert.equal(status.backgroundTasks[0].runId, r.json.runId);
    const done = await sse.waitFor((e) => e.type === "agent-completed", 10000);
    assert.ok(done.id > sse.events().find((e) => e.type === "run-finish").id, "after run-finish");
    await until(async () => (await api.status(thread)).json.backgroundTasks.length === 0, { what: "the task to leave status" });
    sse.close();
  });
});

describe("cancel", () => {
  test("cancel in the middle of a parallel tool batch stops everything within 1 s", async () => {
    // No `ms` parameter: the fake fills declared parameters, and `ms: 1` would not be slow.
    const slowDecl = { ...tools.declarations.find((t) => t.name === "slow"), parameters: { type: "object", properties: {} } };
    const { w, api: a } = await stack({ TOOLS: JSON.stringify([slowDecl, { ...slowDecl, name: "slow2" }]) });
    try {
      const thread = newThread("cx");
      const before = tools.calls.length;
      await a.chat(thread, "take your time [[parallel]]");
      const sse = a.events(thread);
      await sse.ready;
      await until(() => tools.calls.slice(before).filter((c) => c.path === "/slow").length === 2, { what: "both tools to start" });
      const t0 = Date.now();
      const c = await a.cancel(thread);
      assert.equal(c.json.cancelled, true);
      const fin = await sse.waitFor((e) => e.type === "run-finish");
      assert.ok(Date.now() - t0 < 1000, "run-finish within 1 s");
      assert.deepEqual(fin.payload, { status: "cancelled", reason: "user_cancelled" });
      // Aborted calls settle as cancelled tool results, not as errors (seed line 363).
      const settled = sse.events().filter((e) => e.type === "tool-result");
      assert.equal(settled.length, 2);
      for (const e of settled) assert.equal(e.payload.result, '[Tool call cancelled. User said: "Run aborted"]');
      assert.equal(sse.events().filter((e) => e.type === "tool-error").length, 0);
      const calls = (await a.messages(thread)).json.messages[1].agentTree.toolCalls;
      assert.ok(calls.every((c) => c.isLoading === false && c.result === '[Tool call cancelled. User said: "Run aborted"]'), "no dangling call");
      await until(() => tools.calls.slice(before).filter((c) => c.path === "/slow").every((c) => c.aborted || c.endedAt), { what: "tool fetches to end" });
      assert.ok(tools.calls.slice(before).some((c) => c.aborted), "the in-flight fetches were aborted");
      await sleep(1700);
      const last = sse.events().at(-1);
      assert.equal(last.type, "run-finish", "nothing published after run-finish");
      assert.equal((await a.status(thread)).json.hasActiveRun, false);
      sse.close();
    } finally {
      await w.stop();
    }
  });

  test("cancel aborts the model stream", async () => {
    const thread = newThread("cx");
    await api.chat(thread, "slowly now [[slow:300]]");
    const sse = api.events(thread);
    await sse.ready;
    await sse.waitFor((e) => e.type === "text-delta");
    await api.cancel(thread);
    await sse.waitFor((e) => e.type === "run-finish");
    const n = sse.events().length;
    await sleep(800);
    assert.equal(sse.events().length, n, "no deltas after the cancel");
    sse.close();
  });
});

describe("the agent tree", () => {
  test("GET .../messages folds the same tree a client folds live", async () => {
    const scenarios = [
      "plain hello",
      "think first [[reason]]",
      'look it up [[tool:weather:{"city":"Oslo"}]]',
      "break it [[tool:fail]]",
      "delegate [[spawn]]",
      "plan it [[tasks]]",
      "both [[parallel]]",
      "bad [[badargs:weather]]",
    ];
    for (const message of scenarios) {
      const thread = newThread("tree");
      // Connected as the run starts: replay, then live.
      const r = await api.chat(thread, message);
      const live = api.events(thread);
      await live.ready;
      await live.waitFor((e) => e.type === "run-finish", 10000, `run-finish of ${message}`);
      const folded = fold(live.events().filter((e) => e.runId === r.json.runId));
      const served = (await api.messages(thread)).json.messages[1].agentTree;
      assert.deepEqual(folded, served, message);
      live.close();
    }
  });
});

describe("restarts", () => {
  test("a built-in run whose object restarted mid-stream resumes from its last step and completes", async () => {
    const dir = tempDir();
    let { w, api: a } = await stack({}, { persist: dir });
    const thread = newThread("rs");
    try {
      const r = await a.chat(thread, "long answer [[slow:250]]");
      const sse = a.events(thread);
      await sse.ready;
      await sse.waitFor((e) => e.type === "text-delta");
      sse.close();
      await w.kill();
      ({ w, api: a } = await stack({}, { persist: dir }));
      const again = a.events(thread);
      await again.ready;
      const fin = await again.waitFor((e) => e.type === "run-finish", 15000);
      assert.equal(fin.runId, r.json.runId);
      assert.deepEqual(fin.payload, { status: "completed" });
      const tree = (await a.messages(thread)).json.messages[1].agentTree;
      assert.match(tree.textContent, /You said: "long answer/);
      again.close();
    } finally {
      await w.stop();
    }
  });

  test("a built-in run that restarted while a tool was in flight ends interrupted", async () => {
    const dir = tempDir();
    let { w, api: a } = await stack({}, { persist: dir });
    const thread = newThread("rs");
    try {
      await a.chat(thread, 'slow tool [[tool:slow:{"ms":3000}]]');
      const sse = a.events(thread);
      await sse.ready;
      await sse.waitFor((e) => e.type === "tool-call");
      sse.close();
      await w.kill();
      ({ w, api: a } = await stack({}, { persist: dir }));
      // The first request after the restart is a send: the dead holder is
      // swept first, so the send is not refused.
      const next = await a.chat(thread, "after the crash");
      assert.equal(next.status, 200, next.text);
      const again = a.events(thread);
      await again.ready;
      const fin = await again.waitFor((e) => e.type === "run-finish", 10000);
      assert.deepEqual(fin.payload, { status: "interrupted", reason: "crash_interrupted" });
      assert.ok(again.events().some((e) => e.type === "tool-interrupted"));
      await again.waitFor((e) => e.type === "run-finish" && e.runId === next.json.runId, 10000);
      again.close();
    } finally {
      await w.stop();
    }
  });
});
