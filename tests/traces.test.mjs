// Traces on workerd: a small OTLP/HTTP receiver started here gets the spans
// of a run with a tool call and a confirmation (the request that sent it,
// under the caller's traceparent; the run; each model call with the GenAI
// attributes and the usage the model reported; the tool call; the wait for
// the decision), with their parent links; a collector that never answers
// leaves the streams as they were (figures printed, not asserted on time).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { once } from "node:events";
import { startWorker, client, newThread, until } from "./support/harness.mjs";
import { startFakeLlm } from "../local/fake-llm.mjs";
import { startDemoTools } from "../local/demo-tools.mjs";

/** An OTLP/HTTP receiver: the spans of every JSON export it gets. */
async function startReceiver({ hang = false } = {}) {
  const spans = [];
  const bodies = [];
  const held = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      bodies.push({ path: req.url, type: req.headers["content-type"], auth: req.headers["x-api-key"] });
      if (hang) return held.push(res); // never answers
      const doc = JSON.parse(body);
      for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, resource: rs.resource });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    spans,
    bodies,
    async close() {
      for (const r of held) r.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const attrs = (span) => Object.fromEntries(span.attributes.map((a) => [a.key, Object.values(a.value)[0]]));

let llm, tools, receiver, hanging, worker, slow;
const CALLER = { trace: "4bf92f3577b34da6a3ce929d0e0e4736", span: "00f067aa0ba902b7" };

before(async () => {
  llm = await startFakeLlm({ port: 0, delayMs: 1 });
  tools = await startDemoTools();
  receiver = await startReceiver();
  hanging = await startReceiver({ hang: true });
  const vars = (collector) => ({
    LLM_BASE_URL: llm.url,
    LLM_API_KEY: "k",
    TOOLS: JSON.stringify(tools.declarations),
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=s%3Dcret",
    OTEL_SERVICE_NAME: "threadline-test",
  });
  worker = await startWorker({ vars: vars(receiver) });
  slow = await startWorker({ vars: vars(hanging) });
});
after(async () => {
  await worker?.stop();
  await slow?.stop();
  await llm?.close();
  await tools?.close();
  await receiver?.close();
  await hanging?.close();
});

describe("traces", () => {
  test("a run with a tool call and a confirmation: its spans, their GenAI attributes and parent links", async () => {
    const api = client(worker.url);
    const thread = newThread("trace");
    const sent = await api.call(
      "POST",
      `/instance-ai/chat/${thread}`,
      { message: 'please [[tool:delete-note:{"id":"n1"}]]' },
      { traceparent: `00-${CALLER.trace}-${CALLER.span}-01` },
    );
    assert.equal(sent.status, 200, sent.text);
    const sse = api.events(thread);
    await sse.ready;
    const request = await sse.waitFor((e) => e.type === "confirmation-request");
    const decided = await api.call("POST", `/instance-ai/confirm/${request.payload.requestId}`, { approved: true });
    assert.equal(decided.status, 200, decided.text);
    await sse.waitFor((e) => e.type === "run-finish");
    sse.close();
    // The log's steps (the Instance AI route keeps step-finish off).
    const steps = (await (await fetch(`${worker.url}/v1/threads/${thread}?offset=-1`)).json()).filter((e) => e.type === "step-finish");

    const inTrace = () => receiver.spans.filter((s) => s.traceId === CALLER.trace);
    await until(() => inTrace().some((s) => s.name === "invoke_agent threadline"), { what: "the run's span at the receiver" });
    const spans = inTrace();
    const one = (name) => {
      const found = spans.filter((s) => s.name === name);
      assert.equal(found.length, 1, `one ${name}: ${spans.map((s) => s.name).join(", ")}`);
      return found[0];
    };
    const send = one("POST /instance-ai/chat/:threadId");
    const run = one("invoke_agent threadline");
    const tool = one("execute_tool delete-note");
    const wait = one("await_decision delete-note");
    const chats = spans.filter((s) => s.name === "chat fake-model");
    assert.equal(chats.length, steps.length, "one model span per step");

    // Parent links: caller → request → run → model calls, tool call, decision.
    assert.equal(send.parentSpanId, CALLER.span);
    assert.equal(send.kind, 2);
    assert.equal(run.parentSpanId, send.spanId);
    for (const s of [tool, wait, ...chats]) assert.equal(s.parentSpanId, run.spanId, s.name);

    // The GenAI conventions, with the usage the model reported.
    chats.forEach((c, i) => {
      const a = attrs(c);
      assert.equal(a["gen_ai.operation.name"], "chat");
      assert.equal(a["gen_ai.request.model"], "fake-model");
      assert.equal(a["gen_ai.usage.input_tokens"], String(steps[i].payload.usage.prompt_tokens));
      assert.equal(a["gen_ai.usage.output_tokens"], String(steps[i].payload.usage.completion_tokens));
      assert.equal(c.kind, 3);
    });
    assert.equal(attrs(tool)["gen_ai.operation.name"], "execute_tool");
    assert.equal(attrs(tool)["gen_ai.tool.name"], "delete-note");
    assert.equal(attrs(wait)["threadline.confirmation.state"], "approved");
    const r = attrs(run);
    assert.equal(r["threadline.thread.id"], thread);
    assert.equal(r["threadline.run.id"], sent.json.runId);
    assert.equal(r["gen_ai.operation.name"], "invoke_agent");
    assert.equal(Number(r["gen_ai.usage.input_tokens"]), steps.reduce((n, s) => n + s.payload.usage.prompt_tokens, 0));
    assert.ok(BigInt(run.endTimeUnixNano) >= BigInt(wait.endTimeUnixNano), "the run ends after its decision");
    assert.deepEqual(run.status, { code: 1 });
    assert.equal(run.resource.attributes[0].value.stringValue, "threadline-test");
    // Exported as OTLP/HTTP JSON, to /v1/traces, with the configured headers.
    assert.ok(receiver.bodies.every((b) => b.path === "/v1/traces" && b.type === "application/json" && b.auth === "s=cret"));
  });

  test("a collector that never answers leaves the stream as it was", async () => {
    const figures = {};
    for (const [name, w] of [["answering collector", worker], ["hanging collector", slow]]) {
      const api = client(w.url);
      const times = [];
      for (let i = 0; i < 5; i++) {
        const thread = newThread("trace-lat");
        const t0 = performance.now();
        assert.equal((await api.chat(thread, `hello ${i}`)).status, 200);
        const sse = api.events(thread);
        await sse.ready;
        const finish = await sse.waitFor((e) => e.type === "run-finish", 15000, `run-finish with the ${name}`);
        times.push(performance.now() - t0);
        assert.equal(finish.payload.status, "completed");
        assert.equal(sse.events().filter((e) => e.type === "run-start").length, 1);
        sse.close();
      }
      times.sort((a, b) => a - b);
      figures[name] = times[2];
    }
    console.log(`send → run-finish on the stream, median of 5: ${Object.entries(figures).map(([k, v]) => `${k} ${v.toFixed(1)} ms`).join(", ")}`);
    await until(() => hanging.bodies.length > 0, { what: "the hanging collector to be asked" });
  });
});
