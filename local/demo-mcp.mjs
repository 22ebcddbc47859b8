// A small MCP server over Streamable HTTP, written with the official
// TypeScript SDK (@modelcontextprotocol/sdk): `make dev` starts one so the
// built-in agent has MCP tools to call, and the tests start their own.
//
//   node local/demo-mcp.mjs --port 8789 [--json] [--name notes]
//
// Prints one line `{"url":"http://127.0.0.1:PORT/mcp"}` once listening.
// In-process:
//
//   const mcp = await startDemoMcp({ port: 0, json: false });
//   // mcp.url, mcp.cancelled (requests the client cancelled), mcp.calls,
//   // mcp.forgetSessions(), mcp.broken = true, await mcp.close()
//
// Tools (a notes store):
//   - search_notes {query}: read-only; text and structured content
//   - delete_note {id}: destructive (annotations say so): asks for approval
//   - render_chart {title?}: an image (a PNG) and a caption
//   - slow_task {ms}: waits, and notes a cancellation the client sends
//   - fail {}: a tool error (`isError: true`) the model can react to
//
// `json: true` answers each POST with JSON; otherwise with an SSE stream
// (the SDK's default), which also carries a progress notification. With
// `broken` set, tools/call is answered with JSON that is not JSON-RPC.

import http from "node:http";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { png } from "./png.mjs";
import { isMain } from "./is-main.mjs";

export const CHART_PNG = png(16, 12, (x, y) => (y > 11 - (x < 8 ? 9 : 5) && x % 8 > 1 ? [37, 99, 235] : [255, 255, 255]));

const NOTES = [
  { id: "n1", title: "Groceries", text: "milk, eggs, bread" },
  { id: "n2", title: "Standup", text: "ship the MCP client" },
];

function tools(server, state) {
  server.registerTool(
    "search_notes",
    {
      title: "Search notes",
      description: "Finds notes whose title or text contains the query.",
      inputSchema: { query: z.string().describe("Words to look for") },
      outputSchema: { notes: z.array(z.object({ id: z.string(), title: z.string() })) },
      annotations: { readOnlyHint: true },
    },
    async ({ query }) => {
      state.calls.push({ tool: "search_notes", args: { query } });
      const q = query.toLowerCase();
      const found = NOTES.filter((n) => `${n.title} ${n.text}`.toLowerCase().includes(q) || q === "*").map(({ id, title }) => ({ id, title }));
      return {
        content: [{ type: "text", text: `${found.length} note(s): ${found.map((n) => n.title).join(", ")}` }],
        structuredContent: { notes: found },
      };
    },
  );
  server.registerTool(
    "delete_note",
    {
      title: "Delete a note",
      description: "Deletes a note for good.",
      inputSchema: { id: z.string() },
      annotations: { destructiveHint: true, readOnlyHint: false },
    },
    async ({ id }) => {
      state.calls.push({ tool: "delete_note", args: { id } });
      return { content: [{ type: "text", text: `Deleted note ${id}.` }] };
    },
  );
  server.registerTool(
    "render_chart",
    {
      title: "Render a chart",
      description: "Draws the notes as a tiny chart (an image).",
      inputSchema: { title: z.string().optional() },
      annotations: { readOnlyHint: true },
    },
    async ({ title }) => {
      state.calls.push({ tool: "render_chart", args: { title } });
      return {
        content: [
          { type: "image", data: CHART_PNG.toString("base64"), mimeType: "image/png" },
          { type: "text", text: `Chart: ${title ?? "notes"}` },
        ],
      };
    },
  );
  server.registerTool(
    "slow_task",
    {
      description: "Waits `ms` milliseconds, then reports.",
      inputSchema: { ms: z.number().int().min(0).max(60000) },
      annotations: { readOnlyHint: true },
    },
    async ({ ms }, extra) => {
      state.calls.push({ tool: "slow_task", args: { ms } });
      const done = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(true), ms);
        extra.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          state.cancelled.push({ requestId: extra.requestId, at: Date.now(), reason: String(extra.signal.reason ?? "") });
          resolve(false);
        });
      });
      return { content: [{ type: "text", text: done ? `Waited ${ms} ms.` : "Cancelled." }] };
    },
  );
  server.registerTool(
    "fail",
    { description: "Always fails, as a tool whose backend is down would.", inputSchema: {} },
    async () => {
      state.calls.push({ tool: "fail", args: {} });
      return { content: [{ type: "text", text: "The note store is offline." }], isError: true };
    },
  );
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

/** Starts a demo MCP server: Streamable HTTP at `/mcp`, a session each. */
export async function startDemoMcp({ port = 0, json = false, name = "notes" } = {}) {
  const state = { calls: [], cancelled: [], sessions: new Map(), broken: false, requests: [] };
  const httpServer = http.createServer(async (req, res) => {
    try {
      if (!req.url.startsWith("/mcp")) return res.writeHead(404).end();
      const body = req.method === "POST" ? JSON.parse((await readBody(req)) || "null") : undefined;
      state.requests.push({ method: req.method, session: req.headers["mcp-session-id"], version: req.headers["mcp-protocol-version"], body });
      if (state.broken && body?.method === "tools/call") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ hello: "this is not JSON-RPC" }));
      }
      const sid = req.headers["mcp-session-id"];
      let transport = sid ? state.sessions.get(sid) : undefined;
      if (!transport) {
        if (sid || body?.method !== "initialize") {
          // An unknown session: the client must initialize again.
          res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
          return res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: body?.id ?? null }));
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: json,
          onsessioninitialized: (id) => state.sessions.set(id, transport),
        });
        const server = new McpServer({ name, version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
        tools(server, state);
        await server.connect(transport);
      }
      await transport.handleRequest(req, res, body);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500).end(String(e?.message ?? e));
    }
  });
  httpServer.listen(port, "127.0.0.1");
  await once(httpServer, "listening");
  return {
    url: `http://127.0.0.1:${httpServer.address().port}/mcp`,
    calls: state.calls,
    cancelled: state.cancelled,
    requests: state.requests,
    get broken() {
      return state.broken;
    },
    set broken(v) {
      state.broken = v;
    },
    /** Forgets every session, as a server that restarted would. */
    forgetSessions() {
      state.sessions.clear();
    },
    close: () =>
      new Promise((resolve) => {
        httpServer.close(() => resolve());
        httpServer.closeAllConnections();
      }),
  };
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: { port: { type: "string", default: "0" }, json: { type: "boolean", default: false }, name: { type: "string", default: "notes" } },
  });
  const mcp = await startDemoMcp({ port: Number(values.port), json: values.json, name: values.name });
  process.stdout.write(JSON.stringify({ url: mcp.url }) + "\n");
  const stop = async () => {
    await mcp.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
