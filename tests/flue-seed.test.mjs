// Flue's routes and SSE rules over threadline's thread views (docs/protocols/durable-streams.md):
// agent instances by name and id, a plain agent GET as the history view,
// workflow runs by run id, and idle SSE connections kept with `: heartbeat`.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, openSse, newThread, sleep, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

let llm, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", SSE_PING_MS: "300", AGENTS: JSON.stringify({ helper: { label: "Helper" } }) },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

/** A finished run on a new thread, as agent `agent` (none: the default). */
async function finishedRun(agent) {
  const thread = newThread("flue");
  const r = await api.chat(thread, "hello flue", agent ? { agent } : {});
  assert.equal(r.status, 200, r.text);
  await until(async () => (await api.status(thread)).json.hasActiveRun === false, { what: "the run ends" });
  return { thread, run: r.json.runId };
}

describe("Flue's routes", () => {
  test("GET /agents/:name/:id is the history view of the thread the agent serves; other names are 404", async () => {
    const { thread } = await finishedRun();
    const plain = await api.call("GET", `/agents/default/${thread}`);
    assert.equal(plain.status, 200, plain.text);
    const history = await api.call("GET", `/v1/threads/${thread}?view=history`);
    assert.deepEqual(plain.json, history.json, "a plain agent GET is view=history");
    assert.equal(plain.headers.get("stream-next-offset"), plain.json.offset);
    assert.equal(plain.headers.get("stream-up-to-date"), "true");
    const head = await fetch(`${worker.url}/agents/default/${thread}`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("stream-next-offset"), plain.json.offset);
    assert.equal((await head.text()).length, 0);
    assert.equal(plain.json.v, 1, "a FlueConversationSnapshot");
    assert.equal(plain.headers.get("cache-control"), "no-store");
    const updates = await api.call("GET", `/agents/default/${thread}?view=updates&offset=-1`);
    assert.equal(updates.status, 200);
    assert.ok(Array.isArray(updates.json) && updates.json.some((c) => c.type === "submission-settled"));
    assert.ok(!updates.json.some((c) => c.type === "run-finish"), "the canonical records are never on the wire");
    assert.equal(updates.headers.get("cache-control"), "no-store");
    assert.equal((await api.call("GET", `/agents/default/${thread}?view=history&tail=5`)).status, 400, "history refuses tail");
    assert.equal((await api.call("GET", `/agents/default/${thread}?view=updates&offset=-1&tail=5`)).status, 400, "updates refuse tail");
    assert.equal((await api.call("GET", `/agents/helper/${thread}`)).status, 404, "an agent that does not serve it");
    const helped = await finishedRun("helper");
    assert.equal((await api.call("GET", `/agents/helper/${helped.thread}`)).status, 200);
    assert.equal((await api.call("GET", `/agents/default/${helped.thread}`)).status, 404);
  });

  test("GET /runs/:runId reads the run's events as /v1/runs/:runId does, each versioned, with Flue's text events", async () => {
    const { thread, run } = await finishedRun();
    const flue = await api.call("GET", `/runs/${encodeURIComponent(run)}?offset=-1`);
    const v1 = await api.call("GET", `/v1/runs/${encodeURIComponent(run)}?offset=-1`);
    assert.equal(flue.status, 200, flue.text);
    assert.ok(flue.json.every((e) => e.v === 3), "each workflow-run event carries its version");
    const flueText = (events) => events.filter((e) => e.type === "text_delta").map((e) => e.text).join("");
    const own = flue.json.filter((e) => e.type !== "text_delta" && e.type !== "thinking_delta");
    assert.deepEqual(own.map(({ v, ...e }) => e), v1.json, "the same events as /v1/runs/:runId, and Flue's text events");
    // Each block is followed by Flue's `text_delta` of what it adds: the run's text folds from them.
    const answer = v1.json.filter((e) => e.type === "text-block" && e.agentId === "orchestrator").at(-1).payload.text;
    assert.equal(flueText(flue.json), answer);
    assert.equal(flue.headers.get("stream-closed"), "true");
    assert.equal(flue.headers.get("cache-control"), "no-store");
    // From any offset, what follows adds only the text the reader did not have:
    // a suffix of the answer, shorter the later the offset, empty at the end.
    const gen = flue.headers.get("stream-next-offset").split("_")[0];
    const records = (await api.call("GET", `/v1/threads/${thread}?offset=-1`)).json.length;
    let last = answer.length;
    for (let seq = 1; seq <= records; seq++) {
      const from = `${gen}_${String(seq).padStart(16, "0")}`;
      const after = flueText((await api.call("GET", `/runs/${encodeURIComponent(run)}?offset=${from}`)).json);
      assert.ok(answer.endsWith(after) && after.length <= last, `from ${seq}: ${JSON.stringify(after)}`);
      last = after.length;
    }
    assert.equal(last, 0);
  });

  test("an offset the conversation no longer serves is 416 on Flue's route (its clients read again), 400/410 on /v1", async () => {
    const { thread } = await finishedRun();
    const head = (await api.call("GET", `/agents/default/${thread}`)).json.offset;
    const [gen] = head.split("_");
    const past = `${gen}_${String(999999).padStart(16, "0")}`;
    const other = `${String((Number(gen) + 1) % 1e16).padStart(16, "0")}_0000000000000001`;
    for (const [offset, v1] of [[past, [400, "invalid_offset"]], [other, [410, "stale_offset"]]]) {
      const flue = await api.call("GET", `/agents/default/${thread}?view=updates&offset=${offset}`);
      assert.deepEqual([flue.status, flue.json.error.code], [416, "stream_offset_gone"], offset);
      const own = await api.call("GET", `/v1/threads/${thread}?view=updates&offset=${offset}`);
      assert.deepEqual([own.status, own.json.error.code], v1, offset);
    }
    const bad = await api.call("GET", `/agents/default/${thread}?view=updates&offset=nonsense`);
    assert.deepEqual([bad.status, bad.json.error.code], [400, "invalid_offset"], "a malformed offset is still bad input");
  });

  test("an idle SSE view sends `: heartbeat` comments, not control frames", async () => {
    const { thread } = await finishedRun();
    const head = await api.call("GET", `/v1/threads/${thread}?offset=-1`);
    const at = head.headers.get("stream-next-offset");
    const sse = openSse(`${worker.url}/v1/threads/${thread}?offset=${at}&live=sse`);
    await sse.ready;
    assert.equal(sse.headers.get("cache-control"), "no-cache");
    await sleep(1200);
    const frames = sse.frames();
    sse.close();
    assert.ok(frames.filter((f) => f.comments.includes("heartbeat")).length >= 2, JSON.stringify(frames));
    assert.equal(frames.filter((f) => f.event === "control").length, 1, "the first position only, then heartbeats");
  });

  test("the Flue view's SSE (view=updates&live=sse) is no-cache and idles on `: heartbeat` comments", async () => {
    const { thread } = await finishedRun();
    const h = await fetch(`${worker.url}/agents/default/${thread}?view=history`);
    const at = (await h.json()).offset;
    const sse = openSse(`${worker.url}/agents/default/${thread}?view=updates&offset=${at}&live=sse`);
    await sse.ready;
    assert.equal(sse.headers.get("cache-control"), "no-cache");
    await sleep(1200);
    const frames = sse.frames();
    sse.close();
    assert.ok(frames.filter((f) => f.comments.includes("heartbeat")).length >= 2, JSON.stringify(frames));
    assert.equal(frames.filter((f) => f.event === "data").length, 0, "nothing happened, nothing sent");
  });

  test("catch-up reads carry an ETag: If-None-Match while nothing was stored is 304 without a body", async () => {
    const { thread, run: runId } = await finishedRun();
    for (const q of ["", "?view=updates&offset=-1"]) {
      const first = await fetch(`${worker.url}/agents/default/${thread}${q}`);
      const tag = first.headers.get("etag");
      assert.ok(tag, `an ETag on ${q || "history"}`);
      await first.text();
      const again = await fetch(`${worker.url}/agents/default/${thread}${q}`, { headers: { "if-none-match": tag } });
      assert.equal(again.status, 304, q);
      assert.equal(again.headers.get("stream-next-offset"), first.headers.get("stream-next-offset"));
      assert.equal((await again.text()).length, 0);
    }
    const tag = (await fetch(`${worker.url}/agents/default/${thread}`)).headers.get("etag");
    const r = await api.chat(thread, "more");
    await until(async () => (await api.status(thread)).json.hasActiveRun === false, { what: "the run ends" });
    assert.ok(r.status === 200);
    const changed = await fetch(`${worker.url}/agents/default/${thread}`, { headers: { "if-none-match": tag } });
    assert.equal(changed.status, 200, "a log that grew answers anew");
    assert.notEqual(changed.headers.get("etag"), tag);
    // A run's catch-up read, the same rule.
    const run = await fetch(`${worker.url}/runs/${encodeURIComponent(runId)}?offset=-1`);
    const runTag = run.headers.get("etag");
    assert.ok(runTag, "an ETag on a run read");
    await run.text();
    const same = await fetch(`${worker.url}/runs/${encodeURIComponent(runId)}?offset=-1`, { headers: { "if-none-match": runTag } });
    assert.equal(same.status, 304);
    assert.equal(same.headers.get("stream-next-offset"), run.headers.get("stream-next-offset"));
    assert.equal((await same.text()).length, 0);
  });
});
