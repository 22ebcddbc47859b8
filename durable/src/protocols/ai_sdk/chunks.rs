//! The AI SDK's UI message chunks as types (`ai`'s `ui-message-chunks.ts`,
//! the ones [`UiMapper`](super::mapping::UiMapper) sends), serialised in one
//! place ([`Chunk::encode`]). The client validates every chunk against a
//! closed schema, so absent fields are left out, never `null`; field order is
//! the order each chunk's fields went out before they were typed, so the
//! stream is byte for byte what clients already read
//! (tests/golden/ai-sdk.txt).

use crate::log::event::payload::ConfirmationRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Chunk {
    /// The stream's first chunk: the message it writes.
    Start {
        message_id: String,
    },
    StartStep,
    FinishStep,
    MessageMetadata {
        message_metadata: Metadata,
    },
    TextStart {
        id: String,
    },
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningDelta {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
        dynamic: bool,
        #[serde(flatten)]
        mcp: Option<Mcp>,
    },
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
        dynamic: bool,
        #[serde(flatten)]
        mcp: Option<Mcp>,
    },
    ToolOutputAvailable {
        tool_call_id: String,
        output: Value,
        dynamic: bool,
    },
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
        dynamic: bool,
    },
    ToolOutputDenied {
        tool_call_id: String,
    },
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    Abort {
        reason: String,
    },
    Error {
        error_text: String,
    },
    Finish {
        finish_reason: FinishReason,
        message_metadata: Metadata,
    },
    /// A sub-agent, at any depth (id: the agent's id).
    DataAgent {
        id: String,
        data: AgentData,
    },
    DataTasks {
        id: &'static str,
        data: TasksData,
    },
    DataTitle {
        id: &'static str,
        data: TitleData,
    },
    /// The agent's status line: transient, the message keeps none.
    DataStatus {
        data: StatusData,
        transient: bool,
    },
    /// A request for a person that is not an approval (id: the request's).
    DataConfirmation {
        id: String,
        data: Box<ConfirmationRequest>,
    },
    /// A send that was queued: transient.
    DataQueued {
        data: Value,
        transient: bool,
    },
    /// The model's context was compacted during the run: a quiet marker
    /// the message keeps (id: the run the summary runs through).
    DataContextCompacted {
        id: String,
        data: Box<crate::log::event::payload::ContextCompacted>,
    },
}

impl Chunk {
    /// The chunk as an SSE event.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"data: ");
        serde_json::to_writer(&mut *out, self).expect("a UI message chunk serialises");
        out.extend_from_slice(b"\n\n");
    }

    /// A `data-*` chunk: its type, its id (if it has one), its data, and
    /// whether the client keeps it (a transient one it does not).
    pub fn data_part(&self) -> Option<(&'static str, Option<&str>, bool)> {
        Some(match self {
            Chunk::DataAgent { id, .. } => ("data-agent", Some(id), false),
            Chunk::DataTasks { id, .. } => ("data-tasks", Some(*id), false),
            Chunk::DataTitle { id, .. } => ("data-title", Some(*id), false),
            Chunk::DataStatus { transient, .. } => ("data-status", None, *transient),
            Chunk::DataConfirmation { id, .. } => ("data-confirmation", Some(id), false),
            Chunk::DataQueued { transient, .. } => ("data-queued", None, *transient),
            Chunk::DataContextCompacted { id, .. } => ("data-context-compacted", Some(id), false),
            Chunk::Start { .. }
            | Chunk::StartStep
            | Chunk::FinishStep
            | Chunk::MessageMetadata { .. }
            | Chunk::TextStart { .. }
            | Chunk::TextDelta { .. }
            | Chunk::TextEnd { .. }
            | Chunk::ReasoningStart { .. }
            | Chunk::ReasoningDelta { .. }
            | Chunk::ReasoningEnd { .. }
            | Chunk::ToolInputStart { .. }
            | Chunk::ToolInputAvailable { .. }
            | Chunk::ToolOutputAvailable { .. }
            | Chunk::ToolOutputError { .. }
            | Chunk::ToolOutputDenied { .. }
            | Chunk::ToolApprovalRequest { .. }
            | Chunk::Abort { .. }
            | Chunk::Error { .. }
            | Chunk::Finish { .. } => return None,
        })
    }
}

/// An MCP tool's call names its server (`toolMetadata.mcpServer`) and its
/// title.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mcp {
    pub tool_metadata: ToolMetadata,
    pub title: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolMetadata {
    pub mcp_server: String,
}

/// A message's metadata: the step's token counts, or nothing (`{}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: Value,
    pub output_tokens: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Other,
    Error,
}

/// What a sub-agent's part holds: who it is, how it is doing, and how it
/// ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentData {
    pub agent_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub role: String,
    pub status: AgentStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default, deserialize_with = "present")]
    pub result: Option<Value>,
}

/// A field that is there is `Some`, `null` too (a moved stream's state
/// gives back what it was).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    Running,
    Completed,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TasksData {
    pub tasks: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TitleData {
    pub title: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusData {
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(chunk: &Chunk) -> String {
        let mut out = Vec::new();
        chunk.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    /// The type first, then the fields in order; an MCP tool's server and
    /// title after them; nothing absent is written.
    #[test]
    fn a_chunk_is_its_type_then_its_fields() {
        let plain = Chunk::ToolInputStart {
            tool_call_id: "c".into(),
            tool_name: "n".into(),
            dynamic: true,
            mcp: None,
        };
        assert_eq!(sse(&plain), "data: {\"type\":\"tool-input-start\",\"toolCallId\":\"c\",\"toolName\":\"n\",\"dynamic\":true}\n\n");
        let mcp = Chunk::ToolInputStart {
            tool_call_id: "c".into(),
            tool_name: "n".into(),
            dynamic: true,
            mcp: Some(Mcp { tool_metadata: ToolMetadata { mcp_server: "s".into() }, title: "s".into() }),
        };
        assert_eq!(
            sse(&mcp),
            "data: {\"type\":\"tool-input-start\",\"toolCallId\":\"c\",\"toolName\":\"n\",\"dynamic\":true,\"toolMetadata\":{\"mcpServer\":\"s\"},\"title\":\"s\"}\n\n"
        );
        let finish = Chunk::Finish { finish_reason: FinishReason::ToolCalls, message_metadata: Metadata::default() };
        assert_eq!(sse(&finish), "data: {\"type\":\"finish\",\"finishReason\":\"tool-calls\",\"messageMetadata\":{}}\n\n");
    }

    #[test]
    fn data_chunks_say_their_part() {
        let status = Chunk::DataStatus { data: StatusData { message: "working".into() }, transient: true };
        assert_eq!(status.data_part(), Some(("data-status", None, true)));
        assert_eq!(sse(&status), "data: {\"type\":\"data-status\",\"data\":{\"message\":\"working\"},\"transient\":true}\n\n");
        assert_eq!(Chunk::StartStep.data_part(), None);
    }
}
