//! Durable Object SQLite as the core's [`Db`]: every object class's storage
//! (the thread's `SqlStore`, a stream's `SqlLog`, a directory) is the core's
//! SQL, and this adapter only runs it and hands the rows back.
//!
//! Durable Object SQLite is synchronous and commits every write made in one
//! synchronous block (no `await` between them) atomically.

use threadline_durable::storage::store::{StoreError, StoreResult};
use threadline_durable::{Db, Rows, Value};
use wasm_bindgen::JsValue;
use worker::{SqlStorage, SqlStorageValue};

/// Durable Object SQLite as the core's [`Db`]: statements run to
/// completion, rows handed back as values.
pub struct DoSql(pub SqlStorage);

impl Db for DoSql {
    fn run(&self, sql: &str, args: &[Value]) -> StoreResult<Rows> {
        // Each argument crosses to JavaScript once, copied straight from
        // the core's value (a blob as the bytes of an ArrayBuffer).
        let args: Vec<JsValue> = args
            .iter()
            .map(|a| match a {
                Value::Null => JsValue::NULL,
                Value::Int(i) => SqlStorageValue::Integer(*i).into(),
                Value::Real(f) => JsValue::from(*f),
                Value::Text(s) => JsValue::from_str(s),
                Value::Blob(b) => js_sys::Uint8Array::from(b.as_slice()).buffer().into(),
            })
            .collect();
        let cursor = self.0.exec_raw(sql, args).map_err(err)?;
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
