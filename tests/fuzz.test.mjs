// Fuzzing over HTTP: malformed JSON, wrong types, huge and empty bodies, bad
// cursors, bad headers and odd paths. No 5xx, no crash, every refusal a JSON
// error with a code, and a thread's log byte-identical before and after.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, startWebhook, client, newThread, sleep } from "./support/harness.mjs";
import { rng } from "./support/scenarios.mjs";

let hook, worker, api, thread, runId, token;

before(async () => {
  hook = await startWebhook();
  worker = await startWorker({ vars: { AGENT_WEBHOOK_URL: hook.url } });
  api = client(worker.url);
  thread = newThread("fz");
  runId = (await api.chat(thread, "the fuzz target")).json.runId;
  token = (await hook.next((m) => m.type === "run" && m.runId === runId)).publishToken;
  await api.publish(thread, runId, token, [
    { type: "text-delta", agentId: "orchestrator", responseId: "a", payload: { text: "Some text" } },
    { type: "tool-call", agentId: "orchestrator", payload: { toolCallId: "t1", toolName: "x", args: { q: 1 } } },
  ]);
});
after(async () => {
  await worker?.stop();
  await hook?.close();
});

/** The thread's durable log as its replay bytes. */
async function logBytes() {
  const sse = api.events(thread);
  await sse.ready;
  const last = (await api.stats(thread)).json.lastEventId;
  await sse.waitFor((e) => e.id === last);
  sse.close();
  return sse.frames().filter((f) => f.id !== undefined).map((f) => `id: ${f.id}\ndata: ${f.data}`).join("\n\n");
}

test("500 malformed requests: no 5xx, JSON errors, the log unchanged", async () => {
  const random = rng(20261130);
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const junk = () => pick(["", "x", "%00", "..", "%2e%2e", "a".repeat(300), "é中", "t.1", "-", "__proto__", "a/b", "%ff"]);
  const other = newThread("fz-other");
  const paths = () =>
    pick([
      `/instance-ai/chat/${thread}`,
      `/instance-ai/chat/${junk()}`,
      `/instance-ai/events/${thread}?lastEventId=${pick(["-1", "abc", "1e9", "99999999999999999", "", "0x10", " 3"])}`,
      `/instance-ai/events/${junk()}`,
      `/instance-ai/threads/${thread}/runs/${runId}/events`,
      `/instance-ai/threads/${thread}/runs/${junk()}/events`,
      `/instance-ai/threads/${thread}/messages?limit=${pick(["-1", "x", "1000000", ""])}&page=${pick(["-2", "y", "1e3"])}`,
      `/instance-ai/threads/${thread}/status/${junk()}`,
      `/instance-ai/threads/${thread}/queue/${junk()}`,
      `/instance-ai/threads/${thread}/queue/${junk()}/move`,
      `/instance-ai/confirm/${pick([`${thread}.${junk()}`, junk(), `${thread}.`, "."])}`,
      `/agent/chat/${junk()}/stream?after=${pick(["-1", "x", ""])}`,
      `/agent/threads/${junk()}`,
      `/agent/tool-call/${pick(["approve", "reject", "maybe"])}`,
      `//instance-ai//chat//${thread}`,
      `/${junk()}/${junk()}`,
      `/instance-ai/threads/${other}/stream-token`,
      "/",
      "/" + "x/".repeat(200),
    ]);
  const deep = "[".repeat(5000) + "]".repeat(5000);
  const bodies = () =>
    pick([
      undefined,
      "",
      "{",
      "null",
      "[]",
      "42",
      '"str"',
      deep,
      JSON.stringify({ message: pick([null, 1, [], {}, "", " ", "x".repeat(40000)]) }),
      JSON.stringify({ message: "hi", mode: pick(["later", 1, null]) }),
      JSON.stringify({ message: "hi", model: pick([1, "nope", {}]) }),
      JSON.stringify([{ type: pick(["nope", "run-start", "text-block", 1]), agentId: pick(["", 1, "a"]), payload: pick([1, [], "s"]) }]),
      JSON.stringify({ events: "not an array" }),
      JSON.stringify({ approved: pick(["yes", 1, null]), scope: pick(["ever", 2]) }),
      JSON.stringify({ toolCallId: pick([1, null, "t1"]), via: "x".repeat(100) }),
      JSON.stringify({ position: pick([-1, "0", 1.5]) }),
      "x".repeat(1_200_000),
    ]);
  const methods = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD"];
  const before = await logBytes();
  let count = 0;
  for (let i = 0; i < 500; i++) {
    const method = pick(methods);
    const path = paths();
    // Valid destructive requests on the target are not fuzz: keep them out.
    if (method === "DELETE" && path === `/instance-ai/threads/${thread}`) continue;
    if (path.endsWith(`/chat/${thread}/cancel`)) continue;
    const headers = {};
    if (random() < 0.3) headers["last-event-id"] = pick(["-5", "abc", "1.5", "", "9".repeat(30)]);
    if (random() < 0.3) headers.authorization = pick(["Bearer", "Bearer x", "Basic zzz", `Bearer ${token}x`, `Bearer ${token}`]);
    if (random() < 0.3) headers["content-type"] = pick(["text/plain", "application/json; charset=utf-16", "multipart/form-data"]);
    const body = method === "GET" || method === "HEAD" ? undefined : bodies();
    const ac = new AbortController();
    const resp = await fetch(worker.url + path, { method, headers, body, signal: ac.signal }).catch((e) => ({ error: e }));
    assert.ok(!resp.error, `${method} ${path}: ${resp.error}`);
    if (resp.status >= 500) assert.fail(`${method} ${path} → ${resp.status}: ${await resp.text()}`);
    if (resp.headers.get("content-type") === "text/event-stream") {
      ac.abort();
    } else if (method !== "HEAD" && resp.status >= 400) {
      const text = await resp.text();
      const json = JSON.parse(text);
      assert.equal(typeof json.error.code, "string", `${method} ${path}: ${text}`);
      assert.equal(typeof json.error.message, "string");
    } else {
      await resp.arrayBuffer();
    }
    count++;
  }
  assert.ok(count > 400);
  await sleep(200);
  assert.equal(await logBytes(), before, "the thread's log is byte-identical");
  assert.equal((await api.status(thread)).json.runId, runId, "its run is untouched");
});
