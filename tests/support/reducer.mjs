// A JavaScript port of the core's agent-tree reducer (durable/src/reducer.rs),
// what a browser client folds SSE events with. Tests hold it equal to the Rust
// fold: the tree a client folds live must be the tree `GET .../messages`
// folds from the log.

function node(agentId, role) {
  return {
    agentId,
    role,
    tools: undefined,
    status: "active",
    textContent: "",
    reasoning: "",
    toolCalls: [],
    children: [],
    timeline: [],
    tasks: undefined,
    result: undefined,
    error: undefined,
    statusMessage: undefined,
  };
}

export class TreeBuilder {
  constructor() {
    this.nodes = [];
    this.kids = [];
    this.root = undefined;
    this.implicit = new Set();
  }

  find(agentId) {
    const i = this.nodes.findIndex((n) => n.agentId === agentId);
    return i < 0 ? undefined : i;
  }

  push(n, parent) {
    this.nodes.push(n);
    this.kids.push([]);
    const i = this.nodes.length - 1;
    if (parent === undefined) this.root = i;
    else this.kids[parent].push(i);
    return i;
  }

  nodeFor(agentId) {
    const i = this.find(agentId);
    if (i !== undefined) return i;
    if (this.root === undefined) return this.push(node(agentId, "orchestrator"), undefined);
    const k = this.push(node(agentId, agentId), this.root);
    this.implicit.add(k);
    return k;
  }

  callOf(agentId, id) {
    const own = this.find(agentId);
    const order = own === undefined ? [...this.nodes.keys()] : [own, ...this.nodes.keys()];
    for (const i of order) {
      const tc = this.nodes[i].toolCalls.find((t) => t.toolCallId === id);
      if (tc) return tc;
    }
    return undefined;
  }

  apply(ev) {
    const p = ev.payload ?? {};
    const str = (k) => (typeof p[k] === "string" ? p[k] : "");
    switch (ev.type) {
      case "run-start":
        if (this.root === undefined) this.push(node(ev.agentId, "orchestrator"), undefined);
        else this.nodes[this.root].status = "active";
        break;
      case "text-delta":
      case "reasoning-delta":
      case "text-block":
      case "reasoning-block": {
        const slot = ev.type.startsWith("text") ? "text" : "reasoning";
        const replace = ev.type.endsWith("block") || p.snapshot === true;
        applyText(this.nodes[this.nodeFor(ev.agentId)], slot, ev.responseId, str("text"), replace);
        break;
      }
      case "tool-input-start":
      case "tool-call": {
        const n = this.nodes[this.nodeFor(ev.agentId)];
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
        const n = this.nodes[this.nodeFor(ev.agentId)];
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
          if (this.implicit.has(existing)) {
            this.implicit.delete(existing);
            this.nodes[existing].role = str("role");
            this.nodes[existing].tools = Array.isArray(p.tools) ? p.tools : undefined;
            const r = this.root;
            this.kids[r] = this.kids[r].filter((k) => k !== existing);
            this.kids[r].push(existing);
            this.nodes[r].timeline.push({ type: "child", agentId: ev.agentId });
          }
          break;
        }
        const parent = this.find(str("parentId"));
        if (parent === undefined) break;
        const n = node(ev.agentId, str("role"));
        n.tools = Array.isArray(p.tools) ? p.tools : undefined;
        this.push(n, parent);
        this.nodes[parent].timeline.push({ type: "child", agentId: ev.agentId });
        break;
      }
      case "agent-completed": {
        const i = this.find(ev.agentId);
        if (i === undefined) break;
        const n = this.nodes[i];
        const err = typeof p.error === "string" ? p.error : undefined;
        n.status =
          p.status === "cancelled" ? "cancelled" : p.status === "error" ? "error" : p.status ? "completed" : err ? "error" : "completed";
        n.result = p.result === null || p.result === undefined ? undefined : p.result;
        n.error = err;
        break;
      }
      case "tasks-update":
        this.nodes[this.nodeFor(ev.agentId)].tasks = p.tasks;
        break;
      case "status": {
        const m = str("message");
        this.nodes[this.nodeFor(ev.agentId)].statusMessage = m === "" ? undefined : m;
        break;
      }
      case "error":
        this.nodes[this.nodeFor(ev.agentId)].error = str("content");
        break;
      case "run-finish": {
        if (this.root === undefined) break;
        const r = this.nodes[this.root];
        const status = str("status");
        r.status = status === "completed" ? "completed" : status === "cancelled" ? "cancelled" : "error";
        if (status !== "completed") {
          for (const n of this.nodes) {
            for (const tc of n.toolCalls) tc.isLoading = false;
            if (n.status === "active") n.status = "cancelled";
          }
        }
        if (typeof p.reason === "string" && status === "error" && r.error === undefined) r.error = p.reason;
        r.statusMessage = undefined;
        break;
      }
      default:
        break;
    }
  }

  /** The nested tree, as the server serialises it (undefined fields dropped). */
  tree() {
    if (this.root === undefined) return null;
    const build = (i) => {
      const n = { ...this.nodes[i] };
      const spawned = this.kids[i].filter((k) => !this.implicit.has(k));
      const unannounced = this.kids[i].filter((k) => this.implicit.has(k)).sort((a, b) => (this.nodes[a].agentId < this.nodes[b].agentId ? -1 : 1));
      n.children = [...spawned, ...unannounced].map(build);
      return n;
    };
    return JSON.parse(JSON.stringify(build(this.root)));
  }
}

function pending(toolCallId, toolName, args, ts) {
  return { toolCallId, toolName, args, result: undefined, error: undefined, isLoading: true, confirmation: undefined, startedAt: ts, completedAt: undefined };
}

function applyText(n, slot, rid, text, replace) {
  const key = slot === "text" ? "textContent" : "reasoning";
  const last = n.timeline.at(-1);
  if (last && last.type === slot && (last.responseId ?? undefined) === (rid ?? undefined)) {
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
  const entry = { type: slot, content: text };
  if (rid !== undefined) entry.responseId = rid;
  n.timeline.push(entry);
}

/** Folds the events of one run. */
export function fold(events) {
  const b = new TreeBuilder();
  for (const e of events) b.apply(e);
  return b.tree();
}
