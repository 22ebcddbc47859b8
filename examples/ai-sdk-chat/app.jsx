// A chat app written the way AI SDK apps are, against threadline: nothing
// here knows threadline except the stop route (the AI SDK's stop() only
// drops the connection; closing a stream never cancels a run) and, with a
// token, the files the history names: an <img> or a link cannot send the
// token, so they are read through @threadline/client (this example's
// package.json depends on it as an app would) and shown from blob: URLs.
import { useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { ThreadlineClient, isInlineImage } from "@threadline/client";

/** A bearer token for deployments with authentication. */
const token = () => localStorage.getItem("threadline.token");
const headers = () => {
  const t = token();
  return t ? { authorization: `Bearer ${t}` } : {};
};
const threadline = new ThreadlineClient({ headers });

/** The thread and file of a file stored on this origin (`/v1/threads/:id/files/:fileId`), or null. */
function storedFile(url) {
  const u = new URL(url, location.href);
  const m = u.origin === location.origin ? u.pathname.match(/^\/v1\/threads\/([^/]+)\/files\/([^/]+)$/) : null;
  return m ? { threadId: decodeURIComponent(m[1]), fileId: decodeURIComponent(m[2]) } : null;
}

/**
 * Where the page reads a `file` part: its own URL (a data: URL live, or a
 * stored file without a token), else a blob: URL of the bytes read with the
 * token. Only raster images keep their type (isInlineImage); anything else
 * is a download, so nothing a file holds runs on this origin.
 */
function useFileUrl(part) {
  const stored = token() ? storedFile(part.url) : null;
  const [blobUrl, setBlobUrl] = useState(null);
  const key = stored && `${stored.threadId}/${stored.fileId}`;
  useEffect(() => {
    if (!stored) return undefined;
    let made = null;
    let gone = false;
    threadline
      .fileBlob(stored.threadId, stored.fileId)
      .then((b) => {
        if (gone) return;
        made = URL.createObjectURL(new Blob([b], { type: isInlineImage(part) ? part.mediaType : "application/octet-stream" }));
        setBlobUrl(made);
      })
      .catch(() => {});
    return () => {
      gone = true;
      if (made) URL.revokeObjectURL(made);
    };
  }, [key]);
  return stored ? blobUrl ?? undefined : part.url;
}

function threadId() {
  if (!location.hash.slice(1)) location.hash = `chat-${crypto.randomUUID().slice(0, 8)}`;
  return location.hash.slice(1);
}

function App() {
  const id = threadId();
  const [history, setHistory] = useState(null);
  useEffect(() => {
    // The history, then useChat resumes a run still going (resume: true).
    fetch(`/api/chat/${id}/messages`, { headers: headers() })
      .then((r) => (r.ok ? r.json() : []))
      .then(setHistory);
  }, [id]);
  return history ? <Chat id={id} initial={history} /> : <p className="status">Loading…</p>;
}

function Chat({ id, initial }) {
  const [input, setInput] = useState("");
  const [files, setFiles] = useState(undefined);
  const fileInput = useRef(null);
  const { messages, sendMessage, status, stop, addToolApprovalResponse, error } = useChat({
    id,
    messages: initial,
    resume: true,
    transport: new DefaultChatTransport({ api: "/api/chat", headers }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const busy = status === "submitted" || status === "streaming";
  const onStop = async () => {
    await fetch(`/api/chat/${id}/stop`, { method: "POST", headers: headers() });
    stop();
  };
  return (
    <main>
      <header>
        <h1>useChat × threadline</h1>
        <span className="status" data-testid="status">{status}</span>
      </header>
      {messages.map((m) => (
        <div key={m.id} className={`msg ${m.role}`} data-testid={`msg-${m.role}`}>
          <div className="role">{m.role}</div>
          {m.parts.map((p, i) => (
            <Part key={i} part={p} approve={addToolApprovalResponse} />
          ))}
        </div>
      ))}
      {error && <p className="status" data-testid="error">{error.message}</p>}
      {files?.length > 0 && (
        <ul className="attached" data-testid="attached">
          {Array.from(files, (f, i) => <li key={i}>{f.name}</li>)}
        </ul>
      )}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim()) return;
          sendMessage({ text: input, files });
          setInput("");
          setFiles(undefined);
          fileInput.current.value = "";
        }}
      >
        <input type="file" multiple data-testid="attach" aria-label="Attach files" ref={fileInput} onChange={(e) => setFiles(e.target.files)} />
        <input aria-label="Message" data-testid="input" value={input} onChange={(e) => setInput(e.target.value)} autoFocus />
        {busy ? (
          <button type="button" data-testid="stop" onClick={onStop}>Stop</button>
        ) : (
          <button type="submit" data-testid="send">Send</button>
        )}
      </form>
    </main>
  );
}

function Part({ part, approve }) {
  switch (part.type) {
    case "text":
      return <div className="text" data-testid="text">{part.text}</div>;
    case "file":
      return <FilePart part={part} />;
    case "reasoning":
      return <div className="reasoning">{part.text}</div>;
    case "dynamic-tool":
      return (
        <div className="tool" data-testid="tool" data-state={part.state}>
          <b>{part.toolName}</b> <code>{JSON.stringify(part.input ?? {})}</code> · {part.state}
          {part.state === "output-available" && <div>→ <code>{JSON.stringify(part.output)}</code></div>}
          {part.state === "output-error" && <div>✗ {part.errorText}</div>}
          {part.state === "approval-requested" && (
            <div>
              <button data-testid="approve" onClick={() => approve({ id: part.approval.id, approved: true })}>Approve</button>
              <button data-testid="deny" onClick={() => approve({ id: part.approval.id, approved: false, reason: "denied in the app" })}>Deny</button>
            </div>
          )}
        </div>
      );
    case "data-agent":
      return <div className="tool">sub-agent {part.data.role}: {part.data.status}</div>;
    case "data-tasks":
      return <div className="tool">tasks: {part.data.tasks.map((t) => `${t.description} (${t.status})`).join(", ")}</div>;
    default:
      return null;
  }
}

function FilePart({ part }) {
  const url = useFileUrl(part);
  const blob = url?.startsWith("blob:");
  return isInlineImage(part) ? (
    <img className="file" data-testid="file-image" src={url} alt={part.filename ?? ""} />
  ) : (
    <a className="file" data-testid="file-link" href={url} download={blob ? part.filename ?? "" : undefined} target="_blank" rel="noreferrer">
      {part.filename ?? part.mediaType}
    </a>
  );
}

createRoot(document.getElementById("root")).render(<App />);
