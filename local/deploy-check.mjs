// What a deployment needs before `wrangler deploy` can give a working
// service, checked against wrangler.toml's [vars] and the account's secrets
// and buckets (`make deploy` runs it first). Prints each problem with what
// to do, and exits 1 when there is one.
//
//   node local/deploy-check.mjs [--config wrangler.toml]
//
// WRANGLER names the wrangler to ask (default: the project's own).
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parse } from "smol-toml";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { config: { type: "string", default: path.join(root, "wrangler.toml") } } });
const wrangler = process.env.WRANGLER ?? path.join(root, "node_modules/.bin/wrangler");

const config = parse(fs.readFileSync(values.config, "utf8"));
const vars = config.vars ?? {};
const problems = [];
const notes = [];

/** Asks wrangler for JSON; `null` with the reason noted when it cannot answer. */
function ask(args, what) {
  try {
    const out = execFileSync(wrangler, [...args, "--config", values.config], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    });
    return out;
  } catch (e) {
    problems.push(`could not list the account's ${what} (${(e.stderr || e.message).trim().split("\n").pop()}): run \`npx wrangler login\` first`);
    return null;
  }
}

const secretsOut = ask(["secret", "list", "--format", "json"], "secrets");
const secrets = new Set(secretsOut ? JSON.parse(secretsOut).map((s) => s.name) : []);
const has = (name) => (vars[name] !== undefined && vars[name] !== "") || secrets.has(name);

// The agent: the built-in one needs a model endpoint, a model and a key;
// an external one, its webhook.
if (!has("AGENT_WEBHOOK_URL")) {
  if (!has("LLM_BASE_URL")) problems.push('no agent: set LLM_BASE_URL in [vars] (e.g. "https://api.openai.com/v1"), or AGENT_WEBHOOK_URL for an external agent');
  if (!has("LLM_MODEL") && !has("LLM_MODELS")) problems.push('no model: set LLM_MODEL in [vars] (e.g. "gpt-4o-mini"), or a catalog in LLM_MODELS');
  if (has("LLM_BASE_URL") && !secrets.has("LLM_API_KEY") && !String(vars.LLM_BASE_URL ?? "").match(/^https?:\/\/(localhost|127\.)/))
    problems.push("no model key: `npx wrangler secret put LLM_API_KEY`");
}

// Who is calling: never the development actor in a deployment.
const mode = String(vars.AUTH_MODE ?? "").trim();
if (mode === "dev") problems.push("AUTH_MODE = \"dev\" makes every caller the same local actor: remove it and set AUTH_JWT_SECRET (a secret) or AUTH_JWKS");
else if (mode !== "none" && !has("AUTH_JWT_SECRET") && !has("AUTH_JWKS"))
  problems.push("no authentication: `npx wrangler secret put AUTH_JWT_SECRET` (HS256), or AUTH_JWKS in [vars] (your sign-in's public keys); every request is 503 auth_not_configured without one");
if (mode === "none") notes.push("AUTH_MODE = \"none\": anyone may use every thread");

// Secrets belong in the account, not in a file in the repository.
for (const name of ["LLM_API_KEY", "AUTH_JWT_SECRET", "STREAM_TOKEN_SECRET"])
  if (vars[name] !== undefined) problems.push(`${name} is in wrangler.toml's [vars]: remove it and \`npx wrangler secret put ${name}\``);

// JSON variables: a string must parse (a table is JSON already).
for (const name of ["TOOLS", "MCP_SERVERS", "APPROVAL_POLICY", "LLM_MODELS", "AGENTS", "QUOTA", "AUTH_JWKS", "WEBHOOKS"]) {
  const v = vars[name];
  if (typeof v === "string" && v.trim()) {
    try {
      JSON.parse(v);
    } catch (e) {
      problems.push(`${name} is not valid JSON (${e.message}): write it as a JSON string or a TOML table`);
    }
  } else if (v !== undefined && (typeof v !== "object" || v === null)) {
    problems.push(`${name} is a ${typeof v}: it must be JSON, as a string or a TOML table`);
  }
}

// The files bucket the FILES binding names.
const buckets = config.r2_buckets?.length ? ask(["r2", "bucket", "list"], "R2 buckets") : null;
const bucketNames = new Set([...(buckets ?? "").matchAll(/^name:\s*(\S+)\s*$/gm)].map((m) => m[1]));
for (const b of buckets === null ? [] : config.r2_buckets)
  if (!bucketNames.has(b.bucket_name))
    problems.push(`R2 bucket ${b.bucket_name} (binding ${b.binding}) does not exist: \`npx wrangler r2 bucket create ${b.bucket_name}\``);

// The queue webhook deliveries travel on (binding DELIVERIES).
const producers = config.queues?.producers ?? [];
const queues = producers.length ? ask(["queues", "list"], "queues") : null;
for (const q of queues === null ? [] : producers)
  if (!new RegExp(`(^|[\\s│|])${q.queue}([\\s│|]|$)`, "m").test(queues))
    problems.push(`queue ${q.queue} (binding ${q.binding}) does not exist: \`npx wrangler queues create ${q.queue}\``);

// Each webhook endpoint's secret is in the account.
let hooks = vars.WEBHOOKS;
try {
  hooks = typeof hooks === "string" ? JSON.parse(hooks) : hooks;
} catch {}
const secretNames = new Set((() => { try { return JSON.parse(secretsOut ?? "[]").map((s) => s.name); } catch { return []; } })());
for (const h of Array.isArray(hooks) ? hooks : [])
  if (secretsOut !== null && typeof h?.secret === "string" && !secretNames.has(h.secret) && vars[h.secret] === undefined)
    problems.push(`the webhook ${h.url} names secret ${h.secret}, which is not set: \`npx wrangler secret put ${h.secret}\` (its whsec_… value)`);

for (const n of notes) console.log(`deploy: note: ${n}`);
if (problems.length) {
  console.error("deploy: not deploying; the deployment would not work as it is:");
  for (const p of problems) console.error(`  - ${p}`);
  console.error("(docs/deploy.md walks through each; FORCE=1 make deploy skips this check)");
  process.exit(1);
}
console.log("deploy: configuration complete");
