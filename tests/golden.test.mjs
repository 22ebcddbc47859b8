// Golden wire output: for each protocol, one fixed scenario on workerd (a run
// with reasoning and text, a tool call, a confirmation, a sub-agent, a
// cancel, a client joining mid-answer and a reconnect from a cursor), every
// answer recorded as the client sees it: status, the headers that matter,
// every byte of the body. Ids, timestamps and offsets' generations are
// replaced by stable placeholders in order of appearance, so the same
// scenario gives the same file on every run, and any change to what a
// protocol puts on the wire shows as a diff.
//
//   node --test tests/golden.test.mjs                  compares with tests/golden/
//   GOLDEN_UPDATE=1 node --test tests/golden.test.mjs  writes tests/golden/ anew
//   WORKER_SCRIPT=DIR node --test tests/golden.test.mjs  runs another build (DIR/index.js)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startWorker, parseSse, until, sleep } from "./support/harness.mjs";
import { PROMPTS } from "./support/prompts.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "golden");
const UPDATE = process.env.GOLDEN_UPDATE === "1";

/** The headers a client of these protocols reads. */
const HEADERS = [
  "content-type",
  "cache-control",
  "x-accel-buffering",
  "x-vercel-ai-ui-message-stream",
  "x-agent-run-id",
  "x-agent-thread-id",
  "stream-next-offset",
  "stream-up-to-date",
  "stream-closed",
  "stream-cursor",
  "content-encoding",
  "allow",
];

/**
 * Stable placeholders: every generated id (`<prefix>_<24 hex>`), epoch-ms
 * timestamp, Durable Streams offset generation and cursor becomes a numbered
 * placeholder, numbered by first appearance across the whole transcript.
 */
function normalise(text) {
  const seen = new Map();
  const stable = (kind, value) => {
    const key = `${kind}:${value}`;
    if (!seen.has(key)) seen.set(key, `<${kind}${[...seen.keys()].filter((k) => k.startsWith(`${kind}:`)).length + 1}>`);
    return seen.get(key);
  };
  return text
    .replace(/\b([a-z]+)_[0-9a-f]{24}\b/g, (m, prefix) => stable(prefix, m))
    .replace(/\b(\d{16})_(\d{16})\b/g, (_, gen, seq) => `${stable("gen", gen)}_${seq}`)
    // Flue's incarnation is the generation, as offsets write it.
    .replace(/("incarnation":")(\d{16})"/g, (_, k, gen) => `${k}${stable("gen", gen)}"`)
    .replace(/("streamCursor":"|stream-cursor: )(\d+)/g, (_, k) => `${k}<cursor>`)
    .replace(/\b1[7-9]\d{11}\b/g, "<ts>")
    // Wall-clock readings: when a message was sent, and how long reasoning took.
    .replace(/\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b/g, "<time>")
    .replace(/"reasoningMs":\d+/g, '"reasoningMs":<ms>');
}

/** A transcript: each answer as `### label`, status, headers, then the body. */
function transcript() {
  const parts = [];
  return {
    add(label, { status, headers, body }) {
      const h = HEADERS.filter((k) => headers.get(k) !== null).map((k) => `${k}: ${headers.get(k)}`);
      parts.push(`### ${label}\nstatus: ${status}\n${h.join("\n")}${h.length ? "\n" : ""}\n${body}\n`);
    },
    text: () => normalise(parts.join("\n")),
  };
}

let llm, tools, worker, base;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 2 });
  tools = await startDemoTools();
});
after(async () => {
  await llm?.close();
  await tools?.close();
});

/** A fresh Worker for one protocol's scenario (its own state). */
async function fresh() {
  await worker?.stop();
  worker = await startWorker({
    vars: {
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "k",
      // `delete-note` answers as `weather` does: its result holds no ids
      // (the echo it has elsewhere quotes them, and the model's answer then
      // splits them across deltas no placeholder can mend).
      TOOLS: JSON.stringify(tools.declarations.map((t) => (t.name === "delete-note" ? { ...t, url: `${tools.url}/weather` } : t))),
      SSE_PING_MS: "600000",
      STREAMS_LONG_POLL_MS: "300",
    },
  });
  base = worker.url;
}
after(async () => worker?.stop());

/** One request, its whole answer read. */
async function call(method, p, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  const resp = await fetch(base + p, init);
  return { status: resp.status, headers: resp.headers, body: await resp.text() };
}

/**
 * A streaming request read in the background: `done` settles with the whole
 * answer once the server ends it (or `stop()` is called: the bytes so far).
 */
function stream(method, p, body, headers = {}) {
  const ac = new AbortController();
  const s = { status: undefined, headers: undefined, body: "" };
  s.done = (async () => {
    const init = { method, headers: { ...headers }, signal: ac.signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    const resp = await fetch(base + p, init);
    s.status = resp.status;
    s.headers = resp.headers;
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        s.body += dec.decode(value, { stream: true });
      }
    } catch {}
    return s;
  })();
  s.has = (pred) => until(() => parseSse(s.body).some(pred), { timeoutMs: 10000, what: `a frame of ${method} ${p} (got ${s.body.length} bytes: …${s.body.slice(-300)})` });
  s.stop = async () => {
    ac.abort();
    return s.done;
  };
  return s;
}

/** Reads an SSE stream until `last(frames)` holds, then drops it. */
async function sseUntil(p, headers, last) {
  const s = stream("GET", p, undefined, headers);
  await until(() => last(parseSse(s.body)), { timeoutMs: 10000, what: `the end of ${p}` });
  // Whatever the server would write at once after it is part of the answer.
  await sleep(100);
  return s.stop();
}

const ia = (thread) => ({
  status: () => call("GET", `/instance-ai/threads/${thread}/status`),
  idle: () => until(async () => !JSON.parse((await call("GET", `/instance-ai/threads/${thread}/status`)).body).hasActiveRun, { timeoutMs: 15000, what: "the run to end" }),
  suspended: () => until(async () => JSON.parse((await call("GET", `/instance-ai/threads/${thread}/status`)).body).isSuspended, { timeoutMs: 15000, what: "the run to wait" }),
  lastId: async () => JSON.parse((await call("GET", `/instance-ai/threads/${thread}/messages`)).body).nextEventId - 1,
  requestId: async () => {
    const log = JSON.parse((await call("GET", `/v1/threads/${thread}?offset=-1`)).body);
    return log.filter((e) => e.type === "confirmation-request").at(-1).payload;
  },
});

async function check(name, text) {
  const file = path.join(dir, `${name}.txt`);
  if (UPDATE) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, text);
    return;
  }
  assert.ok(fs.existsSync(file), `${file} is missing: run with GOLDEN_UPDATE=1 to write it`);
  const want = fs.readFileSync(file, "utf8");
  if (text !== want) {
    fs.mkdirSync(path.join(dir, "..", "..", "test-artifacts"), { recursive: true });
    const got = path.join(dir, "..", "..", "test-artifacts", `golden-${name}.txt`);
    fs.writeFileSync(got, text);
    assert.fail(`${name}: the wire output differs from ${file} (this run's is in ${got}; diff them)`);
  }
}

test("Instance AI: the events stream live, replayed, from a cursor, and the thread's views", async () => {
  await fresh();
  const T = "golden-ia";
  const t = ia(T);
  const out = transcript();
  // The first send makes the thread; a subscriber follows from its tail.
  out.add("send first", await call("POST", `/instance-ai/chat/${T}`, { message: "hi" }));
  await t.idle();
  const live = stream("GET", `/instance-ai/events/${T}`, undefined, { "last-event-id": String(await t.lastId()) });
  await sleep(200);
  for (const key of ["reason", "tool"]) {
    out.add(`send ${key}`, await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS[key] }));
    await t.idle();
  }
  out.add("send confirm", await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.confirm }));
  await t.suspended();
  const request = await t.requestId();
  out.add("confirm", await call("POST", `/instance-ai/confirm/${request.requestId}`, { approved: true }));
  await t.idle();
  out.add("send spawn", await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.spawn }));
  await t.idle();
  out.add("send stall", await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.stall }));
  await live.has((f) => f.data?.includes("Starting..."));
  // A client joining mid-answer: the open segment's text so far.
  const joinAt = await t.lastId();
  const join = stream("GET", `/instance-ai/events/${T}`, undefined, { "last-event-id": String(joinAt) });
  await join.has((f) => f.data?.includes('"snapshot":true'));
  await sleep(100);
  out.add("cancel", await call("POST", `/instance-ai/chat/${T}/cancel`));
  await t.idle();
  await sleep(200);
  out.add("joined mid-answer", await join.stop());
  out.add("live after the first run", await live.stop());
  out.add("status", await t.status());
  out.add("messages", await call("GET", `/instance-ai/threads/${T}/messages`));
  out.add("messages page", await call("GET", `/instance-ai/threads/${T}/messages?limit=2&page=1`));
  const last = await t.lastId();
  const isLast = (frames) => frames.some((f) => Number(f.id) === last);
  out.add("replay from 0", await sseUntil(`/instance-ai/events/${T}`, {}, isLast));
  out.add("replay after Last-Event-ID 5", await sseUntil(`/instance-ai/events/${T}`, { "last-event-id": "5" }, isLast));
  out.add("replay after ?lastEventId=20", await sseUntil(`/instance-ai/events/${T}?lastEventId=20`, {}, isLast));
  await check("instance-ai", out.text());
});

test("agora: sends that stream their run, decisions, a re-attach after a cursor, the thread's detail", async () => {
  await fresh();
  const T = "golden-ag";
  const t = ia(T);
  const out = transcript();
  for (const key of ["reason", "tool"]) {
    out.add(`chat ${key}`, await stream("POST", "/agent/chat", { threadId: T, message: PROMPTS[key] }).done);
    await t.idle();
  }
  const confirm = stream("POST", "/agent/chat", { threadId: T, message: PROMPTS.confirm });
  await confirm.has((f) => f.data?.includes("approval-requested"));
  const request = await t.requestId();
  const runId = JSON.parse(parseSse(confirm.body).find((f) => f.event === "meta").data).runId;
  out.add("approve", await call("POST", "/agent/tool-call/approve", { runId, toolCallId: request.toolCallId }));
  out.add("chat confirm", await confirm.done);
  await t.idle();
  out.add("chat spawn", await stream("POST", "/agent/chat", { threadId: T, message: PROMPTS.spawn }).done);
  await t.idle();
  const stall = stream("POST", "/agent/chat", { threadId: T, message: PROMPTS.stall });
  await stall.has((f) => f.data?.includes("Starting..."));
  const stallRun = JSON.parse(parseSse(stall.body).find((f) => f.event === "meta").data).runId;
  const reattach = stream("GET", `/agent/chat/${stallRun}/stream?after=1`);
  await reattach.has((f) => f.data?.includes("Starting..."));
  out.add("cancel", await call("POST", `/instance-ai/chat/${T}/cancel`));
  out.add("chat stall", await stall.done);
  out.add("re-attach after 1", await reattach.done);
  await t.idle();
  out.add("re-attach a finished run with Last-Event-ID 2", await stream("GET", `/agent/chat/${runId}/stream`, undefined, { "last-event-id": "2" }).done);
  out.add("thread detail", await call("GET", `/agent/threads/${T}`));
  out.add("threads", await call("GET", "/agent/threads"));
  out.add("models", await call("GET", "/agent/models"));
  await check("agora", out.text());
});

test("Durable Streams: the thread's log and a run's events, catch-up, views, live", async () => {
  await fresh();
  const T = "golden-ds";
  const t = ia(T);
  const out = transcript();
  const runs = [];
  for (const key of ["reason", "tool"]) {
    runs.push(JSON.parse((await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS[key] })).body).runId);
    await t.idle();
  }
  const history = await call("GET", `/v1/threads/${T}?view=history`);
  const mark = history.headers.get("stream-next-offset");
  await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.confirm });
  await t.suspended();
  await call("POST", `/instance-ai/confirm/${(await t.requestId()).requestId}`, { approved: true });
  await t.idle();
  await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.spawn });
  await t.idle();
  out.add("history after two runs", history);
  out.add("catch-up from -1", await call("GET", `/v1/threads/${T}?offset=-1`));
  out.add("updates after the history", await call("GET", `/v1/threads/${T}?view=updates&offset=${mark}`));
  out.add("history now", await call("GET", `/v1/threads/${T}?view=history`));
  out.add("updates without an offset", await call("GET", `/v1/threads/${T}?view=updates`));
  out.add("tail on the thread", await call("GET", `/v1/threads/${T}?offset=-1&tail=2`));
  const tail = (await call("GET", `/v1/threads/${T}?offset=now`)).headers.get("stream-next-offset");
  out.add("long-poll at the tail", await call("GET", `/v1/threads/${T}?offset=${tail}&live=long-poll`));
  out.add("long-poll behind", await call("GET", `/v1/threads/${T}?offset=${mark}&live=long-poll`));
  out.add("sse from the history's offset", await sseUntil(`/v1/threads/${T}?offset=${mark}&live=sse`, {}, (f) => f.some((x) => x.event === "control" && x.data.includes('"upToDate":true'))));
  out.add("run catch-up", await call("GET", `/v1/runs/${runs[1]}?offset=-1`));
  out.add("run tail 2", await call("GET", `/v1/runs/${runs[1]}?offset=-1&tail=2`));
  out.add("run sse, closed", await stream("GET", `/v1/runs/${runs[0]}?offset=-1&live=sse`).done);
  const stall = JSON.parse((await call("POST", `/instance-ai/chat/${T}`, { message: PROMPTS.stall })).body).runId;
  const runLive = stream("GET", `/v1/runs/${stall}?offset=-1&live=sse`);
  await runLive.has((f) => f.event === "control");
  await sleep(200);
  out.add("cancel", await call("POST", `/instance-ai/chat/${T}/cancel`));
  out.add("run sse, live to its close", await runLive.done);
  await check("durable-streams", out.text());
});

test("AI SDK: sends answered with the UI message stream, an approval's continuation, stop, reconnect, history", async () => {
  await fresh();
  const T = "golden-ui";
  const t = ia(T);
  const out = transcript();
  const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
  const send = (messages, extra = {}) => stream("POST", "/api/chat", { id: T, trigger: "submit-message", messages, ...extra });
  out.add("send reason", await send([user("m1", PROMPTS.reason)]).done);
  await t.idle();
  out.add("send tool", await send([user("m2", PROMPTS.tool)]).done);
  await t.idle();
  const asking = await send([user("m3", PROMPTS.confirm)]).done;
  out.add("send confirm", asking);
  const chunks = parseSse(asking.body).filter((f) => f.data && f.data !== "[DONE]").map((f) => JSON.parse(f.data));
  const messageId = chunks.find((c) => c.type === "start").messageId;
  const approval = chunks.find((c) => c.type === "tool-approval-request");
  const responded = {
    id: messageId,
    role: "assistant",
    parts: [{ type: "dynamic-tool", toolName: "delete-note", toolCallId: approval.toolCallId, state: "approval-responded", input: { id: "n1" }, approval: { id: approval.approvalId, approved: true } }],
  };
  out.add("continue approved", await send([user("m3", PROMPTS.confirm), responded]).done);
  await t.idle();
  out.add("send spawn", await send([user("m4", PROMPTS.spawn)]).done);
  await t.idle();
  const stall = send([user("m5", PROMPTS.stall)]);
  await stall.has((f) => f.data?.includes("Starting..."));
  const reconnect = stream("GET", `/api/chat/${T}/stream`);
  await reconnect.has((f) => f.data?.includes("Starting..."));
  out.add("stop", await call("POST", `/api/chat/${T}/stop`));
  out.add("send stall", await stall.done);
  out.add("reconnect", await reconnect.done);
  await t.idle();
  out.add("reconnect with no run", await call("GET", `/api/chat/${T}/stream`));
  out.add("history", await call("GET", `/api/chat/${T}/messages`));
  await check("ai-sdk", out.text());
});

test("AG-UI: runs, an interrupt and its resume, a re-attach by Last-Event-ID, cancel, history", async () => {
  await fresh();
  const T = "golden-agui";
  const t = ia(T);
  const out = transcript();
  const user = (id, content) => ({ id, role: "user", content });
  const run = (body) => stream("POST", "/ag-ui", { threadId: T, runId: "client-run", state: {}, tools: [], context: [], forwardedProps: {}, ...body });
  out.add("run reason", await run({ messages: [user("m1", PROMPTS.reason)] }).done);
  await t.idle();
  out.add("run tool", await run({ messages: [user("m2", PROMPTS.tool)] }).done);
  await t.idle();
  const asking = await run({ messages: [user("m3", PROMPTS.confirm)] }).done;
  out.add("run confirm", asking);
  const finished = JSON.parse(parseSse(asking.body).at(-1).data);
  const interrupt = finished.outcome.interrupts[0];
  out.add("resume approved", await run({ messages: [], resume: [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }] }).done);
  await t.idle();
  out.add("run spawn", await run({ messages: [user("m4", PROMPTS.spawn)] }).done);
  await t.idle();
  const stall = run({ messages: [user("m5", PROMPTS.stall)] });
  await stall.has((f) => f.data?.includes("Starting..."));
  const started = JSON.parse(parseSse(stall.body).find((f) => f.data?.includes("RUN_STARTED")).data);
  const reattach = stream("GET", `/ag-ui/threads/${T}/runs/${started.runId}`, undefined, { "last-event-id": "2" });
  await reattach.has((f) => f.data?.includes("Starting..."));
  out.add("cancel", await call("POST", `/instance-ai/chat/${T}/cancel`));
  out.add("run stall", await stall.done);
  out.add("re-attach after 2", await reattach.done);
  await t.idle();
  out.add("re-attach a finished run whole", await stream("GET", `/ag-ui/threads/${T}/runs/${started.runId}`).done);
  out.add("history", await call("GET", `/ag-ui/threads/${T}/messages`));
  await check("ag-ui", out.text());
});
