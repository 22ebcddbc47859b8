//! What a thread asks its shell to do once it has decided: the I/O the core
//! cannot do itself (drive the built-in agent, call the agent's webhook,
//! update the owner's directory, wipe storage, remove files). The shell executes effects
//! in order and reports back what the core needs to know (a start signal
//! that failed: `Launch::failed`); it decides nothing about them.

use crate::agent::tools::Toolbox;
use crate::agent::{AgentConfig, Job};
use crate::settings::ModelEndpoint;
use serde_json::Value;
use std::rc::Rc;

#[derive(Clone)]
pub enum Effect {
    /// Run the built-in agent's loop on `job` (a new run, a resumed one, or
    /// one recovered after a restart), detached.
    Drive(Box<Drive>),
    /// POST `body` to the external agent's webhook (`AGENT_WEBHOOK_URL`).
    /// `start_of`: the run this signal starts; if the call fails, that run
    /// ends with an error (report it with `Launch::failed`).
    Webhook { body: Value, start_of: Option<String> },
    /// Stop this instance's built-in agents and abort their fetches.
    StopAgents,
    /// Tell an actor's directory (the thread's owner's: a run started, the
    /// thread is gone).
    Directory { actor: String, op: crate::directory::Op },
    /// Tell `actor`'s inbox (their directory) the thread's state: the
    /// reports it has not taken, oldest first (`Op::Report`); then report
    /// the outcome: `Thread::reported` with the last version, or
    /// `Thread::report_failed` (the alarm tries again).
    Report { actor: String, reports: Vec<crate::directory::inbox::Report> },
    /// Hand these webhook deliveries to the queue (`DELIVERIES`), then
    /// report the outcome: `Thread::enqueued` with their ids, or
    /// `Thread::enqueue_failed` (the alarm tries again).
    Enqueue { deliveries: Vec<crate::notify::Delivery> },
    /// Deliver model calls' charges to `actor`'s directory
    /// (`Op::Charge`), then report the outcome: `Thread::charged` with
    /// their ids, or `Thread::charge_failed` (the alarm tries again).
    Charge { actor: String, charges: Vec<crate::agent::charge::Charge> },
    /// End these subscribers' streams (their follows of a thread that did
    /// not exist yet, which another actor has now created).
    EndFollows { ids: Vec<u64> },
    /// Delete every row, document and alarm of the thread, and drop it from
    /// memory (its streams end); with `files`, every object of the bucket
    /// whose key starts with it. Deletion and the idle TTL.
    Wipe { files: Option<String> },
    /// Remove these objects from the bucket, then report the files' `ids`
    /// removed (`Files::files_deleted`).
    DeleteFiles { keys: Vec<String>, ids: Vec<String> },
    /// Write `log` (a JSON line) and export `spans` (empty when traces are
    /// off), off the request's path.
    Telemetry { spans: Vec<crate::trace::Span>, log: Option<String> },
}

/// Everything the shell needs to run one agent loop.
#[derive(Clone)]
pub struct Drive {
    pub job: Job,
    pub endpoint: ModelEndpoint,
    pub config: AgentConfig,
    pub tools: Rc<Toolbox>,
    /// The isolate's MCP servers (`MCP_SERVERS`).
    pub mcp: crate::agent::mcp::Shared,
}

impl std::fmt::Debug for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Effect::Drive(d) => write!(f, "Drive({})", d.job.run_id),
            Effect::Webhook { body, start_of } => write!(f, "Webhook({body}, start_of: {start_of:?})"),
            Effect::StopAgents => f.write_str("StopAgents"),
            Effect::Directory { actor, op } => write!(f, "Directory({actor}, {op:?})"),
            Effect::Enqueue { deliveries } => {
                write!(f, "Enqueue({:?})", deliveries.iter().map(|d| &d.event).collect::<Vec<_>>())
            }
            Effect::Report { actor, reports } => {
                write!(f, "Report({actor}, {:?})", reports.iter().map(|r| r.version).collect::<Vec<_>>())
            }
            Effect::Charge { actor, charges } => write!(f, "Charge({actor}, {} charges)", charges.len()),
            Effect::Wipe { files } => write!(f, "Wipe(files: {files:?})"),
            Effect::EndFollows { ids } => write!(f, "EndFollows({ids:?})"),
            Effect::Telemetry { spans, log } => write!(f, "Telemetry({} spans, log: {log:?})", spans.len()),
            Effect::DeleteFiles { keys, .. } => write!(f, "DeleteFiles({keys:?})"),
        }
    }
}
