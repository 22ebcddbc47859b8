// Serves the built Worker with Miniflare directly: one workerd, no proxy
// (wrangler dev's proxy distorts SSE bursts and runs out of descriptors).
//
//   node tests/support/serve.mjs --port 0 --persist DIR [--script build/index.js] [--var NAME=VALUE ...] [--compat-flag FLAG ...]
//
// Prints one line `{"url": "http://127.0.0.1:PORT"}` once ready, then serves
// until killed. Bindings mirror wrangler.toml. For profiling by hand:
// MINIFLARE_DIRECT=1 serves the Worker's own socket (no Miniflare entry
// worker in front), MINIFLARE_INSPECT=PORT opens V8's inspector (CPU
// profiles through the DevTools protocol).
import { Miniflare } from "miniflare";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";
import http from "node:http";
import { once } from "node:events";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    persist: { type: "string" },
    // Another build of the Worker (a previous release: local/baseline.sh).
    script: { type: "string" },
    var: { type: "string", multiple: true, default: [] },
    // Compatibility flags beyond wrangler.toml's, for this script only (a
    // bench peer built on a library that needs nodejs_compat).
    "compat-flag": { type: "string", multiple: true, default: [] },
  },
});

// [vars] of wrangler.toml, then --var overrides.
const toml = fs.readFileSync(path.join(root, "wrangler.toml"), "utf8");
const bindings = {};
const varsSection = toml.split(/^\[vars\]\s*$/m)[1]?.split(/^\[/m)[0] ?? "";
for (const line of varsSection.split("\n")) {
  const m = line.match(/^\s*([A-Z0-9_]+)\s*=\s*"(.*)"\s*$/);
  if (m) bindings[m[1]] = m[2];
}
for (const kv of values.var) {
  const i = kv.indexOf("=");
  bindings[kv.slice(0, i)] = kv.slice(i + 1);
}

/** The `[[name]]` tables of wrangler.toml: their `key = "text"` and `key = 12` entries. */
function tomlBlocks(name) {
  const blocks = toml.split(new RegExp(`^\\[\\[${name.replace(".", "\\.")}\\]\\]\\s*$`, "m")).slice(1);
  return blocks.map((b) => {
    const entries = {};
    for (const line of b.split(/^\[/m)[0].split("\n")) {
      const m = line.match(/^\s*([a-z_]+)\s*=\s*(?:"([^"]*)"|(\d+))\s*$/);
      if (m) entries[m[1]] = m[2] ?? Number(m[3]);
    }
    return entries;
  });
}

const mf = new Miniflare({
  scriptPath: path.resolve(root, values.script ?? "build/index.js"),
  modules: true,
  modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
  compatibilityDate: toml.match(/compatibility_date\s*=\s*"([^"]+)"/)[1],
  compatibilityFlags: [...JSON.parse(toml.match(/compatibility_flags\s*=\s*(\[[^\]]*\])/)?.[1] ?? "[]"), ...values["compat-flag"]],
  durableObjects: {
    THREAD: { className: "ThreadObject", useSQLite: true },
    DIRECTORY: { className: "Directory", useSQLite: true },
    STREAM: { className: "StreamObject", useSQLite: true },
  },
  durableObjectsPersist: values.persist ?? false,
  r2Buckets: ["FILES"],
  // The queues, as wrangler.toml declares them.
  queueProducers: Object.fromEntries(tomlBlocks("queues.producers").map((b) => [b.binding, { queueName: b.queue }])),
  queueConsumers: Object.fromEntries(
    tomlBlocks("queues.consumers").map((b) => [
      b.queue,
      { maxBatchSize: b.max_batch_size, maxBatchTimeout: b.max_batch_timeout, maxRetries: b.max_retries, retryDelay: b.retry_delay },
    ]),
  ),
  r2Persist: values.persist ?? false,
  bindings,
  host: "127.0.0.1",
  port: Number(values.port),
  ...(process.env.MINIFLARE_INSPECT ? { inspectorPort: Number(process.env.MINIFLARE_INSPECT) } : {}),
  ...(process.env.MINIFLARE_DIRECT ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
});
const url = process.env.MINIFLARE_DIRECT ? (await mf.ready, await mf.unsafeGetDirectURL()) : await mf.ready;
// A window on the bucket for tests (`GET /r2?prefix=` lists its objects):
// Miniflare's own R2, the one the Worker uses, read through its API.
const control = http.createServer(async (req, res) => {
  try {
    const { searchParams } = new URL(req.url, "http://control");
    const bucket = await mf.getR2Bucket("FILES");
    const objects = [];
    let cursor;
    do {
      const page = await bucket.list({ prefix: searchParams.get("prefix") ?? undefined, cursor });
      objects.push(...page.objects.map((o) => ({ key: o.key, size: o.size })));
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(objects));
  } catch (e) {
    res.writeHead(500).end(String(e?.stack ?? e));
  }
});
control.listen(0, "127.0.0.1");
await once(control, "listening");
process.stdout.write(JSON.stringify({ url: url.origin, control: `http://127.0.0.1:${control.address().port}` }) + "\n");
const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
