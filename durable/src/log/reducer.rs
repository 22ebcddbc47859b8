//! The agent-tree reducer: folds a run's events into the activity tree the
//! frontend renders (`docs/protocols/n8n-instance-ai-streaming-protocol.md`
//! "Frontend Rendering"). The server uses it for `GET .../messages`, the
//! `run-sync` frame and to find a dead run's open tool calls; clients fold
//! the same events the same way.
//!
//! It is n8n's own reducer (`@n8n/api-types`' `reduceEvent`, with the
//! editor's handling of `error`), so n8n's editor, folding a thread's stream,
//! holds the very tree the messages view shows (`tests/instance-ai-n8n.test.mjs`
//! proves it on every path). Its rules, as n8n's:
//! - text and reasoning join the agent's **last** timeline entry when it is
//!   of the same kind and `responseId` (none equals none), else start one;
//! - a block (`text-block`, `reasoning-block`) REPLACES that last entry when
//!   it has the same `responseId` and starts or ends with what the entry
//!   holds; otherwise it joins as a delta would;
//! - an `error` adds the line `\n\n*Error: <content>*` to its agent's text
//!   and marks the agent `error` (with `errorDetails`);
//! - `run-finish` sets the root's status only (`interrupted` reads as
//!   `cancelled`, with a `cancellationReason`), and stops every loading call
//!   unless the run completed;
//! - times are ISO 8601 strings of the events' `ts`.
//!
//! threadline's extensions, where n8n's reducer drops an event: a delta with
//! `snapshot: true` replaces like a block (a client that reconnects mid-answer
//! gets the open segment whole: its `run-sync` tree never holds it), an agent
//! that publishes before its `agent-spawned` gets a node of its own, a
//! confirmation for a call not yet announced announces it, and a tool call
//! of an MCP server names it (`server`).

use crate::log::event::payload::{AgentEnd, AgentSpawned};
use crate::log::event::{Event, FinishStatus, Kind, Payload};
use serde::Serialize;
use serde_json::{Map, Value};
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
        #[serde(rename = "responseId", skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    Child {
        #[serde(rename = "agentId")]
        agent_id: String,
        #[serde(rename = "responseId", skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
}

impl TimelineEntry {
    fn response_id(&self) -> Option<&str> {
        match self {
            TimelineEntry::Text { response_id, .. }
            | TimelineEntry::Reasoning { response_id, .. }
            | TimelineEntry::ToolCall { response_id, .. }
            | TimelineEntry::Child { response_id, .. } => response_id.as_deref(),
        }
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema), schemars(rename = "AgentToolCall"))]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallNode {
    pub tool_call_id: String,
    pub tool_name: String,
    pub args: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub is_loading: bool,
    /// How n8n's editor draws the call (`planner` for `create-tasks`, ...).
    pub render_hint: String,
    /// The request, without the call's own fields (`toolCallId`,
    /// `toolName`, `args`) and the server's (`approver`, `expiresAt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Value>,
    /// ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// The MCP server whose tool it is (threadline's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// How n8n's editor draws a tool by its name (`getRenderHint`).
pub fn render_hint(tool: &str) -> &'static str {
    match tool {
        "task-control" => "tasks",
        "build-workflow" | "build-workflow-with-agent" => "builder",
        "research-with-agent" => "researcher",
        "create-tasks" => "planner",
        "eval-setup-with-agent" => "eval-setup",
        "create_skills" | "list_skills" | "read_skill" | "update_skill" | "load_skill" => "skill",
        _ => "default",
    }
}

/// An event's time as the tree shows it.
fn iso(ts: i64) -> String {
    crate::wire::time::rfc3339(ts)
}

impl ToolCallNode {
    fn pending(tool_call_id: String, tool_name: String, args: Value, ts: i64) -> ToolCallNode {
        ToolCallNode {
            tool_call_id,
            render_hint: render_hint(&tool_name).to_owned(),
            tool_name,
            args,
            result: None,
            error: None,
            is_loading: true,
            confirmation: None,
            started_at: Some(iso(ts)),
            completed_at: None,
            server: None,
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
    /// A background agent's task (`agent-spawned`'s `taskId`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// What `agent-spawned` said of the agent for its card: `kind`,
    /// `title`, `subtitle`, `goal`, `targetResource`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtitle: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_resource: Option<Value>,
    pub status: NodeStatus,
    pub text_content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCallNode>,
    pub children: Vec<AgentNode>,
    pub timeline: Vec<TimelineEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_items: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An `error` event's details: `statusCode`, `code`, `provider`,
    /// `technicalDetails`, where it gave them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_details: Option<Value>,
    /// Why a cancelled run stopped: `user`, `timeout`, `shutdown`,
    /// `interrupted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancellation_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
}

impl AgentNode {
    fn new(agent_id: &str, role: &str) -> AgentNode {
        AgentNode {
            agent_id: agent_id.to_owned(),
            role: role.to_owned(),
            tools: None,
            task_id: None,
            kind: None,
            title: None,
            subtitle: None,
            goal: None,
            target_resource: None,
            status: NodeStatus::Active,
            text_content: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            children: Vec::new(),
            timeline: Vec::new(),
            tasks: None,
            plan_items: None,
            result: None,
            error: None,
            error_details: None,
            cancellation_reason: None,
            status_message: None,
        }
    }
}

/// A request's fields that are its call's, not the request's.
const CALL_FIELDS: &[&str] = &["toolCallId", "toolName", "args"];

/// What the server adds to a request on the wire (who decides it, until
/// when): n8n's schema does not have them, so its editor's tree does not,
/// and neither does this one (the request event keeps them).
const SERVER_FIELDS: &[&str] = &["approver", "expiresAt"];

/// Error codes n8n's reducer writes no error line for.
const QUIET_ERROR_CODES: &[&str] = &["quota_exhausted"];

/// Why a cancelled run stopped, from its `run-finish` reason.
fn cancellation(reason: Option<&str>) -> Option<&'static str> {
    match reason? {
        "timeout" => Some("timeout"),
        "service_shutdown" => Some("shutdown"),
        "user_cancelled" => Some("user"),
        "crash_interrupted" => Some("interrupted"),
        _ => None,
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

    /// A child's entry in its parent's timeline: the event's `responseId`,
    /// else the one of the parent's last entry (n8n's).
    fn child_entry(&self, parent: usize, agent_id: &str, ev: &Event) -> TimelineEntry {
        let inherited = ev
            .response_id
            .clone()
            .or_else(|| self.nodes[parent].timeline.last().and_then(|e| e.response_id().map(str::to_owned)));
        TimelineEntry::Child { agent_id: agent_id.to_owned(), response_id: inherited }
    }

    pub fn apply(&mut self, ev: &Event) {
        match &ev.payload {
            Payload::RunStart(_) => {
                // A follow-up run reuses the existing root.
                match self.root {
                    Some(r) => self.nodes[r].status = NodeStatus::Active,
                    None => {
                        self.push(AgentNode::new(&ev.agent_id, "orchestrator"), None);
                    }
                }
            }
            Payload::TextDelta(t) | Payload::ReasoningDelta(t) | Payload::TextBlock(t) | Payload::ReasoningBlock(t) => {
                let slot = match ev.payload {
                    Payload::ReasoningDelta(_) | Payload::ReasoningBlock(_) => TextSlot::Reasoning,
                    _ => TextSlot::Text,
                };
                let block = matches!(ev.payload, Payload::TextBlock(_) | Payload::ReasoningBlock(_))
                    || t.snapshot == Some(true);
                let i = self.node_for(&ev.agent_id);
                apply_text(&mut self.nodes[i], slot, ev.response_id.as_deref(), &t.text, block);
            }
            Payload::ToolInputStart(start) => {
                self.announce(ev, &start.tool_call_id, &start.tool_name, None, start.server.as_deref())
            }
            Payload::ToolCall(call) => {
                self.announce(ev, &call.tool_call_id, &call.tool_name, Some(&call.args), call.server.as_deref())
            }
            Payload::ToolResult(r) => {
                if let Some(tc) = self.tool_call_mut(&ev.agent_id, &r.tool_call_id) {
                    tc.result = Some(r.result.clone());
                    tc.is_loading = false;
                    tc.completed_at = Some(iso(ev.ts));
                }
            }
            Payload::ToolError(e) | Payload::ToolInterrupted(e) => {
                if let Some(tc) = self.tool_call_mut(&ev.agent_id, &e.tool_call_id) {
                    tc.error = Some(e.error.clone());
                    tc.is_loading = false;
                    tc.completed_at = Some(iso(ev.ts));
                }
            }
            Payload::ConfirmationRequest(req) => {
                let id = &req.tool_call_id;
                if self.tool_call_mut(&ev.agent_id, id).is_none() {
                    let i = self.node_for(&ev.agent_id);
                    self.add_call(
                        i,
                        ToolCallNode::pending(id.clone(), req.tool_name.clone(), req.args.clone(), ev.ts),
                        ev,
                    );
                }
                let mut request = match serde_json::to_value(req) {
                    Ok(Value::Object(fields)) => fields,
                    _ => Map::new(),
                };
                for own in CALL_FIELDS.iter().chain(SERVER_FIELDS) {
                    request.remove(*own);
                }
                if let Some(tc) = self.tool_call_mut(&ev.agent_id, id) {
                    tc.confirmation = Some(Value::Object(request));
                }
            }
            Payload::AgentSpawned(spawned) => {
                if let Some(i) = self.find(&ev.agent_id) {
                    // Idempotent; but an implicit node learns its role now.
                    if let Some(pos) = self.implicit.iter().position(|&n| n == i) {
                        self.implicit.remove(pos);
                        describe(&mut self.nodes[i], spawned);
                        if let Some(r) = self.root {
                            // It takes its place among the spawned children now.
                            self.kids[r].retain(|&k| k != i);
                            self.kids[r].push(i);
                            let entry = self.child_entry(r, &ev.agent_id, ev);
                            self.nodes[r].timeline.push(entry);
                        }
                    }
                    return;
                }
                let Some(parent) = self.find(&spawned.parent_id) else {
                    return; // unknown parent: dropped
                };
                let mut node = AgentNode::new(&ev.agent_id, "");
                describe(&mut node, spawned);
                let entry = self.child_entry(parent, &ev.agent_id, ev);
                self.push(node, Some(parent));
                self.nodes[parent].timeline.push(entry);
            }
            Payload::AgentCompleted(done) => {
                if let Some(i) = self.find(&ev.agent_id) {
                    let node = &mut self.nodes[i];
                    node.status = match done.status {
                        Some(AgentEnd::Cancelled) => NodeStatus::Cancelled,
                        Some(AgentEnd::Error) => NodeStatus::Error,
                        Some(AgentEnd::Completed) => NodeStatus::Completed,
                        None if done.error.is_some() => NodeStatus::Error,
                        None => NodeStatus::Completed,
                    };
                    node.result = Some(done.result.clone()).filter(|v| !v.is_null());
                    node.error = done.error.clone();
                    for tc in &mut node.tool_calls {
                        tc.is_loading = false;
                    }
                }
            }
            Payload::TasksUpdate(tasks) => {
                let i = self.node_for(&ev.agent_id);
                self.nodes[i].tasks = serde_json::to_value(&tasks.tasks).ok();
            }
            Payload::Status(status) => {
                let i = self.node_for(&ev.agent_id);
                let m = &status.message;
                self.nodes[i].status_message = (!m.is_empty()).then(|| m.clone());
            }
            Payload::Error(error) => {
                let Some(i) = self.find(&ev.agent_id).or(self.root) else { return };
                let content = error.content.clone();
                if !error.code.as_deref().is_some_and(|c| QUIET_ERROR_CODES.contains(&c)) {
                    let line = format!("\n\n*Error: {content}*");
                    apply_text(&mut self.nodes[i], TextSlot::Text, ev.response_id.as_deref(), &line, false);
                }
                // As n8n's editor keeps them: a status code when there is
                // one, the rest when not empty.
                let mut details = Map::new();
                if let Some(code) = error.status_code {
                    details.insert("statusCode".to_owned(), code.into());
                }
                for (k, v) in [("code", &error.code), ("provider", &error.provider)] {
                    if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                        details.insert(k.to_owned(), v.into());
                    }
                }
                let node = &mut self.nodes[i];
                node.status = NodeStatus::Error;
                node.error = Some(content);
                node.error_details = Some(Value::Object(details));
            }
            Payload::RunFinish(fin) => {
                let Some(r) = self.root else { return };
                let status = match fin.status {
                    FinishStatus::Completed => NodeStatus::Completed,
                    FinishStatus::Cancelled | FinishStatus::Interrupted => NodeStatus::Cancelled,
                    FinishStatus::Error => NodeStatus::Error,
                };
                let reason = fin.reason.as_deref();
                if status == NodeStatus::Cancelled {
                    self.nodes[r].cancellation_reason = cancellation(reason).map(str::to_owned);
                }
                if status != NodeStatus::Completed {
                    // Cancelled, failed or interrupted: nothing is loading any more.
                    for n in &mut self.nodes {
                        for tc in &mut n.tool_calls {
                            tc.is_loading = false;
                        }
                    }
                }
                if let Some(reason) = reason {
                    if status == NodeStatus::Error && self.nodes[r].error.is_none() {
                        self.nodes[r].error = Some(reason.to_owned());
                    }
                }
                self.nodes[r].status = status;
            }
            Payload::ThreadTitleUpdated(_)
            | Payload::ConfirmationSettled(_)
            | Payload::FilesystemRequest(_)
            | Payload::QueueUpdated(_)
            | Payload::StepStart(_)
            | Payload::StepFinish(_)
            // A run's tree is its own: which runs a conversation shows is
            // the thread's tree (`thread::tree`), not an agent's.
            | Payload::BranchSwitched(_)
            // The model's context, not the conversation.
            | Payload::ContextCompacted(_)
            | Payload::ContextCompactionFailed(_) => {}
        }
    }

    /// A tool call announced (`tool-input-start`) or called (`tool-call`,
    /// which brings its arguments).
    fn announce(&mut self, ev: &Event, id: &str, name: &str, args: Option<&Value>, server: Option<&str>) {
        match self.calls.get(id).and_then(|owners| owners.first().copied()) {
            Some((node, pos)) => {
                // Announced: `tool-call` fills its arguments.
                if let Some(args) = args {
                    self.nodes[node].tool_calls[pos].args = args.clone();
                }
            }
            None => {
                let i = self.node_for(&ev.agent_id);
                let args = args.cloned().unwrap_or_else(|| Value::Object(Default::default()));
                self.add_call(i, ToolCallNode::pending(id.to_owned(), name.to_owned(), args, ev.ts), ev);
            }
        }
        if let Some(server) = server {
            if let Some(tc) = self.tool_call_mut(&ev.agent_id, id) {
                tc.server = Some(server.to_owned());
            }
        }
    }

    fn add_call(&mut self, node: usize, call: ToolCallNode, ev: &Event) -> usize {
        let n = &mut self.nodes[node];
        n.timeline.push(TimelineEntry::ToolCall {
            tool_call_id: call.tool_call_id.clone(),
            response_id: ev.response_id.clone(),
        });
        self.calls.entry(call.tool_call_id.clone()).or_default().push((node, n.tool_calls.len()));
        n.tool_calls.push(call);
        n.tool_calls.len() - 1
    }

    fn tool_call_mut(&mut self, agent_id: &str, id: &str) -> Option<&mut ToolCallNode> {
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

    /// The agents showing a transient status line.
    pub fn with_status_message(&self) -> Vec<String> {
        self.nodes.iter().filter(|n| n.status_message.is_some()).map(|n| n.agent_id.clone()).collect()
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

    /// The tree without the text of open segments (`(agentId, kind,
    /// responseId, text)` as the coalescer holds them): what the durable
    /// log alone folds to, the tree a `run-sync` carries. A client gets
    /// each open segment whole, after it, as a delta of its own: n8n's
    /// editor adds that delta to the tree it took, so a tree that held the
    /// text already would show it twice.
    pub fn tree_without(&self, open: &[(String, Kind, Option<String>, String)]) -> Option<AgentNode> {
        let mut b = self.clone();
        for (agent, kind, rid, text) in open {
            let Some(i) = b.find(agent) else { continue };
            let node = &mut b.nodes[i];
            let (slot, all) = match kind {
                Kind::ReasoningDelta => (TextSlot::Reasoning, &mut node.reasoning),
                _ => (TextSlot::Text, &mut node.text_content),
            };
            let last = node.timeline.last_mut();
            let held = match (last, slot) {
                (Some(TimelineEntry::Text { content, response_id }), TextSlot::Text)
                | (Some(TimelineEntry::Reasoning { content, response_id }), TextSlot::Reasoning)
                    if response_id == rid && content.ends_with(text.as_str()) && all.ends_with(text.as_str()) =>
                {
                    content.truncate(content.len() - text.len());
                    all.truncate(all.len() - text.len());
                    content.is_empty()
                }
                _ => false,
            };
            if held {
                node.timeline.pop();
            }
        }
        b.tree()
    }
}

/// What `agent-spawned` says of its agent.
fn describe(node: &mut AgentNode, p: &AgentSpawned) {
    node.role = p.role.clone();
    node.tools = p.tools.clone();
    node.task_id = p.task_id.clone();
    node.kind = p.kind.clone();
    node.title = p.title.clone();
    node.subtitle = p.subtitle.clone();
    node.goal = p.goal.clone();
}

/// Text or reasoning into `node`: it joins the last timeline entry when that
/// is of its kind and `responseId`, else starts one. A `block` (or a
/// snapshot) replaces that entry instead when it starts or ends with what
/// the entry holds (n8n's `text-block`).
fn apply_text(node: &mut AgentNode, slot: TextSlot, rid: Option<&str>, text: &str, block: bool) {
    let (all, timeline) = match slot {
        TextSlot::Text => (&mut node.text_content, &mut node.timeline),
        TextSlot::Reasoning => (&mut node.reasoning, &mut node.timeline),
    };
    // The last timeline entry, when it is of this kind and response.
    let last = timeline.last_mut().and_then(|e| match (e, slot) {
        (TimelineEntry::Text { content, response_id }, TextSlot::Text)
        | (TimelineEntry::Reasoning { content, response_id }, TextSlot::Reasoning)
            if response_id.as_deref() == rid =>
        {
            Some(content)
        }
        _ => None,
    });
    match last {
        Some(content)
            if block
                && rid.is_some()
                && (text.starts_with(content.as_str()) || text.ends_with(content.as_str()))
                && all.ends_with(content.as_str()) =>
        {
            all.truncate(all.len() - content.len());
            all.push_str(text);
            text.clone_into(content);
        }
        Some(content) => {
            content.push_str(text);
            all.push_str(text);
        }
        None => {
            all.push_str(text);
            let content = text.to_owned();
            let response_id = rid.map(str::to_owned);
            timeline.push(match slot {
                TextSlot::Text => TimelineEntry::Text { content, response_id },
                TextSlot::Reasoning => TimelineEntry::Reasoning { content, response_id },
            });
        }
    }
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
        let mut e = Event::from_json(kind, "r1", agent, 0, payload).unwrap();
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

    /// n8n's reducer's text rules, case by case: what `@n8n/api-types`
    /// 1.41.0's `reduceEvent` gives for each (its text, its timeline).
    #[test]
    fn text_folds_as_n8ns_reducer_folds_it() {
        use Kind::{TextBlock as B, TextDelta as D};
        /// The events of a case, and the text and timeline they fold to.
        type Case<'a> = (&'a [(Kind, &'a str, Option<&'a str>)], &'a str, &'a [(&'a str, Option<&'a str>)]);
        let cases: &[Case] = &[
            (&[(D, "Hel", Some("x")), (D, "lo", Some("x")), (B, "Hello", Some("x"))], "Hello", &[("Hello", Some("x"))]),
            (&[(D, "Hel", Some("x")), (B, "Hello", Some("x"))], "Hello", &[("Hello", Some("x"))]),
            (&[(D, "lo", Some("x")), (B, "Hello", Some("x"))], "Hello", &[("Hello", Some("x"))]),
            (&[(D, "Hel", Some("x")), (B, "World", Some("x"))], "HelWorld", &[("HelWorld", Some("x"))]),
            (&[(B, "A", Some("x")), (B, "A", Some("x"))], "A", &[("A", Some("x"))]),
            (&[(B, "A", Some("x")), (B, "B", Some("x"))], "AB", &[("AB", Some("x"))]),
            (&[(B, "A", Some("x")), (B, "A", Some("y"))], "AA", &[("A", Some("x")), ("A", Some("y"))]),
            (&[(B, "A", None), (B, "A", None)], "AA", &[("AA", None)]),
            (&[(D, "A", Some("x")), (D, "B", Some("y"))], "AB", &[("A", Some("x")), ("B", Some("y"))]),
            (&[(D, "A", None), (D, "B", None)], "AB", &[("AB", None)]),
            (&[(B, "A", Some("x")), (D, "B", Some("x"))], "AB", &[("AB", Some("x"))]),
        ];
        for (events, text, timeline) in cases {
            let mut all = vec![ev(Kind::RunStart, "a", None, json!({"messageId":"m"}))];
            all.extend(events.iter().map(|(k, t, rid)| ev(*k, "a", *rid, json!({ "text": t }))));
            let tree = fold(&all).tree().unwrap();
            let got: Vec<(String, Option<String>)> = tree
                .timeline
                .iter()
                .map(|e| match e {
                    TimelineEntry::Text { content, response_id } => (content.clone(), response_id.clone()),
                    other => panic!("{other:?}"),
                })
                .collect();
            let want: Vec<(String, Option<String>)> =
                timeline.iter().map(|(c, r)| (c.to_string(), r.map(str::to_owned))).collect();
            assert_eq!((tree.text_content.as_str(), got), (*text, want), "{events:?}");
        }
    }

    #[test]
    fn an_error_is_a_line_of_its_agents_text_and_a_cancel_says_why() {
        let t = fold(&[
            ev(Kind::RunStart, "a1", None, json!({"messageId":"m"})),
            ev(Kind::TextBlock, "a1", Some("s1"), json!({"text":"Working"})),
            ev(Kind::Error, "a1", None, json!({"content":"boom","statusCode":500,"provider":"p","code":""})),
            ev(Kind::RunFinish, "a1", None, json!({"status":"error","reason":"LLM provider unavailable"})),
        ])
        .tree()
        .unwrap();
        assert_eq!(t.text_content, "Working\n\n*Error: boom*");
        assert_eq!(t.status, NodeStatus::Error);
        assert_eq!(t.error.as_deref(), Some("boom"), "the error's content, not the finish's reason");
        assert_eq!(t.error_details, Some(json!({"statusCode": 500, "provider": "p"})));
        let quiet = fold(&[
            ev(Kind::RunStart, "a1", None, json!({"messageId":"m"})),
            ev(Kind::Error, "a1", None, json!({"content":"spent","code":"quota_exhausted"})),
        ])
        .tree()
        .unwrap();
        assert_eq!(quiet.text_content, "", "n8n writes no line for its quota code");
        let cancelled = fold(&[
            ev(Kind::RunStart, "a1", None, json!({"messageId":"m"})),
            ev(Kind::RunFinish, "a1", None, json!({"status":"interrupted","reason":"crash_interrupted"})),
        ])
        .tree()
        .unwrap();
        assert_eq!(cancelled.status, NodeStatus::Cancelled);
        assert_eq!(cancelled.cancellation_reason.as_deref(), Some("interrupted"));
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
        assert_eq!(t.tool_calls[0].render_hint, "default");
        assert_eq!(
            t.children[0].timeline,
            vec![TimelineEntry::ToolCall { tool_call_id: "t2".into(), response_id: None }]
        );
        let mut b = b;
        b.apply(&ev(Kind::RunFinish, "a1", None, json!({"status":"cancelled","reason":"user_cancelled"})));
        let t = b.tree().unwrap();
        assert_eq!(t.status, NodeStatus::Cancelled);
        assert_eq!(t.cancellation_reason.as_deref(), Some("user"));
        assert!(!t.children[0].tool_calls[0].is_loading);
        assert_eq!(t.children[0].status, NodeStatus::Active, "a run's end sets its root's status only");
    }
}
