//! Flue's send body, checked apart from I/O: `@flue/sdk` 2's
//! `DeliveredMessage` (`{kind: "user", body, attachments?}` with the
//! reserved `uid` and `idempotencyKey` beside it) and 1.x's `{message}`.

use crate::wire::error::ApiError;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Longest `idempotencyKey` Flue accepts.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

/// A message to a Flue conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct FlueSend {
    pub text: String,
    /// 2.x's `attachments` (`{type: "image", data, mimeType, filename?}`),
    /// read by the thread's file intake like any send's.
    pub attachments: Vec<Value>,
    /// `uid`: absent (any incarnation), `null` (create only) or the
    /// incarnation the sender means.
    pub uid: Option<Option<String>>,
    /// The client message id an `idempotencyKey` stands for: a retry with
    /// the same key is the same message (its receipt again, `deduplicated`).
    pub message_id: Option<String>,
}

impl FlueSend {
    pub fn parse(body: &Value) -> Result<FlueSend, ApiError> {
        let Some(o) = body.as_object() else {
            return Err(ApiError::invalid_body("a Flue send is a JSON object: {kind: \"user\", body}"));
        };
        let text = match (o.get("kind"), o.get("message")) {
            (Some(Value::String(k)), _) if k == "user" => o.get("body"),
            (Some(Value::String(k)), _) if k == "signal" => {
                return Err(ApiError::invalid_body("signals are not served here: send {kind: \"user\", body}"))
            }
            (Some(_), _) => return Err(ApiError::invalid_body("`kind` is \"user\"")),
            (None, Some(m)) => Some(m),
            (None, None) => None,
        };
        let text = match text {
            Some(Value::String(t)) => t.clone(),
            _ => return Err(ApiError::message_required("`body` (the message) must be a string")),
        };
        if o.contains_key("images") {
            return Err(ApiError::invalid_body("send files as `attachments` ({type: \"image\", data, mimeType, filename?})"));
        }
        if o.get("initialData").is_some_and(|v| !v.is_null()) {
            return Err(ApiError::invalid_body("`initialData` is not served: a conversation starts with its first message"));
        }
        let attachments = match o.get("attachments") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => return Err(ApiError::invalid_body("`attachments` is an array")),
        };
        let uid = match o.get("uid") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(u)) => Some(Some(u.clone())),
            Some(_) => return Err(ApiError::invalid_body("`uid` is a string or null")),
        };
        let message_id = match o.get("idempotencyKey") {
            None | Some(Value::Null) => None,
            Some(Value::String(k)) if !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY => Some(key_id(k)),
            Some(_) => {
                return Err(ApiError::invalid_body(format!(
                    "`idempotencyKey` is a string of 1 to {MAX_IDEMPOTENCY_KEY} characters"
                )))
            }
        };
        Ok(FlueSend { text, attachments, uid, message_id })
    }
}

/// A client message id for an idempotency key: any characters in, an id
/// the thread accepts out, the same for the same key.
fn key_id(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("fk{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_releases_bodies() {
        let two = FlueSend::parse(&json!({"kind": "user", "body": "hi"})).unwrap();
        assert_eq!((two.text.as_str(), two.uid, two.message_id), ("hi", None, None));
        let one = FlueSend::parse(&json!({"message": "hello"})).unwrap();
        assert_eq!(one.text, "hello");
        let full = FlueSend::parse(&json!({"kind": "user", "body": "x", "uid": null, "idempotencyKey": "k/1 ü",
            "attachments": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]}))
        .unwrap();
        assert_eq!(full.uid, Some(None));
        assert_eq!(full.attachments.len(), 1);
        let id = full.message_id.unwrap();
        assert!(crate::wire::ids::id(&id).is_ok(), "{id}");
        assert_eq!(FlueSend::parse(&json!({"kind": "user", "body": "y", "idempotencyKey": "k/1 ü"})).unwrap().message_id.unwrap(), id);
    }

    #[test]
    fn refusals() {
        for (body, code) in [
            (json!([]), "invalid_body"),
            (json!({"kind": "signal", "type": "x", "body": "b"}), "invalid_body"),
            (json!({"kind": 3, "body": "b"}), "invalid_body"),
            (json!({"kind": "user"}), "message_required"),
            (json!({"kind": "user", "body": 5}), "message_required"),
            (json!({}), "message_required"),
            (json!({"message": "m", "images": []}), "invalid_body"),
            (json!({"kind": "user", "body": "b", "initialData": {}}), "invalid_body"),
            (json!({"kind": "user", "body": "b", "attachments": {}}), "invalid_body"),
            (json!({"kind": "user", "body": "b", "uid": 1}), "invalid_body"),
            (json!({"kind": "user", "body": "b", "idempotencyKey": ""}), "invalid_body"),
            (json!({"kind": "user", "body": "b", "idempotencyKey": "k".repeat(257)}), "invalid_body"),
        ] {
            assert_eq!(FlueSend::parse(&body).unwrap_err().code, code, "{body}");
        }
    }
}
