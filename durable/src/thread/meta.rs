//! What a thread keeps beside its log, each under its own meta key, and the
//! log's generation. The bottom of the thread's parts: every other reads
//! these from here, and this file reads none of them.

use super::error::Error;
use crate::storage::store::Store;
use serde::{Deserialize, Serialize};

/// The actor who created the thread.
pub const OWNER_KEY: &str = "owner";
/// The origin of the thread's last accepted send.
pub const SEND_ORIGIN_KEY: &str = "send_origin";
/// The thread's pinned model.
pub const PIN_KEY: &str = "pinned_model";
/// The message queue, stored whole.
pub const QUEUE_KEY: &str = "queue";
/// The active path's leaf (a run id): set by every run that starts and by
/// a switch of branch. A thread of before has none: its leaf is its newest
/// run.
pub const LEAF_KEY: &str = "leaf";
/// Where a fork came from ([`ForkedFrom`], JSON); none on a thread
/// that is no fork.
pub const FORK_KEY: &str = "fork";
/// A fork's memory of its shared history (chat messages, JSON).
pub const FORK_MEMORY_KEY: &str = "fork_memory";
/// The provider's count of the thread's last model call against its
/// estimate ([`Calibration`](crate::agent::context::Calibration), JSON).
pub const CALIBRATION_KEY: &str = "context_calibration";
/// The log's generation (its name predates other readers than its first:
/// stored data keeps it).
pub const GENERATION_KEY: &str = "ds_generation";
/// What the thread reported to its owner's inbox, and what it owes it
/// (storage 12: `thread::inbox::Reports`, JSON).
pub const INBOX_KEY: &str = "inbox";
/// The thread's schedules (storage 12: `schedule::Schedule`s, JSON, soonest
/// first).
pub const SCHEDULES_KEY: &str = "schedules";

/// The log's generation: a random number drawn (from `draw`) when the log is
/// first read from a position and stored with it. A reader's position names
/// it, and deleting the thread deletes it, so a position in a deleted log is
/// never taken for one in the log that replaced it.
pub fn generation<S: Store>(store: &mut S, draw: impl FnOnce() -> u64) -> Result<u64, Error> {
    if let Some(g) = stored_generation(store)? {
        return Ok(g);
    }
    // 1..=10^15: fits the 16 digits of an offset half, never 0.
    let g = draw() % 1_000_000_000_000_000 + 1;
    store.set_meta(GENERATION_KEY, Some(&g.to_string()))?;
    Ok(g)
}

/// The log's generation if one was drawn (a log never read from a position
/// has none yet).
pub fn stored_generation<S: Store>(store: &S) -> Result<Option<u64>, Error> {
    Ok(store.meta(GENERATION_KEY)?.and_then(|v| v.parse().ok()))
}

/// The origin of the thread's last accepted send (publish URLs when
/// `PUBLIC_URL` is unset), as stored under [`SEND_ORIGIN_KEY`]: read on
/// first use, written only when it changes.
#[derive(Default)]
pub struct SendOrigin(Option<Option<String>>);

impl SendOrigin {
    pub fn get<S: Store>(&mut self, store: &S) -> Result<Option<String>, Error> {
        if self.0.is_none() {
            self.0 = Some(store.meta(SEND_ORIGIN_KEY)?);
        }
        Ok(self.0.clone().flatten())
    }

    /// Records `origin` (nothing for an empty one).
    pub fn record<S: Store>(&mut self, store: &mut S, origin: &str) -> Result<(), Error> {
        if origin.is_empty() || self.get(store)?.as_deref() == Some(origin) {
            return Ok(());
        }
        store.set_meta(SEND_ORIGIN_KEY, Some(origin))?;
        self.0 = Some(Some(origin.to_owned()));
        Ok(())
    }
}

/// Where a fork came from (its meta [`FORK_KEY`], and the
/// `forkedFrom` of its answers).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    pub thread_id: String,
    /// The message the fork was made at.
    pub message_id: String,
    /// The source's run its shared history ends with.
    pub run_id: String,
    /// The source's log position at the fork (`<generation>_<seq>`, a
    /// Durable Streams offset: `Stream-Fork-Offset`).
    pub offset: String,
    /// The source's title, which the fork keeps.
    pub title: String,
    /// How many turns the shared history has.
    pub turns: usize,
}

/// Where the thread was forked from, when it is a fork.
pub fn forked_from<S: Store>(store: &S) -> Result<Option<ForkedFrom>, Error> {
    Ok(store.meta(FORK_KEY)?.and_then(|v| serde_json::from_str(&v).ok()))
}
