//! A stream's storage behind a trait: [`MemoryLog`] in memory, [`SqlLog`]
//! on SQL (Durable Object SQLite on workerd, SQLite natively in tests).
//! Synchronous, like the thread's store, so a decision and its writes form
//! one block no other request interleaves with (Durable Object SQLite
//! commits such a block atomically).

use crate::streams::offset::Offset;
use crate::streams::producer::ProducerState;
use crate::storage::db::{Db, Value};
use crate::storage::db::{StoreError, StoreResult};
use crate::storage::migrations::{self, OpenError};
use serde::{Deserialize, Serialize};

/// One appended message: the offset just after it, and its bytes (for a
/// JSON stream, its values' compact JSON each followed by `,`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub offset: Offset,
    pub data: Vec<u8>,
}

/// Who closed a stream, so that producer's retried close is a duplicate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedBy {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// A stream's metadata: one small document, rewritten with every change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// The stream's path (`/v1/stream/...`), which names it.
    pub path: String,
    pub content_type: String,
    pub ttl_seconds: Option<u64>,
    /// `Stream-Expires-At` as the client sent it (it is echoed back), and parsed.
    pub expires_at: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub created_ms: i64,
    /// Last read or write: a TTL counts from here.
    pub accessed_ms: i64,
    pub closed: bool,
    pub closed_by: Option<ClosedBy>,
    pub forked_from: Option<String>,
    pub fork_offset: Option<Offset>,
    pub fork_sub_offset: u64,
    /// Forks made from this stream and not deleted yet.
    pub ref_count: u64,
    /// Deleted (or expired) while forks still read it: 410 until they go.
    pub soft_deleted: bool,
    /// The offset after the last message.
    pub tail: Offset,
    /// The last `Stream-Seq` a writer sent (writer coordination).
    pub writer_seq: Option<String>,
}

pub trait StreamLog {
    fn meta(&self) -> StoreResult<Option<Meta>>;
    fn put_meta(&mut self, meta: &Meta) -> StoreResult<()>;
    /// Appends messages, offsets ascending and above every stored one.
    fn append(&mut self, messages: &[Message]) -> StoreResult<()>;
    /// Messages with `after < offset <= up_to`, ascending, stopping once
    /// `max_bytes` is reached (at least one message when any qualifies).
    fn read(&self, after: Offset, up_to: Offset, max_bytes: usize) -> StoreResult<Vec<Message>>;
    fn producer(&self, id: &str) -> StoreResult<Option<ProducerState>>;
    fn put_producer(&mut self, id: &str, state: &ProducerState) -> StoreResult<()>;
    /// Removes the stream: metadata, messages and producers.
    fn clear(&mut self) -> StoreResult<()>;
}

#[derive(Debug, Default)]
pub struct MemoryLog {
    pub meta: Option<Meta>,
    pub messages: Vec<Message>,
    pub producers: Vec<(String, ProducerState)>,
    /// The next `fail_writes` writes fail.
    pub fail_writes: usize,
}

impl MemoryLog {
    fn write(&mut self) -> StoreResult<()> {
        if self.fail_writes > 0 {
            self.fail_writes -= 1;
            return Err(StoreError("injected fault".into()));
        }
        Ok(())
    }
}

impl StreamLog for MemoryLog {
    fn meta(&self) -> StoreResult<Option<Meta>> {
        Ok(self.meta.clone())
    }

    fn put_meta(&mut self, meta: &Meta) -> StoreResult<()> {
        self.write()?;
        self.meta = Some(meta.clone());
        Ok(())
    }

    fn append(&mut self, messages: &[Message]) -> StoreResult<()> {
        self.write()?;
        for m in messages {
            assert!(self.messages.last().is_none_or(|l| l.offset < m.offset), "offsets must increase");
            self.messages.push(m.clone());
        }
        Ok(())
    }

    fn read(&self, after: Offset, up_to: Offset, max_bytes: usize) -> StoreResult<Vec<Message>> {
        let mut out = Vec::new();
        let mut size = 0;
        for m in self.messages.iter().filter(|m| m.offset > after && m.offset <= up_to) {
            if !out.is_empty() && size + m.data.len() > max_bytes {
                break;
            }
            size += m.data.len();
            out.push(m.clone());
        }
        Ok(out)
    }

    fn producer(&self, id: &str) -> StoreResult<Option<ProducerState>> {
        Ok(self.producers.iter().find(|(p, _)| p == id).map(|(_, s)| s.clone()))
    }

    fn put_producer(&mut self, id: &str, state: &ProducerState) -> StoreResult<()> {
        self.write()?;
        self.producers.retain(|(p, _)| p != id);
        self.producers.push((id.to_owned(), state.clone()));
        Ok(())
    }

    fn clear(&mut self) -> StoreResult<()> {
        self.write()?;
        *self = MemoryLog::default();
        Ok(())
    }
}

/// A stream's log on SQL (`ds_meta`, `ds_messages`, `ds_producers`).
pub struct SqlLog<D: Db> {
    db: D,
}

impl<D: Db> SqlLog<D> {
    /// Opens the log, bringing storage to the current layout first.
    pub fn open(db: D) -> Result<SqlLog<D>, OpenError> {
        migrations::migrate(&db, &migrations::STREAM)?;
        Ok(SqlLog { db })
    }

    /// The `data` of the first row of a one-column query, parsed.
    fn document<T: serde::de::DeserializeOwned>(&self, sql: &str, args: &[Value]) -> StoreResult<Option<T>> {
        let Some(data) = self.db.run(sql, args)?.first().and_then(Value::text) else { return Ok(None) };
        serde_json::from_str(&data).map(Some).map_err(|e| StoreError(e.to_string()))
    }
}

impl<D: Db> StreamLog for SqlLog<D> {
    fn meta(&self) -> StoreResult<Option<Meta>> {
        self.document("SELECT data FROM ds_meta WHERE k = 1", &[])
    }

    fn put_meta(&mut self, meta: &Meta) -> StoreResult<()> {
        let data = serde_json::to_string(meta).expect("meta serialises");
        self.db
            .exec(
                "INSERT INTO ds_meta (k, data) VALUES (1, ?) ON CONFLICT (k) DO UPDATE SET data = excluded.data",
                &[data.into()],
            )
            .map(drop)
    }

    fn append(&mut self, messages: &[Message]) -> StoreResult<()> {
        for m in messages {
            self.db.exec(
                "INSERT INTO ds_messages (hi, lo, data) VALUES (?, ?, ?)",
                &[(m.offset.hi as i64).into(), (m.offset.lo as i64).into(), m.data.clone().into()],
            )?;
        }
        Ok(())
    }

    fn read(&self, after: Offset, up_to: Offset, max_bytes: usize) -> StoreResult<Vec<Message>> {
        let bound = |v: u64| Value::Int(v.min(i64::MAX as u64) as i64);
        let rows = self.db.run(
            "SELECT hi, lo, data FROM ds_messages WHERE (hi, lo) > (?, ?) AND (hi, lo) <= (?, ?) ORDER BY hi, lo",
            &[bound(after.hi), bound(after.lo), bound(up_to.hi), bound(up_to.lo)],
        )?;
        let mut out = Vec::new();
        let mut size = 0;
        for row in rows.rows {
            let mut row = row.into_iter();
            let (hi, lo) = (row.next().map_or(0, |v| v.int()), row.next().map_or(0, |v| v.int()));
            let data = row.next().map(Value::bytes).unwrap_or_default();
            if !out.is_empty() && size + data.len() > max_bytes {
                break;
            }
            size += data.len();
            out.push(Message { offset: Offset::new(hi as u64, lo as u64), data });
        }
        Ok(out)
    }

    fn producer(&self, id: &str) -> StoreResult<Option<ProducerState>> {
        Ok(self.document("SELECT data FROM ds_producers WHERE id = ?", &[id.into()]).ok().flatten())
    }

    fn put_producer(&mut self, id: &str, state: &ProducerState) -> StoreResult<()> {
        let data = serde_json::to_string(state).expect("state serialises");
        self.db
            .exec(
                "INSERT INTO ds_producers (id, data) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data",
                &[id.into(), data.into()],
            )
            .map(drop)
    }

    fn clear(&mut self) -> StoreResult<()> {
        self.db.exec("DELETE FROM ds_messages", &[])?;
        self.db.exec("DELETE FROM ds_producers", &[])?;
        self.db.exec("DELETE FROM ds_meta", &[]).map(drop)
    }
}
