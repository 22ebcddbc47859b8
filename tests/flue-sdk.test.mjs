// Flue's own client, `@flue/sdk` (pinned, unmodified), against the Worker's
// origin as its `baseUrl`: agents.history() and agents.observe() (long-poll,
// and SSE with a connection cut mid-answer) through runs with text, a tool
// call and a confirmation; runs.stream() and runs.events() of a run to its
// close. The state observe() builds with Flue's own reducer is compared with
// a fresh history() at the end, on every scenario of the golden tests.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createFlueClient } from "@flue/sdk";
import { startWorker, client, newThread, until, sleep } from "./support/harness.mjs";
import { PROMPTS } from "./support/prompts.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations), STREAMS_LONG_POLL_MS: "2000" },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

/** A thread with one finished run (observe() needs a conversation to exist). */
async function thread(label) {
  const id = newThread(label);
  const r = await api.chat(id, "first");
  assert.equal(r.status, 200, r.text);
  await until(async () => (await api.status(id)).json.hasActiveRun === false, { what: "the first run ends" });
  return id;
}

/** observe() with every snapshot it published. */
function observe(flue, id, opts) {
  const obs = flue.agents.observe("default", id, opts);
  const seen = [];
  obs.subscribe(() => seen.push(obs.getSnapshot()));
  const settled = (runId) =>
    until(() => obs.getSnapshot().conversation?.settlements.some((s) => s.submissionId === runId), {
      timeoutMs: 15000,
      what: `${runId} settles in observe()`,
    });
  return { obs, seen, settled };
}

/**
 * A state as JSON holds it (Flue's reducer leaves `errorText: undefined` on
 * a settled call), without the settlements' `result`: 1.x's reducer keeps it
 * from the `submission-settled` chunk (its wait() returns it), and history
 * leaves it out as 2.x's reducer does (one wire serves both releases).
 */
const plain = (v) => {
  const s = JSON.parse(JSON.stringify(v));
  if (Array.isArray(s?.settlements)) s.settlements = s.settlements.map(({ result, ...rest }) => rest);
  return s;
};

/** The conversation as history() reads it, in observe()'s state shape. */
async function fresh(flue, id) {
  const h = await flue.agents.history("default", id);
  return { conversationId: h.conversationId, messages: h.messages, settlements: h.settlements };
}

/** Decides the run's pending confirmation as the person would. */
async function approvePending(id) {
  const pending = await until(
    async () => {
      const log = (await api.call("GET", `/v1/threads/${id}?offset=-1`)).json;
      const asked = log.filter((e) => e.type === "confirmation-request");
      const settled = new Set(log.filter((e) => e.type === "confirmation-settled").map((e) => e.payload.toolCallId));
      return asked.find((e) => !settled.has(e.payload.toolCallId));
    },
    { timeoutMs: 8000, what: "a confirmation-request" },
  );
  const r = await api.call("POST", `/instance-ai/confirm/${pending.payload.requestId}`, { approved: true });
  assert.equal(r.status, 200, r.text);
}

describe("@flue/sdk, unmodified", () => {
  test("history() is a FlueConversationSnapshot at the log's tail", async () => {
    const flue = createFlueClient({ baseUrl: worker.url });
    const id = await thread("fh");
    const h = await flue.agents.history("default", id);
    assert.equal(h.v, 1);
    assert.equal(h.conversationId, id);
    const tail = (await api.call("GET", `/v1/threads/${id}?offset=-1`)).headers.get("stream-next-offset");
    assert.equal(h.offset, tail, "the offset is the physical tail");
    assert.deepEqual(h.messages.map((m) => m.role), ["user", "assistant"]);
    assert.deepEqual(h.messages[0].parts, [{ type: "text", text: "first", state: "done" }]);
    assert.match(h.messages[1].parts.at(-1).text, /You said/);
    assert.equal(h.settlements[0].outcome, "completed");
    await assert.rejects(flue.agents.history("default", "no-such-thread-here"), (e) => e.status === 404);
  });

  for (const live of ["long-poll", "sse"]) {
    test(`observe() (${live}) follows text, a tool call and a confirmation, and ends where history() is`, async () => {
      const flue = createFlueClient({ baseUrl: worker.url });
      const id = await thread(`fo-${live}`);
      const { obs, seen, settled } = observe(flue, id, { live });
      await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });

      const slow = await api.chat(id, "answer slowly [[slow:30]]");
      await settled(slow.json.runId);
      const first = await api.chat(id, PROMPTS.tool);
      await settled(first.json.runId);
      const second = await api.chat(id, PROMPTS.confirm);
      await until(
        () =>
          obs
            .getSnapshot()
            .conversation.messages.at(-1)
            .parts.some((p) => p.type === "dynamic-tool" && p.toolName === "delete-note" && p.state === "input-available"),
        { timeoutMs: 8000, what: "the call awaiting its decision is observed" },
      );
      await approvePending(id);
      await settled(second.json.runId);

      const state = obs.getSnapshot().conversation;
      obs.close();
      assert.deepEqual(plain(state), await fresh(flue, id), "history then updates is history again");
      const answer = state.messages.find((m) => m.id === `${first.json.runId}:assistant`);
      const call = answer.parts.find((p) => p.type === "dynamic-tool");
      assert.equal(call.toolName, "weather");
      assert.equal(call.state, "output-available");
      assert.deepEqual(call.input, { city: "Oslo" });
      if (live === "sse") {
        const streaming = seen.some((s) =>
          s.conversation?.messages.some((m) => m.parts.some((p) => p.type === "text" && p.state === "streaming")),
        );
        assert.ok(streaming, "text arrives as it is written, not only once it is flushed");
      }
    });
  }

  test("an SSE connection ended mid-answer resumes from its offset: no text lost, none twice", async () => {
    const urls = [];
    let cut = false;
    // The first updates stream ends (as a proxy, or the server's recycle,
    // ends it) once a live delta and its control frame went through.
    const fetchCutting = async (input, init) => {
      const resp = await fetch(input, init);
      const url = String(input);
      if (!url.includes("view=updates") || !url.includes("live=sse")) return resp;
      urls.push(url);
      if (cut) return resp;
      const reader = resp.body.getReader();
      let text = "";
      const body = new ReadableStream({
        async pull(controller) {
          if (cut) return controller.close();
          const { value, done } = await reader.read();
          if (done) return controller.close();
          text += new TextDecoder().decode(value);
          controller.enqueue(value);
          if (/message-delta[\s\S]*event: control/.test(text)) {
            cut = true;
            reader.cancel().catch(() => {});
          }
        },
      });
      return new Response(body, { status: resp.status, headers: resp.headers });
    };
    const flue = createFlueClient({ baseUrl: worker.url, fetch: fetchCutting });
    const id = await thread("fcut");
    const { obs, settled } = observe(flue, id, { live: "sse", backoffOptions: { initialDelay: 10, maxDelay: 50 } });
    await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });
    const r = await api.chat(id, "tell me slowly, word by word, so that the cut lands mid-answer [[slow:40]]");
    await settled(r.json.runId);
    const state = obs.getSnapshot().conversation;
    obs.close();
    assert.ok(cut, "the connection was cut");
    assert.ok(urls.length >= 2, `the client reconnected: ${urls.join(" ")}`);
    const resumed = new URL(urls[1]).searchParams.get("offset");
    assert.match(resumed, /^\d+_\d+\.\d+$/, "it resumed inside the answer, from the offset of the live text it had");
    assert.deepEqual(plain(state), await fresh(flue, id), "the text is whole, once");
  });

  test("history then updates reaches history again on every golden scenario", async () => {
    const flue = createFlueClient({ baseUrl: worker.url });
    for (const [name, prompt] of Object.entries(PROMPTS)) {
      const id = await thread(`fg-${name}`);
      const { obs, settled } = observe(flue, id, {});
      await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });
      const r = await api.chat(id, prompt);
      assert.equal(r.status, 200, r.text);
      if (name === "confirm") await approvePending(id);
      if (name === "stall") {
        await sleep(300);
        await api.cancel(id);
      }
      await settled(r.json.runId);
      await until(async () => (await api.status(id)).json.hasActiveRun === false, { what: `${name} ends` });
      // Records stored after the settlement (a sub-agent's last words).
      await sleep(200);
      const state = obs.getSnapshot().conversation;
      obs.close();
      assert.deepEqual(plain(state), await fresh(flue, id), `${name}: observed == history`);
      const outcome = state.settlements.find((s) => s.submissionId === r.json.runId).outcome;
      assert.equal(outcome, name === "stall" ? "aborted" : "completed", name);
    }
  });

  test("a structured answer is its submission's result: agents.wait() returns it", async () => {
    const flue = createFlueClient({ baseUrl: worker.url });
    const id = await thread("fout");
    const output = { name: "place", schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } } };
    const r = await api.chat(id, '[[say:{"city":"Lisbon"}]]', { output });
    assert.equal(r.status, 200, r.text);
    const admission = { streamUrl: `${worker.url}/agents/default/${id}`, offset: "-1", submissionId: r.json.runId };
    assert.deepEqual(await flue.agents.wait(admission), { city: "Lisbon" });
    // History is one document for both releases: 2.x's settlement has no `result`.
    const h = await flue.agents.history("default", id);
    assert.deepEqual(h.settlements.find((s) => s.submissionId === r.json.runId), { submissionId: r.json.runId, outcome: "completed" });
  });

  test("agents.send() and agents.abort() (1.x's write routes): a message is admitted, and abort stops it", async () => {
    const flue = createFlueClient({ baseUrl: worker.url });
    const id = await thread("fsend1");
    const a = await flue.agents.send("default", id, { message: "answer slowly [[slow:20]]" });
    assert.equal(a.streamUrl, `${worker.url}/agents/default/${id}`);
    assert.match(a.offset, /^\d+_\d+$/);
    const result = await flue.agents.wait(a);
    assert.match(String(result), /answer slowly/);
    const stalled = await flue.agents.send("default", id, { message: "wait [[stall]]" });
    await sleep(300);
    assert.deepEqual(await flue.agents.abort("default", id), { aborted: true });
    await assert.rejects(flue.agents.wait(stalled));
  });

  test("runs.stream() follows a run to its close and runs.events() reads it whole, every event versioned", async () => {
    const flue = createFlueClient({ baseUrl: worker.url });
    const id = newThread("frun");
    const r = await api.chat(id, "stream me [[slow:20]]");
    const streamed = [];
    for await (const event of flue.runs.stream(r.json.runId)) streamed.push(event);
    assert.equal(streamed.at(-1).type, "run-finish", "the stream ends at the run's close");
    assert.ok(streamed.every((e) => e.v === 3 && e.runId === r.json.runId));
    const events = await flue.runs.events(r.json.runId);
    assert.deepEqual(events, streamed);
    // The run's text, as a workflow reader folds it: its `text_delta` events.
    const fold = (list) => list.filter((e) => e.type === "text_delta").map((e) => e.text).join("");
    const answer = events.filter((e) => e.type === "text-block" && e.agentId === "orchestrator").at(-1).payload.text;
    assert.equal(fold(streamed), answer);
    const tail = await flue.runs.events(r.json.runId, { tail: 1 });
    assert.deepEqual(tail, [streamed.at(-1)]);
    // SSE, on a run still going (on a run already closed, this client's
    // SSE mode can end before it yields the catch-up batch: it treats the
    // response's end as the stream's before its batch is delivered).
    await until(async () => (await api.status(id)).json.hasActiveRun === false, { what: "the run ends" });
    const next = await api.chat(id, "and again [[slow:20]]");
    const sse = [];
    for await (const event of flue.runs.stream(next.json.runId, { live: "sse" })) sse.push(event);
    assert.equal(sse.at(-1).type, "run-finish");
    assert.deepEqual(sse, await flue.runs.events(next.json.runId));
    assert.match(fold(sse), /^You said: "and again/);
  });
});
