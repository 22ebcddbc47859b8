//! The thread's [`Store`] on Durable Object SQLite, and the [`Sql`] the
//! core's migrations run on (every object class opens its storage through
//! [`open`], which brings it to the current layout first).
//!
//! Durable Object SQLite is synchronous and commits every write made in one
//! synchronous block (no `await` between them) atomically, so a
//! [`Store::commit`] of events plus a run update is all-or-nothing without an
//! explicit transaction.

use serde::Deserialize;
use std::cell::Cell;
use threadline_durable::confirm::Confirmation;
use threadline_durable::event::Kind;
use threadline_durable::schema::{self, OpenError, Schema, Sql};
use threadline_durable::store::{Driver, Record, RunRecord, RunState, Store, StoreError, StoreResult};
use worker::{SqlStorage, SqlStorageValue};

/// Brings `sql` to `schema`'s current layout (see `threadline_durable::schema`).
pub fn open(sql: &SqlStorage, schema: &Schema) -> Result<(), OpenError> {
    schema::migrate(&mut Db(sql), schema).map(|_| ())
}

/// Durable Object SQLite as the migrations see it.
struct Db<'a>(&'a SqlStorage);

impl Sql for Db<'_> {
    fn exec(&mut self, sql: &str) -> StoreResult<()> {
        let cursor = self.0.exec(sql, None).map_err(err)?;
        for _ in cursor {}
        Ok(())
    }

    fn query_int(&self, sql: &str) -> StoreResult<Option<i64>> {
        let cursor = self.0.exec(sql, None).map_err(err)?;
        let row = cursor.raw().next().transpose().map_err(err)?;
        Ok(row.and_then(|r| match r.first() {
            Some(SqlStorageValue::Integer(i)) => Some(*i),
            Some(SqlStorageValue::Float(f)) => Some(*f as i64),
            _ => None,
        }))
    }

    fn columns(&self, table: &str) -> StoreResult<Vec<String>> {
        #[derive(Deserialize)]
        struct Col {
            name: String,
        }
        // Table names come from the core's migrations, never from a request.
        let cols: Vec<Col> =
            self.0.exec(&format!("PRAGMA table_info({table})"), None).map_err(err)?.to_array().map_err(err)?;
        Ok(cols.into_iter().map(|c| c.name).collect())
    }
}

/// Largest JSON text bound to one insert (SQLite strings stop at 2 MB here).
const MAX_BOUND_BYTES: usize = 1_500_000;

pub struct SqlStore {
    sql: SqlStorage,
    rows_written: Cell<u64>,
}

fn err(e: worker::Error) -> StoreError {
    StoreError(e.to_string())
}

#[derive(Deserialize)]
struct EventRow {
    seq: f64,
    run_id: String,
    #[serde(rename = "type")]
    kind: String,
    data: String,
}

impl EventRow {
    fn into_record(self) -> Option<Record> {
        Some(Record { seq: self.seq as u64, run_id: self.run_id, kind: Kind::parse(&self.kind)?, data: self.data })
    }
}

#[derive(Deserialize)]
struct RunRow {
    run_id: String,
    message_id: String,
    message: String,
    agent_id: String,
    state: String,
    reason: Option<String>,
    token_hash: String,
    created_at: f64,
    finished_at: Option<f64>,
    driver: String,
    usage: Option<String>,
    model: Option<String>,
    replaced: f64,
}

impl RunRow {
    fn into_record(self) -> RunRecord {
        RunRecord {
            run_id: self.run_id,
            message_id: self.message_id,
            message: self.message,
            agent_id: self.agent_id,
            state: RunState::parse(&self.state).unwrap_or(RunState::Error),
            reason: self.reason,
            token_hash: self.token_hash,
            created_at: self.created_at as i64,
            finished_at: self.finished_at.map(|t| t as i64),
            driver: Driver::parse(&self.driver),
            usage: self.usage,
            model: self.model,
            replaced: self.replaced != 0.0,
        }
    }
}

const RUN_COLUMNS: &str =
    "run_id, message_id, message, agent_id, state, reason, token_hash, created_at, finished_at, driver, usage, model, replaced";

impl SqlStore {
    /// Opens the store, bringing storage to the current layout first.
    pub fn open(sql: SqlStorage) -> Result<SqlStore, OpenError> {
        open(&sql, &schema::THREAD)?;
        Ok(SqlStore { sql, rows_written: Cell::new(0) })
    }

    fn exec(&self, query: &str, args: Vec<SqlStorageValue>) -> StoreResult<worker::SqlCursor> {
        self.sql.exec(query, args).map_err(err)
    }

    fn count_written(&self, cursor: &worker::SqlCursor) {
        // Drain so the statement runs to completion before counting.
        for _ in cursor.clone() {}
        self.rows_written.set(self.rows_written.get() + cursor.rows_written() as u64);
    }

    fn insert_events(&self, records: &[Record]) -> StoreResult<()> {
        // One statement per ~1.5 MB of rows: the rows travel as one JSON
        // array bound to one parameter and are unpacked by `json_each`.
        let mut start = 0;
        while start < records.len() {
            let mut size = 0;
            let mut end = start;
            while end < records.len() && (end == start || size + records[end].data.len() < MAX_BOUND_BYTES) {
                size += records[end].data.len() + 64;
                end += 1;
            }
            let rows: Vec<serde_json::Value> = records[start..end]
                .iter()
                .map(|r| serde_json::json!([r.seq, r.run_id, r.kind.as_str(), r.data]))
                .collect();
            let cursor = self.exec(
                "INSERT INTO events (seq, run_id, type, data)
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                        json_extract(value, '$[2]'), json_extract(value, '$[3]')
                 FROM json_each(?)",
                vec![serde_json::Value::Array(rows).to_string().into()],
            )?;
            self.count_written(&cursor);
            start = end;
        }
        Ok(())
    }

    fn upsert_run(&self, run: &RunRecord) -> StoreResult<()> {
        let cursor = self.exec(
            &format!(
                "INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (run_id) DO UPDATE SET state = excluded.state, reason = excluded.reason,
                   finished_at = excluded.finished_at, usage = excluded.usage, replaced = excluded.replaced"
            ),
            vec![
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
            ],
        )?;
        self.count_written(&cursor);
        Ok(())
    }

    fn events(&self, query: &str, args: Vec<SqlStorageValue>) -> StoreResult<Vec<Record>> {
        let rows: Vec<EventRow> = self.exec(query, args)?.to_array().map_err(err)?;
        Ok(rows.into_iter().filter_map(EventRow::into_record).collect())
    }

    fn confirmations(&self, query: &str, args: Vec<SqlStorageValue>) -> StoreResult<Vec<Confirmation>> {
        #[derive(Deserialize)]
        struct Row {
            data: String,
        }
        let rows: Vec<Row> = self.exec(query, args)?.to_array().map_err(err)?;
        Ok(rows.iter().filter_map(|r| serde_json::from_str(&r.data).ok()).collect())
    }

    fn runs(&self, query: &str, args: Vec<SqlStorageValue>) -> StoreResult<Vec<RunRecord>> {
        let rows: Vec<RunRow> = self.exec(query, args)?.to_array().map_err(err)?;
        Ok(rows.into_iter().map(RunRow::into_record).collect())
    }
}

impl Store for SqlStore {
    fn commit(&mut self, records: &[Record], runs: &[RunRecord]) -> StoreResult<()> {
        for run in runs {
            self.upsert_run(run)?;
        }
        self.insert_events(records)
    }

    fn last_seq(&self) -> StoreResult<u64> {
        #[derive(Deserialize)]
        struct Row {
            seq: Option<f64>,
        }
        let row: Row = self.exec("SELECT MAX(seq) AS seq FROM events", vec![])?.one().map_err(err)?;
        Ok(row.seq.unwrap_or(0.0) as u64)
    }

    fn read_range(&self, after: u64, up_to: u64, limit: usize) -> StoreResult<Vec<Record>> {
        self.events(
            "SELECT seq, run_id, type, data FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            vec![(after as i64).into(), (up_to as i64).into(), (limit as i64).into()],
        )
    }

    fn run_records(&self, run_id: &str) -> StoreResult<Vec<Record>> {
        self.events("SELECT seq, run_id, type, data FROM events WHERE run_id = ? ORDER BY seq", vec![run_id.into()])
    }

    fn run_range(&self, run_id: &str, after: u64, limit: usize) -> StoreResult<Vec<Record>> {
        self.events(
            "SELECT seq, run_id, type, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            vec![run_id.into(), (after as i64).into(), (limit as i64).into()],
        )
    }

    fn run(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"), vec![run_id.into()])?.pop())
    }

    fn running(&self) -> StoreResult<Option<RunRecord>> {
        Ok(self.runs(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE state = 'running'"), vec![])?.pop())
    }

    fn runs_page(&self, offset: usize, limit: usize) -> StoreResult<(Vec<RunRecord>, usize)> {
        let page = self.runs(
            &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY rowid DESC LIMIT ? OFFSET ?"),
            vec![(limit as i64).into(), (offset as i64).into()],
        )?;
        #[derive(Deserialize)]
        struct Count {
            n: f64,
        }
        let count: Count = self.exec("SELECT COUNT(*) AS n FROM runs", vec![])?.one().map_err(err)?;
        Ok((page, count.n as usize))
    }

    fn rows_written(&self) -> u64 {
        self.rows_written.get()
    }

    fn save_checkpoint(&mut self, run_id: &str, data: &str) -> StoreResult<()> {
        let cursor = self.exec(
            "INSERT INTO checkpoints (run_id, data) VALUES (?, ?)
             ON CONFLICT (run_id) DO UPDATE SET data = excluded.data",
            vec![run_id.into(), data.into()],
        )?;
        self.count_written(&cursor);
        Ok(())
    }

    fn checkpoint(&self, run_id: &str) -> StoreResult<Option<String>> {
        #[derive(Deserialize)]
        struct Row {
            data: String,
        }
        let rows: Vec<Row> =
            self.exec("SELECT data FROM checkpoints WHERE run_id = ?", vec![run_id.into()])?.to_array().map_err(err)?;
        Ok(rows.into_iter().next().map(|r| r.data))
    }

    fn put_confirmation(&mut self, c: &Confirmation) -> StoreResult<()> {
        let data = serde_json::to_string(c).expect("confirmations serialise");
        let cursor = self.exec(
            "INSERT INTO confirmations (request_id, run_id, state, data) VALUES (?, ?, ?, ?)
             ON CONFLICT (request_id) DO UPDATE SET state = excluded.state, data = excluded.data",
            vec![c.request_id.as_str().into(), c.run_id.as_str().into(), c.state.as_str().into(), data.into()],
        )?;
        self.count_written(&cursor);
        Ok(())
    }

    fn confirmation(&self, request_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self.confirmations("SELECT data FROM confirmations WHERE request_id = ?", vec![request_id.into()])?.pop())
    }

    fn confirmation_by_call(&self, tool_call_id: &str) -> StoreResult<Option<Confirmation>> {
        Ok(self
            .confirmations(
                "SELECT data FROM confirmations WHERE json_extract(data, '$.toolCallId') = ? ORDER BY rowid DESC LIMIT 1",
                vec![tool_call_id.into()],
            )?
            .pop())
    }

    fn pending_confirmations(&self) -> StoreResult<Vec<Confirmation>> {
        self.confirmations("SELECT data FROM confirmations WHERE state = 'pending' ORDER BY rowid", vec![])
    }

    fn meta(&self, key: &str) -> StoreResult<Option<String>> {
        #[derive(Deserialize)]
        struct Row {
            value: String,
        }
        let rows: Vec<Row> =
            self.exec("SELECT value FROM meta WHERE key = ?", vec![key.into()])?.to_array().map_err(err)?;
        Ok(rows.into_iter().next().map(|r| r.value))
    }

    fn set_meta(&mut self, key: &str, value: Option<&str>) -> StoreResult<()> {
        let cursor = match value {
            Some(v) => self.exec(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                vec![key.into(), v.into()],
            )?,
            None => self.exec("DELETE FROM meta WHERE key = ?", vec![key.into()])?,
        };
        self.count_written(&cursor);
        Ok(())
    }

    fn approve_for_session(&mut self, tool: &str) -> StoreResult<()> {
        let cursor = self.exec("INSERT OR IGNORE INTO session_approvals (tool) VALUES (?)", vec![tool.into()])?;
        self.count_written(&cursor);
        Ok(())
    }

    fn session_approved(&self, tool: &str) -> StoreResult<bool> {
        #[derive(Deserialize)]
        struct Row {
            n: f64,
        }
        let row: Row = self
            .exec("SELECT COUNT(*) AS n FROM session_approvals WHERE tool = ?", vec![tool.into()])?
            .one()
            .map_err(err)?;
        Ok(row.n > 0.0)
    }
}
