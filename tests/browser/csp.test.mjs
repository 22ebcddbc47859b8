// Security review, finding 3 in a real browser: content stored in a
// `/v1/stream/*` stream must never run as script on the app's origin, and
// the page at `/` is served with a strict Content-Security-Policy. Headless
// Chromium (tests/support/chromium.mjs finds it) driven by Playwright,
// against `wrangler dev` (the page is wrangler's [assets], which the
// Miniflare harness does not serve), with STREAMS_AUTH=none. Failing first:
// against the baseline build (2369c0a) the first two tests fail.
//
// `wrangler dev` runs wrangler.toml's [build] command (local/build.sh, which
// may rebuild the Worker with cargo). These tests check the Worker and page
// as already built (build/, web/dist/; `make test` builds first), so they
// start wrangler with a copy of wrangler.toml without its [build] section.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeLlm } from "../../local/fake-llm.mjs";
import { freePort } from "../support/wrangler.mjs";
import { newThread, sleep, tempDir } from "../support/harness.mjs";
import { chromiumPath } from "../support/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** wrangler.toml as it is, less [build], with its paths made absolute. */
function configWithoutBuild() {
  const toml = fs.readFileSync(path.join(root, "wrangler.toml"), "utf8");
  const out = [];
  let skipping = false;
  for (const line of toml.split("\n")) {
    const section = line.match(/^\s*\[\[?([^\]]+)\]\]?\s*$/);
    if (section) skipping = section[1].trim() === "build";
    if (skipping) continue;
    out.push(
      line
        .replace(/^(\s*main\s*=\s*")([^"]+)"/, (_, k, v) => `${k}${path.resolve(root, v)}"`)
        .replace(/^(\s*directory\s*=\s*")([^"]+)"/, (_, k, v) => `${k}${path.resolve(root, v)}"`),
    );
  }
  const dir = tempDir("threadline-csp-config-");
  const file = path.join(dir, "wrangler.toml");
  fs.writeFileSync(file, out.join("\n"));
  return file;
}

/** `wrangler dev` on free ports (as tests/support/wrangler.mjs, without [build]). */
async function startWrangler({ vars = {} } = {}) {
  const port = await freePort();
  const inspector = await freePort();
  const persist = tempDir("threadline-wrangler-");
  const args = ["wrangler", "dev", "-c", configWithoutBuild(), "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector), "--persist-to", persist];
  for (const [k, v] of Object.entries({ AUTH_MODE: "dev", RUNS_PER_MINUTE: "0", ...vars })) args.push("--var", `${k}:${v}`);
  const child = spawn("npx", args, {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
  });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited (${child.exitCode}):\n${log}`);
    try {
      const res = await fetch(url + "/");
      if (res.ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`wrangler dev did not come up:\n${log}`);
    await sleep(250);
  }
  return {
    url,
    get log() {
      return log;
    },
    async stop() {
      if (child.exitCode !== null) return;
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      await Promise.race([once(child, "exit"), sleep(5000)]);
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    },
  };
}

/** The sources a CSP allows for scripts: script-src, else default-src. */
function scriptSources(csp) {
  const directives = new Map(
    csp
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name.toLowerCase(), values]),
  );
  return directives.get("script-src") ?? directives.get("default-src");
}

let llm, worker, browser;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  worker = await startWrangler({ vars: { STREAMS_AUTH: "none", LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", LLM_MODEL: "fake-model" } });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close?.();
});

describe("finding 3: stored content must not run as script on the app's origin", () => {
  test("finding 3: GET / and GET /app.js carry a Content-Security-Policy whose script-src is 'self' only", async () => {
    for (const p of ["/", "/app.js"]) {
      const r = await fetch(`${worker.url}${p}`);
      assert.equal(r.status, 200, p);
      const csp = r.headers.get("content-security-policy");
      assert.ok(csp, `${p} has no Content-Security-Policy header`);
      const sources = scriptSources(csp);
      assert.deepEqual(sources, ["'self'"], `${p}: script sources ${JSON.stringify(sources)} in ${csp}`);
      assert.ok(!/unsafe-inline|unsafe-eval/.test(csp), `${p}: ${csp}`);
    }
  });

  test("finding 3: a text/html stream opened in the browser does not run its script", async () => {
    const ctx = await browser.newContext();
    try {
      const page = await ctx.newPage();
      const pwned = [];
      ctx.on("request", (req) => {
        if (new URL(req.url()).pathname.startsWith("/pwned")) pwned.push(req.url());
      });
      // The app's origin holds the page's bearer token, as it would with auth on.
      await page.goto(`${worker.url}/`);
      await page.evaluate(() => localStorage.setItem("threadline.token", "secret-bearer"));

      const name = `csp-${Date.now()}`;
      const html =
        `<!doctype html><title>stored</title><script>document.title="pwned";` +
        `localStorage.setItem("threadline.pwned","1");` +
        `fetch("/pwned?t="+encodeURIComponent(localStorage.getItem("threadline.token")))</script>`;
      const put = await fetch(`${worker.url}/v1/stream/${name}`, { method: "PUT", headers: { "content-type": "text/html" } });
      assert.equal(put.status, 201);
      const post = await fetch(`${worker.url}/v1/stream/${name}`, { method: "POST", headers: { "content-type": "text/html" }, body: html });
      assert.ok(post.ok, String(post.status));

      const resp = await page.goto(`${worker.url}/v1/stream/${name}?offset=-1`);
      assert.equal(resp.status(), 200);
      await page.waitForLoadState("load");
      await sleep(500);
      const titleNow = await page.title();
      const headers = resp.headers();

      await page.goto(`${worker.url}/`);
      const stored = await page.evaluate(() => localStorage.getItem("threadline.pwned"));
      const problems = [];
      if (titleNow === "pwned") problems.push("the stored script set the title");
      if (pwned.length) problems.push(`the stored script fetched ${pwned.join(", ")}`);
      if (stored !== null) problems.push("the stored script wrote the app origin's localStorage");
      assert.deepEqual(problems, [], `response CSP: ${headers["content-security-policy"] ?? "none"}`);
      assert.equal(headers["content-security-policy"], "sandbox; default-src 'none'");
    } finally {
      await ctx.close();
    }
  });

  test("finding 3: the page still works under its CSP: a message gets its answer and no violation is reported", async () => {
    const ctx = await browser.newContext();
    try {
      const page = await ctx.newPage();
      await page.addInitScript(() => {
        window.__cspViolations = [];
        document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
      });
      const consoleCsp = [];
      page.on("console", (m) => {
        if (/Content Security Policy/i.test(m.text())) consoleCsp.push(m.text());
      });
      const errors = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      const thread = newThread("csp-page");
      await page.goto(`${worker.url}/#${thread}`);
      await page.getByTestId("composer-input").waitFor();
      await page.getByTestId("composer-input").fill("Hello under a CSP");
      await page.getByTestId("composer-input").press("Enter");
      await page.getByTestId("user-message").filter({ hasText: "Hello under a CSP" }).waitFor();
      await page.locator('[data-testid="turn"][data-running="true"]').waitFor({ state: "detached", timeout: 15_000 });
      const text = (await page.getByTestId("assistant-text").allTextContents()).join("");
      assert.match(text, /fake model/);
      const violations = await page.evaluate(() => window.__cspViolations);
      assert.deepEqual([...violations, ...consoleCsp], [], "CSP violations");
      assert.deepEqual(errors, []);
    } finally {
      await ctx.close();
    }
  });
});
