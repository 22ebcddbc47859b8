//! # threadline-durable: the pure core
//!
//! Everything the Worker and its Durable Objects decide, with no `worker`
//! dependency, tested natively with injected time and fakes. The Worker
//! crate (`src/`) is a thin shell: it hands this core a request's parts and
//! bytes, carries out what the core answers (a reply, an object to call, a
//! socket to relay, [`Effect`]s), and keeps its timers. A shell on another
//! runtime would re-decide nothing.
//!
//! A tour, in the order a request travels:
//!
//! - [`front`]: the Worker's exchange for one request: route, caller, body,
//!   send limit, the object to call and how to answer.
//! - [`protocols`]: the wire protocols, one folder each (`instance_ai`,
//!   `agora`, `durable_streams`, `flue`, `ai_sdk`, `ag_ui`), and `files`
//!   (the upload and file routes every protocol shares), registered on one
//!   line.
//! - `route`: route tables as data (paths, methods, builders).
//! - [`forward`]: what travels with a request to an object (its route and
//!   caller, one header), and the calls objects make.
//! - `input`: what every protocol parses the same way (JSON bodies, queries,
//!   cursors, a send, publish batches), apart from I/O.
//! - `access`: the one access decision: who may do what on a thread.
//! - [`auth`]: bearer JWTs (HS256, RS256, ES256), stream tokens, token hashes.
//! - [`thread`]: the thread's state machine (run lock, the one publish path,
//!   send, cancel, decide, subscribe, queue), naming no protocol.
//! - [`feed`]: a subscriber's stream across the hop between the thread's
//!   object and the Worker (replay then live), framed by a protocol's framer.
//! - `event`: the log's event schema; `coalesce`: deltas into block facts;
//!   `segment`: reading text segments back; `reducer`: the agent-tree fold.
//! - [`agent`]: the built-in agent: the orchestrator loop over an
//!   OpenAI-compatible model, tools, tasks, sub-agents, behind a host trait.
//! - [`mcp`]: tools from remote MCP servers for the built-in agent:
//!   configuration, discovery, names, calls over Streamable HTTP, results.
//! - `outbound`: the outbound HTTP, timer and clock a host gives the agent
//!   and the MCP client (below both).
//! - `webhook`: the external agent's contract (start, cancel, settled).
//! - [`files`]: files a message carries: accepted types, the leading-bytes
//!   check, a JSON send's inline files decoded as it streams, uploads, the
//!   attachment a send names, a stored file's answer.
//! - [`streams`]: Durable Streams' wire (offsets, headers, producers), and a
//!   standalone stream's decisions (one object per stream).
//! - `directory`: an actor's directory (their threads, their send window,
//!   what their turns used); `usage`: the usage views, per model.
//! - [`store`]: the thread's storage trait, its stored shapes, in memory and
//!   on SQL; `db`: SQL as every object's storage runs it; [`schema`]: each
//!   object class's layout as versioned, re-runnable migrations.
//! - `queued`: the message queue's shape (stored, and every `queue-updated`);
//!   `turn`: what a message asks of the turn that answers it (stored with
//!   the message on its run and its queue item).
//! - `models`: the model catalog; `agents`: the agents (personas) a turn
//!   runs as; `quota`: per-actor budgets; [`charge`]: what a model call
//!   costs the actor whose turn caused it, held then charged; `settings`:
//!   the deployment's configuration.
//! - [`trace`]: spans of requests, runs, model and tool calls and decisions
//!   (OpenTelemetry's GenAI conventions), as OTLP/HTTP JSON; log lines.
//! - [`json_schema`]: JSON Schema checks (tool arguments, structured
//!   answers) behind an engine the shell installs.
//! - `effect`: what the core asks the shell to do; `reply`: a decided
//!   answer; `error`: every refusal's status and stable code; `ids`: ids
//!   and scoped ids; `sse`: SSE framing, validated and byte-exact.
//! - `wire_schema` (tests only): the wire types' JSON Schema, for the
//!   TypeScript client (`client/schema/`).

mod access;
pub mod agent;
mod agents;
pub mod auth;
pub mod charge;
mod coalesce;
mod db;
mod directory;
mod effect;
mod error;
mod event;
pub mod feed;
pub mod files;
pub mod forward;
pub mod front;
mod ids;
mod input;
pub mod json_schema;
pub mod mcp;
mod models;
mod outbound;
pub mod protocols;
mod queued;
mod quota;
mod reducer;
mod reply;
mod route;
pub mod schema;
mod segment;
mod settings;
mod sse;
pub mod store;
pub mod streams;
pub mod thread;
pub mod trace;
mod turn;
mod usage;
mod webhook;
#[cfg(all(test, feature = "jsonschema"))]
mod wire_schema;

pub use access::{Access, Caller, Decider, Grant};
pub use db::{failed, Db, Rows, Value};
pub use directory::{Directory, Op as DirectoryOp};
pub use effect::{Drive, Effect};
pub use error::ApiError;
pub use event::{parse_published, Event, Kind};
pub use ids::{run_id, scoped, thread_of, Random};
pub use input::{cursor, query_pairs, Head};
pub use models::{Catalog, Price};
pub use queued::{Queue, QueueItem};
pub use quota::{Budget, Limit, Quota, Used};
pub use reducer::{fold, AgentNode};
pub use reply::Reply;
pub use settings::{Config, ModelEndpoint, Settings, Var};
pub use sse::{PING, PING_INTERVAL_MS};
pub use store::{MemoryStore, Record, RunRecord, RunState, Store, Turn};
pub use thread::{Follow, Sink, StartRun, Thread};
