// Usage a team can watch: a thread's runs per model
// (GET /instance-ai/threads/:id/usage) and a caller's totals across their
// threads (GET /instance-ai/usage), matching what the model reported on each
// step (the fake model's usage chunks, as step-finish carries them) and the
// catalog's prices. Two callers under JWT authentication, kept apart.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until, hs256Jwt } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

const SECRET = "usage-secret-0123456789abcdef0123";
const token = (sub) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 600 });
const as = (sub) => ({ authorization: `Bearer ${token(sub)}` });
const MODELS = {
  default: "fast",
  models: {
    fast: { model: "fake-model", inputUsdPerMTok: 1, outputUsdPerMTok: 2 },
    big: { model: "fake-model" },
  },
};

let llm, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  worker = await startWorker({
    vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET, LLM_BASE_URL: llm.url, LLM_API_KEY: "k", LLM_MODELS: JSON.stringify(MODELS) },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

/** Sends as `who` and waits for the run to end; the step-finish events of the thread. */
async function turn(who, thread, message, extra = {}) {
  const sent = await api.call("POST", `/instance-ai/chat/${thread}`, { message, ...extra }, as(who));
  assert.equal(sent.status, 200, sent.text);
  await until(async () => !(await api.call("GET", `/instance-ai/threads/${thread}/status`, undefined, as(who))).json.hasActiveRun, {
    what: "the run to end",
  });
}

/** What the model reported, summed from the thread's step-finish events
 *  (the log's: the Instance AI route keeps them off), per model. */
async function reported(who, thread, runs) {
  const log = await until(async () => {
    const events = await (await fetch(`${worker.url}/v1/threads/${thread}?offset=-1`, { headers: as(who) })).json();
    return events.filter((e) => e.type === "run-finish").length === runs && events;
  }, { what: `${runs} runs in the log` });
  const out = {};
  for (const e of log.filter((e) => e.type === "step-finish")) {
    const m = (out[e.payload.model] ??= { inputTokens: 0, outputTokens: 0, costUsd: 0 });
    m.inputTokens += e.payload.usage.prompt_tokens;
    m.outputTokens += e.payload.usage.completion_tokens;
    m.costUsd += e.payload.costUsd ?? 0;
  }
  return out;
}

const close = (a, b) => Math.abs(a - b) < 1e-12;

describe("usage", () => {
  test("a thread's usage per model matches what the model reported, with cost where the catalog prices it", async () => {
    const thread = newThread("use");
    await turn("alice", thread, "first question");
    await turn("alice", thread, "a longer second question, with more words in it than the first");
    await turn("alice", thread, "third, on the big model", { model: "big" });
    const want = await reported("alice", thread, 3);
    assert.deepEqual(Object.keys(want).sort(), ["big", "fast"]);
    const got = await api.call("GET", `/instance-ai/threads/${thread}/usage`, undefined, as("alice"));
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.threadId, thread);
    const byModel = Object.fromEntries(got.json.models.map((m) => [m.model, m]));
    assert.equal(byModel.fast.runs, 2);
    assert.equal(byModel.big.runs, 1);
    for (const model of ["fast", "big"]) {
      assert.equal(byModel[model].inputTokens, want[model].inputTokens, model);
      assert.equal(byModel[model].outputTokens, want[model].outputTokens, model);
      assert.equal(byModel[model].totalTokens, want[model].inputTokens + want[model].outputTokens, model);
    }
    assert.ok(byModel.fast.costUsd > 0);
    assert.ok(close(byModel.fast.costUsd, (want.fast.inputTokens * 1 + want.fast.outputTokens * 2) / 1e6), JSON.stringify(byModel.fast));
    assert.ok(close(byModel.fast.costUsd, want.fast.costUsd), "the same as step-finish's costUsd");
    assert.equal(byModel.big.costUsd, undefined, "big has no prices");
    assert.equal(got.json.total.runs, 3);
    assert.equal(got.json.total.inputTokens, want.fast.inputTokens + want.big.inputTokens);
  });

  test("a caller's totals sum their threads and no one else's; only the owner reads a thread's usage", async () => {
    const [a, b, c] = [newThread("use-a"), newThread("use-b"), newThread("use-c")];
    const before = (await api.call("GET", "/instance-ai/usage", undefined, as("carol"))).json;
    assert.deepEqual(before.total, { runs: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0 });
    assert.deepEqual(before.models, []);
    await turn("carol", a, "carol's first thread");
    await turn("carol", b, "carol's second thread", { model: "big" });
    await turn("dave", c, "dave's thread");
    const want = [await reported("carol", a, 1), await reported("carol", b, 1)];
    const sum = (model, k) => want.reduce((n, w) => n + (w[model]?.[k] ?? 0), 0);
    let totals;
    await until(async () => {
      totals = (await api.call("GET", "/instance-ai/usage", undefined, as("carol"))).json;
      return totals.total.runs === 2;
    }, { what: "carol's turns to reach her directory" });
    const byModel = Object.fromEntries(totals.models.map((m) => [m.model, m]));
    assert.equal(byModel.fast.inputTokens, sum("fast", "inputTokens"));
    assert.equal(byModel.fast.outputTokens, sum("fast", "outputTokens"));
    assert.equal(byModel.big.inputTokens, sum("big", "inputTokens"));
    assert.ok(close(byModel.fast.costUsd, sum("fast", "costUsd")));
    assert.match(totals.since, /^\d{4}-\d\d-\d\dT/);
    // Dave's turn is his.
    await until(async () => (await api.call("GET", "/instance-ai/usage", undefined, as("dave"))).json.total.runs === 1, { what: "dave's turn" });
    // A thread's usage is its owner's.
    const other = await api.call("GET", `/instance-ai/threads/${a}/usage`, undefined, as("dave"));
    assert.ok(other.status === 403 || other.status === 404, other.text);
    const anon = await api.call("GET", "/instance-ai/usage");
    assert.equal(anon.status, 401);
  });

  test("days out of range is a clear 400", async () => {
    for (const days of ["0", "32", "x"]) {
      const r = await api.call("GET", `/instance-ai/usage?days=${days}`, undefined, as("alice"));
      assert.equal(r.status, 400, days);
      assert.equal(r.json.error.code, "invalid_query");
    }
  });
});
