/**
 * An incremental Server-Sent-Events parser (the WHATWG "event stream
 * interpretation"), apart from any I/O: feed it text as it arrives, get
 * whole messages back.
 */

export interface SseMessage {
  /** `event:`; "message" when absent. */
  event: string;
  data: string;
  /** `id:` of this message, when it carried one. */
  id?: string;
  retry?: number;
}

export class SseParser {
  private buf = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  private retry: number | undefined;
  private sawCr = false;

  /** Feeds a chunk; returns the messages it completed, in order. */
  push(chunk: string): SseMessage[] {
    const out: SseMessage[] = [];
    if (chunk === "") return out;
    let text = chunk;
    // A CRLF split across chunks: the LF belongs to the CR already seen.
    if (this.sawCr && text.startsWith("\n")) text = text.slice(1);
    this.sawCr = false;
    this.buf += text;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(this.buf.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < this.buf.length) {
          if (this.buf.charCodeAt(i + 1) === 10) i++;
        } else {
          this.sawCr = true;
        }
      }
      start = i + 1;
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  private line(line: string, out: SseMessage[]) {
    if (line === "") {
      if (this.data.length > 0) {
        const msg: SseMessage = { event: this.event || "message", data: this.data.join("\n") };
        if (this.id !== undefined) msg.id = this.id;
        if (this.retry !== undefined) msg.retry = this.retry;
        out.push(msg);
      }
      this.data = [];
      this.event = "";
      this.id = undefined;
      this.retry = undefined;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.data.push(value);
        break;
      case "event":
        this.event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.id = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
    }
  }
}
