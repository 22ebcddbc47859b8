//! AG-UI's events as types (`@ag-ui/core` 1.0's event schemas, the ones
//! [`AguiMapper`](super::mapping::AguiMapper) sends), serialised in one place
//! ([`Frame::encode`]). Field order is the order each event's fields went out
//! before they were typed, so the stream is byte for byte what clients
//! already read (tests/golden/ag-ui.txt).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One AG-UI event, and the sub-agent whose work it is: a sub-agent's
/// events carry `subagentRunId` after their own fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Frame {
    #[serde(flatten)]
    pub event: AguiEvent,
    #[serde(rename = "subagentRunId", skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

impl From<AguiEvent> for Frame {
    fn from(event: AguiEvent) -> Frame {
        Frame { event, subagent: None }
    }
}

impl Frame {
    /// The event as SSE: `id: <n>` when it is numbered, then its JSON.
    pub fn encode(&self, id: Option<u64>, out: &mut Vec<u8>) {
        if let Some(id) = id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        serde_json::to_writer(&mut *out, self).expect("an AG-UI event serialises");
        out.extend_from_slice(b"\n\n");
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
pub enum AguiEvent {
    RunStarted {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        input: Option<RunInput>,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<RunOutcome>,
    },
    RunError {
        message: String,
        code: String,
    },
    StepStarted {
        step_name: String,
    },
    StepFinished {
        step_name: String,
    },
    TextMessageStart {
        message_id: String,
        role: Role,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    TextMessageEnd {
        message_id: String,
    },
    ReasoningStart {
        message_id: String,
    },
    ReasoningMessageStart {
        message_id: String,
        role: Role,
    },
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    ReasoningMessageEnd {
        message_id: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<ToolCallMeta>,
    },
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: Role,
    },
    SubagentStarted {
        subagent_run_id: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
    },
    SubagentFinished {
        subagent_run_id: String,
        outcome: SubagentOutcome,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    SubagentError {
        subagent_run_id: String,
        message: String,
    },
    StateSnapshot {
        snapshot: Snapshot,
    },
    Custom {
        name: CustomName,
        value: CustomValue,
    },
}

/// Who a message is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    Reasoning,
    Tool,
}

/// What a run was started with: the thread's new user message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInput {
    pub thread_id: String,
    pub run_id: String,
    pub messages: Vec<UserMessage>,
    pub tools: [Value; 0],
    pub context: [Value; 0],
}

/// A user message as `RUN_STARTED`'s input carries it: its text, or its
/// text and media parts ([`super::mapping::user_content`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UserMessage {
    pub id: String,
    pub role: Role,
    pub content: Value,
}

/// How a run's stream ended, when not plainly.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum RunOutcome {
    /// Only the client's own tools wait: their results continue the run.
    Success { pending_tool_call_ids: Vec<String> },
    /// Requests wait for a person.
    Interrupt { interrupts: Vec<Interrupt> },
    Cancelled,
}

/// A request waiting for a person, as `RUN_FINISHED`'s interrupt outcome
/// lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    pub id: String,
    pub reason: InterruptReason,
    pub message: String,
    pub response_schema: Value,
    pub metadata: InterruptMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptReason {
    ToolApproval,
    InputRequired,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterruptMeta {
    pub input_type: String,
    pub tool_name: String,
    pub args: Value,
}

/// An MCP tool's call names its server.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallMeta {
    pub mcp_server: String,
}

/// How a sub-agent ended: done, or going on after its run (a background
/// one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SubagentOutcome {
    Success,
    Suspended,
}

/// The run's shared state: its task list.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Snapshot {
    pub tasks: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CustomName {
    Status,
    Title,
}

/// A `CUSTOM` event's value: the agent's status line, or the thread's title.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum CustomValue {
    Status { message: String },
    Title { title: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(frame: &Frame) -> String {
        let mut out = Vec::new();
        frame.encode(None, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// The type first, the event's fields in their order, the sub-agent last.
    #[test]
    fn an_event_is_its_type_then_its_fields_then_its_sub_agent() {
        let e = Frame {
            event: AguiEvent::ToolCallStart {
                tool_call_id: "c".into(),
                tool_call_name: "n".into(),
                parent_message_id: Some("m".into()),
                metadata: Some(ToolCallMeta { mcp_server: "s".into() }),
            },
            subagent: Some("sub".into()),
        };
        assert_eq!(
            json(&e),
            "data: {\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"c\",\"toolCallName\":\"n\",\"parentMessageId\":\"m\",\"metadata\":{\"mcpServer\":\"s\"},\"subagentRunId\":\"sub\"}\n\n"
        );
        let mut numbered = Vec::new();
        Frame::from(AguiEvent::SubagentFinished {
            subagent_run_id: "sub".into(),
            outcome: SubagentOutcome::Suspended,
            result: None,
        })
        .encode(Some(7), &mut numbered);
        assert_eq!(
            String::from_utf8(numbered).unwrap(),
            "id: 7\ndata: {\"type\":\"SUBAGENT_FINISHED\",\"subagentRunId\":\"sub\",\"outcome\":{\"type\":\"suspended\"}}\n\n"
        );
    }

    #[test]
    fn outcomes_are_tagged_by_type() {
        let cancelled = Frame::from(AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            outcome: Some(RunOutcome::Cancelled),
        });
        assert!(json(&cancelled).contains("\"outcome\":{\"type\":\"cancelled\"}"));
        let waiting = RunOutcome::Success { pending_tool_call_ids: vec!["c".into()] };
        assert_eq!(serde_json::to_string(&waiting).unwrap(), "{\"type\":\"success\",\"pendingToolCallIds\":[\"c\"]}");
        let custom = Frame::from(AguiEvent::Custom {
            name: CustomName::Status,
            value: CustomValue::Status { message: "working".into() },
        });
        assert_eq!(json(&custom), "data: {\"type\":\"CUSTOM\",\"name\":\"status\",\"value\":{\"message\":\"working\"}}\n\n");
    }
}
