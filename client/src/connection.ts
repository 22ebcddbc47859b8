/**
 * A resumable connection to a thread's event stream.
 *
 * Invariants (what a page relies on to show nothing twice and miss nothing):
 * - The cursor is the highest durable id delivered; every reconnect asks for
 *   events after it (`Last-Event-ID` and `?lastEventId=`).
 * - A durable event (one with an id) at or below the cursor is dropped: the
 *   server replays from the cursor, so this only guards against a replay
 *   overlapping what was already delivered. Ephemeral events (no id) are never
 *   deduplicated: they are not replayed, and a snapshot delta after a
 *   reconnect is meant to replace the open text (reducer REPLACE rule).
 * - A dropped connection is retried with exponential backoff and jitter; a
 *   connection that delivered anything resets the backoff.
 */
import type { StreamEvent } from "./events.js";
import { SseParser } from "./sse.js";

export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

export interface StreamOptions {
  /** The events URL, e.g. `https://host/instance-ai/events/<threadId>`. */
  url: string;
  /** Resume after this durable id (0: from the start). */
  cursor?: number;
  onEvent: (ev: StreamEvent) => void;
  onState?: (state: ConnectionState, info: { attempt: number; delayMs?: number; error?: unknown }) => void;
  headers?: () => Record<string, string> | Promise<Record<string, string>>;
  /** A stream token provider: sent as `?token=`, refreshed on a 401. */
  token?: () => Promise<string>;
  fetch?: typeof fetch;
  /** Backoff: first delay, ceiling, and the jitter fraction (0..1). */
  backoff?: { initialMs?: number; maxMs?: number; jitter?: number };
  /** Reconnect when nothing (not even a keep-alive) arrived for this long. */
  idleTimeoutMs?: number;
  /** The SSE event name the stream's items carry (default `message`). */
  eventName?: string;
}

/** Statuses after which retrying the same request cannot help. */
const FATAL = new Set([400, 403, 405, 413]);

export class ResumableStream {
  private cursorValue: number;
  private stateValue: ConnectionState = "connecting";
  private abort: AbortController | undefined;
  private closed = false;
  private attempt = 0;
  private wake: (() => void) | undefined;
  private token: string | undefined;
  private readonly opts: StreamOptions;
  private readonly fetchFn: typeof fetch;

  constructor(opts: StreamOptions) {
    this.opts = opts;
    this.cursorValue = opts.cursor ?? 0;
    this.fetchFn = opts.fetch ?? ((...a) => fetch(...a));
  }

  /** The highest durable id delivered so far. */
  get cursor(): number {
    return this.cursorValue;
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** Starts the connection loop; returns at once. */
  start(): this {
    void this.loop();
    return this;
  }

  /** Retries now instead of waiting out the backoff (e.g. right after a send). */
  kick(): void {
    this.attempt = 0;
    this.wake?.();
  }

  /** Drops the current connection and reconnects (a network change, a test). */
  reconnect(): void {
    this.abort?.abort();
    this.kick();
  }

  close(): void {
    this.closed = true;
    this.abort?.abort();
    this.wake?.();
    this.setState("closed");
  }

  private setState(s: ConnectionState, info: { delayMs?: number; error?: unknown } = {}) {
    if (this.stateValue === "closed") return;
    this.stateValue = s;
    this.opts.onState?.(s, { attempt: this.attempt, ...info });
  }

  private async loop() {
    while (!this.closed) {
      let error: unknown;
      let status = 0;
      try {
        status = await this.connectOnce();
      } catch (e) {
        error = e;
      }
      if (this.closed) break;
      if (FATAL.has(status)) {
        this.setState("closed", { error: new Error(`the event stream was refused (${status})`) });
        this.closed = true;
        break;
      }
      if (status === 401 && this.opts.token) this.token = undefined;
      const delayMs = this.delay();
      this.attempt++;
      this.setState("reconnecting", { delayMs, error });
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delayMs);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  private delay(): number {
    const { initialMs = 250, maxMs = 10_000, jitter = 0.3 } = this.opts.backoff ?? {};
    const base = Math.min(maxMs, initialMs * 2 ** this.attempt);
    return Math.round(base * (1 - jitter + Math.random() * jitter));
  }

  /** One connection: resolves with the HTTP status once it ends. */
  private async connectOnce(): Promise<number> {
    const url = new URL(this.opts.url, globalThis.location?.href);
    url.searchParams.set("lastEventId", String(this.cursorValue));
    const headers: Record<string, string> = {
      accept: "text/event-stream",
      "last-event-id": String(this.cursorValue),
      ...((await this.opts.headers?.()) ?? {}),
    };
    if (this.opts.token) {
      this.token ??= await this.opts.token();
      url.searchParams.set("token", this.token);
    }
    const abort = new AbortController();
    this.abort = abort;
    const res = await this.fetchFn(url, { headers, signal: abort.signal, cache: "no-store" });
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      return res.status;
    }
    this.setState("open");
    const idleMs = this.opts.idleTimeoutMs ?? 45_000;
    let idle = setTimeout(() => abort.abort(), idleMs);
    const parser = new SseParser();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        clearTimeout(idle);
        idle = setTimeout(() => abort.abort(), idleMs);
        for (const msg of parser.push(value)) {
          // Named events (Instance AI's `run-sync`) are not the log's: as
          // an EventSource's onmessage, the connection takes messages only.
          if (!msg.data || msg.event !== (this.opts.eventName ?? "message")) continue;
          let ev: StreamEvent;
          try {
            ev = JSON.parse(msg.data) as StreamEvent;
          } catch {
            continue; // Not an event of this protocol: ignore rather than stop.
          }
          if (msg.id !== undefined && /^\d+$/.test(msg.id)) {
            const id = Number(msg.id);
            if (id <= this.cursorValue) continue;
            this.cursorValue = id;
            ev.id = id;
          }
          this.attempt = 0;
          this.opts.onEvent(ev);
        }
      }
    } catch (e) {
      if (!abort.signal.aborted) throw e;
    } finally {
      clearTimeout(idle);
    }
    return res.status;
  }
}
