// Tests for the fake Chat Completions server (local/fake-llm.mjs), over real
// HTTP, checking that it speaks the OpenAI streaming protocol faithfully.
//
//   node --test tests/fake-llm.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { startFakeLlm } from "../local/fake-llm.mjs";

let fake;
before(async () => {
  fake = await startFakeLlm({ port: 0 });
});
after(() => fake.close());

const TOOLS = [
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the web",
      parameters: {
        type: "object",
        properties: { query: { type: "string" }, limit: { type: "integer" } },
        required: ["query"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "set-flag",
      parameters: { type: "object", properties: { on: { type: "boolean" }, label: { type: "string" } } },
    },
  },
];

function chat(body, { auth = "Bearer test-key", signal } = {}) {
  return fetch(`${fake.url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(auth ? { authorization: auth } : {}) },
    body: JSON.stringify({ model: "fake-model", stream: true, ...body }),
    signal,
  });
}

const user = (content) => [{ role: "user", content }];

/** Reads a whole SSE response into parsed chunks. */
async function readStream(res) {
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/event-stream/);
  const raw = await res.text();
  assert.ok(raw.endsWith("\n\n"), "frames end with a blank line");
  const frames = raw.slice(0, -2).split("\n\n");
  for (const frame of frames) assert.match(frame, /^data: /);
  const done = frames.at(-1) === "data: [DONE]";
  const chunks = frames.filter((f) => f !== "data: [DONE]").map((f) => JSON.parse(f.slice("data: ".length)));
  for (const c of chunks) assert.equal(c.object, "chat.completion.chunk");
  const choices = chunks.filter((c) => c.choices.length).map((c) => c.choices[0]);
  return { raw, done, chunks, choices, deltas: choices.map((c) => c.delta) };
}

const contentOf = (deltas) => deltas.map((d) => d.content ?? "").join("");
const finishOf = (choices) => choices.at(-1).finish_reason;

/** Stitches streamed tool-call deltas back together by `index`. */
function assembleToolCalls(deltas) {
  const calls = [];
  for (const d of deltas) {
    for (const part of d.tool_calls ?? []) {
      const call = (calls[part.index] ??= { id: undefined, name: "", arguments: "", fragments: 0 });
      if (part.id) call.id = part.id;
      if (part.function?.name) call.name += part.function.name;
      if (part.function?.arguments) {
        call.arguments += part.function.arguments;
        call.fragments++;
      }
    }
  }
  return calls;
}

test("default answer streams an echo in small chunks, then usage and [DONE]", async () => {
  const started = Date.now();
  const { raw, done, chunks, choices, deltas } = await readStream(await chat({ messages: user("hello there") }));
  assert.equal(done, true);
  assert.ok(raw.endsWith("data: [DONE]\n\n"));
  assert.equal(deltas[0].role, "assistant");
  assert.equal(contentOf(deltas), 'You said: "hello there". This is the fake model answering offline.');
  const pieces = deltas.filter((d) => d.content);
  assert.ok(pieces.length > 5, "several text chunks");
  assert.ok(pieces.every((d) => d.content.length <= 8));
  assert.ok(Date.now() - started >= 15 * (pieces.length - 1) * 0.8, "chunks are paced");
  assert.equal(finishOf(choices), "stop");
  assert.ok(choices.slice(0, -1).every((c) => c.finish_reason === null));

  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.total_tokens, usage.usage.prompt_tokens + usage.usage.completion_tokens);
  assert.ok(usage.usage.prompt_tokens > 0 && usage.usage.completion_tokens > 0);
  assert.ok(new Set(chunks.map((c) => c.id)).size === 1 && chunks[0].id.startsWith("chatcmpl-"));
  assert.ok(chunks.every((c) => c.model === "fake-model" && Number.isInteger(c.created)));

  assert.deepEqual(fake.requests.at(-1).messages, user("hello there"));
});

test("the same request yields the same stream (deterministic)", async () => {
  const strip = (raw) => raw.replace(/"created":\d+/g, "");
  const a = await readStream(await chat({ messages: user("again") }));
  const b = await readStream(await chat({ messages: user("again") }));
  assert.equal(strip(a.raw), strip(b.raw));
});

test("include_usage marks ordinary chunks with usage: null", async () => {
  const { chunks } = await readStream(
    await chat({ messages: user("hi"), stream_options: { include_usage: true } }),
  );
  assert.ok(chunks.slice(0, -1).every((c) => c.usage === null));
  assert.ok(chunks.at(-1).usage.total_tokens > 0);
});

test("[[reason]] streams reasoning_content before the text", async () => {
  const { deltas } = await readStream(await chat({ messages: user("why? [[reason]]") }));
  const lastReasoning = deltas.findLastIndex((d) => d.reasoning_content);
  const firstText = deltas.findIndex((d) => d.content);
  assert.ok(lastReasoning > 0, "has reasoning chunks");
  assert.ok(lastReasoning < firstText, "reasoning comes first");
  assert.match(deltas.map((d) => d.reasoning_content ?? "").join(""), /^Let me think about this step by step\.\.\./);
  assert.match(contentOf(deltas), /^You said: /);
});

test("[[reasoning-field]] uses the `reasoning` field instead", async () => {
  const { deltas } = await readStream(await chat({ messages: user("[[reasoning-field]]") }));
  assert.ok(deltas.some((d) => d.reasoning));
  assert.ok(deltas.every((d) => d.reasoning_content === undefined));
  assert.ok(deltas.findLastIndex((d) => d.reasoning) < deltas.findIndex((d) => d.content));
});

test("[[tool:NAME:{json}]] streams one call whose fragments reassemble to the JSON", async () => {
  const args = { query: "rust [[workers]]", limit: 3 };
  const { deltas, choices } = await readStream(
    await chat({ messages: user(`look it up [[tool:search:${JSON.stringify(args)}]]`), tools: TOOLS }),
  );
  assert.equal(deltas[0].role, "assistant");
  const calls = assembleToolCalls(deltas);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].id, "call_1_0");
  assert.equal(calls[0].name, "search");
  assert.ok(calls[0].fragments > 3, "arguments arrive in fragments");
  assert.deepEqual(JSON.parse(calls[0].arguments), args);
  // The first chunk of a call names it; later ones only carry index + arguments.
  const parts = deltas.flatMap((d) => d.tool_calls ?? []);
  assert.deepEqual(parts[0], { index: 0, id: "call_1_0", type: "function", function: { name: "search", arguments: "" } });
  assert.ok(parts.slice(1).every((p) => p.id === undefined && p.function.name === undefined));
  assert.equal(finishOf(choices), "tool_calls");
});

test("a tool that the request does not offer is not called", async () => {
  const { deltas, choices } = await readStream(await chat({ messages: user("[[tool:delete-everything]]"), tools: TOOLS }));
  assert.equal(assembleToolCalls(deltas).length, 0);
  assert.match(contentOf(deltas), /"delete-everything" is not available/);
  assert.equal(finishOf(choices), "stop");
});

test("[[parallel]] streams two calls whose fragments interleave by index", async () => {
  const { deltas, choices } = await readStream(await chat({ messages: user("[[parallel]]"), tools: TOOLS }));
  const indexes = deltas.flatMap((d) => d.tool_calls ?? []).map((p) => p.index);
  assert.deepEqual([...new Set(indexes)].sort(), [0, 1]);
  // Interleaved: index 0 shows up again after index 1 has started.
  assert.ok(indexes.lastIndexOf(0) > indexes.indexOf(1));
  const calls = assembleToolCalls(deltas);
  assert.deepEqual(calls.map((c) => c.name), ["search", "set-flag"]);
  assert.notEqual(calls[0].id, calls[1].id);
  assert.deepEqual(JSON.parse(calls[0].arguments), { query: "x", limit: 1 });
  assert.deepEqual(JSON.parse(calls[1].arguments), { on: true, label: "x" });
  assert.equal(finishOf(choices), "tool_calls");
});

test("[[calls:[...]]] streams the calls it lists, in one step, each only if offered", async () => {
  const listed = [
    { name: "search", args: { query: "a [[b]]", limit: 2 } },
    { name: "set-flag", args: { on: false } },
  ];
  const { deltas, choices } = await readStream(await chat({ messages: user(`both [[calls:${JSON.stringify(listed)}]]`), tools: TOOLS }));
  const calls = assembleToolCalls(deltas);
  assert.deepEqual(calls.map((c) => [c.name, JSON.parse(c.arguments)]), listed.map((c) => [c.name, c.args]));
  assert.equal(finishOf(choices), "tool_calls");
  const unknown = await readStream(await chat({ messages: user('[[calls:[{"name":"nope"}]]]'), tools: TOOLS }));
  assert.equal(assembleToolCalls(unknown.deltas).length, 0);
  assert.match(contentOf(unknown.deltas), /"nope" is not available/);
});

test("[[badargs:NAME]] streams arguments that are not valid JSON", async () => {
  const { deltas } = await readStream(await chat({ messages: user("[[badargs:search]]"), tools: TOOLS }));
  const [call] = assembleToolCalls(deltas);
  assert.equal(call.name, "search");
  assert.throws(() => JSON.parse(call.arguments), SyntaxError);
});

test("after tool results the reply is text summarising them, so loops end", async () => {
  const messages = [
    { role: "user", content: "[[parallel]]" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "call_1_0", type: "function", function: { name: "search", arguments: "{}" } },
        { id: "call_1_1", type: "function", function: { name: "set-flag", arguments: "{}" } },
      ],
    },
    { role: "tool", tool_call_id: "call_1_0", content: "3 results" },
    { role: "tool", tool_call_id: "call_1_1", content: "y".repeat(500) },
  ];
  const { deltas, choices } = await readStream(await chat({ messages, tools: TOOLS }));
  assert.equal(assembleToolCalls(deltas).length, 0);
  assert.equal(contentOf(deltas), `Tool results: search: 3 results; set-flag: ${"y".repeat(200)}…`);
  assert.equal(finishOf(choices), "stop");
});

test("sub-agents report back instead of spawning again", async () => {
  const spawnTool = { type: "function", function: { name: "spawn-agent", parameters: { type: "object" } } };
  const parent = await readStream(await chat({ messages: user("[[spawn-bg]]"), tools: [spawnTool] }));
  const [call] = assembleToolCalls(parent.deltas);
  assert.equal(call.name, "spawn-agent");
  assert.deepEqual(JSON.parse(call.arguments), {
    role: "researcher",
    instructions: "Look things up and report back.",
    tools: [],
    background: true,
  });

  const child = await readStream(
    await chat({
      messages: [{ role: "system", content: "You are a sub-agent of threadline." }, ...user("[[spawn]]")],
      tools: [spawnTool],
    }),
  );
  assert.equal(contentOf(child.deltas), "Sub-agent report: done.");
});

test("[[error:500]] answers HTTP 500 with an OpenAI-style JSON error", async () => {
  const res = await chat({ messages: user("[[error:500]]") });
  assert.equal(res.status, 500);
  assert.match(res.headers.get("content-type"), /^application\/json/);
  const body = await res.json();
  assert.equal(body.error.message, "fake upstream failure");
  assert.equal(body.error.type, "server_error");
  assert.equal(body.error.code, 500);
});

test("[[stall]] sends a first chunk and then nothing", async () => {
  const controller = new AbortController();
  const res = await chat({ messages: user("[[stall]]") }, { signal: controller.signal });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let received = "";
  while (!received.includes("Starting...")) {
    const { value, done } = await reader.read();
    assert.equal(done, false, "stream ended before the first text chunk");
    received += decoder.decode(value, { stream: true });
  }
  const next = reader.read();
  next.catch(() => {}); // rejected by the abort below
  const winner = await Promise.race([next.then(() => "data"), sleep(300).then(() => "silence")]);
  assert.equal(winner, "silence");
  assert.ok(!received.includes("[DONE]"));
  controller.abort();

  // The server is still healthy after the client gave up.
  const { done } = await readStream(await chat({ messages: user("still there?") }));
  assert.equal(done, true);
});

test("[[drop]] breaks the connection mid-stream", async () => {
  const res = await chat({ messages: user("[[drop]]") });
  assert.equal(res.status, 200);
  await assert.rejects(res.text());
});

test("[[length]] ends with finish_reason length", async () => {
  const { choices, done } = await readStream(await chat({ messages: user("[[length]]") }));
  assert.equal(finishOf(choices), "length");
  assert.equal(done, true);
});

test("[[long:N]] streams N text chunks", async () => {
  const { deltas } = await readStream(await chat({ messages: user("[[long:300]]") }));
  assert.equal(deltas.filter((d) => d.content).length, 300);
});

test("401 without a Bearer Authorization header", async () => {
  for (const auth of [null, "Basic abc", "Bearer "]) {
    const res = await chat({ messages: user("hi") }, { auth });
    assert.equal(res.status, 401, `auth=${auth}`);
    const body = await res.json();
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(typeof body.error.message, "string");
  }
});

test("non-streaming mode returns a chat.completion object", async () => {
  const res = await chat({ messages: user("hello"), stream: false });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.object, "chat.completion");
  assert.equal(body.choices[0].message.role, "assistant");
  assert.equal(body.choices[0].message.content, 'You said: "hello". This is the fake model answering offline.');
  assert.equal(body.choices[0].finish_reason, "stop");
  assert.ok(body.usage.total_tokens > 0);

  const withTool = await (await chat({ messages: user("[[tool:search]]"), tools: TOOLS, stream: false })).json();
  const message = withTool.choices[0].message;
  assert.equal(message.content, null);
  assert.deepEqual(message.tool_calls, [
    { id: "call_1_0", type: "function", function: { name: "search", arguments: "{}" } },
  ]);
  assert.equal(withTool.choices[0].finish_reason, "tool_calls");
});

test("GET /v1/models lists the fake model", async () => {
  const res = await fetch(`${fake.url}/models`);
  assert.deepEqual(await res.json(), { object: "list", data: [{ id: "fake-model", object: "model" }] });
});
