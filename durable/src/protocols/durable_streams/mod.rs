//! # Durable Streams
//!
//! The Durable Streams protocol (durable-streams' `PROTOCOL.md`) as pure
//! decisions, shared by the standalone `/v1/stream/*` server (one Durable
//! Object per stream) and the thread and run views (`/v1/threads/:id`,
//! `/v1/runs/:runId`), so all of them agree on offsets, headers and frames.
//!
//! - [`offset`]: the `%016d_%016d` offsets and the `offset` parameter.
//! - [`wire`]: header names, [`wire::Reply`], SSE `data`/`control` frames,
//!   cursors, JSON mode, `Stream-Expires-At` timestamps.
//! - [`producer`]: the idempotent-producer state machine.
//! - [`log`]: a stream's storage trait and an in-memory log.
//! - [`stream`]: one standalone stream's decisions (create, append, read,
//!   long-poll, SSE, HEAD, DELETE, TTL, forks).
//! - [`live`]: live reads across the hop from a stream's object to the
//!   Worker that holds the client's connection (batches, SSE and
//!   long-poll feeds).
//! - [`view`]: a thread's event log and a run's events read as JSON-mode
//!   streams, with generation-checked offsets.

pub mod offset;
pub mod producer;
pub mod server;
pub mod stream;
pub mod views;
pub mod wire;

pub use offset::{Offset, Start};
pub use wire::Reply;
