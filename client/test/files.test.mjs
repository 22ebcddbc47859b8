// Files in messages, without a server: a turn's attachments from a live
// `run-start` and from the history, what a send and an upload put on the
// wire, refusals as ThreadlineError with the server's code, upload progress
// through XMLHttpRequest, and reading a file with the client's headers.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ThreadlineClient,
  ThreadSession,
  ThreadlineError,
  attachmentsOf,
  formatBytes,
  isInlineImage,
  mediaTypeFor,
} from "../dist/index.js";

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** A fetch that records each request and answers with `answer(url, init)`. */
function recorder(answer) {
  const calls = [];
  const fetch = async (url, init = {}) => {
    calls.push({ url: String(url), init });
    return answer(new URL(url, "http://x"), init);
  };
  return { calls, fetch };
}

const png = { fileId: "f_aa", mediaType: "image/png", size: 74, name: "red.png", sha256: "aa".repeat(32) };
const pdf = { fileId: "f_bb", mediaType: "application/pdf", size: 2048, sha256: "bb".repeat(32) };

const runStart = (runId, payload) => ({ type: "run-start", runId, agentId: "orchestrator", ts: 1, payload: { messageId: `m-${runId}`, ...payload }, id: 1 });

test("a live run-start's attachments are the turn's", () => {
  const s = new ThreadSession(new ThreadlineClient({ fetch: async () => json(500, {}) }), "t");
  s.apply(runStart("r1", { message: "look", attachments: [png, pdf, { url: "https://example.com/a.png", mediaType: "image/png", name: "a.png" }] }));
  s.apply(runStart("r2", { message: "no files" }));
  assert.equal(s.turns.length, 2);
  assert.equal(s.turns[0].message, "look");
  assert.deepEqual(s.turns[0].attachments, [png, pdf, { url: "https://example.com/a.png", mediaType: "image/png", name: "a.png" }]);
  assert.deepEqual(s.turns[1].attachments, [], "none is an empty list");
});

test("a message with only files: empty text, its attachments", () => {
  const s = new ThreadSession(new ThreadlineClient({ fetch: async () => json(500, {}) }), "t");
  s.apply(runStart("r1", { message: "", attachments: [png] }));
  assert.equal(s.turns[0].message, "");
  assert.deepEqual(s.turns[0].attachments, [png]);
});

test("the history's attachments are the restored turns', with their urls; a later run-start keeps them", async () => {
  const url = "http://x/v1/threads/t/files/f_aa";
  const { fetch } = recorder((u) => {
    if (u.pathname.endsWith("/messages")) {
      return json(200, {
        threadId: "t",
        nextEventId: 3,
        queue: { items: [], paused: false },
        // Each user message, then the answer naming its run.
        messages: [
          { id: "m1", role: "user", createdAt: "2026-01-01T00:00:00.001Z", content: "see", reasoning: "", isStreaming: false, attachments: [{ ...png, url }] },
          { id: "r1:assistant", runId: "r1", role: "assistant", createdAt: "2026-01-01T00:00:00.001Z", content: "ok", reasoning: "", isStreaming: false, agentTree: null },
          { id: "m2", role: "user", createdAt: "2026-01-01T00:00:00.002Z", content: "plain", reasoning: "", isStreaming: false },
          { id: "r2:assistant", runId: "r2", role: "assistant", createdAt: "2026-01-01T00:00:00.002Z", content: "", reasoning: "", isStreaming: false, agentTree: null },
        ],
      });
    }
    if (u.pathname.endsWith("/status")) return json(200, { hasActiveRun: false, isSuspended: false, backgroundTasks: [] });
    return json(403, { error: { code: "forbidden", message: "no stream in this test" } });
  });
  const s = new ThreadSession(new ThreadlineClient({ fetch }), "t");
  await s.open();
  s.close();
  assert.deepEqual(
    s.turns.map((t) => [t.runId, t.message, t.attachments]),
    [
      ["r1", "see", [{ ...png, url }]],
      ["r2", "plain", []],
    ],
  );
  // A run-start seen again (another tab's replay, say) carries no url: the known one stays.
  s.apply(runStart("r1", { message: "see", attachments: [png] }));
  assert.deepEqual(s.turns[0].attachments, [{ ...png, url }]);
});

test("attachments are read checked: entries without an id or url, or a type, are dropped", () => {
  assert.deepEqual(attachmentsOf(undefined), []);
  assert.deepEqual(attachmentsOf("x"), []);
  assert.deepEqual(
    attachmentsOf([null, 3, { mediaType: "image/png" }, { fileId: "f_1" }, { fileId: "f_2", mediaType: "text/plain", size: "big", name: 7 }, png]),
    [{ fileId: "f_2", mediaType: "text/plain" }, png],
  );
});

test("send puts the attachments' ids on the wire; without any, no field", async () => {
  const { calls, fetch } = recorder(() => json(200, { runId: "r" }));
  const c = new ThreadlineClient({ fetch });
  await c.send("t", "", { attachments: ["f_aa", { fileId: "f_bb" }] });
  await c.send("t", "hi", { attachments: [] });
  assert.equal(calls[0].url, "/instance-ai/chat/t");
  assert.deepEqual(JSON.parse(calls[0].init.body), { message: "", attachments: [{ fileId: "f_aa" }, { fileId: "f_bb" }] });
  assert.deepEqual(JSON.parse(calls[1].init.body), { message: "hi" });
});

test("a send's refusal carries the server's code", async () => {
  const c = new ThreadlineClient({ fetch: async () => json(400, { error: { code: "unsupported_attachment", message: "the model does not take application/pdf" } }) });
  await assert.rejects(c.send("t", "x", { attachments: ["f_bb"] }), (e) => e instanceof ThreadlineError && e.status === 400 && e.code === "unsupported_attachment" && /application\/pdf/.test(e.message));
});

test("uploadFiles posts one multipart request, a part per file, typed by name when the browser gave no type", async () => {
  const stored = [{ ...png, url: "http://x/v1/threads/t/files/f_aa" }];
  const { calls, fetch } = recorder(() => json(201, { files: stored }));
  const c = new ThreadlineClient({ baseUrl: "https://api.example/", fetch, headers: () => ({ authorization: "Bearer tok" }) });
  const progress = [];
  const files = [new File([new Uint8Array(74)], "red.png", { type: "image/png" }), new File(["# notes\n"], "notes.md"), new Blob(["{}"], { type: "application/json" })];
  const got = await c.uploadFiles("t 1", files, { onProgress: (p) => progress.push(p) });
  assert.deepEqual(got, stored);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].url, "https://api.example/v1/threads/t%201/files");
  assert.equal(calls[0].init.method, "POST");
  assert.equal(calls[0].init.headers.authorization, "Bearer tok");
  assert.equal(calls[0].init.headers["content-type"], undefined, "FormData sets its own boundary");
  const parts = [...calls[0].init.body.entries()].map(([field, f]) => [field, f.name, f.type, f.size]);
  assert.deepEqual(parts, [
    ["files", "red.png", "image/png", 74],
    ["files", "notes.md", "text/markdown", 8],
    ["files", "file-3", "application/json", 2],
  ]);
  assert.deepEqual(progress, [{ loaded: 84, total: 84 }], "fetch reports once, at the end");
});

test("an upload's refusal is a ThreadlineError with the server's code and message", async () => {
  for (const [status, code, message] of [
    [413, "file_too_large", "a file is at most 10485760 bytes (MAX_FILE_BYTES)"],
    [415, "file_type_mismatch", "a file declared as `image/png` holds text/html"],
    [400, "too_many_files", "a message carries at most 10 files (MAX_FILES_PER_MESSAGE)"],
  ]) {
    const c = new ThreadlineClient({ fetch: async () => json(status, { error: { code, message } }) });
    await assert.rejects(c.uploadFiles("t", [new File(["x"], "x.png", { type: "image/png" })]), (e) => e instanceof ThreadlineError && e.status === status && e.code === code && e.message === message);
  }
  // Not JSON (a proxy's page, or the runtime's own): the status stands in for the code.
  const c = new ThreadlineClient({ fetch: async () => new Response("Service Unavailable", { status: 503, statusText: "Service Unavailable" }) });
  await assert.rejects(c.uploadFiles("t", [new File(["x"], "a.txt")]), (e) => e instanceof ThreadlineError && e.code === "http_503" && e.body === "Service Unavailable");
});

/** A stand-in for the browser's XMLHttpRequest, driven by `script(xhr)`. */
function fakeXhr(script) {
  const made = [];
  class FakeXHR {
    constructor() {
      this.headers = {};
      this.upload = {};
      made.push(this);
    }
    open(method, url) {
      this.method = method;
      this.url = url;
    }
    setRequestHeader(k, v) {
      this.headers[k] = v;
    }
    send(body) {
      this.body = body;
      queueMicrotask(() => script(this));
    }
    abort() {
      this.aborted = true;
      this.onabort?.();
    }
  }
  return { FakeXHR, made };
}

test("in a browser, uploadFiles reports progress as the body goes out (XMLHttpRequest)", async (t) => {
  const { FakeXHR, made } = fakeXhr((xhr) => {
    for (const loaded of [100, 600, 1000]) xhr.upload.onprogress?.({ loaded, total: 1000, lengthComputable: true });
    xhr.status = 201;
    xhr.statusText = "Created";
    xhr.responseText = JSON.stringify({ files: [png] });
    xhr.onload();
  });
  globalThis.XMLHttpRequest = FakeXHR;
  t.after(() => delete globalThis.XMLHttpRequest);
  const c = new ThreadlineClient({ headers: () => ({ authorization: "Bearer tok" }) });
  const progress = [];
  assert.deepEqual(await c.uploadFiles("t", [new File(["x"], "red.png", { type: "image/png" })], { onProgress: (p) => progress.push(p.loaded) }), [png]);
  assert.deepEqual(progress, [100, 600, 1000]);
  assert.equal(made[0].method, "POST");
  assert.equal(made[0].url, "/v1/threads/t/files");
  assert.deepEqual(made[0].headers, { authorization: "Bearer tok" });
  assert.ok(made[0].body instanceof FormData);
});

test("in a browser, an upload's refusal and an abort", async (t) => {
  const { FakeXHR } = fakeXhr((xhr) => {
    if (xhr.aborted) return;
    xhr.status = 415;
    xhr.responseText = JSON.stringify({ error: { code: "unsupported_media_type", message: "files of type `text/html` are not accepted" } });
    xhr.onload();
  });
  globalThis.XMLHttpRequest = FakeXHR;
  t.after(() => delete globalThis.XMLHttpRequest);
  const c = new ThreadlineClient();
  await assert.rejects(c.uploadFiles("t", [new File(["<p>"], "a.html", { type: "text/html" })]), (e) => e instanceof ThreadlineError && e.status === 415 && e.code === "unsupported_media_type");
  const ac = new AbortController();
  const p = c.uploadFiles("t", [new File(["x"], "a.txt")], { signal: ac.signal });
  await Promise.resolve();
  ac.abort();
  await assert.rejects(p, (e) => e.name === "AbortError");
  await assert.rejects(c.uploadFiles("t", [new File(["x"], "a.txt")], { signal: ac.signal }), (e) => e.name === "AbortError", "already aborted");
});

test("a session's upload failure is its lastError; an abort is not", async () => {
  const s = new ThreadSession(new ThreadlineClient({ fetch: async () => json(415, { error: { code: "file_type_mismatch", message: "no" } }) }), "t");
  await assert.rejects(s.uploadFiles([new File(["x"], "x.png", { type: "image/png" })]));
  assert.equal(s.lastError.code, "file_type_mismatch");
  const aborting = new ThreadSession(
    new ThreadlineClient({ fetch: async () => Promise.reject(new DOMException("aborted", "AbortError")) }),
    "t",
  );
  await assert.rejects(aborting.uploadFiles([new File(["x"], "a.txt")]));
  assert.equal(aborting.lastError, undefined);
});

test("fileBlob reads a file with the client's headers; a refusal throws with its code", async () => {
  const { calls, fetch } = recorder((u) =>
    u.pathname.endsWith("/f_aa")
      ? new Response(new Uint8Array([1, 2, 3]), { status: 200, headers: { "content-type": "image/png" } })
      : json(404, { error: { code: "file_not_found", message: "no such file on this thread" } }),
  );
  const c = new ThreadlineClient({ fetch, headers: () => ({ authorization: "Bearer tok" }) });
  assert.equal(c.fileUrl("t", "f_aa"), "/v1/threads/t/files/f_aa");
  const blob = await c.fileBlob("t", "f_aa");
  assert.equal(blob.type, "image/png");
  assert.deepEqual([...new Uint8Array(await blob.arrayBuffer())], [1, 2, 3]);
  assert.equal(calls[0].init.headers.authorization, "Bearer tok");
  await assert.rejects(c.fileBlob("t", "f_zz"), (e) => e instanceof ThreadlineError && e.code === "file_not_found");
});

test("the rules a page shows files by", () => {
  assert.equal(isInlineImage({ mediaType: "image/png" }), true);
  assert.equal(isInlineImage({ mediaType: "IMAGE/JPEG; q=1" }), true);
  assert.equal(isInlineImage({ mediaType: "image/svg+xml" }), false, "SVG can hold script: never inline");
  assert.equal(isInlineImage({ mediaType: "text/html" }), false);
  assert.equal(mediaTypeFor("a.md"), "text/markdown");
  assert.equal(mediaTypeFor("a.CSV", ""), "text/csv");
  assert.equal(mediaTypeFor("a.png", "application/octet-stream"), "image/png");
  assert.equal(mediaTypeFor("a.png", "image/webp"), "image/webp", "a declared type stands (the server checks it)");
  assert.equal(mediaTypeFor("archive"), "application/octet-stream");
  assert.deepEqual([0, 1023, 1536, 10 * 1024 * 1024, 200 * 1024].map(formatBytes), ["0 B", "1023 B", "1.5 KB", "10 MB", "200 KB"]);
});
