//! The agent's tools: HTTP tools the deployer declares in `TOOLS`, and the
//! built-in ones (`create-tasks`, `update-tasks`, `spawn-agent`). Arguments are
//! validated against each tool's JSON Schema before anything runs.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

use crate::json_schema::Schema;

pub const CREATE_TASKS: &str = "create-tasks";
pub const UPDATE_TASKS: &str = "update-tasks";
pub const SPAWN_AGENT: &str = "spawn-agent";
pub const ASK_USER: &str = "ask-user";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    #[default]
    Never,
    Required,
}

/// One entry of `TOOLS`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "object_schema")]
    pub parameters: Value,
    pub url: String,
    #[serde(default = "post")]
    pub method: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub approval: Approval,
    #[serde(default)]
    pub severity: Option<String>,
    /// What kind of tool it is for people (`read`, `action`, ...): a call's
    /// `toolKind`. By default `action` when it needs approval, else `read`.
    #[serde(default)]
    pub kind: Option<String>,
}

fn object_schema() -> Value {
    json!({ "type": "object", "properties": {} })
}
fn post() -> String {
    "POST".into()
}
fn default_timeout() -> u64 {
    30_000
}

/// The tools an agent may call, with compiled argument validators.
pub struct Toolbox {
    http: Vec<(HttpTool, Schema)>,
    builtin: Vec<(Value, Schema)>,
}

/// A call resolved to what runs it.
impl ToolKind<'_> {
    /// The call's `toolKind`, as agora's frames name it.
    pub fn label(&self) -> String {
        match self {
            ToolKind::Http(t) => t
                .kind
                .clone()
                .unwrap_or_else(|| if t.approval == Approval::Required { "action" } else { "read" }.to_owned()),
            ToolKind::CreateTasks | ToolKind::UpdateTasks | ToolKind::SpawnAgent => "builtin".to_owned(),
            ToolKind::AskUser => "question".to_owned(),
            ToolKind::Client(_) => "client".to_owned(),
            ToolKind::Mcp(t) => t.kind().to_owned(),
        }
    }
}

pub enum ToolKind<'a> {
    Http(&'a HttpTool),
    /// A tool of a remote MCP server.
    Mcp(&'a crate::agent::mcp::McpTool),
    CreateTasks,
    UpdateTasks,
    SpawnAgent,
    /// Asks the person a question; its answer is the result.
    AskUser,
    /// A tool the client declared: the client runs it.
    Client(&'a ClientTool),
}

/// A tool the client declared with its request (AG-UI's `tools`, the AI
/// SDK's client-side tools): offered to the model beside the server's own;
/// a call waits, like a confirmation, for the client to send its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    json!({ "type": "object", "properties": {} })
}

/// Most tools a client may declare with one request.
pub const MAX_CLIENT_TOOLS: usize = 64;

fn builtin_definitions() -> Vec<Value> {
    let task = json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "description": { "type": "string" },
            "detail": { "type": "string" },
            "status": { "type": "string", "enum": ["todo", "in_progress", "done", "failed", "cancelled"] }
        },
        "required": ["id"]
    });
    vec![
        json!({
            "name": CREATE_TASKS,
            "description": "Create the task checklist for this request (replaces any previous list). Each task needs an id and a description.",
            "parameters": { "type": "object", "properties": { "tasks": { "type": "array", "items": task } }, "required": ["tasks"] }
        }),
        json!({
            "name": UPDATE_TASKS,
            "description": "Update tasks of the checklist by id (status, description or detail).",
            "parameters": { "type": "object", "properties": { "tasks": { "type": "array", "items": task } }, "required": ["tasks"] }
        }),
        json!({
            "name": ASK_USER,
            "description": "Ask the user and wait for the answer: an approval, free text, structured questions or a plan review. The answer is this tool's result.",
            "parameters": {
                "type": "object",
                "properties": {
                    "message": { "type": "string" },
                    "inputType": { "type": "string", "enum": ["approval", "text", "questions", "plan-review"] },
                    "questions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": { "type": "string" },
                                "question": { "type": "string" },
                                "type": { "type": "string", "enum": ["single", "multi", "text"] },
                                "options": { "type": "array", "items": { "type": "string" } }
                            },
                            "required": ["id", "question", "type"]
                        }
                    },
                    "introMessage": { "type": "string" },
                    "tasks": {},
                    "severity": { "type": "string", "enum": ["destructive", "warning", "info"] }
                },
                "required": ["message"]
            }
        }),
        json!({
            "name": SPAWN_AGENT,
            "description": "Start a sub-agent with its own role, instructions and a subset of the tools. Its final answer is this tool's result. With background: true it runs on after this reply and the result is a task id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "role": { "type": "string" },
                    "instructions": { "type": "string" },
                    "tools": { "type": "array", "items": { "type": "string" } },
                    "background": { "type": "boolean" }
                },
                "required": ["role", "instructions"]
            }
        }),
    ]
}

/// Checks a client tool's arguments against its `parameters`.
pub fn validate_client(tool: &ClientTool, args: &Value) -> Result<(), String> {
    validate(&compile(&tool.name, &tool.parameters)?, args)
}

fn compile(name: &str, schema: &Value) -> Result<Schema, String> {
    Schema::compile(schema).map_err(|e| format!("tool `{name}`: `parameters` is not a valid JSON Schema: {e}"))
}

impl Toolbox {
    /// Parses `TOOLS` (a JSON array; empty or absent means no HTTP tools).
    pub fn parse(tools_json: Option<&str>) -> Result<Toolbox, String> {
        let declared: Vec<HttpTool> = match tools_json.map(str::trim).filter(|s| !s.is_empty()) {
            None => Vec::new(),
            Some(s) => serde_json::from_str(s).map_err(|e| format!("TOOLS is not a valid tool list: {e}"))?,
        };
        let mut http = Vec::with_capacity(declared.len());
        for t in declared {
            if t.name.is_empty() || !t.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                return Err(format!("TOOLS: tool name `{}` must be letters, digits, `_` or `-`", t.name));
            }
            if [CREATE_TASKS, UPDATE_TASKS, SPAWN_AGENT, ASK_USER].contains(&t.name.as_str())
                || http.iter().any(|(h, _): &(HttpTool, _)| h.name == t.name)
            {
                return Err(format!("TOOLS: tool name `{}` is taken", t.name));
            }
            if !(t.url.starts_with("https://") || t.url.starts_with("http://")) {
                return Err(format!("TOOLS: tool `{}` needs an http(s) url", t.name));
            }
            let v = compile(&t.name, &t.parameters)?;
            http.push((t, v));
        }
        let builtin = builtin_definitions()
            .into_iter()
            .map(|d| compile(d["name"].as_str().unwrap_or_default(), &d["parameters"]).map(|v| (d, v)))
            .collect::<Result<_, _>>()?;
        Ok(Toolbox { http, builtin })
    }

    /// Checks the tools a client declared: names like `TOOLS`' and none
    /// taken by the server's tools, `parameters` a JSON Schema.
    pub fn client_tools(&self, declared: &[Value]) -> Result<Vec<ClientTool>, String> {
        if declared.len() > MAX_CLIENT_TOOLS {
            return Err(format!("at most {MAX_CLIENT_TOOLS} client tools"));
        }
        let mut out: Vec<ClientTool> = Vec::with_capacity(declared.len());
        for d in declared {
            let t: ClientTool = serde_json::from_value(d.clone()).map_err(|e| format!("a client tool: {e}"))?;
            if t.name.is_empty()
                || t.name.len() > 64
                || !t.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(format!("client tool name `{}` must be 1 to 64 letters, digits, `_` or `-`", t.name));
            }
            let taken = [CREATE_TASKS, UPDATE_TASKS, SPAWN_AGENT, ASK_USER].contains(&t.name.as_str())
                || self.http.iter().any(|(h, _)| h.name == t.name)
                || out.iter().any(|c| c.name == t.name);
            if taken {
                return Err(format!("client tool name `{}` is taken", t.name));
            }
            compile(&t.name, &t.parameters)?;
            out.push(t);
        }
        Ok(out)
    }

    pub fn http_names(&self) -> Vec<String> {
        self.http.iter().map(|(t, _)| t.name.clone()).collect()
    }

    /// The OpenAI `tools` array: the HTTP tools `allowed` names (all when
    /// `None`), plus the built-ins for the orchestrator.
    pub fn definitions(&self, allowed: Option<&[String]>, builtins: bool) -> Vec<Value> {
        let mut defs: Vec<Value> = self
            .http
            .iter()
            .filter(|(t, _)| allowed.is_none_or(|a| a.contains(&t.name)))
            .map(|(t, _)| {
                json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } })
            })
            .collect();
        if builtins {
            defs.extend(self.builtin.iter().map(|(d, _)| json!({ "type": "function", "function": d })));
        }
        defs
    }

    /// Resolves `name` for an agent allowed `allowed` tools (all when `None`;
    /// built-ins only for the orchestrator), validating `args`.
    pub fn resolve(
        &self,
        name: &str,
        args: &Value,
        allowed: Option<&[String]>,
        builtins: bool,
    ) -> Result<ToolKind<'_>, String> {
        if builtins {
            if let Some((_, v)) = self.builtin.iter().find(|(d, _)| d["name"] == name) {
                validate(v, args)?;
                return Ok(match name {
                    CREATE_TASKS => ToolKind::CreateTasks,
                    UPDATE_TASKS => ToolKind::UpdateTasks,
                    ASK_USER => ToolKind::AskUser,
                    _ => ToolKind::SpawnAgent,
                });
            }
        }
        let found = self.http.iter().find(|(t, _)| t.name == name && allowed.is_none_or(|a| a.contains(&t.name)));
        let Some((tool, v)) = found else {
            return Err(format!("there is no tool named `{name}` available to this agent"));
        };
        validate(v, args)?;
        Ok(ToolKind::Http(tool))
    }
}

fn validate(v: &Schema, args: &Value) -> Result<(), String> {
    v.check(args, 5).map_err(|failed| format!("invalid arguments: {failed}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A built-in tool whose schema did not compile would refuse every
    /// built-in run (503 `invalid_tools`): caught here, not in production.
    #[test]
    fn every_built_in_schema_compiles() {
        for d in builtin_definitions() {
            let name = d["name"].as_str().unwrap();
            assert!(compile(name, &d["parameters"]).is_ok(), "{name}");
        }
        assert_eq!(Toolbox::parse(None).unwrap().builtin.len(), builtin_definitions().len());
    }

    const TOOLS: &str = r#"[{"name":"weather","description":"Weather","url":"http://x.test/w",
        "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]"#;

    #[test]
    fn parses_and_validates() {
        let tb = Toolbox::parse(Some(TOOLS)).unwrap();
        assert!(matches!(tb.resolve("weather", &json!({"city":"Oslo"}), None, true), Ok(ToolKind::Http(_))));
        let err = tb.resolve("weather", &json!({"city":3}), None, true).err().unwrap();
        assert!(err.contains("invalid arguments"), "{err}");
        assert!(tb.resolve("weather", &json!({}), None, true).is_err());
        assert!(tb.resolve("nope", &json!({}), None, true).is_err());
        assert!(tb.resolve("weather", &json!({"city":"x"}), Some(&[]), false).is_err(), "not allowed");
        assert!(matches!(
            tb.resolve(SPAWN_AGENT, &json!({"role":"r","instructions":"i"}), None, true),
            Ok(ToolKind::SpawnAgent)
        ));
        assert!(
            tb.resolve(SPAWN_AGENT, &json!({"role":"r","instructions":"i"}), None, false).is_err(),
            "sub-agents cannot spawn"
        );
        assert_eq!(tb.definitions(None, true).len(), 5);
        assert_eq!(tb.definitions(Some(&[]), false).len(), 0);
    }

    #[test]
    fn refuses_bad_declarations() {
        for bad in [
            "{",
            r#"[{"name":"x"}]"#,
            r#"[{"name":"a b","url":"http://x"}]"#,
            r#"[{"name":"spawn-agent","url":"http://x"}]"#,
            r#"[{"name":"x","url":"ftp://x"}]"#,
            r#"[{"name":"x","url":"http://x","parameters":{"type":12}}]"#,
            r#"[{"name":"x","url":"http://x","approval":"sometimes"}]"#,
        ] {
            assert!(Toolbox::parse(Some(bad)).is_err(), "{bad}");
        }
        assert!(Toolbox::parse(None).unwrap().http_names().is_empty());
    }
}
