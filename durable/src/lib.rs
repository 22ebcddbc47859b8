//! # threadline-durable: the pure core of a thread
//!
//! Everything a thread's Durable Object holds and decides, with no `worker`
//! dependency, tested natively with injected time and fakes. The Worker crate
//! (`src/`) is a thin shell that gives this core a SQLite store, channels to
//! SSE responses, a clock and timers.
//!
//! A tour, in the order an event travels:
//!
//! - [`event`]: the protocol's event schema. A published event is parsed,
//!   checked against its kind's payload schema and stamped with `runId`/`ts`.
//! - [`thread`]: the thread itself: run lock (a compare-and-set on the active
//!   run), the one publish path (coalesce, assign seqs, persist, then fan out),
//!   subscriptions (replay window and live registration in one block), cancel,
//!   idle timeout and the restart sweep.
//! - [`coalesce`]: text and reasoning deltas become `text-block` /
//!   `reasoning-block` facts, so a thousand deltas cost one row.
//! - [`store`]: the storage trait the thread persists through, and an
//!   in-memory store with fault injection for tests.
//! - [`sse`]: SSE framing, apart from I/O, validated and byte-exact.
//! - [`reducer`]: folds events into the agent activity tree; the messages view
//!   and the restart sweep use it, and fold(replay) == fold(live) is tested on it.
//! - [`route`]: the HTTP paths as data, ids and cursors checked, shared by
//!   the stateless Worker and the Durable Object.
//! - [`agent`]: the built-in agent: the orchestrator loop over an
//!   OpenAI-compatible streaming model, tools, tasks and sub-agents, written
//!   against a `Host` trait (model client, tool runner, publish path).
//! - [`confirm`]: confirmation records, the approval policy, decision bodies.
//! - [`queue`]: the thread's message queue; [`models`]: the model catalog.
//! - [`runstream`]: a run's events as agora run-stream frames, numbered
//!   the same live and replayed.
//! - [`streams`]: the Durable Streams protocol: offsets, frames, producers,
//!   one standalone stream's decisions (`/v1/stream/*`), and the thread's
//!   log and a run's events read as streams (`/v1/threads`, `/v1/runs`).
//! - [`auth`]: bearer JWTs (HS256, RS256, ES256) and stream tokens.
//! - [`error`]: the `{error: {code, message}}` every refusal carries.
//! - `wire_schema` (tests only): the JSON Schema of the wire types, generated
//!   from these types for the TypeScript client (`client/schema/`).

pub mod access;
pub mod agent;
pub mod auth;
pub mod coalesce;
pub mod confirm;
pub mod directory;
pub mod effect;
pub mod error;
pub mod event;
pub mod front;
pub mod ids;
pub mod models;
pub mod queue;
pub mod reducer;
pub mod reply;
pub mod request;
pub mod route;
pub mod runstream;
pub mod schema;
pub mod settings;
pub mod sse;
pub mod store;
pub mod streams;
pub mod thread;
#[cfg(test)]
mod wire_schema;

pub use error::ApiError;
pub use event::{Event, Kind};
pub use reply::Reply;
pub use settings::Settings;
pub use store::{MemoryStore, Record, RunRecord, RunState, Store};
pub use thread::{Config, Sink, StartRun, Subscription, Thread};
