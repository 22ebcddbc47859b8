//! The thread's queue as agora's client reads it (`ChatQueueState`, agora's
//! `spi/chat-queue.ts`): `{items, paused}`, each item
//! `{id, content, attachments?, agentName?, model?, createdAt, updatedAt}`
//! and `paused` either `null` or `{reason, at}`. The 202 of a queued send,
//! the thread detail's `queue`, every `queue` frame and the queue routes'
//! answers all use it, so a client holds one shape.
//!
//! Built from the queue's stored JSON (the `queue-updated` payload is the
//! same document), so a frame rebuilt from the log reads as it did live.
//! Each item also says the `runId` it will start (agora's is the message
//! id too; an extension no agora reader collides with).

use crate::wire::time::rfc3339;
use crate::log::queued::Queue;
use serde_json::{json, Map, Value};

/// agora's view of a stored queue document.
pub fn view(stored: &Value) -> Value {
    let items: Vec<Value> = stored["items"].as_array().map(|items| items.iter().map(item).collect()).unwrap_or_default();
    let paused = if stored["paused"] == true {
        // A person's pause has no reason of its own: `paused`.
        let mut p = json!({ "reason": stored["pausedReason"].as_str().unwrap_or("paused") });
        if let Some(at) = stored["pausedAt"].as_i64() {
            p["at"] = rfc3339(at).into();
        }
        p
    } else {
        Value::Null
    };
    json!({ "items": items, "paused": paused })
}

/// [`view`] of the thread's queue.
pub fn of(queue: &Queue) -> Value {
    view(&serde_json::to_value(queue).unwrap_or_default())
}

fn item(stored: &Value) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), stored["messageId"].clone());
    m.insert("content".into(), stored["message"].clone());
    if let Some(files) = stored["attachments"].as_array().filter(|a| !a.is_empty()) {
        let files = files
            .iter()
            .map(|f| {
                let mut a = json!({ "contentType": f["mediaType"] });
                if let Some(id) = f.get("fileId") {
                    a["mediaId"] = id.clone();
                }
                for k in ["name", "url"] {
                    if let Some(v) = f.get(k) {
                        a[k] = v.clone();
                    }
                }
                a
            })
            .collect();
        m.insert("attachments".into(), Value::Array(files));
    }
    if let Some(agent) = stored.get("agent") {
        m.insert("agentName".into(), agent.clone());
    }
    if let Some(model) = stored.get("model") {
        m.insert("model".into(), model.clone());
    }
    let queued = stored["queuedAt"].as_i64().unwrap_or_default();
    m.insert("createdAt".into(), rfc3339(queued).into());
    m.insert("updatedAt".into(), rfc3339(stored["updatedAt"].as_i64().unwrap_or(queued)).into());
    m.insert("runId".into(), stored["runId"].clone());
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_and_pause_in_agoras_words() {
        let stored = json!({
            "items": [{ "messageId": "t.m1", "runId": "t.m1", "message": "next", "queuedAt": 0, "agent": "writer",
                        "model": "m", "actor": "u1", "updatedAt": 1000,
                        "attachments": [{ "fileId": "f1", "mediaType": "image/png", "size": 3, "sha256": "x", "name": "a.png" }] }],
            "paused": true, "pausedReason": "quota_exceeded", "pausedAt": 2000,
        });
        assert_eq!(
            view(&stored),
            json!({
                "items": [{ "id": "t.m1", "content": "next", "agentName": "writer", "model": "m", "runId": "t.m1",
                            "createdAt": "1970-01-01T00:00:00.000Z", "updatedAt": "1970-01-01T00:00:01.000Z",
                            "attachments": [{ "mediaId": "f1", "contentType": "image/png", "name": "a.png" }] }],
                "paused": { "reason": "quota_exceeded", "at": "1970-01-01T00:00:02.000Z" },
            })
        );
        // Running, and a person's pause (no reason, an older document's no time).
        assert_eq!(view(&json!({ "items": [], "paused": false })), json!({ "items": [], "paused": null }));
        assert_eq!(view(&json!({ "items": [], "paused": true }))["paused"], json!({ "reason": "paused" }));
    }
}
