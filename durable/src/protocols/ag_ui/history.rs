//! The history as AG-UI messages (`GET /ag-ui/threads/:id/messages`): the
//! messages an `HttpAgent` holds, by a port of `@ag-ui/client`'s
//! `defaultApplyEvents` ([`AguiMessages`]) applied to the same numbered
//! events the streams send ([`AguiMapper`]), so the history route shows what
//! a client that read the stream holds.

use super::mapping::AguiMapper;
use crate::wire::error::ApiError;
use crate::log::event::Payload;
use crate::storage::store::{RunState, Store};
use crate::thread::conversation::TurnRead;
use crate::thread::tree::Branch;
use crate::thread::{Sink, Thread};
use super::frames::{AguiEvent as A, Frame, Role, RunInput, UserMessage};
use serde::ser::SerializeMap;
use serde::Serialize;
use serde_json::Value;

/// The conversation as the messages an `HttpAgent` holds (a page of runs,
/// oldest first). A running run's answer is left out: its stream brings it.
/// Files are media parts with their URL on `origin`.
pub fn messages<S: Store, K: Sink>(t: &Thread<S, K>, limit: usize, page: usize, origin: &str) -> Result<Value, ApiError> {
    let conversation = t.conversation();
    let (turns, _) = conversation.turns(limit, page)?;
    let mut fold = AguiMessages::default();
    for turn in turns {
        let before = fold.messages.len();
        // A fork's shared turn is its source's: its files are read there.
        fold_turn(t, &mut fold, &turn, turn.thread(conversation.thread_id()), origin)?;
        // Where the turn's message and answer stand among their versions.
        let added = &mut fold.messages[before..];
        if let Some(m) = added.iter_mut().find(|m| m.role == Role::User) {
            m.branch = turn.branches.message.clone();
        }
        if let Some(m) = added.iter_mut().find(|m| m.role == Role::Assistant) {
            m.branch = turn.branches.answer.clone();
        }
        if let Some(m) = added.iter_mut().rev().find(|m| m.role == Role::Assistant) {
            m.context_compacted = turn.compacted();
        }
    }
    Ok(serde_json::to_value(&fold.messages).expect("messages serialise"))
}

/// Folds one turn into the messages an `HttpAgent` holds.
fn fold_turn<S: Store, K: Sink>(
    t: &Thread<S, K>,
    fold: &mut AguiMessages,
    turn: &TurnRead,
    home: &str,
    origin: &str,
) -> Result<(), ApiError> {
    let run = &turn.run;
    let running = run.state == RunState::Running;
    let waiting = t.runs().active_run().is_some_and(|a| a.run_id == run.run_id) && t.runs().is_suspended();
    if running && !waiting {
        let content = super::mapping::user_content(&run.message, &run.turn.attachments, origin, home);
        let (thread_id, run_id) = (t.conversation().thread_id().to_owned(), run.run_id.clone());
        let messages = vec![UserMessage { id: run.message_id.clone(), role: Role::User, content }];
        let input = RunInput { thread_id: thread_id.clone(), run_id: run_id.clone(), messages, tools: [], context: [] };
        fold.apply(&A::RunStarted { thread_id, run_id, input: Some(input) }.into());
        return Ok(());
    }
    let events = &turn.events;
    // The client tool results the client sent, by call: the history
    // shows them under the client's message ids.
    let mut client_results = std::collections::HashMap::new();
    let outcomes = events.iter().filter_map(|e| {
        if let Payload::ToolResult(r) = &e.payload {
            Some(r.tool_call_id.as_str())
        } else if let Payload::ToolError(e) = &e.payload {
            Some(e.tool_call_id.as_str())
        } else {
            None
        }
    });
    for call in outcomes {
        if let Some(c) = t.requests().for_call(call, Some(&run.run_id))? {
            if let Some(m) = c.client_message_id() {
                client_results.insert(call.to_owned(), m.to_owned());
            }
        }
    }
    let mut mapper = AguiMapper::new(home, &run.run_id, &run.agent_id)
        .with_client_results(client_results)
        .with_origin(origin);
    for ev in events {
        for (_, e) in mapper.map(ev) {
            fold.apply(&e);
        }
    }
    Ok(())
}

/// The messages an `HttpAgent` holds after reading a run's events (the
/// client's `defaultApplyEvents`, for the events [`AguiMapper`] sends).
#[derive(Debug, Default, Clone)]
pub struct AguiMessages {
    pub messages: Vec<Message>,
}

/// A message an `HttpAgent` holds (`@ag-ui/core`'s `Message`).
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub role: Role,
    /// A user's text or parts; an assistant's, a reasoning's or a tool's
    /// text. An assistant message made for tool calls has none.
    pub content: Option<Value>,
    /// A tool message's call.
    pub tool_call_id: Option<String>,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub subagent_run_id: Option<String>,
    /// Extension: where a user message stands among its edits, or a run's
    /// first assistant message among the answers to its message, when it
    /// has versions (last of its keys).
    pub branch: Option<Branch>,
    /// Extension: on a run's last assistant message, the compaction of the
    /// model's context made during it (a quiet marker: the message is whole).
    pub context_compacted: Option<crate::log::event::payload::ContextCompacted>,
    /// The message was made to hold tool calls, rather than given them after
    /// its text: where `toolCalls` stands among its keys.
    made_for_calls: bool,
}

impl Message {
    fn new(id: &str, role: Role, content: Option<Value>, subagent_run_id: Option<String>) -> Message {
        Message {
            id: id.to_owned(),
            role,
            content,
            tool_call_id: None,
            tool_calls: None,
            subagent_run_id,
            branch: None,
            context_compacted: None,
            made_for_calls: false,
        }
    }
}

/// Keys in the order the client's objects get them: `id`, then a tool
/// message's `toolCallId`, the role and content, a holder's `toolCalls`, the
/// sub-agent, and last the calls added to a text message.
impl Serialize for Message {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &self.id)?;
        if let Some(call) = &self.tool_call_id {
            m.serialize_entry("toolCallId", call)?;
        }
        m.serialize_entry("role", &self.role)?;
        if let Some(content) = &self.content {
            m.serialize_entry("content", content)?;
        }
        let calls = self.tool_calls.as_ref();
        if let Some(calls) = calls.filter(|_| self.made_for_calls) {
            m.serialize_entry("toolCalls", calls)?;
        }
        if let Some(sub) = &self.subagent_run_id {
            m.serialize_entry("subagentRunId", sub)?;
        }
        if let Some(calls) = calls.filter(|_| !self.made_for_calls) {
            m.serialize_entry("toolCalls", calls)?;
        }
        if let Some(branch) = &self.branch {
            m.serialize_entry("branch", branch)?;
        }
        if let Some(c) = &self.context_compacted {
            m.serialize_entry("contextCompacted", c)?;
        }
        m.end()
    }
}

/// A call an assistant message made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: Function,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Function {
    pub name: String,
    pub arguments: String,
}

impl AguiMessages {
    fn find(&self, id: &str) -> Option<usize> {
        self.messages.iter().position(|m| m.id == id)
    }

    /// Applies one event.
    pub fn apply(&mut self, frame: &Frame) {
        let sub = frame.subagent.clone();
        match &frame.event {
            A::RunStarted { input, .. } => {
                for m in input.iter().flat_map(|i| &i.messages) {
                    if self.find(&m.id).is_none() {
                        self.messages.push(Message::new(&m.id, m.role, Some(m.content.clone()), None));
                    }
                }
            }
            // A start for an id the client holds reuses its message.
            A::TextMessageStart { message_id, role } if self.find(message_id).is_none() => {
                self.messages.push(Message::new(message_id, *role, Some("".into()), sub));
            }
            A::ReasoningMessageStart { message_id, .. } if self.find(message_id).is_none() => {
                self.messages.push(Message::new(message_id, Role::Reasoning, Some("".into()), sub));
            }
            A::TextMessageContent { message_id, delta } | A::ReasoningMessageContent { message_id, delta } => {
                if let Some(i) = self.find(message_id) {
                    let m = &mut self.messages[i];
                    let held = m.content.as_ref().and_then(Value::as_str).unwrap_or_default();
                    m.content = Some(format!("{held}{delta}").into());
                }
            }
            A::ToolCallStart { tool_call_id: call, tool_call_name, parent_message_id: parent, .. } => {
                if self.owner(call).is_some() {
                    return;
                }
                let at = match parent.as_deref().and_then(|p| self.find(p)) {
                    Some(i) if self.messages[i].role == Role::Assistant => i,
                    found => {
                        let id = match (parent, found) {
                            (Some(p), None) => p,
                            _ => call,
                        };
                        let mut holder = Message::new(id, Role::Assistant, None, sub);
                        holder.tool_calls = Some(Vec::new());
                        holder.made_for_calls = true;
                        self.messages.push(holder);
                        self.messages.len() - 1
                    }
                };
                let function = Function { name: tool_call_name.clone(), arguments: String::new() };
                let tc = ToolCall { id: call.clone(), kind: "function", function };
                self.messages[at].tool_calls.get_or_insert_with(Vec::new).push(tc);
            }
            A::ToolCallArgs { tool_call_id: call, delta } => {
                if let Some((m, c)) = self.owner(call) {
                    if let Some(tc) = self.messages[m].tool_calls.as_mut().and_then(|calls| calls.get_mut(c)) {
                        tc.function.arguments.push_str(delta);
                    }
                }
            }
            A::ToolCallResult { message_id, tool_call_id: call, content, role } => {
                let mut message = Message::new(message_id, *role, Some(content.clone().into()), sub);
                message.tool_call_id = Some(call.clone());
                match self.owner(call) {
                    None => self.messages.push(message),
                    Some((owner, _)) => {
                        let mut at = owner + 1;
                        while at < self.messages.len() && self.messages[at].role == Role::Tool {
                            at += 1;
                        }
                        self.messages.insert(at, message);
                    }
                }
            }
            // What the client's messages do not keep (a start for a message
            // it holds already reuses that one).
            A::TextMessageStart { .. }
            | A::ReasoningMessageStart { .. }
            | A::RunFinished { .. }
            | A::RunError { .. }
            | A::StepStarted { .. }
            | A::StepFinished { .. }
            | A::TextMessageEnd { .. }
            | A::ReasoningStart { .. }
            | A::ReasoningMessageEnd { .. }
            | A::ReasoningEnd { .. }
            | A::ToolCallEnd { .. }
            | A::SubagentStarted { .. }
            | A::SubagentFinished { .. }
            | A::SubagentError { .. }
            | A::StateSnapshot { .. }
            | A::Custom { .. } => {}
        }
    }

    /// The assistant message holding a tool call, and the call's index.
    fn owner(&self, call: &str) -> Option<(usize, usize)> {
        self.messages.iter().enumerate().find_map(|(i, m)| {
            let calls = m.tool_calls.as_ref()?;
            calls.iter().position(|c| c.id == call).map(|c| (i, c))
        })
    }
}
