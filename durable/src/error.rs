//! Errors that reach a client: an HTTP status, a stable machine-readable code
//! and a sentence for people. Serialised as `{"error":{"code","message",...}}`.

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Extra fields of the error object, e.g. `runId` on `run_active`.
    pub details: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), details: Map::new() }
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(404, code, message)
    }

    /// A storage failure: nothing of the request was stored.
    pub fn storage(err: impl std::fmt::Display) -> ApiError {
        ApiError::new(503, "storage_unavailable", format!("storage failed, nothing was stored: {err}"))
    }

    pub fn body(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), self.code.into());
        obj.insert("message".into(), self.message.clone().into());
        for (k, v) in &self.details {
            obj.insert(k.clone(), v.clone());
        }
        json!({ "error": obj })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}
