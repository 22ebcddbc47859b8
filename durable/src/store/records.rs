//! The shapes the thread stores besides its log's records: the requests
//! that wait for a person ([`Confirmation`]) and the message queue
//! ([`Queue`]). Stored data outlives the code: a change to one of these is
//! a change to a stored shape, with its migration (`schema`). The rules of a
//! request's life are the thread's (`thread::confirmations`).

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The input type of a request a client's own tool waits on.
pub const CLIENT_TOOL: &str = "client-tool";

/// Where a confirmation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmState {
    Pending,
    Approved,
    Denied,
    Expired,
    Cancelled,
}

impl ConfirmState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmState::Pending => "pending",
            ConfirmState::Approved => "approved",
            ConfirmState::Denied => "denied",
            ConfirmState::Expired => "expired",
            ConfirmState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> ConfirmState {
        match s {
            "approved" => ConfirmState::Approved,
            "denied" => ConfirmState::Denied,
            "expired" => ConfirmState::Expired,
            "cancelled" => ConfirmState::Cancelled,
            _ => ConfirmState::Pending,
        }
    }
}

/// One confirmation a thread holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    pub request_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    /// `approval | text | questions | plan-review`
    pub input_type: String,
    pub state: ConfirmState,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    /// The role a decider must hold, from the approval policy.
    pub approver: Option<String>,
    /// The decision as given (`{approved, userInput?, scope?, answers?}`).
    pub decision: Option<Value>,
    /// The id the external agent chose, sent back in its webhook callback.
    pub agent_request_id: Option<String>,
}

/// The thread's message queue (`docs/protocols/001-agora.md`, "Message
/// queue"): messages sent while a run holds the thread wait here,
/// server-side, and start one by one as the run ahead settles. The whole
/// queue is one small document, stored and announced (`queue-updated`) as a
/// whole snapshot on every change.
/// Most messages a queue holds.
pub const MAX_ITEMS: usize = 100;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueItem {
    /// Also the id of the run it starts: known up front.
    pub message_id: String,
    pub run_id: String,
    pub message: String,
    pub queued_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    pub items: Vec<QueueItem>,
    pub paused: bool,
}

impl Queue {
    fn index(&self, message_id: &str) -> Result<usize, ApiError> {
        self.items.iter().position(|i| i.message_id == message_id).ok_or_else(ApiError::queued_message_not_found)
    }

    /// Appends; returns the 0-based position (0 runs next).
    pub fn push(&mut self, item: QueueItem) -> Result<usize, ApiError> {
        if self.items.len() >= MAX_ITEMS {
            return Err(ApiError::queue_full(format!("a thread queues at most {MAX_ITEMS} messages")));
        }
        self.items.push(item);
        Ok(self.items.len() - 1)
    }

    /// Puts `item` first (an interrupting send runs next).
    pub fn push_front(&mut self, item: QueueItem) {
        self.items.insert(0, item);
    }

    pub fn edit(&mut self, message_id: &str, message: String) -> Result<(), ApiError> {
        let i = self.index(message_id)?;
        self.items[i].message = message;
        Ok(())
    }

    /// Moves a message to `position` (clamped to the end).
    pub fn move_to(&mut self, message_id: &str, position: usize) -> Result<(), ApiError> {
        let i = self.index(message_id)?;
        let item = self.items.remove(i);
        let at = position.min(self.items.len());
        self.items.insert(at, item);
        Ok(())
    }

    pub fn remove(&mut self, message_id: &str) -> Result<QueueItem, ApiError> {
        let i = self.index(message_id)?;
        Ok(self.items.remove(i))
    }

    /// The next message to start, unless paused.
    pub fn pop_next(&mut self) -> Option<QueueItem> {
        if self.paused || self.items.is_empty() {
            return None;
        }
        Some(self.items.remove(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> QueueItem {
        QueueItem { message_id: id.into(), run_id: id.into(), message: id.into(), queued_at: 0, model: None }
    }

    #[test]
    fn order_edits_and_pause() {
        let mut q = Queue::default();
        assert_eq!(q.push(item("a")).unwrap(), 0);
        assert_eq!(q.push(item("b")).unwrap(), 1);
        q.push(item("c")).unwrap();
        q.move_to("c", 0).unwrap();
        q.edit("b", "B!".into()).unwrap();
        assert_eq!(q.items.iter().map(|i| i.message_id.as_str()).collect::<Vec<_>>(), ["c", "a", "b"]);
        assert_eq!(q.remove("a").unwrap().message_id, "a");
        assert_eq!(q.remove("a").unwrap_err().status, 404);
        q.paused = true;
        assert_eq!(q.pop_next(), None);
        q.paused = false;
        assert_eq!(q.pop_next().unwrap().message_id, "c");
        assert_eq!(q.pop_next().unwrap().message, "B!");
        assert_eq!(q.pop_next(), None);
        q.move_to("zzz", 0).unwrap_err();
    }
}
