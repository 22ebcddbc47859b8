// Who may answer a request, and how much of a batch of answers lands, over
// real HTTP on workerd with the built-in agent (the fake model):
//
// - a client tool's result is its thread owner's alone: a client-declared
//   name that an APPROVAL_POLICY entry (or a server tool) already names is
//   refused at declaration, and whatever a stored request says, a
//   role holder who does not own the thread cannot set a client tool's
//   result or answer the owner's question;
// - a batch of answers (AG-UI `resume`, AI SDK continuations, AG-UI tool
//   results) is checked whole before anything is stored: a refused batch
//   decides nothing and tells nobody.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, parseSse, until, hs256Jwt } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const SECRET = "test-secret-0123456789abcdef0123456789";
const token = (sub, extra = {}) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 300, ...extra });

let llm, tools, worker;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  const guarded = { ...tools.declarations.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify([...tools.declarations, guarded]),
      // `pay` is no server tool: a policy may still name it (an external
      // agent's tool), and a client must not borrow its approver.
      APPROVAL_POLICY: JSON.stringify({ pay: { approver: "FINANCE" }, "ask-user": { approver: "FINANCE" } }),
    },
  });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** A client acting as `sub` (with `roles`). */
function as(sub, roles = []) {
  const c = client(worker.url);
  const bearer = token(sub, { roles });
  const call = (method, p, body) => c.call(method, p, body, { authorization: `Bearer ${bearer}` });
  /** POSTs to `path` and reads the whole SSE answer (or the refusal). */
  const stream = async (path, body) => {
    const resp = await fetch(worker.url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await resp.text();
    if (!resp.ok) return { status: resp.status, json: JSON.parse(text) };
    const events = parseSse(text).filter((f) => f.data !== undefined && f.data !== "[DONE]").map((f) => JSON.parse(f.data));
    return { status: resp.status, events };
  };
  return { call, stream, status: (thread) => call("GET", `/instance-ai/threads/${thread}/status`) };
}

let seq = 0;
const userMessage = (content) => ({ id: `u${++seq}-${Date.now().toString(36)}`, role: "user", content });
const clientTool = (name) => ({ name, description: `the client's ${name}`, parameters: { type: "object", properties: { amount: { type: "number" } } } });

/** The thread's stored events, as its owner replays them. */
async function storedEvents(owner, thread) {
  const resp = await fetch(`${worker.url}/v1/threads/${thread}?offset=-1`, {
    headers: { authorization: `Bearer ${token(owner)}` },
  });
  assert.equal(resp.status, 200);
  return resp.json();
}

describe("a client tool's result is the owner's alone", () => {
  test("a client tool named like a policy tool is refused at declaration, on every route that declares tools", async () => {
    const alice = as("alice");
    const aguiThread = newThread("clash");
    const agui = await alice.stream("/ag-ui", {
      threadId: aguiThread,
      runId: "r",
      messages: [userMessage('pay it [[tool:pay:{"amount":5}]]')],
      tools: [clientTool("pay")],
    });
    assert.equal(agui.status, 400, JSON.stringify(agui));
    assert.equal(agui.json.error.code, "invalid_client_tools");
    assert.match(agui.json.error.message, /pay/);
    const uiThread = newThread("clash");
    const ui = await alice.stream("/api/chat", {
      id: uiThread,
      trigger: "submit-message",
      messages: [{ id: `m-${Date.now()}`, role: "user", parts: [{ type: "text", text: "pay [[tool:pay:{}]]" }] }],
      tools: [clientTool("pay")],
    });
    assert.equal(ui.status, 400, JSON.stringify(ui));
    assert.equal(ui.json.error.code, "invalid_client_tools");
    // A server tool's name, and a built-in one's, the same.
    for (const name of ["guarded", "ask-user"]) {
      const r = await alice.stream("/ag-ui", { threadId: newThread("clash"), runId: "r", messages: [userMessage("x")], tools: [clientTool(name)] });
      assert.equal(r.status, 400, name);
      assert.equal(r.json.error.code, "invalid_client_tools", name);
    }
    // A refused declaration stores nothing: neither thread exists.
    for (const thread of [aguiThread, uiThread]) assert.equal((await alice.call("GET", `/instance-ai/threads/${thread}/messages`)).json.nextEventId, 1);
    assert.equal(llm.requests.filter((r) => JSON.stringify(r.messages).includes("pay it")).length, 0, "the model was never asked");
  });

  test("a role holder who does not own the thread cannot set a client tool's result, on any decision route", async () => {
    const alice = as("alice");
    const bob = as("bob", ["FINANCE"]);
    const thread = newThread("ct");
    const first = await alice.stream("/ag-ui", {
      threadId: thread,
      runId: "r",
      messages: [userMessage('send it [[tool:transfer:{"amount":5}]]')],
      tools: [clientTool("transfer")],
    });
    assert.equal(first.status, 200, JSON.stringify(first));
    const finished = first.events.at(-1);
    assert.equal(finished.type, "RUN_FINISHED");
    const [callId] = finished.outcome.pendingToolCallIds;
    const requestId = (await storedEvents("alice", thread)).find((e) => e.type === "confirmation-request").payload.requestId;
    const attempts = [
      ["confirm", () => bob.call("POST", `/instance-ai/confirm/${requestId}`, { result: "done by bob" })],
      ["agora approve", () => bob.call("POST", "/agent/tool-call/approve", { toolCallId: callId })],
      ["ag-ui tool message", () => bob.stream("/ag-ui", {
        threadId: thread,
        runId: "r2",
        messages: [{ id: "tm-bob", role: "tool", toolCallId: callId, content: "done by bob" }],
      })],
      ["ag-ui resume", () => bob.stream("/ag-ui", {
        threadId: thread,
        runId: "r3",
        messages: [],
        resume: [{ interruptId: requestId, status: "resolved", payload: { approved: true } }],
      })],
    ];
    for (const [what, attempt] of attempts) {
      const r = await attempt();
      assert.equal(r.status, 404, `${what}: ${JSON.stringify(r.json ?? r.events)}`);
    }
    assert.equal((await alice.status(thread)).json.isSuspended, true, "still waiting for the owner's client");
    // The owner's client answers, and the run goes on.
    const second = await alice.stream("/ag-ui", {
      threadId: thread,
      runId: "r4",
      messages: [{ id: "tm-1", role: "tool", toolCallId: callId, content: "sent by alice" }],
    });
    assert.equal(second.status, 200);
    assert.equal(second.events.at(-1).type, "RUN_FINISHED");
    await until(async () => !(await alice.status(thread)).json.hasActiveRun, { timeoutMs: 10000, what: "the run to end" });
    const result = (await storedEvents("alice", thread)).find((e) => e.type === "tool-result" && e.payload.toolCallId === callId);
    assert.equal(result.payload.result, "sent by alice");
  });

  test("the owner's question is the owner's to answer, whatever role the policy names for it", async () => {
    const alice = as("alice");
    const bob = as("bob", ["FINANCE"]);
    const thread = newThread("q");
    const run = await alice.call("POST", `/instance-ai/chat/${thread}`, { message: "which? [[ask]]" });
    assert.equal(run.status, 200, run.text);
    const request = await until(async () => {
      const ev = (await storedEvents("alice", thread)).find((e) => e.type === "confirmation-request");
      return ev?.payload;
    }, { what: "the question" });
    const answers = { answers: [{ questionId: "q1", selectedOptions: ["b"] }] };
    const theirs = await bob.call("POST", `/instance-ai/confirm/${request.requestId}`, answers);
    assert.equal(theirs.status, 404, theirs.text);
    assert.equal(theirs.json.error.code, "confirmation_not_found");
    const mine = await alice.call("POST", `/instance-ai/confirm/${request.requestId}`, answers);
    assert.equal(mine.status, 200, mine.text);
  });
});

describe("a batch of answers is admitted whole or not at all", () => {
  const ask = {
    name: "ask-user",
    args: { message: "Which option?", inputType: "questions", questions: [{ id: "q1", question: "Pick one", type: "single", options: ["a", "b"] }] },
  };
  const guardedCall = { name: "guarded", args: { text: "batch" } };

  /** alice's AG-UI run, stopped at two interrupts: `guarded`'s approval and a question. */
  async function twoInterrupts(alice) {
    const thread = newThread("batch");
    const first = await alice.stream("/ag-ui", {
      threadId: thread,
      runId: "r",
      messages: [userMessage(`both [[calls:${JSON.stringify([guardedCall, ask])}]]`)],
    });
    assert.equal(first.status, 200, JSON.stringify(first));
    const outcome = first.events.at(-1).outcome;
    assert.equal(outcome.type, "interrupt", JSON.stringify(first.events.at(-1)));
    const byTool = Object.fromEntries(outcome.interrupts.map((i) => [i.value?.toolName ?? i.metadata?.toolName, i.id]));
    const stored = await storedEvents("alice", thread);
    const requests = stored.filter((e) => e.type === "confirmation-request").map((e) => e.payload);
    const guarded = requests.find((r) => r.toolName === "guarded").requestId;
    const question = requests.find((r) => r.toolName === "ask-user").requestId;
    assert.ok(Object.values(byTool).includes(guarded) && Object.values(byTool).includes(question), JSON.stringify(outcome));
    return { thread, guarded, question };
  }

  test("an AG-UI resume whose second answer does not fit its request decides nothing; the first stays pending", async () => {
    const alice = as("alice", ["FINANCE"]);
    const { thread, guarded, question } = await twoInterrupts(alice);
    const refused = await alice.stream("/ag-ui", {
      threadId: thread,
      runId: "r2",
      messages: [],
      resume: [
        { interruptId: guarded, status: "resolved", payload: { approved: true } },
        { interruptId: question, status: "resolved", payload: { answers: "not a list" } },
      ],
    });
    assert.equal(refused.status, 400, JSON.stringify(refused));
    assert.equal(refused.json.error.code, "invalid_decision");
    // Answering the question alone leaves the run waiting for the approval
    // nobody gave.
    const answer = await alice.call("POST", `/instance-ai/confirm/${question}`, { answers: [{ questionId: "q1", selectedOptions: ["a"] }] });
    assert.equal(answer.status, 200, answer.text);
    const status = (await alice.status(thread)).json;
    assert.equal(status.isSuspended, true, `still waiting for the approval: ${JSON.stringify(status)}`);
    const guardedCallId = (await storedEvents("alice", thread)).find((e) => e.type === "confirmation-request" && e.payload.requestId === guarded).payload.toolCallId;
    assert.ok(
      !(await storedEvents("alice", thread)).some((e) => e.type === "tool-result" && e.payload.toolCallId === guardedCallId),
      "the tool nobody approved did not run",
    );
    // The request the refused batch named is still the owner's to decide.
    const decide = await alice.call("POST", `/instance-ai/confirm/${guarded}`, { approved: false, userInput: "not now" });
    assert.equal(decide.status, 200, decide.text);
    assert.equal(decide.json.state, "denied");
    await until(async () => !(await alice.status(thread)).json.hasActiveRun, { timeoutMs: 10000, what: "the run to end" });
    const errors = (await storedEvents("alice", thread)).filter((e) => e.type === "tool-error" && e.payload.toolCallId === guardedCallId);
    assert.equal(errors.length, 1, "denied once");
  });
});
