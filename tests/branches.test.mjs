// Edit and branch over real HTTP on workerd, with the built-in agent and
// the fake model: an edit of an earlier message answers from the path up to
// it, any answer is given again beside itself, a switch moves the active
// path, every tab follows live, and a reload, a reconnect from a cursor and
// each protocol's history show the same path.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";
import { ThreadlineClient, ThreadSession } from "../client/dist/index.js";
import { HttpAgent } from "@ag-ui/client";

let llm, tools, worker, api, tc;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  worker = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations) } });
  api = client(worker.url);
  tc = new ThreadlineClient({ baseUrl: worker.url });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

const idle = (thread) =>
  until(async () => !(await api.status(thread)).json.hasActiveRun, { timeoutMs: 15000, what: "the run to end" });

/** Sends `body` and waits for its run to end; returns the send's answer. */
async function turn(thread, body) {
  const r = await api.call("POST", `/instance-ai/chat/${thread}`, body);
  assert.equal(r.status, 200, r.text);
  await idle(thread);
  return r.json;
}

const view = async (thread) => (await api.messages(thread)).json.messages;
const said = (messages) => messages.map((m) => `${m.role}:${m.role === "user" ? m.content : m.runId}`);
/** What the model was asked with, `role:content`, system prompt aside. */
const asked = (body) => body.messages.filter((m) => m.role !== "system").map((m) => `${m.role}:${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`);
const requestFor = (text) => llm.requests.filter((b) => JSON.stringify(b.messages).includes(text)).at(-1);

/** A thread of four answered turns: its messages view. */
async function four(label) {
  const thread = newThread(label);
  for (const q of ["one", "two", "three", "four"]) await turn(thread, { message: q });
  return { thread, messages: await view(thread) };
}

describe("edit and branch", () => {
  test("an edit of the second of four: the model receives the first message, the first answer and the edited second only", async () => {
    const { thread, messages } = await four("br");
    const [u1, a1, u2] = messages;
    const started = await turn(thread, { message: "two, edited", editOf: u2.id });
    const req = requestFor("two, edited");
    assert.deepEqual(asked(req), ["user:one", `assistant:${a1.content}`, "user:two, edited"]);
    const now = await view(thread);
    assert.deepEqual(said(now), ["user:one", `assistant:${a1.runId}`, "user:two, edited", `assistant:${started.runId}`]);
    assert.equal(now[2].branch.count, 2);
    assert.deepEqual(now[2].branch.ids, [u2.id, now[2].id]);
    assert.equal(now[0].id, u1.id);
    assert.equal(now[1].branch, undefined, "an answer with no sibling has no branch");
  });

  test("switch back and forth, regenerate the first answer: two tabs follow live, a reload and a reconnect show the same path", async () => {
    const { thread, messages } = await four("br");
    const [, a1, u2, , , , , a4] = messages;
    const tab1 = new ThreadSession(tc, thread);
    const tab2 = new ThreadSession(tc, thread);
    await tab1.open();
    await tab2.open();
    const texts = (s) => s.turns.map((t) => t.message);
    const same = async (want, what) => {
      await until(() => JSON.stringify(texts(tab2)) === JSON.stringify(want) && tab2.turns.every((t) => !t.running), {
        timeoutMs: 10000,
        what: `${what}: the other tab shows ${JSON.stringify(want)} (has ${JSON.stringify(texts(tab2))})`,
      });
      await tab2.settled;
    };
    await tab1.edit(u2.id, "two, edited");
    await same(["one", "two, edited"], "edit");
    assert.equal(tab2.turns[1].messageBranch.count, 2, "the other tab knows the edit's siblings");
    await idle(thread);
    const edited = (await view(thread))[2];
    assert.equal(edited.content, "two, edited");
    // Back: the first version of the second message, to its newest turn.
    assert.equal(await tab1.switchBranch(u2.id), a4.runId);
    await same(["one", "two", "three", "four"], "switch back");
    // And forth, by the edited message.
    await tab1.switchBranch(edited.id);
    await same(["one", "two, edited"], "switch forth");
    // The first answer, given again: the path is that answer alone.
    const again = await tab1.regenerate(a1.runId);
    await same(["one"], "regenerate");
    await idle(thread);
    assert.equal(tab2.turns[0].runId, again.runId);
    assert.deepEqual(tab2.turns[0].answerBranch, { index: 1, count: 2, ids: [a1.runId, again.runId] });
    // A reload shows what the live tab shows; so does a reconnect from its cursor.
    const reload = new ThreadSession(tc, thread);
    await reload.open();
    const shape = (s) => s.turns.map((t) => [t.runId, t.message, t.messageBranch ?? null, t.answerBranch ?? null, t.tree?.textContent]);
    await until(() => tab2.turns[0]?.tree?.status === "completed", { what: "the answer's tree" });
    assert.deepEqual(shape(reload), shape(tab2));
    tab2.reconnect();
    await until(() => tab2.connection === "open", { what: "the reconnect" });
    assert.deepEqual(shape(tab2), shape(reload));
    // The raw log still has every event once: two run-starts for the first message, two switches.
    const raw = api.events(thread);
    await raw.ready;
    await until(() => raw.durable().some((e) => e.type === "run-start" && e.runId === again.runId), { what: "the replay" });
    const events = raw.durable();
    raw.close();
    assert.equal(events.filter((e) => e.type === "branch-switched").length, 2);
    assert.equal(new Set(events.map((e) => e.id)).size, events.length, "each event once");
    for (const s of [tab1, tab2, reload]) s.close();
  });

  test("each protocol's history says where a message stands among its siblings", async () => {
    const { thread, messages } = await four("br");
    const [, a1, u2] = messages;
    await turn(thread, { message: "two, edited", editOf: u2.id });
    const again = await turn(thread, { regenerate: true, messageId: a1.runId });
    await api.call("POST", `/instance-ai/threads/${thread}/branch`, { messageId: u2.id });
    // n8n's messages view.
    const n8n = await view(thread);
    assert.deepEqual(n8n[1].branch, { index: 0, count: 2, ids: [a1.runId, again.runId] });
    assert.equal(n8n[2].branch.index, 0);
    assert.equal(n8n[2].branch.count, 2);
    // agora's thread detail.
    const agora = (await api.call("GET", `/agent/threads/${thread}`)).json;
    const rows = agora.messages.filter((m) => m.branch);
    assert.deepEqual(rows.map((m) => [m.id, m.branch.count]), [[`${a1.runId}:assistant`, 2], [u2.id, 2]]);
    // The AI SDK's messages, in their metadata.
    const ui = (await api.call("GET", `/api/chat/${thread}/messages`)).json;
    assert.deepEqual(ui[1].metadata.branch, { index: 0, count: 2, ids: [a1.runId, again.runId] });
    assert.equal(ui[2].metadata.branch.count, 2);
    // Flue's snapshot: the active path only, positions in each message's metadata.
    const flue = (await api.call("GET", `/agents/default/${thread}`)).json;
    const flueUsers = flue.messages.filter((m) => m.role === "user").map((m) => m.parts.map((p) => p.text).join(""));
    assert.deepEqual(flueUsers, ["one", "two", "three", "four"]);
    assert.equal(flue.messages.filter((m) => m.role === "assistant").length, 4);
    const flueBranched = flue.messages.filter((m) => m.metadata?.branch).map((m) => [m.role, m.submissionId, m.metadata.branch.count]);
    assert.deepEqual(flueBranched, [["assistant", a1.runId, 2], ["user", n8n[3].runId, 2]]);
    // AG-UI's messages: the user message and the run's first answer, as an extension.
    const agui = (await api.call("GET", `/ag-ui/threads/${thread}/messages`)).json;
    const aguiBranched = agui.filter((m) => m.branch).map((m) => [m.role, m.branch.count, m.branch.index]);
    assert.deepEqual(aguiBranched, [["assistant", 2, 0], ["user", 2, 0]]);
    assert.deepEqual(agui.find((m) => m.role === "assistant" && m.branch).branch.ids, [a1.runId, again.runId]);
    // What the thread used: every run's, and the active path's apart.
    const usage = (await api.call("GET", `/instance-ai/threads/${thread}/usage`)).json;
    assert.equal(usage.total.runs, 6);
    assert.equal(usage.activePath.total.runs, 4);
    assert.ok(usage.activePath.total.totalTokens < usage.total.totalTokens);
  });

  test("bad branch requests: 404 for an unknown id, 400 for the wrong kind, 409 while a run is active; nothing stored", async () => {
    const { thread, messages } = await four("br");
    const [, a1, u2] = messages;
    const before = (await api.messages(thread)).json.nextEventId;
    const cases = [
      [{ message: "x", editOf: "nope" }, 404, "message_not_found"],
      [{ message: "x", editOf: a1.runId }, 400, "not_a_user_message"],
      [{ regenerate: true, messageId: u2.id }, 400, "not_an_answer"],
      [{ regenerate: true, messageId: "nope" }, 404, "message_not_found"],
      [{ message: "x", editOf: { id: 1 } }, 400, "invalid_message_id"],
    ];
    for (const [body, status, code] of cases) {
      const r = await api.call("POST", `/instance-ai/chat/${thread}`, body);
      assert.equal(r.status, status, JSON.stringify(body));
      assert.equal(r.json.error.code, code);
    }
    const sw = await api.call("POST", `/instance-ai/threads/${thread}/branch`, { messageId: "nope" });
    assert.deepEqual([sw.status, sw.json.error.code], [404, "message_not_found"]);
    assert.equal((await api.messages(thread)).json.nextEventId, before, "nothing stored");
    // While a run is active, the tree does not change.
    const slow = await api.call("POST", `/instance-ai/chat/${thread}`, { message: "slowly [[slow:80]]" });
    assert.equal(slow.status, 200);
    for (const [path, body] of [
      [`/instance-ai/chat/${thread}`, { message: "x", editOf: u2.id }],
      [`/instance-ai/chat/${thread}`, { regenerate: true, messageId: a1.runId }],
      [`/instance-ai/threads/${thread}/branch`, { messageId: u2.id }],
    ]) {
      const r = await api.call("POST", path, body);
      assert.deepEqual([r.status, r.json.error.code], [409, "run_active"], path);
    }
    await api.cancel(thread);
    await idle(thread);
  });

  test("AG-UI: an HttpAgent whose messages leave the active path edits where they leave it; agora answers any answer again", async () => {
    const thread = newThread("br");
    const agent = new HttpAgent({ url: `${worker.url}/ag-ui`, threadId: thread });
    for (const [i, q] of ["one", "two", "three"].entries()) {
      agent.addMessage({ id: `ag-${i}`, role: "user", content: q });
      await agent.runAgent();
      await idle(thread);
    }
    // The client drops what followed its first answer and sends a new second message.
    const kept = agent.messages.slice(0, agent.messages.findIndex((m) => m.id === "ag-1"));
    agent.setMessages([...kept, { id: "ag-1b", role: "user", content: "two, edited" }]);
    await agent.runAgent();
    await idle(thread);
    const now = await view(thread);
    assert.deepEqual(now.filter((m) => m.role === "user").map((m) => m.content), ["one", "two, edited"]);
    assert.deepEqual(now[2].branch.ids, ["ag-1", "ag-1b"], "the client's ids, the edit beside the message it replaces");
    assert.deepEqual(asked(requestFor("two, edited")).map((s) => s.split(":")[0]), ["user", "assistant", "user"]);
    // agora's send: `regenerate` with a `messageId` (an answer's run id).
    const first = now[1].runId;
    const r = await api.call("POST", "/agent/chat", { threadId: thread, regenerate: true, messageId: first });
    assert.equal(r.status, 200, r.text);
    await idle(thread);
    const detail = (await api.call("GET", `/agent/threads/${thread}`)).json;
    const last = detail.messages.filter((m) => m.branch && m.id.endsWith(":assistant"));
    assert.equal(last.length, 1);
    assert.deepEqual(last[0].branch.ids[0], first);
    assert.equal(detail.messages.filter((m) => m.role === "user").length, 1, "the path is that answer again");
  });

  test("twenty edits at once: one starts, the others are refused, and the tree holds one new version", async () => {
    const { thread, messages } = await four("br");
    const u2 = messages[2];
    const sends = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api.call("POST", `/instance-ai/chat/${thread}`, { message: `edit ${i}`, editOf: u2.id })),
    );
    const started = sends.filter((r) => r.status === 200);
    assert.equal(started.length, 1, JSON.stringify(sends.map((r) => r.status)));
    assert.ok(sends.filter((r) => r.status !== 200).every((r) => r.status === 409 && r.json.error.code === "run_active"));
    await idle(thread);
    const now = await view(thread);
    assert.equal(now[2].branch.count, 2, "one new version");
  });

  test("an edit while a person's decision is pending is refused, and the request stays pending", async () => {
    const thread = newThread("br");
    await turn(thread, { message: "one" });
    const ask = await api.call("POST", `/instance-ai/chat/${thread}`, { message: 'remove it [[tool:delete-note:{"id":"n1"}]]' });
    assert.equal(ask.status, 200);
    await until(async () => (await api.status(thread)).json.isSuspended, { timeoutMs: 10000, what: "the run to wait for a person" });
    const [u1] = await view(thread);
    const edit = await api.call("POST", `/instance-ai/chat/${thread}`, { message: "one, edited", editOf: u1.id });
    assert.deepEqual([edit.status, edit.json.error.code], [409, "run_active"]);
    const status = (await api.status(thread)).json;
    assert.equal(status.isSuspended, true, "still waiting for the person");
    await api.cancel(thread);
    await idle(thread);
  });

  test("a fork answers on its own while the original is unchanged; its history is shared, not copied", async () => {
    const { thread, messages } = await four("br");
    const [u1, a1, u2, a2] = messages;
    const before = await view(thread);
    const r = await api.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: a2.runId });
    assert.equal(r.status, 201, r.text);
    const fork = r.json.threadId;
    assert.deepEqual(r.json.forkedFrom.threadId, thread);
    assert.deepEqual(r.json.forkedFrom.runId, a2.runId);
    // Its history is the source's path up to the message.
    const shared = await view(fork);
    assert.deepEqual(said(shared), said(messages.slice(0, 4)));
    assert.ok(shared.every((m) => m.sharedFrom === thread), "each shared message names its thread");
    // It is listed at once, with its source's title.
    const listed = (await api.call("GET", "/agent/threads")).json;
    assert.equal(listed.find((x) => x.id === fork)?.title, "one");
    // Its own turn remembers the shared history, and only it.
    await turn(fork, { message: "three, elsewhere" });
    assert.deepEqual(asked(requestFor("three, elsewhere")), ["user:one", `assistant:${a1.content}`, "user:two", `assistant:${a2.content}`, "user:three, elsewhere"]);
    const after = await view(fork);
    assert.deepEqual(after.filter((m) => m.role === "user").map((m) => m.content), ["one", "two", "three, elsewhere"]);
    assert.equal(after[4].sharedFrom, undefined, "its own turn");
    // A tab on the fork edits its first own message: the shared turns stay before it.
    const tab = new ThreadSession(tc, fork);
    await tab.open();
    await tab.edit(after[4].id, "three, again");
    await until(() => JSON.stringify(tab.turns.map((t) => t.message)) === JSON.stringify(["one", "two", "three, again"]) && tab.turns.every((t) => !t.running), {
      timeoutMs: 10000,
      what: `the tab shows the edit after the shared turns (has ${JSON.stringify(tab.turns.map((t) => t.message))})`,
    });
    assert.equal(tab.turns[2].messageBranch.count, 2);
    tab.close();
    await idle(fork);
    // The original is unchanged.
    assert.deepEqual(await view(thread), before);
    // Every protocol's history of the fork shows the shared turns first.
    const ui = (await api.call("GET", `/api/chat/${fork}/messages`)).json;
    const uiUsers = ui.filter((m) => m.role === "user");
    assert.deepEqual(uiUsers.map((m) => m.id).slice(0, 2), [u1.id, u2.id]);
    assert.equal(uiUsers.length, 3);
    const agui = (await api.call("GET", `/ag-ui/threads/${fork}/messages`)).json;
    assert.equal(agui.filter((m) => m.role === "user").length, 3);
    const detail = (await api.call("GET", `/agent/threads/${fork}`)).json;
    assert.equal(detail.messages.filter((m) => m.role === "user").length, 3);
    // Durable Streams: the fork's own log, forked from the source's.
    const ds = await fetch(`${worker.url}/v1/threads/${fork}?offset=-1`);
    assert.equal(ds.headers.get("stream-forked-from"), `/v1/threads/${thread}`);
    assert.equal(ds.headers.get("stream-fork-offset"), r.json.forkedFrom.offset);
    const own = await ds.json();
    assert.ok(own.every((e) => e.runId !== a1.runId), "the shared turns are not in its log");
    // Refusals.
    const taken = await api.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: u1.id, threadId: fork });
    assert.deepEqual([taken.status, taken.json.error.code], [409, "thread_exists"]);
    const unknown = await api.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: "nope" });
    assert.deepEqual([unknown.status, unknown.json.error.code], [404, "message_not_found"]);
  });

  test("forks count among the caller's sends per minute: an account cannot make threads without end", async () => {
    const limited = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", RUNS_PER_MINUTE: "2" } });
    try {
      const a = client(limited.url);
      const thread = newThread("br");
      const sent = await a.call("POST", `/instance-ai/chat/${thread}`, { message: "one" });
      assert.equal(sent.status, 200);
      await until(async () => !(await a.status(thread)).json.hasActiveRun, { timeoutMs: 10000, what: "the run" });
      const first = await a.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: sent.json.runId });
      assert.equal(first.status, 201, first.text);
      const second = await a.call("POST", `/instance-ai/threads/${thread}/fork`, { messageId: sent.json.runId });
      assert.deepEqual([second.status, second.json.error.code], [429, "rate_limited"]);
    } finally {
      await limited.stop();
    }
  });
});
