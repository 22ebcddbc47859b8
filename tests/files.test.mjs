// Files in messages, over real HTTP on workerd with Miniflare's R2 (the
// bucket the Worker uses, listed through Miniflare's API): the AI SDK's own
// `Chat` sending a FileList, AG-UI's `HttpAgent` with media parts, agora's
// and n8n's attachments, uploads, reads (Range, ETag), who may read a file,
// every refusal with the log and the bucket as they were, a thread's delete,
// and unsent uploads removed after their grace period.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { AbstractChat, DefaultChatTransport } from "ai";
import { HttpAgent } from "@ag-ui/client";
import { startWorker, client, newThread, until, hs256Jwt } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";

// A real PNG (1x1) and a small real PDF.
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d4948445200000001000000010806000000" + "1f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2e0a70000000049454e44ae426082",
  "hex",
);
const PDF = Buffer.from("%PDF-1.4\n1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n");
const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");

let llm, worker, api;

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  worker = await startWorker({
    vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", LLM_MODEL_INPUT: "text,image,file", FILE_GRACE_MS: "1500" },
  });
  api = client(worker.url);
});
after(async () => {
  await worker?.stop();
  await llm?.close();
});

/** What the fake model was sent last for a message containing `marker`. */
const sentToModel = (marker) =>
  llm.requests.findLast((r) => JSON.stringify(r.messages.at(-1)?.content ?? "").includes(marker))?.messages.at(-1);

const runOver = (thread) =>
  until(async () => !(await api.status(thread)).json?.hasActiveRun, { timeoutMs: 15000, what: "the run to end" });

/** The thread's log position and file count, and its objects in the bucket. */
async function stored(thread) {
  const stats = await api.stats(thread);
  return {
    lastEventId: stats.json?.lastEventId ?? 0,
    files: stats.json?.files ?? 0,
    objects: (await worker.bucket(`threads/${thread}/`)).length,
  };
}

// ---- the AI SDK's Chat with a FileList ---------------------------------

/**
 * The browser's FileList (array-like, not an array: `ai` takes an array as
 * parts already converted) and FileReader, for `ai`'s own conversion.
 */
class FileListShim {
  constructor(files) {
    files.forEach((f, i) => (this[i] = f));
    this.length = files.length;
  }
  item(i) {
    return this[i] ?? null;
  }
  *[Symbol.iterator]() {
    for (let i = 0; i < this.length; i++) yield this[i];
  }
}
globalThis.FileList ??= FileListShim;
globalThis.FileReader ??= class {
  readAsDataURL(blob) {
    blob.arrayBuffer().then(
      (b) => {
        this.result = `data:${blob.type};base64,${Buffer.from(b).toString("base64")}`;
        this.onload?.({ target: this });
      },
      (e) => this.onerror?.(e),
    );
  }
};
const fileList = (...files) => new globalThis.FileList(files);

class State {
  status = "ready";
  error = undefined;
  #messages = [];
  get messages() {
    return this.#messages;
  }
  set messages(m) {
    this.#messages = [...m];
  }
  pushMessage = (m) => void (this.#messages = this.#messages.concat(this.snapshot(m)));
  popMessage = () => void (this.#messages = this.#messages.slice(0, -1));
  replaceMessage = (i, m) => void (this.#messages = [...this.#messages.slice(0, i), this.snapshot(m), ...this.#messages.slice(i + 1)]);
  snapshot = (v) => (v != null && typeof v === "object" && Array.isArray(v.parts) ? { ...v, parts: v.parts.map((p) => ({ ...p })) } : v);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State() });
  }
}

describe("files through every protocol", () => {
  test("the AI SDK's Chat sends a PNG and a PDF as a FileList: the model sees them, the history links them, the bytes come back", async () => {
    const thread = newThread("files-ai");
    const chat = new Chat({ id: thread, transport: new DefaultChatTransport({ api: `${worker.url}/api/chat` }) });
    const files = fileList(new File([PNG], "pixel.png", { type: "image/png" }), new File([PDF], "doc.pdf", { type: "application/pdf" }));
    await chat.sendMessage({ text: "what are these? ai-sdk-marker", files });
    assert.equal(chat.status, "ready", String(chat.error));

    // The model got the image inline as an image_url part, and the PDF as a file part: the same bytes.
    const content = sentToModel("ai-sdk-marker").content;
    const image = content.find((p) => p.type === "image_url");
    assert.equal(image.image_url.url, `data:image/png;base64,${PNG.toString("base64")}`);
    const pdf = content.find((p) => p.type === "file");
    assert.equal(pdf.file.filename, "doc.pdf");
    assert.equal(pdf.file.file_data, `data:application/pdf;base64,${PDF.toString("base64")}`);
    const answer = chat.messages.at(-1).parts.filter((p) => p.type === "text").map((p) => p.text).join("");
    assert.match(answer, new RegExp(`an image \\(image/png, ${PNG.length} bytes\\), a file \\(doc.pdf, ${PDF.length} bytes\\)`));

    // A reload: the history's user message has both files, at URLs this client reads.
    const history = (await api.call("GET", `/api/chat/${thread}/messages`)).json;
    assert.deepEqual(history[0].parts.map((p) => p.type), chat.messages[0].parts.map((p) => p.type), "the same message as the client's: files, then text");
    const parts = history[0].parts.filter((p) => p.type === "file");
    assert.deepEqual(parts.map((p) => [p.mediaType, p.filename]), [["image/png", "pixel.png"], ["application/pdf", "doc.pdf"]]);
    for (const [part, bytes] of [[parts[0], PNG], [parts[1], PDF]]) {
      const res = await fetch(part.url);
      assert.equal(res.status, 200);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), bytes);
      assert.equal(res.headers.get("etag"), `"${sha256(bytes)}"`);
      assert.equal(res.headers.get("content-type"), part.mediaType);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
      assert.match(res.headers.get("content-security-policy"), /^sandbox/);
    }
    assert.match((await fetch(parts[0].url)).headers.get("content-disposition"), /^inline; filename="pixel.png"/);
    assert.match((await fetch(parts[1].url)).headers.get("content-disposition"), /^attachment; filename="doc.pdf"/);
    assert.equal((await stored(thread)).objects, 2);

    // The next turn resends the whole conversation, data: URLs included:
    // only the new message's files count, and nothing is stored twice.
    await chat.sendMessage({ text: "and now? second-turn-marker" });
    assert.equal(chat.status, "ready", String(chat.error));
    assert.equal((await stored(thread)).objects, 2);
    // The model still sees the earlier files in the conversation.
    const second = llm.requests.findLast((r) => JSON.stringify(r).includes("second-turn-marker"));
    assert.ok(JSON.stringify(second.messages).includes(PNG.toString("base64")), "earlier files stay in the memory");
  });

  test("a 1 MB image as a data: URL passes MAX_BODY_BYTES; a queued message and a regenerated answer carry their files", async () => {
    const thread = newThread("files-queue");
    const big = Buffer.concat([PNG, crypto.randomBytes(1024 * 1024)]);
    const send = (id, parts, extra = {}) =>
      api.call("POST", "/api/chat", { id: thread, messages: [{ id, role: "user", parts }], trigger: "submit-message", ...extra });
    const image = { type: "file", mediaType: "image/png", filename: "big.png", url: `data:image/png;base64,${big.toString("base64")}` };
    // A long answer holds the thread while a second message queues.
    const first = await send("q1", [{ type: "text", text: "hold on [[slow:200]]" }]);
    assert.equal(first.status, 200);
    const queued = await send("q2", [{ type: "text", text: "queued-marker" }, image], { mode: "queue" });
    assert.equal(queued.status, 200, queued.text);
    assert.match(queued.text, /data-queued/);
    await until(async () => sentToModel("queued-marker"), { timeoutMs: 20000, what: "the queued turn to reach the model" });
    const got = sentToModel("queued-marker").content.find((p) => p.type === "image_url").image_url.url;
    assert.equal(got, `data:image/png;base64,${big.toString("base64")}`, "the queued message's 1 MB image, whole");
    await runOver(thread);
    const before = llm.requests.length;
    const again = await api.call("POST", "/api/chat", { id: thread, messages: [], trigger: "regenerate-message" });
    assert.equal(again.status, 200, again.text);
    await runOver(thread);
    const regenerated = llm.requests.slice(before).find((r) => JSON.stringify(r.messages.at(-1)).includes("queued-marker"));
    assert.ok(regenerated.messages.at(-1).content.some((p) => p.type === "image_url"), "the regenerated answer sees the image again");
    assert.equal((await stored(thread)).objects, 1);
  });

  test("AG-UI's HttpAgent sends image and document parts; its history shows them by URL", async () => {
    const thread = newThread("files-ag");
    const agent = new HttpAgent({ url: `${worker.url}/ag-ui`, threadId: thread });
    agent.addMessage({
      id: `u-${Date.now()}`,
      role: "user",
      content: [
        { type: "text", text: "look ag-ui-marker" },
        { type: "image", source: { type: "data", value: PNG.toString("base64"), mimeType: "image/png" }, metadata: { filename: "p.png" } },
        { type: "document", source: { type: "data", value: PDF.toString("base64"), mimeType: "application/pdf" } },
      ],
    });
    let error;
    await agent.runAgent({}, { onRunErrorEvent: ({ event }) => void (error = event) });
    assert.equal(error, undefined);
    const content = sentToModel("ag-ui-marker").content;
    assert.equal(content.find((p) => p.type === "image_url").image_url.url, `data:image/png;base64,${PNG.toString("base64")}`);
    assert.ok(content.find((p) => p.type === "file"));
    const history = (await api.call("GET", `/ag-ui/threads/${thread}/messages`)).json;
    const user = history.find((m) => m.role === "user");
    const image = user.content.find((p) => p.type === "image");
    assert.equal(image.source.type, "url");
    assert.equal(image.metadata.filename, "p.png");
    assert.deepEqual(Buffer.from(await (await fetch(image.source.value)).arrayBuffer()), PNG);
    assert.equal(user.content.find((p) => p.type === "document").source.mimeType, "application/pdf");
  });

  test("agora's and n8n's attachments: inline base64 on a send, shown on the thread's detail and messages", async () => {
    const agora = await fetch(`${worker.url}/agent/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ message: "agora-marker", attachments: [{ data: PNG.toString("base64"), mediaType: "image/png", name: "a.png" }] }),
    });
    assert.equal(agora.status, 200);
    const thread = agora.headers.get("x-agent-thread-id");
    await agora.text();
    await runOver(thread);
    assert.ok(sentToModel("agora-marker").content.some((p) => p.type === "image_url"));
    const detail = (await api.call("GET", `/agent/threads/${thread}`)).json;
    const [att] = detail.messages.find((m) => m.role === "user").attachments;
    assert.deepEqual([att.name, att.mediaType, att.size, att.sha256], ["a.png", "image/png", PNG.length, sha256(PNG)]);
    assert.deepEqual(Buffer.from(await (await fetch(att.url)).arrayBuffer()), PNG);

    const n8n = newThread("files-n8n");
    const r = await api.chat(n8n, "n8n-marker", { attachments: [{ data: Buffer.from("a,b\n1,2\n").toString("base64"), mimeType: "text/csv", fileName: "t.csv" }] });
    assert.equal(r.status, 200, r.text);
    await runOver(n8n);
    const text = sentToModel("n8n-marker").content.find((p) => p.type === "text" && p.text.startsWith("<file"));
    assert.equal(text.text, '<file name="t.csv" type="text/csv">\na,b\n1,2\n\n</file>');
    const msgs = (await api.messages(n8n)).json.messages;
    assert.equal(msgs[0].attachments[0].name, "t.csv");
  });

  test("uploads (raw and multipart), then a send by fileId; Range, ETag and HEAD on a read", async () => {
    const thread = newThread("files-up");
    const raw = await fetch(`${worker.url}/v1/threads/${thread}/files?name=pixel.png`, { method: "POST", headers: { "content-type": "image/png" }, body: PNG });
    assert.equal(raw.status, 201);
    const [up] = (await raw.json()).files;
    assert.deepEqual([up.name, up.mediaType, up.size], ["pixel.png", "image/png", PNG.length]);

    const form = new FormData();
    form.append("files", new Blob([PDF], { type: "application/pdf" }), "doc.pdf");
    form.append("files", new Blob(["# notes\n"], { type: "text/markdown" }), "notes.md");
    const multi = await fetch(`${worker.url}/v1/threads/${thread}/files`, { method: "POST", body: form });
    assert.equal(multi.status, 201);
    const { files } = await multi.json();
    assert.deepEqual(files.map((f) => f.name), ["doc.pdf", "notes.md"]);

    const send = await api.chat(thread, "", { attachments: [{ fileId: up.fileId }, { fileId: files[1].fileId }] });
    assert.equal(send.status, 200, send.text);
    await runOver(thread);
    const start = (await api.messages(thread)).json.messages[0];
    assert.deepEqual(start.attachments.map((a) => a.name), ["pixel.png", "notes.md"]);

    const range = await fetch(up.url, { headers: { range: "bytes=1-3" } });
    assert.equal(range.status, 206);
    assert.equal(range.headers.get("content-range"), `bytes 1-3/${PNG.length}`);
    assert.deepEqual(Buffer.from(await range.arrayBuffer()), PNG.subarray(1, 4));
    const bad = await fetch(up.url, { headers: { range: `bytes=${PNG.length}-` } });
    assert.equal(bad.status, 416);
    assert.equal(bad.headers.get("content-range"), `bytes */${PNG.length}`);
    const again = await fetch(up.url, { headers: { "if-none-match": `"${sha256(PNG)}"` } });
    assert.equal(again.status, 304);
    const head = await fetch(up.url, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(PNG.length));
    assert.equal((await head.arrayBuffer()).byteLength, 0);
    // The same bytes again are the same object.
    const twice = await fetch(`${worker.url}/v1/threads/${thread}/files?name=copy.png`, { method: "POST", headers: { "content-type": "image/png" }, body: PNG });
    assert.equal((await twice.json()).files[0].fileId, up.fileId);
    assert.equal((await stored(thread)).objects, 3);
    // Flue's client reads a file part's bytes at its own path.
    const flue = await fetch(`${worker.url}/agents/default/${thread}/attachments/${up.fileId}`);
    assert.deepEqual(Buffer.from(await flue.arrayBuffer()), PNG);
  });

  test("every refusal is a clear 4xx and leaves the log and the bucket as they were", async () => {
    const thread = newThread("files-no");
    assert.equal((await api.chat(thread, "first")).status, 200);
    await runOver(thread);
    const before = await stored(thread);
    const html = Buffer.from("<!DOCTYPE html><html><body><script>alert(1)</script></body></html>");
    const big = Buffer.alloc(10 * 1024 * 1024 + 1, 0x61);
    let n = 0;
    const aisdk = (parts) => ({ id: thread, messages: [{ id: `m-${++n}`, role: "user", parts: [{ type: "text", text: "x" }, ...parts] }], trigger: "submit-message" });
    const dataPart = (type, bytes, name) => ({ type: "file", mediaType: type, filename: name, url: `data:${type};base64,${bytes.toString("base64")}` });
    const cases = [
      ["an HTML page declared as a PNG", aisdk([dataPart("image/png", html, "x.png")]), 415, "file_type_mismatch"],
      ["a type FILE_TYPES does not list", aisdk([dataPart("text/html", html, "x.html")]), 415, "unsupported_media_type"],
      ["a file over MAX_FILE_BYTES (10 MiB) as a data: URL", aisdk([dataPart("text/plain", big, "big.txt")]), 413, "file_too_large"],
      ["eleven files", aisdk(Array.from({ length: 11 }, (_, i) => dataPart("text/plain", Buffer.from(`f${i}`), `${i}.txt`))), 400, "too_many_files"],
      ["a malformed data: URL", aisdk([{ type: "file", mediaType: "image/png", url: "data:image/png;base64,@@@@" }]), 400, "invalid_file"],
      ["a fileId from another thread", aisdk([{ type: "file", mediaType: "image/png", url: `${worker.url}/v1/threads/other/files/f_${"0".repeat(32)}` }]), 404, "file_not_found"],
    ];
    for (const [what, body, status, code] of cases) {
      const r = await api.call("POST", "/api/chat", body);
      assert.equal(r.status, status, `${what}: ${r.text}`);
      assert.equal(r.json.error.code, code, what);
      assert.deepEqual(await stored(thread), before, `${what}: nothing stored`);
    }
    const upload = await fetch(`${worker.url}/v1/threads/${thread}/files`, { method: "POST", headers: { "content-type": "image/png" }, body: html });
    assert.equal(upload.status, 415);
    const exe = await fetch(`${worker.url}/v1/threads/${thread}/files`, { method: "POST", headers: { "content-type": "application/x-msdownload" }, body: "MZ" });
    assert.equal(exe.status, 415);
    assert.deepEqual(await stored(thread), before, "refused uploads store nothing");
    // A model that cannot take PDFs refuses before anything is stored.
    const narrow = await startWorker({ vars: { LLM_BASE_URL: llm.url, LLM_API_KEY: "k", LLM_MODEL_INPUT: "text,image" } });
    try {
      const t2 = newThread("files-narrow");
      const r = await fetch(`${narrow.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ id: t2, messages: [{ id: "m1", role: "user", parts: [dataPart("application/pdf", PDF, "doc.pdf")] }] }) });
      const body = await r.json();
      assert.equal(r.status, 400);
      assert.equal(body.error.code, "unsupported_attachment");
      assert.match(body.error.message, /fake-model.*file/);
      assert.deepEqual(await narrow.bucket(""), []);
    } finally {
      await narrow.stop();
    }
  });

  test("deleting a thread deletes its files; an upload never sent is removed after its grace period", async () => {
    const thread = newThread("files-del");
    const up = await fetch(`${worker.url}/v1/threads/${thread}/files?name=a.png`, { method: "POST", headers: { "content-type": "image/png" }, body: PNG });
    const [file] = (await up.json()).files;
    assert.equal((await api.chat(thread, "keep it", { attachments: [{ fileId: file.fileId }] })).status, 200);
    await runOver(thread);
    assert.equal((await stored(thread)).objects, 1);
    assert.equal((await api.call("DELETE", `/instance-ai/threads/${thread}`)).status, 200);
    await until(async () => (await worker.bucket(`threads/${thread}/`)).length === 0, { what: "the thread's files to go" });
    assert.equal((await fetch(file.url)).status, 404);

    const unsent = newThread("files-grace");
    await fetch(`${worker.url}/v1/threads/${unsent}/files`, { method: "POST", headers: { "content-type": "text/plain" }, body: "never sent" });
    assert.equal((await stored(unsent)).objects, 1);
    await until(async () => (await stored(unsent)).objects === 0 && (await stored(unsent)).files === 0, {
      timeoutMs: 10000,
      what: "the alarm to remove the unsent upload (FILE_GRACE_MS=1500)",
    });
  });
});

describe("who may read a file", () => {
  const SECRET = "files-secret-0123456789abcdef0123456789";
  const bearer = (sub) => hs256Jwt(SECRET, { sub, exp: Math.floor(Date.now() / 1000) + 300 });
  let w;
  before(async () => {
    w = await startWorker({ vars: { AUTH_MODE: "jwt", AUTH_JWT_SECRET: SECRET, LLM_BASE_URL: llm.url, LLM_API_KEY: "k" } });
  });
  after(async () => w?.stop());

  test("Alice's file: Bob's token gets 404, a stream token for her thread reads it, none gets 401", async () => {
    const thread = newThread("files-alice");
    const as = (who) => ({ authorization: `Bearer ${bearer(who)}` });
    const up = await fetch(`${w.url}/v1/threads/${thread}/files?name=a.png`, { method: "POST", headers: { ...as("alice"), "content-type": "image/png" }, body: PNG });
    assert.equal(up.status, 201);
    const [file] = (await up.json()).files;
    assert.equal((await fetch(file.url, { headers: as("alice") })).status, 200);
    const bob = await fetch(file.url, { headers: as("bob") });
    assert.equal(bob.status, 404);
    assert.equal((await bob.json()).error.code, "file_not_found");
    assert.equal((await fetch(file.url)).status, 401);
    // Bob cannot add files to her thread either.
    const intrude = await fetch(`${w.url}/v1/threads/${thread}/files`, { method: "POST", headers: { ...as("bob"), "content-type": "image/png" }, body: PNG });
    assert.equal(intrude.status, 404);
    const token = await fetch(`${w.url}/instance-ai/threads/${thread}/stream-token`, { method: "POST", headers: as("alice") });
    const { token: streamToken } = await token.json();
    const viaToken = await fetch(`${file.url}?token=${encodeURIComponent(streamToken)}`);
    assert.equal(viaToken.status, 200);
    assert.deepEqual(Buffer.from(await viaToken.arrayBuffer()), PNG);
  });
});
