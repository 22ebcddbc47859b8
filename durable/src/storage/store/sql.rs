//! A thread's [`Store`] on SQL: the layout of `migrations::THREAD` (events,
//! runs, confirmations, checkpoints, session approvals, meta).
//!
//! Durable Object SQLite commits every write made in one synchronous block
//! (no `await` between them) atomically, so a [`Store::commit`] of events
//! plus a run update is all-or-nothing without an explicit transaction.

use super::{Driver, Record, RunLink, RunRecord, RunState, Store, StoreResult};
use crate::agent::charge::Charge;
use crate::log::event::Kind;
use crate::storage::db::{Db, Value};
use crate::storage::migrations::{self, OpenError};
use crate::storage::store::{Confirmation, FileRow, FileState};
use std::cell::{Cell, RefCell};

/// Most event data bound to one insert (SQLite strings and blobs stop at
/// 2 MB).
const MAX_BOUND_BYTES: usize = 1_500_000;

const RUN_COLUMNS: &str =
    "run_id, message_id, message, agent_id, state, reason, token_hash, created_at, finished_at, driver, usage, model, replaced, turn, parent";

pub struct SqlStore<D: Db> {
    db: D,
    rows_written: Cell<u64>,
    remembered: RefCell<Remembered>,
}

/// What the thread asks on every request, for its alarm's next deadline
/// (the pending confirmations, the oldest file in a state), remembered
/// from one read to the next, so a publish runs one statement, not four
/// (each a crossing to the runtime and a query).
///
/// Invariant: an answer is forgotten before any write to its table is
/// made (whether or not the write then succeeds), and the store is its
/// tables' only writer while it is open (a wipe drops the thread, and its
/// store with it, first), so a remembered answer is what a read would
/// return.
#[derive(Default)]
struct Remembered {
    pending: Option<Vec<Confirmation>>,
    /// `(state, its oldest file)`, for the states asked about.
    oldest: Vec<(FileState, Option<FileRow>)>,
}

/// Reads a row's columns in order.
struct Columns(std::vec::IntoIter<Value>);

impl Columns {
    fn next(&mut self) -> Value {
        self.0.next().unwrap_or(Value::Null)
    }

    fn text(&mut self) -> String {
        self.next().text().unwrap_or_default()
    }

    fn opt(&mut self) -> Option<String> {
        self.next().text()
    }

    fn int(&mut self) -> i64 {
        self.next().int()
    }
}

fn run_of(row: Vec<Value>) -> RunRecord {
    let mut c = Columns(row.into_iter());
    RunRecord {
        run_id: c.text(),
        message_id: c.text(),
        message: c.text(),
        agent_id: c.text(),
        state: RunState::parse(&c.text()).unwrap_or(RunState::Error),
        reason: c.opt(),
        token_hash: c.text(),
        created_at: c.int(),
        finished_at: match c.next() {
            Value::Null => None,
            v => Some(v.int()),
        },
        driver: Driver::parse(&c.text()),
        usage: c.opt(),
        model: c.opt(),
        replaced: c.int() != 0,
        turn: c.opt().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
        parent: c.opt(),
    }
}

const FILE_COLUMNS: &str = "file_id, sha256, media_type, size, name, state, reserved_at";

fn file_of(row: Vec<Value>) -> FileRow {
    let mut c = Columns(row.into_iter());
    let file = crate::files::FileRef {
        file_id: c.text(),
        sha256: c.text(),
        media_type: c.text(),
        size: c.int() as u64,
        name: c.opt(),
    };
    FileRow { file, state: FileState::parse(&c.text()), reserved_at: c.int() }
}

fn record_of(row: Vec<Value>) -> Option<Record> {
    let mut c = Columns(row.into_iter());
    let (seq, run_id, kind, data) = (c.int() as u64, c.text(), c.text(), c.text());
    Some(Record { seq, run_id, kind: Kind::parse(&kind)?, data })
}

impl<D: Db> SqlStore<D> {
    /// Opens the store, bringing storage to the current layout first.
    pub fn open(db: D) -> Result<SqlStore<D>, OpenError> {
        migrations::migrate(&db, &migrations::THREAD)?;
        Ok(SqlStore { db, rows_written: Cell::new(0), remembered: RefCell::default() })
    }

    /// The database under the store (benchmarks count its statements).
    pub fn db(&self) -> &D {
        &self.db
    }

    /// Runs a write, counting the rows it wrote.
    fn write(&self, sql: &str, args: &[Value]) -> StoreResult<()> {
        let written = self.db.exec(sql, args)?;
        self.rows_written.set(self.rows_written.get() + written);
        Ok(())
    }

    /// Stores `records`, one statement per ~1.5 MB of their data: the
    /// data of every row bound as one blob, as it is (nothing escaped,
    /// nothing parsed again, no text transcoding at the hop to the
    /// runtime), and a small JSON index of each row's seq, run, kind and
    /// where its data lies in the blob, which `json_each` walks.
    fn insert_events(&self, records: &[Record]) -> StoreResult<()> {
        use std::fmt::Write;
        let mut start = 0;
        while start < records.len() {
            let mut size = 0;
            let mut end = start;
            while end < records.len() && (end == start || size + records[end].data.len() < MAX_BOUND_BYTES) {
                size += records[end].data.len();
                end += 1;
            }
            let mut data = Vec::with_capacity(size);
            let mut index = String::with_capacity((end - start) * 64 + 2);
            index.push('[');
            for (i, r) in records[start..end].iter().enumerate() {
                if i > 0 {
                    index.push(',');
                }
                let run = serde_json::to_string(&r.run_id).expect("a string serialises");
                // `substr` counts a blob's bytes from 1.
                let _ = write!(index, "[{},{run},\"{}\",{},{}]", r.seq, r.kind.as_str(), data.len() + 1, r.data.len());
                data.extend_from_slice(r.data.as_bytes());
            }
            index.push(']');
            self.write(
                "INSERT INTO events (seq, run_id, type, data)
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
                        CAST(substr(?2, json_extract(value, '$[3]'), json_extract(value, '$[4]')) AS TEXT)
                 FROM json_each(?1)",
                &[index.into(), Value::Blob(data)],
            )?;
            start = end;
        }
        Ok(())
    }

    fn upsert_run(&self, run: &RunRecord) -> StoreResult<()> {
        self.write(
            &format!(
                "INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, reason = excluded.reason,
                   finished_at = excluded.finished_at, usage = excluded.usage, replaced = excluded.replaced"
            ),
            &[
                run.run_id.as_str().into(),
                run.message_id.as_str().into(),
                run.message.as_str().into(),
                run.agent_id.as_str().into(),
                run.state.as_str().into(),
                run.reason.clone().into(),
                run.token_hash.as_str().into(),
                run.created_at.into(),
                run.finished_at.into(),
                run.driver.as_str().into(),
                run.usage.clone().into(),
                run.model.clone().into(),
                (run.replaced as i64).into(),
                (!run.turn.is_empty()).then(|| serde_json::to_string(&run.turn).expect("serialises")).into(),
                run.parent.clone().into(),
            ],
        )
    }

    fn events(&self, sql: &str, args: &[Value]) -> StoreResult<Vec<Record>> {
        Ok(self.db.run(sql, args)?.rows.into_iter().filter_map(record_of).collect())
    }

    fn confirmations(&self, sql: &str, args: &[Value]) -> StoreResult<Vec<Confirmation>> {
        let rows = self.db.run(sql, args)?.rows;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(Value::text))
            .filter_map(|data| serde_json::from_str(&data).ok())
            .collect())
    }

    fn runs(&self, sql: &str, args: &[Value]) -> StoreResult<Vec<RunRecord>> {
        Ok(self.db.run(sql, args)?.rows.into_iter().map(run_of).collect())
    }

    fn count(&self, sql: &str, args: &[Value]) -> StoreResult<i64> {
        Ok(self.db.run(sql, args)?.first().map_or(0, |v| v.int()))
    }
}

impl<D: Db> Store for SqlStore<D> {
    fn commit(&mut self, records: &[Record], runs: &[RunRecord]) -> StoreResult<()> {
        for run in runs {
            self.upsert_run(run)?;
        }
        self.insert_events(records)
    }

    fn last_seq(&self) -> StoreResult<u64> {
        Ok(self.count("SELECT MAX(seq) FROM events", &[])? as u64)
    }

    fn read_range(&self, after: u64, up_to: u64, limit: usize) -> StoreResult<Vec<Record>> {
        self.events(
            "SELECT seq, run_id, type, data FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            &[(after as i64).into(), (up_to as i64).into(), (limit as i64).into()],
        )
    }

    fn run_records(&self, run_id: &str) -> StoreResult<Vec<Record>> {
        self.events("SELECT seq, run_id, type, data FROM events WHERE run_id = ? ORDER BY seq", &[run_id.into()])
    }

    fn run_range(&self, run_id: &str, after: u64, limit: usize) -> StoreResult<Vec<Record>> {
        self.events(
            "SELECT seq, run_id, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            &[run_id.into(), (after as i64).into(), (limit as i64).into()],
        )
    }

    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"), &[run_id.into()])?.pop())
    }

    fn running(&self) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE state = 'running'"), &[])?.pop())
    }

    fn runs_page(&self, offset: usize, limit: usize) -> StoreResult<(Vec<RunRecord>, usize)> {
        let page = self.runs(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY rowid DESC LIMIT ? OFFSET ?"),
            &[(limit as i64).into(), (offset as i64).into()],
        )?;
        Ok((page, self.count("SELECT COUNT(*) FROM runs", &[])? as usize))
    }

    fn run_links(&self) -> StoreResult<Vec<RunLink>> {
        let rows = self.db.run("SELECT run_id, parent, message_id, replaced FROM runs ORDER BY rowid", &[])?.rows;
        Ok(rows
            .into_iter()
            .map(|row| {
                let mut c = Columns(row.into_iter());
                RunLink { run_id: c.text(), parent: c.opt(), message_id: c.text(), replaced: c.int() != 0 }
            })
            .collect())
    }

    fn rows_written(&self) -> u64 {
        self.rows_written.get()
    }

    fn save_checkpoint(&mut self, run_id: &str, data: &str) -> StoreResult<()> {
        self.write(
            "INSERT INTO checkpoints (run_id, data) VALUES (?, ?)
             ON CONFLICT (run_id) DO UPDATE SET data = excluded.data",
            &[run_id.into(), data.into()],
        )
    }

    fn checkpoint(&self, run_id: &str) -> StoreResult<Option<String>> {
        Ok(self
            .db
            .run("SELECT data FROM checkpoints WHERE run_id = ?", &[run_id.into()])?
            .first()
            .and_then(Value::text))
    }

    fn table_rows(&self) -> StoreResult<std::collections::BTreeMap<&'static str, u64>> {
        let mut out = std::collections::BTreeMap::new();
        for table in ["events", "runs", "checkpoints", "compactions"] {
            let n = self.db.run(&format!("SELECT count(*) FROM {table}"), &[])?.first().map_or(0, |v| v.int());
            out.insert(table, n as u64);
        }
        Ok(out)
    }

    fn delete_checkpoint(&mut self, run_id: &str) -> StoreResult<()> {
        self.write("DELETE FROM checkpoints WHERE run_id = ?", &[run_id.into()])
    }

    fn put_compaction(&mut self, through: &str, data: &str) -> StoreResult<()> {
        self.write(
            "INSERT INTO compactions (through_run, data) VALUES (?, ?)
             ON CONFLICT (through_run) DO UPDATE SET data = excluded.data",
            &[through.into(), data.into()],
        )
    }

    fn compaction(&self, through: &str) -> StoreResult<Option<String>> {
        Ok(self
            .db
            .run("SELECT data FROM compactions WHERE through_run = ?", &[through.into()])?
            .first()
            .and_then(Value::text))
    }

    fn put_confirmation(&mut self, c: &Confirmation) -> StoreResult<()> {
        self.remembered.get_mut().pending = None;
        let data = serde_json::to_string(c).expect("confirmations serialise");
        self.write(
            "INSERT INTO confirmations (request_id, run_id, state, data) VALUES (?, ?, ?, ?)
             ON CONFLICT (request_id) DO UPDATE SET state = excluded.state, data = excluded.data",
            &[c.request_id.as_str().into(), c.run_id.as_str().into(), c.state.as_str().into(), data.into()],
        )
    }

    fn confirmation(&self, request_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self.confirmations("SELECT data FROM confirmations WHERE request_id = ?", &[request_id.into()])?.pop())
    }

    fn confirmation_by_call(&self, tool_call_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self
            .confirmations(
                "SELECT data FROM confirmations WHERE json_extract(data, '$.toolCallId') = ? ORDER BY rowid DESC LIMIT 1",
                &[tool_call_id.into()],
            )?
            .pop())
    }

    fn pending_confirmations(&self) -> StoreResult<Vec<Confirmation>> {
        if let Some(pending) = &self.remembered.borrow().pending {
            return Ok(pending.clone());
        }
        let pending =
            self.confirmations("SELECT data FROM confirmations WHERE state = 'pending' ORDER BY rowid", &[])?;
        self.remembered.borrow_mut().pending = Some(pending.clone());
        Ok(pending)
    }

    fn meta(&self, key: &str) -> StoreResult<Option<String>> {
        Ok(self.db.run("SELECT value FROM meta WHERE key = ?", &[key.into()])?.first().and_then(Value::text))
    }

    fn set_meta(&mut self, key: &str, value: Option<&str>) -> StoreResult<()> {
        match value {
            Some(v) => self.write(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[key.into(), v.into()],
            ),
            None => self.write("DELETE FROM meta WHERE key = ?", &[key.into()]),
        }
    }

    fn file(&self, file_id: &str) -> StoreResult<Option<FileRow>> {
        let rows = self.db.run(&format!("SELECT {FILE_COLUMNS} FROM files WHERE file_id = ?"), &[file_id.into()])?;
        Ok(rows.rows.into_iter().next().map(file_of))
    }

    fn put_file(&mut self, row: &FileRow) -> StoreResult<()> {
        self.remembered.get_mut().oldest.clear();
        let f = &row.file;
        self.write(
            &format!(
                "INSERT INTO files ({FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (file_id) DO UPDATE SET state = excluded.state, reserved_at = excluded.reserved_at, name = excluded.name"
            ),
            &[
                f.file_id.as_str().into(),
                f.sha256.as_str().into(),
                f.media_type.as_str().into(),
                (f.size as i64).into(),
                f.name.clone().into(),
                row.state.as_str().into(),
                row.reserved_at.into(),
            ],
        )
    }

    /// No bound is no bound: a sentinel such as `i64::MAX` would cross
    /// into JavaScript outside its safe-integer range (and say so in the log).
    fn files_in(&self, state: FileState, before: Option<i64>, limit: usize) -> StoreResult<Vec<FileRow>> {
        let rows = match before {
            Some(before) => self.db.run(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM files WHERE state = ? AND reserved_at < ? ORDER BY reserved_at LIMIT ?"
                ),
                &[state.as_str().into(), before.into(), (limit as i64).into()],
            )?,
            None => self.db.run(
                &format!("SELECT {FILE_COLUMNS} FROM files WHERE state = ? ORDER BY reserved_at LIMIT ?"),
                &[state.as_str().into(), (limit as i64).into()],
            )?,
        };
        Ok(rows.rows.into_iter().map(file_of).collect())
    }

    fn oldest_file(&self, state: FileState) -> StoreResult<Option<FileRow>> {
        if let Some((_, row)) = self.remembered.borrow().oldest.iter().find(|(s, _)| *s == state) {
            return Ok(row.clone());
        }
        let row = self.files_in(state, None, 1)?.into_iter().next();
        self.remembered.borrow_mut().oldest.push((state, row.clone()));
        Ok(row)
    }

    fn delete_file(&mut self, file_id: &str) -> StoreResult<()> {
        self.remembered.get_mut().oldest.clear();
        self.write("DELETE FROM files WHERE file_id = ?", &[file_id.into()])
    }

    fn file_count(&self) -> StoreResult<u64> {
        Ok(self.count("SELECT COUNT(*) FROM files", &[])? as u64)
    }

    fn put_charge(&mut self, charge: &Charge) -> StoreResult<()> {
        let data = serde_json::to_string(charge).expect("charges serialise");
        self.write(
            "INSERT INTO charges (id, actor, data) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data",
            &[charge.id.as_str().into(), charge.actor.as_str().into(), data.into()],
        )
    }

    fn charges(&self) -> StoreResult<Vec<Charge>> {
        let rows = self.db.run("SELECT data FROM charges ORDER BY rowid", &[])?;
        Ok(rows.rows.into_iter().filter_map(|r| serde_json::from_str(&r.into_iter().next()?.text()?).ok()).collect())
    }

    fn delete_charge(&mut self, id: &str) -> StoreResult<()> {
        self.write("DELETE FROM charges WHERE id = ?", &[id.into()])
    }

    fn approve_for_session(&mut self, tool: &str) -> StoreResult<()> {
        self.write("INSERT OR IGNORE INTO session_approvals (tool) VALUES (?)", &[tool.into()])
    }

    fn session_approved(&self, tool: &str) -> StoreResult<bool> {
        Ok(self.count("SELECT COUNT(*) FROM session_approvals WHERE tool = ?", &[tool.into()])? > 0)
    }
}
