// Test harness: the Worker on workerd (Miniflare, in a child process so a test
// can SIGKILL it), a webhook receiver standing in for an external agent, and a
// byte-level SSE client.
import crypto from "node:crypto";
import { spawn } from "node:child_process";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { once } from "node:events";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A thread's debug stats say every stream its object held has moved to a
 * socket, and was claimed (docs/architecture.md, held streams). */
export const streamsSettled = (stats) => stats.held === 0 && stats.moving === 0;

export function tempDir(prefix = "threadline-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** Polls `fn` until it returns a truthy value or `timeoutMs` passes. */
export async function until(fn, { timeoutMs = 5000, stepMs = 25, what = "condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(stepMs);
  }
}

/**
 * Starts the built Worker under Miniflare in its own process group.
 * `vars` override wrangler.toml's [vars]; `persist` keeps state on disk;
 * `script` serves another build (a previous release, from local/baseline.sh);
 * `compatibilityFlags` adds flags to wrangler.toml's for that worker only.
 * `WORKER_SCRIPT=DIR` in the environment serves DIR's build to every test
 * that names none (to run a test against another checkout's build).
 */
export async function startWorker({ vars = {}, persist, port = 0, script = process.env.WORKER_SCRIPT, compatibilityFlags = [] } = {}) {
  const args = [path.join(root, "tests/support/serve.mjs"), "--port", String(port)];
  if (persist) args.push("--persist", persist);
  if (script) args.push("--script", path.join(script, "index.js"));
  for (const flag of compatibilityFlags) args.push("--compat-flag", flag);
  for (const [k, v] of Object.entries({ DEBUG_ROUTES: "1", AUTH_MODE: "dev", RUNS_PER_MINUTE: "0", ...vars })) args.push("--var", `${k}=${v}`);
  const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  // Everything the process writes after its first line (the Worker's console output).
  let stdout = "";
  const { url, control } = await new Promise((resolve, reject) => {
    let out = "";
    let ready = false;
    child.stdout.on("data", (d) => {
      if (ready) return void (stdout += d);
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        ready = true;
        stdout += out.slice(nl + 1);
        resolve(JSON.parse(out.slice(0, nl)));
      }
    });
    child.on("exit", (code) => reject(new Error(`worker exited (${code}): ${stderr}`)));
  });
  const killGroup = (signal) => {
    try {
      process.kill(-child.pid, signal);
    } catch {}
  };
  return {
    url,
    /** The objects of the files bucket under `prefix`: `[{key, size}]`. */
    async bucket(prefix = "") {
      const res = await fetch(`${control}/r2?prefix=${encodeURIComponent(prefix)}`);
      if (!res.ok) throw new Error(`bucket: ${await res.text()}`);
      return res.json();
    },
    /** The serving process (workerd is its child). */
    pid: child.pid,
    get stderr() {
      return stderr;
    },
    /** What the Worker printed (its console), after the serving process's first line. */
    get stdout() {
      return stdout;
    },
    /** Graceful stop. */
    async stop() {
      if (child.exitCode !== null) return;
      killGroup("SIGTERM");
      await Promise.race([once(child, "exit"), sleep(3000)]);
      killGroup("SIGKILL");
    },
    /** SIGKILL the whole group: node, and the workerd it runs. */
    async kill() {
      killGroup("SIGKILL");
      if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
      await sleep(100);
    },
  };
}

/** An external agent's webhook endpoint: records every POST. */
export async function startWebhook({ status = 200 } = {}) {
  const received = [];
  const waiters = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const msg = JSON.parse(body);
      received.push(msg);
      waiters.splice(0).forEach((w) => w());
      res.writeHead(hook.status, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const hook = {
    status,
    url: `http://127.0.0.1:${server.address().port}/hook`,
    received,
    /** The first received message matching `pred`, waiting for it. */
    async next(pred, timeoutMs = 5000) {
      return until(() => received.find(pred), { timeoutMs, what: "a webhook call" });
    },
    close: () => new Promise((r) => server.close(r)),
  };
  return hook;
}

/** Parses an SSE byte stream into frames (spec-conformant line handling). */
export function parseSse(text) {
  const frames = [];
  const lines = text.split(/\r\n|\r|\n/);
  let cur = { comments: [] };
  let dataLines = [];
  for (const line of lines) {
    if (line === "") {
      if (dataLines.length || cur.id !== undefined || cur.event !== undefined) {
        frames.push({ ...cur, data: dataLines.join("\n") });
      } else if (cur.comments.length) {
        frames.push({ ...cur, data: undefined });
      }
      cur = { comments: [] };
      dataLines = [];
      continue;
    }
    if (line.startsWith(":")) {
      cur.comments.push(line.slice(1).trim());
      continue;
    }
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") dataLines.push(value);
    else if (field === "id") cur.id = value;
    else if (field === "event") cur.event = value;
  }
  return frames;
}

/**
 * Opens an SSE connection and keeps the raw bytes. `frames()` parses what
 * arrived so far (complete frames only); `events()` gives the protocol events
 * with their `id` (a number, or undefined for id-less frames), as an
 * EventSource's onmessage would.
 */
export function openSse(url, { headers = {} } = {}) {
  const ac = new AbortController();
  const conn = {
    raw: "",
    status: undefined,
    headers: undefined,
    closed: false,
    frames() {
      const end = conn.raw.lastIndexOf("\n\n");
      return end < 0 ? [] : parseSse(conn.raw.slice(0, end + 2));
    },
    events() {
      // Instance AI's `run-sync` is a named event: an EventSource's
      // onmessage never sees it (read it with frames()).
      return conn
        .frames()
        .filter((f) => f.data !== undefined && f.event !== "run-sync")
        .map((f) => ({ id: f.id === undefined ? undefined : Number(f.id), ...JSON.parse(f.data) }));
    },
    durable() {
      return conn.events().filter((e) => e.id !== undefined);
    },
    async waitFor(pred, timeoutMs = 5000, what = "an SSE event") {
      return until(() => conn.events().find(pred), { timeoutMs, what });
    },
    close() {
      conn.closed = true;
      ac.abort();
    },
  };
  conn.ready = (async () => {
    const resp = await fetch(url, { headers, signal: ac.signal });
    conn.status = resp.status;
    conn.headers = resp.headers;
    if (!resp.ok) {
      conn.raw = await resp.text();
      return conn;
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          conn.raw += dec.decode(value, { stream: true });
        }
      } catch {}
      conn.closed = true;
    })();
    return conn;
  })();
  return conn;
}

/** A JSON API client for one Worker. */
export function client(base) {
  const call = async (method, p, body, headers = {}) => {
    const init = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = typeof body === "string" ? body : JSON.stringify(body);
      init.headers["content-type"] = "application/json";
    }
    const resp = await fetch(base + p, init);
    const text = await resp.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: resp.status, headers: resp.headers, json, text };
  };
  return {
    call,
    chat: (thread, message, extra = {}) => call("POST", `/instance-ai/chat/${thread}`, { message, ...extra }),
    cancel: (thread) => call("POST", `/instance-ai/chat/${thread}/cancel`),
    status: (thread) => call("GET", `/instance-ai/threads/${thread}/status`),
    messages: (thread, q = "") => call("GET", `/instance-ai/threads/${thread}/messages${q}`),
    stats: (thread) => call("GET", `/instance-ai/threads/${thread}/debug/stats`),
    publish: (thread, run, token, events) =>
      call("POST", `/instance-ai/threads/${thread}/runs/${run}/events`, events, token ? { authorization: `Bearer ${token}` } : {}),
    events: (thread, { query = "", headers } = {}) => openSse(`${base}/instance-ai/events/${thread}${query}`, { headers }),
  };
}

let threadCounter = 0;
/** A fresh thread id per test. */
export const newThread = (label = "t") => `${label}-${process.pid}-${++threadCounter}-${Date.now().toString(36)}`;

/**
 * Sends a message on a thread whose agent is the external webhook `h`, and
 * returns the run with the publish token the agent got (and its signal).
 */
export async function startExternalRun(a, h, thread, message = "hello") {
  const r = await a.chat(thread, message);
  if (r.status !== 200) throw new Error(`chat answered ${r.status}: ${r.text}`);
  const signal = await h.next((m) => m.type === "run" && m.runId === r.json.runId);
  return { runId: r.json.runId, token: signal.publishToken, signal };
}

/** An HS256 JWT over `claims`, signed with `secret`. */
export function hs256Jwt(secret, claims) {
  const b64 = (x) => Buffer.from(JSON.stringify(x)).toString("base64url");
  const h = b64({ alg: "HS256", typ: "JWT" });
  const p = b64(claims);
  return `${h}.${p}.${crypto.createHmac("sha256", secret).update(`${h}.${p}`).digest("base64url")}`;
}

/** A bearer JWT for `sub`, valid for five minutes. */
export const jwtFor = (secret, sub) => hs256Jwt(secret, { sub, exp: Math.floor(Date.now() / 1000) + 300 });
