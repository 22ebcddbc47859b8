//! The agent-tree reducer: folds a run's events into the activity tree the
//! frontend renders (`docs/protocols/n8n-instance-ai-streaming-protocol.md` "Frontend Rendering", `docs/protocols/notes-from-source-and-trackers.md` §1
//! "Reducer rules"). The server uses it for `GET .../messages` and to find a
//! dead run's open tool calls; clients fold the same events the same way.

use crate::event::{Event, Kind};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeStatus {
    Active,
    Completed,
    Cancelled,
    Error,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum TimelineEntry {
    Text {
        content: String,
        #[serde(rename = "responseId", skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    Reasoning {
        content: String,
        #[serde(rename = "responseId", skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    ToolCall {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
    },
    Child {
        #[serde(rename = "agentId")]
        agent_id: String,
    },
}

#[cfg_attr(test, derive(schemars::JsonSchema), schemars(rename = "AgentToolCall"))]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub is_loading: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<i64>,
    /// The MCP server whose tool it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl ToolCall {
    fn pending(tool_call_id: String, tool_name: String, args: Value, ts: i64) -> ToolCall {
        ToolCall {
            tool_call_id,
            tool_name,
            args,
            result: None,
            error: None,
            is_loading: true,
            confirmation: None,
            started_at: Some(ts),
            server: None,
            completed_at: None,
        }
    }
}

/// One agent of the tree, with its children nested.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentNode {
    pub agent_id: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    pub status: NodeStatus,
    pub text_content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub children: Vec<AgentNode>,
    pub timeline: Vec<TimelineEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
}

impl AgentNode {
    fn new(agent_id: &str, role: &str) -> AgentNode {
        AgentNode {
            agent_id: agent_id.to_owned(),
            role: role.to_owned(),
            tools: None,
            status: NodeStatus::Active,
            text_content: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            children: Vec::new(),
            timeline: Vec::new(),
            tasks: None,
            result: None,
            error: None,
            status_message: None,
        }
    }
}

/// Folds events into a flat arena, nested on [`TreeBuilder::tree`].
#[derive(Clone, Debug, Default)]
pub struct TreeBuilder {
    /// Arena of nodes; `children` of arena nodes stay empty, `kids` links them.
    nodes: Vec<AgentNode>,
    kids: Vec<Vec<usize>>,
    root: Option<usize>,
    /// Nodes made for agents that published before their `agent-spawned`.
    implicit: Vec<usize>,
    /// toolCallId → (node, position in its `tool_calls`).
    calls: HashMap<String, Vec<(usize, usize)>>,
}

#[derive(Clone, Copy, PartialEq)]
enum TextSlot {
    Text,
    Reasoning,
}

impl TreeBuilder {
    fn find(&self, agent_id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.agent_id == agent_id)
    }

    /// The node an event of `agent_id` applies to. The first agent seen is
    /// the root; an agent that publishes before it is announced gets a child
    /// of the root of its own (never the root's timeline: two agents' text
    /// must not merge), which its `agent-spawned` later names.
    fn node_for(&mut self, agent_id: &str) -> usize {
        if let Some(i) = self.find(agent_id) {
            return i;
        }
        let Some(root) = self.root else {
            return self.push(AgentNode::new(agent_id, "orchestrator"), None);
        };
        // No timeline entry in the root yet: that would split a text segment
        // of the root's that is still streaming. It is placed where its
        // `agent-spawned` lands (a structural fact, stored after the root's
        // open segments are flushed).
        let i = self.push(AgentNode::new(agent_id, agent_id), Some(root));
        self.implicit.push(i);
        i
    }

    fn push(&mut self, node: AgentNode, parent: Option<usize>) -> usize {
        self.nodes.push(node);
        self.kids.push(Vec::new());
        let i = self.nodes.len() - 1;
        match parent {
            Some(p) => self.kids[p].push(i),
            None => self.root = Some(i),
        }
        i
    }

    pub fn apply(&mut self, ev: &Event) {
        let p = &ev.payload;
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        match ev.kind {
            Kind::RunStart => {
                // A follow-up run reuses the existing root.
                match self.root {
                    Some(r) => self.nodes[r].status = NodeStatus::Active,
                    None => {
                        self.push(AgentNode::new(&ev.agent_id, "orchestrator"), None);
                    }
                }
            }
            Kind::TextDelta | Kind::ReasoningDelta | Kind::TextBlock | Kind::ReasoningBlock => {
                let slot = match ev.kind {
                    Kind::TextDelta | Kind::TextBlock => TextSlot::Text,
                    _ => TextSlot::Reasoning,
                };
                let replace = matches!(ev.kind, Kind::TextBlock | Kind::ReasoningBlock)
                    || p.get("snapshot").and_then(Value::as_bool) == Some(true);
                let i = self.node_for(&ev.agent_id);
                apply_text(&mut self.nodes[i], slot, ev.response_id.as_deref(), &s("text"), replace);
            }
            Kind::ToolInputStart | Kind::ToolCall => {
                let i = self.node_for(&ev.agent_id);
                let id = s("toolCallId");
                match self.call_pos(i, &id) {
                    Some(pos) => {
                        if ev.kind == Kind::ToolCall {
                            let tc = &mut self.nodes[i].tool_calls[pos];
                            tc.args = p.get("args").cloned().unwrap_or(Value::Null);
                            tc.tool_name = s("toolName");
                        }
                    }
                    None => {
                        let args = match ev.kind {
                            Kind::ToolCall => p.get("args").cloned().unwrap_or(Value::Null),
                            _ => Value::Object(Default::default()),
                        };
                        self.add_call(i, ToolCall::pending(id.clone(), s("toolName"), args, ev.ts));
                    }
                }
                if let (Some(server), Some(pos)) = (p.get("server").and_then(Value::as_str), self.call_pos(i, &id)) {
                    self.nodes[i].tool_calls[pos].server = Some(server.to_owned());
                }
            }
            Kind::ToolResult | Kind::ToolError | Kind::ToolInterrupted => {
                let id = s("toolCallId");
                if let Some(tc) = self.tool_call_mut(&ev.agent_id, &id) {
                    match ev.kind {
                        Kind::ToolResult => tc.result = p.get("result").cloned(),
                        _ => tc.error = Some(s("error")),
                    }
                    tc.is_loading = false;
                    tc.completed_at = Some(ev.ts);
                }
            }
            Kind::ConfirmationRequest => {
                let id = s("toolCallId");
                let i = self.node_for(&ev.agent_id);
                let pos = match self.call_pos(i, &id) {
                    Some(pos) => pos,
                    None => {
                        let args = p.get("args").cloned().unwrap_or(Value::Null);
                        self.add_call(i, ToolCall::pending(id, s("toolName"), args, ev.ts))
                    }
                };
                self.nodes[i].tool_calls[pos].confirmation = Some(p.clone());
            }
            Kind::AgentSpawned => {
                if let Some(i) = self.find(&ev.agent_id) {
                    // Idempotent; but an implicit node learns its role now.
                    if let Some(pos) = self.implicit.iter().position(|&n| n == i) {
                        self.implicit.remove(pos);
                        self.nodes[i].role = s("role");
                        self.nodes[i].tools = p.get("tools").and_then(|t| serde_json::from_value(t.clone()).ok());
                        if let Some(r) = self.root {
                            // It takes its place among the spawned children now.
                            self.kids[r].retain(|&k| k != i);
                            self.kids[r].push(i);
                            self.nodes[r].timeline.push(TimelineEntry::Child { agent_id: ev.agent_id.clone() });
                        }
                    }
                    return;
                }
                let Some(parent) = self.find(&s("parentId")) else {
                    return; // unknown parent: dropped
                };
                let mut node = AgentNode::new(&ev.agent_id, &s("role"));
                node.tools = p.get("tools").and_then(|t| serde_json::from_value(t.clone()).ok());
                self.push(node, Some(parent));
                self.nodes[parent].timeline.push(TimelineEntry::Child { agent_id: ev.agent_id.clone() });
            }
            Kind::AgentCompleted => {
                if let Some(i) = self.find(&ev.agent_id) {
                    let node = &mut self.nodes[i];
                    let err = p.get("error").and_then(Value::as_str).map(str::to_owned);
                    node.status = match p.get("status").and_then(Value::as_str) {
                        Some("cancelled") => NodeStatus::Cancelled,
                        Some("error") => NodeStatus::Error,
                        Some(_) => NodeStatus::Completed,
                        None if err.is_some() => NodeStatus::Error,
                        None => NodeStatus::Completed,
                    };
                    node.result = p.get("result").cloned().filter(|v| !v.is_null());
                    node.error = err;
                }
            }
            Kind::TasksUpdate => {
                let i = self.node_for(&ev.agent_id);
                self.nodes[i].tasks = p.get("tasks").cloned();
            }
            Kind::Status => {
                let i = self.node_for(&ev.agent_id);
                let m = s("message");
                self.nodes[i].status_message = (!m.is_empty()).then_some(m);
            }
            Kind::Error => {
                let i = self.node_for(&ev.agent_id);
                self.nodes[i].error = Some(s("content"));
            }
            Kind::RunFinish => {
                let Some(r) = self.root else { return };
                let status = p.get("status").and_then(Value::as_str).unwrap_or_default();
                self.nodes[r].status = match status {
                    "completed" => NodeStatus::Completed,
                    "cancelled" => NodeStatus::Cancelled,
                    _ => NodeStatus::Error,
                };
                if status != "completed" {
                    // Cancelled, failed or interrupted: nothing is loading any more.
                    for n in &mut self.nodes {
                        for tc in &mut n.tool_calls {
                            tc.is_loading = false;
                        }
                        if n.status == NodeStatus::Active {
                            n.status = NodeStatus::Cancelled;
                        }
                    }
                }
                if let Some(reason) = p.get("reason").and_then(Value::as_str) {
                    if status == "error" && self.nodes[r].error.is_none() {
                        self.nodes[r].error = Some(reason.to_owned());
                    }
                }
                self.nodes[r].status_message = None;
            }
            Kind::ThreadTitleUpdated
            | Kind::ConfirmationSettled
            | Kind::FilesystemRequest
            | Kind::QueueUpdated
            | Kind::StepStart
            | Kind::StepFinish => {}
        }
    }

    /// Where `node` holds tool call `id`, through the index (a run may make
    /// thousands of calls; a scan per event would be quadratic).
    fn call_pos(&self, node: usize, id: &str) -> Option<usize> {
        self.calls.get(id)?.iter().find(|(n, _)| *n == node).map(|(_, pos)| *pos)
    }

    fn add_call(&mut self, node: usize, call: ToolCall) -> usize {
        let n = &mut self.nodes[node];
        n.timeline.push(TimelineEntry::ToolCall { tool_call_id: call.tool_call_id.clone() });
        self.calls.entry(call.tool_call_id.clone()).or_default().push((node, n.tool_calls.len()));
        n.tool_calls.push(call);
        n.tool_calls.len() - 1
    }

    fn tool_call_mut(&mut self, agent_id: &str, id: &str) -> Option<&mut ToolCall> {
        // The agent's own call first; then any agent's (results may be
        // attributed to the parent that awaited them).
        let owners = self.calls.get(id)?;
        let own = self.find(agent_id);
        let &(node, pos) = owners.iter().find(|(n, _)| Some(*n) == own).or(owners.first())?;
        Some(&mut self.nodes[node].tool_calls[pos])
    }

    /// Length of `agent_id`'s timeline, if the agent is known. It grows
    /// exactly when the agent's last timeline entry changes.
    pub fn timeline_len(&self, agent_id: &str) -> Option<usize> {
        self.find(agent_id).map(|i| self.nodes[i].timeline.len())
    }

    /// Tool calls started and never settled, as `(agentId, toolCallId)`.
    pub fn open_tool_calls(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for n in &self.nodes {
            for tc in &n.tool_calls {
                if tc.result.is_none() && tc.error.is_none() {
                    out.push((n.agent_id.clone(), tc.tool_call_id.clone()));
                }
            }
        }
        out
    }

    /// The nested tree, or `None` before any event.
    pub fn tree(&self) -> Option<AgentNode> {
        fn build(b: &TreeBuilder, i: usize) -> AgentNode {
            let mut n = b.nodes[i].clone();
            // Spawned children in spawn order, then unannounced ones by id:
            // when those were first seen depends on when their text was
            // flushed, so only their ids give an order live and replay share.
            let (mut unannounced, spawned): (Vec<usize>, Vec<usize>) =
                b.kids[i].iter().partition(|k| b.implicit.contains(k));
            unannounced.sort_by(|x, y| b.nodes[*x].agent_id.cmp(&b.nodes[*y].agent_id));
            n.children = spawned.iter().chain(&unannounced).map(|&k| build(b, k)).collect();
            n
        }
        self.root.map(|r| build(self, r))
    }
}

fn apply_text(node: &mut AgentNode, slot: TextSlot, rid: Option<&str>, text: &str, replace: bool) {
    let (all, timeline) = match slot {
        TextSlot::Text => (&mut node.text_content, &mut node.timeline),
        TextSlot::Reasoning => (&mut node.reasoning, &mut node.timeline),
    };
    // The last timeline entry of this kind, if it is the last entry overall.
    let last = timeline.last_mut().and_then(|e| match (e, slot) {
        (TimelineEntry::Text { content, response_id }, TextSlot::Text)
        | (TimelineEntry::Reasoning { content, response_id }, TextSlot::Reasoning) => Some((content, response_id)),
        _ => None,
    });
    match last {
        Some((content, response_id)) if response_id.as_deref() == rid => {
            if replace {
                if rid.is_some() && text.starts_with(content.as_str()) {
                    // REPLACE: the block extends what this entry shows.
                    all.push_str(&text[content.len()..]);
                    content.push_str(&text[content.len()..]);
                    return;
                }
            } else {
                content.push_str(text);
                all.push_str(text);
                return;
            }
        }
        _ => {}
    }
    all.push_str(text);
    let content = text.to_owned();
    let response_id = rid.map(str::to_owned);
    timeline.push(match slot {
        TextSlot::Text => TimelineEntry::Text { content, response_id },
        TextSlot::Reasoning => TimelineEntry::Reasoning { content, response_id },
    });
}

/// Folds a whole event sequence.
pub fn fold<'a>(events: impl IntoIterator<Item = &'a Event>) -> TreeBuilder {
    let mut b = TreeBuilder::default();
    for e in events {
        b.apply(e);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: Kind, agent: &str, rid: Option<&str>, payload: Value) -> Event {
        let mut e = Event::new(kind, "r1", agent, 0, payload);
        e.response_id = rid.map(str::to_owned);
        e
    }

    #[test]
    fn deltas_and_block_render_the_same() {
        let start = ev(Kind::RunStart, "a1", None, json!({"messageId":"m"}));
        let live = fold(&[
            start.clone(),
            ev(Kind::TextDelta, "a1", Some("s"), json!({"text":"Hel"})),
            ev(Kind::TextDelta, "a1", Some("s"), json!({"text":"lo"})),
        ]);
        let replay = fold(&[start.clone(), ev(Kind::TextBlock, "a1", Some("s"), json!({"text":"Hello"}))]);
        assert_eq!(live.tree(), replay.tree());
        // A client that saw "Hel" live and then gets the block.
        let mixed = fold(&[
            start,
            ev(Kind::TextDelta, "a1", Some("s"), json!({"text":"Hel"})),
            ev(Kind::TextBlock, "a1", Some("s"), json!({"text":"Hello"})),
        ]);
        assert_eq!(mixed.tree(), live.tree());
        assert_eq!(live.tree().unwrap().text_content, "Hello");
    }

    #[test]
    fn block_of_another_segment_appends() {
        let t = fold(&[
            ev(Kind::RunStart, "a1", None, json!({"messageId":"m"})),
            ev(Kind::TextBlock, "a1", Some("s1"), json!({"text":"A"})),
            ev(Kind::TextBlock, "a1", Some("s2"), json!({"text":"B"})),
            ev(Kind::TextBlock, "a1", None, json!({"text":"C"})),
            ev(Kind::TextBlock, "a1", None, json!({"text":"CD"})),
        ])
        .tree()
        .unwrap();
        assert_eq!(t.timeline.len(), 4, "id-less blocks never replace");
        assert_eq!(t.text_content, "ABCCD");
    }

    #[test]
    fn tools_children_and_finish() {
        let b = fold(&[
            ev(Kind::RunStart, "a1", None, json!({"messageId":"m"})),
            ev(Kind::ToolInputStart, "a1", None, json!({"toolCallId":"t1","toolName":"x"})),
            ev(Kind::ToolCall, "a1", None, json!({"toolCallId":"t1","toolName":"x","args":{"q":1}})),
            ev(Kind::AgentSpawned, "a2", None, json!({"parentId":"a1","role":"builder","tools":["y"]})),
            ev(Kind::AgentSpawned, "a2", None, json!({"parentId":"a1","role":"dup","tools":[]})),
            ev(Kind::AgentSpawned, "a3", None, json!({"parentId":"nope","role":"orphan","tools":[]})),
            ev(Kind::ToolCall, "a2", None, json!({"toolCallId":"t2","toolName":"y","args":{}})),
            ev(Kind::ToolResult, "a1", None, json!({"toolCallId":"t1","result":{"ok":true}})),
        ]);
        assert_eq!(b.open_tool_calls(), vec![("a2".to_string(), "t2".to_string())]);
        let t = b.tree().unwrap();
        assert_eq!(t.tool_calls.len(), 1);
        assert_eq!(t.tool_calls[0].args, json!({"q":1}));
        assert!(!t.tool_calls[0].is_loading);
        assert_eq!(t.children.len(), 1);
        assert_eq!(t.children[0].role, "builder");
        assert!(t.children[0].tool_calls[0].is_loading);
        let mut b = b;
        b.apply(&ev(Kind::RunFinish, "a1", None, json!({"status":"cancelled","reason":"user_cancelled"})));
        let t = b.tree().unwrap();
        assert_eq!(t.status, NodeStatus::Cancelled);
        assert!(!t.children[0].tool_calls[0].is_loading);
    }
}
