// The resumable connection against an in-memory event server that drops
// connections at random: every durable event arrives once, in order; the
// cursor is what is asked for on reconnect; backoff, tokens and refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ResumableStream } from "../dist/index.js";

const ev = (id, extra = {}) => ({ type: "tool-call", runId: "r", agentId: "a", ts: id, payload: { toolCallId: `c${id}`, toolName: "t", args: {} }, ...extra, id });

/** A fake thread: `publish` appends; each GET replays after the cursor, then goes live. */
function fakeServer({ dropEvery = 0, status = () => 200 } = {}) {
  const log = [];
  const live = new Set();
  const requests = [];
  const frame = (e) => (e.id ? `id: ${e.id}\ndata: ${JSON.stringify({ ...e, id: undefined })}\n\n` : `data: ${JSON.stringify(e)}\n\n`);
  const fetch = async (url, init) => {
    const u = new URL(url);
    requests.push({ lastEventId: u.searchParams.get("lastEventId"), header: init.headers["last-event-id"], token: u.searchParams.get("token") });
    const s = status(requests.length, u);
    if (s !== 200) return new Response(JSON.stringify({ error: { code: "x", message: "x" } }), { status: s });
    const cursor = Number(init.headers["last-event-id"]);
    let sent = 0;
    let ctrl;
    const body = new ReadableStream({
      start(c) {
        ctrl = c;
        const sub = {
          send(e) {
            try {
              // Replays sometimes overlap what the client had: the client must drop those.
              c.enqueue(new TextEncoder().encode(frame(e)));
              if (dropEvery && ++sent % dropEvery === 0) {
                live.delete(sub);
                c.close();
              }
            } catch {
              live.delete(sub);
            }
          },
        };
        const overlap = Math.max(0, cursor - 2);
        for (const e of log.filter((e) => e.id > overlap)) sub.send(e);
        live.add(sub);
        init.signal?.addEventListener("abort", () => {
          live.delete(sub);
          try {
            c.error(new DOMException("aborted", "AbortError"));
          } catch {}
        });
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
  return {
    fetch,
    requests,
    publish(e) {
      if (e.id) log.push(e);
      for (const s of [...live]) s.send(e);
    },
  };
}

const until = async (cond, ms = 3000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
};

test("no durable event lost or duplicated across random drops; ephemeral ones pass through", async () => {
  const server = fakeServer({ dropEvery: 7 });
  const got = [];
  const s = new ResumableStream({ url: "http://x/events/t", fetch: server.fetch, onEvent: (e) => got.push(e), backoff: { initialMs: 1, maxMs: 5 } }).start();
  await until(() => s.state === "open");
  for (let i = 1; i <= 300; i++) {
    server.publish(ev(i));
    if (i % 10 === 0) server.publish({ type: "status", runId: "r", agentId: "a", ts: i, payload: { message: `m${i}` } });
    if (i % 5 === 0) await new Promise((r) => setTimeout(r, 2));
  }
  await until(() => got.filter((e) => e.id).length >= 300);
  await until(() => s.state === "open");
  server.publish({ type: "status", runId: "r", agentId: "a", ts: 0, payload: { message: "live" } });
  await until(() => got.some((e) => !e.id && e.payload.message === "live"));
  s.close();
  const ids = got.filter((e) => e.id).map((e) => e.id);
  assert.deepEqual(ids, Array.from({ length: 300 }, (_, i) => i + 1));
  assert.equal(s.cursor, 300);
  assert.ok(server.requests.length > 10, "it reconnected");
  for (const r of server.requests) assert.equal(r.lastEventId, r.header, "query and header agree");
});

test("starts from the given cursor", async () => {
  const server = fakeServer();
  for (let i = 1; i <= 5; i++) server.publish(ev(i));
  const got = [];
  const s = new ResumableStream({ url: "http://x/e", cursor: 3, fetch: server.fetch, onEvent: (e) => got.push(e.id) }).start();
  await until(() => got.length === 2);
  s.close();
  assert.deepEqual(got, [4, 5]);
  assert.equal(server.requests[0].lastEventId, "3");
});

test("backs off between failures, reports reconnecting, then opens", async () => {
  const server = fakeServer({ status: (n) => (n <= 3 ? 503 : 200) });
  const states = [];
  const s = new ResumableStream({
    url: "http://x/e",
    fetch: server.fetch,
    onEvent: () => {},
    onState: (st, info) => states.push([st, info.delayMs]),
    backoff: { initialMs: 10, maxMs: 1000, jitter: 0 },
  }).start();
  await until(() => s.state === "open");
  s.close();
  const delays = states.filter(([st]) => st === "reconnecting").map(([, d]) => d);
  assert.deepEqual(delays, [10, 20, 40]);
});

test("a 401 fetches a fresh stream token; a 400 stops for good", async () => {
  let issued = 0;
  const server = fakeServer({ status: (n) => (n === 1 ? 401 : 200) });
  const s = new ResumableStream({ url: "http://x/e", fetch: server.fetch, onEvent: () => {}, token: async () => `tok${++issued}`, backoff: { initialMs: 1 } }).start();
  await until(() => s.state === "open");
  s.close();
  assert.deepEqual(server.requests.map((r) => r.token), ["tok1", "tok2"]);

  const bad = fakeServer({ status: () => 400 });
  const states = [];
  new ResumableStream({ url: "http://x/e", fetch: bad.fetch, onEvent: () => {}, onState: (st) => states.push(st) }).start();
  await until(() => states.includes("closed"));
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(bad.requests.length, 1);
});

test("named events (Instance AI's run-sync) are not the log's: only messages reach onEvent", async () => {
  const body = `id: 1\ndata: ${JSON.stringify({ ...ev(1), id: undefined })}\n\nevent: run-sync\ndata: {"runId":"r","runIds":["r"],"status":"active"}\n\nid: 2\ndata: ${JSON.stringify({ ...ev(2), id: undefined })}\n\n`;
  const fetch = async () => new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  const got = [];
  const s = new ResumableStream({ url: "http://x/e", fetch, onEvent: (e) => got.push(e), backoff: { initialMs: 1, maxMs: 5 } }).start();
  await until(() => got.length >= 2);
  s.close();
  assert.deepEqual(got.map((e) => e.id), [1, 2]);
  assert.ok(got.every((e) => e.type === "tool-call"));
});
