/**
 * The caller's inbox, live: every thread with its state (running, waiting
 * for them, unread), kept current from the inbox's change stream.
 *
 * Invariant: the rows are the snapshot, then every change after it in
 * order (the stream resumes after the last change it delivered), so the
 * list never misses a change nor applies one twice.
 */
import type { ThreadlineClient, InboxRow } from "./api.js";
import type { ResumableStream } from "./connection.js";

export interface InboxOptions {
  /** Called after the rows changed. */
  onChange?: (inbox: Inbox) => void;
  /** A thread started waiting for the person (not called for the snapshot). */
  onWaiting?: (row: InboxRow) => void;
}

export class Inbox {
  private readonly rows = new Map<string, InboxRow>();
  private stream: ResumableStream | undefined;

  constructor(
    private readonly client: ThreadlineClient,
    private readonly opts: InboxOptions = {},
  ) {}

  /** Loads the rows (up to `limit`), then follows their changes. */
  async open(limit = 200): Promise<this> {
    const page = await this.client.inboxPage({ limit });
    for (const row of page.rows) this.rows.set(row.threadId, row);
    this.opts.onChange?.(this);
    this.stream = this.client.inboxChanges({ cursor: page.eventId, onRow: (row) => this.apply(row) }).start();
    return this;
  }

  close(): void {
    this.stream?.close();
  }

  /** The rows, newest change first. */
  list(): InboxRow[] {
    return [...this.rows.values()].sort((a, b) => b.updatedAt - a.updatedAt || a.threadId.localeCompare(b.threadId));
  }

  get(threadId: string): InboxRow | undefined {
    return this.rows.get(threadId);
  }

  /** Marks the thread read up to what it last asked the person to read. */
  async markRead(threadId: string): Promise<void> {
    const row = this.rows.get(threadId);
    if (!row?.unread) return;
    this.apply(await this.client.markRead(threadId, row.answerId));
  }

  private apply(row: InboxRow) {
    const before = this.rows.get(row.threadId);
    if (row.deleted) this.rows.delete(row.threadId);
    else this.rows.set(row.threadId, row);
    if (row.state === "waiting" && before?.state !== "waiting") this.opts.onWaiting?.(row);
    this.opts.onChange?.(this);
  }
}
