//! What the protocols read of a conversation, and the one write a protocol
//! makes beside a publish: the log a page at a time, a run's record and its
//! records, the request for a tool call, a stored producer's state. The
//! protocols read through these, never through the store, so what a
//! protocol may see of a thread is this file (and `transcript.rs`'s views).

use super::error::Error;
use super::{Sink, Thread};
use crate::storage::store::{Confirmation, Record, RunRecord, Store};
use serde_json::Value;

impl<S: Store, K: Sink> Thread<S, K> {
    /// The log's records after `after` up to `up_to`, at most `limit`.
    pub fn log_page(&self, after: u64, up_to: u64, limit: usize) -> Result<Vec<Record>, Error> {
        Ok(self.store.read_range(after, up_to, limit)?)
    }

    /// A run of this thread, or `None`.
    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>, Error> {
        Ok(self.store.run(run_id)?)
    }

    /// A run of this thread, or 404 `run_not_found`.
    pub fn known_run(&self, run_id: &str) -> Result<RunRecord, Error> {
        self.run(run_id)?.ok_or(Error::RunNotFound)
    }

    /// Every record of a run, in order.
    pub fn run_records(&self, run_id: &str) -> Result<Vec<Record>, Error> {
        Ok(self.store.run_records(run_id)?)
    }

    /// A run's records after `after`, at most `limit`.
    pub fn run_page(&self, run_id: &str, after: u64, limit: usize) -> Result<Vec<Record>, Error> {
        Ok(self.store.run_range(run_id, after, limit)?)
    }

    /// The request for a person a tool call raised, whatever its state.
    pub fn request_for_call(&self, tool_call_id: &str) -> Result<Option<Confirmation>, Error> {
        Ok(self.store.confirmation_by_call(tool_call_id)?)
    }

    /// A stored producer's state (Durable Streams' idempotent appends), by
    /// its key.
    pub fn producer_state<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        Ok(self.store.meta(key)?.and_then(|v| serde_json::from_str(&v).ok()))
    }

    /// Publishes an appender's batch into run `run_id` and, with it, the
    /// appender's new state (`key`, its JSON): one synchronous block, so the
    /// storage commits both or neither, and a retried append is recognised
    /// exactly when its batch is in the log. Returns the last seq.
    pub fn publish_as(
        &mut self,
        run_id: &str,
        batch: Vec<Value>,
        producer: Option<(String, String)>,
        now: i64,
    ) -> Result<u64, Error> {
        let last = self.publish(run_id, batch, now)?;
        if let Some((key, state)) = producer {
            self.store.set_meta(&key, Some(&state))?;
        }
        Ok(last)
    }
}
