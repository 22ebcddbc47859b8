// `make deploy`'s check (local/deploy-check.mjs): a configuration that would
// not give a working service is refused with what to do, before anything is
// uploaded. wrangler is stood in for by a script answering `secret list` and
// `r2 bucket list` as wrangler 4 prints them (no account is reached).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { tempDir } from "./support/harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const base = fs.readFileSync(path.join(root, "wrangler.toml"), "utf8");

/** Runs the check on wrangler.toml plus `vars` (TOML), with these secrets and buckets in the account. */
function check(vars, { secrets = [], buckets = ["threadline-files"], queues = ["threadline-deliveries"] } = {}) {
  const dir = tempDir("threadline-deploy-");
  const config = path.join(dir, "wrangler.toml");
  fs.writeFileSync(config, base + "\n" + vars + "\n");
  const fake = path.join(dir, "wrangler");
  const queueTable = ["┌──────┬──────┐", "│ id │ name │", ...queues.map((q) => `│ 0f3c │ ${q} │`), "└──────┴──────┘"].join("\n");
  const bucketList = buckets.map((b) => `name:           ${b}\ncreation_date:  2026-01-01T00:00:00.000Z`).join("\n\n");
  fs.writeFileSync(
    fake,
    `#!/usr/bin/env node
const a = process.argv.slice(2);
if (a[0] === "secret" && a[1] === "list") console.log(JSON.stringify(${JSON.stringify(secrets.map((name) => ({ name, type: "secret_text" })))}));
else if (a[0] === "r2" && a[1] === "bucket" && a[2] === "list") console.log("Listing buckets...\\n" + ${JSON.stringify(bucketList)});
else if (a[0] === "queues" && a[1] === "list") console.log(${JSON.stringify(queueTable)});
else { console.error("unexpected: " + a.join(" ")); process.exit(2); }
`,
    { mode: 0o755 },
  );
  const r = spawnSync(process.execPath, [path.join(root, "local/deploy-check.mjs"), "--config", config], {
    encoding: "utf8",
    env: { ...process.env, WRANGLER: fake },
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

const complete = `LLM_BASE_URL = "https://api.openai.com/v1"\nLLM_MODEL = "gpt-4o-mini"`;

test("wrangler.toml as shipped names everything a working deployment still needs", () => {
  const r = check("");
  assert.equal(r.code, 1);
  assert.match(r.out, /no agent: set LLM_BASE_URL/);
  assert.match(r.out, /no model: set LLM_MODEL/);
  assert.match(r.out, /no authentication: `npx wrangler secret put AUTH_JWT_SECRET`/);
});

test("a complete configuration passes", () => {
  const r = check(complete, { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET"] });
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /configuration complete/);
});

test("a model without its key, development mode, and a secret in the file are each refused", () => {
  let r = check(complete, { secrets: ["AUTH_JWT_SECRET"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /no model key: `npx wrangler secret put LLM_API_KEY`/);
  r = check(complete + `\nAUTH_MODE = "dev"`, { secrets: ["LLM_API_KEY"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /AUTH_MODE = "dev" makes every caller the same local actor/);
  r = check(complete + `\nAUTH_JWT_SECRET = "s3cret"`, { secrets: ["LLM_API_KEY"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /AUTH_JWT_SECRET is in wrangler.toml's \[vars\]/);
});

test("a JSON variable passes as a string or a table, and is refused as invalid JSON or a number", () => {
  const ok = { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET"] };
  assert.equal(check(complete + `\nAPPROVAL_POLICY = '{"delete-note": {}}'`, ok).code, 0);
  assert.equal(check(complete + `\n[vars.APPROVAL_POLICY]\ndelete-note = { ttlMs = 1000 }`, ok).code, 0);
  let r = check(complete + `\nAPPROVAL_POLICY = '{"delete-note": '`, ok);
  assert.equal(r.code, 1);
  assert.match(r.out, /APPROVAL_POLICY is not valid JSON/);
  r = check(complete + `\nAPPROVAL_POLICY = 5`, ok);
  assert.equal(r.code, 1);
  assert.match(r.out, /APPROVAL_POLICY is a number/);
});

test("the deliveries queue must exist, and each webhook's secret", () => {
  let r = check(complete, { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET"], queues: ["other"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /queue threadline-deliveries \(binding DELIVERIES\) does not exist: `npx wrangler queues create threadline-deliveries`/);
  const hooks = `\nWEBHOOKS = '[{"url":"https://h.example.com","events":["*"],"secret":"HOOK_SECRET"}]'`;
  r = check(complete + hooks, { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /names secret HOOK_SECRET, which is not set: `npx wrangler secret put HOOK_SECRET`/);
  r = check(complete + hooks, { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET", "HOOK_SECRET"] });
  assert.equal(r.code, 0, r.out);
});

test("the files bucket must exist", () => {
  const r = check(complete, { secrets: ["LLM_API_KEY", "AUTH_JWT_SECRET"], buckets: ["other"] });
  assert.equal(r.code, 1);
  assert.match(r.out, /R2 bucket threadline-files \(binding FILES\) does not exist: `npx wrangler r2 bucket create threadline-files`/);
});

test("the bundle `wrangler deploy` would upload is under 1.125 MiB gzip", () => {
  // The dry run builds what `make deploy` uploads (build/ is current after
  // `make build`, so it only bundles) and prints its size; nothing leaves
  // the machine. The budget is the Worker's cold start and the free plan's
  // headroom (docs/performance.md, "The Worker's size").
  const out = path.join(tempDir("threadline-dry-run-"), "out");
  const r = spawnSync(path.join(root, "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "--outdir", out], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
  });
  const printed = r.stdout + r.stderr;
  assert.equal(r.status, 0, printed);
  const m = printed.match(/Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/);
  assert.ok(m, printed);
  const gzip = Number(m[2]);
  console.log(`bundle: ${m[1]} KiB, ${gzip} KiB gzip`);
  assert.ok(gzip < 1152, `${gzip} KiB gzip`);
});
