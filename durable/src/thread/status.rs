//! What a thread says of itself: its status and the debug figures.

use super::{Sink, Thread};
use crate::storage::store::Store;
use serde_json::{json, Value};

impl<S: Store, K: Sink> Thread<S, K> {
    /// `GET .../status`.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "hasActiveRun": self.active.is_some(),
            "isSuspended": self.is_suspended(),
            "backgroundTasks": self.background,
            "queue": self.queue,
        });
        if let Some(a) = &self.active {
            v["runId"] = a.record.run_id.clone().into();
        }
        v
    }

    /// Rows written since the store was opened.
    pub fn rows_written(&self) -> u64 {
        self.store.rows_written()
    }

    /// Bytes of delta text held in memory, not yet stored.
    pub fn buffered_bytes(&self) -> usize {
        self.coalescer.buffered_bytes()
    }

    /// `GET .../debug/stats` (with `DEBUG_ROUTES`): the last id, rows
    /// written since the store opened, subscribers, unstored delta bytes,
    /// the files the thread holds, and the object's instance as its shell
    /// reports it.
    pub fn stats(&mut self, instance: &super::serve::Instance) -> Value {
        self.subscribers.prune();
        json!({
            "lastEventId": self.last_seq,
            "rowsWritten": self.rows_written(),
            "subscribers": self.subscribers.len(),
            "bufferedBytes": self.buffered_bytes(),
            "files": self.store.file_count().unwrap_or(0),
            "instance": instance,
        })
    }
}
