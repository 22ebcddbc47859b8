//! # The Durable Streams wire
//!
//! What every reader and writer of a Durable Stream shares (durable-streams'
//! `PROTOCOL.md`), below the protocols that serve one: [`offset`] (the
//! `%016d_%016d` offsets and the `offset` parameter), [`wire`] (header names,
//! replies, SSE `data`/`control` frames, cursors, JSON mode) and
//! [`producer`] (the idempotent-producer state machine). A thread's log and
//! runs as streams (`protocols::durable_streams`), Flue's reads on them
//! (`protocols::flue`) and a standalone stream's server
//! (`protocols::durable_streams::server`) all speak it.

pub mod offset;
pub mod producer;
pub mod wire;
