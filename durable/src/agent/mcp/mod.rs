//! Tools from remote MCP servers (`MCP_SERVERS`), for the built-in agent:
//! the servers' configuration, discovery (`tools/list`, cached per isolate
//! with a TTL), each tool's name as the model sees it, calls (`tools/call`)
//! and what their results become. The transport is MCP's Streamable HTTP,
//! over the host's [`Outbound`] (`POST` only; the host carries the bytes):
//!
//! - [`wire`]: the JSON-RPC messages and MCP types, and the answer to a
//!   request read as JSON or as an SSE stream;
//! - [`result`]: a `tools/call` result as the tool's event and as what the
//!   model is told.
//!
//! Invariants enforced here:
//! - A server's session (`Mcp-Session-Id`) and protocol version are kept
//!   per isolate and sent with every request after `initialize`; a server
//!   that forgot the session (404) is initialized again, once per request.
//! - A server that cannot be reached at discovery leaves its tools out; it
//!   never fails a run (the run is told which server is unavailable).
//! - Each tool's name is unique across servers and the agent's other tools,
//!   and a valid function name (`^[a-zA-Z0-9_-]{1,64}$`):
//!   `<server>__<tool>`, cut and suffixed with a hash when it would not be.
//! - A call dropped before it completed (the run was cancelled, its time
//!   ran out) tells its server `notifications/cancelled`.
//! - No borrow of the isolate's cache is held across an `.await`.

pub mod result;
pub mod wire;

use crate::agent::outbound::{ByteStream, Fetch, Outbound};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use wire::{CallResult, Failure, RpcAnswer, Tool};

/// How long a server's tool list is used before it is read again
/// (`MCP_CACHE_TTL_MS`), unless the server says it changed.
pub const DEFAULT_TTL_MS: i64 = 5 * 60 * 1000;
/// A server that could not be reached is not asked again for this long.
const DOWN_RETRY_MS: i64 = 30_000;
/// Each request's time, unless the server's configuration says
/// (`timeoutMs`).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Most pages of `tools/list` read from one server.
const MAX_PAGES: usize = 50;

/// When a server's tool asks a person first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerApproval {
    /// Tools whose annotations say `destructiveHint: true` (and not
    /// `readOnlyHint`) ask; the others run (the default).
    Destructive,
    /// Every tool of the server asks.
    Always,
    /// None asks (`APPROVAL_POLICY` may still require it by name).
    Never,
}

/// One server of `MCP_SERVERS`.
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    pub name: String,
    pub url: String,
    /// Sent with every request; `${NAME}` in a value is the variable
    /// (secret) `NAME`, resolved at start. Never logged, never sent on.
    pub headers: Vec<(String, String)>,
    /// Only these tools (by the server's name); none: all.
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
    pub approval: ServerApproval,
    pub timeout_ms: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Declared {
    name: String,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    approval: Option<ServerApproval>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Parses `MCP_SERVERS` (a JSON array, or a TOML table's value as JSON),
/// with `var` for the secrets its headers name. A server whose entry is
/// invalid is left out with a warning naming it and the problem; the rest
/// are served.
pub fn parse_servers(raw: Option<&Value>, var: &dyn Fn(&str) -> Option<String>) -> (Vec<Server>, Vec<String>) {
    let (mut servers, mut warnings) = (Vec::new(), Vec::new());
    let Some(raw) = raw else { return (servers, warnings) };
    let Some(list) = raw.as_array() else {
        warnings.push("MCP_SERVERS is not a JSON array of servers: no MCP server is used".to_owned());
        return (servers, warnings);
    };
    for (i, entry) in list.iter().enumerate() {
        let label = entry.get("name").and_then(Value::as_str).map_or(format!("#{i}"), |n| format!("`{n}`"));
        match server(entry, var) {
            Ok(s) if servers.iter().any(|o: &Server| o.name == s.name) => {
                warnings.push(format!("MCP_SERVERS: server {label} is named twice; the second is left out"));
            }
            Ok(s) => servers.push(s),
            Err(why) => warnings.push(format!("MCP_SERVERS: server {label} is left out: {why}")),
        }
    }
    (servers, warnings)
}

fn server(entry: &Value, var: &dyn Fn(&str) -> Option<String>) -> Result<Server, String> {
    let d: Declared = serde_json::from_value(entry.clone()).map_err(|e| e.to_string())?;
    let name_ok =
        (1..=32).contains(&d.name.len()) && d.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err("`name` is 1 to 32 of A-Z a-z 0-9 _ -".to_owned());
    }
    if !(d.url.starts_with("https://") || d.url.starts_with("http://")) {
        return Err("`url` is an http(s) URL".to_owned());
    }
    let mut headers = Vec::new();
    for (k, v) in d.headers {
        headers.push((k.to_ascii_lowercase(), resolve_secrets(&v, var)?));
    }
    Ok(Server {
        name: d.name,
        url: d.url,
        headers,
        allow: d.allow,
        deny: d.deny,
        approval: d.approval.unwrap_or(ServerApproval::Destructive),
        timeout_ms: d.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(100, 600_000),
    })
}

/// `${NAME}` in a header value is the variable `NAME`.
fn resolve_secrets(value: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').ok_or("a `${` in a header value has no `}`")? + start;
        let name = &rest[start + 2..end];
        // The variable's name is said, never its value.
        out.push_str(&var(name).ok_or_else(|| format!("a header names the variable `{name}`, which is not set"))?);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A tool of a server, as the agent offers it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// Its function name for the model: unique, valid.
    pub exposed: String,
    pub server: String,
    pub tool: Tool,
    /// Whether its server's rule asks a person first (annotations, the
    /// server's `approval`); `APPROVAL_POLICY` by `exposed` decides over it.
    pub asks: bool,
}

impl McpTool {
    /// The function the model is offered.
    pub fn definition(&self) -> Value {
        let description = match &self.tool.description {
            Some(d) => format!("{d} (MCP server `{}`)", self.server),
            None => format!("{} (MCP server `{}`)", self.tool.label(), self.server),
        };
        json!({ "type": "function", "function": { "name": self.exposed, "description": description, "parameters": self.tool.input_schema } })
    }

    /// How protocols label it (agora's `toolKind`).
    pub fn kind(&self) -> &'static str {
        if self.tool.read_only() {
            "read"
        } else {
            "action"
        }
    }
}

/// What discovery found: the tools, and the servers that could not be
/// asked (and why).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discovered {
    pub tools: Vec<McpTool>,
    pub unavailable: Vec<(String, String)>,
}

impl Discovered {
    pub fn find(&self, exposed: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.exposed == exposed)
    }
}

/// A server's session: its id (none when the server keeps none) and the
/// protocol version it agreed to.
#[derive(Clone, Debug, PartialEq)]
struct Session {
    id: Option<String>,
    version: String,
}

#[derive(Default)]
struct State {
    session: Option<Session>,
    tools: Option<(Vec<Tool>, i64)>,
    stale: bool,
    down: Option<(String, i64)>,
}

/// The MCP servers of a deployment and what this isolate knows of them.
pub struct Registry {
    pub servers: Vec<Server>,
    ttl_ms: i64,
    state: RefCell<BTreeMap<String, State>>,
    next_id: Cell<u64>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        write!(f, "Registry({names:?})")
    }
}

impl Registry {
    pub fn new(servers: Vec<Server>, ttl_ms: i64) -> Registry {
        Registry { servers, ttl_ms, state: RefCell::default(), next_id: Cell::new(1) }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    fn server(&self, name: &str) -> Option<&Server> {
        self.servers.iter().find(|s| s.name == name)
    }

    /// A fresh JSON-RPC request id.
    pub fn next_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Every server's tools, named for the model (`taken`: the names the
    /// agent's other tools hold). Servers are asked at once; a list read
    /// within the TTL is used again.
    pub async fn discover<H: Outbound>(&self, host: &H, taken: &[String]) -> Discovered {
        let lists = futures_util::future::join_all(self.servers.iter().map(|s| self.tools_of(host, s))).await;
        let mut found = Discovered::default();
        let mut names: Vec<String> = taken.to_vec();
        for (server, list) in self.servers.iter().zip(lists) {
            match list {
                Err(why) => found.unavailable.push((server.name.clone(), why)),
                Ok(tools) => {
                    for tool in tools {
                        let allowed = server.allow.as_ref().is_none_or(|a| a.contains(&tool.name));
                        if !allowed || server.deny.contains(&tool.name) {
                            continue;
                        }
                        let exposed = exposed_name(&server.name, &tool.name, &names);
                        names.push(exposed.clone());
                        let asks = match server.approval {
                            ServerApproval::Always => true,
                            ServerApproval::Never => false,
                            ServerApproval::Destructive => tool.destructive(),
                        };
                        found.tools.push(McpTool { exposed, server: server.name.clone(), tool, asks });
                    }
                }
            }
        }
        found
    }

    /// A server's tools: the cached list while it is fresh, else read.
    async fn tools_of<H: Outbound>(&self, host: &H, server: &Server) -> Result<Vec<Tool>, String> {
        let now = host.now();
        {
            let state = self.state.borrow();
            if let Some(s) = state.get(&server.name) {
                if let Some((tools, at)) = &s.tools {
                    if !s.stale && now - at < self.ttl_ms {
                        return Ok(tools.clone());
                    }
                }
                if let Some((why, at)) = &s.down {
                    if now - at < DOWN_RETRY_MS {
                        return Err(why.clone());
                    }
                }
            }
        }
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map_or(json!({}), |c| json!({ "cursor": c }));
            let page = match self.request(host, server, "tools/list", params).await {
                Ok(v) => v,
                Err(f) => {
                    let why = f.to_string();
                    let mut state = self.state.borrow_mut();
                    state.entry(server.name.clone()).or_default().down = Some((why.clone(), host.now()));
                    return Err(why);
                }
            };
            let page: wire::ToolsPage = serde_json::from_value(page).map_err(|e| format!("tools/list: {e}"))?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(c) if !c.is_empty() => cursor = Some(c),
                _ => break,
            }
        }
        let mut state = self.state.borrow_mut();
        let s = state.entry(server.name.clone()).or_default();
        s.tools = Some((tools.clone(), host.now()));
        s.stale = false;
        s.down = None;
        Ok(tools)
    }

    /// Calls `tool` with `args` as request `id` (from [`Registry::next_id`]).
    pub async fn call<H: Outbound>(
        &self,
        host: &H,
        tool: &McpTool,
        args: Value,
        id: u64,
    ) -> Result<CallResult, Failure> {
        let server = self.server(&tool.server).ok_or_else(|| Failure::Transport("no such server".into()))?;
        let params = json!({ "name": tool.tool.name, "arguments": args });
        let result = self.request_as(host, server, "tools/call", params, id).await?;
        serde_json::from_value(result).map_err(|e| Failure::Malformed(format!("tools/call: {e}")))
    }

    /// Tells `server` that request `id` is no longer wanted. Not aborted
    /// with the run: it is how the server learns the run was.
    pub async fn cancelled<H: Outbound>(&self, host: &H, server: &str, id: u64, reason: &str) {
        let Some(server) = self.server(server) else { return };
        let session = self.state.borrow().get(&server.name).and_then(|s| s.session.clone());
        let Some(session) = session else { return };
        let body = wire::notification("notifications/cancelled", json!({ "requestId": id, "reason": reason }));
        let _ = self.post(host, server, Some(&session), body, None, true).await;
    }

    async fn request<H: Outbound>(
        &self,
        host: &H,
        server: &Server,
        method: &str,
        params: Value,
    ) -> Result<Value, Failure> {
        self.request_as(host, server, method, params, self.next_id()).await
    }

    /// A request in the server's session (initialized first when there is
    /// none; again when the server forgot it), within its timeout.
    async fn request_as<H: Outbound>(
        &self,
        host: &H,
        server: &Server,
        method: &str,
        params: Value,
        id: u64,
    ) -> Result<Value, Failure> {
        let body = wire::request(id, method, params);
        let mut again = true;
        loop {
            let known = self.state.borrow().get(&server.name).and_then(|s| s.session.clone());
            let session = match known {
                Some(s) => s,
                None => self.initialize(host, server).await?,
            };
            match self.post(host, server, Some(&session), body.clone(), Some(id), false).await {
                Err(Failure::SessionGone) if again => {
                    again = false;
                    if let Some(s) = self.state.borrow_mut().get_mut(&server.name) {
                        s.session = None;
                    }
                }
                Ok((result, heard)) => {
                    if heard.tools_changed {
                        self.state.borrow_mut().entry(server.name.clone()).or_default().stale = true;
                    }
                    return Ok(result);
                }
                Err(f) => return Err(f),
            }
        }
    }

    /// `initialize`, then `notifications/initialized`: the session kept.
    async fn initialize<H: Outbound>(&self, host: &H, server: &Server) -> Result<Session, Failure> {
        let id = self.next_id();
        let body = wire::request(id, "initialize", wire::initialize_params());
        let fetched = self.send(host, server, None, body, false).await?;
        let session_id = header(&fetched.headers, "mcp-session-id");
        let (result, _) = read_answer(fetched, id).await?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !wire::SUPPORTED_VERSIONS.contains(&version.as_str()) {
            return Err(Failure::Malformed(format!(
                "the server speaks protocol version `{version}`; this client speaks {}",
                wire::SUPPORTED_VERSIONS.join(", ")
            )));
        }
        let session = Session { id: session_id, version };
        let initialized = wire::notification("notifications/initialized", Value::Null);
        self.post(host, server, Some(&session), initialized, None, false).await?;
        self.state.borrow_mut().entry(server.name.clone()).or_default().session = Some(session.clone());
        Ok(session)
    }

    /// A POST in `session`: the answer to request `id`, or, for a
    /// notification (`None`), nothing. Within the server's timeout.
    async fn post<H: Outbound>(
        &self,
        host: &H,
        server: &Server,
        session: Option<&Session>,
        body: String,
        id: Option<u64>,
        detached: bool,
    ) -> Result<(Value, wire::Heard), Failure> {
        let exchange = async {
            let fetched = self.send(host, server, session, body, detached).await?;
            match id {
                Some(id) => read_answer(fetched, id).await,
                None => Ok((Value::Null, wire::Heard::default())),
            }
        };
        let timeout = host.sleep(server.timeout_ms);
        match futures_util::future::select(std::pin::pin!(exchange), std::pin::pin!(timeout)).await {
            futures_util::future::Either::Left((done, _)) => done,
            futures_util::future::Either::Right(_) => {
                Err(Failure::Transport(format!("no answer within {} ms (the server's timeoutMs)", server.timeout_ms)))
            }
        }
    }

    /// One HTTP POST of Streamable HTTP, its status checked.
    async fn send<H: Outbound>(
        &self,
        host: &H,
        server: &Server,
        session: Option<&Session>,
        body: String,
        detached: bool,
    ) -> Result<crate::agent::outbound::Fetched<H::Stream>, Failure> {
        let mut headers = vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
        ];
        if let Some(s) = session {
            headers.push(("mcp-protocol-version".to_owned(), s.version.clone()));
            if let Some(id) = &s.id {
                headers.push(("mcp-session-id".to_owned(), id.clone()));
            }
        }
        headers.extend(server.headers.iter().cloned());
        let req = Fetch { url: server.url.clone(), headers, body, detached };
        let mut fetched = host.post(req).await.map_err(|e| Failure::Transport(format!("could not reach it: {e}")))?;
        match fetched.status {
            200..=299 => Ok(fetched),
            404 if session.is_some_and(|s| s.id.is_some()) => Err(Failure::SessionGone),
            status => {
                let mut text = Vec::new();
                while let Some(Ok(chunk)) = fetched.body.next().await {
                    text.extend_from_slice(&chunk);
                    if text.len() > 500 {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
                Err(Failure::Transport(format!("it answered HTTP {status}: {text}")))
            }
        }
    }
}

/// Reads the answer to request `id` from a response, as it arrives.
async fn read_answer<S: ByteStream>(
    mut fetched: crate::agent::outbound::Fetched<S>,
    id: u64,
) -> Result<(Value, wire::Heard), Failure> {
    let content_type = header(&fetched.headers, "content-type").unwrap_or_default();
    let mut answer = RpcAnswer::new(id, &content_type);
    while let Some(chunk) = fetched.body.next().await {
        let chunk = chunk.map_err(|e| Failure::Transport(format!("the answer was cut off: {e}")))?;
        if let Some(done) = answer.push(&chunk) {
            return done.map(|v| (v, answer.heard.clone()));
        }
    }
    answer.finish().map(|v| (v, answer.heard.clone()))
}

fn header(headers: &[(String, String)], name: &str) -> Option<String> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
}

/// A tool's function name: `<server>__<tool>`, with any character a
/// function name may not hold as `_`; cut and suffixed with a hash of the
/// pair when it is over 64 characters or already `taken`.
pub fn exposed_name(server: &str, tool: &str, taken: &[String]) -> String {
    let clean = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
    };
    let name = format!("{}__{}", clean(server), clean(tool));
    if name.len() <= 64 && !taken.contains(&name) {
        return name;
    }
    let hash = hex::encode(Sha256::digest(format!("{server}\u{0}{tool}").as_bytes()));
    let mut i = 8;
    loop {
        let suffixed = format!("{}_{}", &name[..name.len().min(64 - 1 - i)], &hash[..i]);
        if !taken.contains(&suffixed) || i == 32 {
            return suffixed;
        }
        i += 4;
    }
}

/// The registry shared by every run of an isolate.
pub type Shared = Rc<Registry>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_valid_functions() {
        assert_eq!(exposed_name("notes", "search_notes", &[]), "notes__search_notes");
        assert_eq!(exposed_name("my.server", "do it!", &[]), "my_server__do_it_");
        let long = exposed_name("srv", &"t".repeat(80), &[]);
        assert!(
            long.len() <= 64 && long.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "{long}"
        );
        let taken = vec!["notes__search_notes".to_owned()];
        let other = exposed_name("notes", "search_notes", &taken);
        assert_ne!(other, "notes__search_notes");
        assert!(other.starts_with("notes__search_notes_"));
        // Two tools that clean to the same name stay apart.
        let a = exposed_name("s", "a.b", &[]);
        let b = exposed_name("s", "a_b", std::slice::from_ref(&a));
        assert_ne!(a, b);
    }

    #[test]
    fn configuration_and_its_warnings() {
        let vars = |name: &str| (name == "GITHUB_MCP_TOKEN").then(|| "s3cret".to_owned());
        let raw = json!([
            {"name": "github", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer ${GITHUB_MCP_TOKEN}"}, "allow": ["search"], "approval": "always"},
            {"name": "docs", "url": "http://127.0.0.1:8789/mcp", "deny": ["delete"], "timeoutMs": 5000},
            {"name": "bad name!", "url": "https://x"},
            {"name": "nosecret", "url": "https://x", "headers": {"x-key": "${MISSING_TOKEN}"}},
            {"name": "ftp", "url": "ftp://x"},
            {"name": "docs", "url": "https://dup"},
            {"name": "typo", "url": "https://x", "alow": ["a"]},
        ]);
        let (servers, warnings) = parse_servers(Some(&raw), &vars);
        assert_eq!(servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["github", "docs"]);
        assert_eq!(servers[0].headers, [("authorization".to_owned(), "Bearer s3cret".to_owned())]);
        assert_eq!(servers[0].approval, ServerApproval::Always);
        assert_eq!((servers[1].approval, servers[1].timeout_ms), (ServerApproval::Destructive, 5000));
        assert_eq!(warnings.len(), 5, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("`nosecret`") && w.contains("MISSING_TOKEN")));
        assert!(warnings.iter().all(|w| !w.contains("s3cret")), "a secret is never said");
        assert!(warnings.iter().any(|w| w.contains("`typo`") && w.contains("alow")));
        let (none, warned) = parse_servers(Some(&json!({"name": "x"})), &vars);
        assert!(none.is_empty() && warned.len() == 1);
    }
}
