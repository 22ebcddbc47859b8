//! n8n's messages view (`GET /instance-ai/threads/:threadId/messages`): a
//! page of turns, each the user's message then the assistant message that
//! answered it, with the agent tree folded from the log.
//!
//! A user message names no run, as n8n's own history does: n8n's editor
//! routes a run's live events to the message that names it, whatever its
//! role. Its answer follows it. `nextEventId` is read in the same block as
//! the page, so a client that connects from `nextEventId - 1` sees nothing
//! twice.

use crate::log::queued::Queue;
use crate::log::reducer::AgentNode;
use crate::storage::store::{RunState, Store};
use crate::thread::conversation::TurnRead;
use crate::thread::error::Error;
use crate::thread::tree::Branch;
use crate::thread::{Sink, Thread};
use crate::wire::time::rfc3339;
use serde::Serialize;
use serde_json::Value;

/// A page of the thread's messages.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Messages<'t> {
    pub thread_id: &'t str,
    pub messages: Vec<Message>,
    pub next_event_id: u64,
    pub queue: &'t Queue,
    pub page: usize,
    pub limit: usize,
    pub total_runs: usize,
}

/// One message of the view.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Message {
    User(User),
    Assistant(Box<Assistant>),
}

/// The user's message of a turn.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub role: &'static str,
    pub created_at: String,
    pub content: String,
    pub reasoning: &'static str,
    pub is_streaming: bool,
    /// Each file with its URL on the request's origin; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Value>>,
    /// Extension: where the message stands among its edits (message ids);
    /// absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<Branch>,
    /// Extension: on a fork, the thread a shared message is of (it is
    /// edited, answered again or forked there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_from: Option<String>,
}

/// The assistant's answer of a turn (`<runId>:assistant`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assistant {
    pub id: String,
    pub run_id: String,
    pub role: &'static str,
    pub created_at: String,
    pub content: String,
    pub reasoning: String,
    pub is_streaming: bool,
    pub status: &'static str,
    /// The model's own counts (and `costUsd`); `null` when none.
    pub usage: Option<Value>,
    pub agent_tree: Option<AgentNode>,
    /// Extension: where the answer stands among the answers to its
    /// message (run ids: `POST .../branch` and `regenerate` take them);
    /// absent when it is the only one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<Branch>,
    /// Extension: on a fork, the thread a shared answer is of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_from: Option<String>,
    /// Extension: the compaction of the model's context made during the
    /// turn (a quiet marker: the conversation shown is whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_compacted: Option<crate::log::event::payload::ContextCompacted>,
}

impl User {
    /// The user's message of `turn`; a message's attachments carry their
    /// URL on `origin`.
    pub fn of(turn: &TurnRead, thread_id: &str, origin: &str) -> User {
        let run = &turn.run;
        let attachments = &run.turn.attachments;
        User {
            id: run.message_id.clone(),
            role: "user",
            created_at: rfc3339(run.created_at),
            content: run.message.clone(),
            reasoning: "",
            is_streaming: false,
            attachments: (!attachments.is_empty())
                .then(|| attachments.iter().map(|a| a.to_json(origin, thread_id)).collect()),
            branch: turn.branches.message.clone(),
            shared_from: turn.home.clone(),
        }
    }
}

impl Assistant {
    /// The answer of `turn`, its text and reasoning the root agent's.
    pub fn of(turn: &TurnRead) -> Assistant {
        let run = &turn.run;
        let root = turn.root();
        Assistant {
            id: format!("{}:assistant", run.run_id),
            run_id: run.run_id.clone(),
            role: "assistant",
            created_at: rfc3339(run.created_at),
            content: root.as_ref().map(|r| r.text_content.clone()).unwrap_or_default(),
            reasoning: root.as_ref().map(|r| r.reasoning.clone()).unwrap_or_default(),
            is_streaming: run.state == RunState::Running,
            status: run.state.as_str(),
            usage: run.usage.as_deref().and_then(usage_view),
            agent_tree: root,
            branch: turn.branches.answer.clone(),
            shared_from: turn.home.clone(),
            context_compacted: turn.compacted(),
        }
    }
}

/// Page `page` of `limit` runs, newest page first, messages oldest first
/// within it, times in ISO 8601.
pub fn messages<'t, S: Store, K: Sink>(
    t: &'t Thread<S, K>,
    limit: usize,
    page: usize,
    origin: &str,
) -> Result<Messages<'t>, Error> {
    let conversation = t.conversation();
    let (turns, total) = conversation.turns(limit, page)?;
    let mut messages = Vec::with_capacity(turns.len() * 2);
    for turn in &turns {
        messages.push(Message::User(User::of(turn, turn.thread(conversation.thread_id()), origin)));
        messages.push(Message::Assistant(Box::new(Assistant::of(turn))));
    }
    Ok(Messages {
        thread_id: conversation.thread_id(),
        messages,
        next_event_id: conversation.last_seq() + 1,
        queue: conversation.queue(),
        page,
        limit,
        total_runs: total,
    })
}

/// A run's stored usage as the view shows it: the model's own counts (and
/// `costUsd`); the model the usage views name is kept out.
fn usage_view(stored: &str) -> Option<Value> {
    let mut v: Value = serde_json::from_str(stored).ok()?;
    if let Some(o) = v.as_object_mut() {
        o.remove("model");
    }
    Some(v)
}
