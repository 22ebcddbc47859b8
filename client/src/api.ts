/**
 * The thread's HTTP routes (Instance AI's, docs/protocols/n8n-instance-ai-streaming-protocol.md), typed. Every refusal
 * the server sends is `{error: {code, message}}`; it surfaces here as a
 * {@link ThreadlineError} with that stable `code`.
 */
import type { AgentNode, Queue } from "./schema.gen.js";
import { ResumableStream, type StreamOptions } from "./connection.js";

export type Headers = Record<string, string>;

export interface ClientOptions {
  /** Where the Worker is served, e.g. `""` (same origin) or `https://threads.example.com`. */
  baseUrl?: string;
  /** Headers for every request, e.g. `{Authorization: "Bearer <jwt>"}`; called per request. */
  headers?: () => Headers | Promise<Headers>;
  fetch?: typeof fetch;
}

export class ThreadlineError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
    this.name = "ThreadlineError";
  }
}

export interface Message {
  id: string;
  runId: string;
  role: "user" | "assistant";
  createdAt: number;
  content: string;
  reasoning: string;
  isStreaming: boolean;
  status?: string;
  agentTree?: AgentNode | null;
}

export interface MessagesPage {
  threadId: string;
  messages: Message[];
  /** Connect the event stream with `lastEventId = nextEventId - 1`. */
  nextEventId: number;
  /** The message queue as of the same moment. */
  queue: Queue;
}

export interface ThreadStatus {
  hasActiveRun: boolean;
  isSuspended: boolean;
  runId?: string;
  backgroundTasks: { taskId: string; role: string; agentId: string; status: string; startedAt: number }[];
}

export type SendResult =
  | { queued: false; runId: string }
  | { queued: true; messageId: string; position: number; queue: Queue; runId?: string };

export interface SendOptions {
  /** What to do when a run is active: see docs/agents.md, "Busy threads". */
  mode?: "queue" | "interrupt" | "reject";
  model?: string;
  regenerate?: boolean;
}

export type Decision =
  | { approved: boolean; userInput?: string; scope?: "once" | "session" }
  | { answers: { questionId: string; selectedOptions: string[]; customText?: string; skipped?: boolean }[] };

export interface ThreadSummary {
  threadId: string;
  title: string | null;
  createdAt: number;
  updatedAt: number;
  runs: number;
}

const enc = encodeURIComponent;

export class ThreadlineClient {
  readonly baseUrl: string;
  private readonly headers: () => Headers | Promise<Headers>;
  private readonly fetchFn: typeof fetch;

  constructor(opts: ClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? "").replace(/\/$/, "");
    this.headers = opts.headers ?? (() => ({}));
    this.fetchFn = opts.fetch ?? ((...a) => fetch(...a));
  }

  /** One JSON request; a non-2xx answer throws {@link ThreadlineError}. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Headers = { ...(await this.headers()) };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await this.fetchFn(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new ThreadlineError(res.status, err?.code ?? `http_${res.status}`, err?.message ?? res.statusText, json);
    }
    return json as T;
  }

  /** Sends a message: starts a run, or queues it while one runs (202). */
  async send(threadId: string, message: string, opts: SendOptions = {}): Promise<SendResult> {
    const r = await this.request<
      { queued?: false; runId: string } | { queued: true; messageId: string; position: number; queue: Queue; runId?: string }
    >("POST", `/instance-ai/chat/${enc(threadId)}`, { message, ...opts });
    return r.queued ? r : { queued: false, runId: r.runId };
  }

  cancel(threadId: string): Promise<{ ok: boolean; cancelled: boolean }> {
    return this.request("POST", `/instance-ai/chat/${enc(threadId)}/cancel`, {});
  }

  confirm(requestId: string, decision: Decision): Promise<unknown> {
    return this.request("POST", `/instance-ai/confirm/${enc(requestId)}`, decision);
  }

  status(threadId: string): Promise<ThreadStatus> {
    return this.request("GET", `/instance-ai/threads/${enc(threadId)}/status`);
  }

  messages(threadId: string, limit = 100, page = 0): Promise<MessagesPage> {
    return this.request("GET", `/instance-ai/threads/${enc(threadId)}/messages?limit=${limit}&page=${page}`);
  }

  /** The queue routes answer `{queue}`; these return the queue. */
  private async queueCall(method: string, path: string, body?: unknown): Promise<Queue> {
    return (await this.request<{ queue: Queue }>(method, path, body)).queue;
  }

  queue(threadId: string): Promise<Queue> {
    return this.queueCall("GET", `/instance-ai/threads/${enc(threadId)}/queue`);
  }

  queueEdit(threadId: string, messageId: string, message: string): Promise<Queue> {
    return this.queueCall("PATCH", `/instance-ai/threads/${enc(threadId)}/queue/${enc(messageId)}`, { message });
  }

  queueRemove(threadId: string, messageId: string): Promise<Queue> {
    return this.queueCall("DELETE", `/instance-ai/threads/${enc(threadId)}/queue/${enc(messageId)}`);
  }

  queueMove(threadId: string, messageId: string, position: number): Promise<Queue> {
    return this.queueCall("POST", `/instance-ai/threads/${enc(threadId)}/queue/${enc(messageId)}/move`, { position });
  }

  queuePause(threadId: string, paused: boolean): Promise<Queue> {
    return this.queueCall("POST", `/instance-ai/threads/${enc(threadId)}/queue/${paused ? "pause" : "resume"}`, {});
  }

  async threads(): Promise<ThreadSummary[]> {
    const r = await this.request<{ threads: ThreadSummary[] }>("GET", "/agent/threads");
    return r.threads ?? [];
  }

  deleteThread(threadId: string): Promise<unknown> {
    return this.request("DELETE", `/instance-ai/threads/${enc(threadId)}`);
  }

  /** A short-lived read-only token for `?token=` on the thread's streams. */
  streamToken(threadId: string): Promise<{ token: string; expiresAt: number }> {
    return this.request("POST", `/instance-ai/threads/${enc(threadId)}/stream-token`, {});
  }

  /**
   * The thread's event stream, resumable: replay after `cursor`, then live,
   * reconnecting with backoff. With `useStreamToken`, authenticates with a
   * stream token in the URL (for EventSource-style transports and proxies
   * that drop headers) instead of this client's headers.
   */
  events(
    threadId: string,
    opts: Omit<StreamOptions, "url" | "fetch" | "headers" | "token"> & { useStreamToken?: boolean },
  ): ResumableStream {
    const { useStreamToken, ...rest } = opts;
    return new ResumableStream({
      ...rest,
      url: `${this.baseUrl}/instance-ai/events/${enc(threadId)}`,
      fetch: this.fetchFn,
      headers: useStreamToken ? undefined : this.headers,
      token: useStreamToken ? async () => (await this.streamToken(threadId)).token : undefined,
    });
  }
}
