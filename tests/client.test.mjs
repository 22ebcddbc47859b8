// The TypeScript client (client/dist) against the real Worker on workerd:
// session restore, stream tokens under JWT authentication, reconnects in the
// middle of a long answer, and the client's trees equal to the server's fold.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startWorker, newThread, until, jwtFor } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";
import { ThreadlineClient, ThreadSession, ThreadlineError } from "../client/dist/index.js";

const SECRET = "client-test-secret-0123456789abcdef0123";
const jwt = (sub) => jwtFor(SECRET, sub);

let llm, tools, worker;
before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 2 });
  tools = await startDemoTools();
  worker = await startWorker({
    vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET, LLM_BASE_URL: llm.url, LLM_API_KEY: "k", TOOLS: JSON.stringify(tools.declarations) },
  });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
  await tools?.close();
});

const clientFor = (sub) => new ThreadlineClient({ baseUrl: worker.url, headers: () => ({ authorization: `Bearer ${jwt(sub)}` }) });

/** The trees the server folds, by run id. */
async function serverTrees(c, thread) {
  const page = await c.messages(thread);
  return Object.fromEntries(page.messages.filter((m) => m.role === "assistant").map((m) => [m.runId, m.agentTree]));
}
const sessionTrees = (s) => Object.fromEntries(s.turns.map((t) => [t.runId, t.tree]));
const settled = (s, runs) => s.turns.length === runs && s.turns.every((t) => !t.running);

describe("the TypeScript client on the real Worker", () => {
  test("a session with stream tokens follows runs, and its trees are the server's", async () => {
    const c = clientFor("carol");
    const thread = newThread("cl");
    const s = new ThreadSession(c, thread, { useStreamToken: true, backoff: { initialMs: 50, maxMs: 200 } });
    await s.open(); // The thread does not exist yet: not an error.
    await s.send('[[tool:weather:{"city":"Oslo"}]]');
    await until(() => settled(s, 1), { timeoutMs: 10000, what: "first run" });
    await s.send("[[spawn]]");
    await until(() => settled(s, 2), { timeoutMs: 10000, what: "second run" });
    assert.equal(s.connection, "open");
    assert.deepEqual(sessionTrees(s), await serverTrees(c, thread));
    assert.equal(s.turns[0].message, '[[tool:weather:{"city":"Oslo"}]]', "run-start carries the user's message");
    s.close();
  });

  test("restore mid-answer, then reconnect repeatedly: the text once, the tree the server's", async () => {
    const c = clientFor("carol");
    const thread = newThread("cl");
    const first = new ThreadSession(c, thread);
    await first.open();
    await first.send("[[slow:40]]");
    await until(() => (first.turns[0]?.tree?.textContent.length ?? 0) > 10, { timeoutMs: 10000, what: "some text" });
    // A reload: a second session restores from messages + status + stream.
    const second = new ThreadSession(c, thread);
    await second.open();
    assert.equal(second.activeRunId, first.turns[0].runId, "status says the run is active");
    for (let i = 0; i < 5 && second.turns[0]?.running; i++) {
      await new Promise((r) => setTimeout(r, 80));
      second.reconnect();
    }
    await until(() => settled(second, 1) && settled(first, 1), { timeoutMs: 15000, what: "run end" });
    const server = await serverTrees(c, thread);
    assert.deepEqual(sessionTrees(second), server);
    assert.deepEqual(sessionTrees(first), server);
    first.close();
    second.close();
  });

  test("refusals surface as ThreadlineError with the server's code", async () => {
    const c = clientFor("carol");
    const thread = newThread("cl");
    await c.send(thread, "hi");
    await assert.rejects(clientFor("mallory").messages(thread), (e) => e instanceof ThreadlineError && e.status === 404 && e.code === "thread_not_found");
    await assert.rejects(c.send(thread, ""), (e) => e instanceof ThreadlineError && e.code === "message_required");
    await assert.rejects(new ThreadlineClient({ baseUrl: worker.url }).threads(), (e) => e instanceof ThreadlineError && e.status === 401);
  });
});
