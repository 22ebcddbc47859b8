// The runtime's floor for `make bench`: the least a Worker and a Durable
// Object can do for the publish→delivery path threadline serves, in plain
// JavaScript with no checks: a publish is forwarded to the thread's object,
// which stores each event in SQLite and sends it on every subscriber's
// hibernatable socket; the Worker relays a socket to its client as SSE.
// No auth, no validation, no replay, no keep-alives: what is left is what
// workerd itself costs on this machine. Served by tests/support/serve.mjs
// (`--script`), so it exports the class names wrangler.toml binds.
import { DurableObject } from "cloudflare:workers";

const enc = new TextEncoder();

export default {
  async fetch(req, env) {
    const url = new URL(req.url);
    const parts = url.pathname.split("/");
    if (req.method === "GET" && parts[2] === "events") {
      const stub = env.THREAD.getByName(parts[3]);
      const resp = await stub.fetch("https://thread/subscribe", { headers: { upgrade: "websocket" } });
      const ws = resp.webSocket;
      ws.accept();
      const { readable, writable } = new IdentityTransformStream();
      const writer = writable.getWriter();
      ws.addEventListener("message", (e) => writer.write(enc.encode(`data: ${e.data}\n\n`)).catch(() => ws.close()));
      ws.addEventListener("close", () => writer.close().catch(() => {}));
      return new Response(readable, { headers: { "content-type": "text/event-stream" } });
    }
    if (req.method === "POST" && parts[4] === "runs") {
      return env.THREAD.getByName(parts[3]).fetch("https://thread/publish", { method: "POST", body: req.body });
    }
    return new Response("not found", { status: 404 });
  },
};

export class ThreadObject extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)");
    this.seq = ctx.storage.sql.exec("SELECT COALESCE(MAX(seq), 0) AS s FROM events").one().s;
  }
  async fetch(req) {
    if (req.headers.get("upgrade") === "websocket") {
      const { 0: client, 1: server } = new WebSocketPair();
      this.ctx.acceptWebSocket(server);
      return new Response(null, { status: 101, webSocket: client });
    }
    const events = await req.json();
    const sent = [];
    for (const e of events) {
      const seq = ++this.seq;
      const data = JSON.stringify(e);
      this.ctx.storage.sql.exec("INSERT INTO events (seq, data) VALUES (?, ?)", seq, data);
      sent.push(data);
    }
    for (const ws of this.ctx.getWebSockets()) for (const data of sent) ws.send(data);
    return Response.json({ lastEventId: this.seq });
  }
}

export class Directory extends DurableObject {}
export class StreamObject extends DurableObject {}
