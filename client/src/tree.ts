/**
 * The agent-tree reducer: folds a run's events into the activity tree a page
 * renders (docs/protocols/n8n-instance-ai-streaming-protocol.md, "Frontend Rendering"). A port of the Rust core's
 * `durable/src/log/reducer.rs`, which is n8n's own reducer (`@n8n/api-types`'
 * `reduceEvent`, with the editor's handling of `error`); both fold the same
 * fixture logs (`durable/tests/fixtures/reducer/`) to the same trees, in
 * both test suites, and so does n8n's (`client/test/reducer.test.mjs`).
 *
 * Rules (docs/architecture.md, "How the log works"):
 * - text and reasoning join the agent's last timeline entry when it is of
 *   the same kind and `responseId`, else start one;
 * - a `text-block` / `reasoning-block`, or a delta with `snapshot: true`,
 *   REPLACES that last entry when it has the same `responseId` and starts
 *   or ends with what the entry holds, so text seen live as deltas and then
 *   replayed as a block is shown once; otherwise it joins as a delta would;
 * - an `error` adds `\n\n*Error: <content>*` to its agent's text;
 * - `run-finish` sets the root's status only; times are ISO 8601.
 */
import type { AgentNode, AgentToolCall, NodeStatus, TimelineEntry } from "./schema.gen.js";
import type { StreamEvent } from "./events.js";

type Payload = Record<string, unknown>;

interface MutableNode extends AgentNode {
  toolCalls: AgentToolCall[];
  timeline: TimelineEntry[];
}

function node(agentId: string, role: string): MutableNode {
  return {
    agentId,
    role,
    status: "active",
    textContent: "",
    reasoning: "",
    toolCalls: [],
    children: [],
    timeline: [],
  };
}

/** How n8n's editor draws a tool, by its name (`getRenderHint`). */
export function renderHint(tool: string): string {
  if (tool === "task-control") return "tasks";
  if (tool === "build-workflow" || tool === "build-workflow-with-agent") return "builder";
  if (tool === "research-with-agent") return "researcher";
  if (tool === "create-tasks") return "planner";
  if (tool === "eval-setup-with-agent") return "eval-setup";
  if (["create_skills", "list_skills", "read_skill", "update_skill", "load_skill"].includes(tool)) return "skill";
  return "default";
}

const iso = (ts: number) => new Date(ts).toISOString();

function pending(toolCallId: string, toolName: string, args: unknown, ts: number): AgentToolCall {
  return { toolCallId, toolName, args, isLoading: true, renderHint: renderHint(toolName), startedAt: iso(ts) };
}

/** Error codes n8n writes no error line for. */
const QUIET_ERROR_CODES = new Set(["quota_exhausted"]);

function cancellation(reason: unknown): string | undefined {
  switch (reason) {
    case "timeout":
      return "timeout";
    case "service_shutdown":
      return "shutdown";
    case "user_cancelled":
      return "user";
    case "crash_interrupted":
      return "interrupted";
    default:
      return undefined;
  }
}

/** What `agent-spawned` says of its agent. */
function describe(n: MutableNode, p: Payload): void {
  const text = (k: string) => (typeof p[k] === "string" ? (p[k] as string) : undefined);
  n.role = text("role") ?? "";
  const fields: [keyof AgentNode, unknown][] = [
    ["tools", Array.isArray(p.tools) ? p.tools : undefined],
    ["taskId", text("taskId")],
    ["kind", text("kind")],
    ["title", text("title")],
    ["subtitle", text("subtitle")],
    ["goal", text("goal")],
    ["targetResource", p.targetResource && typeof p.targetResource === "object" ? p.targetResource : undefined],
  ];
  for (const [k, v] of fields) {
    if (v === undefined) delete (n as unknown as Record<string, unknown>)[k];
    else (n as unknown as Record<string, unknown>)[k] = v;
  }
}

/** Folds events into a flat arena; {@link TreeBuilder.tree} nests it. */
export class TreeBuilder {
  private nodes: MutableNode[] = [];
  private kids: number[][] = [];
  private root: number | undefined;
  /** Nodes created for an agent seen before its `agent-spawned`. */
  private implicit = new Set<number>();

  /** Continues from a tree the server folded (`GET .../messages`). */
  static fromTree(tree: AgentNode | null | undefined): TreeBuilder {
    const b = new TreeBuilder();
    if (!tree) return b;
    const visit = (n: AgentNode, parent: number | undefined) => {
      const copy = JSON.parse(JSON.stringify(n)) as MutableNode;
      copy.children = [];
      const i = b.push(copy, parent);
      for (const c of n.children) {
        const k = visit(c, i);
        // A child its parent's timeline never announced was seen before its
        // `agent-spawned`: keep it implicit so a late announcement still moves it.
        if (!n.timeline.some((t) => t.type === "child" && t.agentId === c.agentId)) b.implicit.add(k);
      }
      return i;
    };
    visit(tree, undefined);
    return b;
  }

  private find(agentId: string): number | undefined {
    const i = this.nodes.findIndex((n) => n.agentId === agentId);
    return i < 0 ? undefined : i;
  }

  private push(n: MutableNode, parent: number | undefined): number {
    this.nodes.push(n);
    this.kids.push([]);
    const i = this.nodes.length - 1;
    if (parent === undefined) this.root = i;
    else this.kids[parent]!.push(i);
    return i;
  }

  /** The node of `agentId`; an agent not yet announced hangs off the root. */
  private nodeFor(agentId: string): MutableNode {
    const i = this.find(agentId);
    if (i !== undefined) return this.nodes[i]!;
    if (this.root === undefined) return this.nodes[this.push(node(agentId, "orchestrator"), undefined)]!;
    const k = this.push(node(agentId, agentId), this.root);
    this.implicit.add(k);
    return this.nodes[k]!;
  }

  /** A tool call by id: the agent's own first, then any agent's. */
  private callOf(agentId: string, id: string): AgentToolCall | undefined {
    const own = this.find(agentId);
    const order = own === undefined ? [...this.nodes.keys()] : [own, ...this.nodes.keys()];
    for (const i of order) {
      const tc = this.nodes[i]!.toolCalls.find((t) => t.toolCallId === id);
      if (tc) return tc;
    }
    return undefined;
  }

  private addCall(n: MutableNode, call: AgentToolCall, ev: StreamEvent): void {
    n.toolCalls.push(call);
    const entry: TimelineEntry = { type: "tool-call", toolCallId: call.toolCallId };
    if (ev.responseId) entry.responseId = ev.responseId;
    n.timeline.push(entry);
  }

  /** A child's entry: the event's `responseId`, else the parent's last entry's. */
  private childEntry(parent: MutableNode, agentId: string, ev: StreamEvent): TimelineEntry {
    const inherited = ev.responseId ?? parent.timeline.at(-1)?.responseId ?? undefined;
    return inherited ? { type: "child", agentId, responseId: inherited } : { type: "child", agentId };
  }

  apply(ev: StreamEvent): void {
    const p = (ev.payload ?? {}) as Payload;
    const str = (k: string) => (typeof p[k] === "string" ? (p[k] as string) : "");
    switch (ev.type) {
      case "run-start":
        if (this.root === undefined) this.push(node(ev.agentId, "orchestrator"), undefined);
        else this.nodes[this.root]!.status = "active";
        break;
      case "text-delta":
      case "reasoning-delta":
      case "text-block":
      case "reasoning-block": {
        const slot = ev.type.startsWith("text") ? "text" : "reasoning";
        const block = ev.type.endsWith("block") || p.snapshot === true;
        applyText(this.nodeFor(ev.agentId), slot, ev.responseId ?? undefined, str("text"), block);
        break;
      }
      case "tool-input-start":
      case "tool-call": {
        const id = str("toolCallId");
        const known = this.callOf(ev.agentId, id);
        if (known) {
          if (ev.type === "tool-call") known.args = p.args ?? null;
        } else {
          this.addCall(this.nodeFor(ev.agentId), pending(id, str("toolName"), ev.type === "tool-call" ? (p.args ?? null) : {}, ev.ts), ev);
        }
        // An MCP tool's server, as the Rust reducer keeps it.
        if (typeof p.server === "string") {
          const call = this.callOf(ev.agentId, id);
          if (call) call.server = p.server;
        }
        break;
      }
      case "tool-result":
      case "tool-error":
      case "tool-interrupted": {
        const tc = this.callOf(ev.agentId, str("toolCallId"));
        if (tc) {
          if (ev.type === "tool-result") tc.result = p.result;
          else tc.error = str("error");
          tc.isLoading = false;
          tc.completedAt = iso(ev.ts);
        }
        break;
      }
      case "confirmation-request": {
        const id = str("toolCallId");
        let tc = this.callOf(ev.agentId, id);
        if (!tc) {
          tc = pending(id, str("toolName"), p.args ?? null, ev.ts);
          this.addCall(this.nodeFor(ev.agentId), tc, ev);
        }
        // Without the call's own fields, and the server's (who decides, until when).
        const { toolCallId: _id, toolName: _name, args: _args, approver: _approver, expiresAt: _expires, ...request } = p;
        tc.confirmation = request;
        break;
      }
      case "agent-spawned": {
        const existing = this.find(ev.agentId);
        if (existing !== undefined) {
          if (this.implicit.has(existing) && this.root !== undefined) {
            // Announced late: it becomes a spawned child, in announce order.
            this.implicit.delete(existing);
            describe(this.nodes[existing]!, p);
            const r = this.root;
            this.kids[r] = this.kids[r]!.filter((k) => k !== existing);
            this.kids[r]!.push(existing);
            const root = this.nodes[r]!;
            root.timeline.push(this.childEntry(root, ev.agentId, ev));
          }
          break;
        }
        const parent = this.find(str("parentId"));
        if (parent === undefined) break;
        const n = node(ev.agentId, "");
        describe(n, p);
        const entry = this.childEntry(this.nodes[parent]!, ev.agentId, ev);
        this.push(n, parent);
        this.nodes[parent]!.timeline.push(entry);
        break;
      }
      case "agent-completed": {
        const i = this.find(ev.agentId);
        if (i === undefined) break;
        const n = this.nodes[i]!;
        const err = typeof p.error === "string" ? p.error : undefined;
        n.status = agentEnd(p.status, err);
        if (p.result === null || p.result === undefined) delete n.result;
        else n.result = p.result;
        if (err === undefined) delete n.error;
        else n.error = err;
        for (const tc of n.toolCalls) tc.isLoading = false;
        break;
      }
      case "tasks-update": {
        const n = this.nodeFor(ev.agentId);
        n.tasks = p.tasks;
        if (p.planItems !== undefined && p.planItems !== null) n.planItems = p.planItems;
        break;
      }
      case "status": {
        const n = this.nodeFor(ev.agentId);
        const m = str("message");
        if (m === "") delete n.statusMessage;
        else n.statusMessage = m;
        break;
      }
      case "error": {
        const i = this.find(ev.agentId) ?? this.root;
        if (i === undefined) break;
        const n = this.nodes[i]!;
        const content = str("content");
        if (!(typeof p.code === "string" && QUIET_ERROR_CODES.has(p.code))) {
          applyText(n, "text", ev.responseId ?? undefined, `\n\n*Error: ${content}*`, false);
        }
        // As n8n's editor keeps them: a status code when there is one, the rest when not empty.
        const details: Record<string, unknown> = {};
        if (p.statusCode !== undefined && p.statusCode !== null) details.statusCode = p.statusCode;
        for (const k of ["code", "provider", "technicalDetails"]) if (typeof p[k] === "string" && p[k] !== "") details[k] = p[k];
        n.status = "error";
        n.error = content;
        n.errorDetails = details;
        break;
      }
      case "run-finish": {
        if (this.root === undefined) break;
        const r = this.nodes[this.root]!;
        const status = str("status");
        const next: NodeStatus = status === "completed" ? "completed" : status === "cancelled" || status === "interrupted" ? "cancelled" : "error";
        if (next === "cancelled") {
          const why = cancellation(p.reason);
          if (why === undefined) delete r.cancellationReason;
          else r.cancellationReason = why;
        }
        if (next !== "completed") for (const n of this.nodes) for (const tc of n.toolCalls) tc.isLoading = false;
        if (typeof p.reason === "string" && next === "error" && r.error === undefined) r.error = p.reason;
        r.status = next;
        break;
      }
      default:
        break;
    }
  }

  /** The nested tree, as the server serialises it (absent fields dropped). */
  tree(): AgentNode | null {
    if (this.root === undefined) return null;
    const build = (i: number): AgentNode => {
      const n: AgentNode = { ...this.nodes[i]! };
      const spawned = this.kids[i]!.filter((k) => !this.implicit.has(k));
      const unannounced = this.kids[i]!
        .filter((k) => this.implicit.has(k))
        .sort((a, b) => (this.nodes[a]!.agentId < this.nodes[b]!.agentId ? -1 : 1));
      n.children = [...spawned, ...unannounced].map(build);
      return n;
    };
    return JSON.parse(JSON.stringify(build(this.root))) as AgentNode;
  }
}

function agentEnd(status: unknown, err: string | undefined): NodeStatus {
  if (status === "cancelled") return "cancelled";
  if (status === "error") return "error";
  if (status) return "completed";
  return err ? "error" : "completed";
}

function applyText(
  n: MutableNode,
  slot: "text" | "reasoning",
  rid: string | undefined,
  text: string,
  block: boolean,
): void {
  const key = slot === "text" ? "textContent" : "reasoning";
  const last = n.timeline.at(-1);
  if (last && last.type === slot && (last.responseId ?? undefined) === rid) {
    if (block && rid !== undefined && (text.startsWith(last.content) || text.endsWith(last.content)) && n[key].endsWith(last.content)) {
      n[key] = n[key].slice(0, n[key].length - last.content.length) + text;
      last.content = text;
      return;
    }
    last.content += text;
    n[key] += text;
    return;
  }
  n[key] += text;
  const entry: TimelineEntry = rid === undefined ? { type: slot, content: text } : { type: slot, content: text, responseId: rid };
  n.timeline.push(entry);
}

/** Folds the events of one run. */
export function fold(events: Iterable<StreamEvent>): AgentNode | null {
  const b = new TreeBuilder();
  for (const e of events) b.apply(e);
  return b.tree();
}

/**
 * The conversation's active path as the log tells it (the Rust fold's twin,
 * `durable/src/log/branches.rs`): a `run-start` without `branch` follows the
 * active leaf, one with it follows `branch.parent`, and `branch-switched`
 * moves the leaf. For a client that replays a thread's whole log (a
 * Durable Streams reader); both folds find the paths recorded in
 * `durable/tests/fixtures/branches/`.
 */
export class ActivePath {
  private parent = new Map<string, string | null>();
  private leaf: string | null = null;

  apply(ev: StreamEvent): void {
    if (ev.type === "run-start") {
      const point = ev.payload.branch;
      const follows = point ? (point.parent ?? null) : this.leaf;
      // A run-start seen twice (a replay over a live read) keeps its place.
      if (!this.parent.has(ev.runId)) this.parent.set(ev.runId, follows);
      this.leaf = ev.runId;
    } else if (ev.type === "branch-switched") {
      this.leaf = ev.payload.leaf;
    }
  }

  /** The run ids of the active path, first turn first. */
  path(): string[] {
    const out: string[] = [];
    for (let at = this.leaf; at !== null && out.length <= this.parent.size; at = this.parent.get(at) ?? null) out.push(at);
    return out.reverse();
  }
}

/** The active path of `events`, folded in order. */
export function activePath(events: Iterable<StreamEvent>): string[] {
  const p = new ActivePath();
  for (const e of events) p.apply(e);
  return p.path();
}
