// A peer for `make bench`: the publish→delivery path written on Cloudflare's
// Agents SDK (npm `agents`, the version package.json pins) as a team would
// write it from the SDK's docs. A thread is an Agent instance named by its
// id; a publish goes to it through getAgentByName and its onRequest, which
// stores each event with `this.sql` and broadcasts it to every connected
// client; clients subscribe with the SDK's own WebSocket route
// (routeAgentRequest: /agents/thread/<thread>, the THREAD binding in kebab
// case), as its client library connects. No auth, no validation, no replay.
//
// The SDK is TypeScript-built ESM with dependencies and needs nodejs_compat:
// run.mjs bundles this file with esbuild into tests/bench/agents-peer/dist/
// and serves it with that flag added (tests/support/serve.mjs
// `--compat-flag`). It exports the class names wrangler.toml binds: the
// Agent is ThreadObject (the THREAD binding).
import { Agent, getAgentByName, routeAgentRequest } from "agents";
import { DurableObject } from "cloudflare:workers";

export class ThreadObject extends Agent {
  onStart() {
    this.sql`CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT NOT NULL)`;
  }

  /** A publish: a JSON array of events, answered with the last one's id. */
  async onRequest(request) {
    const events = await request.json();
    let lastEventId = 0;
    for (const event of events) {
      lastEventId = this.sql`INSERT INTO events (data) VALUES (${JSON.stringify(event)}) RETURNING seq`[0].seq;
    }
    for (const event of events) this.broadcast(JSON.stringify(event));
    return Response.json({ lastEventId });
  }
}

export default {
  async fetch(request, env) {
    const parts = new URL(request.url).pathname.split("/");
    // POST /instance-ai/threads/:thread/runs/:run/events → the thread's agent.
    if (request.method === "POST" && parts[4] === "runs") {
      const agent = await getAgentByName(env.THREAD, parts[3]);
      return agent.fetch(request);
    }
    // The SDK's own routes: /agents/thread/:thread (WebSocket or HTTP).
    return (await routeAgentRequest(request, env)) ?? new Response("not found", { status: 404 });
  },
};

export class Directory extends DurableObject {}
export class StreamObject extends DurableObject {}
