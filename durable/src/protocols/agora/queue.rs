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

use crate::files::Attachment;
use crate::log::queued::{Queue, QueueItem};
use crate::wire::time::rfc3339;
use serde::Serialize;
use serde_json::Value;

/// agora's `ChatQueueState`.
#[derive(Debug, Serialize)]
pub struct View {
    pub items: Vec<Item>,
    /// `null` while the queue runs.
    pub paused: Option<Paused>,
}

#[derive(Debug, Serialize)]
pub struct Paused {
    /// Why the queue paused: a person's pause has no reason of its own,
    /// `paused`.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// A waiting message as agora's client reads it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub id: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<File>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub run_id: String,
}

/// A waiting message's file: a stored one by its id, or a URL.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub content_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// agora's view of the thread's queue.
pub fn view(queue: &Queue) -> View {
    let paused = queue.paused.then(|| Paused {
        reason: queue.paused_reason.clone().unwrap_or_else(|| "paused".to_owned()),
        at: queue.paused_at.map(rfc3339),
    });
    View { items: queue.items.iter().map(item).collect(), paused }
}

/// [`view`] as JSON.
pub fn of(queue: &Queue) -> Value {
    serde_json::to_value(view(queue)).expect("a queue view serialises")
}

/// A queue route's answer that started a run: the queue as it is now, and
/// the run that started (`runId`: the head on resume, or the message run
/// now), or the run an interrupting message cancelled (`interrupting`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    #[serde(flatten)]
    pub view: View,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupting: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

fn item(stored: &QueueItem) -> Item {
    let files: Vec<File> = stored
        .turn
        .attachments
        .iter()
        .map(|a| match a {
            Attachment::File(f) => File {
                content_type: f.media_type.clone(),
                media_id: Some(f.file_id.clone()),
                name: f.name.clone(),
                url: None,
            },
            Attachment::Url { url, media_type, name } => {
                File { content_type: media_type.clone(), media_id: None, name: name.clone(), url: Some(url.clone()) }
            }
        })
        .collect();
    Item {
        id: stored.message_id.clone(),
        content: stored.message.clone(),
        attachments: (!files.is_empty()).then_some(files),
        agent_name: stored.turn.agent.clone(),
        model: stored.model.clone(),
        created_at: rfc3339(stored.queued_at),
        updated_at: rfc3339(stored.updated_at.unwrap_or(stored.queued_at)),
        run_id: stored.run_id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_and_pause_in_agoras_words() {
        let stored: Queue = serde_json::from_value(json!({
            "items": [{ "messageId": "t.m1", "runId": "t.m1", "message": "next", "queuedAt": 0, "agent": "writer",
                        "model": "m", "actor": "u1", "updatedAt": 1000,
                        "attachments": [{ "fileId": "f1", "mediaType": "image/png", "size": 3, "sha256": "x", "name": "a.png" }] }],
            "paused": true, "pausedReason": "quota_exceeded", "pausedAt": 2000,
        }))
        .unwrap();
        assert_eq!(
            of(&stored),
            json!({
                "items": [{ "id": "t.m1", "content": "next", "agentName": "writer", "model": "m", "runId": "t.m1",
                            "createdAt": "1970-01-01T00:00:00.000Z", "updatedAt": "1970-01-01T00:00:01.000Z",
                            "attachments": [{ "mediaId": "f1", "contentType": "image/png", "name": "a.png" }] }],
                "paused": { "reason": "quota_exceeded", "at": "1970-01-01T00:00:02.000Z" },
            })
        );
        // Running, and a person's pause (no reason, an older document's no time).
        let running = Queue::default();
        assert_eq!(of(&running).to_string(), r#"{"items":[],"paused":null}"#);
        let paused = Queue { paused: true, ..Queue::default() };
        assert_eq!(of(&paused)["paused"], json!({ "reason": "paused" }));
    }
}
