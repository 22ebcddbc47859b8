//! The thread's message queue, as a shape: one small document the thread
//! stores, and the whole snapshot every `queue-updated` event carries.
//! Messages sent while a run holds the thread wait here, server-side, and
//! start one by one as the run ahead settles. Stored data outlives the code:
//! a change here is a change to a stored shape, with its migration
//! (`schema`). Its operations on a thread are `thread::queue`'s.

use crate::wire::error::ApiError;
use serde::{Deserialize, Serialize};

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
    /// When its text was last edited (storage 9; none: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the message asks of its turn.
    #[serde(flatten)]
    pub turn: crate::log::turn::Turn,
}

/// One change to a waiting message: new text, its files dropped, a new
/// place (0 runs next), or several.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueuePatch {
    pub message: Option<String>,
    pub drop_attachments: bool,
    pub position: Option<usize>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Queue {
    pub items: Vec<QueueItem>,
    pub paused: bool,
    /// Why the thread paused it itself (`quota_exceeded`); none when a
    /// person paused it.
    #[serde(default, rename = "pausedReason", skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    /// When it paused (storage 9; none on older documents, and while running).
    #[serde(default, rename = "pausedAt", skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<i64>,
}

/// What a `queue-updated` event carries: the whole queue, and what changed
/// that a reader cannot see in it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueUpdate {
    #[serde(flatten)]
    pub queue: Queue,
    /// The message the thread took from the queue and started, as a run's
    /// last event before its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<QueueStart>,
    /// Runs of messages that left the queue without running (a cleared
    /// queue), so a view that shows submissions settles each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
}

/// The queued message a run's end started.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStart {
    pub message_id: String,
    pub run_id: String,
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

    /// Applies one change to a waiting message, all of it or (an unknown
    /// message) none: callers save the queue once.
    pub fn patch(&mut self, message_id: &str, patch: QueuePatch, now: i64) -> Result<(), ApiError> {
        self.index(message_id)?;
        if let Some(message) = patch.message {
            self.edit(message_id, message, now)?;
        }
        if patch.drop_attachments {
            self.drop_attachments(message_id, now)?;
        }
        if let Some(position) = patch.position {
            self.move_to(message_id, position)?;
        }
        Ok(())
    }

    pub fn edit(&mut self, message_id: &str, message: String, now: i64) -> Result<(), ApiError> {
        let i = self.index(message_id)?;
        self.items[i].message = message;
        self.items[i].updated_at = Some(now);
        Ok(())
    }

    /// Drops every file a waiting message carries (agora's `attachments:
    /// null`); the files themselves stay where they are stored.
    pub fn drop_attachments(&mut self, message_id: &str, now: i64) -> Result<(), ApiError> {
        let i = self.index(message_id)?;
        self.items[i].turn.attachments.clear();
        self.items[i].updated_at = Some(now);
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
        QueueItem {
            message_id: id.into(),
            run_id: id.into(),
            message: id.into(),
            queued_at: 0,
            updated_at: None,
            model: None,
            turn: Default::default(),
        }
    }

    #[test]
    fn order_edits_and_pause() {
        let mut q = Queue::default();
        assert_eq!(q.push(item("a")).unwrap(), 0);
        assert_eq!(q.push(item("b")).unwrap(), 1);
        q.push(item("c")).unwrap();
        q.move_to("c", 0).unwrap();
        q.edit("b", "B!".into(), 5).unwrap();
        assert_eq!(q.items[2].updated_at, Some(5));
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
