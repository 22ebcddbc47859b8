// The page's thread list is the caller's inbox, live, in headless Chromium
// against `wrangler dev`: two threads running show their spinners; when one
// reaches a confirmation its badge appears without a reload, and the page
// raises a browser notification (permission granted); the finished one
// turns unread, and reads once opened.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeLlm } from "../../local/fake-llm.mjs";
import { startDemoTools, toolDeclarations } from "../../local/demo-tools.mjs";
import { startWranglerDev } from "../support/wrangler.mjs";
import { newThread } from "../support/harness.mjs";
import { chromiumPath } from "../support/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "test-artifacts/browser");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let llm, tools, worker, browser;

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  tools = await startDemoTools({ port: 0 });
  const declared = toolDeclarations(tools.url);
  const guarded = { ...declared.find((t) => t.name === "echo"), name: "guarded", approval: "required" };
  worker = await startWranglerDev({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", LLM_MODEL: "fake-model", TOOLS: JSON.stringify([...declared, guarded]) },
  });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close?.();
  await tools?.close?.();
});

const send = (thread, message) =>
  fetch(`${worker.url}/instance-ai/chat/${thread}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ message }) });

test("two threads running; one reaches a confirmation: its badge appears live, with a notification", async () => {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  // The page's notifications, recorded (a granted permission, as a person gives it).
  await ctx.addInitScript(() => {
    window.__notes = [];
    window.Notification = class {
      static permission = "granted";
      static requestPermission = async () => "granted";
      constructor(title, opts) {
        window.__notes.push({ title, ...opts });
      }
      close() {}
    };
  });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  const open = newThread("here");
  await page.goto(`${worker.url}/#${open}`);
  await page.getByTestId("composer-input").waitFor();
  const [slow, careful] = [newThread("slow"), newThread("careful")];
  assert.equal((await send(slow, "take your time [[slow:250]]")).status, 200);
  assert.equal((await send(careful, 'careful [[tool:guarded:{"text":"x"}]]')).status, 200);
  const row = (t) => page.locator(`[data-testid="thread-row"][data-thread="${t}"]`);
  // Both run: a spinner each, live.
  await row(slow).locator('[data-testid="thread-spinner"]').waitFor({ timeout: 10_000 });
  await shot(page, "inbox-running");
  // One reaches its confirmation: the badge appears, no reload.
  await row(careful).locator('[data-testid="thread-badge"]').waitFor({ timeout: 15_000 });
  assert.equal(await row(careful).getAttribute("data-state"), "waiting");
  await shot(page, "inbox-waiting");
  const notes = await page.evaluate(() => window.__notes);
  assert.ok(notes.some((n) => n.tag === `waiting:${careful}`), JSON.stringify(notes));
  // The slow one finishes: no spinner, bold until read.
  await page.locator(`[data-testid="thread-row"][data-thread="${slow}"][data-state="idle"][data-unread="true"]`).waitFor({ timeout: 15_000 });
  assert.equal(await row(slow).locator('[data-testid="thread-spinner"]').count(), 0);
  // Opening it reads it.
  await row(slow).locator("a").click();
  await page.locator(`[data-testid="thread-row"][data-thread="${slow}"]:not([data-unread])`).waitFor({ timeout: 10_000 });
  await shot(page, "inbox-read");
  await ctx.close();
});

const shot = (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
