// Demo HTTP tools for `make dev` and the tests: each is a POST endpoint that
// takes threadline's tool call body `{args, toolCallId, threadId, runId}`.
//
//   node local/demo-tools.mjs --port N     → prints {"url": "http://127.0.0.1:N"}
//
// /weather   {city}         → a made-up forecast
// /slow      {ms?}          → answers after ms (default 1500)
// /fail      {}             → HTTP 500 with a JSON error body
// /echo      anything       → the body it got (also behind `delete-note`, which needs approval)
import http from "node:http";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

/** The tools' declarations, as the `TOOLS` variable takes them. */
export function toolDeclarations(base) {
  return [
    {
      name: "weather",
      description: "Current weather for a city",
      url: `${base}/weather`,
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
    { name: "slow", description: "Takes its time", url: `${base}/slow`, parameters: { type: "object", properties: { ms: { type: "number" } } } },
    { name: "fail", description: "Always fails", url: `${base}/fail`, parameters: { type: "object", properties: {} } },
    { name: "echo", description: "Echoes its call", url: `${base}/echo`, parameters: { type: "object", properties: { text: { type: "string" } } } },
    {
      name: "delete-note",
      description: "Deletes a note; a person approves it first",
      url: `${base}/echo`,
      approval: "required",
      severity: "destructive",
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    },
  ];
}

export async function startDemoTools({ port = 0 } = {}) {
  const calls = [];
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", async () => {
      let body = {};
      try {
        body = JSON.parse(raw || "{}");
      } catch {}
      const call = { path: req.url, body, startedAt: Date.now(), endedAt: undefined, aborted: false };
      calls.push(call);
      req.on("close", () => {
        if (call.endedAt === undefined) call.aborted = true;
      });
      res.on("close", () => {
        if (!res.writableFinished) call.aborted = true;
      });
      const send = (status, json) => {
        call.endedAt = Date.now();
        if (res.destroyed) return;
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(json));
      };
      switch (req.url) {
        case "/weather":
          return send(200, { city: body.args?.city, forecast: "sunny", celsius: 21 });
        case "/slow":
          await new Promise((r) => setTimeout(r, body.args?.ms ?? 1500));
          return send(200, { waited: body.args?.ms ?? 1500 });
        case "/fail":
          return send(500, { error: "the demo tool failed on purpose" });
        case "/echo":
          return send(200, body);
        default:
          return send(404, { error: "no such tool" });
      }
    });
  });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, calls, declarations: toolDeclarations(url), close: () => new Promise((r) => server.close(r)) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { port: { type: "string", default: "0" } } });
  const tools = await startDemoTools({ port: Number(values.port) });
  process.stdout.write(JSON.stringify({ url: tools.url }) + "\n");
  const stop = () => tools.close().then(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
