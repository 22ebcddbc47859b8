//! What travels with a request the Worker (or an object) sends an object:
//! one header, [`HEADER`], holding what the sender decided (who calls, and
//! which route, operation or stream the request is), as base64url JSON so
//! any caller id and any route travel intact.
//!
//! Invariant: the Worker sets this header on every request it forwards, over
//! any copy a client sent, and objects believe nothing else a request
//! carries about who is calling or what it asks for. An object's own calls
//! to another object set it the same way. A request without a readable one
//! is no request the object knows (404).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The object a call goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Object {
    /// A thread's object, by thread id (binding `THREAD`).
    Thread(String),
    /// A standalone Durable Stream's object, by its path (binding `STREAM`).
    Stream(String),
    /// An actor's directory, by its name (binding `DIRECTORY`).
    Directory(String),
}

/// The body a call carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    None,
    /// The client's body, as it streams in (the object reads it with the
    /// route's cap).
    Client,
    /// Bytes the Worker holds (a body it read to route the request).
    Bytes(Vec<u8>),
}

/// A request to an object: the client's URL and headers (or, for an
/// object's own call, `path` on the object), with [`HEADER`] set to
/// `context` over any copy a client sent.
#[derive(Clone, Debug)]
pub struct ObjectCall {
    pub object: Object,
    pub method: &'static str,
    pub context: String,
    pub body: Body,
    /// Ask for a subscriber socket (`Upgrade: websocket`, no body).
    pub socket: bool,
    /// The path of an object's own call (a client's keeps its URL).
    pub path: &'static str,
}

/// The header the decision travels in.
pub const HEADER: &str = "x-threadline-context";

/// The header value for `what`.
pub fn encode<T: Serialize>(what: &T) -> String {
    B64.encode(serde_json::to_vec(what).expect("a forwarded context serialises"))
}

/// What a header value says; `None` when it is missing or unreadable.
pub fn decode<T: DeserializeOwned>(value: Option<&str>) -> Option<T> {
    let bytes = B64.decode(value?.trim()).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Caller;

    #[test]
    fn what_is_forwarded_travels_intact() {
        for c in [
            Caller::Nobody,
            Caller::Actor { id: " alice\u{7f}用户".into(), roles: vec!["a,b".into(), "c".into()] },
            Caller::StreamToken { id: "bob".into(), expires_at: 42 },
        ] {
            assert_eq!(decode::<Caller>(Some(&encode(&c))), Some(c));
        }
        assert_eq!(decode::<Caller>(Some("not base64!")), None);
        assert_eq!(decode::<Caller>(None), None);
    }
}
