// agora's own client against the Worker: the files of adonis-agora's client,
// vendored unmodified in tests/agora-client/ (NOTE.md names the repository
// and the commit of each), bundled by esbuild at test time, and driven as
// agora's `useAgentChat` drives them: an `AgentClient` for the routes, an
// `AgentChatTransport` under the AI SDK's `Chat`, `storedThreadToUiMessages`
// for a reload, and the plain `createAgentChatClient`.
//
// What each test proves is what a person using agora's React chat sees:
// the chat ends "ready" with the answer once, tool cards carry their output,
// a reloaded thread reads as the live one did, the queue's messages are the
// ones that run.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import { Chat } from "@ai-sdk/react";
import { startWorker, hs256Jwt, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SECRET = "agora-client-secret-0123456789abcdef";
const token = (sub) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 600 });
const ALICE = token("alice");
/** An answer whose provider reports no usage: the stored turn has none. */
const NO_USAGE = "(no usage)";

let llm, tools, worker, agora;

before(async () => {
  // The bundle sits in the repository so `ai`, `react` and `@ai-sdk/react`
  // resolve from its node_modules, as in an app that installs agora.
  const outfile = path.join(root, "test-artifacts", "agora-client.mjs");
  await build({
    entryPoints: [path.join(root, "tests/agora-client/entry.ts")],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node22",
    external: ["ai", "react", "@ai-sdk/react"],
    outfile,
    logLevel: "error",
  });
  agora = await import(pathToFileURL(outfile).href);
  llm = await startFakeLlm({
    port: 0,
    delayMs: 1,
    usage: (body, usage) => (JSON.stringify(body.messages.findLast((m) => m.role === "user")).includes(NO_USAGE) ? undefined : usage),
  });
  tools = await startDemoTools();
  const echo = tools.declarations.find((t) => t.name === "echo");
  worker = await startWorker({
    vars: {
      AUTH_MODE: "jwt",
      AUTH_JWT_SECRET: SECRET,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      TOOLS: JSON.stringify([...tools.declarations, { ...echo, name: "guarded", approval: "required" }]),
    },
  });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/**
 * A chat as `useAgentChat` builds one: the backend, the transport with its
 * body (the thread once known), its resume target and its meta callback, and
 * the AI SDK's `Chat` over it. `fetch` may be wrapped to cut connections.
 */
function agoraChat({ threadId, fetch: fetchImpl = globalThis.fetch } = {}) {
  const state = { threadId, resumeRunId: undefined, data: [], errors: [], meta: [] };
  const backend = new agora.AgentClient({ baseUrl: worker.url, headers: { authorization: `Bearer ${ALICE}` }, fetch: fetchImpl });
  const transport = new agora.AgentChatTransport({
    backend,
    reconnect: { maxAttempts: 5, baseDelayMs: 20 },
    getBody: () => (state.threadId ? { threadId: state.threadId } : {}),
    getResumeRunId: () => state.resumeRunId,
    onMeta: (m) => {
      state.meta.push(m);
      state.threadId ??= m.threadId;
    },
    onRunError: (f) => state.errors.push(f),
  });
  const chat = new Chat({ id: state.threadId ?? `local-${Math.random()}`, transport, onData: (p) => state.data.push(p) });
  return { chat, backend, state };
}

const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const toolParts = (message) => message.parts.filter((p) => p.type.startsWith("tool-"));
/** The parts a person sees, without ids, timings and provider metadata. */
const visible = (message) =>
  message.parts
    .filter((p) => p.type === "text" || p.type === "reasoning" || p.type.startsWith("tool-"))
    .map((p) =>
      p.type.startsWith("tool-")
        ? { type: p.type, toolCallId: p.toolCallId, state: p.state, input: p.input, output: p.output, errorText: p.errorText }
        : { type: p.type, text: p.text },
    )
    // Adjacent text of one step reads as one block, however it was chunked.
    .reduce((out, p) => {
      const last = out.at(-1);
      if (last && p.type === last.type && (p.type === "text" || p.type === "reasoning")) last.text += p.text;
      else out.push({ ...p });
      return out;
    }, []);

async function reloaded(backend, threadId) {
  const detail = await backend.getThread(threadId);
  return agora.storedThreadToUiMessages(detail.messages);
}

describe("agora's client, as useAgentChat drives it", () => {
  test("plain: the answer streams once and the chat ends ready", async () => {
    const { chat, state } = agoraChat();
    await chat.sendMessage({ text: "hello there" });
    assert.equal(chat.status, "ready", String(chat.error));
    assert.equal(chat.error, undefined);
    assert.equal(chat.messages.length, 2);
    assert.equal(textOf(chat.messages[1]), 'You said: "hello there". This is the fake model answering offline.');
    assert.equal(state.meta.length, 1);
    assert.ok(state.meta[0].runId.startsWith(`${state.threadId}.`));
  });

  test("tool: the card ends output-available with the tool's output, the text after it", async () => {
    const { chat, backend, state } = agoraChat();
    await chat.sendMessage({ text: 'weather? [[tool:weather:{"city":"Lisbon"}]]' });
    assert.equal(chat.status, "ready", String(chat.error));
    const answer = chat.messages[1];
    const [card] = toolParts(answer);
    assert.equal(card.type, "tool-weather");
    assert.equal(card.state, "output-available");
    assert.deepEqual(card.input, { city: "Lisbon" });
    assert.equal(card.output.forecast, "sunny");
    assert.match(textOf(answer), /Tool results: weather/);
    assert.ok(answer.parts.indexOf(card) < answer.parts.findIndex((p) => p.type === "text"), "the text follows the tool");

    // Reload: the thread detail folds to the same message.
    const again = await reloaded(backend, state.threadId);
    assert.equal(again.length, 2);
    assert.deepEqual(visible(again[1]), visible(answer));
  });

  test("approval: the call waits, agora's client approves it, the chat ends ready with the output", async () => {
    const { chat, backend, state } = agoraChat();
    const sent = chat.sendMessage({ text: '[[tool:guarded:{"text":"ship it"}]]' });
    const card = await until(() => chat.messages[1] && toolParts(chat.messages[1]).find((p) => p.state === "approval-requested"), {
      what: "the approval request",
    });
    assert.equal(card.approval.id, card.toolCallId, "agora keys approvals by the call id");
    await backend.approveToolCall({ toolCallId: card.toolCallId });
    await sent;
    assert.equal(chat.status, "ready", String(chat.error));
    const done = toolParts(chat.messages[1]).find((p) => p.toolCallId === card.toolCallId);
    assert.equal(done.state, "output-available");
    assert.deepEqual(done.output.args, { text: "ship it" });
    const settled = state.data.find((p) => p.type === "data-approval-settled");
    assert.equal(settled?.data.status, "approved");

    // A rejection, and the reload shows the denial where the live chat did.
    const again = chat.sendMessage({ text: '[[tool:guarded:{"text":"no"}]]' });
    const asked = await until(() => chat.messages[3] && toolParts(chat.messages[3]).find((p) => p.state === "approval-requested"), {
      what: "the second request",
    });
    await backend.rejectToolCall({ toolCallId: asked.toolCallId, reason: "not now" });
    await again;
    assert.equal(chat.status, "ready", String(chat.error));
    const denied = toolParts(chat.messages[3]).find((p) => p.toolCallId === asked.toolCallId);
    assert.equal(denied.state, "output-denied");
    const thread = await reloaded(backend, state.threadId);
    assert.equal(thread.length, 4);
    assert.equal(toolParts(thread[1])[0].state, "output-available");
    assert.deepEqual(toolParts(thread[1])[0].output, done.output);
    assert.equal(toolParts(thread[3])[0].state, "output-denied");
  });

  test("dropped stream: the transport resumes after the last id and the answer reads once", async () => {
    // The first connection is cut after its third frame, mid-answer.
    let cut = 0;
    const cutting = async (url, init) => {
      const resp = await fetch(url, init);
      if (init?.method !== "POST" || !String(url).endsWith("/agent/chat") || cut++ > 0) return resp;
      const reader = resp.body.getReader();
      let frames = 0;
      const body = new ReadableStream({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          controller.enqueue(value);
          frames += (new TextDecoder().decode(value).match(/(^|\n)id: /g) ?? []).length;
          if (frames >= 3) {
            await reader.cancel();
            controller.close();
          }
        },
      });
      return new Response(body, { status: resp.status, headers: resp.headers });
    };
    const resumes = [];
    const counting = async (url, init) => {
      if (String(url).includes("/stream")) resumes.push(new URL(url).searchParams.get("after"));
      return cutting(url, init);
    };
    const { chat } = agoraChat({ fetch: counting });
    await chat.sendMessage({ text: "a slow one [[slow:30]]" });
    assert.equal(chat.status, "ready", String(chat.error));
    assert.ok(resumes.length >= 1, "the transport re-attached");
    assert.ok(Number(resumes[0]) >= 1, `it resumed after an id (${resumes[0]})`);
    assert.equal(textOf(chat.messages[1]), 'You said: "a slow one [[slow:30]]". This is the fake model answering offline.');
  });

  test("cancel from elsewhere: the chat ends ready with what was said, the plain client resolves", async () => {
    const { chat, backend, state } = agoraChat();
    const sent = chat.sendMessage({ text: "cancel me [[slow:150]]" });
    await until(() => chat.messages[1] && textOf(chat.messages[1]).length > 0, { what: "the first text" });
    const other = new agora.AgentClient({ baseUrl: worker.url, headers: { authorization: `Bearer ${ALICE}` } });
    const result = await other.cancelStream(state.meta[0].runId);
    assert.equal(result.aborted, true, JSON.stringify(result));
    await sent;
    assert.equal(chat.status, "ready", String(chat.error));
    assert.equal(chat.error, undefined);
    assert.equal(state.errors.length, 0, JSON.stringify(state.errors));
    const partial = textOf(chat.messages[1]);
    assert.ok(partial.length > 0 && partial.length < 60, partial);
    await until(async () => (await backend.getThread(state.threadId)).activeRunId == null, { what: "the thread settles" });

    // agora's plain client: a cancelled run resolves with what it said.
    const plain = agora.createAgentChatClient({ basePath: `${worker.url}/agent`, getHeaders: () => ({ authorization: `Bearer ${ALICE}` }) });
    const parts = [];
    let plainRun;
    const pending = plain.send({
      body: { message: "cancel the plain one [[slow:150]]" },
      onRunId: (id) => (plainRun = id),
      onParts: (p) => parts.push(p),
    });
    await until(() => plainRun && parts.some((p) => p.some((x) => x.type === "text")), { what: "the plain client's first text" });
    assert.equal((await other.cancelStream(plainRun)).aborted, true);
    const r = await pending;
    assert.equal(r.runId, plainRun);
    // What was said before the cancel: a beginning of the answer.
    const said = r.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
    assert.ok(said.length > 0 && 'You said: "cancel the plain one [[slow:150]]".'.startsWith(said), JSON.stringify(r.parts));
  });

  test("queue: a send while a turn runs queues; agora's client edits, removes and interrupts its messages", async () => {
    const first = agoraChat();
    const running = first.chat.sendMessage({ text: "a long one [[slow:120]]" });
    await until(() => first.state.threadId && first.chat.messages[1] && textOf(first.chat.messages[1]).length > 0, { what: "the first text" });
    const thread = first.state.threadId;
    const { backend } = first;

    // A second tab sends on the busy thread: agora's default mode queues it (202).
    const second = agoraChat({ threadId: thread });
    await second.chat.sendMessage({ text: "queued one" });
    const queuedPart = second.state.data.find((p) => p.type === "data-queue");
    assert.ok(queuedPart, JSON.stringify(second.state.data));
    assert.equal(queuedPart.data.queuedSend.queued, true);
    assert.equal(queuedPart.data.queuedSend.threadId, thread);
    const a = queuedPart.data.queuedSend.messageId;
    const b = (await backend.enqueueMessage({ body: { threadId: thread, message: "queued two" } })).messageId;
    const c = (await backend.enqueueMessage({ body: { threadId: thread, message: "queued three" } })).messageId;

    let q = await backend.getQueue(thread);
    assert.deepEqual(q.items.map((i) => [i.id, i.content]), [[a, "queued one"], [b, "queued two"], [c, "queued three"]]);
    assert.equal(q.paused, null);
    q = await backend.updateQueuedMessage(b, { content: "queued two, edited" });
    assert.equal(q.items.find((i) => i.id === b).content, "queued two, edited");
    q = await backend.removeQueuedMessage(c);
    assert.deepEqual(q.items.map((i) => i.id), [a, b]);

    await running;
    assert.equal(first.chat.status, "ready", String(first.chat.error));
    // The queue drains in order; the removed message never runs.
    await until(async () => {
      const d = await backend.getThread(thread);
      return d.activeRunId == null && d.queue.items.length === 0 && d.messages.filter((m) => m.role === "user").length === 3;
    }, { what: "the queue drains", timeoutMs: 20_000 });
    const users = (await backend.getThread(thread)).messages.filter((m) => m.role === "user").map((m) => m.content);
    assert.deepEqual(users, ["a long one [[slow:120]]", "queued one", "queued two, edited"]);

    // Interrupt: a waiting message runs now, the running turn is cancelled for it.
    const third = agoraChat({ threadId: thread });
    const busy = third.chat.sendMessage({ text: "busy again [[slow:150]]" });
    await until(() => third.chat.messages[1] && textOf(third.chat.messages[1]).length > 0, { what: "the busy turn's text" });
    const waiting = (await backend.enqueueMessage({ body: { threadId: thread, message: "jump the line" } })).messageId;
    const jumped = await backend.interruptQueuedMessage(waiting);
    assert.ok(jumped.interrupting, JSON.stringify(jumped));
    await busy;
    assert.equal(third.chat.status, "ready", String(third.chat.error));
    await until(async () => {
      const d = await backend.getThread(thread);
      return d.activeRunId == null && d.messages.some((m) => m.role === "user" && m.content === "jump the line") && d.messages.at(-1).role === "assistant";
    }, { what: "the interrupting message runs" });
    assert.deepEqual((await backend.clearQueue(thread)).items, []);
  });

  test("reload: reasoning, several steps, no usage — the stored thread folds to what was streamed", async () => {
    const { chat, backend, state } = agoraChat();
    await chat.sendMessage({ text: "think [[reason]]" });
    await chat.sendMessage({ text: `two steps ${NO_USAGE} [[tool:weather:{"city":"Oslo"}]]` });
    assert.equal(chat.status, "ready", String(chat.error));
    const thread = await reloaded(backend, state.threadId);
    assert.equal(thread.length, 4);
    for (const i of [1, 3]) assert.deepEqual(visible(thread[i]), visible(chat.messages[i]), `message ${i}`);
    const reasoning = thread[1].parts.find((p) => p.type === "reasoning");
    assert.match(reasoning.text, /^Let me think about this step by step/);
    assert.equal(thread[3].metadata?.usage, undefined, "no usage reported, none invented");
    assert.ok(thread[1].metadata.usage.inputTokens > 0);
  });
});
