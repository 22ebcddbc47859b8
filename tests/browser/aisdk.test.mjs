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
import { png } from "../../local/png.mjs";
import { newThread, until } from "../support/harness.mjs";
import { chromiumPath } from "../support/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "test-artifacts/browser");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** A real PNG: `w`×`h` pixels of one colour. */
const solid = (w, h, rgb) => png(w, h, () => rgb);

/** A minimal PDF (its leading bytes are what the server checks). */
const PDF = Buffer.from("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n");

let llm, tools, worker, browser;

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  tools = await startDemoTools({ port: 0 });
  worker = await startWranglerDev({
    build: false,
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", LLM_MODEL: "fake-model", LLM_MODEL_INPUT: "text,image,file", TOOLS: JSON.stringify(toolDeclarations(tools.url)) },
  });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
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
/** The image, once loaded: its natural size and where it came from. */
const shown = (img) => img.evaluate(async (i) => {
  await i.decode();
  return { width: i.naturalWidth, height: i.naturalHeight, src: i.src };
});
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

  test("attach files: sent as useChat sends a FileList, shown in the message, and from the server after a reload", async () => {
    const { page, ctx, thread, errors } = await open();
    const picture = solid(24, 16, [220, 40, 40]);
    await page.getByTestId("attach").setInputFiles([
      { name: "red.png", mimeType: "image/png", buffer: picture },
      { name: "brief.pdf", mimeType: "application/pdf", buffer: PDF },
    ]);
    assert.deepEqual(await page.getByTestId("attached").locator("li").allInnerTexts(), ["red.png", "brief.pdf"], "the chosen files, before sending");
    await shot(page, "aisdk-files-chosen");
    await send(page, "What is in this picture?");
    await idle(page);
    const full = `You said: "What is in this picture?". I see an image (image/png, ${picture.length} bytes), a file (brief.pdf, ${PDF.length} bytes). This is the fake model answering offline.`;
    await until(async () => (await answer(page)) === full, { timeoutMs: 15000, what: "the answer naming the files" });
    assert.equal(await page.getByTestId("attached").count(), 0, "the list is cleared once sent");
    assert.equal(await page.getByTestId("attach").evaluate((i) => i.files.length), 0, "the input is cleared once sent");

    // The message as useChat holds it: the FileList read as data: URLs.
    const user = page.getByTestId("msg-user");
    const img = user.getByTestId("file-image");
    const live = await shown(img);
    assert.deepEqual({ ...live, src: live.src.slice(0, 22) }, { width: 24, height: 16, src: "data:image/png;base64," });
    assert.equal(await user.getByTestId("file-link").innerText(), "brief.pdf");
    await shot(page, "aisdk-files");

    // After a reload the history (GET /api/chat/:id/messages) has them at
    // the Worker's URLs, and those URLs give the same bytes.
    await page.reload();
    await page.getByTestId("msg-assistant").waitFor();
    assert.equal(await answer(page), full);
    assert.equal(await img.count(), 1, "the picture once");
    const stored = await shown(img);
    assert.equal(stored.width, 24);
    assert.equal(stored.height, 16);
    assert.ok(stored.src.startsWith(`${worker.url}/v1/threads/`), `the image from the server: ${stored.src}`);
    assert.deepEqual(Buffer.from(await (await fetch(stored.src)).arrayBuffer()), picture, "the stored image's bytes");
    const link = await user.getByTestId("file-link").getAttribute("href");
    assert.equal(await user.getByTestId("file-link").innerText(), "brief.pdf");
    assert.ok(link.startsWith(`${worker.url}/v1/threads/`), `the PDF from the server: ${link}`);
    assert.deepEqual(Buffer.from(await (await fetch(link)).arrayBuffer()), PDF, "the stored PDF's bytes");
    const history = await (await fetch(`${worker.url}/api/chat/${thread}/messages`)).json();
    assert.deepEqual(
      history[0].parts.filter((p) => p.type === "file").map((p) => [p.mediaType, p.filename, p.url]),
      [
        ["image/png", "red.png", stored.src],
        ["application/pdf", "brief.pdf", link],
      ],
    );
    await shot(page, "aisdk-files-reloaded");
    assert.deepEqual(errors, []);
    await ctx.close();
  });

  test("a refused file: useChat's error shows the server's reason", async () => {
    const { page, ctx, thread, errors } = await open();
    await page.getByTestId("attach").setInputFiles([{ name: "page.html", mimeType: "text/html", buffer: Buffer.from("<p>hi</p>") }]);
    await send(page, "take this page");
    const error = page.getByTestId("error");
    await error.waitFor({ timeout: 15000 });
    assert.match(await error.innerText(), /unsupported_media_type/);
    assert.equal(await page.getByTestId("status").innerText(), "error");
    const res = await fetch(`${worker.url}/api/chat/${thread}/messages`);
    assert.deepEqual(res.ok ? await res.json() : [], [], "nothing stored");
    await shot(page, "aisdk-file-refused");
    assert.deepEqual(errors, []);
    await ctx.close();
  });
});
