// Configuration as a deployment writes it: wrangler.toml's [vars] may hold a
// JSON variable as a string or as a TOML table (wrangler hands the Worker an
// object), and a variable of the wrong type is said at start-up and, where it
// governs who may do what, refuses requests instead of running without it.
// Served by `wrangler dev` itself, so the TOML is wrangler's own reading.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { client, newThread, until } from "./support/harness.mjs";
import { startWranglerDev } from "./support/wrangler.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

let llm, tools;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
});
after(async () => {
  await llm?.close();
  await tools?.close();
});

/** A JSON value written as TOML (inline tables and arrays). */
function toToml(v) {
  if (Array.isArray(v)) return `[${v.map(toToml).join(", ")}]`;
  if (v && typeof v === "object") return `{ ${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)} = ${toToml(x)}`).join(", ")} }`;
  return JSON.stringify(v);
}

/**
 * `wrangler dev` with `toml` appended under [vars]. The policy asks for
 * approval of `weather`, which needs none by default: a run that waits
 * for a decision proves the policy was read.
 */
async function serve(toml, vars = {}) {
  return startWranglerDev({
    build: false,
    toml,
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", ...vars },
  });
}

const policy = { weather: { required: true, ttlMs: 60000 } };

/** Sends a weather call and says whether the run waited for a decision. */
async function waitsForApproval(url) {
  const api = client(url);
  const thread = newThread("cfg");
  const sent = await api.chat(thread, '[[tool:weather:{"city":"Oslo"}]]');
  assert.equal(sent.status, 200, JSON.stringify(sent.json));
  await until(async () => {
    const s = (await api.status(thread)).json;
    return s.isSuspended || !s.hasActiveRun;
  }, { what: "the run to wait or end" });
  return (await api.status(thread)).json.isSuspended;
}

describe("JSON variables", () => {
  test("APPROVAL_POLICY and TOOLS as strings", async () => {
    const w = await serve("", { TOOLS: JSON.stringify(tools.declarations), APPROVAL_POLICY: JSON.stringify(policy) });
    try {
      assert.equal(await waitsForApproval(w.url), true);
    } finally {
      await w.stop();
    }
  });

  test("APPROVAL_POLICY and TOOLS as TOML tables read the same", async () => {
    const toml = [
      `TOOLS = ${toToml(tools.declarations)}`,
      `[vars.APPROVAL_POLICY]`,
      `weather = ${toToml(policy.weather)}`,
    ].join("\n");
    // The table lands in [vars] (the last section of wrangler.toml).
    const w = await serve(toml);
    try {
      assert.equal(await waitsForApproval(w.url), true);
      assert.doesNotMatch(w.log, /APPROVAL_POLICY is/);
    } finally {
      await w.stop();
    }
  });

  test("without the policy the same call runs at once (the test can tell)", async () => {
    const w = await serve(`TOOLS = ${toToml(tools.declarations)}`);
    try {
      assert.equal(await waitsForApproval(w.url), false);
    } finally {
      await w.stop();
    }
  });

  test("APPROVAL_POLICY of the wrong type is said and refuses sends (503), never read as no approvals", async () => {
    const w = await serve(`TOOLS = ${toToml(tools.declarations)}\nAPPROVAL_POLICY = 5`);
    try {
      const api = client(w.url);
      const res = await api.chat(newThread("cfg-bad"), '[[tool:weather:{"city":"Oslo"}]]');
      assert.equal(res.status, 503);
      assert.equal(res.json.error.code, "invalid_approval_policy");
      assert.match(res.json.error.message, /APPROVAL_POLICY/);
      await until(() => /APPROVAL_POLICY is a number/.test(w.log), { what: "the start-up warning" });
    } finally {
      await w.stop();
    }
  });

  test("an authentication variable of the wrong type refuses every request (503 auth_misconfigured)", async () => {
    const w = await serve(`[vars.AUTH_JWT_SECRET]\nkey = "not a table"`, { AUTH_MODE: "jwt" });
    try {
      const res = await fetch(`${w.url}/instance-ai/threads`);
      assert.equal(res.status, 503);
      const body = await res.json();
      assert.equal(body.error.code, "auth_misconfigured");
      assert.match(body.error.message, /AUTH_JWT_SECRET is a table/);
    } finally {
      await w.stop();
    }
  });

  test("a number variable written as a TOML number is read as written", async () => {
    // MAX_MESSAGE_BYTES = 10: a longer message is refused with its own code.
    const w = await serve(`TOOLS = ${toToml(tools.declarations)}\nMAX_MESSAGE_BYTES = 10`);
    try {
      const res = await client(w.url).chat(newThread("cfg-num"), "a message longer than ten bytes");
      assert.equal(res.status, 413);
      assert.equal(res.json.error.code, "message_too_large");
      assert.doesNotMatch(w.log, /MAX_MESSAGE_BYTES is/);
    } finally {
      await w.stop();
    }
  });
});
