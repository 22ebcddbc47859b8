//! What a thread says of itself: its status and the debug figures.

use super::{Sink, Thread};
use crate::storage::store::Store;
use serde_json::{json, Value};

impl<S: Store, K: Sink> Thread<S, K> {
    /// `GET .../status`.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "hasActiveRun": self.runs.holder().is_some(),
            "isSuspended": self.runs.is_suspended(),
            "backgroundTasks": self.runs.background_tasks(),
            "queue": self.queue,
        });
        if let Some(run_id) = self.runs.holder() {
            v["runId"] = run_id.into();
        }
        v
    }

    /// `GET .../debug/stats` (with `DEBUG_ROUTES`): the last id, rows
    /// written since the store opened, subscribers, unstored delta bytes,
    /// the files the thread holds, and the object's instance as its shell
    /// reports it.
    pub fn stats(&mut self, instance: &super::serve::Instance) -> Value {
        self.journal.subscribers().prune();
        json!({
            "lastEventId": self.journal.last_seq(),
            "rowsWritten": self.journal.store().rows_written(),
            "subscribers": self.journal.subscribers().len(),
            "bufferedBytes": self.journal.buffered_bytes(),
            "files": self.journal.store().file_count().unwrap_or(0),
            "instance": instance,
        })
    }
}
