/**
 * A thread as a page shows it: the conversation, each run's agent tree, the
 * title, the status line, the queue, the open confirmations and the
 * connection state, kept current from the event stream.
 *
 * Session restore follows the protocol's order (docs/protocols/n8n-instance-ai-streaming-protocol.md, "Session Restore"): load the
 * messages, then the status, then connect the stream with
 * `lastEventId = nextEventId - 1`, so nothing folded into the restored trees
 * is applied twice and nothing published since is missed.
 */
import type { AgentNode, AgentToolCall, BranchPoint, ContextCompacted, Queue } from "./schema.gen.js";
import type { StreamEvent } from "./events.js";
import { TreeBuilder } from "./tree.js";
import { ThreadlineClient, ThreadlineError, type Branch, type Decision, type SendOptions, type SendResult } from "./api.js";
import type { ConnectionState, ResumableStream } from "./connection.js";
import { attachmentsOf, type Attachment, type FileSource, type UploadedFile, type UploadOptions } from "./files.js";

export interface Turn {
  runId: string;
  /** The user's message that started the run. */
  message: string;
  messageId: string;
  /**
   * The files and URLs the message carries (from `run-start`, or the
   * history, whose stored files also have their `url`); empty when none.
   */
  attachments: Attachment[];
  /** The run's agent tree, folded so far. */
  tree: AgentNode | null;
  /** True until its `run-finish`. */
  running: boolean;
  /** Where its message stands among its edits, when it has any. */
  messageBranch?: Branch;
  /** Where its answer stands among the answers to its message, when it has any. */
  answerBranch?: Branch;
  /** On a fork, the thread a shared turn is of: it is changed there, not here. */
  sharedFrom?: string;
  /**
   * The model's context was compacted during this turn (or after it, when a
   * person asked): from here on the model reads a summary of what came
   * before. The conversation shown is whole.
   */
  compacted?: ContextCompacted;
}

export interface OpenConfirmation {
  runId: string;
  agentId: string;
  toolCall: AgentToolCall;
  /** The `confirmation-request` payload (requestId, inputType, severity, ...). */
  request: Record<string, unknown>;
}

export interface SessionOptions {
  /** Authenticate the stream with a stream token in the URL. */
  useStreamToken?: boolean;
  backoff?: { initialMs?: number; maxMs?: number; jitter?: number };
}

type Listener = () => void;

export class ThreadSession {
  readonly threadId: string;
  turns: Turn[] = [];
  title: string | undefined;
  /** The transient `status` line of the active run. */
  statusLine: string | undefined;
  queue: Queue = { items: [], paused: false };
  activeRunId: string | undefined;
  connection: ConnectionState | "idle" = "idle";
  /** The last refusal or failure, for the page to show. */
  lastError: ThreadlineError | Error | undefined;

  private readonly client: ThreadlineClient;
  private readonly opts: SessionOptions;
  private builders = new Map<string, TreeBuilder>();
  private refreshing: Promise<void> = Promise.resolve();
  private decided = new Set<string>();
  private stream: ResumableStream | undefined;
  private listeners = new Set<Listener>();

  constructor(client: ThreadlineClient, threadId: string, opts: SessionOptions = {}) {
    this.client = client;
    this.threadId = threadId;
    this.opts = opts;
  }

  /** Called after every change; returns the unsubscribe function. */
  subscribe(fn: Listener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed() {
    for (const fn of this.listeners) fn();
  }

  /**
   * Restores the thread (messages, then status, then the stream from
   * `nextEventId - 1`). A thread that does not exist yet is an empty one:
   * its stream is served, and the first send's events arrive on it.
   */
  async open(): Promise<void> {
    const cursor = await this.restore();
    this.changed();
    this.connect(cursor);
  }

  /**
   * Reads the conversation's active path from the history (its turns,
   * their trees and branch positions) and the status; returns the stream
   * cursor the page matches. Each turn's tree is the server's fold.
   */
  private async restore(): Promise<number> {
    let cursor = 0;
    this.turns = [];
    this.builders = new Map();
    try {
      const page = await this.client.messages(this.threadId, 100, 0);
      // Each user message, then the assistant message of the run answering
      // it (a user message names no run, as n8n's history does).
      // (A server of before named the run on the user message too.)
      let asked: { content: string; id: string; attachments: Attachment[]; branch?: Branch } | undefined;
      for (const m of page.messages) {
        if (m.role === "user") {
          asked = { content: m.content, id: m.id, attachments: attachmentsOf(m.attachments), branch: m.branch };
          if (m.runId) {
            const t = this.turn(m.runId);
            Object.assign(t, { message: asked.content, messageId: asked.id, attachments: asked.attachments, running: false });
            asked = undefined;
          }
          continue;
        }
        if (!m.runId) continue;
        const runId = m.runId;
        const b = TreeBuilder.fromTree(m.agentTree ?? null);
        this.builders.set(runId, b);
        const turn = this.turn(runId);
        if (asked) {
          turn.message = asked.content;
          turn.messageId = asked.id;
          turn.attachments = asked.attachments;
          turn.messageBranch = asked.branch;
          asked = undefined;
        }
        turn.answerBranch = m.branch;
        turn.sharedFrom = m.sharedFrom;
        turn.compacted = m.contextCompacted;
        turn.tree = b.tree();
        turn.running = m.isStreaming;
      }
      cursor = Math.max(0, page.nextEventId - 1);
      this.queue = page.queue;
      const status = await this.client.status(this.threadId);
      this.activeRunId = status.hasActiveRun ? status.runId : undefined;
    } catch (e) {
      if (!(e instanceof ThreadlineError && e.code === "thread_not_found")) throw e;
    }
    return cursor;
  }

  /**
   * The conversation moved to a branch this session may not hold (a switch,
   * or a turn after a message it does not show): read the active path
   * again. No run is active while the tree changes, so no event of a run
   * is in flight meanwhile; the stream goes on from where it is.
   */
  private refresh(): void {
    this.refreshing = this.refreshing
      .then(() => this.restore())
      .then(() => this.changed())
      .catch((e) => {
        this.lastError = e as Error;
        this.changed();
      });
  }

  /** Settles once the history read after the last branch change is applied. */
  get settled(): Promise<void> {
    return this.refreshing;
  }

  /**
   * A run that branches (`run-start.branch`: an edit or an answer again)
   * follows `parent` instead of the last turn: the turns after the parent
   * leave the path, and the new turn's siblings are the one it replaces and
   * that one's. Returns false when the parent is not on this session's path.
   */
  private branchAt(runId: string, point: BranchPoint, messageId: string): boolean {
    const parent = point.parent ?? null;
    // A first turn follows a fork's shared turns, which come first.
    const shared = this.turns.filter((t) => t.sharedFrom !== undefined).length;
    const at = parent === null ? shared : this.turns.findIndex((t) => t.runId === parent) + 1;
    const left = this.turns[at];
    if (at === 0 && parent !== null) return false;
    if (!left || left.runId === runId) return left?.runId === runId;
    const grow = (b: Branch | undefined, id: string, alone: string): Branch => {
      const ids = [...(b?.ids ?? [alone]), id];
      return { index: ids.length - 1, count: ids.length, ids };
    };
    const turn: Turn = { runId, message: "", messageId, attachments: [], tree: null, running: true };
    if (point.editOf != null) {
      turn.messageBranch = grow(left.messageBranch, messageId, left.messageId);
    } else {
      turn.message = left.message;
      turn.attachments = left.attachments;
      turn.messageBranch = left.messageBranch;
      turn.answerBranch = grow(left.answerBranch, runId, left.runId);
    }
    this.turns = [...this.turns.slice(0, at), turn];
    return true;
  }

  private connect(cursor: number) {
    this.stream = this.client.events(this.threadId, {
      cursor,
      useStreamToken: this.opts.useStreamToken,
      backoff: this.opts.backoff,
      onEvent: (ev) => this.apply(ev),
      onState: (s) => {
        this.connection = s;
        this.changed();
      },
    });
    this.stream.start();
  }

  close(): void {
    this.stream?.close();
    this.listeners.clear();
  }

  /** The highest durable id applied. */
  get cursor(): number {
    return this.stream?.cursor ?? 0;
  }

  /** Drops the stream and resumes it from the cursor (as after a network blip). */
  reconnect(): void {
    this.stream?.reconnect();
  }

  private turn(runId: string): Turn {
    let t = this.turns.find((x) => x.runId === runId);
    if (!t) {
      t = { runId, message: "", messageId: "", attachments: [], tree: null, running: true };
      this.turns.push(t);
    }
    return t;
  }

  /** Folds one event from the stream. */
  apply(ev: StreamEvent): void {
    const p = ev.payload as Record<string, unknown>;
    switch (ev.type) {
      case "thread-title-updated":
        this.title = String(p.title ?? "");
        break;
      case "queue-updated":
        this.queue = ev.payload;
        break;
      case "status":
        this.statusLine = ev.payload.message || undefined;
        break;
      case "branch-switched":
        this.refresh();
        this.changed();
        return;
      case "context-compacted": {
        // On a turn this session shows (a person's compaction lands in the
        // last turn, after its finish).
        const t = this.turns.find((x) => x.runId === ev.runId);
        if (t) t.compacted = ev.payload;
        this.changed();
        return;
      }
      case "run-start": {
        const point = ev.payload.branch;
        if (point && !this.branchAt(ev.runId, point, ev.payload.messageId)) {
          // A branch from a turn this session does not show: the history
          // has it (the run's own events then apply to what it restored).
          this.refresh();
        }
        const t = this.turn(ev.runId);
        t.messageId = ev.payload.messageId;
        if (typeof ev.payload.message === "string") t.message = ev.payload.message;
        const carried = ev.payload.attachments;
        if (Array.isArray(carried)) t.attachments = withKnownUrls(attachmentsOf(carried), t.attachments);
        t.running = true;
        this.activeRunId = ev.runId;
        break;
      }
      case "run-finish":
        this.turn(ev.runId).running = false;
        if (this.activeRunId === ev.runId) this.activeRunId = undefined;
        this.statusLine = undefined;
        break;
    }
    if (ev.type !== "thread-title-updated" && ev.type !== "queue-updated") {
      let b = this.builders.get(ev.runId);
      if (!b) {
        b = new TreeBuilder();
        this.builders.set(ev.runId, b);
      }
      b.apply(ev);
      this.turn(ev.runId).tree = b.tree();
    }
    this.changed();
  }

  /** Confirmations waiting for a decision, oldest first. */
  get openConfirmations(): OpenConfirmation[] {
    const out: OpenConfirmation[] = [];
    const walk = (runId: string, n: AgentNode) => {
      for (const tc of n.toolCalls) {
        const req = tc.confirmation as Record<string, unknown> | null | undefined;
        if (req && tc.isLoading && !this.decided.has(String(req.requestId))) {
          out.push({ runId, agentId: n.agentId, toolCall: tc, request: req });
        }
      }
      n.children.forEach((c) => walk(runId, c));
    };
    for (const t of this.turns) if (t.running && t.tree) walk(t.runId, t.tree);
    return out;
  }

  private async act<T>(f: () => Promise<T>): Promise<T> {
    try {
      const r = await f();
      this.lastError = undefined;
      return r;
    } catch (e) {
      this.lastError = e as Error;
      this.changed();
      throw e;
    }
  }

  async send(message: string, opts: SendOptions = {}): Promise<SendResult> {
    const r = await this.act(() => this.client.send(this.threadId, message, { mode: "queue", ...opts }));
    if (r.queued) this.queue = r.queue;
    this.stream?.kick();
    this.changed();
    return r;
  }

  /**
   * Stores files on this thread for a later {@link send} (`attachments:
   * files.map(f => f.fileId)`). A refusal is kept in {@link lastError} (and
   * thrown); a success does not clear an earlier one.
   */
  async uploadFiles(files: FileSource, opts: UploadOptions = {}): Promise<UploadedFile[]> {
    try {
      return await this.client.uploadFiles(this.threadId, files, opts);
    } catch (e) {
      if ((e as Error).name !== "AbortError") {
        this.lastError = e as Error;
        this.changed();
      }
      throw e;
    }
  }

  /** A stored file of this thread as a Blob, read with the client's headers. */
  fileBlob(fileId: string, opts: { signal?: AbortSignal } = {}): Promise<Blob> {
    return this.client.fileBlob(this.threadId, fileId, opts);
  }

  cancel() {
    return this.act(() => this.client.cancel(this.threadId));
  }

  async decide(requestId: string, decision: Decision): Promise<void> {
    await this.act(() => this.client.confirm(requestId, decision));
    this.decided.add(requestId);
    this.changed();
  }

  /**
   * Edits user message `messageId`: the new text (and files) on a branch
   * beside it, answered by a new run. 409 `run_active` while a run is active.
   */
  async edit(messageId: string, message: string, opts: Omit<SendOptions, "editOf" | "regenerate" | "messageId"> = {}): Promise<SendResult> {
    const r = await this.act(() => this.client.send(this.threadId, message, { ...opts, mode: "reject", editOf: messageId }));
    this.stream?.kick();
    return r;
  }

  /** Answers again the message that answer `runId` answered (none: the last). */
  async regenerate(runId?: string, opts: Pick<SendOptions, "model"> = {}): Promise<SendResult> {
    const r = await this.act(() => this.client.send(this.threadId, "", { ...opts, regenerate: true, messageId: runId }));
    this.stream?.kick();
    return r;
  }

  /** Shows the branch through `messageId` (a user message, or an answer's run id). */
  switchBranch(messageId: string): Promise<string> {
    return this.act(() => this.client.switchBranch(this.threadId, messageId));
  }

  /** A new thread sharing this one's history up to `messageId`'s turn; returns its id. */
  async fork(messageId: string, newThreadId?: string): Promise<string> {
    return (await this.act(() => this.client.fork(this.threadId, messageId, newThreadId))).threadId;
  }

  queueRemove(messageId: string) {
    return this.act(() => this.client.queueRemove(this.threadId, messageId));
  }
  queueMove(messageId: string, position: number) {
    return this.act(() => this.client.queueMove(this.threadId, messageId, position));
  }
  queueEdit(messageId: string, message: string) {
    return this.act(() => this.client.queueEdit(this.threadId, messageId, message));
  }
  queuePause(paused: boolean) {
    return this.act(() => this.client.queuePause(this.threadId, paused));
  }
}

/** `next`, keeping the `url` a restored attachment had (`run-start` carries none). */
function withKnownUrls(next: Attachment[], known: Attachment[]): Attachment[] {
  return next.map((a) => {
    const url = a.url ?? known.find((k) => k.fileId !== undefined && k.fileId === a.fileId)?.url;
    return url === undefined ? a : { ...a, url };
  });
}
