//! The history as AG-UI messages (`GET /ag-ui/threads/:id/messages`): the
//! messages an `HttpAgent` holds, by a port of `@ag-ui/client`'s
//! `defaultApplyEvents` ([`AguiMessages`]) applied to the same numbered
//! events the streams send ([`AguiMapper`]), so the history route shows what
//! a client that read the stream holds.

use super::mapping::AguiMapper;
use crate::wire::error::ApiError;
use crate::log::event::Payload;
use crate::storage::store::{RunState, Store};
use crate::thread::{Sink, Thread};
use serde_json::{json, Value};

/// The conversation as the messages an `HttpAgent` holds (a page of runs,
/// oldest first). A running run's answer is left out: its stream brings it.
/// Files are media parts with their URL on `origin`.
pub fn messages<S: Store, K: Sink>(t: &Thread<S, K>, limit: usize, page: usize, origin: &str) -> Result<Value, ApiError> {
    let (runs, _) = t.conversation().page(limit, page)?;
    let mut fold = AguiMessages::default();
    for run in &runs {
        let running = run.state == RunState::Running;
        let waiting = t.runs().active_run().is_some_and(|a| a.run_id == run.run_id) && t.runs().is_suspended();
        if running && !waiting {
            let content = super::mapping::user_content(&run.message, &run.turn.attachments, origin, t.thread_id());
            fold.apply(&json!({ "type": "RUN_STARTED", "input": { "messages": [
                { "id": run.message_id, "role": "user", "content": content }
            ] } }));
            continue;
        }
        let events = t.conversation().run_events(&run.run_id)?;
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
                if let Some(m) = c.decision.as_ref().and_then(|d| d["messageId"].as_str()) {
                    client_results.insert(call.to_owned(), m.to_owned());
                }
            }
        }
        let mut mapper = AguiMapper::new(t.thread_id(), &run.run_id, &run.agent_id)
            .with_client_results(client_results)
            .with_origin(origin);
        for ev in events {
            for (_, e) in mapper.map(&ev) {
                fold.apply(&e);
            }
        }
    }
    Ok(Value::Array(fold.messages))
}

/// The messages an `HttpAgent` holds after reading a run's events (the
/// client's `defaultApplyEvents`, for the events [`AguiMapper`] sends).
#[derive(Debug, Default, Clone)]
pub struct AguiMessages {
    pub messages: Vec<Value>,
}

impl AguiMessages {
    fn find(&self, id: &str) -> Option<usize> {
        self.messages.iter().position(|m| m["id"] == id)
    }

    /// Applies one event.
    pub fn apply(&mut self, e: &Value) {
        let id = e["messageId"].as_str().unwrap_or_default();
        let sub = e.get("subagentRunId").filter(|s| s.is_string()).cloned();
        let with_sub = |mut m: Value| {
            if let Some(s) = &sub {
                m["subagentRunId"] = s.clone();
            }
            m
        };
        match e["type"].as_str().unwrap_or_default() {
            "RUN_STARTED" => {
                for m in e["input"]["messages"].as_array().into_iter().flatten() {
                    if self.find(m["id"].as_str().unwrap_or_default()).is_none() {
                        self.messages.push(m.clone());
                    }
                }
            }
            // A start for an id the client holds reuses its message.
            "TEXT_MESSAGE_START" if self.find(id).is_none() => {
                let role = e["role"].as_str().unwrap_or("assistant");
                self.messages.push(with_sub(json!({ "id": id, "role": role, "content": "" })));
            }
            "REASONING_MESSAGE_START" if self.find(id).is_none() => {
                self.messages.push(with_sub(json!({ "id": id, "role": "reasoning", "content": "" })));
            }
            "TEXT_MESSAGE_CONTENT" | "REASONING_MESSAGE_CONTENT" => {
                if let Some(i) = self.find(id) {
                    let content = format!(
                        "{}{}",
                        self.messages[i]["content"].as_str().unwrap_or_default(),
                        e["delta"].as_str().unwrap_or_default()
                    );
                    self.messages[i]["content"] = content.into();
                }
            }
            "TOOL_CALL_START" => {
                let call = e["toolCallId"].as_str().unwrap_or_default();
                if self.owner(call).is_some() {
                    return;
                }
                let parent = e["parentMessageId"].as_str();
                let at = match parent.and_then(|p| self.find(p)) {
                    Some(i) if self.messages[i]["role"] == "assistant" => i,
                    found => {
                        let id = match (parent, found) {
                            (Some(p), None) => p,
                            _ => call,
                        };
                        self.messages.push(with_sub(json!({ "id": id, "role": "assistant", "toolCalls": [] })));
                        self.messages.len() - 1
                    }
                };
                let m = &mut self.messages[at];
                if !m["toolCalls"].is_array() {
                    m["toolCalls"] = json!([]);
                }
                let name = e["toolCallName"].clone();
                m["toolCalls"]
                    .as_array_mut()
                    .expect("set above")
                    .push(json!({ "id": call, "type": "function", "function": { "name": name, "arguments": "" } }));
            }
            "TOOL_CALL_ARGS" => {
                let call = e["toolCallId"].as_str().unwrap_or_default();
                if let Some((m, c)) = self.owner(call) {
                    let tc = &mut self.messages[m]["toolCalls"][c]["function"]["arguments"];
                    *tc = format!("{}{}", tc.as_str().unwrap_or_default(), e["delta"].as_str().unwrap_or_default())
                        .into();
                }
            }
            "TOOL_CALL_RESULT" => {
                let call = e["toolCallId"].as_str().unwrap_or_default();
                let mut message = json!({ "id": id, "toolCallId": call, "role": e["role"].as_str().unwrap_or("tool"), "content": e["content"] });
                if let Some(s) = &sub {
                    message["subagentRunId"] = s.clone();
                }
                match self.owner(call) {
                    None => self.messages.push(message),
                    Some((owner, _)) => {
                        let mut at = owner + 1;
                        while at < self.messages.len() && self.messages[at]["role"] == "tool" {
                            at += 1;
                        }
                        self.messages.insert(at, message);
                    }
                }
            }
            _ => {}
        }
    }

    /// The assistant message holding a tool call, and the call's index.
    fn owner(&self, call: &str) -> Option<(usize, usize)> {
        self.messages.iter().enumerate().find_map(|(i, m)| {
            let calls = m["toolCalls"].as_array()?;
            calls.iter().position(|c| c["id"] == call).map(|c| (i, c))
        })
    }
}
