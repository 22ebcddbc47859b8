//! What a user message asks of the turn that answers it: stored with the
//! message on its run record and on its queue item while it waits. Below
//! the queue, the store and the log, which all carry it. Stored data
//! outlives the code: a change here is a change to a stored shape, with
//! its migration (`schema`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a user message asked of the turn that answers it, stored with the
/// message (on its run, and on its queue item while it waits): the agent it
/// runs as, the page the person was on, a structured answer, when it was
/// sent, and who sent it (whose budget the turn spends).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_context: Option<Value>,
    /// `{schema, name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The files and URLs the message carries (storage v6): references,
    /// never bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::files::Attachment>,
    /// The `traceparent` of the request that sent it (storage v7, with
    /// traces on): the run's spans hang under it ([`crate::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl Turn {
    pub fn is_empty(&self) -> bool {
        *self == Turn::default()
    }
}
