/**
 * threadline's page: the demo `make dev` opens and the reference for
 * integrators. All thread logic (restore, stream, reducer, queue,
 * confirmations) lives in the client package; this file only renders a
 * `ThreadSession` and turns clicks into its calls.
 */
import {
  ThreadlineClient,
  ThreadSession,
  ThreadlineError,
  type AgentNode,
  type AgentToolCall,
  type Decision,
  type OpenConfirmation,
  type Turn,
} from "../../client/src/index.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

/** A bearer token for deployments with authentication (`localStorage["threadline.token"]`). */
const token = () => localStorage.getItem("threadline.token");
const client = new ThreadlineClient({
  headers: (): Record<string, string> => {
    const t = token();
    return t ? { authorization: `Bearer ${t}` } : {};
  },
});

let session: ThreadSession | undefined;
/** Sub-agents the user collapsed, by `runId/agentId`. */
const collapsed = new Set<string>();
/** Reasoning the user expanded, by `runId/agentId/index`. */
const expanded = new Set<string>();

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: (Node | string | undefined)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== undefined) e.append(c);
  return e;
}

const json = (v: unknown) => JSON.stringify(v, null, 2);

// ---- the conversation -------------------------------------------------

function toolStatus(tc: AgentToolCall): "pending" | "done" | "failed" {
  if (tc.isLoading) return "pending";
  return tc.error != null ? "failed" : "done";
}

function renderTool(tc: AgentToolCall): HTMLElement {
  const status = toolStatus(tc);
  const waiting = status === "pending" && tc.confirmation ? "waiting for approval" : status;
  const box = el(
    "div",
    { class: "tool", "data-testid": "tool-call", "data-status": status, "data-tool": tc.toolName },
    el("div", { class: "tool-head" }, el("span", { class: "tool-name" }, tc.toolName), el("span", { class: "tool-state" }, waiting)),
  );
  const args = el("details", {}, el("summary", {}, "Arguments"), el("pre", {}, json(tc.args)));
  box.append(args);
  if (tc.error != null) box.append(el("pre", { class: "agent-error" }, tc.error));
  else if (tc.result !== undefined && tc.result !== null) box.append(el("details", {}, el("summary", {}, "Result"), el("pre", { "data-testid": "tool-result" }, json(tc.result))));
  return box;
}

function renderTasks(tasks: unknown): HTMLElement | undefined {
  const list = (tasks as { tasks?: { id: string; description: string; status: string }[] } | undefined)?.tasks;
  if (!Array.isArray(list) || list.length === 0) return undefined;
  return el("ul", { class: "tasks", "data-testid": "tasks", "aria-label": "Tasks" }, ...list.map((t) => el("li", { "data-status": t.status }, t.description)));
}

function renderNode(runId: string, n: AgentNode): HTMLElement {
  const body = el("div", { class: "agent-body" });
  const tasks = renderTasks(n.tasks);
  if (tasks) body.append(tasks);
  n.timeline.forEach((entry, i) => {
    switch (entry.type) {
      case "text":
        body.append(el("div", { class: "text", "data-testid": "assistant-text" }, entry.content));
        break;
      case "reasoning": {
        const key = `${runId}/${n.agentId}/${i}`;
        const d = el("details", { class: "reasoning", open: expanded.has(key) }, el("summary", {}, "Reasoning"), el("div", {}, entry.content));
        d.addEventListener("toggle", () => (d.open ? expanded.add(key) : expanded.delete(key)));
        body.append(d);
        break;
      }
      case "tool-call": {
        const tc = n.toolCalls.find((t) => t.toolCallId === entry.toolCallId);
        if (tc) body.append(renderTool(tc));
        break;
      }
      case "child": {
        const child = n.children.find((c) => c.agentId === entry.agentId);
        if (child) body.append(renderSubAgent(runId, child));
        break;
      }
    }
  });
  // Agents seen before they were announced have no timeline entry yet.
  for (const c of n.children) {
    if (!n.timeline.some((t) => t.type === "child" && t.agentId === c.agentId)) body.append(renderSubAgent(runId, c));
  }
  if (n.error) body.append(el("p", { class: "agent-error", role: "alert" }, n.error));
  return body;
}

function renderSubAgent(runId: string, n: AgentNode): HTMLElement {
  const key = `${runId}/${n.agentId}`;
  const d = el(
    "details",
    { class: "subagent", open: !collapsed.has(key), "data-testid": "subagent", "data-agent": n.agentId },
    el("summary", {}, `${n.role} `, el("span", { class: "agent-status" }, n.status)),
    renderNode(runId, n),
  );
  d.addEventListener("toggle", () => (d.open ? collapsed.delete(key) : collapsed.add(key)));
  return d;
}

function renderTurn(t: Turn): HTMLElement {
  const box = el("article", { class: "turn", "data-testid": "turn", "data-run": t.runId, "data-running": String(t.running) });
  if (t.message) box.append(el("div", { class: "user", "data-testid": "user-message" }, t.message));
  if (t.tree) box.append(el("div", { class: "agent", "data-testid": "agent" }, renderNode(t.runId, t.tree)));
  return box;
}

// ---- confirmations ----------------------------------------------------

function card(c: OpenConfirmation, s: ThreadSession): HTMLElement {
  const r = c.request as Record<string, any>;
  const requestId = String(r.requestId);
  const inputType = String(r.inputType ?? "approval");
  const severity = String(r.severity ?? "info");
  if (inputType === "client-tool") {
    // The client that declared the tool runs it and sends its result.
    return el("p", { class: "card", "data-testid": "client-tool", "data-request": requestId }, `Waiting for the client to run ${String(r.toolName ?? "its tool")}…`);
  }
  const form = el("form", { class: "card", "data-testid": "confirmation", "data-request": requestId, "data-input-type": inputType, "data-severity": severity });
  const titleId = `cr-${requestId.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  form.setAttribute("aria-labelledby", titleId);
  form.append(el("p", { id: titleId }, el("strong", {}, severity === "destructive" ? "Destructive: " : severity === "warning" ? "Warning: " : ""), String(r.message ?? "")));
  let decide: (approve: boolean) => Decision;
  if (inputType === "questions") {
    const qs = (r.questions ?? []) as { id: string; question: string; type: string; options?: string[] }[];
    for (const q of qs) {
      const fs = el("fieldset", { "data-question": q.id }, el("legend", {}, q.question));
      if (q.type === "text") fs.append(el("input", { type: "text", name: `${q.id}:text`, "aria-label": q.question }));
      else for (const o of q.options ?? []) {
        fs.append(el("label", {}, el("input", { type: q.type === "multi" ? "checkbox" : "radio", name: q.id, value: o }), ` ${o}`), " ");
      }
      form.append(fs);
    }
    decide = (approve) => ({
      answers: qs.map((q) => {
        const picked = [...form.querySelectorAll<HTMLInputElement>(`input[name="${CSS.escape(q.id)}"]:checked`)].map((i) => i.value);
        const text = form.querySelector<HTMLInputElement>(`input[name="${CSS.escape(q.id)}:text"]`)?.value;
        return approve ? { questionId: q.id, selectedOptions: picked, ...(text ? { customText: text } : {}) } : { questionId: q.id, selectedOptions: [], skipped: true };
      }),
    });
  } else if (inputType === "text") {
    const ta = el("textarea", { name: "answer", rows: "2", "aria-label": "Your answer", "data-testid": "confirmation-text" });
    form.append(ta);
    decide = (approve) => ({ answers: [{ questionId: "text", selectedOptions: [], ...(approve ? { customText: ta.value } : { skipped: true }) }] });
  } else {
    form.append(el("div", { class: "tool-head" }, el("span", { class: "tool-name" }, String(r.toolName ?? "")), el("pre", {}, json(r.args))));
    const plan = renderTasks(r.tasks);
    if (plan) form.append(plan);
    const note = el("input", { type: "text", name: "note", "aria-label": inputType === "plan-review" ? "Feedback" : "Reason (optional)", placeholder: inputType === "plan-review" ? "Feedback" : "Reason (optional)" });
    form.append(note);
    const session = inputType === "approval" ? el("input", { type: "checkbox", name: "session" }) : undefined;
    if (session) form.append(el("label", {}, session, " Allow for the rest of this conversation"));
    decide = (approved) => ({
      approved,
      ...(note.value ? { userInput: note.value } : {}),
      ...(session?.checked && approved ? { scope: "session" as const } : {}),
    });
  }
  const yes = inputType === "approval" || inputType === "plan-review" ? "Approve" : "Submit";
  const no = inputType === "approval" ? "Deny" : inputType === "plan-review" ? "Request changes" : "Skip";
  const actions = el("div", { class: "actions" },
    el("button", { type: "submit", class: "primary", "data-testid": "approve" }, yes),
    el("button", { type: "button", "data-testid": "deny" }, no));
  form.append(actions);
  const send = async (approve: boolean) => {
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      await s.decide(requestId, decide(approve));
    } catch {
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void send(true);
  });
  actions.querySelector('[data-testid="deny"]')!.addEventListener("click", () => void send(false));
  return form;
}

/** Cards are keyed by request id and kept while open, so typing in one survives re-renders. */
function renderConfirmations(s: ThreadSession) {
  const box = $("confirmations");
  const open = s.openConfirmations;
  const ids = new Set(open.map((c) => String(c.request.requestId)));
  for (const existing of [...box.children] as HTMLElement[]) {
    if (!ids.has(existing.dataset.request ?? "")) existing.remove();
  }
  for (const c of open) {
    const id = String(c.request.requestId);
    if (!box.querySelector(`[data-request="${CSS.escape(id)}"]`)) box.append(card(c, s));
  }
}

// ---- queue, status, header ----------------------------------------------

function renderQueue(s: ThreadSession) {
  const box = $("queue");
  box.hidden = s.queue.items.length === 0 && !s.queue.paused;
  const pause = $<HTMLButtonElement>("queue-pause");
  pause.textContent = s.queue.paused ? "Resume" : "Pause";
  const list = $("queue-items");
  list.replaceChildren(
    ...s.queue.items.map((item, i) => {
      const up = el("button", { type: "button", "aria-label": "Move up", disabled: i === 0, "data-testid": "queue-up" }, "↑");
      const remove = el("button", { type: "button", "aria-label": "Remove from the queue", "data-testid": "queue-remove" }, "✕");
      const edit = el("button", { type: "button", "aria-label": "Edit", "data-testid": "queue-edit" }, "Edit");
      up.addEventListener("click", () => void s.queueMove(item.messageId, i - 1).catch(() => {}));
      remove.addEventListener("click", () => void s.queueRemove(item.messageId).catch(() => {}));
      edit.addEventListener("click", () => {
        const text = prompt("Edit the queued message", item.message);
        if (text) void s.queueEdit(item.messageId, text).catch(() => {});
      });
      return el("li", { "data-testid": "queue-item" }, el("span", {}, item.message), up, edit, remove);
    }),
  );
}

const CONNECTION_LABEL: Record<string, string> = { idle: "", connecting: "Connecting…", open: "Live", reconnecting: "Reconnecting…", closed: "Offline" };

let frame = 0;
function render() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    const s = session;
    if (!s) return;
    const conv = $("conversation");
    const atBottom = conv.scrollHeight - conv.scrollTop - conv.clientHeight < 80;
    conv.replaceChildren(...s.turns.map(renderTurn));
    if (atBottom) conv.scrollTop = conv.scrollHeight;
    $("thread-title").textContent = s.title || "New thread";
    document.title = s.title ? `${s.title} · threadline` : "threadline";
    const conn = $("connection");
    conn.textContent = CONNECTION_LABEL[s.connection] ?? "";
    conn.dataset.state = s.connection;
    const status = $("status-line");
    status.hidden = !s.statusLine;
    status.textContent = s.statusLine ?? "";
    $<HTMLButtonElement>("stop").disabled = !s.activeRunId;
    renderConfirmations(s);
    renderQueue(s);
    const err = $("error");
    err.hidden = !s.lastError;
    err.textContent = s.lastError instanceof ThreadlineError ? `${s.lastError.message} (${s.lastError.code})` : (s.lastError?.message ?? "");
  });
}

// ---- threads -----------------------------------------------------------

async function refreshThreads() {
  const list = $("thread-list");
  try {
    const threads = await client.threads();
    // A restored thread's title was set before the stream's cursor: take it from the list.
    const current = threads.find((t) => t.threadId === session?.threadId);
    if (session && current?.title && !session.title) {
      session.title = current.title;
      render();
    }
    list.replaceChildren(
      ...threads.map((t) =>
        el("li", {}, el("a", { href: `#${encodeURIComponent(t.threadId)}`, "aria-current": t.threadId === session?.threadId ? "page" : undefined }, t.title || t.threadId)),
      ),
    );
  } catch {
    // The list is a convenience; the thread itself still works.
  }
}

function newThreadId() {
  return `t-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

function openThread(threadId: string) {
  session?.close();
  const s = new ThreadSession(client, threadId);
  session = s;
  let lastActive: string | undefined;
  s.subscribe(() => {
    render();
    // The list shows titles and order: refresh it when a run starts or ends.
    if (s.activeRunId !== lastActive) {
      lastActive = s.activeRunId;
      void refreshThreads();
    }
  });
  $("conversation").replaceChildren();
  $("confirmations").replaceChildren();
  render();
  s.open().catch((e) => {
    s.lastError = e;
    render();
  });
  void refreshThreads();
  $("composer-input").focus();
}

function route() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (!id) {
    location.replace(`#${newThreadId()}`);
    return;
  }
  if (id !== session?.threadId) openThread(id);
}

// ---- wiring ------------------------------------------------------------

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = $<HTMLTextAreaElement>("composer-input");
  const text = input.value.trim();
  if (!text || !session) return;
  input.value = "";
  session.send(text).catch(() => {
    input.value ||= text;
  });
  input.focus();
});
$("composer-input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $<HTMLFormElement>("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => void session?.cancel().catch(() => {}));
$("queue-pause").addEventListener("click", () => void session?.queuePause(!session.queue.paused).catch(() => {}));
$("new-thread").addEventListener("click", () => {
  location.hash = newThreadId();
});
$("toggle-threads").addEventListener("click", (e) => {
  const open = document.querySelector(".sidebar")!.classList.toggle("open");
  (e.currentTarget as HTMLElement).setAttribute("aria-expanded", String(open));
});
window.addEventListener("hashchange", () => {
  document.querySelector(".sidebar")!.classList.remove("open");
  route();
});
route();

// For tests and debugging: the live session.
(window as unknown as { threadline: unknown }).threadline = { get session() { return session; } };
