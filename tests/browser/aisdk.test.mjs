// The AI SDK example (examples/ai-sdk-chat: React, `useChat({resume: true})`)
// in headless Chromium against `wrangler dev` with the fake model: what an
// AI SDK app gets from threadline with no code of ours in the browser.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeLlm } from "../../local/fake-llm.mjs";
import { startDemoTools, toolDeclarations } from "../../local/demo-tools.mjs";
import { startWranglerDev } from "../support/wrangler.mjs";
import { newThread, until } from "../support/harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "test-artifacts/browser");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let llm, tools, worker, browser;

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  tools = await startDemoTools({ port: 0 });
  worker = await startWranglerDev({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", LLM_MODEL: "fake-model", TOOLS: JSON.stringify(toolDeclarations(tools.url)) },
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close?.();
  await tools?.close?.();
});

async function open(thread = newThread("aisdk")) {
  const ctx = await browser.newContext({ viewport: { width: 900, height: 760 } });
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${worker.url}/examples/ai-sdk-chat/#${thread}`);
  await page.getByTestId("input").waitFor();
  return { page, ctx, thread, errors };
}

async function send(page, text) {
  await page.getByTestId("input").fill(text);
  await page.getByTestId("input").press("Enter");
}

const shot = (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const answer = (page) => page.getByTestId("msg-assistant").last().getByTestId("text").allInnerTexts().then((t) => t.join(""));
const idle = (page) => page.getByTestId("status").filter({ hasText: "ready" }).waitFor({ timeout: 15000 });

describe("the AI SDK example in Chromium", () => {
  test("send: the answer streams in", async () => {
    const { page, ctx, errors } = await open();
    await send(page, "hello from useChat");
    await idle(page);
    await until(async () => (await answer(page)).includes("This is the fake model answering offline."), { timeoutMs: 15000, what: "the answer" });
    assert.equal(await answer(page), 'You said: "hello from useChat". This is the fake model answering offline.');
    await shot(page, "aisdk-send");
    assert.deepEqual(errors, []);
    await ctx.close();
  });

  test("reload mid-answer: the answer completes once", async () => {
    const { page, ctx, thread, errors } = await open();
    await send(page, "a slow one please [[slow:80]]");
    await until(async () => (await answer(page)).length > 8, { timeoutMs: 10000, what: "some text" });
    await page.reload();
    await page.getByTestId("input").waitFor();
    const full = 'You said: "a slow one please [[slow:80]]". This is the fake model answering offline.';
    await until(async () => (await answer(page)) === full, { timeoutMs: 15000, what: "the whole answer after the reload" });
    await idle(page);
    assert.equal(await page.getByTestId("msg-assistant").count(), 1, "one answer, not two");
    assert.equal(await page.getByTestId("msg-user").count(), 1);
    assert.equal(await answer(page), full, "every character once");
    await shot(page, "aisdk-reload");
    assert.deepEqual(errors, []);
    void thread;
    await ctx.close();
  });

  test("approve a tool: the run goes on in the same message", async () => {
    const { page, ctx, errors } = await open();
    await send(page, 'please [[tool:delete-note:{"id":"n7"}]]');
    await page.getByTestId("approve").waitFor({ timeout: 15000 });
    await shot(page, "aisdk-approval");
    await page.getByTestId("approve").click();
    await page.locator('[data-testid="tool"][data-state="output-available"]').waitFor({ timeout: 15000 });
    await until(async () => (await answer(page)).length > 0, { timeoutMs: 15000, what: "the model's answer after the tool" });
    await idle(page);
    assert.equal(await page.getByTestId("msg-assistant").count(), 1);
    await shot(page, "aisdk-approved");
    assert.deepEqual(errors, []);
    await ctx.close();
  });

  test("stop: the run is cancelled on the server, not only the connection", async () => {
    const { page, ctx, thread, errors } = await open();
    await send(page, "stop me [[slow:300]]");
    await page.getByTestId("stop").waitFor({ timeout: 10000 });
    await until(async () => (await answer(page)).length > 0, { timeoutMs: 10000, what: "some text" });
    await page.getByTestId("stop").click();
    await idle(page);
    const status = await (await fetch(`${worker.url}/instance-ai/threads/${thread}/status`)).json();
    assert.equal(status.hasActiveRun, false, "the run was cancelled");
    const history = await (await fetch(`${worker.url}/api/chat/${thread}/messages`)).json();
    assert.equal(history.length, 2);
    await shot(page, "aisdk-stopped");
    assert.deepEqual(errors, []);
    await ctx.close();
  });
});
