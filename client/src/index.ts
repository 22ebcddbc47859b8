/**
 * @threadline/client: typed events, the agent-tree reducer and a resumable
 * connection for threadline's streams, for browser apps (and Node 20+).
 *
 * - `events`: the wire types, generated from the Rust core's schema.
 * - `tree`: folds a run's events into its agent tree (the Rust reducer's twin),
 *   and a thread's log into its active path (`ActivePath`).
 * - `connection`: a resumable SSE connection (cursor, dedup, backoff, tokens).
 * - `api`: the HTTP routes, typed, with stable error codes.
 * - `session`: a thread as a page shows it, restored and kept current.
 * - `files`: attachments, uploads and the rules for showing them.
 */
export * from "./events.js";
export { TreeBuilder, fold, ActivePath, activePath } from "./tree.js";
export { SseParser, type SseMessage } from "./sse.js";
export { ResumableStream, type ConnectionState, type StreamOptions } from "./connection.js";
export * from "./api.js";
export {
  attachmentsOf,
  baseType,
  formatBytes,
  isInlineImage,
  mediaTypeFor,
  INLINE_IMAGE_TYPES,
  type Attachment,
  type AttachmentRef,
  type FileSource,
  type UploadedFile,
  type UploadOptions,
  type UploadProgress,
} from "./files.js";
export { Inbox, type InboxOptions } from "./inbox.js";
export { ThreadSession, type Turn, type OpenConfirmation, type SessionOptions } from "./session.js";
