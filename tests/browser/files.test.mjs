// Files in messages and markdown answers on the page at `/`, in headless
// Chromium (tests/support/chromium.mjs finds it) driven by Playwright,
// against `wrangler dev` with the fake model taking text, images and files.
// Attach a picture with the real file input, see it in the message live and
// after a reload; a refused file shows the server's reason and sends
// nothing; a hostile markdown answer renders its table and code block and
// runs nothing. Screenshots under test-artifacts/browser/.
//
// It checks the Worker and the page as built (build/, web/dist/; `make test`
// builds first), so wrangler starts without wrangler.toml's [build].
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startFakeLlm } from "../../local/fake-llm.mjs";
import { startWranglerDev } from "../support/wrangler.mjs";
import { png } from "../../local/png.mjs";
import { newThread } from "../support/harness.mjs";
import { chromiumPath } from "../support/chromium.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const shots = path.join(root, "test-artifacts/browser");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/** A real PNG: `w`×`h` pixels of one colour. */
const solid = (w, h, rgb) => png(w, h, () => rgb);

let llm, worker, browser;

before(async () => {
  fs.mkdirSync(shots, { recursive: true });
  llm = await startFakeLlm({ port: 0, delayMs: 5 });
  worker = await startWranglerDev({
    build: false,
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "test-key", LLM_MODEL: "fake-model", LLM_MODEL_INPUT: "text,image,file" },
  });
  browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  await worker?.stop();
  await llm?.close?.();
});

/**
 * A page on `threadId`, ready for input, recording what must not happen:
 * page errors, CSP violations, dialogs (an `alert` a hostile answer ran).
 */
async function openPage(threadId = newThread("files")) {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  await ctx.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const page = await ctx.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e}`));
  page.on("dialog", (d) => {
    problems.push(`dialog: ${d.type()} ${d.message()}`);
    void d.dismiss();
  });
  await page.goto(`${worker.url}/#${threadId}`);
  await page.getByTestId("composer-input").waitFor();
  return { page, ctx, threadId, problems };
}

const shot = (page, name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
const idle = (page) => page.locator('[data-testid="turn"][data-running="true"]').waitFor({ state: "detached", timeout: 15_000 });
const cspViolations = (page) => page.evaluate(() => window.__cspViolations);

/** The image, once shown: its natural size and its source's scheme. */
const shown = (img) => img.evaluate((i) => ({ width: i.naturalWidth, height: i.naturalHeight, scheme: new URL(i.src).protocol }));

describe("files in messages", () => {
  test("attach a picture and a text file: previews, sent, shown in the message, and again after a reload", async () => {
    const { page, ctx, threadId, problems } = await openPage();
    const picture = solid(24, 16, [220, 40, 40]);
    await page.getByTestId("attach-input").setInputFiles([
      { name: "red.png", mimeType: "image/png", buffer: picture },
      { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("some notes\n") },
    ]);
    const previews = page.getByTestId("attachment-preview");
    await page.locator('[data-testid="attachment-preview"][data-state="ready"]').nth(1).waitFor();
    assert.equal(await previews.count(), 2);
    const thumb = previews.filter({ has: page.getByTestId("attachment-thumb") });
    assert.equal(await thumb.count(), 1, "the picture previews as a thumbnail");
    assert.equal((await shown(thumb.getByTestId("attachment-thumb"))).width, 24);
    assert.match(await previews.nth(1).textContent(), /notes\.txt.*11 B/);
    assert.equal(await page.getByTestId("upload-progress").count(), 0, "progress goes once uploaded");
    await shot(page, "20-files-previews");

    await page.getByTestId("composer-input").fill("What is in this picture?");
    await page.getByTestId("composer-input").press("Enter");
    await page.getByTestId("user-message").filter({ hasText: "What is in this picture?" }).waitFor();
    const img = page.locator('[data-testid="message-image"][data-state="loaded"]');
    await img.waitFor();
    assert.deepEqual(await shown(img), { width: 24, height: 16, scheme: "blob:" });
    const chip = page.getByTestId("attachment-chip");
    assert.match(await chip.textContent(), /notes\.txt.*11 B/);
    assert.equal(await previews.count(), 0, "the composer is empty once sent");
    await idle(page);
    await shot(page, "21-files-sent");

    // The server has them on the message.
    const history = await (await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`)).json();
    const user = history.messages.find((m) => m.role === "user");
    assert.deepEqual(
      user.attachments.map((a) => [a.name, a.mediaType, a.size]),
      [
        ["red.png", "image/png", picture.length],
        ["notes.txt", "text/plain", 11],
      ],
    );

    // A reload restores them from the history.
    await page.reload();
    await page.getByTestId("user-message").filter({ hasText: "What is in this picture?" }).waitFor();
    await img.waitFor();
    assert.deepEqual(await shown(img), { width: 24, height: 16, scheme: "blob:" });
    assert.match(await chip.textContent(), /notes\.txt.*11 B/);
    assert.equal(await img.count(), 1, "the picture once");
    await shot(page, "22-files-reloaded");

    // A click opens it larger.
    await img.click();
    const viewer = page.getByTestId("image-viewer");
    await viewer.waitFor();
    assert.equal(await viewer.locator("img").evaluate((i) => i.naturalWidth), 24);
    await shot(page, "23-files-viewer");
    await page.getByTestId("viewer-close").click();
    await viewer.waitFor({ state: "hidden" });

    assert.deepEqual(await cspViolations(page), [], "CSP violations");
    assert.deepEqual(problems, []);
    await ctx.close();
  });

  test("a slow upload shows its progress, and a send waits for it", async () => {
    const { page, ctx, threadId, problems } = await openPage();
    // 1.5 MB at 1 MB/s: long enough to watch.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 1024 * 1024 });
    await page.getByTestId("attach-input").setInputFiles([{ name: "log.txt", mimeType: "text/plain", buffer: Buffer.alloc(1536 * 1024, "a") }]);
    await page.waitForFunction(() => {
      const v = document.querySelector('[data-testid="upload-progress"]')?.value ?? 0;
      return v > 0 && v < 100;
    });
    await shot(page, "23b-files-uploading");
    await page.getByTestId("composer-input").fill("Sent while uploading");
    await page.getByTestId("composer-input").press("Enter");
    assert.equal(await page.getByTestId("send").isDisabled(), true, "one send at a time");
    await page.getByTestId("user-message").filter({ hasText: "Sent while uploading" }).waitFor({ timeout: 15_000 });
    assert.match(await page.getByTestId("attachment-chip").textContent(), /log\.txt.*1\.5 MB/);
    await idle(page);
    const history = await (await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`)).json();
    assert.deepEqual(history.messages.find((m) => m.role === "user").attachments.map((a) => [a.name, a.size]), [["log.txt", 1536 * 1024]]);
    assert.deepEqual(problems, []);
    await ctx.close();
  });

  test("a refused file shows the server's reason, and nothing is sent", async () => {
    const { page, ctx, threadId, problems } = await openPage();
    const error = page.getByTestId("error");
    // HTML bytes named and declared as a PNG.
    await page.getByTestId("attach-input").setInputFiles([{ name: "x.png", mimeType: "image/png", buffer: Buffer.from("<!doctype html><script>parent.__pwned = 1</script>") }]);
    await error.filter({ hasText: "file_type_mismatch" }).waitFor();
    assert.match(await error.textContent(), /^x\.png: .*text\/html.*\(file_type_mismatch\)$/);
    assert.equal(await page.getByTestId("attachment-preview").count(), 0, "the refused file leaves the composer");
    await shot(page, "24-files-refused");

    // A type the server does not take at all.
    await page.getByTestId("attach-input").setInputFiles([{ name: "page.html", mimeType: "text/html", buffer: Buffer.from("<p>hi</p>") }]);
    await error.filter({ hasText: "unsupported_media_type" }).waitFor();
    assert.match(await error.textContent(), /^page\.html: .*text\/html.*\(unsupported_media_type\)$/);

    // Send with nothing left: no message.
    await page.getByTestId("send").click();
    await page.waitForTimeout(500);
    assert.equal(await page.getByTestId("turn").count(), 0);
    const res = await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`);
    const messages = res.status === 404 ? [] : (await res.json()).messages;
    assert.deepEqual(messages, [], "the server has no message");
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(problems, []);
    await ctx.close();
  });
});

describe("dropping and pasting files", () => {
  test("a dropped file and a pasted image join the composer; one removed is not sent", async () => {
    const { page, ctx, threadId, problems } = await openPage();
    const picture = [...solid(10, 10, [40, 90, 220])];
    // What a drag from the desktop and a paste of a screenshot deliver.
    await page.evaluate((bytes) => {
      const drop = new DataTransfer();
      drop.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
      const composer = document.querySelector('[data-testid="composer"]');
      composer.dispatchEvent(new DragEvent("dragover", { dataTransfer: drop, bubbles: true, cancelable: true }));
      composer.dispatchEvent(new DragEvent("drop", { dataTransfer: drop, bubbles: true, cancelable: true }));
      const paste = new DataTransfer();
      paste.items.add(new File([new Uint8Array(bytes)], "image.png", { type: "image/png" }));
      document.querySelector('[data-testid="composer-input"]').dispatchEvent(new ClipboardEvent("paste", { clipboardData: paste, bubbles: true, cancelable: true }));
    }, picture);
    await page.locator('[data-testid="attachment-preview"][data-state="ready"]').nth(1).waitFor();
    assert.deepEqual(await page.getByTestId("attachment-preview").evaluateAll((els) => els.map((e) => e.dataset.name)), ["table.csv", "image.png"]);
    await shot(page, "26-files-dropped-and-pasted");
    await page.getByTestId("attachment-preview").filter({ hasText: "table.csv" }).getByTestId("attachment-remove").click();
    assert.equal(await page.getByTestId("attachment-preview").count(), 1);
    // Only files, no text.
    await page.getByTestId("send").click();
    await page.locator('[data-testid="message-image"][data-state="loaded"]').waitFor();
    assert.equal(await page.getByTestId("attachment-chip").count(), 0);
    assert.equal(await page.getByTestId("user-message").count(), 0, "no text, no bubble");
    await idle(page);
    const history = await (await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`)).json();
    const user = history.messages.find((m) => m.role === "user");
    assert.equal(user.content, "");
    assert.deepEqual(user.attachments.map((a) => a.name), ["image.png"]);
    assert.deepEqual(await cspViolations(page), [], "CSP violations");
    assert.deepEqual(problems, []);
    await ctx.close();
  });
});

describe("markdown answers", () => {
  // [[say:TEXT]] makes the fake model answer exactly TEXT (up to the first "]]").
  const answer = [
    "# Report",
    "",
    "| Name | Value |",
    "|:-----|------:|",
    "| alpha | 1 |",
    "| beta | 2 |",
    "",
    "- first item",
    "- second item",
    "",
    '<img src=x onerror="window.__pwned = 1; alert(1)">',
    "",
    "<script>window.__pwned = 2; alert(2)</script>",
    "",
    "[click me](javascript:window.__pwned=3) and [data link](data:text/html;base64,PHNjcmlwdD5hbGVydCg0KTwvc2NyaXB0Pg==) and [the docs](https://example.com/docs)",
    "",
    "```js",
    'console.log("hello from a code block");',
    "```",
  ].join("\n");

  test("a hostile answer renders its table, list and code block, and runs nothing", async () => {
    const { page, ctx, threadId, problems } = await openPage();
    await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: worker.url });
    await page.getByTestId("composer-input").fill(`[[say:${answer}]]`);
    await page.getByTestId("composer-input").press("Enter");
    await idle(page);
    const text = page.getByTestId("assistant-text");
    await text.locator("pre code").waitFor();

    const check = async () => {
      // Structure: heading, table, list, code block with its copy button.
      assert.equal(await text.locator("h1").textContent(), "Report");
      assert.deepEqual(await text.locator("table th").allTextContents(), ["Name", "Value"]);
      assert.deepEqual(await text.locator("table td").allTextContents(), ["alpha", "1", "beta", "2"]);
      assert.equal(await text.locator("table td.align-right").count(), 2, "alignment as a class, not a style");
      assert.deepEqual(await text.locator("li").allTextContents(), ["first item", "second item"]);
      assert.equal(await text.locator("pre code").textContent(), 'console.log("hello from a code block");\n');
      assert.equal(await text.getByTestId("copy-code").count(), 1);
      // Raw HTML is text, not elements.
      assert.equal(await page.locator('[data-testid="conversation"] img, [data-testid="conversation"] script, [data-testid="conversation"] [style]').count(), 0);
      assert.match(await text.textContent(), /<img src=x onerror=/);
      assert.match(await text.textContent(), /<script>window.__pwned = 2/);
      // Only the https link is a link, and it opens apart.
      const links = text.locator("a");
      assert.equal(await links.count(), 1);
      assert.equal(await links.getAttribute("href"), "https://example.com/docs");
      assert.equal(await links.getAttribute("target"), "_blank");
      assert.equal(await links.getAttribute("rel"), "noopener noreferrer");
      assert.match(await text.textContent(), /\[click me\]\(javascript:/, "the javascript: link stays text");
      assert.match(await text.textContent(), /\[data link\]\(data:/, "the data: link stays text");
      assert.equal(await page.evaluate(() => window.__pwned), undefined, "no script of the answer ran");
    };
    await check();

    // The copy button copies the code.
    await text.getByTestId("copy-code").click();
    await text.getByTestId("copy-code").filter({ hasText: "Copied" }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'console.log("hello from a code block");\n');
    await shot(page, "25-markdown-answer");

    // The same after a reload (the answer from the history).
    await page.reload();
    await text.locator("pre code").waitFor();
    await check();
    const [stored] = (await (await fetch(`${worker.url}/instance-ai/threads/${threadId}/messages`)).json()).messages.filter((m) => m.role === "assistant");
    assert.equal(stored.content, answer, "the model's answer was the hostile text");
    assert.deepEqual(await cspViolations(page), [], "CSP violations");
    assert.deepEqual(problems, []);
    await ctx.close();
  });
});
