//! # threadline-durable: the pure core
//!
//! Everything the Worker and its Durable Objects decide, with no `worker`
//! dependency, tested natively with injected time and fakes. The Worker
//! crate (`src/`) is a thin shell: it hands this core a request's parts and
//! bytes, carries out what the core answers (a reply, an object to call, a
//! socket to relay, [`Effect`]s), and keeps its timers. A shell on another
//! runtime would re-decide nothing.
//!
//! The folders are the layers, each importing only from those below it
//! (`docs/architecture.md`, "Layers"). A tour, from the top, in the order a
//! request travels:
//!
//! - [`front`]: the Worker's exchange for one request: route, caller, body,
//!   send limit, the object to call and how to answer.
//! - [`protocols`]: the wire protocols, one folder each (`instance_ai`,
//!   `agora`, `durable_streams`, `flue`, `ai_sdk`, `ag_ui`), and `file_routes`
//!   (the upload and file routes every protocol shares), registered on one
//!   line, which admits every request by its route's access rule.
//! - [`thread`]: the thread, coordinating parts that own their fields (the
//!   journal, where events become the log; the run lock; subscribers;
//!   requests for a person; the waiting messages; files; charges; budgets),
//!   the read model the protocols use (`Conversation`), and views by caller
//!   (`AgentLoop`, `Clock`, `Launch`); it fails in its own terms
//!   (`thread::error`) and names no protocol.
//! - [`feed`]: a subscriber's stream across the hop between the thread's
//!   object and the Worker (replay then live), framed by a protocol's framer.
//! - [`streams`]: the Durable Streams wire (offsets, headers, producers),
//!   under every protocol that speaks it; a standalone stream's server (one
//!   object per stream) is `protocols::durable_streams::server`.
//! - `directory`: an actor's directory (their threads, their send window,
//!   what their turns used).
//! - [`agent`]: the built-in agent: the orchestrator loop over an
//!   OpenAI-compatible model, tools, tasks, sub-agents, behind a host trait;
//!   with what it needs: `agent::mcp` (tools from remote MCP servers),
//!   `agent::outbound` (the host's outbound HTTP, timer and clock, which MCP
//!   uses too), `agent::models` (the model catalog), `agent::personas` (the
//!   agents a turn runs as), `agent::quota` (per-actor budgets),
//!   `agent::charge` (what a model call costs its actor, held then charged)
//!   and `agent::usage` (the usage views, per model).
//! - [`files`]: files a message carries: accepted types, the leading-bytes
//!   check, a JSON send's inline files decoded as it streams, uploads, the
//!   attachment a send names, a stored file's answer.
//! - `input`: what every protocol parses the same way (JSON bodies, queries,
//!   cursors, a send, publish batches), apart from I/O.
//! - `access`: the one access decision: who may do what on a thread;
//!   [`auth`]: bearer JWTs (HS256, RS256, ES256), stream tokens, token hashes.
//! - `settings`: the deployment's configuration; `effect`: what the core
//!   asks the shell to do; `webhook`: the external agent's contract.
//! - [`trace`]: spans of requests, runs, model and tool calls and decisions
//!   (OpenTelemetry's GenAI conventions), as OTLP/HTTP JSON; log lines.
//! - [`json_schema`]: JSON Schema checks (tool arguments, structured
//!   answers) behind an engine the shell installs.
//! - [`log`]: the conversation log and its folds: `log::event` (the typed
//!   event schema), `log::coalesce` (deltas into stored blocks),
//!   `log::segment` (text segments read back), `log::reducer` (the
//!   agent-tree fold), `log::queued` (the message queue's shape) and
//!   `log::turn` (what a message asks of its turn).
//! - [`storage`]: `storage::store` (the thread's storage trait and stored
//!   shapes, in memory and on SQL), `storage::db` (SQL as every object runs
//!   it) and `storage::migrations` (each object class's layout as versioned,
//!   re-runnable migrations).
//! - [`wire`]: the basics under everything: `wire::sse` (SSE framing and
//!   decoding, validated and byte-exact), `wire::reply` (a decided answer),
//!   `wire::route` (route tables as data), `wire::error` (every refusal's
//!   status and stable code), `wire::ids` (ids and scoped ids),
//!   `wire::time` (times as RFC 3339) and `wire::forward` (what travels with
//!   a request to an object).
//! - `wire_schema` (tests only): the wire types' JSON Schema, for the
//!   TypeScript client (`client/schema/`).

mod access;
pub mod agent;
pub mod auth;
pub mod directory;
mod effect;
pub mod feed;
pub mod files;
pub mod front;
mod input;
pub mod json_schema;
pub mod log;
pub mod notify;
pub mod protocols;
pub mod schedule;
mod settings;
pub mod storage;
pub mod streams;
pub mod thread;
pub mod trace;
mod webhook;
pub mod wire;
#[cfg(all(test, feature = "jsonschema"))]
mod wire_schema;

pub use access::{Access, Caller, Decider, Grant};
pub use agent::models::{Catalog, Price};
pub use agent::quota::{Budget, Limit, Quota, Used};
pub use directory::{Directory, Op as DirectoryOp};
pub use effect::{Drive, Effect};
pub use input::{cursor, query_pairs, Head};
pub use log::event::{parse_published, Event, Kind};
pub use log::queued::{Queue, QueueItem};
pub use log::reducer::{fold, AgentNode};
pub use settings::{Config, ModelEndpoint, Settings, Var};
pub use storage::db::{failed, Db, Rows, Value};
pub use storage::store::{MemoryStore, Record, RunRecord, RunState, Store, Turn};
pub use thread::{Follow, Sink, StartRun, Thread};
pub use wire::error::ApiError;
pub use wire::ids::{run_id, scoped, thread_of, Random};
pub use wire::reply::Reply;
pub use wire::sse::{PING, PING_INTERVAL_MS};
