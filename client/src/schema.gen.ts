// Generated from schema/threadline.schema.json by scripts/gen.mjs: do not edit.
// The schema itself is generated from the Rust core (durable/src/wire_schema.rs).

/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ThreadEvent".
 */
export type ThreadEvent =
  | RunStartEvent
  | RunFinishEvent
  | TextDeltaEvent
  | ReasoningDeltaEvent
  | TextBlockEvent
  | ReasoningBlockEvent
  | ToolInputStartEvent
  | ToolCallEvent
  | ToolResultEvent
  | ToolErrorEvent
  | ToolInterruptedEvent
  | AgentSpawnedEvent
  | AgentCompletedEvent
  | ConfirmationRequestEvent
  | ConfirmationSettledEvent
  | TasksUpdateEvent
  | StatusEvent
  | ErrorEvent
  | ThreadTitleUpdatedEvent
  | FilesystemRequestEvent
  | QueueUpdatedEvent
  | StepStartEvent
  | StepFinishEvent
  | BranchSwitchedEvent
  | ContextCompactedEvent
  | ContextCompactionFailedEvent;
/**
 * An attachment of a message: a file the thread stores, or an `https:` URL
 * the model's provider fetches itself.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Attachment".
 */
export type Attachment =
  | FileRef
  | {
      url: string;
      mediaType: string;
      name?: string | null;
    };
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "FinishStatus".
 */
export type FinishStatus = "completed" | "cancelled" | "error" | "interrupted";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentEnd".
 */
export type AgentEnd = "completed" | "cancelled" | "error";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Severity".
 */
export type Severity = "destructive" | "warning" | "info";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "InputType".
 */
export type InputType = ("approval" | "text" | "questions" | "plan-review") | "client-tool";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "QuestionType".
 */
export type QuestionType = "single" | "multi" | "text";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "CredentialStage".
 */
export type CredentialStage = "generic" | "finalize";
/**
 * The seed's flat list, or the schema's `{tasks: [...]}`.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Tasks".
 */
export type Tasks = Task[] | TaskList;
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "NodeStatus".
 */
export type NodeStatus = "active" | "completed" | "cancelled" | "error";
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TimelineEntry".
 */
export type TimelineEntry =
  | {
      type: "text";
      content: string;
      responseId?: string | null;
    }
  | {
      type: "reasoning";
      content: string;
      responseId?: string | null;
    }
  | {
      type: "tool-call";
      toolCallId: string;
      responseId?: string | null;
    }
  | {
      type: "child";
      agentId: string;
      responseId?: string | null;
    };

/**
 * The threadline wire types, generated from the Rust core (durable/src/wire_schema.rs). Do not edit.
 */
export interface Threadline {
  event?: ThreadEvent;
  agentTree?: AgentNode;
  queue?: Queue;
}
/**
 * A `run-start` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "RunStartEvent".
 */
export interface RunStartEvent {
  type: "run-start";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: RunStart;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "RunStart".
 */
export interface RunStart {
  messageId: string;
  messageGroupId?: string | null;
  /**
   * Extension: the user's message that started the run, so every
   * client on the thread (another tab, another device) shows it.
   */
  message?: string | null;
  /**
   * The agent the turn runs as, when its send named one.
   */
  agent?: string | null;
  /**
   * The files and URLs the message carries (references: a stored
   * file is read at `/v1/threads/:threadId/files/:fileId`).
   */
  attachments?: Attachment[] | null;
  /**
   * Extension: where a run that branches stands in the conversation (an
   * edit or a regenerate). Absent, the run follows the active path's
   * leaf, as every run of before did.
   */
  branch?: BranchPoint | null;
}
/**
 * A stored file as the thread's log and its messages hold it.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "FileRef".
 */
export interface FileRef {
  fileId: string;
  mediaType: string;
  size: number;
  name?: string | null;
  /**
   * Hex SHA-256 of the bytes (also the file's `ETag`).
   */
  sha256: string;
}
/**
 * Where a run that branches joins the conversation: after `parent` (the
 * run whose turn it follows; `null` at the first turn), as an edit of a
 * user message or another answer to one. Reading the log in order, a
 * client knows the whole tree: a `run-start` without one follows the
 * active leaf, with one follows `parent`, and `branch-switched` moves the
 * leaf.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "BranchPoint".
 */
export interface BranchPoint {
  parent?: string | null;
  /**
   * The user message this run's message replaces (an edit).
   */
  editOf?: string | null;
  /**
   * The run whose answer this run answers again (a regenerate).
   */
  regenerates?: string | null;
}
/**
 * A `run-finish` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "RunFinishEvent".
 */
export interface RunFinishEvent {
  type: "run-finish";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: RunFinish;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "RunFinish".
 */
export interface RunFinish {
  status: FinishStatus;
  reason?: string | null;
  /**
   * A structured run's answer, as JSON (a send's `output`).
   */
  output?: {
    [k: string]: unknown | undefined;
  };
}
/**
 * A `text-delta` event (Ephemeral).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TextDeltaEvent".
 */
export interface TextDeltaEvent {
  type: "text-delta";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: TextOut;
}
/**
 * A text or reasoning payload as the server sends it: blocks carry
 * `parts`; the delta that hands a joining client an open segment's text
 * so far carries `snapshot: true` and `parts`.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TextOut".
 */
export interface TextOut {
  text: string;
  /**
   * Byte length of each delta the text was built from, in order.
   */
  parts?: number[] | null;
  /**
   * Apply as a block: replace the timeline entry this text extends.
   */
  snapshot?: boolean | null;
}
/**
 * A `reasoning-delta` event (Ephemeral).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ReasoningDeltaEvent".
 */
export interface ReasoningDeltaEvent {
  type: "reasoning-delta";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: TextOut;
}
/**
 * A `text-block` event (Coalesced).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TextBlockEvent".
 */
export interface TextBlockEvent {
  type: "text-block";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: TextOut;
}
/**
 * A `reasoning-block` event (Coalesced).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ReasoningBlockEvent".
 */
export interface ReasoningBlockEvent {
  type: "reasoning-block";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: TextOut;
}
/**
 * A `tool-input-start` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolInputStartEvent".
 */
export interface ToolInputStartEvent {
  type: "tool-input-start";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ToolInputStart;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolInputStart".
 */
export interface ToolInputStart {
  toolCallId: string;
  toolName: string;
  /**
   * The MCP server whose tool it is.
   */
  server?: string | null;
}
/**
 * A `tool-call` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolCallEvent".
 */
export interface ToolCallEvent {
  type: "tool-call";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ToolCall;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolCall".
 */
export interface ToolCall {
  toolCallId: string;
  toolName: string;
  args?: {
    [k: string]: unknown | undefined;
  };
  /**
   * What kind of tool it is for people (`read`, `action`, ...).
   */
  toolKind?: string | null;
  /**
   * The MCP server whose tool it is.
   */
  server?: string | null;
  /**
   * The tool's name for people (an MCP tool's title).
   */
  title?: string | null;
}
/**
 * A `tool-result` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolResultEvent".
 */
export interface ToolResultEvent {
  type: "tool-result";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ToolResult;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolResult".
 */
export interface ToolResult {
  toolCallId: string;
  result?: {
    [k: string]: unknown | undefined;
  };
}
/**
 * A `tool-error` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolErrorEvent".
 */
export interface ToolErrorEvent {
  type: "tool-error";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ToolError;
}
/**
 * `tool-error` and `tool-interrupted`.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolError".
 */
export interface ToolError {
  toolCallId: string;
  error: string;
}
/**
 * A `tool-interrupted` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ToolInterruptedEvent".
 */
export interface ToolInterruptedEvent {
  type: "tool-interrupted";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ToolError;
}
/**
 * A `agent-spawned` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentSpawnedEvent".
 */
export interface AgentSpawnedEvent {
  type: "agent-spawned";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: AgentSpawned;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentSpawned".
 */
export interface AgentSpawned {
  parentId: string;
  role: string;
  /**
   * Always present in what the server stores (a publisher that
   * leaves it out gets `[]`); a log written otherwise may lack it.
   */
  tools?: string[] | null;
  taskId?: string | null;
  kind?: string | null;
  title?: string | null;
  subtitle?: string | null;
  goal?: string | null;
}
/**
 * A `agent-completed` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentCompletedEvent".
 */
export interface AgentCompletedEvent {
  type: "agent-completed";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: AgentCompleted;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentCompleted".
 */
export interface AgentCompleted {
  role: string;
  result?: {
    [k: string]: unknown | undefined;
  };
  error?: string | null;
  status?: AgentEnd | null;
}
/**
 * A `confirmation-request` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ConfirmationRequestEvent".
 */
export interface ConfirmationRequestEvent {
  type: "confirmation-request";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ConfirmationRequest;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ConfirmationRequest".
 */
export interface ConfirmationRequest {
  requestId: string;
  toolCallId: string;
  toolName: string;
  args?: {
    [k: string]: unknown | undefined;
  };
  severity: Severity;
  message: string;
  inputType?: InputType | null;
  questions?: Question[] | null;
  introMessage?: string | null;
  tasks?: unknown;
  credentialRequests?: unknown[] | null;
  credentialFlow?: CredentialFlow | null;
  setupRequests?: unknown[] | null;
  domainAccess?: DomainAccess | null;
  projectId?: string | null;
  workflowId?: string | null;
  /**
   * The MCP server whose tool asks.
   */
  server?: string | null;
  /**
   * Who may decide it: a role, or `requester` (the thread's owner).
   * Set by the server after the publisher's fields (so last on the wire).
   */
  approver?: string | null;
  /**
   * When it lapses (ms since the epoch), if it does.
   */
  expiresAt?: number | null;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Question".
 */
export interface Question {
  id: string;
  question: string;
  type: QuestionType;
  options?: string[] | null;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "CredentialFlow".
 */
export interface CredentialFlow {
  stage: CredentialStage;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "DomainAccess".
 */
export interface DomainAccess {
  url: string;
  host: string;
}
/**
 * A `confirmation-settled` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ConfirmationSettledEvent".
 */
export interface ConfirmationSettledEvent {
  type: "confirmation-settled";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ConfirmationSettled;
}
/**
 * How a request for a person settled (or that a tool's approval was
 * remembered for the thread, `decidedVia: "remembered"`).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ConfirmationSettled".
 */
export interface ConfirmationSettled {
  requestId?: string | null;
  toolCallId: string;
  toolName?: string;
  /**
   * `approved`, `denied` or `expired`.
   */
  status: string;
  decidedBy?: string | null;
  decidedVia?: string | null;
  remember?: boolean | null;
  reason?: string | null;
}
/**
 * A `tasks-update` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TasksUpdateEvent".
 */
export interface TasksUpdateEvent {
  type: "tasks-update";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: TasksUpdate;
}
/**
 * `tasks-update`, stored in the shape it was published in.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TasksUpdate".
 */
export interface TasksUpdate {
  tasks: Tasks;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Task".
 */
export interface Task {
  id: string;
  description: string;
  detail?: string | null;
  status: string;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "TaskList".
 */
export interface TaskList {
  tasks: Task[];
}
/**
 * A `status` event (Ephemeral).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StatusEvent".
 */
export interface StatusEvent {
  type: "status";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: StatusMsg;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StatusMsg".
 */
export interface StatusMsg {
  message: string;
}
/**
 * A `error` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ErrorEvent".
 */
export interface ErrorEvent {
  type: "error";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ErrorMsg;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ErrorMsg".
 */
export interface ErrorMsg {
  content: string;
  statusCode?: number | null;
  code?: string | null;
  provider?: string | null;
}
/**
 * A `thread-title-updated` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ThreadTitleUpdatedEvent".
 */
export interface ThreadTitleUpdatedEvent {
  type: "thread-title-updated";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: Title;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Title".
 */
export interface Title {
  title: string;
}
/**
 * A `filesystem-request` event (Ephemeral).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "FilesystemRequestEvent".
 */
export interface FilesystemRequestEvent {
  type: "filesystem-request";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: FilesystemRequest;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "FilesystemRequest".
 */
export interface FilesystemRequest {
  requestId: string;
  operation: string;
  args?: {
    [k: string]: unknown | undefined;
  };
}
/**
 * A `queue-updated` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "QueueUpdatedEvent".
 */
export interface QueueUpdatedEvent {
  type: "queue-updated";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: QueueUpdate;
}
/**
 * What a `queue-updated` event carries: the whole queue, and what changed
 * that a reader cannot see in it.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "QueueUpdate".
 */
export interface QueueUpdate {
  items: QueueItem[];
  paused: boolean;
  /**
   * Why the thread paused it itself (`quota_exceeded`); none when a
   * person paused it.
   */
  pausedReason?: string | null;
  /**
   * When it paused (storage 9; none on older documents, and while running).
   */
  pausedAt?: number | null;
  /**
   * The message the thread took from the queue and started, as a run's
   * last event before its end.
   */
  started?: QueueStart | null;
  /**
   * Runs of messages that left the queue without running (a cleared
   * queue), so a view that shows submissions settles each.
   */
  dropped?: string[];
}
/**
 * What a user message asked of the turn that answers it, stored with the
 * message (on its run, and on its queue item while it waits): the agent it
 * runs as, the page the person was on, a structured answer, when it was
 * sent, and who sent it (whose budget the turn spends).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "QueueItem".
 */
export interface QueueItem {
  /**
   * Also the id of the run it starts: known up front.
   */
  messageId: string;
  runId: string;
  message: string;
  queuedAt: number;
  /**
   * When its text was last edited (storage 9; none: never).
   */
  updatedAt?: number | null;
  model?: string | null;
  agent?: string | null;
  pageContext?: unknown;
  /**
   * `{schema, name}`.
   */
  output?: {
    [k: string]: unknown | undefined;
  };
  sentAt?: number | null;
  actor?: string | null;
  /**
   * The files and URLs the message carries (storage v6): references,
   * never bytes.
   */
  attachments?: Attachment[];
  /**
   * The `traceparent` of the request that sent it (storage v7, with
   * traces on): the run's spans hang under it ([`crate::trace`]).
   */
  trace?: string | null;
}
/**
 * The queued message a run's end started.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "QueueStart".
 */
export interface QueueStart {
  messageId: string;
  runId: string;
}
/**
 * A `step-start` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StepStartEvent".
 */
export interface StepStartEvent {
  type: "step-start";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: StepStart;
}
/**
 * Extensions: a model step's bounds (the agora run streams' `step-start`
 * / `step-finish`). Clients of the Instance AI protocol may ignore them.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StepStart".
 */
export interface StepStart {}
/**
 * A `step-finish` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StepFinishEvent".
 */
export interface StepFinishEvent {
  type: "step-finish";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: StepFinish;
}
/**
 * A model step's end. Field order is the built-in agent's, as its logs
 * have always held it (the wire keeps the order a log was written in).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "StepFinish".
 */
export interface StepFinish {
  /**
   * What the step cost, when the catalog has the model's prices.
   */
  costUsd?: number | null;
  usage?: unknown;
  /**
   * The catalog id the step ran on.
   */
  model?: string | null;
  finishReason?: string | null;
}
/**
 * A `branch-switched` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "BranchSwitchedEvent".
 */
export interface BranchSwitchedEvent {
  type: "branch-switched";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: BranchSwitched;
}
/**
 * `branch-switched`: the conversation's active path now ends at `leaf`
 * (a run), as a person chose by `messageId` (a message or an answer on
 * the branch they switched to).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "BranchSwitched".
 */
export interface BranchSwitched {
  leaf: string;
  messageId: string;
}
/**
 * A `context-compacted` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ContextCompactedEvent".
 */
export interface ContextCompactedEvent {
  type: "context-compacted";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ContextCompacted;
}
/**
 * `context-compacted`: the model's context was compacted. From now on the
 * agent sends `summary` in place of the conversation up to and including
 * run `through` (only its first `calls` tool calls, when set: the run was
 * compacted while it ran), `from` being the first run it folded that no
 * summary before it had. Nothing the person sees changes: every history
 * view still shows the whole conversation.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ContextCompacted".
 */
export interface ContextCompacted {
  summary: string;
  from: string;
  through: string;
  calls?: number | null;
  /**
   * How many messages of the model's context the summary replaced.
   */
  messages: number;
  /**
   * The catalog id (or provider model name) that wrote the summary.
   */
  model: string;
  /**
   * The context's estimated tokens before and after.
   */
  tokensBefore: number;
  tokensAfter: number;
  /**
   * What the summary step used, as its provider reported.
   */
  usage?: {
    [k: string]: unknown | undefined;
  };
  /**
   * A person asked for it (`POST .../compact`); else the context passed
   * `AGENT_COMPACT_AT`.
   */
  requested?: boolean;
}
/**
 * A `context-compaction-failed` event (Structural).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ContextCompactionFailedEvent".
 */
export interface ContextCompactionFailedEvent {
  type: "context-compaction-failed";
  runId: string;
  agentId: string;
  responseId?: string;
  /**
   * Epoch milliseconds, stamped by the server.
   */
  ts: number;
  payload: ContextCompactionFailed;
}
/**
 * `context-compaction-failed`: a summary step failed; the run went on with
 * the context it had (its oldest turns left out when that was over the
 * model's window, `dropped` of them).
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "ContextCompactionFailed".
 */
export interface ContextCompactionFailed {
  reason: string;
  tokens: number;
  dropped?: number;
}
/**
 * One agent of the tree, with its children nested.
 *
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentNode".
 */
export interface AgentNode {
  agentId: string;
  role: string;
  tools?: string[] | null;
  /**
   * A background agent's task (`agent-spawned`'s `taskId`).
   */
  taskId?: string | null;
  /**
   * What `agent-spawned` said of the agent for its card: `kind`,
   * `title`, `subtitle`, `goal`, `targetResource`.
   */
  kind?: string | null;
  title?: string | null;
  subtitle?: string | null;
  goal?: string | null;
  targetResource?: unknown;
  status: NodeStatus;
  textContent: string;
  reasoning: string;
  toolCalls: AgentToolCall[];
  children: AgentNode[];
  timeline: TimelineEntry[];
  tasks?: unknown;
  planItems?: unknown;
  result?: unknown;
  error?: string | null;
  /**
   * An `error` event's details: `statusCode`, `code`, `provider`,
   * `technicalDetails`, where it gave them.
   */
  errorDetails?: {
    [k: string]: unknown | undefined;
  };
  /**
   * Why a cancelled run stopped: `user`, `timeout`, `shutdown`,
   * `interrupted`.
   */
  cancellationReason?: string | null;
  statusMessage?: string | null;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "AgentToolCall".
 */
export interface AgentToolCall {
  toolCallId: string;
  toolName: string;
  args: unknown;
  result?: unknown;
  error?: string | null;
  isLoading: boolean;
  /**
   * How n8n's editor draws the call (`planner` for `create-tasks`, ...).
   */
  renderHint: string;
  /**
   * The request, without the call's own fields (`toolCallId`,
   * `toolName`, `args`) and the server's (`approver`, `expiresAt`).
   */
  confirmation?: {
    [k: string]: unknown | undefined;
  };
  /**
   * ISO 8601.
   */
  startedAt?: string | null;
  /**
   * ISO 8601.
   */
  completedAt?: string | null;
  /**
   * The MCP server whose tool it is (threadline's).
   */
  server?: string | null;
}
/**
 * This interface was referenced by `Threadline`'s JSON-Schema
 * via the `definition` "Queue".
 */
export interface Queue {
  items: QueueItem[];
  paused: boolean;
  /**
   * Why the thread paused it itself (`quota_exceeded`); none when a
   * person paused it.
   */
  pausedReason?: string | null;
  /**
   * When it paused (storage 9; none on older documents, and while running).
   */
  pausedAt?: number | null;
}
