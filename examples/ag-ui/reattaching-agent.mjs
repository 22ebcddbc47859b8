// An AG-UI HttpAgent that survives a dropped connection: when the stream of
// a run breaks (or ends without RUN_FINISHED / RUN_ERROR), it re-attaches to
//
//   GET {baseUrl}/ag-ui/threads/:threadId/runs/:runId   Last-Event-ID: <last id seen>
//
// and goes on reading, inside the same run: threadline numbers every event of
// a run (the SSE `id`), the same live and replayed, so the re-attach sends
// exactly the events after the last one seen, and never RUN_STARTED again.
// The client's verifier and reducer see one unbroken run.
//
// `runId` is the one the stream's RUN_STARTED names (threadline's run: a
// `resume` continues the same run under a new client run id).
//
//   const agent = new ReattachingHttpAgent({ url: `${origin}/ag-ui`, baseUrl: origin, threadId, headers });
//   agent.addMessage({ id: crypto.randomUUID(), role: "user", content: "hello" });
//   await agent.runAgent();
//
// `connectAgent({ runId })` attaches cold (after a reload) to a run still
// going: the whole run from RUN_STARTED (start from the history route's
// messages, which leave a running answer out).
//
// The stream is read with @threadline/client's `SseParser` (the example's
// package.json depends on the client as an app would).
import { HttpAgent, runHttpRequest, transformHttpEventStream, enforceOutgoingInput } from "@ag-ui/client";
import { SseParser } from "@threadline/client";

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

/** An SSE message written out again, for the AG-UI client's own parser. */
const frame = (m) =>
  (m.id !== undefined ? `id: ${m.id}\n` : "") +
  (m.event !== "message" ? `event: ${m.event}\n` : "") +
  m.data.split("\n").map((line) => `data: ${line}\n`).join("") +
  "\n";

export class ReattachingHttpAgent extends HttpAgent {
  constructor(config) {
    super(config);
    this.baseUrl = config.baseUrl ?? new URL(config.url).origin;
    this.maxReattach = config.maxReattach ?? 5;
    this.onReattach = config.onReattach;
  }

  runUrl(threadId, runId) {
    return `${this.baseUrl}/ag-ui/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}`;
  }

  attachInit(lastEventId) {
    const headers = { ...this.headers, Accept: "text/event-stream" };
    if (lastEventId != null) headers["Last-Event-ID"] = lastEventId;
    return { method: "GET", headers, signal: this.abortController.signal };
  }

  run(input) {
    return transformHttpEventStream(runHttpRequest(() => this.stitched(input)), this.debugLogger);
  }

  connect(input) {
    const url = this.runUrl(input.threadId, input.runId);
    return transformHttpEventStream(runHttpRequest(() => this.fetch(url, this.attachInit(null))), this.debugLogger);
  }

  async stitched(input) {
    const first = await this.fetch(this.url, this.requestInit(enforceOutgoingInput(input)));
    if (!first.ok || !first.body) return first;
    const agent = this;
    const enc = new TextEncoder();
    let lastEventId = null;
    let runId = null;
    let ended = false;
    let reader = null;
    const body = new ReadableStream({
      async start(controller) {
        let response = first;
        for (let attempt = 0; ; ) {
          reader = response.body.getReader();
          const dec = new TextDecoder();
          // One parser per response: only whole messages come out of it, so
          // a message cut by the drop is read again after the re-attach.
          const sse = new SseParser();
          let failure = null;
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              for (const message of sse.push(dec.decode(value, { stream: true }))) {
                if (message.id !== undefined) lastEventId = message.id;
                try {
                  const event = JSON.parse(message.data);
                  if (event.type === "RUN_STARTED") runId = event.runId;
                  if (TERMINAL.has(event.type)) ended = true;
                } catch {}
                controller.enqueue(enc.encode(frame(message)));
              }
            }
          } catch (e) {
            failure = e;
          }
          if (ended) return controller.close();
          if (failure?.name === "AbortError" || !runId) return failure ? controller.error(failure) : controller.close();
          if (++attempt > agent.maxReattach) {
            return controller.error(new Error(`the run's stream was lost; ${agent.maxReattach} re-attaches failed (last id ${lastEventId})`));
          }
          await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** (attempt - 1), 2000)));
          agent.onReattach?.({ attempt, lastEventId, runId, cause: String(failure ?? "ended without RUN_FINISHED") });
          try {
            response = await agent.fetch(agent.runUrl(input.threadId, runId), agent.attachInit(lastEventId));
          } catch (e) {
            if (e?.name === "AbortError") return controller.error(e);
            response = { ok: false, status: 0, text: async () => String(e) };
          }
          if (!response.ok) {
            const text = await response.text().catch(() => "");
            return controller.error(new Error(`re-attach failed: HTTP ${response.status}: ${text}`));
          }
        }
      },
      cancel() {
        reader?.cancel().catch(() => {});
      },
    });
    return new Response(body, { status: first.status, headers: first.headers });
  }
}
