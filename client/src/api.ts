/**
 * The thread's HTTP routes (Instance AI's, docs/protocols/n8n-instance-ai-streaming-protocol.md), typed. Every refusal
 * the server sends is `{error: {code, message}}`; it surfaces here as a
 * {@link ThreadlineError} with that stable `code`.
 */
import type { AgentNode, ContextCompacted, Queue } from "./schema.gen.js";
import { ResumableStream, type StreamOptions } from "./connection.js";
import { mediaTypeFor, type Attachment, type AttachmentRef, type FileSource, type UploadedFile, type UploadOptions } from "./files.js";

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

/** The error an answer of `status` with body `text` stands for. */
function refusal(status: number, statusText: string, text: string): ThreadlineError {
  let json: unknown = text;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON (a proxy's page, say): keep the text.
  }
  const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
  return new ThreadlineError(status, err?.code ?? `http_${status}`, err?.message ?? (statusText || `HTTP ${status}`), json);
}

export interface Message {
  id: string;
  /** The run an assistant message is the answer of (a user message names none). */
  runId?: string;
  role: "user" | "assistant";
  /** ISO 8601. */
  createdAt: string;
  content: string;
  reasoning: string;
  isStreaming: boolean;
  status?: string;
  agentTree?: AgentNode | null;
  /** A user message's files and URLs, when it has any (stored files with their `url`). */
  attachments?: Attachment[];
  /**
   * Where the message stands among its siblings, when it has any: a user
   * message among its edits (message ids), an answer among the answers to
   * its message (run ids).
   */
  branch?: Branch;
  /** On a fork, the thread a shared message is of (edit, regenerate or fork it there). */
  sharedFrom?: string;
  /** On an answer: the model's context was compacted during its turn (a summary took the earlier conversation's place for the model). */
  contextCompacted?: ContextCompacted;
}

/** A fork's answer: the new thread, and where it came from. */
export interface Forked {
  threadId: string;
  forkedFrom: { threadId: string; messageId: string; runId: string; offset: string };
}

/** `index` of `count` siblings, their ids in order (a `< i/n >` switcher). */
export interface Branch {
  index: number;
  count: number;
  ids: string[];
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
  /** With `regenerate`: the answer (a run id) to give again; none is the last. */
  messageId?: string;
  /** The user message this one replaces, on a branch of its own beside it. */
  editOf?: string;
  /**
   * Stored files the message carries ({@link ThreadlineClient.uploadFiles}'s
   * `fileId`s). With attachments, the message text may be empty.
   */
  attachments?: AttachmentRef[];
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

/** A thread as the caller's inbox shows it (`GET /v1/inbox`, docs/inbox.md). */
export interface InboxRow {
  threadId: string;
  title: string;
  state: "idle" | "running" | "waiting";
  runId?: string;
  waiting?: { requestId: string; kind: string; toolName: string; expiresAt?: number };
  lastRun?: { runId: string; status: string; at: number };
  queued: number;
  runs: number;
  eventId: number;
  /** The last event worth reading: unread while `readEventId` is below it. */
  answerId: number;
  readEventId: number;
  unread: boolean;
  createdAt: number;
  updatedAt: number;
  version: number;
  /** The thread is gone (a change only). */
  deleted?: boolean;
}

export interface InboxPage {
  rows: InboxRow[];
  nextCursor: string | null;
  /** The change log's top: follow the changes after it. */
  eventId: number;
}

const enc = encodeURIComponent;

export class ThreadlineClient {
  readonly baseUrl: string;
  private readonly headers: () => Headers | Promise<Headers>;
  private readonly fetchFn: typeof fetch;
  /** Uploads go through `XMLHttpRequest` (for its upload progress) unless a `fetch` was given. */
  private readonly ownFetch: boolean;

  constructor(opts: ClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? "").replace(/\/$/, "");
    this.headers = opts.headers ?? (() => ({}));
    this.fetchFn = opts.fetch ?? ((...a) => fetch(...a));
    this.ownFetch = opts.fetch !== undefined;
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
    if (!res.ok) throw refusal(res.status, res.statusText, text);
    try {
      return (text ? JSON.parse(text) : undefined) as T;
    } catch {
      return text as T;
    }
  }

  /** Sends a message: starts a run, or queues it while one runs (202). */
  async send(threadId: string, message: string, opts: SendOptions = {}): Promise<SendResult> {
    const { attachments, ...rest } = opts;
    const body: Record<string, unknown> = { message, ...rest };
    if (attachments?.length) body.attachments = attachments.map((a) => (typeof a === "string" ? { fileId: a } : { fileId: a.fileId }));
    const r = await this.request<
      { queued?: false; runId: string } | { queued: true; messageId: string; position: number; queue: Queue; runId?: string }
    >("POST", `/instance-ai/chat/${enc(threadId)}`, body);
    return r.queued ? r : { queued: false, runId: r.runId };
  }

  /** Where a stored file is read: `GET /v1/threads/:threadId/files/:fileId`. */
  fileUrl(threadId: string, fileId: string): string {
    return `${this.baseUrl}/v1/threads/${enc(threadId)}/files/${enc(fileId)}`;
  }

  /**
   * Stores files on the thread for a later {@link send} (one multipart
   * request, a part per file) and returns them in order. A file whose type
   * the browser left empty is declared by its name's extension
   * ({@link mediaTypeFor}); a `Blob` without a name is sent as `file-<n>`.
   * Refusals throw {@link ThreadlineError} with the server's code
   * (`file_too_large`, `too_many_files`, `unsupported_media_type`,
   * `file_type_mismatch`, `invalid_file`). Reports progress through
   * `XMLHttpRequest` where there is one and this client was given no `fetch`.
   */
  async uploadFiles(threadId: string, files: FileSource, opts: UploadOptions = {}): Promise<UploadedFile[]> {
    const form = new FormData();
    let total = 0;
    Array.from(files).forEach((f, i) => {
      const name = typeof (f as File).name === "string" && (f as File).name ? (f as File).name : `file-${i + 1}`;
      const type = mediaTypeFor(name, f.type);
      form.append("files", type === f.type ? f : new Blob([f], { type }), name);
      total += f.size;
    });
    const url = `${this.baseUrl}/v1/threads/${enc(threadId)}/files`;
    const headers = { ...(await this.headers()) };
    const useXhr = !this.ownFetch && typeof XMLHttpRequest !== "undefined";
    const res = useXhr ? await xhrPost(url, headers, form, opts) : await this.fetchPost(url, headers, form, total, opts);
    if (res.status < 200 || res.status > 299) throw refusal(res.status, res.statusText, res.text);
    let body: { files?: UploadedFile[] } | undefined;
    try {
      body = JSON.parse(res.text) as { files?: UploadedFile[] };
    } catch {
      body = undefined;
    }
    if (!Array.isArray(body?.files)) throw new ThreadlineError(res.status, "invalid_response", "the upload's answer lists no files", res.text);
    return body.files;
  }

  private async fetchPost(url: string, headers: Headers, form: FormData, total: number, opts: UploadOptions): Promise<RawResponse> {
    const res = await this.fetchFn(url, { method: "POST", headers, body: form, signal: opts.signal });
    const text = await res.text();
    opts.onProgress?.({ loaded: total, total });
    return { status: res.status, statusText: res.statusText, text };
  }

  /**
   * A stored file's bytes, read with this client's headers: for an `<img>`
   * (which cannot send a bearer token), make a `blob:` URL of it. The blob's
   * type is the server's `Content-Type`.
   */
  async fileBlob(threadId: string, fileId: string, opts: { signal?: AbortSignal } = {}): Promise<Blob> {
    const res = await this.fetchFn(this.fileUrl(threadId, fileId), { headers: { ...(await this.headers()) }, signal: opts.signal });
    if (!res.ok) throw refusal(res.status, res.statusText, await res.text());
    return res.blob();
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

  /**
   * Makes the conversation's active path the one through `messageId` (a
   * user message or an answer's run id), to its newest turn; returns the
   * new leaf (a run id). 409 `run_active` while a run is active.
   */
  async switchBranch(threadId: string, messageId: string): Promise<string> {
    return (await this.request<{ leaf: string }>("POST", `/instance-ai/threads/${enc(threadId)}/branch`, { messageId })).leaf;
  }

  /**
   * Forks the thread at `messageId` (a user message, or an answer's run
   * id): a new thread, the caller's, whose history is this one's path up to
   * that turn, shared rather than copied. `newThreadId` names it (409
   * `thread_exists` when taken); else the server makes one.
   */
  fork(threadId: string, messageId: string, newThreadId?: string): Promise<Forked> {
    return this.request("POST", `/instance-ai/threads/${enc(threadId)}/fork`, { messageId, ...(newThreadId ? { threadId: newThreadId } : {}) });
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

  /**
   * The caller's threads, newest first. The route answers agora's bare
   * array (`id`, ISO times); a server of before answered `{threads}` with
   * `threadId` and epoch times: both read the same.
   */
  async threads(): Promise<ThreadSummary[]> {
    type Row = { id?: string; threadId?: string; title?: string | null; createdAt: number | string; updatedAt: number | string; runs?: number };
    const r = await this.request<Row[] | { threads?: Row[] }>("GET", "/agent/threads");
    const rows = Array.isArray(r) ? r : (r.threads ?? []);
    const ms = (t: number | string) => (typeof t === "number" ? t : Date.parse(t));
    return rows.map((row) => ({
      threadId: row.threadId ?? row.id ?? "",
      title: row.title ?? null,
      createdAt: ms(row.createdAt),
      updatedAt: ms(row.updatedAt),
      runs: row.runs ?? 0,
    }));
  }

  deleteThread(threadId: string): Promise<unknown> {
    return this.request("DELETE", `/instance-ai/threads/${enc(threadId)}`);
  }

  /** A short-lived read-only token for `?token=` on the thread's streams. */
  streamToken(threadId: string): Promise<{ token: string; expiresAt: number }> {
    return this.request("POST", `/instance-ai/threads/${enc(threadId)}/stream-token`, {});
  }

  /** A page of the caller's inbox: their threads with their live state. */
  inboxPage(query: { limit?: number; cursor?: string; state?: "idle" | "running" | "waiting" | "unread" } = {}): Promise<InboxPage> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    return this.request("GET", `/v1/inbox${qs ? `?${qs}` : ""}`);
  }

  /** Marks `threadId` read up to `eventId`; answers its row. */
  markRead(threadId: string, eventId: number): Promise<InboxRow> {
    return this.request("POST", `/instance-ai/threads/${enc(threadId)}/read`, { eventId });
  }

  /** The inbox's changes after `cursor` (a page's `eventId`), resumable. */
  inboxChanges(opts: { cursor: number; onRow: (row: InboxRow) => void; onState?: StreamOptions["onState"] }): ResumableStream {
    return new ResumableStream({
      url: `${this.baseUrl}/v1/inbox`,
      cursor: opts.cursor,
      eventName: "thread",
      onEvent: (ev) => opts.onRow(ev as unknown as InboxRow),
      onState: opts.onState,
      fetch: this.fetchFn,
      headers: this.headers,
    });
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

interface RawResponse {
  status: number;
  statusText: string;
  text: string;
}

/** A POST through `XMLHttpRequest`, the one browser API that reports upload progress. */
function xhrPost(url: string, headers: Headers, body: FormData, opts: UploadOptions): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const abortError = () => new DOMException("The upload was aborted", "AbortError");
    if (opts.signal?.aborted) return reject(abortError());
    const xhr = new XMLHttpRequest();
    xhr.open("POST", url);
    for (const [k, v] of Object.entries(headers)) xhr.setRequestHeader(k, v);
    const onAbort = () => xhr.abort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const done = () => opts.signal?.removeEventListener("abort", onAbort);
    if (opts.onProgress) {
      const report = opts.onProgress;
      xhr.upload.onprogress = (e) => report({ loaded: e.loaded, total: e.lengthComputable ? e.total : 0 });
    }
    xhr.onload = () => {
      done();
      resolve({ status: xhr.status, statusText: xhr.statusText, text: typeof xhr.responseText === "string" ? xhr.responseText : "" });
    };
    xhr.onerror = () => {
      done();
      reject(new ThreadlineError(0, "network_error", "the upload did not reach the server", undefined));
    };
    xhr.onabort = () => {
      done();
      reject(abortError());
    };
    xhr.send(body);
  });
}
