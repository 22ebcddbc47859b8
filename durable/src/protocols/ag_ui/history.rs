//! The messages an AG-UI client holds: a port of `@ag-ui/client`'s
//! `defaultApplyEvents` for the events [`super::AguiMapper`] sends, so the
//! history route shows what a client that read the stream holds.

use serde_json::{json, Value};

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
