// The page at `/` in a real browser: headless Chromium (found by
// tests/support/chromium.mjs) driven by Playwright, against `wrangler dev`
// with the fake model and the demo tools. Screenshots of each state are
// saved under test-artifacts/browser/.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeLlm } from "../../local/fake-llm.mjs";
import { startDemoTools, toolDeclarations } from "../../local/demo-tools.mjs";
import { startDemoMcp } from "../../local/demo-mcp.mjs";
import { startWranglerDev } from "../support/wrangler.mjs";
import { newThread } from "../support/harness.mjs";
import { chromiumPath } from "../support/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "test-artifacts/browser");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let llm, tools, mcp, worker, browser;

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  tools = await startDemoTools({ port: 0 });
  mcp = await startDemoMcp({ port: 0 });
  worker = await startWranglerDev({
    vars: {
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: "test-key",
      LLM_MODEL: "fake-model",
      TOOLS: JSON.stringify(toolDeclarations(tools.url)),
      MCP_SERVERS: JSON.stringify([{ name: "notes", url: mcp.url }]),
    },
  });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close?.();
  await tools?.close?.();
  await mcp?.close?.();
});

/** A page on `threadId` (a fresh one by default), ready for input. */
async function openPage(threadId = newThread("page"), { viewport } = {}) {
  const ctx = await browser.newContext({ viewport: viewport ?? { width: 1100, height: 800 } });
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(`${worker.url}/#${threadId}`);
  await page.getByTestId("composer-input").waitFor();
  return { page, ctx, threadId };
}

async function send(page, text) {
  await page.getByTestId("composer-input").fill(text);
  await page.getByTestId("composer-input").press("Enter");
}

const shot = (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

/** The run's final answer as the server folded it (the truth to compare with). */
async function serverAnswers(threadId) {
  const res = await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`);
  const body = await res.json();
  return body.messages.filter((m) => m.role === "assistant").map((m) => m.content);
}

const idle = (page) => page.locator('[data-testid="turn"][data-running="true"]').waitFor({ state: "detached", timeout: 15_000 });

/**
 * Sends, waits for the turn to be on the page, then for it to end (`idle`
 * alone holds at once before the turn shows, and a next Enter would land
 * while the first send is still in flight).
 */
async function sendAndWait(page, text) {
  await send(page, text);
  await page.getByTestId("user-message").filter({ hasText: text }).last().waitFor();
  await idle(page);
}

describe("the page", () => {
  test("an MCP tool's call shows its server's name, and its approval card too", async () => {
    const { page, ctx } = await openPage(newThread("page-mcp"));
    await sendAndWait(page, '[[mcp:search_notes:{"query":"milk"}]]');
    const call = page.getByTestId("tool-call").filter({ hasText: "notes__search_notes" });
    await call.waitFor();
    assert.equal(await call.getByTestId("tool-server").innerText(), "MCP · notes");
    await send(page, '[[mcp:delete_note:{"id":"n1"}]]');
    const card = page.getByTestId("confirmations").locator("text=MCP server `notes`");
    await card.first().waitFor({ timeout: 15_000 });
    await shot(page, "30-mcp-tool");
    await ctx.close();
  });

  test("serves the page and its assets, with no external resources", async () => {
    const html = await (await fetch(`${worker.url}/`)).text();
    assert.match(html, /<script type="module" src="\/app.js">/);
    assert.doesNotMatch(html, /https?:\/\//, "no external fonts or scripts");
    const js = await fetch(`${worker.url}/app.js`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get("content-type"), /javascript/);
    // The API is still the Worker's.
    assert.equal((await fetch(`${worker.url}/instance-ai/threads/none/usage`)).status, 404);
  });

  test("send a message: the answer streams in and a tool call completes", async () => {
    const { page, ctx, threadId } = await openPage();
    assert.equal(await page.evaluate(() => document.activeElement?.id), "composer-input", "focus starts on the composer");
    await send(page, 'Weather please [[tool:weather:{"city":"Oslo"}]]');
    await page.getByTestId("user-message").filter({ hasText: "Weather please" }).waitFor();
    const tool = page.locator('[data-testid="tool-call"][data-tool="weather"]');
    await tool.waitFor();
    await page.locator('[data-testid="tool-call"][data-tool="weather"][data-status="done"]').waitFor();
    await idle(page);
    const texts = await page.getByTestId("assistant-text").allTextContents();
    const [answer] = await serverAnswers(threadId);
    assert.ok(answer.length > 0);
    assert.equal(texts.join(""), answer, "the page shows the answer the server stored");
    assert.equal(await page.getByTestId("connection").textContent(), "Live");
    await shot(page, "01-answer-and-tool-call");
    await ctx.close();
  });

  test("the transient status line shows while a tool runs, then clears", async () => {
    const { page, ctx } = await openPage();
    // `status` is ephemeral: it reaches the streams open when it is sent. A
    // new thread's page connects after its first send, so go live first.
    await sendAndWait(page, "Hello");
    await page.locator('[data-testid="connection"][data-state="open"]').waitFor();
    await send(page, 'Wait [[tool:slow:{"ms":1500}]]');
    const status = page.getByTestId("status-line");
    await status.filter({ hasText: "Running slow…" }).waitFor();
    await shot(page, "01b-status-line");
    await page.locator('[data-testid="tool-call"][data-tool="slow"][data-status="done"]').waitFor();
    await idle(page);
    assert.equal(await status.isHidden(), true);
    await ctx.close();
  });

  test("approve a destructive tool's confirmation", async () => {
    const { page, ctx } = await openPage();
    await send(page, 'Remove it [[tool:delete-note:{"id":"n1"}]]');
    const card = page.locator('[data-testid="confirmation"][data-input-type="approval"]');
    await card.waitFor();
    assert.equal(await card.getAttribute("data-severity"), "destructive");
    await page.locator('[data-testid="tool-call"][data-tool="delete-note"]', { hasText: "waiting for approval" }).waitFor();
    await shot(page, "02-confirmation-card");
    await card.getByTestId("approve").click();
    await page.locator('[data-testid="tool-call"][data-tool="delete-note"][data-status="done"]').waitFor();
    await card.waitFor({ state: "detached" });
    await idle(page);
    await shot(page, "03-approved");
    await ctx.close();
  });

  test("answer questions", async () => {
    const { page, ctx } = await openPage();
    await send(page, "Ask me [[ask]]");
    const card = page.locator('[data-testid="confirmation"][data-input-type="questions"]');
    await card.waitFor();
    await card.getByLabel("b").check();
    await shot(page, "04-questions");
    await card.getByTestId("approve").click();
    const result = page.locator('[data-testid="tool-call"][data-tool="ask-user"][data-status="done"]');
    await result.waitFor();
    await result.locator("summary", { hasText: "Result" }).click();
    const shown = JSON.parse(await result.getByTestId("tool-result").textContent());
    assert.deepEqual(shown.answers, [{ questionId: "q1", selectedOptions: ["b"] }]);
    await idle(page);
    await ctx.close();
  });

  test("a suspended run survives a reload: the card shows once, and approving resumes it", async () => {
    const { page, ctx } = await openPage();
    await send(page, 'Remove it [[tool:delete-note:{"id":"n2"}]]');
    await page.getByTestId("confirmation").waitFor();
    await page.reload();
    await page.getByTestId("confirmation").waitFor();
    assert.equal(await page.getByTestId("confirmation").count(), 1);
    assert.equal(await page.locator('[data-testid="tool-call"][data-tool="delete-note"]').count(), 1);
    await page.getByTestId("confirmation").getByTestId("approve").click();
    await page.locator('[data-testid="tool-call"][data-tool="delete-note"][data-status="done"]').waitFor();
    await idle(page);
    await ctx.close();
  });

  test("text and plan-review cards post their decisions", async () => {
    const { page, ctx } = await openPage();
    await send(page, "Tell me [[ask:text]]");
    const text = page.locator('[data-testid="confirmation"][data-input-type="text"]');
    await text.waitFor();
    await text.getByTestId("confirmation-text").fill("my answer");
    await text.getByTestId("approve").click();
    const done = page.locator('[data-testid="tool-call"][data-tool="ask-user"][data-status="done"]');
    await done.waitFor();
    await done.locator("summary", { hasText: "Result" }).click();
    assert.equal(JSON.parse(await done.getByTestId("tool-result").textContent()).answers[0].customText, "my answer");
    await idle(page);
    await send(page, "Plan it [[ask:plan-review]]");
    const plan = page.locator('[data-testid="confirmation"][data-input-type="plan-review"]');
    await plan.waitFor();
    assert.equal(await plan.getByTestId("tasks").locator("li").count(), 1);
    await shot(page, "14-plan-review");
    await plan.getByLabel("Feedback").fill("more detail please");
    await plan.getByTestId("deny").click();
    await plan.waitFor({ state: "detached" });
    await idle(page);
    await ctx.close();
  });

  test("sub-agents are collapsible, and the tasks checklist shows", async () => {
    const { page, ctx } = await openPage();
    await send(page, "Plan [[tasks]]");
    await page.getByTestId("tasks").first().waitFor();
    await idle(page);
    await send(page, "Delegate [[spawn]]");
    const sub = page.getByTestId("subagent").first();
    await sub.waitFor();
    await idle(page);
    assert.equal(await sub.evaluate((d) => d.open), true);
    await sub.locator("summary").first().click();
    assert.equal(await sub.evaluate((d) => d.open), false, "collapsed");
    await send(page, "And again");
    await page.getByTestId("turn").nth(2).waitFor();
    await idle(page);
    assert.equal(await page.getByTestId("subagent").first().evaluate((d) => d.open), false, "stays collapsed across updates");
    await shot(page, "15-subagent-and-tasks");
    await ctx.close();
  });

  test("reload in the middle of a streamed answer: every character once", async () => {
    const { page, ctx, threadId } = await openPage();
    await send(page, "Tell me slowly [[slow:150]]");
    const text = page.getByTestId("assistant-text");
    await text.first().waitFor();
    await page.waitForFunction(() => (document.querySelector('[data-testid="assistant-text"]')?.textContent ?? "").length > 12);
    const before = await text.first().textContent();
    await page.reload();
    await page.getByTestId("user-message").waitFor();
    await page.waitForFunction((b) => (document.querySelector('[data-testid="assistant-text"]')?.textContent ?? "").length >= b.length, before);
    await shot(page, "05-reloaded-mid-answer");
    // Still streaming after the reload: the restored run goes on live.
    assert.equal(await page.locator('[data-testid="turn"][data-running="true"]').count(), 1);
    await idle(page);
    const [answer] = await serverAnswers(threadId);
    assert.equal((await text.allTextContents()).join(""), answer);
    assert.equal(await page.getByTestId("user-message").count(), 1, "the user's message once");
    await shot(page, "06-reloaded-answer-complete");
    await ctx.close();
  });

  test("join in the middle of a streamed answer (a second tab): every character once", async () => {
    const { page, ctx, threadId } = await openPage();
    await send(page, "Tell me slowly, for a second tab [[slow:150]]");
    await page.waitForFunction(() => (document.querySelector('[data-testid="assistant-text"]')?.textContent ?? "").length > 12);
    const other = await openPage(threadId);
    await other.page.getByTestId("assistant-text").first().waitFor();
    await shot(other.page, "05b-joined-mid-answer");
    await idle(page);
    await idle(other.page);
    const [answer] = await serverAnswers(threadId);
    for (const p of [page, other.page]) {
      assert.equal((await p.getByTestId("assistant-text").allTextContents()).join(""), answer);
    }
    await other.ctx.close();
    await ctx.close();
  });

  test("the connection drops in the middle of a streamed answer and comes back: every character once", async () => {
    const { page, ctx, threadId } = await openPage();
    await send(page, "Tell me slowly, through a drop [[slow:150]]");
    await page.waitForFunction(() => (document.querySelector('[data-testid="assistant-text"]')?.textContent ?? "").length > 12);
    await ctx.setOffline(true);
    await new Promise((r) => setTimeout(r, 700));
    await ctx.setOffline(false);
    await idle(page);
    await shot(page, "05c-reconnected-mid-answer");
    const [answer] = await serverAnswers(threadId);
    assert.equal((await page.getByTestId("assistant-text").allTextContents()).join(""), answer);
    await ctx.close();
  });

  test("Stop cancels the run", async () => {
    const { page, ctx, threadId } = await openPage();
    await send(page, "Go on and on [[slow:300]]");
    await page.getByTestId("assistant-text").first().waitFor();
    const stop = page.getByTestId("stop");
    assert.equal(await stop.isEnabled(), true);
    await stop.click();
    await idle(page);
    assert.equal(await stop.isEnabled(), false);
    const status = await (await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`)).json();
    assert.equal(status.messages.at(-1).status, "cancelled");
    await shot(page, "07-stopped");
    await ctx.close();
  });

  test("a second message while busy is queued, then runs", async () => {
    const { page, ctx } = await openPage();
    await send(page, "First [[slow:150]]");
    await page.getByTestId("assistant-text").first().waitFor();
    await send(page, "Second, after the first");
    const item = page.getByTestId("queue-item");
    await item.waitFor();
    assert.match(await item.textContent(), /Second, after the first/);
    await shot(page, "08-queued");
    await page.getByTestId("user-message").filter({ hasText: "Second, after the first" }).waitFor({ timeout: 15_000 });
    await item.waitFor({ state: "detached" });
    await page.locator('[data-testid="turn"]').nth(1).and(page.locator('[data-running="false"]')).waitFor({ timeout: 15_000 });
    assert.equal(await page.getByTestId("turn").count(), 2);
    await shot(page, "09-queue-drained");
    await ctx.close();
  });

  test("two tabs on one thread stay in step", async () => {
    const a = await openPage();
    await send(a.page, "Hello from tab A");
    await idle(a.page);
    const b = await openPage(a.threadId);
    await b.page.getByTestId("user-message").waitFor();
    await send(b.page, "[[reason]] and hello from tab B");
    for (const { page } of [a, b]) {
      await page.getByTestId("user-message").filter({ hasText: "hello from tab B" }).waitFor();
      await page.locator('[data-testid="turn"]').nth(1).and(page.locator('[data-running="false"]')).waitFor({ timeout: 15_000 });
    }
    const conv = (p) => p.getByTestId("conversation").innerText();
    assert.equal(await conv(a.page), await conv(b.page));
    await b.page.getByTestId("thread-title").filter({ hasText: "Hello from tab A" }).waitFor();
    await shot(a.page, "10-tab-a");
    await shot(b.page, "11-tab-b");
    await a.ctx.close();
    await b.ctx.close();
  });

  test("reconnecting is visible, and nothing is lost across it", async () => {
    const { page, ctx, threadId } = await openPage();
    await sendAndWait(page, "Before the blip");
    await page.evaluate(() => window.threadline.session.reconnect());
    await send(page, "After the blip");
    await page.getByTestId("user-message").filter({ hasText: "After the blip" }).waitFor();
    await idle(page);
    const answers = await serverAnswers(threadId);
    assert.equal((await page.getByTestId("assistant-text").allTextContents()).join(""), answers.join(""));
    ctx.setOffline(true);
    await page.evaluate(() => window.threadline.session.reconnect());
    await page.locator('[data-testid="connection"][data-state="reconnecting"]').waitFor();
    await shot(page, "12-reconnecting");
    ctx.setOffline(false);
    await page.locator('[data-testid="connection"][data-state="open"]').waitFor({ timeout: 15_000 });
    await ctx.close();
  });

  test("edit, regenerate, switch and fork with the page's controls (by keyboard too); a reload shows the same", async () => {
    const { page, ctx, threadId } = await openPage(newThread("page-branch"));
    for (const q of ["one", "two", "three"]) await sendAndWait(page, q);
    const turns = page.getByTestId("turn");
    const users = () => page.getByTestId("user-message").allInnerTexts();
    // Edit the second message: a form in place of the bubble, Save sends it.
    await turns.nth(1).getByTestId("edit").click();
    await page.getByTestId("edit-text").fill("two, edited");
    await page.getByTestId("edit-save").click();
    await page.getByTestId("user-message").filter({ hasText: "two, edited" }).waitFor();
    await idle(page);
    await turns.nth(2).waitFor({ state: "detached" });
    assert.deepEqual(await users(), ["one", "two, edited"]);
    assert.equal(await turns.nth(1).getByTestId("message-branch").innerText(), "2/2");
    await shot(page, "20-branch-edited");
    // The first version again, to its newest turn; then back.
    await turns.nth(1).getByTestId("message-branch-prev").click();
    await page.getByTestId("user-message").filter({ hasText: "three" }).waitFor();
    assert.deepEqual(await users(), ["one", "two", "three"]);
    assert.equal(await turns.nth(1).getByTestId("message-branch").innerText(), "1/2");
    await shot(page, "21-branch-switched-back");
    const next = turns.nth(1).getByTestId("message-branch-next");
    await next.focus();
    await page.keyboard.press("Enter");
    await page.getByTestId("user-message").filter({ hasText: "two, edited" }).waitFor();
    // The first answer, given again: the conversation is that answer alone.
    await turns.nth(0).getByTestId("regenerate").click();
    await turns.nth(1).waitFor({ state: "detached" });
    await idle(page);
    assert.equal(await turns.nth(0).getByTestId("answer-branch").innerText(), "2/2");
    await shot(page, "22-branch-regenerated");
    // An edit by keyboard alone: Edit, type, Ctrl+Enter.
    await turns.nth(0).getByTestId("edit").focus();
    await page.keyboard.press("Enter");
    await page.getByTestId("edit-text").fill("one, edited");
    await page.keyboard.press("Control+Enter");
    await page.getByTestId("user-message").filter({ hasText: "one, edited" }).waitFor();
    await idle(page);
    const before = await page.getByTestId("conversation").innerText();
    await page.reload();
    await page.getByTestId("user-message").filter({ hasText: "one, edited" }).waitFor();
    assert.equal(await page.getByTestId("conversation").innerText(), before, "a reload shows the same path");
    assert.equal(await turns.nth(0).getByTestId("message-branch").innerText(), "2/2");
    await shot(page, "23-branch-reloaded");
    const server = await serverAnswers(threadId);
    assert.equal(server.length, 1);
    // Fork from the answer: a new thread opens with the conversation so
    // far, shared (no controls on it), and answers on its own.
    await turns.nth(0).getByTestId("fork").click();
    await page.waitForFunction((id) => location.hash.length > 1 && location.hash !== `#${id}`, threadId);
    await page.getByTestId("user-message").filter({ hasText: "one, edited" }).waitFor();
    assert.equal(await turns.nth(0).getByTestId("edit").count(), 0, "a shared turn is changed where it is");
    await sendAndWait(page, "and in the fork");
    assert.deepEqual(await users(), ["one, edited", "and in the fork"]);
    await shot(page, "24-branch-forked");
    assert.equal((await serverAnswers(threadId)).length, 1, "the original is unchanged");
    await ctx.close();
  });

  test("readable on a phone-sized screen", async () => {
    const { page, ctx } = await openPage(undefined, { viewport: { width: 390, height: 844 } });
    await sendAndWait(page, "Hi from a phone");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    assert.equal(overflow, false, "no horizontal scrolling");
    assert.equal(await page.getByRole("button", { name: "Threads" }).isVisible(), true);
    await shot(page, "13-phone");
    await ctx.close();
  });
});
