// A client's stream as this isolate writes it (src/relay.rs `StreamWriter`:
// a relay's in the Worker, a held stream's in the object). Each write is
// counted until the connection took it, so the writer knows its backlog.
//
// Here, not in Rust, because it runs once per subscriber per message: one
// call from wasm per write, where handing each write's promise to Rust
// (`then`) and calling back into wasm when it settled cost more crossings
// and a derived promise each (CPU per publish 0.96x at 100 subscribers
// without them: docs/performance.md). Nothing here reads a caller's
// input: the chunks are frames the core made.
export class Out {
  constructor(writer) {
    this.writer = writer;
    /** Writes the connection has not taken yet. */
    this.pending = 0;
    // A failed write settles too (and rejects the writer's `closed`, which
    // the Rust side watches): one fewer pending either way.
    this.settled = () => {
      this.pending--;
    };
  }

  /** Queues `chunk` (workerd reads it without taking it: it may be written
   * to other streams too). */
  write(chunk) {
    this.pending++;
    this.writer.write(chunk).then(this.settled, this.settled);
  }

  /** Ends the stream after what was written. */
  close() {
    this.writer.close().then(undefined, () => {});
  }
}
