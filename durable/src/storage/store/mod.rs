//! Storage behind a trait (as azul keeps its storage), so the thread's rules
//! run against [`MemoryStore`], with faults injected, and against SQL
//! ([`SqlStore`]: Durable Object SQLite on workerd, SQLite natively in
//! tests).
//!
//! The store is synchronous on purpose: Durable Object SQLite is, and a
//! synchronous store lets the thread persist and fan out in one block that no
//! other request can interleave with.

use crate::agent::charge::Charge;
use crate::log::event::{FinishStatus, Kind};
use serde::{Deserialize, Serialize};

mod records;
mod sql;
pub use crate::log::turn::Turn;
pub use records::{ConfirmState, Confirmation, FileRow, FileState, CLIENT_TOOL};
pub use sql::SqlStore;

/// One durable row of the log: `seq` is the SSE `id:`, `data` the event JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub seq: u64,
    pub run_id: String,
    pub kind: Kind,
    pub data: String,
}

/// Where a run stands. At most one run of a thread is `Running`: that is the
/// thread's run lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Running,
    Completed,
    Cancelled,
    Error,
    Interrupted,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Cancelled => "cancelled",
            RunState::Error => "error",
            RunState::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        Some(match s {
            "running" => RunState::Running,
            "completed" => RunState::Completed,
            "cancelled" => RunState::Cancelled,
            "error" => RunState::Error,
            "interrupted" => RunState::Interrupted,
            _ => return None,
        })
    }
}

impl From<FinishStatus> for RunState {
    fn from(s: FinishStatus) -> RunState {
        match s {
            FinishStatus::Completed => RunState::Completed,
            FinishStatus::Cancelled => RunState::Cancelled,
            FinishStatus::Error => RunState::Error,
            FinishStatus::Interrupted => RunState::Interrupted,
        }
    }
}

/// Who produces a run's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// An external agent, signalled through `AGENT_WEBHOOK_URL`.
    Webhook,
    /// The built-in agent, running inside the thread's object.
    Builtin,
}

impl Driver {
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Webhook => "webhook",
            Driver::Builtin => "builtin",
        }
    }

    pub fn parse(s: &str) -> Driver {
        if s == "builtin" {
            Driver::Builtin
        } else {
            Driver::Webhook
        }
    }
}

/// One user message and the run that answers it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub message_id: String,
    /// The user's message text.
    pub message: String,
    /// The root agent's id (the `agentId` of `run-start`).
    pub agent_id: String,
    pub state: RunState,
    pub reason: Option<String>,
    /// Hex SHA-256 of the run's publish token.
    pub token_hash: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub driver: Driver,
    /// Token usage reported by the model, summed over the run's steps (JSON).
    pub usage: Option<String>,
    /// The model catalog id the run used, when one was picked.
    pub model: Option<String>,
    /// A regenerated answer replaced this run's: it no longer feeds the model
    /// and the messages view leaves it out.
    pub replaced: bool,
    /// What the message asked of its turn (column `turn`, storage v4).
    pub turn: Turn,
    /// The run whose turn this one follows in the conversation (`None`: the
    /// first turn, or an answer a regenerate replaced before storage v10,
    /// which is in no path): the conversation's tree (column `parent`,
    /// storage v10). Set when the run starts, never changed.
    pub parent: Option<String>,
}

/// A run's place in the conversation's tree, without its contents
/// ([`Store::run_links`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLink {
    pub run_id: String,
    pub parent: Option<String>,
    pub message_id: String,
    pub replaced: bool,
}

impl RunLink {
    pub fn of(run: &RunRecord) -> RunLink {
        RunLink {
            run_id: run.run_id.clone(),
            parent: run.parent.clone(),
            message_id: run.message_id.clone(),
            replaced: run.replaced,
        }
    }
}

#[cfg(test)]
impl RunRecord {
    /// A running run of a webhook agent, created at 0: a test's fixture.
    pub fn running(run_id: &str) -> RunRecord {
        RunRecord {
            run_id: run_id.into(),
            message_id: format!("m-{run_id}"),
            message: "hi".into(),
            agent_id: "root".into(),
            state: RunState::Running,
            reason: None,
            token_hash: String::new(),
            created_at: 0,
            finished_at: None,
            driver: Driver::Webhook,
            usage: None,
            model: None,
            replaced: false,
            turn: Default::default(),
            parent: None,
        }
    }
}

pub use crate::storage::db::{StoreError, StoreResult};

pub trait Store {
    /// Appends `records` (seqs contiguous, above every stored seq) and, in the
    /// same atomic write, upserts `runs`. Either all of it is stored or none.
    fn commit(&mut self, records: &[Record], runs: &[RunRecord]) -> StoreResult<()>;

    /// The highest stored seq, 0 for an empty log.
    fn last_seq(&self) -> StoreResult<u64>;

    /// Records with `after < seq <= up_to`, ascending, at most `limit`.
    fn read_range(&self, after: u64, up_to: u64, limit: usize) -> StoreResult<Vec<Record>>;

    /// Every record of one run, ascending.
    fn run_records(&self, run_id: &str) -> StoreResult<Vec<Record>>;

    /// One run's records with `seq > after`, ascending, at most `limit`
    /// (a run's Durable Stream reads; SQLite answers from its run index).
    fn run_range(&self, run_id: &str, after: u64, limit: usize) -> StoreResult<Vec<Record>> {
        Ok(self.run_records(run_id)?.into_iter().filter(|r| r.seq > after).take(limit).collect())
    }

    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>>;

    /// The run holding the lock, if any.
    fn running(&self) -> StoreResult<Option<RunRecord>>;

    /// Runs newest first: skip `offset`, take `limit`. Also the total count.
    fn runs_page(&self, offset: usize, limit: usize) -> StoreResult<(Vec<RunRecord>, usize)>;

    /// Every run's place in the conversation's tree, oldest first.
    fn run_links(&self) -> StoreResult<Vec<RunLink>>;

    /// Rows written since the store was opened (the cost figure of the bench).
    fn rows_written(&self) -> u64;

    /// Stores the built-in agent's progress for `run_id` (replacing any).
    fn save_checkpoint(&mut self, run_id: &str, data: &str) -> StoreResult<()>;

    fn checkpoint(&self, run_id: &str) -> StoreResult<Option<String>>;
    /// How many rows each of the thread's main tables holds (the debug
    /// stats: what a long thread keeps).
    fn table_rows(&self) -> StoreResult<std::collections::BTreeMap<&'static str, u64>>;
    /// Drops a run's checkpoint (its run finished: nothing resumes it).
    fn delete_checkpoint(&mut self, run_id: &str) -> StoreResult<()>;
    /// Stores the compaction through run `through` (its payload's JSON);
    /// a later one through the same run replaces it.
    fn put_compaction(&mut self, through: &str, data: &str) -> StoreResult<()>;
    /// The compaction through run `through`, if any.
    fn compaction(&self, through: &str) -> StoreResult<Option<String>>;

    /// Inserts or replaces a confirmation.
    fn put_confirmation(&mut self, c: &Confirmation) -> StoreResult<()>;

    fn confirmation(&self, request_id: &str) -> StoreResult<Option<Confirmation>>;

    /// The newest confirmation of a tool call.
    fn confirmation_by_call(&self, tool_call_id: &str) -> StoreResult<Option<Confirmation>>;

    /// Every confirmation still pending, oldest first.
    fn pending_confirmations(&self) -> StoreResult<Vec<Confirmation>>;

    /// Remembers that `tool` is approved for the rest of the thread.
    fn approve_for_session(&mut self, tool: &str) -> StoreResult<()>;

    fn session_approved(&self, tool: &str) -> StoreResult<bool>;

    /// Small named documents of the thread (its queue, its pinned model).
    fn meta(&self, key: &str) -> StoreResult<Option<String>>;

    fn set_meta(&mut self, key: &str, value: Option<&str>) -> StoreResult<()>;

    /// A file of the thread, by id.
    fn file(&self, file_id: &str) -> StoreResult<Option<FileRow>>;

    /// Inserts or replaces a file's row.
    fn put_file(&mut self, row: &FileRow) -> StoreResult<()>;

    /// Files in `state` reserved before `before` (any time: `None`), oldest
    /// first, at most `limit`.
    fn files_in(&self, state: FileState, before: Option<i64>, limit: usize) -> StoreResult<Vec<FileRow>>;

    /// The file in `state` reserved first (the alarm asks on every request
    /// when the next removal is due).
    fn oldest_file(&self, state: FileState) -> StoreResult<Option<FileRow>> {
        Ok(self.files_in(state, None, 1)?.into_iter().next())
    }

    fn delete_file(&mut self, file_id: &str) -> StoreResult<()>;

    /// How many files the thread holds.
    fn file_count(&self) -> StoreResult<u64>;

    /// Inserts or replaces a model call's charge ([`crate::agent::charge`]).
    fn put_charge(&mut self, charge: &Charge) -> StoreResult<()>;

    /// The charges the thread holds: calls in flight, and those its actors'
    /// directories have not taken yet. An unreadable row is skipped.
    fn charges(&self) -> StoreResult<Vec<Charge>>;

    fn delete_charge(&mut self, id: &str) -> StoreResult<()>;
}

/// An in-memory store for native tests, with fault injection.
#[derive(Debug, Default)]
pub struct MemoryStore {
    pub records: Vec<Record>,
    pub runs: Vec<RunRecord>,
    /// The next `fail_commits` commits fail without storing anything.
    pub fail_commits: usize,
    pub checkpoints: Vec<(String, String)>,
    pub confirmations: Vec<Confirmation>,
    pub session_tools: Vec<String>,
    pub meta: Vec<(String, String)>,
    pub files: Vec<FileRow>,
    pub charges: Vec<Charge>,
    pub compactions: Vec<(String, String)>,
    rows: u64,
}

impl Store for MemoryStore {
    fn commit(&mut self, records: &[Record], runs: &[RunRecord]) -> StoreResult<()> {
        if self.fail_commits > 0 {
            self.fail_commits -= 1;
            return Err(StoreError("injected fault".into()));
        }
        let first = self.records.last().map_or(0, |r| r.seq) + 1;
        for (r, expect) in records.iter().zip(first..) {
            assert_eq!(r.seq, expect, "seqs must be contiguous");
        }
        let running = runs.iter().filter(|r| r.state == RunState::Running).count()
            + self
                .runs
                .iter()
                .filter(|r| r.state == RunState::Running && !runs.iter().any(|n| n.run_id == r.run_id))
                .count();
        assert!(running <= 1, "at most one running run per thread");
        self.records.extend_from_slice(records);
        for run in runs {
            match self.runs.iter_mut().find(|r| r.run_id == run.run_id) {
                Some(slot) => *slot = run.clone(),
                None => self.runs.push(run.clone()),
            }
        }
        self.rows += (records.len() + runs.len()) as u64;
        Ok(())
    }

    fn last_seq(&self) -> StoreResult<u64> {
        Ok(self.records.last().map_or(0, |r| r.seq))
    }

    fn read_range(&self, after: u64, up_to: u64, limit: usize) -> StoreResult<Vec<Record>> {
        Ok(self.records.iter().filter(|r| r.seq > after && r.seq <= up_to).take(limit).cloned().collect())
    }

    fn run_records(&self, run_id: &str) -> StoreResult<Vec<Record>> {
        Ok(self.records.iter().filter(|r| r.run_id == run_id).cloned().collect())
    }

    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs.iter().find(|r| r.run_id == run_id).cloned())
    }

    fn running(&self) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs.iter().find(|r| r.state == RunState::Running).cloned())
    }

    fn runs_page(&self, offset: usize, limit: usize) -> StoreResult<(Vec<RunRecord>, usize)> {
        let page = self.runs.iter().rev().skip(offset).take(limit).cloned().collect();
        Ok((page, self.runs.len()))
    }

    fn run_links(&self) -> StoreResult<Vec<RunLink>> {
        Ok(self.runs.iter().map(RunLink::of).collect())
    }

    fn rows_written(&self) -> u64 {
        self.rows
    }

    fn save_checkpoint(&mut self, run_id: &str, data: &str) -> StoreResult<()> {
        self.checkpoints.retain(|(r, _)| r != run_id);
        self.checkpoints.push((run_id.to_owned(), data.to_owned()));
        self.rows += 1;
        Ok(())
    }

    fn checkpoint(&self, run_id: &str) -> StoreResult<Option<String>> {
        Ok(self.checkpoints.iter().find(|(r, _)| r == run_id).map(|(_, d)| d.clone()))
    }

    fn table_rows(&self) -> StoreResult<std::collections::BTreeMap<&'static str, u64>> {
        Ok([
            ("events", self.records.len()),
            ("runs", self.runs.len()),
            ("checkpoints", self.checkpoints.len()),
            ("compactions", self.compactions.len()),
        ]
        .into_iter()
        .map(|(k, n)| (k, n as u64))
        .collect())
    }

    fn delete_checkpoint(&mut self, run_id: &str) -> StoreResult<()> {
        self.checkpoints.retain(|(r, _)| r != run_id);
        Ok(())
    }

    fn put_compaction(&mut self, through: &str, data: &str) -> StoreResult<()> {
        self.compactions.retain(|(r, _)| r != through);
        self.compactions.push((through.to_owned(), data.to_owned()));
        self.rows += 1;
        Ok(())
    }

    fn compaction(&self, through: &str) -> StoreResult<Option<String>> {
        Ok(self.compactions.iter().find(|(r, _)| r == through).map(|(_, d)| d.clone()))
    }

    fn put_confirmation(&mut self, c: &Confirmation) -> StoreResult<()> {
        match self.confirmations.iter_mut().find(|x| x.request_id == c.request_id) {
            Some(slot) => *slot = c.clone(),
            None => self.confirmations.push(c.clone()),
        }
        self.rows += 1;
        Ok(())
    }

    fn confirmation(&self, request_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self.confirmations.iter().find(|c| c.request_id == request_id).cloned())
    }

    fn pending_confirmations(&self) -> StoreResult<Vec<Confirmation>> {
        Ok(self.confirmations.iter().filter(|c| c.state == ConfirmState::Pending).cloned().collect())
    }

    fn confirmation_by_call(&self, tool_call_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self.confirmations.iter().rev().find(|c| c.tool_call_id == tool_call_id).cloned())
    }

    fn approve_for_session(&mut self, tool: &str) -> StoreResult<()> {
        if !self.session_tools.iter().any(|t| t == tool) {
            self.session_tools.push(tool.to_owned());
        }
        Ok(())
    }

    fn session_approved(&self, tool: &str) -> StoreResult<bool> {
        Ok(self.session_tools.iter().any(|t| t == tool))
    }

    fn meta(&self, key: &str) -> StoreResult<Option<String>> {
        Ok(self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    }

    fn set_meta(&mut self, key: &str, value: Option<&str>) -> StoreResult<()> {
        self.meta.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.meta.push((key.to_owned(), v.to_owned()));
        }
        self.rows += 1;
        Ok(())
    }

    fn file(&self, file_id: &str) -> StoreResult<Option<FileRow>> {
        Ok(self.files.iter().find(|f| f.file.file_id == file_id).cloned())
    }

    fn put_file(&mut self, row: &FileRow) -> StoreResult<()> {
        match self.files.iter_mut().find(|f| f.file.file_id == row.file.file_id) {
            Some(slot) => *slot = row.clone(),
            None => self.files.push(row.clone()),
        }
        self.rows += 1;
        Ok(())
    }

    fn files_in(&self, state: FileState, before: Option<i64>, limit: usize) -> StoreResult<Vec<FileRow>> {
        let mut rows: Vec<FileRow> = self
            .files
            .iter()
            .filter(|f| f.state == state && before.is_none_or(|b| f.reserved_at < b))
            .cloned()
            .collect();
        rows.sort_by_key(|f| f.reserved_at);
        rows.truncate(limit);
        Ok(rows)
    }

    fn delete_file(&mut self, file_id: &str) -> StoreResult<()> {
        self.files.retain(|f| f.file.file_id != file_id);
        self.rows += 1;
        Ok(())
    }

    fn file_count(&self) -> StoreResult<u64> {
        Ok(self.files.len() as u64)
    }

    fn put_charge(&mut self, charge: &Charge) -> StoreResult<()> {
        match self.charges.iter_mut().find(|c| c.id == charge.id) {
            Some(slot) => *slot = charge.clone(),
            None => self.charges.push(charge.clone()),
        }
        self.rows += 1;
        Ok(())
    }

    fn charges(&self) -> StoreResult<Vec<Charge>> {
        Ok(self.charges.clone())
    }

    fn delete_charge(&mut self, id: &str) -> StoreResult<()> {
        self.charges.retain(|c| c.id != id);
        Ok(())
    }
}
