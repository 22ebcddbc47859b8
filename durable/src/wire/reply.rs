//! A decided answer: status, headers and body, ready for any HTTP layer.
//! The core answers every request with one (or with a stream plan); the
//! shell only copies it into its runtime's response type.

use crate::wire::error::ApiError;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Vec::new() }
    }

    /// An answer with these headers and no body yet.
    pub fn with_headers(status: u16, headers: &[(&'static str, &'static str)]) -> Reply {
        let mut r = Reply::new(status);
        for (k, v) in headers {
            r.set(k, *v);
        }
        r
    }

    /// A refusal with a short `text/plain` sentence, as the Durable Streams
    /// reference server and its conformance suite expect.
    pub fn text(status: u16, message: &str) -> Reply {
        Reply::new(status).header("content-type", "text/plain").body(message.as_bytes().to_vec())
    }

    /// A JSON answer; never cached (every answer describes a thread that
    /// keeps changing).
    pub fn json<T: serde::Serialize + ?Sized>(status: u16, body: &T) -> Reply {
        Reply::json_bytes(status, serde_json::to_vec(body).expect("an answer's body serialises"))
    }

    /// A JSON answer already serialised (another object's, passed on).
    pub fn json_bytes(status: u16, body: Vec<u8>) -> Reply {
        Reply::new(status)
            .header("content-type", "application/json; charset=utf-8")
            .header("cache-control", "no-store")
            .body(body)
    }

    /// A refusal: the error's JSON, with `Allow` on a 405 and `Retry-After`
    /// when it says when to retry.
    pub fn error(e: &ApiError) -> Reply {
        let mut r = Reply::json(e.status, &e.body());
        if let Some(allow) = e.allow() {
            r.set("allow", allow);
        }
        if let Some(secs) = e.retry_after() {
            r.set("retry-after", secs.to_string());
        }
        r
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.set(name, value);
        self
    }

    pub fn set(&mut self, name: &'static str, value: impl Into<String>) {
        let value = value.into();
        match self.headers.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.headers.push((name, value)),
        }
    }

    pub fn body(mut self, body: Vec<u8>) -> Reply {
        self.body = body;
        self
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Reply {
        Reply::error(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_headers() {
        let r = Reply::error(&ApiError::method_not_allowed("/x", "GET"));
        assert_eq!((r.status, r.get("allow")), (405, Some("GET")));
        let r = Reply::error(&ApiError::too_many_subscribers(3));
        assert_eq!((r.status, r.get("retry-after")), (429, Some("5")));
        assert_eq!(r.get("cache-control"), Some("no-store"));
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["error"]["code"], "too_many_subscribers");
    }
}
