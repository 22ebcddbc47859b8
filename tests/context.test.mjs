// Long conversations over real HTTP on workerd, with the built-in agent and
// the fake model: a thread of 200 turns on a model with a small window runs
// to the end, the model's context is compacted again and again (its requests
// stay within the window and keep the agent's instructions first), and every
// protocol's history still shows all 200 messages, with a quiet marker where
// the context was compacted. A person can ask for a compaction; a window too
// small for one message refuses the send.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { ThreadlineClient, ThreadSession } from "../client/dist/index.js";

const WINDOW = 3_000;
const SYSTEM = "You are the context test's agent. Keep every answer short.";
let llm, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 0 });
  const models = {
    default: "small",
    models: {
      small: { model: "fake-small", contextWindow: WINDOW, maxOutputTokens: 256 },
      tiny: { model: "fake-tiny", contextWindow: 400, maxOutputTokens: 100 },
    },
  };
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", LLM_MODELS: JSON.stringify(models), AGENT_SYSTEM_PROMPT: SYSTEM },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

const idle = (thread) =>
  until(async () => !(await api.status(thread)).json.hasActiveRun, { timeoutMs: 15000, what: "the run to end", stepMs: 5 });

async function turn(thread, body) {
  const r = await api.call("POST", `/instance-ai/chat/${thread}`, body);
  assert.equal(r.status, 200, r.text);
  await idle(thread);
  return r.json;
}

/** What the fake provider counts a request as: four bytes a token, and the answer's room. */
const tokens = (body) => Math.ceil((JSON.stringify(body.messages).length + JSON.stringify(body.tools ?? null).length) / 4) + (body.max_tokens ?? 0);
const isSummary = (body) => String(body.messages[0]?.content ?? "").startsWith("You compact a conversation");
const message = (i) => `question ${i}: ${"tell me more about the long conversation ".repeat(6)}`;

describe("long conversations", () => {
  test("200 turns on a 3,000-token window run to the end; every history shows all 200 messages", { timeout: 240_000 }, async () => {
    const thread = newThread("ctx");
    const first = llm.requests.length;
    for (let i = 0; i < 200; i++) await turn(thread, { message: message(i) });
    const asked = llm.requests.slice(first);
    // No request passed the window.
    const largest = Math.max(...asked.map(tokens));
    assert.ok(largest <= WINDOW, `a request of ${largest} tokens`);
    const summaries = asked.filter(isSummary);
    assert.ok(summaries.length >= 10, `compacted ${summaries.length} times`);
    // The last request: the agent's instructions, the summary, the recent turns.
    const last = asked.filter((b) => !isSummary(b)).at(-1);
    assert.equal(last.messages[0].content, SYSTEM);
    assert.match(last.messages[1].content, /^Summary of the earlier conversation/);
    assert.match(last.messages[1].content, /SUMMARY of \d+ messages from the person: first "question 0:/, "the summary reaches back to the start");
    assert.equal(last.messages.at(-1).content, message(199));
    // Every history view shows all 200 messages.
    const users = (ms, text) => ms.filter((m) => m.role === "user").map(text);
    const n8n = (await api.call("GET", `/instance-ai/threads/${thread}/messages?limit=200`)).json.messages;
    assert.equal(users(n8n, (m) => m.content).length, 200);
    assert.equal(users(n8n, (m) => m.content)[0], message(0));
    const agora = (await api.call("GET", `/agent/threads/${thread}`)).json.messages;
    assert.equal(users(agora, (m) => m.content).length, 200);
    const ui = (await api.call("GET", `/api/chat/${thread}/messages?limit=200`)).json;
    assert.equal(users(ui, (m) => m.parts.map((p) => p.text).join("")).length, 200);
    const agui = (await api.call("GET", `/ag-ui/threads/${thread}/messages?limit=200`)).json;
    assert.equal(users(agui, (m) => m.content).length, 200);
    const flue = (await api.call("GET", `/agents/default/${thread}`)).json.messages;
    assert.equal(users(flue, (m) => m.parts.map((p) => p.text).join("")).length, 200);
    // A quiet marker where the context was compacted, in each vocabulary.
    const marked = n8n.filter((m) => m.contextCompacted);
    assert.equal(marked.length, summaries.length, "one marker per compaction");
    assert.equal(marked[0].contextCompacted.model, "small");
    assert.ok(marked[0].contextCompacted.tokensAfter < marked[0].contextCompacted.tokensBefore);
    assert.equal(agora.filter((m) => m.contextCompacted).length, marked.length);
    assert.equal(ui.flatMap((m) => m.parts).filter((p) => p.type === "data-context-compacted").length, marked.length);
    assert.equal(agui.filter((m) => m.contextCompacted).length, marked.length);
    assert.equal(flue.filter((m) => m.metadata?.contextCompacted).length, marked.length);
    // The raw log carries each compaction as a durable event.
    const raw = await api.events(thread);
    await raw.ready;
    await raw.waitFor((e) => e.type === "context-compacted");
    raw.close();
    // Prompt caching: the fake model reports the prefix it has seen before.
    const usage = (await api.call("GET", `/instance-ai/threads/${thread}/usage`)).json;
    const runs = n8n.filter((m) => m.role === "assistant").map((m) => m.usage);
    const cached = runs.reduce((n, u) => n + (u?.cached_tokens ?? 0), 0);
    const prompt = runs.reduce((n, u) => n + (u?.prompt_tokens ?? 0), 0);
    console.log(`# 200 turns: ${summaries.length} compactions, largest request ${largest} tokens, cached ${cached} of ${prompt} prompt tokens (${Math.round((100 * cached) / prompt)}%), total ${usage.total.totalTokens} tokens`);
    assert.ok(cached > prompt / 3, `the prefix stays stable: ${cached} of ${prompt} cached`);
  });

  test("a person asks for a compaction: its marker appears, and the next turn starts from it", async () => {
    const thread = newThread("ctx");
    for (const q of ["one", "two", "three"]) await turn(thread, { message: q });
    // An open tab (the TypeScript client's session, which the page draws).
    const tab = new ThreadSession(new ThreadlineClient({ baseUrl: worker.url }), thread);
    await tab.open();
    const asked = await api.call("POST", `/instance-ai/threads/${thread}/compact`);
    assert.equal(asked.status, 202, asked.text);
    assert.equal(asked.json.turns, 3);
    const view = async () => (await api.messages(thread)).json.messages;
    await until(async () => (await view()).at(-1).contextCompacted, { timeoutMs: 8000, what: "the compaction" });
    const marker = (await view()).at(-1).contextCompacted;
    assert.equal(marker.requested, true);
    assert.match(marker.summary, /first "one", last "three"/);
    // The tab marks its last turn live; a reload marks it from the history.
    await until(() => tab.turns.at(-1)?.compacted, { what: "the tab's marker" });
    assert.deepEqual(tab.turns.at(-1).compacted, marker);
    tab.close();
    const reload = new ThreadSession(new ThreadlineClient({ baseUrl: worker.url }), thread);
    await reload.open();
    assert.deepEqual(reload.turns.at(-1).compacted, marker);
    assert.equal(reload.turns.filter((t) => t.compacted).length, 1);
    reload.close();
    // Nothing left to fold: the summary covers the conversation.
    const again = await api.call("POST", `/instance-ai/threads/${thread}/compact`);
    assert.deepEqual([again.status, again.json.compacting], [200, false]);
    await turn(thread, { message: "four" });
    const req = llm.requests.filter((b) => !isSummary(b) && JSON.stringify(b.messages).includes('"four"')).at(-1);
    assert.deepEqual(req.messages.map((m) => m.role), ["system", "system", "user"]);
    assert.match(req.messages[1].content, /first "one", last "three"/);
  });

  test("a window too small for the prompt and one message refuses the send with 400 context_too_small", async () => {
    const thread = newThread("ctx");
    const r = await api.call("POST", `/instance-ai/chat/${thread}`, { message: "x".repeat(2_000), model: "tiny" });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, "context_too_small");
    assert.equal((await api.status(thread)).json.hasActiveRun, false);
    assert.equal((await api.messages(thread)).json.messages.length, 0, "nothing was stored");
  });
});
