// The AG-UI issue: the real `HttpAgent` (`@ag-ui/client` 1.0.0, its event
// verifier always on) against the Worker on workerd with the fake model. For
// each scenario the run's events pass the verifier and the messages the
// client holds at the end equal the thread's history
// (`GET /ag-ui/threads/:id/messages`).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";
import { ReattachingHttpAgent } from "../examples/ag-ui/reattaching-agent.mjs";
import { startWorker, client, newThread, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 2 });
  tools = await startDemoTools();
  worker = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations) } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

let seq = 0;
const userMessage = (content) => ({ id: `u${++seq}-${Date.now().toString(36)}`, role: "user", content });

/** Runs the agent once; returns the events it applied and how the run ended. */
async function run(agent, params = {}) {
  const events = [];
  let finished;
  let runError;
  await agent.runAgent(params, {
    onEvent: ({ event }) => void events.push(event),
    onRunFinishedEvent: ({ event }) => void (finished = event),
    onRunErrorEvent: ({ event }) => void (runError = event),
  });
  return { events, types: events.map((e) => e.type), finished, runError };
}

const history = async (thread) => {
  const r = await api.call("GET", `/ag-ui/threads/${thread}/messages`);
  assert.equal(r.status, 200, r.text);
  return r.json;
};
const plain = (v) => JSON.parse(JSON.stringify(v));
const runOver = (thread) =>
  until(async () => !(await api.status(thread)).json.hasActiveRun, { timeoutMs: 15000, what: "the run to end" });
const agentOn = (thread, Agent = HttpAgent, extra = {}) => new Agent({ url: `${worker.url}/ag-ui`, threadId: thread, ...extra });

describe("AG-UI HttpAgent", () => {
  test("text with reasoning: verified events, messages equal to the history", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    agent.addMessage(userMessage("hello [[reason]]"));
    const r = await run(agent);
    assert.equal(r.types[0], "RUN_STARTED");
    assert.equal(r.types.at(-1), "RUN_FINISHED");
    for (const t of ["REASONING_START", "REASONING_MESSAGE_CONTENT", "REASONING_END", "TEXT_MESSAGE_CONTENT", "STEP_STARTED", "STEP_FINISHED"]) {
      assert.ok(r.types.includes(t), t);
    }
    await runOver(thread);
    assert.deepEqual(await history(thread), plain(agent.messages));
    const answer = agent.messages.find((m) => m.role === "assistant");
    assert.match(answer.content, /hello \[\[reason\]\]/);
  });

  test("parallel tools, a failing tool, sub-agents and tasks", async () => {
    for (const prompt of ["[[parallel]]", "[[tool:fail:{}]]", "[[spawn]]", "[[tasks]]"]) {
      const thread = newThread("ag");
      const agent = agentOn(thread);
      agent.addMessage(userMessage(`go ${prompt}`));
      const r = await run(agent);
      assert.ok(r.finished, `${prompt}: RUN_FINISHED`);
      await runOver(thread);
      assert.deepEqual(await history(thread), plain(agent.messages), prompt);
      const results = agent.messages.filter((m) => m.role === "tool");
      assert.ok(results.length >= 1, prompt);
      if (prompt === "[[parallel]]") assert.equal(results.length, 2);
      if (prompt.includes("fail")) assert.match(results[0].content, /^Error: /);
      if (prompt === "[[spawn]]") {
        assert.ok(r.types.includes("SUBAGENT_STARTED") && r.types.includes("SUBAGENT_FINISHED"));
        assert.ok(r.events.some((e) => e.subagentRunId && e.type === "TEXT_MESSAGE_CONTENT"), "the sub-agent's text is attributed");
      }
      if (prompt === "[[tasks]]") assert.equal(agent.state.tasks.length, 2, "tasks as state");
    }
  });

  test("an approval interrupts the run; resume approves it and the run goes on", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    agent.addMessage(userMessage('please [[tool:delete-note:{"id":"n1"}]]'));
    const first = await run(agent);
    assert.equal(first.finished.outcome.type, "interrupt");
    const [interrupt] = first.finished.outcome.interrupts;
    assert.equal(interrupt.reason, "tool_approval");
    assert.ok(interrupt.toolCallId);
    assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), [interrupt.id]);
    assert.deepEqual(await history(thread), plain(agent.messages), "the history while it waits");
    const second = await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }] });
    assert.equal(second.types[0], "RUN_STARTED");
    assert.equal(second.finished.outcome, undefined, "a plain finish");
    await runOver(thread);
    const result = agent.messages.find((m) => m.role === "tool" && m.toolCallId === interrupt.toolCallId);
    assert.ok(!result.content.startsWith("Error"), result.content);
    assert.deepEqual(await history(thread), plain(agent.messages));
  });

  test("an approval denied with a reason: the model is told, the result says so", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    agent.addMessage(userMessage('please [[tool:delete-note:{"id":"n2"}]]'));
    const first = await run(agent);
    const [interrupt] = first.finished.outcome.interrupts;
    await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: false, reason: "not that one" } }] });
    await runOver(thread);
    const result = agent.messages.find((m) => m.role === "tool" && m.toolCallId === interrupt.toolCallId);
    assert.match(result.content, /denied this tool call: not that one/);
    assert.deepEqual(await history(thread), plain(agent.messages));
  });

  test("questions are answered through resume", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    agent.addMessage(userMessage("ask me [[ask]]"));
    const first = await run(agent);
    const [interrupt] = first.finished.outcome.interrupts;
    assert.equal(interrupt.reason, "input_required");
    assert.equal(interrupt.metadata.inputType, "questions");
    const answers = [{ questionId: "q1", selectedOptions: ["b"] }];
    await run(agent, { resume: [{ interruptId: interrupt.id, status: "resolved", payload: { answers } }] });
    await runOver(thread);
    const result = agent.messages.find((m) => m.role === "tool" && m.toolCallId === interrupt.toolCallId);
    assert.match(result.content, /"b"/);
    assert.deepEqual(await history(thread), plain(agent.messages));
  });

  test("cancel ends the run with a cancelled outcome; a provider error with RUN_ERROR", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    agent.addMessage(userMessage("slowly [[slow:150]]"));
    const running = run(agent);
    await until(async () => (await api.status(thread)).json.hasActiveRun, { what: "the run" });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await api.cancel(thread)).status, 200);
    const r = await running;
    assert.equal(r.finished.outcome.type, "cancelled");
    assert.deepEqual(await history(thread), plain(agent.messages));

    const failing = newThread("ag");
    const b = agentOn(failing);
    b.addMessage(userMessage("break [[error:500]]"));
    const e = await run(b);
    assert.equal(e.types.at(-1), "RUN_ERROR");
    assert.match(e.runError.message, /500/);
    await runOver(failing);
    assert.deepEqual(await history(failing), plain(b.messages));
  });

  test("a re-sent message id starts nothing; bad inputs get JSON errors", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    const m = userMessage("once");
    agent.addMessage(m);
    await run(agent);
    await runOver(thread);
    const again = await api.call("POST", "/ag-ui", { threadId: thread, runId: "r2", messages: [m] });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "message_already_sent");
    const bad = [
      [{ runId: "r", messages: [] }, 400, "thread_required"],
      [{ threadId: thread, runId: "r" }, 400, "message_required"],
      [{ threadId: thread, runId: "r", messages: [{ id: "a", role: "assistant", content: "x" }] }, 400, "message_required"],
      [{ threadId: thread, runId: "r", messages: [{ id: "x1", role: "user", content: [{ type: "sticker", id: "s" }] }] }, 400, "unsupported_part"],
      [{ threadId: thread, runId: "r", messages: [{ id: "x1", role: "user", content: [{ type: "image", source: { type: "url", value: "u" } }] }] }, 400, "invalid_file"],
      [{ threadId: thread, runId: "r", messages: [], resume: [{ interruptId: `${thread}.cr_nope`, status: "resolved" }] }, 404, "confirmation_not_found"],
    ];
    for (const [body, status, code] of bad) {
      const r = await api.call("POST", "/ag-ui", body);
      assert.equal(r.status, status, `${JSON.stringify(body)} → ${r.text}`);
      assert.equal(r.json.error.code, code);
    }
    assert.equal((await history(thread)).length, 2, "nothing stored");
  });

  test("resume beyond the protocol: a dropped stream re-attaches by Last-Event-ID, every character once", async () => {
    const thread = newThread("ag");
    let drops = 0;
    const attaches = [];
    // The first answer breaks after some frames, as a dropped connection does.
    const cutting = async (url, init) => {
      const resp = await fetch(url, init);
      if (init.method !== "POST" || drops++ > 0) {
        if (init.method === "GET") attaches.push(init.headers["Last-Event-ID"]);
        return resp;
      }
      const reader = resp.body.getReader();
      let seen = 0;
      const body = new ReadableStream({
        async pull(c) {
          const { done, value } = await reader.read();
          if (done) return c.close();
          seen += new TextDecoder().decode(value).split("\n\n").length - 1;
          c.enqueue(value);
          if (seen >= 8) {
            reader.cancel().catch(() => {});
            c.error(new TypeError("terminated"));
          }
        },
      });
      return new Response(body, { status: resp.status, headers: resp.headers });
    };
    const agent = agentOn(thread, ReattachingHttpAgent, { fetch: cutting, baseUrl: worker.url });
    agent.addMessage(userMessage("a long one please [[slow:40]]"));
    const r = await run(agent);
    assert.equal(attaches.length, 1, "one re-attach");
    assert.ok(Number(attaches[0]) >= 1, `from the last id seen (${attaches[0]})`);
    assert.equal(r.types.filter((t) => t === "RUN_STARTED").length, 1);
    await runOver(thread);
    const answer = agent.messages.find((m) => m.role === "assistant");
    assert.equal(answer.content, 'You said: "a long one please [[slow:40]]". This is the fake model answering offline.');
    assert.deepEqual(await history(thread), plain(agent.messages), "equal to a client that never dropped");

    // A finished run replays whole from RUN_STARTED, or from a cursor, and ends.
    const runId = r.events[0].runId;
    const whole = await fetch(`${worker.url}/ag-ui/threads/${thread}/runs/${runId}`);
    const text = await whole.text();
    assert.match(text, /^id: 1\ndata: \{"type":"RUN_STARTED"/);
    assert.match(text, /"type":"RUN_FINISHED"[^\n]*\n\n$/);
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    assert.deepEqual(ids, ids.map((_, i) => i + 1), "numbered by position in the run");
    const tail = await (await fetch(`${worker.url}/ag-ui/threads/${thread}/runs/${runId}`, { headers: { "last-event-id": String(ids.length - 2) } })).text();
    assert.deepEqual([...tail.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [ids.length - 1, ids.length]);
    const unknown = await fetch(`${worker.url}/ag-ui/threads/${thread}/runs/${thread}.nope`);
    assert.equal(unknown.status, 404);
  });

  test("a cold attach after a reload: history, then the running run whole", async () => {
    const thread = newThread("ag");
    const first = agentOn(thread);
    first.addMessage(userMessage("reload me [[slow:40]]"));
    const going = run(first);
    await until(async () => (await api.status(thread)).json.hasActiveRun, { what: "the run" });
    const h = await history(thread);
    assert.equal(h.length, 1, "the running answer is left to the stream");
    const runId = (await api.status(thread)).json.runId;
    const reloaded = agentOn(thread, ReattachingHttpAgent, { baseUrl: worker.url, initialMessages: h });
    await reloaded.connectAgent({ runId });
    await going;
    await runOver(thread);
    assert.deepEqual(plain(reloaded.messages), plain(first.messages));
    assert.deepEqual(await history(thread), plain(reloaded.messages));
  });

  test("client-declared tools: the run ends with the call open; the client's tool result continues it", async () => {
    const thread = newThread("ag");
    const agent = agentOn(thread);
    const tools = [{ name: "confirm_dialog", description: "Ask the user to confirm", parameters: { type: "object", properties: { question: { type: "string" } } } }];
    agent.addMessage(userMessage('please [[tool:confirm_dialog:{"question":"sure?"}]]'));
    const first = await run(agent, { tools });
    assert.equal(first.finished.outcome.type, "success");
    const call = agent.messages.find((m) => m.toolCalls?.length).toolCalls[0];
    assert.equal(call.function.name, "confirm_dialog");
    assert.deepEqual(JSON.parse(call.function.arguments), { question: "sure?" });
    assert.deepEqual(first.finished.outcome.pendingToolCallIds, [call.id]);
    assert.ok(!first.types.includes("TOOL_CALL_RESULT"), "the call is left open for the client");
    const offered = llm.requests.at(-1).tools.map((t) => t.function.name);
    assert.ok(offered.includes("confirm_dialog") && offered.includes("weather"), "offered beside the server's tools");
    assert.equal((await api.status(thread)).json.isSuspended, true, "the run waits, suspended");
    agent.addMessage({ id: "tr-1", role: "tool", toolCallId: call.id, content: "yes, go ahead" });
    const second = await run(agent, { tools });
    assert.equal(second.types[0], "RUN_STARTED");
    await runOver(thread);
    assert.equal(agent.messages.filter((m) => m.role === "tool").length, 1, "the client's result, once");
    const answer = agent.messages.at(-1);
    assert.match(answer.content, /yes, go ahead/, "the model saw the client's result");
    assert.deepEqual(await history(thread), plain(agent.messages));
    const clash = await api.call("POST", "/ag-ui", { threadId: newThread("ag"), runId: "r", messages: [userMessage("x")], tools: [{ name: "weather", description: "mine" }] });
    assert.equal(clash.status, 400);
    assert.equal(clash.json.error.code, "invalid_client_tools");
  });
});
