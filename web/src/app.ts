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
  Inbox,
  formatBytes,
  isInlineImage,
  type AgentNode,
  type AgentToolCall,
  type Attachment,
  type Branch,
  type Decision,
  type InboxRow,
  type OpenConfirmation,
  type Turn,
  type UploadedFile,
} from "../../client/src/index.js";
import { copyCode, renderMarkdown } from "./markdown.js";

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
    el(
      "div",
      { class: "tool-head" },
      el("span", { class: "tool-name" }, tc.toolName),
      tc.server ? el("span", { class: "tool-server", "data-testid": "tool-server", title: "MCP server" }, `MCP · ${tc.server}`) : undefined,
      el("span", { class: "tool-state" }, waiting),
    ),
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
        body.append(markdownBlock(`${runId}/${n.agentId}/${i}`, entry.content));
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

/**
 * Rendered answers, by `runId/agentId/timeline index`: while an answer
 * streams only the block that grew is parsed again, and every other block
 * keeps its element (and what the reader selected in it).
 */
const blocks = new Map<string, { content: string; el: HTMLElement }>();

function markdownBlock(key: string, content: string): HTMLElement {
  let b = blocks.get(key);
  if (!b) {
    b = { content, el: el("div", { class: "text markdown", "data-testid": "assistant-text" }) };
    b.el.append(renderMarkdown(content));
    blocks.set(key, b);
  } else if (b.content !== content) {
    b.content = content;
    b.el.replaceChildren(renderMarkdown(content));
  }
  return b.el;
}

/** The turn whose user message is being edited (its run id). */
let editing: string | undefined;

/**
 * `< i/n >`: where a message or an answer stands among its siblings, with
 * buttons to the one before and after (each shows that branch).
 */
function switcher(what: "message" | "answer", b: Branch | undefined): HTMLElement | undefined {
  if (!b || b.count < 2) return undefined;
  const go = (i: number, label: string, text: string) => {
    const btn = el("button", { type: "button", class: "ghost", "aria-label": label, "data-testid": `${what}-branch-${text === "‹" ? "prev" : "next"}`, disabled: i < 0 || i >= b.count }, text);
    const id = b.ids[i];
    if (id !== undefined) btn.onclick = () => void session?.switchBranch(id).catch(() => {});
    return btn;
  };
  return el(
    "span",
    { class: "branch", role: "group", "aria-label": `${what} version ${b.index + 1} of ${b.count}` },
    go(b.index - 1, `previous ${what} version`, "‹"),
    el("span", { "data-testid": `${what}-branch` }, `${b.index + 1}/${b.count}`),
    go(b.index + 1, `next ${what} version`, "›"),
  );
}

function button(label: string, text: string, testid: string, onclick: () => void, disabled = false): HTMLButtonElement {
  const b = el("button", { type: "button", class: "ghost", "aria-label": label, "data-testid": testid, disabled }, text);
  b.onclick = onclick;
  return b;
}

/** The user message as a form: Save (or Ctrl+Enter) sends the edit, Cancel (or Escape) leaves it. */
function editForm(t: Turn): HTMLElement {
  const area = el("textarea", { "aria-label": "edit your message", "data-testid": "edit-text", rows: "3" });
  area.value = t.message;
  const done = () => {
    editing = undefined;
    turnViews.delete(t.runId);
    render();
  };
  const save = () => {
    const text = area.value.trim();
    if (!text) return;
    done();
    void session?.edit(t.messageId, text).catch(() => {});
  };
  area.onkeydown = (e) => {
    if (e.key === "Escape") done();
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) save();
  };
  queueMicrotask(() => area.focus());
  return el("form", { class: "edit", "data-testid": "edit-form" }, area, el("div", { class: "actions" }, button("save the edit", "Save", "edit-save", save), button("cancel the edit", "Cancel", "edit-cancel", done)));
}

function renderTurn(t: Turn): HTMLElement {
  const box = el("article", { class: "turn", "data-testid": "turn", "data-run": t.runId, "data-running": String(t.running) });
  const busy = !!session?.activeRunId;
  if (t.attachments.length) box.append(attachmentsElement(t.attachments));
  if (editing === t.runId) {
    box.append(editForm(t));
  } else if (t.message && t.sharedFrom) {
    // A fork's shared turn: changed on the thread it is of.
    box.append(el("div", { class: "user", "data-testid": "user-message" }, t.message));
  } else if (t.message) {
    box.append(el("div", { class: "user", "data-testid": "user-message" }, t.message));
    const edit = button("edit this message", "Edit", "edit", () => {
      editing = t.runId;
      turnViews.delete(t.runId);
      render();
    }, busy);
    box.append(el("div", { class: "turn-bar user-bar" }, switcher("message", t.messageBranch), edit));
  }
  if (t.tree) box.append(el("div", { class: "agent", "data-testid": "agent" }, renderNode(t.runId, t.tree)));
  if (t.compacted) {
    // Quiet: the model's memory changed, not the conversation.
    const n = t.compacted.messages;
    box.append(
      el("div", { class: "compacted", "data-testid": "compacted", title: t.compacted.summary },
        `Earlier conversation summarised for the model (${n} message${n === 1 ? "" : "s"}); everything stays here.`),
    );
  }
  if (!t.running && !t.sharedFrom) {
    const again = button("answer this again", "Regenerate", "regenerate", () => void session?.regenerate(t.runId).catch(() => {}), busy);
    // A new thread with the conversation up to here, opened at once.
    const fork = button("fork a new thread from here", "Fork", "fork", () => {
      void session
        ?.fork(t.runId)
        .then((id) => location.assign(`#${encodeURIComponent(id)}`))
        .catch(() => {});
    }, busy);
    box.append(el("div", { class: "turn-bar" }, switcher("answer", t.answerBranch), again, fork));
  }
  return box;
}

/** A turn's element, rendered again only when the turn changed (the session replaces what changes). */
const turnViews = new Map<string, { key: unknown[]; el: HTMLElement }>();

function turnElement(t: Turn): HTMLElement {
  const key = [t.tree, t.message, t.attachments, t.running, t.messageBranch, t.answerBranch, t.compacted, editing === t.runId, !!session?.activeRunId];
  const v = turnViews.get(t.runId);
  if (v && v.key.every((k, i) => k === key[i])) return v.el;
  const e = renderTurn(t);
  turnViews.set(t.runId, { key, el: e });
  return e;
}

// ---- files in messages ------------------------------------------------

/** `blob:` URLs of stored images, by thread and file (stored files never change). */
const imageUrls = new Map<string, Promise<string>>();

function imageUrl(s: ThreadSession, a: Attachment & { fileId: string }): Promise<string> {
  const key = `${s.threadId}/${a.fileId}`;
  let p = imageUrls.get(key);
  if (!p) {
    // The blob's type is the attachment's, which is a raster image type
    // (isInlineImage): a blob: URL has this page's origin, so never HTML or SVG.
    p = s.fileBlob(a.fileId).then((b) => URL.createObjectURL(new Blob([b], { type: a.mediaType })));
    p.catch(() => imageUrls.delete(key));
    imageUrls.set(key, p);
  }
  return p;
}

function forgetImages() {
  for (const p of imageUrls.values()) void p.then((u) => URL.revokeObjectURL(u), () => {});
  imageUrls.clear();
}

const attachmentLabel = (a: Attachment) => a.name ?? a.fileId ?? a.url ?? "file";

/** A file's kind at a glance: its extension, else its type's subtype (`PDF`, `CSV`). */
function kindBadge(name: string, mediaType: string): HTMLElement {
  const ext = /\.([a-z0-9]{1,5})$/i.exec(name)?.[1] ?? mediaType.split("/")[1]?.split(/[;+.-]/)[0] ?? "file";
  return el("span", { class: "chip-kind", "aria-hidden": "true" }, ext.slice(0, 4).toUpperCase());
}

/** A message's files keep their element while its answer streams (no image is loaded twice). */
const attachmentViews = new WeakMap<Attachment[], HTMLElement>();

function attachmentsElement(list: Attachment[]): HTMLElement {
  let e = attachmentViews.get(list);
  if (!e) {
    e = renderAttachments(list);
    attachmentViews.set(list, e);
  }
  return e;
}

function renderAttachments(list: Attachment[]): HTMLElement {
  const s = session!;
  const box = el("ul", { class: "attachments", "data-testid": "message-attachments", "aria-label": "Attached files" });
  for (const a of list) {
    const name = attachmentLabel(a);
    const size = a.size === undefined ? undefined : el("span", { class: "chip-size" }, formatBytes(a.size));
    if (a.fileId !== undefined && isInlineImage(a)) {
      const stored = { ...a, fileId: a.fileId };
      const img = el("img", { alt: name, "data-testid": "message-image", "data-file-id": a.fileId, "data-state": "loading" });
      const open = el("button", { type: "button", class: "attachment-image", "aria-label": `Open ${name}` }, img);
      imageUrl(s, stored).then(
        (src) => {
          img.src = src;
          img.dataset.state = "loaded";
        },
        () => (img.dataset.state = "error"),
      );
      open.addEventListener("click", () => void imageUrl(s, stored).then((src) => openViewer(src, name), () => {}));
      box.append(el("li", {}, open));
    } else if (a.fileId !== undefined) {
      const fileId = a.fileId;
      // The link works where the page needs no token; the click reads the
      // file with the client's headers, so it works where it does too.
      const chip = el("a", { class: "chip", href: client.fileUrl(s.threadId, fileId), download: name, title: `Download ${name}`, "data-testid": "attachment-chip", "data-file-id": fileId },
        kindBadge(name, a.mediaType), el("span", { class: "chip-name" }, name), size);
      chip.addEventListener("click", (e) => {
        e.preventDefault();
        void download(s, fileId, name);
      });
      box.append(el("li", {}, chip));
    } else if (a.url && /^https:\/\//i.test(a.url)) {
      box.append(el("li", {}, el("a", { class: "chip", href: a.url, target: "_blank", rel: "noopener noreferrer", "data-testid": "attachment-chip" }, kindBadge(name, a.mediaType), el("span", { class: "chip-name" }, name), size)));
    } else {
      box.append(el("li", {}, el("span", { class: "chip", "data-testid": "attachment-chip" }, kindBadge(name, a.mediaType), el("span", { class: "chip-name" }, name), size)));
    }
  }
  return box;
}

async function download(s: ThreadSession, fileId: string, name: string) {
  try {
    const blob = await s.fileBlob(fileId);
    // application/octet-stream: saved, never shown, whatever the file holds.
    const url = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
    const a = el("a", { href: url, download: name });
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (e) {
    s.lastError = e as Error;
    render();
  }
}

function openViewer(src: string, name: string) {
  const d = $<HTMLDialogElement>("viewer");
  const img = $<HTMLImageElement>("viewer-image");
  img.src = src;
  img.alt = name;
  $("viewer-title").textContent = name;
  d.showModal();
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
      const files = item.attachments?.length ? el("span", { class: "queue-files" }, item.attachments.length === 1 ? "1 file" : `${item.attachments.length} files`) : undefined;
      return el("li", { "data-testid": "queue-item" }, el("span", {}, item.message), files, up, edit, remove);
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
    const want = s.turns.map(turnElement);
    want.forEach((e, i) => {
      if (conv.children[i] !== e) conv.insertBefore(e, conv.children[i] ?? null);
    });
    while (conv.children.length > want.length) conv.lastElementChild!.remove();
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

/**
 * The thread list is the caller's inbox, live (`Inbox`): a spinner on
 * running threads, a badge on threads that wait for the person, bold for
 * unread; a browser notification (with permission) when a thread starts
 * waiting, unless it is the one open in a visible tab.
 */
let inbox: Inbox | undefined;

function renderThreads() {
  const list = $("thread-list");
  const rows = inbox?.list() ?? [];
  // A restored thread's title was set before the stream's cursor: take it from the list.
  const current = rows.find((t) => t.threadId === session?.threadId);
  if (session && current?.title && !session.title) {
    session.title = current.title;
    render();
  }
  list.replaceChildren(
    ...rows.map((t) => {
      const waiting = t.state === "waiting";
      const label = waiting ? `waiting for you: ${t.waiting?.kind ?? "a decision"}` : t.state === "running" ? "running" : t.unread ? "unread" : undefined;
      return el(
        "li",
        { "data-testid": "thread-row", "data-thread": t.threadId, "data-state": t.state, "data-unread": t.unread ? "true" : undefined, class: t.unread ? "unread" : undefined },
        el(
          "a",
          { href: `#${encodeURIComponent(t.threadId)}`, "aria-current": t.threadId === session?.threadId ? "page" : undefined, title: label },
          t.state === "running" ? el("span", { class: "spinner", "data-testid": "thread-spinner", "aria-label": "running" }) : undefined,
          el("span", { class: "thread-name" }, t.title || t.threadId),
          waiting ? el("span", { class: "needs-you", "data-testid": "thread-badge" }, t.waiting?.kind === "approval" ? "approve" : "answer") : undefined,
        ),
      );
    }),
  );
  // The open thread is read as its answers arrive.
  if (current?.unread && document.visibilityState === "visible") void inbox?.markRead(current.threadId).catch(() => {});
}

function notifyWaiting(row: InboxRow) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  if (row.threadId === session?.threadId && document.visibilityState === "visible") return;
  const n = new Notification(`${row.title || row.threadId} is waiting for you`, {
    body: row.waiting ? `${row.waiting.toolName}: ${row.waiting.kind}` : undefined,
    tag: `waiting:${row.threadId}`,
  });
  n.onclick = () => {
    window.focus();
    location.hash = encodeURIComponent(row.threadId);
    n.close();
  };
}

function openInbox() {
  inbox = new Inbox(client, { onChange: renderThreads, onWaiting: notifyWaiting });
  inbox.open().catch(() => {
    // The list is a convenience (a deployment without callers has none); the thread itself still works.
  });
}

function newThreadId() {
  return `t-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

function openThread(threadId: string) {
  session?.close();
  clearPending(true);
  turnViews.clear();
  blocks.clear();
  forgetImages();
  const s = new ThreadSession(client, threadId);
  session = s;
  s.subscribe(() => render());
  $("conversation").replaceChildren();
  $("confirmations").replaceChildren();
  render();
  s.open().catch((e) => {
    s.lastError = e;
    render();
  });
  renderThreads();
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

// ---- the composer's files ----------------------------------------------

/**
 * A file picked, dropped or pasted: uploaded at once (each file its own
 * request, so one refusal leaves the others), sent with the message.
 */
interface Pending {
  file: File;
  /** A local `blob:` URL of an image, for its thumbnail. */
  thumb?: string;
  /** Resolves to the stored file, or undefined when refused or removed. */
  done: Promise<UploadedFile | undefined>;
  abort: AbortController;
  el: HTMLElement;
  progress: HTMLProgressElement;
}

let pending: Pending[] = [];
let sending = false;

function addFiles(files: File[]) {
  const s = session;
  if (!s || files.length === 0) return;
  for (const file of files) {
    const abort = new AbortController();
    const thumb = isInlineImage({ mediaType: file.type }) ? URL.createObjectURL(file) : undefined;
    const progress = el("progress", { max: "100", value: "0", "data-testid": "upload-progress", "aria-label": `Uploading ${file.name}` });
    const remove = el("button", { type: "button", class: "remove", "aria-label": `Remove ${file.name}`, "data-testid": "attachment-remove" }, "✕");
    const item = el(
      "li",
      { class: thumb ? "preview image" : "preview file", title: file.name, "data-testid": "attachment-preview", "data-state": "uploading", "data-name": file.name },
      ...(thumb ? [el("img", { src: thumb, alt: file.name, "data-testid": "attachment-thumb" })] : [kindBadge(file.name, file.type), el("span", { class: "chip-name" }, file.name)]),
      el("span", { class: "chip-size" }, formatBytes(file.size)),
      progress,
      remove,
    );
    const p: Pending = { file, thumb, abort, el: item, progress, done: Promise.resolve(undefined) };
    p.done = s
      .uploadFiles([file], {
        signal: abort.signal,
        onProgress: ({ loaded, total }) => {
          if (total > 0) progress.value = Math.min(99, Math.round((loaded / total) * 100));
        },
      })
      .then(
        ([f]) => {
          item.dataset.state = "ready";
          progress.remove();
          return f;
        },
        (e: unknown) => {
          dropPending(p);
          if (e instanceof ThreadlineError && session === s) {
            // Name the file: the server's message speaks of "a file".
            s.lastError = new ThreadlineError(e.status, e.code, `${file.name}: ${e.message}`, e.body);
            render();
          }
          return undefined;
        },
      );
    remove.addEventListener("click", () => {
      p.abort.abort();
      dropPending(p);
      $("composer-input").focus();
    });
    pending.push(p);
    $("attachments").append(item);
  }
  renderPending();
}

function dropPending(p: Pending) {
  pending = pending.filter((x) => x !== p);
  if (p.thumb) URL.revokeObjectURL(p.thumb);
  p.el.remove();
  renderPending();
}

/** Forgets the composer's files; `abort` also stops their uploads (another thread). */
function clearPending(abort: boolean) {
  for (const p of pending) {
    if (abort) p.abort.abort();
    if (p.thumb) URL.revokeObjectURL(p.thumb);
  }
  pending = [];
  $("attachments").replaceChildren();
  renderPending();
}

function renderPending() {
  $("attachments").hidden = pending.length === 0;
  $<HTMLButtonElement>("send").disabled = sending;
}

async function submit() {
  const s = session;
  const input = $<HTMLTextAreaElement>("composer-input");
  const text = input.value.trim();
  if (!s || sending || (!text && pending.length === 0)) return;
  const items = [...pending];
  sending = true;
  renderPending();
  try {
    // Files still uploading are waited for; one refused meanwhile stops the
    // send (its error is on the error line, the rest stay in the composer).
    const files = await Promise.all(items.map((p) => p.done));
    if (session !== s || files.some((f) => !f)) return;
    const attachments = (files as UploadedFile[]).map((f) => f.fileId);
    if (!text && attachments.length === 0) return;
    input.value = "";
    for (const p of items) p.el.remove();
    pending = pending.filter((p) => !items.includes(p));
    renderPending();
    try {
      await s.send(text, attachments.length ? { attachments } : {});
      for (const p of items) if (p.thumb) URL.revokeObjectURL(p.thumb);
    } catch {
      // Refused (or the network): give the message and its files back.
      input.value ||= text;
      if (session === s) {
        pending = [...items, ...pending];
        $("attachments").prepend(...items.map((p) => p.el));
      }
    }
  } finally {
    sending = false;
    renderPending();
  }
}

// ---- wiring ------------------------------------------------------------

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  void submit();
  $("composer-input").focus();
});
$("attach").addEventListener("click", () => $<HTMLInputElement>("attach-input").click());
$("attach-input").addEventListener("change", (e) => {
  const input = e.currentTarget as HTMLInputElement;
  addFiles([...(input.files ?? [])]);
  input.value = "";
  $("composer-input").focus();
});
const hasFiles = (e: DragEvent) => e.dataTransfer?.types.includes("Files") ?? false;
const composer = $("composer");
composer.addEventListener("dragover", (e) => {
  if (!hasFiles(e)) return;
  e.preventDefault();
  e.dataTransfer!.dropEffect = "copy";
  composer.classList.add("dropping");
});
composer.addEventListener("dragleave", (e) => {
  if (!composer.contains(e.relatedTarget as Node | null)) composer.classList.remove("dropping");
});
composer.addEventListener("drop", (e) => {
  composer.classList.remove("dropping");
  if (!hasFiles(e)) return;
  e.preventDefault();
  addFiles([...(e.dataTransfer?.files ?? [])]);
  $("composer-input").focus();
});
// A file dropped beside the composer must not replace the page with itself.
window.addEventListener("dragover", (e) => {
  if (hasFiles(e)) e.preventDefault();
});
window.addEventListener("drop", (e) => {
  if (hasFiles(e)) e.preventDefault();
});
$("composer-input").addEventListener("paste", (e) => {
  const files = [...(e.clipboardData?.files ?? [])];
  if (files.length === 0) return;
  // An image copied from a page comes with its HTML or text: keep the text.
  if (!e.clipboardData?.types.includes("text/plain")) e.preventDefault();
  addFiles(files);
});
$("conversation").addEventListener("click", (e) => {
  const copy = (e.target as Element).closest<HTMLElement>("[data-copy]");
  if (copy) void copyCode(copy);
});
const viewer = $<HTMLDialogElement>("viewer");
viewer.addEventListener("click", (e) => {
  // A click on the backdrop (the dialog itself, not its content) closes it.
  if (e.target === viewer) viewer.close();
});
$("viewer-close").addEventListener("click", () => viewer.close());
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
const notifyButton = $<HTMLButtonElement>("notify");
notifyButton.hidden = !("Notification" in window) || Notification.permission !== "default";
notifyButton.addEventListener("click", () => {
  void Notification.requestPermission().then(() => (notifyButton.hidden = true));
});
openInbox();
route();

// For tests and debugging: the live session.
(window as unknown as { threadline: unknown }).threadline = { get session() { return session; } };
