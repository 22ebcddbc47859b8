// n8n Instance AI's seed, the rules a line-by-line reading found untested
// (docs/protocols/instance-ai.md, "Conformance"): live-only frames, the rich
// confirmation fields, and cancel after a run completed.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, startExternalRun, client, newThread, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

let hook, worker, api, llm, builtin, b;

before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url } });
  api = client(worker.url);
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  builtin = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
  b = client(builtin.url);
});
after(async () => {
  await worker?.stop();
  await builtin?.stop();
  await hook?.close();
  await llm?.close();
});

const RICH = {
  requestId: "rich-1",
  toolCallId: "tc-rich",
  toolName: "setup-workflow",
  args: { workflowId: "wf-9" },
  severity: "info",
  message: "Set this workflow up?",
  inputType: "approval",
  introMessage: "A few things first.",
  credentialRequests: [{ credentialType: "slackApi", reason: "to post" }],
  credentialFlow: { stage: "finalize" },
  setupRequests: [{ node: "Slack", fields: ["channel"] }],
  workflowId: "wf-9",
  projectId: "p-1",
};

describe("Instance AI, seed lines the reading found untested", () => {
  test("filesystem-request (line 350): live only, with no id, and never replayed", async () => {
    const thread = newThread("fs");
    const run = await startExternalRun(api, hook, thread);
    const live = api.events(thread);
    await live.ready;
    await live.waitFor((e) => e.type === "run-start");
    const request = { requestId: "fs-1", operation: "read", args: { path: "/tmp/notes.md" } };
    const pub = await api.publish(thread, run.runId, run.token, [{ type: "filesystem-request", agentId: "orchestrator", payload: request }]);
    assert.equal(pub.status, 200, pub.text);
    const got = await live.waitFor((e) => e.type === "filesystem-request");
    assert.equal(got.id, undefined, "an ephemeral frame carries no id");
    assert.deepEqual(got.payload, request);
    live.close();
    const replay = api.events(thread);
    await replay.ready;
    await replay.waitFor((e) => e.type === "run-start");
    await sleep(200);
    assert.equal(replay.events().some((e) => e.type === "filesystem-request"), false, "a replay has only durable facts");
    replay.close();
  });

  test("the rich confirmation fields (lines 213-225) round-trip through publish, replay and the messages view", async () => {
    const thread = newThread("rich");
    const run = await startExternalRun(api, hook, thread);
    const pub = await api.publish(thread, run.runId, run.token, [
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "tc-rich", toolName: "setup-workflow", args: { workflowId: "wf-9" } } },
      { type: "confirmation-request", agentId: "orchestrator", payload: RICH },
    ]);
    assert.equal(pub.status, 200, pub.text);
    const replay = api.events(thread);
    await replay.ready;
    const stored = await replay.waitFor((e) => e.type === "confirmation-request");
    replay.close();
    for (const field of ["introMessage", "credentialRequests", "credentialFlow", "setupRequests", "workflowId", "projectId"]) {
      assert.deepEqual(stored.payload[field], RICH[field], `replayed ${field}`);
    }
    const messages = await api.messages(thread);
    const confirmation = messages.json.messages[1].agentTree.toolCalls[0].confirmation;
    for (const field of ["introMessage", "credentialRequests", "credentialFlow", "setupRequests", "workflowId", "projectId"]) {
      assert.deepEqual(confirmation[field], RICH[field], `messages view ${field}`);
    }
  });

  test("domainAccess (line 225) round-trips through publish, replay and the messages view", async () => {
    const thread = newThread("dom");
    const run = await startExternalRun(api, hook, thread);
    const request = {
      requestId: "dom-1",
      toolCallId: "tc-dom",
      toolName: "fetch-page",
      args: { url: "https://example.com/a" },
      severity: "warning",
      message: "Allow example.com?",
      domainAccess: { url: "https://example.com/a", host: "example.com" },
    };
    const pub = await api.publish(thread, run.runId, run.token, [
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "tc-dom", toolName: "fetch-page", args: request.args } },
      { type: "confirmation-request", agentId: "orchestrator", payload: request },
    ]);
    assert.equal(pub.status, 200, pub.text);
    const replay = api.events(thread);
    await replay.ready;
    const stored = await replay.waitFor((e) => e.type === "confirmation-request");
    replay.close();
    assert.deepEqual(stored.payload.domainAccess, request.domainAccess);
    const view = (await api.messages(thread)).json.messages[1].agentTree.toolCalls[0].confirmation;
    assert.deepEqual(view.domainAccess, request.domainAccess);
  });

  test("cancel after a run completed (lines 358-359) is a no-op: its background agents go on", async () => {
    const thread = newThread("bg");
    const sent = await b.chat(thread, "research this [[spawn-bg]] [[slow:300]]");
    assert.equal(sent.status, 200, sent.text);
    await until(async () => (await b.status(thread)).json.hasActiveRun === false, { timeoutMs: 10_000, what: "the run completes" });
    const running = (await b.status(thread)).json.backgroundTasks;
    assert.equal(running.length, 1, JSON.stringify(running));
    const cancelled = await b.cancel(thread);
    assert.deepEqual([cancelled.status, cancelled.json.cancelled], [200, false]);
    await sleep(100);
    assert.equal((await b.status(thread)).json.backgroundTasks.length, 1, "the background agent was not stopped");
    await until(async () => (await b.status(thread)).json.backgroundTasks.length === 0, { timeoutMs: 10_000, what: "it finishes on its own" });
    const log = await b.messages(thread);
    const child = log.json.messages[1].agentTree.children[0];
    assert.equal(child.status, "completed");
  });

  test("tasks-update (lines 231-241) is emitted in the shape it was published in, live and replayed", async () => {
    const thread = newThread("tasks");
    const run = await startExternalRun(api, hook, thread);
    const flat = {
      tasks: [
        { id: "t1", description: "Build weather workflow", status: "completed" },
        { id: "t2", description: "Set up Slack credential", status: "in_progress" },
        { id: "t3", description: "Test end-to-end", status: "pending" },
      ],
    };
    const nested = { tasks: { tasks: [{ id: "t1", description: "Plan", status: "done" }] } };
    const live = api.events(thread);
    await live.ready;
    await live.waitFor((e) => e.type === "run-start");
    assert.equal((await api.publish(thread, run.runId, run.token, [{ type: "tasks-update", agentId: "orchestrator", payload: flat }])).status, 200);
    assert.deepEqual((await live.waitFor((e) => e.type === "tasks-update")).payload, flat, "the seed's shape and statuses, as published");
    const view = (await api.messages(thread)).json.messages[1].agentTree;
    assert.deepEqual(view.tasks, flat.tasks, "the messages view holds the list as published");
    assert.equal((await api.publish(thread, run.runId, run.token, [{ type: "tasks-update", agentId: "orchestrator", payload: nested }])).status, 200);
    await until(() => live.events().filter((e) => e.type === "tasks-update").length === 2, { what: "the second update" });
    assert.deepEqual(live.events().filter((e) => e.type === "tasks-update")[1].payload, nested);
    live.close();
    const replay = api.events(thread);
    await replay.ready;
    await until(() => replay.durable().filter((e) => e.type === "tasks-update").length === 2, { what: "the replay" });
    assert.deepEqual(replay.durable().filter((e) => e.type === "tasks-update").map((e) => e.payload), [flat, nested]);
    replay.close();
    const bad = await api.publish(thread, run.runId, run.token, [{ type: "tasks-update", agentId: "orchestrator", payload: { tasks: [{ id: "x", description: "d", status: "weird" }] } }]);
    assert.equal(bad.status, 400);
  });

  test("run-sync (line 350): a client joining a live run gets its state in one id-less frame after the replay", async () => {
    const thread = newThread("sync");
    const run = await startExternalRun(api, hook, thread);
    await api.publish(thread, run.runId, run.token, [
      { type: "text-delta", agentId: "orchestrator", payload: { text: "Hel" } },
      { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "c1", toolName: "lookup", args: { q: 1 } } },
    ]);
    const sse = api.events(thread);
    await sse.ready;
    await until(() => sse.frames().some((f) => f.event === "run-sync"), { what: "the run-sync frame" });
    const frames = sse.frames();
    const at = frames.findIndex((f) => f.event === "run-sync");
    const sync = frames[at];
    assert.equal(sync.id, undefined, "live-only: no id");
    assert.ok(frames.slice(0, at).every((f) => f.id !== undefined), "after the replay of durable facts");
    const data = JSON.parse(sync.data);
    assert.equal(data.runId, run.runId);
    assert.deepEqual(data.runIds, [run.runId]);
    assert.equal(data.status, "active");
    assert.deepEqual(data.backgroundTasks, []);
    assert.equal(data.agentTree.agentId, "orchestrator");
    assert.equal(data.agentTree.textContent, "Hel");
    assert.equal(data.agentTree.toolCalls[0].toolCallId, "c1");
    assert.equal(data.agentTree.toolCalls[0].isLoading, true);
    sse.close();
    await api.publish(thread, run.runId, run.token, [{ type: "run-finish", agentId: "orchestrator", payload: { status: "completed" } }]);
    const after = api.events(thread);
    await after.ready;
    await after.waitFor((e) => e.type === "run-finish");
    await sleep(200);
    assert.equal(after.frames().some((f) => f.event === "run-sync"), false, "no run, no run-sync");
    after.close();
  });
});
