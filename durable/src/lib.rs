//! # threadline-durable: the pure core of a thread
//!
//! Everything a thread's Durable Object holds and decides, with no `worker`
//! dependency, tested natively with injected time and fakes. The Worker crate
//! (`src/`) is a thin shell: it hands this core bytes (a request's route,
//! caller, query, headers and body), carries out what the core answers (a
//! reply, a stream to open, [`effect::Effect`]s), and keeps its timers. A
//! shell on another runtime would re-decide nothing.
//!
//! A tour, in the order a request travels:
//!
//! - [`front`]: what the stateless Worker decides: where a request goes
//!   ([`front::Dispatch`]), who is calling, which origins may read it.
//! - [`route`]: the thread's HTTP paths as data; [`ids`]: thread, run and
//!   scoped ids (`<threadId>.<id>`, so a run or request finds its thread).
//! - [`request`]: every body and query, parsed and checked, apart from I/O.
//! - [`access`]: the one access decision: who may do what on a thread.
//! - [`thread`]: the thread itself. `thread/mod.rs` is the state machine (run
//!   lock, the one publish path: coalesce, assign seqs, persist, then fan
//!   out; what starts next; deadlines); beside it `subscribe` (replay then
//!   live in one block, as socket messages), `confirmations`, `queue`,
//!   `agent` (checkpoints, resume, recovery), `views`, `streams` (the log as
//!   Durable Streams) and `service` (every route answered, with the effects
//!   the shell must run).
//! - [`feed`]: a subscriber's stream in the Worker: the socket's message
//!   format (`feed::socket`), replay then live across the hop (`Relay`), each
//!   protocol's framing (`events`, `runs`, `views`), and whether the client
//!   still reads (`backlog`).
//! - [`event`]: the protocol's event schema. A published event is parsed,
//!   checked against its kind's payload schema and stamped with `runId`/`ts`.
//! - [`coalesce`]: text and reasoning deltas become `text-block` /
//!   `reasoning-block` facts, so a thousand deltas cost one row.
//! - [`store`]: the storage trait the thread persists through, and an
//!   in-memory store with fault injection for tests; [`schema`]: each object
//!   class's storage layout as versioned, re-runnable migrations.
//! - [`sse`]: SSE framing, apart from I/O, validated and byte-exact;
//!   [`reply`]: a decided answer (status, headers, body).
//! - [`reducer`]: folds events into the agent activity tree; the messages view
//!   and the restart sweep use it, and fold(replay) == fold(live) is tested on it.
//! - [`agent`]: the built-in agent: the orchestrator loop over an
//!   OpenAI-compatible streaming model, tools, tasks and sub-agents, written
//!   against a `Host` trait (model client, tool runner, publish path).
//! - [`confirm`]: confirmation records and the rules of their life, the
//!   approval policy, decision bodies.
//! - [`queue`]: the thread's message queue; [`models`]: the model catalog;
//!   [`directory`]: an actor's per-minute send window.
//! - [`runstream`]: a run's events as agora run-stream frames, numbered
//!   the same live and replayed.
//! - [`streams`]: the Durable Streams protocol: offsets, frames, producers,
//!   one standalone stream's decisions (`/v1/stream/*`) and its live reads
//!   across the hop (`streams::live`), and the views of a thread's log and a
//!   run's events (`/v1/threads`, `/v1/runs`).
//! - [`auth`]: bearer JWTs (HS256, RS256, ES256), stream tokens, token hashes.
//! - [`settings`]: the deployment's configuration, read once.
//! - [`effect`]: what the core asks the shell to do.
//! - [`error`]: every refusal's status and stable code, one constructor each.
//! - `wire_schema` (tests only): the JSON Schema of the wire types, generated
//!   from these types for the TypeScript client (`client/schema/`).

pub mod access;
pub mod agent;
pub mod auth;
pub mod coalesce;
pub mod db;
pub mod directory;
pub mod effect;
pub mod error;
pub mod event;
pub mod feed;
pub mod forward;
pub mod front;
pub mod ids;
pub mod input;
pub mod models;
pub mod protocols;
pub mod reducer;
pub mod reply;
pub mod route;
pub mod schema;
pub mod segment;
pub mod settings;
pub mod sse;
pub mod store;
pub mod thread;
pub mod webhook;
#[cfg(test)]
mod wire_schema;

pub use error::ApiError;
pub use event::{Event, Kind};
pub use reply::Reply;
pub use settings::Settings;
pub use store::{MemoryStore, Record, RunRecord, RunState, Store};
pub use thread::{Config, Follow, Sink, StartRun, Thread};
