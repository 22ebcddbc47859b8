// Flue's own client at its current release, `@flue/sdk` 2.0.3 (pinned as
// `@flue/sdk-2`, unmodified), against the Worker, beside 1.0.0-beta.9
// (tests/flue-sdk.test.mjs): one client per conversation URL,
// `${origin}/agents/default/:id`, driving send, read, wait, abort, history
// and observe over long-poll and SSE through slow answers, tools,
// confirmations, dropped connections and the queue. What observe() builds
// with Flue's own reducer must equal a fresh history() at the end.
//
// One wire serves both releases (durable/src/protocols/flue/projection.rs):
// a settlement's `result` rides on its chunk for 1.x's wait(), and history
// leaves it out as 2.x's reducer does, so 1.x's observed state is compared
// without it.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { createFlueClient as flue2, FlueExecutionError, FlueApiError } from "@flue/sdk-2";
import { createFlueClient as flue1 } from "@flue/sdk";
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

const OFFSET = /^\d+_\d+(\.\d+)?$/;
/** A state as JSON holds it (the reducers leave `errorText: undefined` / `output: undefined`). */
const plain = (v) => JSON.parse(JSON.stringify(v));
const user = (body, extra = {}) => ({ message: { kind: "user", body }, ...extra });
const url = (id, name = "default") => `${worker.url}/agents/${name}/${encodeURIComponent(id)}`;
const conv = (id, opts = {}) => flue2({ url: url(id), ...opts });

/** The conversation as history() reads it, in observe()'s state shape. */
async function fresh(c) {
  const h = await c.history();
  return { conversationId: h.conversationId, messages: h.messages, settlements: h.settlements };
}

/** The reply text 2.x's readSubmissionReply() derives: text parts joined by a blank line. */
const replyText = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("\n\n");

/** observe() with every snapshot it published, and a settled(submissionId) wait. */
function observe(c, opts) {
  const obs = c.observe(opts);
  const seen = [];
  obs.subscribe(() => seen.push(obs.getSnapshot()));
  const settled = (submissionId) =>
    until(() => obs.getSnapshot().conversation?.settlements.some((s) => s.submissionId === submissionId), {
      timeoutMs: 15000,
      what: `${submissionId} settles in observe()`,
    });
  return { obs, seen, settled };
}

/** A conversation with one finished submission, created through 2.x's send(). */
async function conversation(label) {
  const id = newThread(label);
  const c = conv(id);
  const first = await c.send(user("first"));
  await c.wait(first);
  return { id, c, first };
}

/** Decides the pending confirmation as the person would (threadline's own route). */
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

describe("@flue/sdk 2.0.3, unmodified", () => {
  test("send() admits a message (202): the receipt names this conversation, its offset and submission", async () => {
    const id = newThread("f2send");
    const c = conv(id);
    assert.equal(c.url, url(id));
    await assert.rejects(c.history(), (e) => e instanceof FlueApiError && e.status === 404, "no conversation before the first send");
    const a = await c.send(user("hello there"));
    assert.equal(a.streamUrl, c.url, "streamUrl is this URL (read() checks its pathname)");
    assert.match(a.offset, OFFSET);
    assert.equal(typeof a.submissionId, "string");
    assert.equal(typeof a.uid, "string");
    const reply = await c.read(a);
    assert.equal(reply.submissionId, a.submissionId);
    assert.equal(reply.uid, a.uid);
    const h = await c.history();
    assert.equal(h.v, 1);
    assert.equal(typeof h.incarnation, "string");
    const [u, answer] = h.messages;
    assert.deepEqual(
      { role: u.role, purpose: u.purpose, display: u.display, submissionId: u.submissionId, parts: u.parts },
      { role: "user", purpose: "user", display: "visible", submissionId: a.submissionId, parts: [{ type: "text", text: "hello there", state: "done" }] },
    );
    assert.deepEqual([answer.role, answer.purpose, answer.display, answer.submissionId], ["assistant", "assistant", "visible", a.submissionId]);
    assert.match(reply.text, /You said/);
    assert.equal(reply.text, replyText(answer), "read() is the reply history holds");
    assert.deepEqual(h.settlements.find((s) => s.submissionId === a.submissionId)?.outcome, "completed");
    // A re-attach by bare id, from the stream's origin, after it settled.
    assert.equal((await c.read(a.submissionId)).text, reply.text);
  });

  test("a send's updates from its admission offset are exactly its own; wait() resolves on its settlement", async () => {
    const { c } = await conversation("f2wait");
    const a = await c.send(user("answer slowly [[slow:20]]"));
    const chunks = [];
    await c.wait(a, { onEvent: (chunk) => chunks.push(chunk) });
    const types = chunks.map((ch) => ch.type);
    assert.ok(types.includes("message-delta"), types.join());
    assert.equal(types.at(-1), "submission-settled");
    assert.ok(chunks.every((ch) => ch.type !== "stream-checkpoint"), "wire-only markers never reach onEvent");
    assert.ok(chunks.filter((ch) => ch.type === "submission-settled").every((ch) => ch.submissionId === a.submissionId));
  });

  for (const live of ["long-poll", "sse"]) {
    test(`observe() (${live}) follows a slow answer, a tool call and a confirmation, and ends where history() is`, async () => {
      const { id, c } = await conversation(`f2o-${live}`);
      const { obs, seen, settled } = observe(c, { live });
      await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });

      const slow = await c.send(user("answer slowly [[slow:30]]"));
      await settled(slow.submissionId);
      const tool = await c.send(user(PROMPTS.tool));
      await settled(tool.submissionId);
      const confirm = await c.send(user(PROMPTS.confirm));
      await until(
        () =>
          obs
            .getSnapshot()
            .conversation.messages.at(-1)
            .parts.some((p) => p.type === "dynamic-tool" && p.toolName === "delete-note" && p.state === "input-available"),
        { timeoutMs: 8000, what: "the call awaiting its decision is observed" },
      );
      await approvePending(id);
      await settled(confirm.submissionId);

      const state = obs.getSnapshot().conversation;
      assert.equal(obs.getSnapshot().phase, "live");
      assert.match(obs.getSnapshot().offset, OFFSET);
      obs.close();
      assert.deepEqual(plain(state), await fresh(c), "history then updates is history again");
      const answer = state.messages.find((m) => m.role === "assistant" && m.submissionId === tool.submissionId);
      const call = answer.parts.find((p) => p.type === "dynamic-tool");
      assert.deepEqual([call.toolName, call.state, call.input], ["weather", "output-available", { city: "Oslo" }]);
      assert.ok(
        seen.some((s) => s.conversation?.messages.some((m) => m.parts.some((p) => p.type === "text" && p.state === "streaming"))),
        "text arrives as it is written",
      );
      assert.ok(seen.every((s) => s.phase !== "error"), "no frame was refused");
    });
  }

  test("an SSE connection cut mid-answer resumes from its offset: no text lost, none twice", async () => {
    const urls = [];
    let cut = false;
    const fetchCutting = async (input, init) => {
      const resp = await fetch(input, init);
      const u = String(input);
      if (!u.includes("view=updates") || !u.includes("live=sse")) return resp;
      urls.push(u);
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
    const { id } = await conversation("f2cut");
    const c = conv(id, { fetch: fetchCutting });
    const { obs, settled } = observe(c, { live: "sse", backoffOptions: { initialDelay: 10, maxDelay: 50 } });
    await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });
    const a = await c.send(user("tell me slowly, word by word, so that the cut lands mid-answer [[slow:40]]"));
    await settled(a.submissionId);
    const state = obs.getSnapshot().conversation;
    obs.close();
    assert.ok(cut, "the connection was cut");
    assert.ok(urls.length >= 2, `the client reconnected: ${urls.join(" ")}`);
    assert.match(new URL(urls[1]).searchParams.get("offset"), /^\d+_\d+\.\d+$/, "it resumed inside the answer");
    assert.deepEqual(plain(state), await fresh(c), "the text is whole, once");
  });

  test("long-polls that fail (a dropped connection, a 503) are retried from the same offset", async () => {
    const polls = [];
    let failures = 0;
    const flaky = async (input, init) => {
      const u = String(input);
      if (u.includes("live=long-poll")) {
        polls.push(new URL(u).searchParams.get("offset"));
        // The 2nd long-poll: the connection drops (a network error);
        // the 3rd: a 503 (the DS client retries 429/503/5xx with backoff).
        if (polls.length === 2 && failures++ === 0) throw new TypeError("fetch failed: socket hang up");
        if (polls.length === 3 && failures++ === 1) return new Response("busy", { status: 503 });
      }
      return fetch(input, init);
    };
    const { id } = await conversation("f2flaky");
    const c = conv(id, { fetch: flaky });
    const { obs, settled } = observe(c, { live: "long-poll", backoffOptions: { initialDelay: 10, maxDelay: 50 } });
    await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });
    const a = await c.send(user("stream me [[slow:20]]"));
    await settled(a.submissionId);
    const state = obs.getSnapshot().conversation;
    obs.close();
    assert.ok(failures >= 2, "both failures happened");
    assert.equal(polls[1], polls[2], "the dropped poll was retried at its offset");
    assert.deepEqual(plain(state), await fresh(c));
  });

  test("a second observer that starts mid-answer hydrates from history and catches up exactly", async () => {
    const { c } = await conversation("f2mid");
    const a = await c.send(user("a long one [[slow:40]]"));
    await until(async () => (await c.history()).messages.at(-1).parts.some((p) => p.type === "text" && p.state === "streaming"), {
      what: "the answer is mid-stream in history",
    });
    const { obs, settled } = observe(c, { live: "sse" });
    await settled(a.submissionId);
    const state = obs.getSnapshot().conversation;
    obs.close();
    assert.deepEqual(plain(state), await fresh(c));
  });

  test("abort(): the running submission (and those queued behind it) settle aborted; wait() and read() reject", async () => {
    const { c } = await conversation("f2abort");
    assert.deepEqual(await c.abort(), { aborted: false }, "nothing to abort on an idle conversation");
    const running = await c.send(user(PROMPTS.stall));
    const queued = await c.send(user("and after that"));
    assert.notEqual(queued.submissionId, running.submissionId);
    await sleep(300);
    assert.deepEqual(await c.abort(), { aborted: true });
    for (const a of [running, queued]) {
      await assert.rejects(c.wait(a), (e) => e instanceof FlueExecutionError && e.failure === "aborted" && e.targetId === a.submissionId);
      await assert.rejects(c.read(a), (e) => e instanceof FlueExecutionError && e.failure === "aborted");
    }
    const h = await c.history();
    for (const a of [running, queued]) assert.equal(h.settlements.find((s) => s.submissionId === a.submissionId)?.outcome, "aborted");
  });

  test("sends while a submission runs are queued, each settling with its own reply", async () => {
    const { c } = await conversation("f2queue");
    const one = await c.send(user("one [[slow:20]]"));
    const two = await c.send(user("two"));
    const [r1, r2] = await Promise.all([c.read(one), c.read(two)]);
    assert.match(r1.text, /one/);
    assert.match(r2.text, /two/);
    const order = (await c.history()).settlements.map((s) => s.submissionId);
    assert.ok(order.indexOf(one.submissionId) < order.indexOf(two.submissionId));
  });

  test("idempotencyKey: a retried send converges on the original submission", async () => {
    const id = newThread("f2idem");
    const c = conv(id);
    const a = await c.send(user("once [[slow:10]]", { idempotencyKey: "k-1" }));
    const b = await c.send(user("once [[slow:10]]", { idempotencyKey: "k-1" }));
    assert.equal(b.submissionId, a.submissionId);
    assert.equal(b.deduplicated, true);
    assert.equal(b.offset, "-1", "a replay re-attaches from the origin");
    await c.wait(b);
    const h = await c.history();
    assert.equal(h.messages.filter((m) => m.role === "user").length, 1, "delivered once");
  });

  test("uid send conditions: null creates only; a string continues only that incarnation", async () => {
    const id = newThread("f2uid");
    const c = conv(id);
    const a = await c.send(user("hi", { uid: null }));
    await c.wait(a);
    await assert.rejects(c.send(user("again", { uid: null })), (e) => e.status === 409 && e.body?.error?.meta?.uid === a.uid);
    await assert.rejects(c.send(user("again", { uid: "not-this-one" })), (e) => e.status === 404);
    const b = await c.send(user("again", { uid: a.uid }));
    assert.equal(b.uid, a.uid);
    await c.wait(b);
  });

  test("observe() of a conversation that does not exist is absent; history() is a 404 FlueApiError", async () => {
    const c = conv(newThread("f2none"));
    const { obs } = observe(c, {});
    await until(() => obs.getSnapshot().phase === "absent", { what: "absent" });
    obs.close();
    await assert.rejects(c.history(), (e) => e instanceof FlueApiError && e.status === 404);
  });

  test("1.0.0-beta.9 and 2.0.3 observe the same conversation at once and both end where their history() is", async () => {
    const { id, c } = await conversation("f2both");
    const o2 = observe(c, { live: "sse" });
    const v1 = flue1({ baseUrl: worker.url });
    const o1 = v1.agents.observe("default", id, { live: "long-poll" });
    o1.subscribe(() => {});
    await until(() => o1.getSnapshot().phase === "live" && o2.obs.getSnapshot().phase === "live", { what: "both live" });
    const a = await c.send(user(PROMPTS.tool));
    await o2.settled(a.submissionId);
    await until(() => o1.getSnapshot().conversation?.settlements.some((s) => s.submissionId === a.submissionId), { what: "1.x settles" });
    const s1 = plain(o1.getSnapshot().conversation);
    const s2 = plain(o2.obs.getSnapshot().conversation);
    o1.close();
    o2.obs.close();
    const h1 = await v1.agents.history("default", id);
    // 1.x keeps the settlement's `result` from its chunk; history has none.
    const strip = (s) => ({ ...s, settlements: s.settlements.map(({ result, ...rest }) => rest) });
    assert.deepEqual(strip(s1), { conversationId: h1.conversationId, messages: h1.messages, settlements: h1.settlements }, "1.x: observed == history");
    assert.deepEqual(s2, await fresh(c), "2.x: observed == history");
  });

  test("history then updates reaches history again on every golden scenario", async () => {
    for (const [name, prompt] of Object.entries(PROMPTS)) {
      const { id, c } = await conversation(`f2g-${name}`);
      const { obs, settled } = observe(c, {});
      await until(() => obs.getSnapshot().phase === "live", { what: "observe() goes live" });
      const a = await c.send(user(prompt));
      if (name === "confirm") await approvePending(id);
      if (name === "stall") {
        await sleep(300);
        assert.deepEqual(await c.abort(), { aborted: true });
      }
      await settled(a.submissionId);
      await sleep(200); // records stored after the settlement (a sub-agent's last words)
      const state = obs.getSnapshot().conversation;
      obs.close();
      assert.deepEqual(plain(state), await fresh(c), `${name}: observed == history`);
      assert.equal(state.settlements.find((s) => s.submissionId === a.submissionId).outcome, name === "stall" ? "aborted" : "completed", name);
    }
  });

  test("read() refuses an admission of another conversation, client-side", async () => {
    const { c, first } = await conversation("f2other");
    const other = conv(newThread("f2other-b"));
    await assert.rejects(other.read(first), /different conversation/);
    assert.ok(c);
  });
});
