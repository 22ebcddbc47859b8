// A normal request prints only the request and run log lines: nothing the
// Worker hands to JavaScript warns on its way (an `i64::MAX` bound once
// crossed into JavaScript outside its safe-integer range, twice a run).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, client, newThread, until, sleep } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

let llm, worker;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  worker = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

test("a run, a read and a file leave only structured log lines", async () => {
  const api = client(worker.url);
  const thread = newThread("quiet");
  assert.equal((await api.chat(thread, "hello")).status, 200);
  await until(async () => (await api.status(thread)).json.hasActiveRun === false, { what: "the run ends" });
  const upload = await fetch(`${worker.url}/v1/threads/${thread}/files?name=n.txt`, { method: "POST", headers: { "content-type": "text/plain" }, body: "notes" });
  assert.equal(upload.status, 201);
  assert.equal((await api.messages(thread)).status, 200);
  await sleep(500);
  const lines = worker.stdout.split("\n").filter((l) => l.trim() !== "");
  assert.ok(lines.length > 0, "the Worker's log is read");
  const stray = lines.filter((l) => {
    try {
      return typeof JSON.parse(l).msg !== "string";
    } catch {
      return true;
    }
  });
  assert.deepEqual(stray, [], "every line is a structured log line");
  assert.ok(lines.some((l) => JSON.parse(l).msg === "request"), "the request lines are there");
});
