// The AI SDK issue: the real client (`AbstractChat` + `DefaultChatTransport`,
// the class under `useChat`) against the Worker on workerd with the fake
// model, for the major a new app installs (`ai` 7) and the previous one
// (`ai` 6, installed as `ai6`): the routes serve both. For each scenario the
// client's final message must equal the history route's message for that run.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import * as ai7 from "ai";
import * as ai6 from "ai6";
import { startWorker, client, newThread, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 2 });
  tools = await startDemoTools();
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations) },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** The React state's semantics, without React (the notes' vanilla state). */
class State {
  status = "ready";
  error = undefined;
  #messages;
  constructor(messages = []) {
    this.#messages = messages;
  }
  get messages() {
    return this.#messages;
  }
  set messages(m) {
    this.#messages = [...m];
  }
  pushMessage = (m) => {
    this.#messages = this.#messages.concat(this.snapshot(m));
  };
  popMessage = () => {
    this.#messages = this.#messages.slice(0, -1);
  };
  replaceMessage = (i, m) => {
    this.#messages = [...this.#messages.slice(0, i), this.snapshot(m), ...this.#messages.slice(i + 1)];
  };
  snapshot = (v) => (v != null && typeof v === "object" && Array.isArray(v.parts) ? { ...v, parts: v.parts.map((p) => ({ ...p })) } : v);
}

for (const [major, ai] of [["ai 7", ai7], ["ai 6, the previous major", ai6]]) {
  const { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } = ai;

  class Chat extends AbstractChat {
    constructor({ messages, ...init }) {
      super({ ...init, state: new State(messages) });
      this.data = [];
      this.errors = [];
    }
  }

  /** A chat on `thread`, as `useChat` would make it. */
  function chat(thread, { messages = [], auto = true } = {}) {
    const c = new Chat({
      id: thread,
      messages,
      transport: new DefaultChatTransport({ api: `${worker.url}/api/chat` }),
      ...(auto ? { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses } : {}),
      onData: (d) => c.data.push(d),
      onError: (e) => c.errors.push(e),
    });
    return c;
  }

  const plain = (v) => JSON.parse(JSON.stringify(v));
  const history = async (thread) => {
    const r = await api.call("GET", `/api/chat/${thread}/messages`);
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const settled = (c, timeoutMs = 15000) =>
    until(() => c.status === "ready" || c.status === "error", { timeoutMs, what: `chat ready (status ${c.status})` });
  const runOver = (thread) =>
    until(async () => !(await api.status(thread)).json.hasActiveRun, { timeoutMs: 15000, what: "the run to end" });
  const last = (c) => plain(c.messages.at(-1));
  const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
  /** Messages without the history's branch positions (`metadata.branch`), as a client that read the streams holds them. */
  const withoutBranches = (messages) =>
    messages.map(({ metadata, ...m }) => {
      if (!metadata?.branch) return metadata === undefined ? m : { ...m, metadata };
      const { branch: _, ...rest } = metadata;
      return Object.keys(rest).length || m.role === "assistant" ? { ...m, metadata: rest } : m;
    });

  /** Sends and waits; returns the final messages. */
  async function turn(c, text) {
    await c.sendMessage({ text });
    await settled(c);
    assert.deepEqual(c.errors, [], "no client error");
    return plain(c.messages);
  }

  describe(`AI SDK useChat (${major})`, () => {
    test("text with reasoning: the client's message is the history's, the run id its id", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      const messages = await turn(c, "hello [[reason]]");
      await runOver(thread);
      assert.equal(messages.length, 2);
      const [user, answer] = messages;
      assert.equal(user.role, "user");
      assert.match(answer.id, new RegExp(`^${thread}\\.u_`), "the assistant message id is the run's");
      const types = answer.parts.map((p) => p.type);
      assert.deepEqual(types, ["data-title", "step-start", "reasoning", "text"]);
      assert.match(textOf(answer), /hello/);
      assert.ok(answer.parts.filter((p) => p.type === "text" || p.type === "reasoning").every((p) => p.state === "done"));
      assert.deepEqual(await history(thread), messages);
      assert.ok(c.data.some((d) => d.type === "data-title"), "the title as a data part");
    });

    test("parallel tools, a failing tool, sub-agents and tasks, each equal to the history", async () => {
      for (const prompt of ["[[parallel]]", "[[tool:fail:{}]]", "[[spawn]]", "[[tasks]]"]) {
        const thread = newThread("ui");
        const c = chat(thread);
        const messages = await turn(c, `go ${prompt}`);
        await runOver(thread);
        assert.deepEqual(await history(thread), messages, prompt);
        const parts = messages[1].parts;
        const toolParts = parts.filter((p) => p.type === "dynamic-tool");
        assert.ok(toolParts.length >= 1, prompt);
        if (prompt === "[[parallel]]") {
          assert.equal(toolParts.length, 2);
          assert.ok(toolParts.every((p) => p.state === "output-available"));
        }
        if (prompt.includes("fail")) assert.equal(toolParts[0].state, "output-error");
        if (prompt === "[[spawn]]") {
          const agent = parts.find((p) => p.type === "data-agent");
          assert.equal(agent.data.status, "completed");
          assert.equal(agent.data.role, "researcher");
        }
        if (prompt === "[[tasks]]") {
          const tasks = parts.filter((p) => p.type === "data-tasks");
          assert.equal(tasks.length, 1, "one tasks part, replaced in place");
          assert.equal(tasks[0].data.tasks.length, 2);
        }
      }
    });

    test("an approval approved: the stream stops at the request, the answer continues the same message", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      await c.sendMessage({ text: 'please [[tool:delete-note:{"id":"n1"}]]' });
      await settled(c);
      let msg = last(c);
      const part = msg.parts.find((p) => p.type === "dynamic-tool");
      assert.equal(part.state, "approval-requested");
      assert.match(part.approval.id, new RegExp(`^${thread}\\.cr_`));
      // Reloaded now, the history shows the same pending request.
      assert.deepEqual(await history(thread), plain(c.messages));
      const posts = [];
      await c.addToolApprovalResponse({ id: part.approval.id, approved: true });
      await until(() => c.status !== "ready" || last(c).parts.some((p) => p.state === "output-available"), { what: "the continuation" });
      await settled(c);
      await runOver(thread);
      msg = last(c);
      assert.equal(c.messages.length, 2, "one assistant message, continued");
      const done = msg.parts.find((p) => p.type === "dynamic-tool");
      assert.equal(done.state, "output-available");
      assert.deepEqual(done.approval, { id: part.approval.id, approved: true });
      assert.match(textOf(msg), /./, "the model answered after the tool");
      assert.deepEqual(await history(thread), plain(c.messages));
      assert.deepEqual(c.errors, []);
      void posts;
    });

    test("an approval denied with a reason: tool-output-denied, and the model is told", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      await c.sendMessage({ text: 'please [[tool:delete-note:{"id":"n2"}]]' });
      await settled(c);
      const part = last(c).parts.find((p) => p.type === "dynamic-tool");
      await c.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "not that one" });
      await until(() => last(c).parts.some((p) => p.state === "output-denied"), { what: "the denial" });
      await settled(c);
      await runOver(thread);
      const denied = last(c).parts.find((p) => p.type === "dynamic-tool");
      assert.equal(denied.state, "output-denied");
      assert.deepEqual(denied.approval, { id: part.approval.id, approved: false, reason: "not that one" });
      assert.deepEqual(await history(thread), plain(c.messages));
      const toModel = llm.requests.at(-1).messages.find((m) => m.role === "tool");
      assert.match(toModel.content, /denied this tool call: not that one/);
    });

    test("an approval after a reload: a new chat from the history answers it", async () => {
      const thread = newThread("ui");
      const first = chat(thread);
      await first.sendMessage({ text: 'please [[tool:delete-note:{"id":"n3"}]]' });
      await settled(first);
      const reloaded = chat(thread, { messages: await history(thread) });
      const part = last(reloaded).parts.find((p) => p.type === "dynamic-tool");
      assert.equal(part.state, "approval-requested");
      await reloaded.addToolApprovalResponse({ id: part.approval.id, approved: true });
      await until(() => last(reloaded).parts.some((p) => p.state === "output-available"), { what: "the continuation" });
      await settled(reloaded);
      await runOver(thread);
      assert.equal(reloaded.messages.length, 2);
      assert.deepEqual(await history(thread), plain(reloaded.messages));
    });

    test("stop: the stop route cancels the run; the stream ends with abort, and the history agrees", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      const sent = c.sendMessage({ text: "tell me slowly [[slow:200]]" });
      await until(() => c.status === "streaming", { what: "streaming" });
      const stop = await api.call("POST", `/api/chat/${thread}/stop`);
      assert.equal(stop.status, 200, stop.text);
      assert.equal(stop.json.cancelled, true);
      await sent;
      await settled(c);
      assert.deepEqual(c.errors, []);
      await runOver(thread);
      assert.deepEqual(await history(thread), plain(c.messages));
    });

    test("regenerate replaces the answer; a second turn sees the first", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      await turn(c, "first question");
      await runOver(thread);
      const before = last(c).id;
      await c.regenerate();
      await settled(c);
      await runOver(thread);
      assert.equal(c.messages.length, 2);
      assert.notEqual(last(c).id, before, "a new answer, under the new run");
      // The history says where the answer stands among its siblings (the
      // stream does not: the client learns it on its next read).
      const [, answer] = await history(thread);
      assert.deepEqual(answer.metadata.branch, { index: 1, count: 2, ids: [before, last(c).id] });
      assert.deepEqual(withoutBranches(await history(thread)), plain(c.messages));
      await turn(c, "second question");
      await runOver(thread);
      const req = llm.requests.filter((b) => JSON.stringify(b.messages).includes("second question")).at(-1);
      assert.ok(JSON.stringify(req.messages).includes("first question"), "memory of the first turn");
      assert.deepEqual(withoutBranches(await history(thread)), plain(c.messages));
    });

    test("the client's edit and its regenerate of an earlier answer branch the conversation", async () => {
      const thread = newThread("ui");
      const c = chat(thread);
      for (const q of ["one", "two", "three"]) {
        await turn(c, q);
        await runOver(thread);
      }
      const [u1, a1, u2] = plain(c.messages);
      // `sendMessage({text, messageId})`: the second message, edited.
      await c.sendMessage({ text: "two, edited", messageId: u2.id });
      await settled(c);
      await runOver(thread);
      assert.deepEqual(c.errors, []);
      assert.deepEqual(plain(c.messages).map(textOf), ["one", textOf(a1), "two, edited", textOf(last(c))]);
      const seen = llm.requests.filter((b) => JSON.stringify(b.messages).includes("two, edited")).at(-1);
      const said = seen.messages.filter((m) => m.role !== "system").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
      assert.equal(said.length, 3, `the path up to the edit: ${JSON.stringify(said)}`);
      assert.match(said[0], /one/);
      assert.match(said[2], /two, edited/);
      assert.ok(!said.some((s) => /three/.test(s)), "the abandoned branch is not in the model's context");
      let shown = await history(thread);
      assert.deepEqual(shown.map(textOf), plain(c.messages).map(textOf));
      assert.deepEqual(shown[2].metadata.branch.ids[0], u2.id, "the edited message is the first of two");
      assert.equal(shown[2].metadata.branch.count, 2);
      // `regenerate({messageId})` of the first answer: the path is that answer again.
      await c.regenerate({ messageId: a1.id });
      await settled(c);
      await runOver(thread);
      assert.deepEqual(c.errors, []);
      assert.equal(c.messages.length, 2);
      shown = await history(thread);
      assert.deepEqual(withoutBranches(shown), plain(c.messages));
      assert.deepEqual(shown[1].metadata.branch, { index: 1, count: 2, ids: [a1.id, last(c).id] });
      assert.equal(shown[0].id, u1.id);
    });

    test("a re-sent user message starts nothing: it follows its run while active, else 409", async () => {
      const thread = newThread("ui");
      const body = (text, id = "m-1") => ({ id: thread, messages: [{ id, role: "user", parts: [{ type: "text", text }] }], trigger: "submit-message" });
      const first = await fetch(`${worker.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body("slowly [[slow:50]]")) });
      assert.equal(first.status, 200);
      assert.equal(first.headers.get("x-vercel-ai-ui-message-stream"), "v1");
      const again = await fetch(`${worker.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body("slowly [[slow:50]]")) });
      assert.equal(again.status, 200, "the same message while its run is active: its stream");
      const [a, b] = await Promise.all([first.text(), again.text()]);
      assert.equal(a, b, "both streams carry the same run, byte for byte");
      assert.ok(a.endsWith("data: [DONE]\n\n"));
      await runOver(thread);
      const late = await api.call("POST", "/api/chat", body("slowly"));
      assert.equal(late.status, 409);
      assert.equal(late.json.error.code, "message_already_sent");
      assert.equal((await history(thread)).length, 2, "nothing new stored");
    });

    test("a busy thread follows mode: queue answers a stream that says so, reject a 409", async () => {
      const thread = newThread("ui");
      const body = (text, id, mode) => ({ id: thread, mode, messages: [{ id, role: "user", parts: [{ type: "text", text }] }] });
      const first = fetch(`${worker.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body("slowly [[slow:100]]", "q-1")) });
      await until(async () => (await api.status(thread)).json.hasActiveRun, { what: "the first run" });
      const refused = await api.call("POST", "/api/chat", body("second", "q-2"));
      assert.equal(refused.status, 409);
      assert.equal(refused.json.error.code, "run_active");
      const queued = await fetch(`${worker.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body("second", "q-3", "queue")) });
      assert.equal(queued.status, 200);
      assert.equal(queued.headers.get("x-vercel-ai-ui-message-stream"), "v1");
      const text = await queued.text();
      const chunk = JSON.parse(text.split("\n\n")[0].slice("data: ".length));
      assert.equal(chunk.type, "data-queued");
      assert.equal(chunk.transient, true);
      assert.equal(chunk.data.messageId, "q-3", "the client's id is kept in the queue");
      assert.ok(text.endsWith("data: [DONE]\n\n"));
      await (await first).text();
      await until(async () => (await history(thread)).length === 4, { timeoutMs: 15000, what: "the queued message answered" });
      const h = await history(thread);
      assert.deepEqual(h.map((m) => m.id).filter((id) => !id.includes(".")), ["q-1", "q-3"]);
    });

    test("bad bodies get JSON errors with stable codes, and store nothing", async () => {
      const thread = newThread("ui");
      const post = (b) => api.call("POST", "/api/chat", b);
      const user = (parts, id = "m1") => ({ id: thread, messages: [{ id, role: "user", parts }] });
      const cases = [
        [{ messages: [] }, 400, "thread_required"],
        [{ id: thread }, 400, "message_required"],
        [{ id: thread, messages: [] }, 400, "message_required"],
        [user([{ type: "source-url", sourceId: "s", url: "https://x" }]), 400, "unsupported_part"],
        [user([{ type: "file", url: "data:,", mediaType: "text/plain" }]), 400, "invalid_file"],
        [user([{ type: "text", text: "x" }], "bad id"), 400, "invalid_id"],
        [{ id: thread, messages: [{ id: "a1", role: "assistant", parts: [{ type: "text", text: "x" }] }] }, 409, "nothing_to_continue"],
        [{ id: thread, messages: [{ id: "m1", role: "user", parts: [] }], trigger: "nope" }, 400, "invalid_body"],
      ];
      for (const [b, status, code] of cases) {
        const r = await post(b);
        assert.equal(r.status, status, `${JSON.stringify(b)} → ${r.text}`);
        assert.equal(r.json.error.code, code);
      }
      const notJson = await api.call("POST", "/api/chat", "{nope");
      assert.equal(notJson.status, 400);
      // A thread nobody created is an empty one: nothing stored, no run.
      assert.equal((await api.messages(thread)).json.nextEventId, 1, "no refused send stored anything");
      assert.equal((await api.status(thread)).json.hasActiveRun, false);
    });

    test("reload mid-answer: the run goes on, a new chat resumes it, every character once", async () => {
      const thread = newThread("ui");
      const first = chat(thread);
      const sent = first.sendMessage({ text: "a long answer please [[slow:60]]" });
      await until(() => first.messages.length === 2 && textOf(last(first)).length > 10, { what: "some text" });
      await first.stop();
      await sent;
      assert.equal((await api.status(thread)).json.hasActiveRun, true, "closing the stream never cancels the run");
      // The reload: history, then the reconnect.
      const h = await history(thread);
      assert.equal(h.length, 1, "the running answer is left to the stream");
      const second = chat(thread, { messages: h });
      // Both tabs reconnect while the run is still going.
      await Promise.all([second.resumeStream(), first.resumeStream()]);
      await Promise.all([settled(second), settled(first)]);
      assert.deepEqual(second.errors, []);
      assert.deepEqual(first.errors, []);
      await runOver(thread);
      const final = await history(thread);
      assert.equal(second.messages.length, 2, "one user message, one answer: nothing doubled");
      assert.deepEqual(plain(second.messages), final);
      assert.match(textOf(final[1]), /a long answer please/);
      assert.equal(textOf(final[1]), `You said: "a long answer please [[slow:60]]". This is the fake model answering offline.`);
      assert.deepEqual(plain(first.messages), final, "the first tab ends equal");
      const gone = await fetch(`${worker.url}/api/chat/${thread}/stream`);
      assert.equal(gone.status, 204, "nothing to resume once the run is over");
      const unknown = await fetch(`${worker.url}/api/chat/${newThread("none")}/stream`);
      assert.equal(unknown.status, 204);
    });

    test("client-side tools: the client runs the call (onToolCall + addToolOutput) and the message continues", async () => {
      const thread = newThread("ui");
      const tools = [{ name: "get_location", description: "Where the user is", parameters: { type: "object", properties: {} } }];
      const calls = [];
      const c = new Chat({
        id: thread,
        transport: new DefaultChatTransport({ api: `${worker.url}/api/chat`, body: { tools } }),
        sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
        onToolCall: ({ toolCall }) => {
          calls.push(toolCall.toolName);
          void c.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { city: "Oslo" } });
        },
        onError: (e) => c.errors.push(e),
      });
      await c.sendMessage({ text: "where am I [[tool:get_location:{}]]" });
      await until(() => textOf(last(c)).includes("Oslo"), { timeoutMs: 15000, what: "the answer after the client's tool" });
      await settled(c);
      await runOver(thread);
      assert.deepEqual(calls, ["get_location"]);
      assert.deepEqual(c.errors, []);
      assert.equal(c.messages.length, 2, "one answer, continued");
      const part = last(c).parts.find((p) => p.type === "dynamic-tool");
      assert.equal(part.state, "output-available");
      assert.deepEqual(part.output, { city: "Oslo" });
      assert.deepEqual(await history(thread), plain(c.messages));
    });
  });
}
