//! SQL storage as every object class uses it, behind one small trait: Durable
//! Object SQLite in the Worker (the shell's adapter), an in-memory SQLite
//! natively (the tests'). The statements are the core's: the shell only runs
//! them and hands the rows back, so the storage code is tested on the engine
//! the objects run, without the runtime.
//!
//! Durable Object SQLite commits every write made in one synchronous block
//! (no `await` between them) atomically: a sequence of [`Db::run`] calls
//! made without yielding is all-or-nothing, without an explicit transaction.

/// Why storage could not do what it was asked: nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A storage failure is a 503 `storage_unavailable`: what a request asked
/// was not stored (its writes are one synchronous block: all or nothing).
impl From<StoreError> for crate::wire::error::ApiError {
    fn from(err: StoreError) -> crate::wire::error::ApiError {
        crate::wire::error::ApiError::storage(err)
    }
}

/// A value bound to a statement, or read from a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    /// An integer column (a real one truncated; anything else is 0).
    pub fn int(&self) -> i64 {
        match self {
            Value::Int(i) => *i,
            Value::Real(f) => *f as i64,
            _ => 0,
        }
    }

    /// A real column (an integer one widened; anything else is 0).
    pub fn real(&self) -> f64 {
        match self {
            Value::Real(f) => *f,
            Value::Int(i) => *i as f64,
            _ => 0.0,
        }
    }

    /// A text column, or `None` for NULL (a blob is read as UTF-8).
    pub fn text(self) -> Option<String> {
        match self {
            Value::Text(s) => Some(s),
            Value::Blob(b) => String::from_utf8(b).ok(),
            Value::Int(i) => Some(i.to_string()),
            Value::Real(f) => Some(f.to_string()),
            Value::Null => None,
        }
    }

    /// A blob column (a text one as its bytes).
    pub fn bytes(self) -> Vec<u8> {
        match self {
            Value::Blob(b) => b,
            Value::Text(s) => s.into_bytes(),
            _ => Vec::new(),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::Blob(b)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// What a statement gave back.
#[derive(Debug, Default)]
pub struct Rows {
    pub rows: Vec<Vec<Value>>,
    /// Rows it wrote (SQLite's count: the billing figure).
    pub written: u64,
}

impl Rows {
    /// The first column of the first row.
    pub fn first(mut self) -> Option<Value> {
        self.rows.first_mut().and_then(|r| (!r.is_empty()).then(|| r.swap_remove(0)))
    }
}

/// Runs SQL.
pub trait Db {
    /// Runs one statement with `args` bound to its `?`s, to completion.
    fn run(&self, sql: &str, args: &[Value]) -> StoreResult<Rows>;

    /// Runs a statement for its effect only.
    fn exec(&self, sql: &str, args: &[Value]) -> StoreResult<u64> {
        self.run(sql, args).map(|r| r.written)
    }

    /// The column names of `table` (empty when it does not exist). Table
    /// names come from the core's migrations, never from a request.
    fn columns(&self, table: &str) -> StoreResult<Vec<String>> {
        let rows = self.run(&format!("PRAGMA table_info({table})"), &[])?;
        Ok(rows
            .rows
            .into_iter()
            .filter_map(|mut r| (r.len() > 1).then(|| r.swap_remove(1)).and_then(Value::text))
            .collect())
    }
}

/// A storage failure, said once for every statement.
pub fn failed(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}
