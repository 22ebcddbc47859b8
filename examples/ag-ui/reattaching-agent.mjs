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
import { HttpAgent, runHttpRequest, transformHttpEventStream, enforceOutgoingInput } from "@ag-ui/client";

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

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
          let buf = "";
          let failure = null;
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              buf += dec.decode(value, { stream: true });
              for (let i; (i = buf.indexOf("\n\n")) >= 0; ) {
                // Only whole frames go on: a frame cut by the drop is read again.
                const frame = buf.slice(0, i);
                buf = buf.slice(i + 2);
                for (const line of frame.split("\n")) {
                  if (line.startsWith("id:")) lastEventId = line.slice(3).trim();
                  if (!line.startsWith("data:")) continue;
                  try {
                    const event = JSON.parse(line.slice(5));
                    if (event.type === "RUN_STARTED") runId = event.runId;
                    if (TERMINAL.has(event.type)) ended = true;
                  } catch {}
                }
                controller.enqueue(enc.encode(frame + "\n\n"));
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
