/**
 * Files in messages: what a user message carries (`run-start`'s and the
 * history's `attachments`), what an upload answers, and the small rules a
 * page needs to show them. The wire shapes are written by hand here: the
 * generated schema types attachments as `unknown[]`.
 */

/** A file or URL a user message carries, as the server describes it. */
export interface Attachment {
  /** A stored file's id (`f_…`); absent for a URL attachment. */
  fileId?: string;
  /**
   * A URL attachment's `https:` URL, or (in the history) the stored file's
   * absolute URL. A stored file is read with {@link ThreadlineClient.fileBlob}.
   */
  url?: string;
  mediaType: string;
  /** Bytes; known for stored files. */
  size?: number;
  name?: string;
  /** Hex SHA-256 of the bytes; stored files only. */
  sha256?: string;
}

/** One stored file, as `POST /v1/threads/:threadId/files` answers it (201). */
export interface UploadedFile {
  fileId: string;
  /** Absolute URL of the file (`GET /v1/threads/:threadId/files/:fileId`). */
  url: string;
  mediaType: string;
  size: number;
  name?: string;
  sha256: string;
}

export interface UploadProgress {
  /** Bytes of the request body sent so far. */
  loaded: number;
  /** Bytes of the whole request body (0 when the browser cannot tell). */
  total: number;
}

export interface UploadOptions {
  /** Called as the body goes out (browsers), or once at the end (`fetch`). */
  onProgress?: (p: UploadProgress) => void;
  /** Aborts the upload; the promise rejects with an `AbortError`. */
  signal?: AbortSignal;
}

/** Files to upload: an array, or an `<input type="file">`'s `FileList`. */
export type FileSource = Iterable<File | Blob> | ArrayLike<File | Blob>;

/** An attachment to send: a stored file's id. */
export type AttachmentRef = string | { fileId: string };

/** Image types a page may show inline (raster only: never SVG or HTML). */
export const INLINE_IMAGE_TYPES: ReadonlySet<string> = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** Whether a page may show this attachment as an image (`<img>` of a blob: URL). */
export function isInlineImage(a: { mediaType?: string }): boolean {
  return INLINE_IMAGE_TYPES.has(baseType(a.mediaType ?? ""));
}

/** `text/plain; charset=utf-8` → `text/plain`. */
export function baseType(mediaType: string): string {
  return mediaType.split(";")[0]!.trim().toLowerCase();
}

const BY_EXTENSION: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  txt: "text/plain",
  text: "text/plain",
  log: "text/plain",
  md: "text/markdown",
  markdown: "text/markdown",
  csv: "text/csv",
  json: "application/json",
};

/**
 * The type to declare for a file: its own when it has one, else the one its
 * name's extension implies (browsers leave `File.type` empty for `.md` and
 * other types the system does not know), else `application/octet-stream`.
 */
export function mediaTypeFor(name: string, declared = ""): string {
  if (declared && declared !== "application/octet-stream") return declared;
  const ext = /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase();
  return (ext && BY_EXTENSION[ext]) || declared || "application/octet-stream";
}

/**
 * The attachments of a `run-start` payload or a history message, checked:
 * entries without a `fileId` or `url`, or without a `mediaType`, are dropped.
 */
export function attachmentsOf(value: unknown): Attachment[] {
  if (!Array.isArray(value)) return [];
  const out: Attachment[] = [];
  for (const v of value) {
    if (!v || typeof v !== "object") continue;
    const o = v as Record<string, unknown>;
    const str = (k: string) => (typeof o[k] === "string" ? (o[k] as string) : undefined);
    const fileId = str("fileId");
    const url = str("url");
    const mediaType = str("mediaType");
    if ((!fileId && !url) || !mediaType) continue;
    const a: Attachment = { mediaType };
    if (fileId) a.fileId = fileId;
    if (url) a.url = url;
    if (typeof o.size === "number" && Number.isFinite(o.size)) a.size = o.size;
    const name = str("name");
    if (name) a.name = name;
    const sha256 = str("sha256");
    if (sha256) a.sha256 = sha256;
    out.push(a);
  }
  return out;
}

/** `1536` → `1.5 KB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v < 10 ? v.toFixed(1).replace(/\.0$/, "") : Math.round(v)} ${units[u]}`;
}
