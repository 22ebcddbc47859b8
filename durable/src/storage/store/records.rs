//! The requests that wait for a person ([`Confirmation`]), as the thread
//! stores them. Stored data outlives the code: a change to this shape is a
//! change to a stored shape, with its migration (`schema`). The rules of a
//! request's life are the thread's (`thread::confirmations`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The input type of a request a client's own tool waits on.
pub const CLIENT_TOOL: &str = "client-tool";

/// Where a confirmation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmState {
    Pending,
    Approved,
    Denied,
    Expired,
    Cancelled,
}

impl ConfirmState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmState::Pending => "pending",
            ConfirmState::Approved => "approved",
            ConfirmState::Denied => "denied",
            ConfirmState::Expired => "expired",
            ConfirmState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> ConfirmState {
        match s {
            "approved" => ConfirmState::Approved,
            "denied" => ConfirmState::Denied,
            "expired" => ConfirmState::Expired,
            "cancelled" => ConfirmState::Cancelled,
            _ => ConfirmState::Pending,
        }
    }
}

/// One confirmation a thread holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    pub request_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    /// `approval | text | questions | plan-review`
    pub input_type: String,
    pub state: ConfirmState,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    /// The role a decider must hold, from the approval policy.
    pub approver: Option<String>,
    /// The decision as given (`{approved, userInput?, scope?, answers?}`).
    pub decision: Option<Value>,
    /// The id the external agent chose, sent back in its webhook callback.
    pub agent_request_id: Option<String>,
    /// Who decided it (storage v4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The surface the decision came through (agora's `via`, `web` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_via: Option<String>,
}

/// Where a file of the thread stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileState {
    /// Checked and reserved for a send or an upload: its bytes are stored
    /// (or being stored), and no message refers to it yet. Removed after the
    /// grace period unless a message comes to.
    Reserved,
    /// A message refers to it: kept as long as the thread.
    Attached,
    /// Being removed from the bucket (its grace period ran out).
    Deleting,
}

impl FileState {
    pub fn as_str(self) -> &'static str {
        match self {
            FileState::Reserved => "reserved",
            FileState::Attached => "attached",
            FileState::Deleting => "deleting",
        }
    }

    pub fn parse(s: &str) -> FileState {
        match s {
            "attached" => FileState::Attached,
            "deleting" => FileState::Deleting,
            _ => FileState::Reserved,
        }
    }
}

/// One file of the thread (table `files`, storage v6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRow {
    pub file: crate::files::FileRef,
    pub state: FileState,
    /// When it was last reserved (ms): its grace period starts there.
    pub reserved_at: i64,
}
