//! The OpenAI Chat Completions streaming protocol, apart from I/O: an SSE
//! decoder for the response bytes and a parser that turns chunks into
//! [`ModelEvent`]s, assembling tool calls whose arguments arrive split across
//! chunks and interleaved by `index`.

use serde_json::{json, Value};

/// What one streamed step of the model produced, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    Text(String),
    Reasoning(String),
    /// A tool call's name is known (its arguments may follow).
    ToolStart {
        index: usize,
        id: String,
        name: String,
    },
    Finish(String),
    Usage(Value),
    /// The provider reported an error inside the stream.
    Error(String),
    /// `data: [DONE]`
    Done,
}

/// A tool call assembled from its fragments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallParts {
    pub index: usize,
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Parses completion chunks, keeping the tool calls being assembled.
#[derive(Debug, Default)]
pub struct ChunkParser {
    calls: Vec<ToolCallParts>,
    started: Vec<usize>,
}

impl ChunkParser {
    /// Parses one `data:` payload.
    pub fn push(&mut self, data: &str) -> Result<Vec<ModelEvent>, String> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(vec![ModelEvent::Done]);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| format!("the model sent a chunk that is not JSON: {e}"))?;
        let mut out = Vec::new();
        if let Some(err) = chunk.get("error") {
            let msg = err.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| err.to_string());
            out.push(ModelEvent::Error(msg));
            return Ok(out);
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            for key in ["reasoning_content", "reasoning"] {
                if let Some(t) = delta.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::Reasoning(t.to_owned()));
                }
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                out.push(ModelEvent::Text(t.to_owned()));
            }
            for tc in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let index = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let pos = match self.calls.iter().position(|c| c.index == index) {
                    Some(p) => p,
                    None => {
                        self.calls.push(ToolCallParts {
                            index,
                            id: String::new(),
                            name: String::new(),
                            arguments: String::new(),
                        });
                        self.calls.len() - 1
                    }
                };
                let call = &mut self.calls[pos];
                if let Some(id) = tc.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                    call.id = id.to_owned();
                }
                if let Some(f) = tc.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                        call.name.push_str(n);
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        call.arguments.push_str(a);
                    }
                }
                if !call.name.is_empty() && !self.started.contains(&index) {
                    self.started.push(index);
                    if call.id.is_empty() {
                        call.id = format!("call_{index}");
                    }
                    out.push(ModelEvent::ToolStart { index, id: call.id.clone(), name: call.name.clone() });
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                out.push(ModelEvent::Finish(reason.to_owned()));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(ModelEvent::Usage(usage.clone()));
        }
        Ok(out)
    }

    /// The assembled tool calls, in index order.
    pub fn tool_calls(&self) -> Vec<ToolCallParts> {
        let mut calls: Vec<_> = self.calls.iter().filter(|c| !c.name.is_empty()).cloned().collect();
        calls.sort_by_key(|c| c.index);
        calls
    }
}

/// A message of the conversation sent to the model.
pub fn message(role: &str, content: &str) -> Value {
    json!({ "role": role, "content": content })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_interleaved_tool_calls() {
        let mut p = ChunkParser::default();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"a","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"b","arguments":"{\"y"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\":2}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
            "[DONE]",
        ];
        let mut events = Vec::new();
        for c in chunks {
            events.extend(p.push(c).unwrap());
        }
        assert_eq!(events[0], ModelEvent::ToolStart { index: 0, id: "c0".into(), name: "a".into() });
        assert_eq!(events[1], ModelEvent::ToolStart { index: 1, id: "c1".into(), name: "b".into() });
        assert!(events.contains(&ModelEvent::Finish("tool_calls".into())));
        assert!(matches!(events[events.len() - 2], ModelEvent::Usage(_)));
        let calls = p.tool_calls();
        assert_eq!(calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(calls[1].arguments, r#"{"y":2}"#);
    }

    #[test]
    fn text_reasoning_and_errors() {
        let mut p = ChunkParser::default();
        let ev = p
            .push(r#"{"choices":[{"delta":{"reasoning_content":"hm","content":"Hi"},"finish_reason":null}]}"#)
            .unwrap();
        assert_eq!(ev, vec![ModelEvent::Reasoning("hm".into()), ModelEvent::Text("Hi".into())]);
        let ev = p.push(r#"{"choices":[{"delta":{"reasoning":"r"},"finish_reason":"length"}]}"#).unwrap();
        assert_eq!(ev, vec![ModelEvent::Reasoning("r".into()), ModelEvent::Finish("length".into())]);
        assert_eq!(
            p.push(r#"{"error":{"message":"overloaded"}}"#).unwrap(),
            vec![ModelEvent::Error("overloaded".into())]
        );
        assert!(p.push("not json").is_err());
    }
}
