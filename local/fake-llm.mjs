// A deterministic, offline stand-in for an OpenAI-compatible Chat Completions
// server. `make dev` points the Worker at it so the demo works without an API
// key, and the integration tests use it to script the model's behaviour.
//
//   node local/fake-llm.mjs --port 0 [--delay MS]
//
// Prints one line `{"url":"http://127.0.0.1:PORT/v1"}` once listening, then
// serves until SIGTERM/SIGINT. In-process use:
//
//   const fake = await startFakeLlm({ port: 0 });
//   // ... fake.url, fake.requests (parsed bodies), await fake.close()
//
// What the "model" answers is chosen from the conversation alone, so the same
// request always produces the same bytes (apart from `created`):
//
//   - the last message is a `tool` result  -> a text summary of the results
//   - the last user message has [[name]] / [[name:arg]] -> that behaviour
//     (reason, reasoning-field, tool, calls, parallel, badargs, spawn, spawn-bg,
//     tasks, ask, error, stall, slow, length, long, drop, say, mcp; see
//     planReply)
//   - otherwise                             -> a friendly echo of the message,
//     naming the images and files it carries ("I see an image (image/png,
//     20 bytes)"), counted from their inline bytes
//
// Requests from a sub-agent (a system message containing "You are a
// sub-agent") always get "Sub-agent report: done.", so spawned agents finish
// in one step whatever they were told.
//
// Only Node's standard library is used.

import http from "node:http";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { isMain } from "./is-main.mjs";

const MODEL_ID = "fake-model";
const SUB_AGENT_MARKER = "You are a sub-agent";
/** How threadline's compaction step opens its instruction (agent/context.rs). */
const COMPACTION_MARKER = "You compact a conversation";
/** Pause between streamed chunks unless a directive says otherwise. */
const DEFAULT_DELAY_MS = 15;
/** Text is cut into pieces of these sizes (cycled), i.e. ~4-8 characters. */
const TEXT_PIECE_SIZES = [4, 6, 8, 5, 7];
/** Tool-call arguments are cut into smaller fragments, like real providers do. */
const ARG_FRAGMENT_SIZES = [3, 5, 4];
/** Longest excerpt of a user message or tool result quoted back. */
const QUOTE_LIMIT = 200;
const DIRECTIVES = new Set([
  "reason", "reasoning-field", "tool", "parallel", "badargs", "spawn", "spawn-bg",
  "tasks", "ask", "error", "stall", "slow", "length", "long", "drop", "calls", "say", "mcp",
]);

// ---------------------------------------------------------------------------
// Small text helpers

/**
 * The text of a message `content`: a plain string or an array of content
 * parts (a text file given as text, `<file name=...>`, is not the text).
 */
function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (typeof part === "string" ? part : /^<file name="/.test(part?.text ?? "") ? "" : part?.text ?? ""))
      .join("");
  }
  return "";
}

/**
 * Cuts `text` into pieces whose lengths cycle through `sizes`. Counts code
 * points, not UTF-16 units, so no piece ever holds half a surrogate pair
 * (which would not survive JSON encoding on the client side).
 */
function splitPieces(text, sizes) {
  const chars = Array.from(text);
  const pieces = [];
  for (let at = 0, i = 0; at < chars.length; i++) {
    const size = sizes[i % sizes.length];
    pieces.push(chars.slice(at, at + size).join(""));
    at += size;
  }
  return pieces;
}

/** Cuts `text` into (at most) `count` pieces of equal length. */
function splitInto(text, count) {
  const size = Math.max(1, Math.ceil(Array.from(text).length / count));
  return splitPieces(text, [size]);
}

function truncate(text, limit = QUOTE_LIMIT) {
  const chars = Array.from(text);
  return chars.length > limit ? chars.slice(0, limit).join("") + "…" : text;
}

/** 32-bit FNV-1a, for deterministic completion ids. */
function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, "0");
}

/** Parses a non-negative integer directive argument, falling back to `fallback`. */
function intArg(arg, fallback, max = Number.MAX_SAFE_INTEGER) {
  const n = Number.parseInt(arg ?? "", 10);
  return Number.isInteger(n) && n >= 0 ? Math.min(n, max) : fallback;
}

// ---------------------------------------------------------------------------
// Directives

/**
 * Finds the first known `[[name]]` or `[[name:arg]]` in `text`. Unknown names
 * are ignored, so ordinary text with brackets falls through to the echo.
 *
 * The argument normally runs to the first `]]`, but `[[tool:NAME:{json}]]`
 * and `[[calls:[json]]]` may themselves contain `]]` (nested arrays), so for
 * them the closing `]]` is the first one after which the JSON parses.
 */
export function parseDirective(text) {
  const opener = /\[\[([a-z-]+)(:|\]\])/g;
  for (let m; (m = opener.exec(text)); ) {
    const name = m[1];
    if (!DIRECTIVES.has(name)) continue;
    if (m[2] === "]]") return { name, arg: undefined };
    const argStart = opener.lastIndex;
    let end = text.indexOf("]]", argStart);
    if (end < 0) continue;
    if (name === "tool" || name === "calls") {
      const parses = name === "tool" ? toolArgsParse : jsonParses;
      for (let e = end; e >= 0; e = text.indexOf("]]", e + 1)) {
        if (parses(text.slice(argStart, e))) {
          end = e;
          break;
        }
      }
    }
    return { name, arg: text.slice(argStart, end) };
  }
  return null;
}

/** Splits a `[[tool:...]]` argument into name and JSON text (default `{}`). */
function splitToolArg(arg) {
  const colon = arg.indexOf(":");
  return colon < 0
    ? { name: arg.trim(), json: "{}" }
    : { name: arg.slice(0, colon).trim(), json: arg.slice(colon + 1) };
}

function jsonParses(text) {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function toolArgsParse(arg) {
  try {
    JSON.parse(splitToolArg(arg).json);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Planning a reply
//
// A plan describes the whole answer independently of how it is delivered:
//   { text: string[], reasoning: {field, pieces} | null,
//     toolCalls: [{id, name, arguments}], finish, delayMs?,
//     cut: {after, mode: "stall" | "drop"} | null }
// or, for an HTTP failure, { httpError: {status, body} }.
// `text` is already split into the pieces a stream would send.

function textReply(text, extra = {}) {
  return { text: splitPieces(text, TEXT_PIECE_SIZES), reasoning: null, toolCalls: [], finish: "stop", cut: null, ...extra };
}

function toolReply(toolCalls) {
  return { text: [], reasoning: null, toolCalls, finish: "tool_calls", cut: null };
}

/** A deterministic value that satisfies a (simple) JSON schema. */
function exampleValue(schema) {
  if (Array.isArray(schema?.enum) && schema.enum.length) return schema.enum[0];
  const type = Array.isArray(schema?.type) ? schema.type.find((t) => t !== "null") : schema?.type;
  switch (type) {
    case "number":
    case "integer":
      return 1;
    case "boolean":
      return true;
    case "array":
      return [];
    case "object":
      return exampleArgs(schema);
    default:
      return "x";
  }
}

function exampleArgs(schema) {
  const properties = schema?.properties ?? {};
  return Object.fromEntries(Object.entries(properties).map(([key, sub]) => [key, exampleValue(sub)]));
}

function isSubAgent(messages) {
  return messages.some(
    (m) => (m?.role === "system" || m?.role === "developer") && textOf(m.content).includes(SUB_AGENT_MARKER),
  );
}

/**
 * The summary a compaction step asks for: which messages it folds, the first
 * and the last thing the person asked, and whether an earlier summary was
 * folded in. Bounded, so a compacted context stays small whatever it folds.
 */
function compactionSummary(messages) {
  const transcript = textOf(messages.at(-1)?.content);
  const asked = transcript.split("\n").filter((l) => l.startsWith("user: ")).map((l) => truncate(l.slice(6), 60));
  const earlier = transcript.startsWith("Earlier summary:") ? " It folds an earlier summary in." : "";
  // Folding an earlier summary in, the conversation's first message is its.
  const first = (earlier && transcript.match(/first "([^"]*)"/)?.[1]) || (asked[0] ?? "nothing");
  const last = asked.at(-1) ?? "nothing";
  return `SUMMARY of ${asked.length} messages from the person: first "${first}", last "${last}".${earlier}`;
}

/** "Tool results: name: content; ..." for the trailing run of `tool` messages. */
function summariseToolResults(messages) {
  let start = messages.length;
  while (start > 0 && messages[start - 1]?.role === "tool") start--;
  // Tool messages rarely carry a name; recover it from the assistant's calls.
  const callNames = new Map();
  for (const m of messages) {
    for (const call of m?.tool_calls ?? []) callNames.set(call?.id, call?.function?.name);
  }
  const parts = messages.slice(start).map((m) => {
    const label = m.name ?? callNames.get(m.tool_call_id) ?? m.tool_call_id ?? "tool";
    return `${label}: ${truncate(textOf(m.content))}`;
  });
  return `Tool results: ${parts.join("; ")}`;
}

/**
 * What a user message carries besides its text, as a model would say it:
 * "I see 1 image (image/png, 20 bytes) and 1 file (b.pdf)." The bytes are
 * counted from the inline base64, so a test can tell they arrived whole.
 */
function describeAttachments(content) {
  if (!Array.isArray(content)) return "";
  const bytes = (url) => Buffer.from(String(url).split(",")[1] ?? "", "base64").length;
  const seen = [];
  for (const part of content) {
    if (part?.type === "image_url") {
      const url = part.image_url?.url ?? "";
      const type = url.match(/^data:([^;,]+)/)?.[1];
      seen.push(type ? `an image (${type}, ${bytes(url)} bytes)` : `an image at ${url}`);
    } else if (part?.type === "file") {
      seen.push(`a file (${part.file?.filename ?? "unnamed"}, ${bytes(part.file?.file_data ?? "")} bytes)`);
    } else if (part?.type === "text" && /^<file name="/.test(part.text ?? "")) {
      seen.push(`a text file (${part.text.match(/^<file name="([^"]*)"/)[1]})`);
    }
  }
  return seen.length ? `I see ${seen.join(", ")}.` : "";
}

/** Chooses the reply for a validated request body. */
export function planReply(body) {
  const messages = body.messages;
  // Ids are derived from the conversation length so each step gets new ones.
  const step = messages.length;
  const call = (name, args, index) => ({
    id: `call_${step}_${index}`,
    name,
    arguments: typeof args === "string" ? args : JSON.stringify(args),
  });
  const offered = (Array.isArray(body.tools) ? body.tools : [])
    .map((tool) => tool?.function)
    .filter((fn) => typeof fn?.name === "string");
  const isOffered = (name) => offered.some((fn) => fn.name === name);
  const notOffered = (name) =>
    textReply(
      `The tool "${name}" is not available in this request` +
        (offered.length ? ` (offered: ${offered.map((fn) => fn.name).join(", ")}).` : " (no tools were offered)."),
    );
  // Only call a tool the request actually offers, as a real model would.
  const callIfOffered = (name, args) => (isOffered(name) ? toolReply([call(name, args, 0)]) : notOffered(name));

  if (messages[0]?.role === "system" && textOf(messages[0].content).startsWith(COMPACTION_MARKER)) {
    return textReply(compactionSummary(messages));
  }
  if (isSubAgent(messages)) {
    // A sub-agent reports at once, or slowly when its instructions say
    // [[slow:MS]] (so a test can watch a background task run).
    const slow = parseDirective(textOf(messages.findLast((m) => m?.role === "user")?.content));
    if (slow?.name === "slow") {
      return { ...textReply(""), text: splitInto("Sub-agent report: done.", 10), delayMs: intArg(slow.arg, 500) };
    }
    return textReply("Sub-agent report: done.");
  }
  if (messages.at(-1)?.role === "tool") return textReply(summariseToolResults(messages));

  const userContent = messages.findLast((m) => m?.role === "user")?.content;
  const userText = textOf(userContent);
  const seen = describeAttachments(userContent);
  const echo = `You said: "${truncate(userText)}".${seen ? ` ${seen}` : ""} This is the fake model answering offline.`;
  const directive = parseDirective(userText);

  switch (directive?.name) {
    case undefined:
      return textReply(echo);

    case "say":
      // [[say:TEXT]]: exactly TEXT (a structured answer, say).
      return textReply(directive.arg ?? "");

    case "reason":
    case "reasoning-field": {
      const field = directive.name === "reason" ? "reasoning_content" : "reasoning";
      const thought = "Let me think about this step by step... The user wants an answer, so I will echo their message.";
      return textReply(echo, { reasoning: { field, pieces: splitPieces(thought, TEXT_PIECE_SIZES) } });
    }

    case "tool": {
      const { name, json } = splitToolArg(directive.arg ?? "");
      if (!name) return textReply("The [[tool:NAME]] directive needs a tool name.");
      if (!isOffered(name)) return notOffered(name);
      try {
        return toolReply([call(name, JSON.parse(json), 0)]);
      } catch {
        return textReply(`The arguments of [[tool:${name}:...]] are not valid JSON.`);
      }
    }

    case "mcp": {
      // [[mcp:TOOL:ARGS]]: the offered MCP tool `<server>__TOOL` (the first
      // one offered without TOOL), with ARGS (JSON) or example arguments.
      const { name: wanted, json } = splitToolArg(directive.arg ?? "");
      const tool = offered.find((fn) => fn.name.includes("__") && (!wanted || fn.name.endsWith(`__${wanted}`)));
      if (!tool) return textReply(`No MCP tool${wanted ? ` named ${wanted}` : ""} is offered in this request.`);
      let args = exampleArgs(tool.parameters);
      try {
        if ((directive.arg ?? "").includes(":")) args = JSON.parse(json);
      } catch {
        return textReply(`The arguments of [[mcp:${wanted}:...]] are not valid JSON.`);
      }
      return toolReply([call(tool.name, args, 0)]);
    }

    case "calls": {
      // [[calls:[{"name":"a","args":{...}}, ...]]]: those calls, in one step,
      // each only if offered (as a real model would).
      const calls = JSON.parse(directive.arg);
      if (!Array.isArray(calls) || !calls.length) return textReply("[[calls:...]] needs a non-empty JSON array.");
      const missing = calls.find((c) => !isOffered(c?.name));
      if (missing) return notOffered(missing?.name);
      return toolReply(calls.map((c, index) => call(c.name, c.args ?? {}, index)));
    }

    case "parallel": {
      if (offered.length === 0) return textReply("No tools are available to call in parallel.");
      // The first two tools, or the only one twice (with distinct ids).
      const picked = [offered[0], offered[1] ?? offered[0]];
      return toolReply(picked.map((fn, index) => call(fn.name, exampleArgs(fn.parameters), index)));
    }

    case "badargs": {
      // Not checked against `tools`, so tests can also exercise unknown names.
      const name = directive.arg?.trim() || offered[0]?.name || "missing-tool";
      return toolReply([call(name, '{"a": 1,', 0)]);
    }

    case "spawn":
    case "spawn-bg": {
      const slowDirective = userText.match(/\[\[slow:\d+\]\]/)?.[0];
      return callIfOffered("spawn-agent", {
        role: "researcher",
        // A [[slow:MS]] in the user's message is passed on, so the
        // sub-agent reports slowly (tests watch a background task run).
        instructions: "Look things up and report back." + (slowDirective ? ` ${slowDirective}` : ""),
        tools: [],
        ...(directive.name === "spawn-bg" ? { background: true } : {}),
      });
    }

    case "tasks":
      return callIfOffered("create-tasks", {
        tasks: [
          { id: "t1", description: "Plan", status: "todo" },
          { id: "t2", description: "Build", status: "todo" },
        ],
      });

    case "ask": {
      // [[ask]] asks structured questions; [[ask:text]], [[ask:approval]] and
      // [[ask:plan-review]] ask the other kinds of input.
      const inputType = directive.arg?.trim() || "questions";
      return callIfOffered("ask-user", {
        message: inputType === "plan-review" ? "Does this plan look right?" : "Which option?",
        inputType,
        ...(inputType === "questions"
          ? { questions: [{ id: "q1", question: "Pick one", type: "single", options: ["a", "b"] }] }
          : {}),
        ...(inputType === "plan-review"
          ? { tasks: { tasks: [{ id: "t1", description: "Do the thing", status: "todo" }] } }
          : {}),
      });
    }

    case "error": {
      const status = intArg(directive.arg, 500);
      const code = status >= 400 && status <= 599 ? status : 500;
      return { httpError: { status: code, body: errorBody("fake upstream failure", "server_error", code) } };
    }

    case "stall":
      // Role chunk + "Starting...", then silence until the client gives up.
      return { ...textReply(""), text: ["Starting..."], cut: { after: 2, mode: "stall" } };

    case "slow":
      return { ...textReply(""), text: splitInto(echo, 20), delayMs: intArg(directive.arg, 500) };

    case "length":
      return textReply("This answer is deliberately long and gets cut off before it is fini", { finish: "length" });

    case "long": {
      const count = intArg(directive.arg, 1000, 1_000_000);
      return { ...textReply(""), text: Array.from({ length: count }, (_, i) => `w${i} `), delayMs: 0 };
    }

    case "drop":
      // Role chunk + one text chunk, then the connection dies.
      return textReply(echo, { cut: { after: 2, mode: "drop" } });
  }
  throw new Error(`unhandled directive ${directive.name}`);
}

// ---------------------------------------------------------------------------
// Rendering a plan on the wire

function errorBody(message, type, code = null) {
  return { error: { message, type, param: null, code } };
}

/** Deterministic token counts: roughly four characters per token. */
function usageFor(body, plan) {
  const tokens = (chars) => Math.max(1, Math.ceil(chars / 4));
  // The request as a provider counts it: its messages and its tools' schemas.
  const promptTokens = tokens(JSON.stringify(body.messages).length + (body.tools ? JSON.stringify(body.tools).length : 0));
  const completionChars =
    plan.text.join("").length +
    (plan.reasoning?.pieces.join("").length ?? 0) +
    plan.toolCalls.reduce((sum, c) => sum + c.name.length + c.arguments.length, 0);
  const completionTokens = tokens(completionChars);
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/**
 * The `delta` objects of a streamed reply, in order (the final chunk with
 * `finish_reason` is added by the caller).
 */
function* streamDeltas(plan) {
  const calls = plan.toolCalls;
  // OpenAI opens with the role; content is null when only tools follow.
  yield { role: "assistant", content: calls.length && !plan.text.length ? null : "" };
  for (const piece of plan.reasoning?.pieces ?? []) yield { [plan.reasoning.field]: piece };
  for (const piece of plan.text) yield { content: piece };
  // Each call is a lane: a header naming it, then argument fragments that
  // only carry `index`. Lanes are emitted round-robin, so the fragments of
  // parallel calls interleave and a client must stitch them by `index`.
  const lanes = calls.map((c, index) => [
    { index, id: c.id, type: "function", function: { name: c.name, arguments: "" } },
    ...splitPieces(c.arguments, ARG_FRAGMENT_SIZES).map((fragment) => ({ index, function: { arguments: fragment } })),
  ]);
  for (let i = 0; lanes.some((lane) => i < lane.length); i++) {
    for (const lane of lanes) if (i < lane.length) yield { tool_calls: [lane[i]] };
  }
}

/** The non-streaming `chat.completion` object for a plan. */
function completionObject(plan, meta) {
  const text = plan.text.join("");
  const message = { role: "assistant", content: text || (plan.toolCalls.length ? null : "") };
  if (plan.reasoning) message[plan.reasoning.field] = plan.reasoning.pieces.join("");
  if (plan.toolCalls.length) {
    message.tool_calls = plan.toolCalls.map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, message, finish_reason: plan.finish }],
    usage: meta.usage,
  };
}

/** Resolves once `signal` aborts (the client went away or the server closed). */
function aborted(signal) {
  return signal.aborted ? Promise.resolve() : once(signal, "abort").then(() => {});
}

async function streamCompletion(res, plan, meta, { delayMs, includeUsage, signal }) {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  // Resolves when the bytes reached the socket; honours backpressure.
  const send = (payload) =>
    new Promise((resolve, reject) => {
      const frame = payload === "[DONE]" ? "data: [DONE]\n\n" : `data: ${JSON.stringify(payload)}\n\n`;
      res.write(frame, (err) => (err ? reject(err) : resolve()));
    });
  const chunk = (delta, finishReason = null) => ({
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
    // With include_usage, OpenAI marks every ordinary chunk `usage: null`.
    ...(includeUsage ? { usage: null } : {}),
  });

  let sent = 0;
  for (const delta of streamDeltas(plan)) {
    if (sent > 0 && delayMs > 0) await sleep(delayMs, undefined, { signal });
    await send(chunk(delta));
    sent++;
    if (plan.cut?.after === sent) {
      if (plan.cut.mode === "drop") {
        // No terminating chunk, no [DONE]: the client sees a broken stream.
        res.socket?.destroy();
      } else {
        // Keep the connection open, silent, until the client disconnects;
        // the 'close' listener then aborts `signal` and we return.
        await aborted(signal);
      }
      return;
    }
  }
  await send(chunk({}, plan.finish));
  // Usage goes in a trailing chunk with no choices. OpenAI sends it only when
  // stream_options.include_usage is set; many providers always do, so we do.
  await send({ id: meta.id, object: "chat.completion.chunk", created: meta.created, model: meta.model, choices: [], usage: meta.usage });
  await send("[DONE]");
  res.end();
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function handleChat(req, res, { requests, prompts, delayMs, signal, usage }) {
  if (!/^Bearer +\S/i.test(req.headers.authorization ?? "")) {
    return sendJson(res, 401, errorBody("Missing or malformed Authorization header; expected `Bearer <api key>`.", "invalid_request_error", "invalid_api_key"));
  }
  let body;
  try {
    body = await readJson(req);
  } catch {
    return sendJson(res, 400, errorBody("The request body is not valid JSON.", "invalid_request_error"));
  }
  requests.push(body);
  // Prompt caching, as providers do it: the request's longest prefix in
  // common with a recent one is reported cached (whole 64-token blocks).
  const text = JSON.stringify(body?.messages ?? null);
  let common = 0;
  for (const seen of prompts) {
    let i = 0;
    const n = Math.min(seen.length, text.length);
    while (i < n && seen.charCodeAt(i) === text.charCodeAt(i)) i++;
    common = Math.max(common, i);
  }
  prompts.push(text);
  if (prompts.length > 64) prompts.shift();
  const cachedTokens = Math.floor(common / 4 / 64) * 64;
  if (!Array.isArray(body?.messages) || body.messages.length === 0) {
    return sendJson(res, 400, errorBody("`messages` must be a non-empty array.", "invalid_request_error"));
  }

  const plan = planReply(body);
  if (plan.httpError) return sendJson(res, plan.httpError.status, plan.httpError.body);

  const meta = {
    id: `chatcmpl-fake-${body.messages.length}-${fnv1a(JSON.stringify(body.messages))}`,
    created: Math.floor(Date.now() / 1000),
    model: typeof body.model === "string" && body.model ? body.model : MODEL_ID,
    usage: usage ? usage(body, usageFor(body, plan)) : usageFor(body, plan),
  };
  // (A test's `usage` may say the answer reports none.)
  if (meta.usage) meta.usage = { ...meta.usage, prompt_tokens_details: { cached_tokens: Math.min(cachedTokens, meta.usage.prompt_tokens ?? 0) } };

  if (body.stream === true) {
    return streamCompletion(res, plan, meta, {
      delayMs: plan.delayMs ?? delayMs,
      includeUsage: body.stream_options?.include_usage === true,
      signal,
    });
  }
  // Non-streaming: the same reply in one object, with the same failure modes.
  if (plan.cut?.mode === "drop") return void res.socket?.destroy();
  if (plan.cut?.mode === "stall") return aborted(signal);
  sendJson(res, 200, completionObject(plan, meta));
}

async function handle(req, res, options) {
  // Aborted when the connection goes away before we finished answering, so
  // pending sleeps and stalls end instead of leaking timers.
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  const path = new URL(req.url, "http://localhost").pathname;

  if (req.method === "GET" && path === "/v1/models") {
    // Left open (no auth) so health checks can probe it.
    return sendJson(res, 200, { object: "list", data: [{ id: MODEL_ID, object: "model" }] });
  }
  if (req.method === "POST" && path === "/v1/chat/completions") {
    return handleChat(req, res, { ...options, signal: controller.signal });
  }
  sendJson(res, 404, errorBody(`Unknown route: ${req.method} ${path}`, "invalid_request_error"));
}

// ---------------------------------------------------------------------------
// Server

/**
 * Starts the fake on 127.0.0.1. `port` 0 picks a free port; `delayMs` is the
 * pause between streamed chunks (directives like [[slow]] override it);
 * `usage(body, usage)`, when given, says what each answer reports it used
 * (a test's big sub-agent), from the request and the usage it would report.
 * Resolves to `{ url, close(), requests }`, `url` ending in `/v1`.
 */
export async function startFakeLlm({ port = 0, delayMs = DEFAULT_DELAY_MS, usage } = {}) {
  const requests = [];
  const prompts = [];
  const server = http.createServer((req, res) => {
    handle(req, res, { requests, prompts, delayMs, usage }).catch((err) => {
      // A client that hung up mid-stream is expected; anything else is a bug.
      if (err?.name === "AbortError" || res.destroyed) return;
      console.error("fake-llm:", err);
      if (!res.headersSent) sendJson(res, 500, errorBody(String(err?.message ?? err), "server_error"));
      else res.destroy();
    });
  });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        // Also drop idle keep-alive sockets and stalled streams.
        server.closeAllConnections();
      }),
  };
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "0" },
      delay: { type: "string", default: String(DEFAULT_DELAY_MS) },
    },
  });
  const port = Number(values.port);
  const delayMs = Number(values.delay);
  if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(delayMs) || delayMs < 0) {
    console.error("usage: node local/fake-llm.mjs --port N [--delay MS]");
    process.exit(2);
  }
  const fake = await startFakeLlm({ port, delayMs });
  process.stdout.write(JSON.stringify({ url: fake.url }) + "\n");
  const stop = () => fake.close().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}
