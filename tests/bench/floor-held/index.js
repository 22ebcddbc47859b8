// The runtime's floor for an object-held stream, beside tests/bench/floor/
// in `make bench`: the least a Worker and a Durable Object can do for the
// publish→delivery path when the object holds every subscriber's response
// open (the design that keeps it awake, and billed, while anyone listens).
// The Worker forwards a subscribe to the thread's object and answers with
// the object's response as is (workerd pipes the bytes); the object keeps
// a writer per subscriber, stores each published event in SQLite and
// writes it to every writer as an SSE frame. No auth, no validation, no
// replay, no keep-alives. Served by tests/support/serve.mjs (`--script`),
// so it exports the class names wrangler.toml binds. A subscribe with
// `?pipe` is piped into a stream of the Worker's own instead, with the
// options threadline's Worker pipes a held stream with (src/client.rs), for
// local/fanout-cost.mjs: what that hop costs, apart from everything else. A
// subscribe with `?tee` is served from one native tee per generation of
// readers instead of a writer each (one write per publish, workerd copies
// it to every branch): the object answers with the reader's own first part
// (here a comment) and parks a branch, which the Worker claims and pipes
// after it, as threadline's Worker takes a stream's legs one after another.
// A subscribe with `?rpc` hands the object the writable end of the Worker's
// own stream over RPC instead, which the object writes as it writes its
// own (no pipe in the Worker; the Worker can never write to it again).
import { DurableObject } from "cloudflare:workers";

const enc = new TextEncoder();

export default {
  async fetch(req, env, ctx) {
    const url = new URL(req.url);
    const parts = url.pathname.split("/");
    if (req.method === "GET" && parts[2] === "events") {
      const thread = env.THREAD.getByName(parts[3]);
      if (url.searchParams.has("tee")) {
        const first = await thread.fetch("https://thread/subscribe?tee");
        const { readable, writable } = new IdentityTransformStream();
        const legs = async () => {
          await first.body.pipeTo(writable, { preventClose: true });
          const live = await thread.fetch(`https://thread/claim?ticket=${first.headers.get("x-ticket")}`);
          await live.body.pipeTo(writable);
        };
        ctx.waitUntil(legs().catch(() => {}));
        return new Response(readable, { headers: { "content-type": "text/event-stream" } });
      }
      if (url.searchParams.has("rpc")) {
        const { readable, writable } = new IdentityTransformStream();
        ctx.waitUntil(thread.hold(writable).catch(() => {}));
        return new Response(readable, { headers: { "content-type": "text/event-stream" } });
      }
      const resp = await thread.fetch("https://thread/subscribe");
      if (!url.searchParams.has("pipe")) return resp;
      const { readable, writable } = new IdentityTransformStream();
      const options = { preventClose: true, signal: new AbortController().signal };
      ctx.waitUntil(resp.body.pipeTo(writable, options).catch(() => {}));
      return new Response(readable, { headers: resp.headers });
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
    // One writer per open subscriber response.
    this.writers = new Set();
    // `?tee`: the unread branch new readers are teed from, until the first
    // write to its generation's writer (a branch nobody reads would keep
    // every write); the branches readers have yet to claim.
    this.keep = null;
    this.parked = new Map();
    this.tickets = 0;
  }
  /** `?rpc`: a subscriber's stream, as the Worker passed it over RPC. */
  hold(writable) {
    this.writers.add(writable.getWriter());
  }
  async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname === "/subscribe" && url.searchParams.has("tee")) {
      if (!this.keep) {
        const { readable, writable } = new IdentityTransformStream();
        this.keep = readable;
        this.writers.add(writable.getWriter());
      }
      const [keep, branch] = this.keep.tee();
      this.keep = keep;
      const ticket = String(++this.tickets);
      this.parked.set(ticket, branch);
      return new Response(": joined\n\n", { headers: { "content-type": "text/event-stream", "x-ticket": ticket } });
    }
    if (url.pathname === "/claim") {
      const branch = this.parked.get(url.searchParams.get("ticket"));
      this.parked.delete(url.searchParams.get("ticket"));
      return new Response(branch);
    }
    if (url.pathname === "/subscribe") {
      const { readable, writable } = new IdentityTransformStream();
      this.writers.add(writable.getWriter());
      return new Response(readable, { headers: { "content-type": "text/event-stream" } });
    }
    const events = await req.json();
    const chunks = [];
    for (const e of events) {
      const seq = ++this.seq;
      const data = JSON.stringify(e);
      this.ctx.storage.sql.exec("INSERT INTO events (seq, data) VALUES (?, ?)", seq, data);
      chunks.push(enc.encode(`data: ${data}\n\n`));
    }
    // A generation that was written to takes no more readers.
    if (this.keep) {
      this.keep.cancel().catch(() => {});
      this.keep = null;
    }
    // Not awaited: a write settles when its reader takes it. A writer whose
    // client went away fails, and is dropped.
    for (const w of this.writers) for (const c of chunks) w.write(c).catch(() => this.writers.delete(w));
    return Response.json({ lastEventId: this.seq });
  }
}

export class Directory extends DurableObject {}
export class StreamObject extends DurableObject {}
