//! Durable Object SQLite as the core's [`Db`]: every object class's storage
//! (the thread's `SqlStore`, a stream's `SqlLog`, a directory) is the core's
//! SQL, and this adapter only runs it and hands the rows back.
//!
//! Durable Object SQLite is synchronous and commits every write made in one
//! synchronous block (no `await` between them) atomically.

use threadline_durable::storage::store::{StoreError, StoreResult};
use threadline_durable::{Db, Rows, Value};
use worker::{SqlStorage, SqlStorageValue};

/// Durable Object SQLite as the core's [`Db`]: statements run to
/// completion, rows handed back as values.
pub struct DoSql(pub SqlStorage);

impl Db for DoSql {
    fn run(&self, sql: &str, args: &[Value]) -> StoreResult<Rows> {
        let args: Vec<SqlStorageValue> = args
            .iter()
            .map(|a| match a {
                Value::Null => SqlStorageValue::Null,
                Value::Int(i) => SqlStorageValue::Integer(*i),
                Value::Real(f) => SqlStorageValue::Float(*f),
                Value::Text(s) => SqlStorageValue::String(s.clone()),
                Value::Blob(b) => SqlStorageValue::Blob(b.clone()),
            })
            .collect();
        let cursor = self.0.exec(sql, args).map_err(err)?;
        let mut rows = Vec::new();
        for row in cursor.raw() {
            let row = row.map_err(err)?;
            rows.push(
                row.into_iter()
                    .map(|v| match v {
                        SqlStorageValue::Null => Value::Null,
                        SqlStorageValue::Integer(i) => Value::Int(i),
                        SqlStorageValue::Float(f) => Value::Real(f),
                        SqlStorageValue::String(s) => Value::Text(s),
                        SqlStorageValue::Blob(b) => Value::Blob(b),
                        SqlStorageValue::Boolean(b) => Value::Int(b as i64),
                    })
                    .collect(),
            );
        }
        Ok(Rows { rows, written: cursor.rows_written() as u64 })
    }
}

fn err(e: worker::Error) -> StoreError {
    StoreError(e.to_string())
}
