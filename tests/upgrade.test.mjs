// Upgrades that lose nothing: the previous release (local/RELEASE, built once
// by local/baseline.sh) writes every kind of state to a persisted folder;
// today's build then wakes the same objects and must answer every route as
// the release did, continue ids and offsets, decide the pending
// confirmation, and run the queue in order.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { startWorker, startWebhook, client, newThread, tempDir, until, startExternalRun, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let release, dir, llm, tools, hook;

before(async () => {
  release = execFileSync("sh", ["local/baseline.sh"], { encoding: "utf8" }).trim();
  dir = tempDir("threadline-upgrade-");
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  hook = await startWebhook();
});
after(async () => {
  await llm?.close();
  await tools?.close();
  await hook?.close();
});

const common = () => ({
  AUTH_MODE: "dev",
  STREAMS_AUTH: "none",
  LLM_BASE_URL: llm.url,
  LLM_API_KEY: "k",
  TOOLS: JSON.stringify(tools.declarations),
  APPROVAL_POLICY: JSON.stringify({ "delete-note": { ttlMs: 3_600_000 } }),
});
/** The built-in agent drives new runs. */
const builtin = () => common();
/** An external agent drives new runs (built-in runs already stored keep theirs). */
const external = () => ({ ...common(), AGENT_WEBHOOK_URL: hook.url });

/** The raw SSE bytes of a thread's log from id 0 up to its last id. */
async function replay(api, base, thread) {
  const last = (await api.stats(thread)).json.lastEventId;
  const sse = api.events(thread);
  await sse.ready;
  await until(() => sse.durable().at(-1)?.id === last, { timeoutMs: 5000, what: `replay of ${thread} to ${last}` });
  sse.close();
  const end = sse.raw.lastIndexOf("\n\n");
  return sse.raw
    .slice(0, end + 2)
    .split("\n\n")
    .filter((f) => f.includes("id: "))
    .join("\n\n");
}

/**
 * What changed on purpose since the release, so n8n's editor folds the
 * Instance AI views as n8n's own reducer does (docs/protocols/instance-ai.md,
 * "The tree"; docs/upgrades.md): a user message names no run, times are ISO
 * 8601, and a tool call's request leaves out the call's own fields. And
 * `totalRuns` counts the runs of the active path, the pages there are
 * (docs/branches.md): an answer a regenerate replaced before is on none.
 */
function changedOnPurpose(now, then, where) {
  if (/(^|\.)totalRuns$/.test(where) && typeof then === "number" && now < then) return true;
  if (/messages\[\d+\]\.runId$/.test(where) && now === undefined && !where.startsWith("detail")) return true;
  if (/\.(createdAt|startedAt|completedAt)$/.test(where) && typeof then === "number" && now === new Date(then).toISOString()) return true;
  if (/\.confirmation\.(toolCallId|toolName|args)$/.test(where) && now === undefined) return true;
  return false;
}

/**
 * agora's thread detail and thread list changed shape on purpose, so agora's
 * own client reads them (docs/protocols/agora.md, "The thread detail"): a
 * turn is one assistant row per model step, usage is `{inputTokens,
 * outputTokens}`, the queue is agora's `{items: [{id, content}], paused:
 * null | {reason, at}}`, the list a bare array. What they say is kept: the
 * same user messages, each turn's text and tool calls, the same queue.
 */
function assertAgoraKept(now, then, where) {
  const { messages, queue, ...rest } = then;
  assertKept({ ...now, messages: undefined, queue: undefined }, rest, where);
  const users = (d) => d.messages.filter((m) => m.role === "user").map((m) => m.content);
  assert.deepEqual(users(now), users(then), `${where}: user messages`);
  const turn = (d, run) => d.messages.filter((m) => m.role === "assistant" && m.runId === run);
  for (const old of then.messages.filter((m) => m.role === "assistant")) {
    const rows = turn(now, old.runId);
    assert.equal(rows.map((r) => r.content).join(""), old.content, `${where}: the text of ${old.runId}`);
    // Every call it showed, as it showed it (a call still waiting is shown now too).
    const calls = rows.flatMap((r) => (r.toolCalls ?? []).map((c) => JSON.stringify([c.id, c.name, c.status])));
    for (const c of old.toolCalls ?? []) assert.ok(calls.includes(JSON.stringify([c.id, c.name, c.status])), `${where}: the call ${c.id} of ${old.runId}`);
    assert.equal(rows.at(-1).status, old.status, `${where}: the status of ${old.runId}`);
  }
  assert.deepEqual(now.queue.items.map((i) => [i.id, i.content]), queue.items.map((i) => [i.messageId, i.message]), `${where}: the queue`);
  assert.equal(now.queue.paused !== null, queue.paused !== false, `${where}: paused`);
}

/** Every field the release answered is answered the same (newer code may add fields). */
function assertKept(now, then, where) {
  if (changedOnPurpose(now, then, where)) return;
  if (then === null || typeof then !== "object") return assert.deepEqual(now, then, where);
  assert.equal(typeof now, "object", where);
  if (Array.isArray(then)) {
    assert.ok(Array.isArray(now), where);
    assert.equal(now.length, then.length, `${where}: length`);
    then.forEach((v, i) => assertKept(now[i], v, `${where}[${i}]`));
    return;
  }
  for (const [k, v] of Object.entries(then)) assertKept(now[k], v, `${where}.${k}`);
}

const streamRead = async (base, name, offset = "-1") => {
  const r = await fetch(`${base}/v1/stream/${name}?offset=${offset}`);
  return { status: r.status, body: await r.text(), next: r.headers.get("stream-next-offset"), closed: r.headers.get("stream-closed") };
};

test("state written by the previous release reads the same, and everything goes on", async () => {
  const t = {
    done: newThread("up-done"),
    suspended: newThread("up-susp"),
    session: newThread("up-sess"),
    queued: newThread("up-queue"),
    running: newThread("up-run"),
    regen: newThread("up-regen"),
  };
  // 1. The release, built-in agent: finished, suspended (a pending
  //    confirmation with a TTL and the run's checkpoint), session approval.
  let w = await startWorker({ script: release, persist: dir, vars: builtin() });
  let api = client(w.url);
  try {
    assert.equal((await api.chat(t.done, "hello [[reason]]")).status, 200);
    await until(async () => (await api.status(t.done)).json.hasActiveRun === false, { what: "the first run to finish" });
    // A conversation of before with an answer a regenerate replaced.
    for (const body of [{ message: "first" }, { message: "second" }, { regenerate: true }]) {
      assert.equal((await api.call("POST", `/instance-ai/chat/${t.regen}`, body)).status, 200);
      await until(async () => (await api.status(t.regen)).json.hasActiveRun === false, { what: "a turn of before to finish" });
    }
    assert.equal((await api.chat(t.suspended, 'remove it [[tool:delete-note:{"id":"n1"}]]')).status, 200);
    await until(async () => (await api.status(t.suspended)).json.isSuspended, { what: "the run to wait for a person" });
    assert.equal((await api.chat(t.session, 'remove [[tool:delete-note:{"id":"s1"}]]')).status, 200);
    await until(async () => (await api.status(t.session)).json.isSuspended, { what: "the session run to wait" });
    const msgs = (await api.messages(t.session)).json.messages;
    const request = msgs[1].agentTree.toolCalls[0].confirmation.requestId;
    assert.equal((await api.call("POST", `/instance-ai/confirm/${request}`, { approved: true, scope: "session" })).status, 200);
    await until(async () => (await api.status(t.session)).json.hasActiveRun === false, { what: "the approved run to finish" });
  } finally {
    await w.stop();
  }
  // 2. The release, external agent: a paused queue behind a running run, a
  //    run left running, Durable Streams with a producer and a fork.
  w = await startWorker({ script: release, persist: dir, vars: external() });
  api = client(w.url);
  let queuedRun, running, streamsBefore;
  const before = {};
  let threadsBefore;
  try {
    queuedRun = await startExternalRun(api, hook, t.queued, "first");
    for (const m of ["second", "third"]) assert.equal((await api.chat(t.queued, m, { mode: "queue" })).status, 202);
    assert.equal((await api.call("POST", `/instance-ai/threads/${t.queued}/queue/pause`)).status, 200);
    running = await startExternalRun(api, hook, t.running, "keep going");
    const r = await api.publish(t.running, running.runId, running.token, [
      { type: "text-delta", agentId: "orchestrator", responseId: "s1", payload: { text: "partial answer" } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "tc1", toolName: "x", args: {} } },
    ]);
    assert.equal(r.status, 200);
    const put = await fetch(`${w.url}/v1/stream/up-${process.pid}`, { method: "PUT", headers: { "content-type": "text/plain" } });
    assert.equal(put.status, 201);
    const offsets = [];
    for (const [seq, text] of [[0, "one|"], [1, "two|"]]) {
      const a = await fetch(`${w.url}/v1/stream/up-${process.pid}`, {
        method: "POST",
        headers: { "content-type": "text/plain", "producer-id": "p1", "producer-epoch": "0", "producer-seq": String(seq) },
        body: text,
      });
      assert.ok(a.ok, `append ${seq}: ${a.status}`);
      offsets.push(a.headers.get("stream-next-offset"));
    }
    const mid = offsets[0];
    const fork = await fetch(`${w.url}/v1/stream/upf-${process.pid}`, {
      method: "PUT",
      headers: { "content-type": "text/plain", "stream-forked-from": `/v1/stream/up-${process.pid}`, "stream-fork-offset": mid },
    });
    assert.equal(fork.status, 201);
    streamsBefore = { source: await streamRead(w.url, `up-${process.pid}`), fork: await streamRead(w.url, `upf-${process.pid}`), mid };
    // Every read the release answers, to compare with today's build.
    for (const [k, thread] of Object.entries(t)) {
      before[k] = {
        messages: (await api.messages(thread)).json,
        status: (await api.status(thread)).json,
        queue: (await api.call("GET", `/instance-ai/threads/${thread}/queue`)).json,
        detail: (await api.call("GET", `/agent/threads/${thread}`)).json,
        replay: await replay(api, w.url, thread),
        log: (await api.call("GET", `/v1/threads/${thread}?offset=-1`)).json,
        lastEventId: (await api.stats(thread)).json.lastEventId,
      };
    }
    threadsBefore = (await api.call("GET", "/agent/threads")).json;
  } finally {
    await w.stop();
  }

  // 3. Today's build on the same folder.
  w = await startWorker({ persist: dir, vars: external() });
  api = client(w.url);
  try {
    for (const [k, thread] of Object.entries(t)) {
      const was = before[k];
      assertKept((await api.messages(thread)).json, was.messages, `${k} messages`);
      assertKept((await api.status(thread)).json, was.status, `${k} status`);
      assertKept((await api.call("GET", `/instance-ai/threads/${thread}/queue`)).json, was.queue, `${k} queue`);
      assertAgoraKept((await api.call("GET", `/agent/threads/${thread}`)).json, was.detail, `${k} detail`);
      // threadline's own kinds are kept off this route now.
      const ownKinds = /"type":"(step-start|step-finish|confirmation-settled)"/;
      const wasReplay = was.replay.split("\n\n").filter((f) => !ownKinds.test(f)).join("\n\n");
      assert.equal(await replay(api, w.url, thread), wasReplay, `${k}: the replay, byte for byte`);
      assertKept((await api.call("GET", `/v1/threads/${thread}?offset=-1`)).json, was.log, `${k} log as a stream`);
    }
    const listed = (await api.call("GET", "/agent/threads")).json;
    assert.deepEqual(
      listed.map((x) => [x.id, x.title]),
      threadsBefore.threads.map((x) => [x.threadId, x.title]),
      "the directory, as agora's bare list",
    );
    const source = await streamRead(w.url, `up-${process.pid}`);
    assert.deepEqual(source, streamsBefore.source, "a stream reads the same");
    assert.deepEqual(await streamRead(w.url, `upf-${process.pid}`), streamsBefore.fork, "its fork reads the same");
    assert.equal((await streamRead(w.url, `up-${process.pid}`, streamsBefore.mid)).body, "two|", "an old offset is still a position");

    // Ids continue on the running run, and it finishes.
    const more = await api.publish(t.running, running.runId, running.token, [
      { type: "tool-result", agentId: "orchestrator", payload: { toolCallId: "tc1", result: 1 } },
      { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
    ]);
    assert.equal(more.status, 200, more.text);
    assert.ok(more.json.lastEventId > before.running.lastEventId, "ids continue");
    const durable = (await (async () => {
      const sse = api.events(t.running);
      await sse.ready;
      await sse.waitFor((e) => e.type === "run-finish");
      sse.close();
      return sse.durable();
    })()).map((e) => e.id);
    assert.deepEqual(durable, durable.map((_, i) => i + 1), "no gap, no duplicate");

    // A conversation of before has one version of each message; it branches from here on.
    const regen = (await api.messages(t.regen)).json.messages;
    assert.deepEqual(regen.map((m) => m.content).filter((_, i) => i % 2 === 0), ["first", "second"]);
    assert.ok(regen.every((m) => m.branch === undefined), "one branch per message");
    const edit = await api.call("POST", `/instance-ai/chat/${t.regen}`, { message: "second, edited", editOf: regen[2].id });
    assert.equal(edit.status, 200, edit.text);
    // This build's agent is the webhook's: the edit's run is answered there.
    const signal = await hook.next((m) => m.type === "run" && m.runId === edit.json.runId);
    const done = [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }];
    assert.equal((await api.publish(t.regen, edit.json.runId, signal.publishToken, done)).status, 200);
    const edited = (await api.messages(t.regen)).json.messages;
    assert.deepEqual(edited.filter((m) => m.role === "user").map((m) => m.content), ["first", "second, edited"]);
    assert.deepEqual(edited[2].branch, { index: 1, count: 2, ids: [regen[2].id, edited[2].id] }, "the answer replaced before is no version");
    assert.equal((await api.call("POST", `/instance-ai/threads/${t.regen}/branch`, { messageId: regen[2].id })).json.leaf, regen[3].runId);

    // The pending confirmation is still decidable, and its run resumes
    // from the release's checkpoint.
    const msgs = (await api.messages(t.suspended)).json.messages;
    const rid = msgs[1].agentTree.toolCalls[0].confirmation.requestId;
    const ok = await api.call("POST", `/instance-ai/confirm/${rid}`, { approved: true });
    assert.equal(ok.status, 200, ok.text);
    await until(async () => (await api.status(t.suspended)).json.hasActiveRun === false, { timeoutMs: 8000, what: "the resumed run to finish" });
    const after = (await api.messages(t.suspended)).json.messages[1];
    assert.equal(after.status, "completed");
    assert.ok(after.agentTree.toolCalls[0].result, "the approved tool ran");
    // A conversation of before compacts (storage v11): its memory folds
    // into a summary marked on its last answer; its history is whole.
    const compact = await api.call("POST", `/instance-ai/threads/${t.suspended}/compact`);
    assert.equal(compact.status, 202, compact.text);
    await until(async () => (await api.messages(t.suspended)).json.messages.at(-1).contextCompacted, { timeoutMs: 8000, what: "the compaction of a thread of before" });
    assert.equal((await api.messages(t.suspended)).json.messages.length, msgs.length);

    // The queue resumes and runs in order.
    assert.equal((await api.call("POST", `/instance-ai/threads/${t.queued}/queue/resume`)).status, 200);
    const fin = await api.publish(t.queued, queuedRun.runId, queuedRun.token, [
      { type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } },
    ]);
    assert.equal(fin.status, 200);
    const second = await hook.next((m) => m.type === "run" && m.threadId === t.queued && m.message === "second");
    assert.equal(
      (await api.publish(t.queued, second.runId, second.publishToken, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }])).status,
      200,
    );
    await hook.next((m) => m.type === "run" && m.threadId === t.queued && m.message === "third");

    // The producer goes on where it was; a retry of an old batch is a duplicate.
    const append = (seq, body) =>
      fetch(`${w.url}/v1/stream/up-${process.pid}`, {
        method: "POST",
        headers: { "content-type": "text/plain", "producer-id": "p1", "producer-epoch": "0", "producer-seq": String(seq) },
        body,
      });
    assert.equal((await append(1, "two|")).status, 204, "a retried batch lands once");
    assert.ok((await append(2, "three|")).ok);
    assert.equal((await streamRead(w.url, `up-${process.pid}`)).body, "one|two|three|");
  } finally {
    await w.stop();
  }
});
