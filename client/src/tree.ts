/**
 * The agent-tree reducer: folds a run's events into the activity tree a page
 * renders (docs/protocols/n8n-instance-ai-streaming-protocol.md, "Frontend Rendering"). A port of the Rust core's
 * `durable/src/reducer.rs`; both fold the same fixture logs
 * (`durable/tests/fixtures/reducer/`) to the same trees, in both test suites.
 *
 * Rules the server's coalescing relies on (docs/architecture.md, "How the log works"):
 * - a `text-block` / `reasoning-block`, or a delta with `snapshot: true`,
 *   REPLACES the timeline entry of the same `responseId` it extends, so text
 *   seen live as deltas and then replayed as a block is shown once;
 * - any other delta appends.
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

function pending(toolCallId: string, toolName: string, args: unknown, ts: number): AgentToolCall {
  return { toolCallId, toolName, args, isLoading: true, startedAt: ts };
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
        const replace = ev.type.endsWith("block") || p.snapshot === true;
        applyText(this.nodeFor(ev.agentId), slot, ev.responseId ?? undefined, str("text"), replace);
        break;
      }
      case "tool-input-start":
      case "tool-call": {
        const n = this.nodeFor(ev.agentId);
        const id = str("toolCallId");
        const tc = n.toolCalls.find((t) => t.toolCallId === id);
        if (tc) {
          if (ev.type === "tool-call") {
            tc.args = p.args ?? null;
            tc.toolName = str("toolName");
          }
        } else {
          n.toolCalls.push(pending(id, str("toolName"), ev.type === "tool-call" ? (p.args ?? null) : {}, ev.ts));
          n.timeline.push({ type: "tool-call", toolCallId: id });
        }
        // An MCP tool's server, as the Rust reducer keeps it.
        if (typeof p.server === "string") {
          const call = n.toolCalls.find((t) => t.toolCallId === id);
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
          tc.completedAt = ev.ts;
        }
        break;
      }
      case "confirmation-request": {
        const n = this.nodeFor(ev.agentId);
        const id = str("toolCallId");
        let tc = n.toolCalls.find((t) => t.toolCallId === id);
        if (!tc) {
          tc = pending(id, str("toolName"), p.args ?? null, ev.ts);
          n.toolCalls.push(tc);
          n.timeline.push({ type: "tool-call", toolCallId: id });
        }
        tc.confirmation = p;
        break;
      }
      case "agent-spawned": {
        const existing = this.find(ev.agentId);
        if (existing !== undefined) {
          if (this.implicit.has(existing) && this.root !== undefined) {
            // Announced late: it becomes a spawned child, in announce order.
            this.implicit.delete(existing);
            const n = this.nodes[existing]!;
            n.role = str("role");
            if (Array.isArray(p.tools)) n.tools = p.tools as string[];
            else delete n.tools;
            const r = this.root;
            this.kids[r] = this.kids[r]!.filter((k) => k !== existing);
            this.kids[r]!.push(existing);
            this.nodes[r]!.timeline.push({ type: "child", agentId: ev.agentId });
          }
          break;
        }
        const parent = this.find(str("parentId"));
        if (parent === undefined) break;
        const n = node(ev.agentId, str("role"));
        if (Array.isArray(p.tools)) n.tools = p.tools as string[];
        this.push(n, parent);
        this.nodes[parent]!.timeline.push({ type: "child", agentId: ev.agentId });
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
        break;
      }
      case "tasks-update":
        this.nodeFor(ev.agentId).tasks = p.tasks;
        break;
      case "status": {
        const n = this.nodeFor(ev.agentId);
        const m = str("message");
        if (m === "") delete n.statusMessage;
        else n.statusMessage = m;
        break;
      }
      case "error":
        this.nodeFor(ev.agentId).error = str("content");
        break;
      case "run-finish": {
        if (this.root === undefined) break;
        const r = this.nodes[this.root]!;
        const status = str("status");
        r.status = status === "completed" ? "completed" : status === "cancelled" ? "cancelled" : "error";
        if (status !== "completed") {
          for (const n of this.nodes) {
            for (const tc of n.toolCalls) tc.isLoading = false;
            if (n.status === "active") n.status = "cancelled";
          }
        }
        if (typeof p.reason === "string" && status === "error" && r.error === undefined) r.error = p.reason;
        delete r.statusMessage;
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
  replace: boolean,
): void {
  const key = slot === "text" ? "textContent" : "reasoning";
  const last = n.timeline.at(-1);
  if (last && last.type === slot && (last.responseId ?? undefined) === rid) {
    if (!replace) {
      last.content += text;
      n[key] += text;
      return;
    }
    if (rid !== undefined && text.startsWith(last.content)) {
      const more = text.slice(last.content.length);
      last.content += more;
      n[key] += more;
      return;
    }
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
