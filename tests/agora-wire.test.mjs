// Where agora's wire once contradicted its document, over HTTP on workerd:
// a send on a busy thread queues (agora's `auto`) instead of 409, and
// `interrupt: true` asks to interrupt; the routes mount under AGORA_PATH as
// under agora's `config.path`; and a route that reads no body takes `{}`,
// `null` or nothing, as a `fetch` with a JSON body sends it, on every
// protocol. (Frame order and cancel: tests/agora.test.mjs,
// tests/agora-seed.test.mjs, tests/agora-client.test.mjs.)
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, parseSse, client, newThread, until, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

let llm, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  worker = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

/** A raw request: the status, the JSON body when there is one. */
async function raw(base, method, path, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = body;
  }
  const resp = await fetch(base + path, init);
  const text = resp.headers.get("content-type")?.startsWith("text/event-stream") ? "" : await resp.text();
  await resp.body?.cancel().catch(() => {});
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: resp.status, json, text, headers: resp.headers };
}

/** A slow agora turn on a new thread, its stream left open: `{thread, runId, resp}`. */
async function busy(base = worker.url, prefix = "/agent") {
  const resp = await fetch(`${base}${prefix}/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message: "a long answer [[slow:150]]" }),
  });
  assert.equal(resp.status, 200);
  return { thread: resp.headers.get("x-agent-thread-id"), runId: resp.headers.get("x-agent-run-id"), resp };
}

describe("a send while a turn runs (agora's mode auto)", () => {
  test("no mode: queued, 202 in agora's shape; interrupt: true interrupts; reject and n8n's route keep 409", async () => {
    const b = await busy();
    const q = await raw(worker.url, "POST", "/agent/chat", JSON.stringify({ threadId: b.thread, message: "after you" }));
    assert.equal(q.status, 202, q.text);
    assert.deepEqual(
      { queued: q.json.queued, threadId: q.json.threadId, position: q.json.position, runId: q.json.runId },
      { queued: true, threadId: b.thread, position: 0, runId: undefined },
    );
    assert.deepEqual(q.json.queue.items.map((i) => [i.id, i.content]), [[q.json.messageId, "after you"]]);
    assert.equal(q.json.queue.paused, null);

    const rejected = await raw(worker.url, "POST", "/agent/chat", JSON.stringify({ threadId: b.thread, message: "no", mode: "reject" }));
    assert.deepEqual([rejected.status, rejected.json.code, rejected.json.error.code], [409, "run_active", "run_active"]);
    const n8n = await raw(worker.url, "POST", `/instance-ai/chat/${b.thread}`, JSON.stringify({ message: "n8n's way" }));
    assert.deepEqual([n8n.status, n8n.json.error.code], [409, "run_active"], "n8n's route keeps its 409");
    const bad = await raw(worker.url, "POST", "/agent/chat", JSON.stringify({ threadId: b.thread, message: "x", mode: "later" }));
    assert.deepEqual([bad.status, bad.json.error.code], [400, "invalid_mode"]);

    const now = await raw(worker.url, "POST", "/agent/chat", JSON.stringify({ threadId: b.thread, message: "right now", interrupt: true }));
    assert.equal(now.status, 202, now.text);
    assert.equal(now.json.interrupting, b.runId);
    const frames = parseSse(await new Response(b.resp.body).text());
    assert.equal(frames.at(-1).event, "done");
    assert.deepEqual(JSON.parse(frames.at(-2).data), { kind: "cancelled" });
    await until(async () => {
      const d = (await raw(worker.url, "GET", `/agent/threads/${b.thread}`)).json;
      return d.activeRunId === null && d.messages.filter((m) => m.role === "user").length === 3;
    }, { what: "both messages ran", timeoutMs: 15_000 });
    const users = (await raw(worker.url, "GET", `/agent/threads/${b.thread}`)).json.messages.filter((m) => m.role === "user").map((m) => m.content);
    assert.deepEqual(users, ["a long answer [[slow:150]]", "right now", "after you"], "the interrupting message runs first");
  });

  test("on an idle thread, interrupt: true just streams", async () => {
    const first = await fetch(`${worker.url}/agent/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "hi", interrupt: true }) });
    assert.equal(first.status, 200);
    assert.equal(parseSse(await first.text()).at(-1).event, "done");
  });
});

describe("AGORA_PATH mounts agora's routes elsewhere", () => {
  test("api/agent: the routes answer under /api/agent, and /agent is no route", async () => {
    const w = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", AGORA_PATH: "api/agent" } });
    try {
      const sent = await fetch(`${w.url}/api/agent/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "mounted" }) });
      assert.equal(sent.status, 200);
      const thread = sent.headers.get("x-agent-thread-id");
      const run = sent.headers.get("x-agent-run-id");
      assert.equal(parseSse(await sent.text()).at(-1).event, "done");
      const again = await fetch(`${w.url}/api/agent/chat/${encodeURIComponent(run)}/stream?after=0`);
      assert.equal(again.status, 200);
      assert.equal(parseSse(await again.text()).at(-1).event, "done");
      assert.equal((await raw(w.url, "GET", `/api/agent/threads/${thread}`)).json.threadId, thread);
      assert.ok(Array.isArray((await raw(w.url, "GET", "/api/agent/agents")).json));
      assert.equal((await raw(w.url, "GET", `/agent/threads/${thread}`)).status, 404);
      assert.equal((await raw(w.url, "GET", `/instance-ai/threads/${thread}/status`)).status, 200, "other protocols stay where they are");
    } finally {
      await w.stop();
    }
  });

  test("a path another protocol answers is refused at start, and `agent` applies", async () => {
    const w = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", AGORA_PATH: "v1" } });
    try {
      assert.ok(Array.isArray((await raw(w.url, "GET", "/agent/agents")).json), "agora's routes under /agent");
      await until(() => /AGORA_PATH/.test(w.stderr), { what: "the start-up warning", timeoutMs: 5000 });
    } finally {
      await w.stop();
    }
  });
});

describe("the persona catalog and threads/:id", () => {
  test("GET /agent/agents is the catalog; agents as a thread id is a thread, never the catalog", async () => {
    // agora registers its persona route before threads/:id so `:id` does not
    // capture it; here the catalog is its own path, and the router matches a
    // whole path: a thread called `agents` is a thread.
    const catalog = await raw(worker.url, "GET", "/agent/agents");
    assert.ok(Array.isArray(catalog.json), catalog.text);
    const thread = await raw(worker.url, "GET", "/agent/threads/agents");
    assert.deepEqual([thread.status, thread.json.error.code], [404, "thread_not_found"]);
  });
});

describe("routes that read no body take {}, null or nothing, on every protocol", () => {
  test("each body-less route answers the same to no body, `{}` and `null`", async () => {
    const thread = newThread("nobody");
    assert.equal((await api.chat(thread, "hello")).status, 200);
    await until(async () => (await api.status(thread)).json.hasActiveRun === false, { what: "the run ends" });
    const run = (await api.messages(thread)).json.messages.at(-1).runId;
    const routes = [
      ["POST", `/agent/threads/${thread}/queue/pause`],
      ["POST", `/agent/threads/${thread}/queue/resume`],
      ["DELETE", `/agent/threads/${thread}/queue`],
      ["POST", `/agent/chat/${run}/cancel`],
      ["POST", `/instance-ai/chat/${thread}/cancel`],
      ["POST", `/instance-ai/threads/${thread}/queue/pause`],
      ["POST", `/instance-ai/threads/${thread}/queue/resume`],
      ["POST", `/instance-ai/threads/${thread}/stream-token`],
      ["POST", `/agents/default/${thread}/abort`],
    ];
    const problems = [];
    for (const [method, path] of routes) {
      for (const body of [undefined, "", "{}", "null", " { } "]) {
        const r = await raw(worker.url, method, path, body);
        if (r.status >= 300) problems.push(`${method} ${path} with ${JSON.stringify(body)}: ${r.status} ${r.text}`);
      }
    }
    assert.deepEqual(problems, []);
    // agora's routes read nothing: a body with something in it is refused.
    const more = await raw(worker.url, "POST", `/agent/threads/${thread}/queue/pause`, JSON.stringify({ surprise: true }));
    assert.deepEqual([more.status, more.json.error.code], [400, "invalid_body"]);
    await sleep(10);
  });
});
