// Instance AI through n8n's own code: threadline's `/instance-ai/events`
// stream and messages view driven through n8n's published schema and shared
// reducer (@n8n/api-types 1.41.0, pinned, unmodified) the way n8n's editor
// uses them (tests/n8n-editor/: its thread runtime, ported line for line):
// every frame parses with n8n's schema, and on every path a client takes
// (read from the start, join mid-answer, reconnect mid-answer by
// Last-Event-ID and by ?lastEventId, reload mid-run) the tree n8n's editor
// ends with is exactly the tree threadline's messages view shows, for every
// kind of run (text, reasoning, tools, background sub-agents, errors,
// cancels, confirmations, questions, task lists).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, parseSse, until, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";
import { EditorThread, instanceAiEventSchema } from "./n8n-editor/index.mjs";

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

/**
 * An EventSource on the thread's events route feeding `editor` frame by
 * frame: from the editor's own cursor (`?lastEventId=`), or, as a browser's
 * reconnect of the same EventSource does, with `Last-Event-ID`.
 */
function stream(editor, thread, { lastEventIdHeader } = {}) {
  const ac = new AbortController();
  const s = { frames: [], done: false, close: () => ac.abort() };
  const cursor = lastEventIdHeader === undefined ? editor.connect() : undefined;
  const url = `${worker.url}/instance-ai/events/${thread}${cursor === undefined ? "" : `?lastEventId=${cursor}`}`;
  const headers = lastEventIdHeader === undefined ? {} : { "last-event-id": String(lastEventIdHeader) };
  s.ready = (async () => {
    const resp = await fetch(url, { headers, signal: ac.signal });
    assert.equal(resp.status, 200, `${url}: ${resp.status}`);
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          const end = buf.lastIndexOf("\n\n");
          if (end < 0) continue;
          for (const f of parseSse(buf.slice(0, end + 2))) {
            s.frames.push(f);
            editor.receive(f);
          }
          buf = buf.slice(end + 2);
        }
      } catch {}
      s.done = true;
    })();
  })();
  return s;
}

/** The run's tree as the messages view shows it. */
async function viewTree(thread, runId) {
  const page = await api.messages(thread);
  assert.equal(page.status, 200, page.text);
  const m = page.json.messages.find((x) => x.role === "assistant" && x.runId === runId);
  assert.ok(m, `the messages view holds ${runId}`);
  return m.agentTree;
}

const runIdOf = async (thread) => (await api.status(thread)).json.runId;
const runOver = (thread, timeoutMs = 15_000) =>
  until(async () => (await api.status(thread)).json.hasActiveRun === false, { timeoutMs, what: "the run to end" });
/** The log's events of the thread (raw, from the Durable Streams route). */
async function logOf(thread) {
  return (await fetch(`${worker.url}/v1/threads/${thread}?offset=-1`)).json();
}
/** Waits until the open answer has streamed some text (a delta arrived). */
const midAnswer = (s) => until(() => s.frames.some((f) => f.data && JSON.parse(f.data).type === "text-delta"), { what: "text mid-answer" });

/** Every frame parsed with n8n's schema, and none refused by it. */
function assertAllParse(editor, frames) {
  const refused = editor.log.filter((l) => l.action.startsWith("skipped"));
  assert.deepEqual(refused, [], "n8n's schema refused frames");
  for (const f of frames.filter((f) => f.data && f.event === undefined)) {
    const parsed = instanceAiEventSchema.safeParse(JSON.parse(f.data));
    assert.ok(parsed.success, `${f.data}: ${parsed.error?.message}`);
  }
}

/** A tree without its transient status lines. */
function withoutStatusLines(tree) {
  const { statusMessage: _, children, ...rest } = tree;
  return { ...rest, children: children.map(withoutStatusLines) };
}

/**
 * The editor's tree of the run equals the messages view's. A client that
 * was away while a status line cleared (a `status` is live only, by the
 * protocol, and the history never holds one) may still show the line, as
 * with n8n's own server: `away` compares the trees without them.
 */
async function assertSameTree(editor, thread, runId, { away = false } = {}) {
  const mine = JSON.parse(JSON.stringify(await viewTree(thread, runId)));
  assert.ok(mine, "the view has a tree");
  const theirs = editor.treeOf(runId);
  if (away) assert.deepEqual(withoutStatusLines(theirs), withoutStatusLines(mine));
  else assert.deepEqual(theirs, mine);
}

// The runs every path is tried on: the message, and what to do during it.
const scenarios = {
  "text and reasoning": { message: "[[reason]] hello there [[slow:30]]" },
  "a tool call": { message: '[[tool:weather:{"city":"Oslo"}]]' },
  "parallel tools": { message: "[[parallel]]" },
  "a sub-agent": { message: "[[spawn]]" },
  "a background sub-agent": { message: "[[spawn-bg]] [[slow:40]]", settle: (thread) => until(async () => (await logOf(thread)).some((e) => e.type === "agent-completed"), { timeoutMs: 15_000, what: "the background agent" }) },
  "a task list": { message: "[[tasks]]" },
  "a provider error": { message: "[[error:500]]" },
  "an answer cut at its length": { message: "[[length]]" },
  "a confirmation, approved": {
    message: '[[tool:delete-note:{"id":"n1"}]]',
    during: async (thread) => {
      const req = await until(async () => (await logOf(thread)).find((e) => e.type === "confirmation-request"), { what: "the request" });
      const r = await api.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true });
      assert.equal(r.status, 200, r.text);
    },
  },
  "a question, answered": {
    message: "[[ask]]",
    during: async (thread) => {
      const req = await until(async () => (await logOf(thread)).find((e) => e.type === "confirmation-request"), { what: "the question" });
      const q = req.payload.questions?.[0];
      const answers = q ? [{ questionId: q.id, selectedOptions: q.options?.length ? [q.options[0]] : [], customText: q.options?.length ? undefined : "blue" }] : [];
      const r = await api.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { answers });
      assert.equal(r.status, 200, r.text);
    },
  },
  cancelled: {
    message: "a long answer [[slow:60]]",
    during: async (thread, s) => {
      if (s) await midAnswer(s);
      else await sleep(300);
      const r = await api.cancel(thread);
      assert.equal(r.status, 200);
    },
  },
};

async function run(name, path) {
  const sc = scenarios[name];
  const thread = newThread("n8n");
  const editor = new EditorThread();
  let s;
  const frames = [];
  if (path === "from the start") {
    // The editor opens its stream before the first message, as n8n's does.
    s = stream(editor, thread);
    await s.ready;
  }
  const sent = await api.chat(thread, sc.message);
  assert.equal(sent.status, 200, sent.text);
  const runId = sent.json.runId;
  if (path === "join mid-answer") {
    await until(async () => (await logOf(thread)).length >= 2, { what: "the run under way" });
    s = stream(editor, thread);
    await s.ready;
  }
  if (path === "reload mid-run") {
    await until(async () => (await logOf(thread)).length >= 2, { what: "the run under way" });
    const page = await api.messages(thread);
    editor.loadHistory(page.json);
    s = stream(editor, thread);
    await s.ready;
  }
  if (path === "reconnect by Last-Event-ID" || path === "reconnect by ?lastEventId") {
    s = stream(editor, thread);
    await s.ready;
    await until(() => s.frames.some((f) => f.data && ["text-delta", "tool-call", "confirmation-request"].includes(JSON.parse(f.data).type)), { timeoutMs: 10_000, what: "something streamed" }).catch(() => {});
    s.close();
    frames.push(...s.frames);
    await sleep(40);
    // A browser's reconnect keeps its EventSource (and its last id); the
    // editor's own opens a new one from its cursor.
    s = path === "reconnect by Last-Event-ID" ? stream(editor, thread, { lastEventIdHeader: editor.idBuffer || 0 }) : stream(editor, thread);
    await s.ready;
  }
  if (sc.during) await sc.during(thread, s);
  await runOver(thread);
  if (sc.settle) await sc.settle(thread);
  // The editor has seen the run end (on this stream, an earlier one, or in
  // the history it loaded); what is stored after it arrives in a moment.
  await until(() => editor.messageOf(runId)?.isStreaming === false && editor.treeOf(runId)?.status !== "active", { what: "the run's end in the editor" });
  await sleep(150);
  s.close();
  frames.push(...s.frames);
  assertAllParse(editor, frames);
  await assertSameTree(editor, thread, runId, { away: path.startsWith("reconnect") });
  return { editor, thread, runId, frames };
}

const paths = ["from the start", "join mid-answer", "reconnect by Last-Event-ID", "reconnect by ?lastEventId", "reload mid-run"];

for (const path of paths) {
  describe(`n8n's editor, ${path}: the messages view's tree`, () => {
    for (const name of Object.keys(scenarios)) {
      test(name, async () => {
        await run(name, path);
      });
    }
  });
}

describe("n8n's editor: what each point of the review asked", () => {
  test("joining mid-answer shows the open text once (run-sync holds the log, the snapshot the open segment)", async () => {
    const thread = newThread("n8n-join");
    const sent = await api.chat(thread, "a long answer to join in the middle of [[slow:80]]");
    const early = new EditorThread();
    const first = stream(early, thread);
    await first.ready;
    await midAnswer(first);
    const joiner = new EditorThread();
    const second = stream(joiner, thread);
    await second.ready;
    const sync = await until(() => second.frames.find((f) => f.event === "run-sync"), { what: "run-sync" });
    const tree = JSON.parse(sync.data).agentTree;
    assert.equal(tree.textContent, "", "the tree holds none of the open segment");
    const snap = second.frames.find((f) => f.data && JSON.parse(f.data).payload?.snapshot === true);
    assert.ok(snap, "the open segment follows, whole");
    const text = joiner.treeOf(sent.json.runId).textContent;
    assert.ok(text.length > 0 && JSON.parse(snap.data).payload.text.startsWith(text.slice(0, 5)));
    await runOver(thread);
    await sleep(100);
    first.close();
    second.close();
    const answer = (await viewTree(thread, sent.json.runId)).textContent;
    assert.equal(joiner.treeOf(sent.json.runId).textContent, answer, "once");
    assert.equal(early.treeOf(sent.json.runId).textContent, answer, "once");
  });

  test("a user message names no run; times are ISO 8601", async () => {
    const thread = newThread("n8n-msg");
    const sent = await api.chat(thread, '[[tool:weather:{"city":"Oslo"}]]');
    await runOver(thread);
    const page = await api.messages(thread);
    const [user, assistant] = page.json.messages;
    assert.equal(user.role, "user");
    assert.equal(user.runId, undefined);
    assert.equal(assistant.runId, sent.json.runId);
    for (const t of [user.createdAt, assistant.createdAt, assistant.agentTree.toolCalls[0].startedAt, assistant.agentTree.toolCalls[0].completedAt]) {
      assert.match(t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    assert.equal(assistant.agentTree.toolCalls[0].renderHint, "default");
  });

  test("the tree says what n8n's says: renderHint, a background child's taskId, the error line, why a run was cancelled", async () => {
    const planned = newThread("n8n-tree");
    const p = await api.chat(planned, "[[tasks]]");
    await runOver(planned);
    const planner = (await viewTree(planned, p.json.runId)).toolCalls.find((c) => c.toolName === "create-tasks");
    assert.equal(planner.renderHint, "planner");
    const bg = newThread("n8n-tree");
    const b = await api.chat(bg, "[[spawn-bg]]");
    await until(async () => (await logOf(bg)).some((e) => e.type === "agent-completed"), { what: "the background agent" });
    const child = (await viewTree(bg, b.json.runId)).children[0];
    assert.match(child.taskId, /^task_/);
    assert.equal(child.timeline.filter((e) => e.type === "text").length, 1, "one entry per segment");
    const failed = newThread("n8n-tree");
    const f = await api.chat(failed, "[[error:500]]");
    await runOver(failed);
    const err = await viewTree(failed, f.json.runId);
    assert.match(err.textContent, /\n\n\*Error: The model provider answered HTTP 500: .*\*$/s);
    assert.equal(err.timeline.at(-1).content, err.textContent.slice(err.textContent.indexOf("\n\n*Error:")));
    assert.equal(err.status, "error");
    assert.equal(err.errorDetails.statusCode, 500);
    assert.equal(err.errorDetails.provider, "openai-compatible");
    const cancelled = newThread("n8n-tree");
    const c = await api.chat(cancelled, "wait [[slow:200]]");
    await sleep(300);
    await api.cancel(cancelled);
    await runOver(cancelled);
    const tree = await viewTree(cancelled, c.json.runId);
    assert.equal(tree.status, "cancelled");
    assert.equal(tree.cancellationReason, "user");
  });

  test("threadline's own kinds stay off the route: step-start, step-finish, confirmation-settled", async () => {
    const thread = newThread("n8n-own");
    const editor = new EditorThread();
    const s = stream(editor, thread);
    await s.ready;
    await api.chat(thread, '[[tool:delete-note:{"id":"n1"}]]');
    const req = await until(async () => (await logOf(thread)).find((e) => e.type === "confirmation-request"), { what: "the request" });
    await api.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true });
    await runOver(thread);
    await sleep(100);
    s.close();
    const types = new Set(s.frames.filter((f) => f.data).map((f) => JSON.parse(f.data).type));
    for (const own of ["step-start", "step-finish", "confirmation-settled"]) assert.ok(!types.has(own), own);
    const stored = new Set((await logOf(thread)).map((e) => e.type));
    for (const own of ["step-start", "step-finish", "confirmation-settled"]) assert.ok(stored.has(own), `${own} is still in the log`);
    assertAllParse(editor, s.frames);
  });
});

describe("Instance AI rows, proven on the wire", () => {
  /** Follows a thread from its start to the end of its run; its frames. */
  async function recorded(message, { during } = {}) {
    const thread = newThread("row");
    const editor = new EditorThread();
    const s = stream(editor, thread);
    await s.ready;
    const sent = await api.chat(thread, message);
    if (during) await during(thread, sent.json.runId);
    await runOver(thread);
    await sleep(150);
    s.close();
    return { thread, runId: sent.json.runId, frames: s.frames, editor, events: s.frames.filter((f) => f.data && !f.event).map((f) => JSON.parse(f.data)) };
  }

  test("inputType: an approval-required tool's request says `approval` on the wire", async () => {
    const { events } = await recorded('[[tool:delete-note:{"id":"n1"}]]', {
      during: async (thread) => {
        const req = await until(async () => (await logOf(thread)).find((e) => e.type === "confirmation-request"), { what: "the request" });
        await api.call("POST", `/instance-ai/confirm/${req.payload.requestId}`, { approved: true });
      },
    });
    const req = events.find((e) => e.type === "confirmation-request");
    assert.equal(req.payload.inputType, "approval");
    assert.ok(instanceAiEventSchema.safeParse(req).success);
  });

  test("reasoning-delta: the reasoning streams as deltas, which make the block", async () => {
    const { events } = await recorded("[[reason]] think first");
    const deltas = events.filter((e) => e.type === "reasoning-delta");
    assert.ok(deltas.length > 1, "streamed in pieces");
    const block = events.find((e) => e.type === "reasoning-block");
    assert.equal(deltas.map((d) => d.payload.text).join(""), block.payload.text);
    assert.ok(deltas.every((d) => d.responseId === block.responseId));
  });

  test("a replay that overlaps what the editor had is dropped by id, and the tree is as before", async () => {
    const { thread, runId, editor } = await recorded('[[tool:weather:{"city":"Oslo"}]]');
    const before = editor.treeOf(runId);
    editor.lastEventId = 2; // as if its cursor were older than what it holds
    const again = stream(editor, thread);
    await again.ready;
    await until(() => again.frames.some((f) => f.data && JSON.parse(f.data).type === "run-finish"), { what: "the replay" });
    again.close();
    assert.ok(editor.log.some((l) => l.action.startsWith("dropped (duplicate id")), "repeated ids dropped");
    assert.deepEqual(editor.treeOf(runId), before);
  });

  test("tool-input-start: a pending call with empty args, loading, which tool-call fills", async () => {
    const { runId, frames } = await recorded('[[tool:weather:{"city":"Oslo"}]]');
    const at = frames.findIndex((f) => f.data && JSON.parse(f.data).type === "tool-input-start");
    const callAt = frames.findIndex((f) => f.data && JSON.parse(f.data).type === "tool-call");
    assert.ok(at >= 0 && callAt > at, "tool-input-start comes first");
    const partial = new EditorThread();
    partial.connect();
    for (const f of frames.slice(0, at + 1)) partial.receive(f);
    const pending = partial.treeOf(runId).toolCalls[0];
    assert.deepEqual([pending.toolName, pending.args, pending.isLoading], ["weather", {}, true]);
    for (const f of frames.slice(at + 1, callAt + 1)) partial.receive(f);
    const filled = partial.treeOf(runId).toolCalls;
    assert.equal(filled.length, 1, "filled, not duplicated");
    assert.deepEqual(filled[0].args, { city: "Oslo" });
  });

  test("status's backgroundTasks: taskId, role, agentId, status, startedAt, runId; cancel stops a live run's background agents", async () => {
    const thread = newThread("row-bg");
    const sent = await api.chat(thread, "[[spawn-bg]] [[slow:400]]");
    const task = await until(async () => (await api.status(thread)).json.backgroundTasks?.[0], { what: "a background task" });
    assert.match(task.taskId, /^task_/);
    assert.equal(task.role, "researcher");
    assert.match(task.agentId, /^agent_/);
    assert.equal(task.status, "running");
    assert.equal(typeof task.startedAt, "number");
    assert.equal(task.runId, sent.json.runId);
    // The run is still live (its answer streams slowly): cancel stops it
    // and its background agent with it.
    const live = await api.status(thread);
    if (live.json.hasActiveRun) {
      await api.cancel(thread);
      await until(async () => (await api.status(thread)).json.backgroundTasks.length === 0, { what: "the background task to stop" });
      const done = (await logOf(thread)).filter((e) => e.type === "agent-completed" && e.agentId === task.agentId);
      assert.ok(done.every((e) => e.payload.status !== "completed"), JSON.stringify(done));
    }
  });

  test("error.provider: a provider's failure names it", async () => {
    const { events } = await recorded("[[error:500]]");
    const err = events.find((e) => e.type === "error");
    assert.equal(err.payload.provider, "openai-compatible");
    assert.equal(err.payload.statusCode, 500);
  });
});

describe("a thread that does not exist yet", () => {
  const jwt = async () => {
    const { hs256Jwt } = await import("./support/harness.mjs");
    const secret = "new-thread-secret-0123456789abcdef012";
    return { secret, as: (sub) => ({ authorization: `Bearer ${hs256Jwt(secret, { sub, exp: Math.floor(Date.now() / 1000) + 600 })}` }) };
  };

  test("its stream is served (200, empty, then live), its status and messages are an empty thread's, cancel is a no-op; nothing is stored", async () => {
    const { secret, as } = await jwt();
    const w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: secret, LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
    try {
      const thread = newThread("new");
      const call = async (method, path, who, body) => {
        const r = await fetch(w.url + path, { method, headers: { ...as(who), ...(body ? { "content-type": "application/json" } : {}) }, body: body && JSON.stringify(body) });
        return { status: r.status, json: await r.json().catch(() => undefined) };
      };
      const status = await call("GET", `/instance-ai/threads/${thread}/status`, "alice");
      assert.equal(status.status, 200);
      assert.deepEqual([status.json.hasActiveRun, status.json.isSuspended, status.json.backgroundTasks], [false, false, []]);
      const messages = await call("GET", `/instance-ai/threads/${thread}/messages`, "alice");
      assert.equal(messages.status, 200);
      assert.deepEqual([messages.json.messages, messages.json.nextEventId], [[], 1]);
      const cancel = await call("POST", `/instance-ai/chat/${thread}/cancel`, "alice");
      assert.deepEqual([cancel.status, cancel.json.cancelled], [200, false]);
      // Alice's page opens its stream first; then her first message.
      const ac = new AbortController();
      const resp = await fetch(`${w.url}/instance-ai/events/${thread}`, { headers: as("alice"), signal: ac.signal });
      assert.equal(resp.status, 200);
      const reader = resp.body.getReader();
      let text = "";
      const reading = (async () => {
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            text += new TextDecoder().decode(value);
          }
        } catch {}
      })();
      // A stranger's GET stored nothing: the thread is still nobody's.
      const strangerStatus = await call("GET", `/instance-ai/threads/${thread}/status`, "mallory");
      assert.equal(strangerStatus.status, 200, "a stranger too sees an empty thread, not Alice's");
      const sent = await call("POST", `/instance-ai/chat/${thread}`, "alice", { message: "hello" });
      assert.equal(sent.status, 200);
      await until(() => text.includes('"run-finish"'), { what: "alice's run on her early stream" });
      ac.abort();
      await reading;
      const frames = parseSse(text).filter((f) => f.data && !f.event).map((f) => JSON.parse(f.data));
      assert.equal(frames[0].type, "run-start");
      // Now it is Alice's: a stranger gets 404 everywhere, as for any thread of hers.
      for (const path of [`/instance-ai/threads/${thread}/status`, `/instance-ai/threads/${thread}/messages`, `/instance-ai/events/${thread}`]) {
        assert.equal((await call("GET", path, "mallory")).status, 404, path);
      }
      assert.equal((await call("POST", `/instance-ai/chat/${thread}/cancel`, "mallory")).status, 404);
    } finally {
      await w.stop();
    }
  });

  test("a stream opened before someone else creates the thread ends, and shows none of their events", async () => {
    const { secret, as } = await jwt();
    const w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: secret, LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
    try {
      const thread = newThread("squat");
      const resp = await fetch(`${w.url}/instance-ai/events/${thread}`, { headers: as("mallory") });
      assert.equal(resp.status, 200);
      const reader = resp.body.getReader();
      let text = "";
      let ended = false;
      (async () => {
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            text += new TextDecoder().decode(value);
          }
        } catch {}
        ended = true;
      })();
      await sleep(200);
      const sent = await fetch(`${w.url}/instance-ai/chat/${thread}`, { method: "POST", headers: { ...as("alice"), "content-type": "application/json" }, body: JSON.stringify({ message: "mine [[slow:50]]" }) });
      assert.equal(sent.status, 200, "mallory's stream claimed nothing");
      await until(() => ended, { what: "mallory's stream to end" });
      assert.ok(!text.includes('"run-start"'), `mallory saw: ${text}`);
    } finally {
      await w.stop();
    }
  });
});
