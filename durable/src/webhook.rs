//! The external agent's contract: what the Worker posts to
//! `AGENT_WEBHOOK_URL` (a run to start, a run to stop, a request settled),
//! and where the agent publishes a run's events with the run's token: `POST
//! {publishUrl}` (the Instance AI publish route), or the run's Durable
//! Stream (`POST /v1/runs/:runId`).

use crate::storage::store::RunRecord;
use serde_json::{json, Value};

/// A run to start: who it is for, where and how to publish, and the run
/// whose turn it follows (`parentRunId`, `null` at a first turn: an agent
/// that keeps its own memory of a thread follows the conversation's path
/// through an edit or an answer given again, `docs/branches.md`).
pub fn start(thread_id: &str, run: &RunRecord, token: &str, origin: &str) -> Value {
    json!({
        "type": "run",
        "threadId": thread_id,
        "runId": run.run_id,
        "messageId": run.message_id,
        "message": run.message,
        "parentRunId": run.parent,
        "agentId": run.agent_id,
        "model": run.model,
        "publishUrl": format!("{origin}/instance-ai/threads/{thread_id}/runs/{}/events", run.run_id),
        "publishToken": token,
    })
}

/// A run to stop, and why (`user_cancelled`, `interrupted`, `timeout`, ...).
pub fn cancel(run_id: &str, reason: &str) -> Value {
    json!({ "type": "cancel", "runId": run_id, "reason": reason })
}
