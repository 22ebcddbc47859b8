//! The deployment's configuration, read from `wrangler.toml` vars and
//! secrets through a lookup the shell supplies (`env.var(name)` on workerd, a
//! map in tests). Every variable, its default and meaning is in
//! docs/configuration.md; this is the one place that reads them.
//!
//! Invalid values never fail the read: a variable that cannot be parsed is
//! kept as the reason a request is refused later (503 with its own code), so
//! a deployment with a typo answers clearly instead of failing to start.

use crate::agent::models::Catalog;
use crate::agent::personas::Agents;
use crate::agent::quota::Quota;
use crate::agent::tools::Toolbox;
use crate::agent::AgentConfig;
use crate::auth::AuthMode;
use crate::storage::store::Driver;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Tunables of a thread.
#[derive(Clone, Debug)]
pub struct Config {
    /// A run with no published event for this long ends with `timeout`.
    pub run_idle_timeout_ms: i64,
    /// After the object restarts, a run still open that publishes nothing for
    /// this long is swept as `crash_interrupted`.
    pub restart_grace_ms: i64,
    /// Most records read per replay page.
    pub replay_page: usize,
    /// `APPROVAL_POLICY`: TTL and approver role per tool.
    pub approval_policy: Policy,
    /// Who drives the runs this thread starts from its queue.
    pub driver: Driver,
    /// Largest serialised payload of one published event (413 beyond); under
    /// SQLite's 2 MB row limit.
    pub max_event_bytes: usize,
    /// Largest stored queue, as JSON (`MAX_QUEUE_BYTES`).
    pub max_queue_bytes: usize,
    /// `QUOTA`'s period, when budgets are kept.
    pub quota_period: Option<crate::agent::quota::Period>,
    /// Spans are exported (`OTEL_EXPORTER_OTLP_ENDPOINT`): the thread
    /// records its runs' and decisions' spans.
    pub tracing: bool,
    /// `WEBHOOKS`' endpoints: what the thread's deliveries go to.
    pub webhooks: Rc<Vec<crate::notify::Endpoint>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            run_idle_timeout_ms: 10 * 60_000,
            restart_grace_ms: 30_000,
            replay_page: 512,
            approval_policy: Policy::default(),
            driver: Driver::Webhook,
            max_event_bytes: 1_000_000,
            max_queue_bytes: 1_000_000,
            quota_period: None,
            tracing: false,
            webhooks: Rc::default(),
        }
    }
}

/// Where the built-in agent's model answers: `{base}/chat/completions`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelEndpoint {
    pub base_url: String,
    pub api_key: Option<String>,
}

/// Size and count limits of requests (each with its own refusal code).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest chat, decision or queue body (413 `body_too_large`).
    pub max_body_bytes: usize,
    /// Largest chat message (413 `message_too_large`).
    pub max_message_bytes: usize,
    /// Largest publish body (413 `body_too_large`).
    pub max_batch_bytes: usize,
    /// Most events per publish batch (413 `batch_too_large`).
    pub max_batch_events: usize,
    /// SSE and run-stream subscribers per thread (429 beyond).
    pub max_subscribers: usize,
}

/// Who may use `/v1/stream/*` (`STREAMS_AUTH`). Streams have no owner, so
/// the route is off unless the deployment says who its callers are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamsAuth {
    /// Unset: the route does not exist (404).
    Off,
    /// `none`: anyone, no token (a server of public streams, the
    /// conformance suite).
    Open,
    /// `jwt`: callers the Worker's authentication accepts that hold this
    /// role (`STREAMS_ROLE`, default `streams`): trusted services.
    Role(String),
    /// Any other value: every request is refused (503), never opened.
    Invalid(String),
}

#[derive(Clone)]
pub struct Settings {
    pub thread: Config,
    /// Where external agents get their start and cancel signals.
    pub webhook_url: Option<String>,
    /// The origin publish URLs are built on.
    pub public_url: Option<String>,
    pub debug_routes: bool,
    /// `DEBUG_WAKES=1`: objects store how many events they handled, so a
    /// test or benchmark can count wakes across evictions (a storage write
    /// per event: never in production).
    pub debug_wakes: bool,
    /// Keep-alive comment interval on SSE responses.
    pub ping_ms: u64,
    pub limits: Limits,
    /// The built-in agent, when no webhook is set.
    pub agent: AgentConfig,
    /// `LLM_BASE_URL` and `LLM_API_KEY`; `None` without a base URL.
    pub llm: Option<ModelEndpoint>,
    /// `TOOLS`, parsed once; the error refuses built-in runs (503 `invalid_tools`).
    pub tools: Result<Rc<Toolbox>, String>,
    /// Alarm interval that keeps the object alive while the built-in agent runs.
    pub heartbeat_ms: i64,
    /// Why `APPROVAL_POLICY` could not be read: runs are refused rather than
    /// run tools without the approvals it asks for.
    pub policy_error: Option<String>,
    /// `LLM_MODELS` (or the one `LLM_MODEL`); an invalid catalog refuses sends.
    pub catalog: Result<Catalog, String>,
    /// `AGENTS` (with its `default`); an invalid one refuses sends.
    pub agents: Result<Agents, String>,
    /// `QUOTA`: per-actor budgets (`None`: no limit); an invalid one
    /// refuses sends rather than run without the limit it asks for.
    pub quota: Result<Option<Quota>, String>,
    /// `AGENT_MESSAGE_TIMESTAMPS=1`: the model is told when each user
    /// message was sent (`messageTimestamps`).
    pub message_timestamps: bool,
    /// API keys of catalog models that name their own (`keyName`).
    pub model_keys: BTreeMap<String, String>,
    /// How callers are authenticated.
    pub auth: AuthMode,
    /// The key stream tokens are signed with: `STREAM_TOKEN_SECRET`, else
    /// `AUTH_JWT_SECRET`, else (dev mode only) a fixed development key.
    pub stream_key: Option<Vec<u8>>,
    /// `ALLOWED_ORIGINS`: origins browsers may call from (`*` for any).
    pub allowed_origins: Vec<String>,
    /// Sends per actor per minute (429 with `Retry-After` beyond; 0: no limit).
    pub runs_per_minute: i64,
    /// Idle threads are deleted after this long (0: never).
    pub thread_ttl_ms: i64,
    pub streams_auth: StreamsAuth,
    /// How long a Durable Streams long-poll waits before its 204.
    pub streams_long_poll_ms: u64,
    /// How long a stream token is valid; a stream it opened ends with it.
    pub stream_token_ttl_ms: i64,
    /// How long the external agent's webhook may take to answer.
    pub webhook_timeout_ms: u64,
    /// What files a message may carry (`MAX_FILE_BYTES`,
    /// `MAX_FILES_PER_MESSAGE`, `FILE_TYPES`, `FILE_GRACE_MS`).
    pub files: crate::files::FileLimits,
    /// Why `FILE_TYPES` could not be read (the default types apply).
    pub file_types_error: Option<String>,
    /// `MCP_SERVERS`: the remote MCP servers whose tools the built-in agent
    /// uses, and what this isolate knows of them (sessions, tool lists).
    pub mcp: crate::agent::mcp::Shared,
    /// Why servers of `MCP_SERVERS` were left out.
    pub mcp_warnings: Vec<String>,
    /// Variables of the wrong type (a table where text was expected, a
    /// number where JSON was): each said at start-up.
    pub type_errors: Vec<String>,
    /// `AGORA_PATH` as given: where agora's routes are mounted (agora's
    /// `config.path`); the agora protocol reads and checks it
    /// (`protocols::agora::mount`).
    pub agora_path: Option<String>,
    /// `agora_path` read and checked, once per isolate: the check walks every
    /// protocol's route table, which a request must not pay for.
    pub agora_mount: std::cell::OnceCell<Result<String, String>>,
    /// Where spans go (`OTEL_EXPORTER_OTLP_*`); `None`: traces are off.
    pub otlp: Option<crate::trace::Otlp>,
    /// Why the OTLP variables could not be read (traces are off).
    pub otlp_error: Option<String>,
    /// `WEBHOOKS` and how deliveries are made (`WEBHOOKS_*`); why the list
    /// cannot be used (no endpoint is called; said at start-up).
    pub webhooks: Result<crate::notify::Policy, String>,
    /// Who may list and replay the webhooks' dead letters (`ADMIN_ROLE`,
    /// default `admin`).
    pub admin_role: String,
}

/// A variable as the platform hands it over. A secret is always text; a
/// `[vars]` entry in `wrangler.toml` may be any TOML value, and a table or
/// array reaches the Worker as an object, a number as a number.
#[derive(Clone, Debug, PartialEq)]
pub enum Var {
    Text(String),
    Value(serde_json::Value),
}

/// The variables whose value is JSON: each may be written as a JSON string
/// or as a TOML table (or array) in `[vars]`.
pub const JSON_VARS: &[&str] =
    &["TOOLS", "MCP_SERVERS", "APPROVAL_POLICY", "LLM_MODELS", "AGENTS", "QUOTA", "AUTH_JWKS", "WEBHOOKS"];

/// The variables whose value is text (or a number or boolean, as written).
/// With [`JSON_VARS`] and [`AUTH_VARS`], every variable docs/configuration.md
/// names (a test holds the two lists equal).
const VARS: &[&str] = &[
    "WEBHOOKS_ALLOW_PRIVATE",
    "WEBHOOKS_MAX_ATTEMPTS",
    "WEBHOOKS_RETRY_SECONDS",
    "WEBHOOKS_TIMEOUT_MS",
    "ADMIN_ROLE",
    "LLM_BASE_URL",
    "LLM_API_KEY",
    "LLM_MODEL",
    "LLM_MODEL_INPUT",
    "LLM_STALL_TIMEOUT_MS",
    "AGENT_MAX_STEPS",
    "AGENT_CONTEXT_WINDOW",
    "AGENT_COMPACT_AT",
    "AGENT_TOOL_RESULT_AGE_TURNS",
    "AGENT_TOOL_RESULT_AGE_BYTES",
    "AGENT_SYSTEM_PROMPT",
    "AGENT_HEARTBEAT_MS",
    "MCP_CACHE_TTL_MS",
    "OUTPUT_CHECK_URL",
    "AGENT_MESSAGE_TIMESTAMPS",
    "AGENT_WEBHOOK_URL",
    "AGENT_WEBHOOK_TIMEOUT_MS",
    "PUBLIC_URL",
    "AGORA_PATH",
    "RUN_IDLE_TIMEOUT_MS",
    "RUN_RESTART_GRACE_MS",
    "SSE_PING_MS",
    "MAX_BODY_BYTES",
    "MAX_FILE_BYTES",
    "MAX_FILES_PER_MESSAGE",
    "FILE_TYPES",
    "FILE_GRACE_MS",
    "MAX_MESSAGE_BYTES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_EVENTS",
    "MAX_QUEUE_BYTES",
    "MAX_TOOL_RESULT_BYTES",
    "MAX_MODEL_BYTES",
    "MAX_SUBSCRIBERS",
    "MAX_EVENT_BYTES",
    "DEBUG_ROUTES",
    "DEBUG_WAKES",
    "ALLOWED_ORIGINS",
    "RUNS_PER_MINUTE",
    "THREAD_TTL_DAYS",
    "STREAMS_AUTH",
    "STREAMS_ROLE",
    "STREAM_TOKEN_TTL_MS",
    "STREAMS_LONG_POLL_MS",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_SERVICE_NAME",
];

/// The variables that decide who may do what: one of the wrong type refuses
/// every request (503 `auth_misconfigured`) rather than run without it.
const AUTH_VARS: &[&str] =
    &["AUTH_MODE", "AUTH_JWT_SECRET", "AUTH_JWKS", "AUTH_ISSUER", "AUTH_AUDIENCE", "STREAM_TOKEN_SECRET"];

/// The text a variable is read as, or why its type is wrong.
///
/// A JSON variable takes text, a table or an array (serialised back to
/// JSON); a scalar takes text, a number or a boolean (as written). Anything
/// else is refused here, with a reason naming the variable, and never read
/// as unset without a word: an `APPROVAL_POLICY` written as a number must
/// not become "no approvals".
fn var_text(name: &str, var: Var) -> Result<String, String> {
    use serde_json::Value;
    let json = JSON_VARS.contains(&name);
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    };
    match var {
        Var::Text(t) => Ok(t),
        Var::Value(Value::String(t)) => Ok(t),
        Var::Value(v @ (Value::Object(_) | Value::Array(_))) if json => Ok(v.to_string()),
        Var::Value(v @ (Value::Number(_) | Value::Bool(_))) if !json => Ok(v.to_string()),
        Var::Value(v) if json => {
            Err(format!("{name} is {}: it must be JSON, as a string or a TOML table in [vars]", kind(&v)))
        }
        Var::Value(v) => Err(format!("{name} is {}: it must be a string (or a number)", kind(&v))),
    }
}

/// A share of a whole, written `0.75`, `75` or `75%` (`AGENT_COMPACT_AT`):
/// within 10% and 100%, else `None` (the default holds).
fn share(text: Option<&str>) -> Option<f64> {
    let text = text?.trim();
    let (n, percent) = match text.strip_suffix('%') {
        Some(n) => (n.trim().parse::<f64>().ok()?, true),
        None => (text.parse::<f64>().ok()?, false),
    };
    let n = if percent || n > 1.0 { n / 100.0 } else { n };
    (0.1..=1.0).contains(&n).then_some(n)
}

impl Settings {
    /// Reads every variable through `var` (an unset or blank variable is `None`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Settings {
        Settings::from_env(|name| var(name).map(Var::Text))
    }

    /// Reads every variable as the platform hands it over ([`Var`]). A
    /// variable of the wrong type is a start-up warning naming it and is
    /// otherwise read as unset, except where that would loosen a rule: a
    /// JSON variable keeps its parse error (each refuses what it governs with
    /// its own 503), and an authentication variable refuses every request.
    pub fn from_env(var: impl Fn(&str) -> Option<Var>) -> Settings {
        let type_errors: Vec<(String, String)> = JSON_VARS
            .iter()
            .chain(AUTH_VARS)
            .copied()
            .chain(VARS.iter().copied())
            .filter_map(|name| Some((name.to_owned(), var_text(name, var(name)?).err()?)))
            .fold(Vec::new(), |mut out, e| {
                if !out.contains(&e) {
                    out.push(e);
                }
                out
            });
        let var = |name: &str| match var(name).map(|v| var_text(name, v)) {
            Some(Ok(t)) => Some(t).filter(|v| !v.trim().is_empty()),
            // A JSON variable of the wrong type is read as its literal, so
            // its own parser refuses it (`5` is not a policy).
            Some(Err(_)) if JSON_VARS.contains(&name) => match var(name) {
                Some(Var::Value(v)) => Some(v.to_string()),
                _ => None,
            },
            _ => None,
        };
        let num = |name: &str, default: i64| -> i64 {
            var(name).and_then(|v| v.trim().parse().ok()).filter(|n: &i64| *n >= 0).unwrap_or(default)
        };
        let defaults = Config::default();
        let policy = Policy::parse(var("APPROVAL_POLICY").as_deref());
        let webhooks = {
            let allow_private = var("WEBHOOKS_ALLOW_PRIVATE").is_some_and(|v| v == "1" || v == "true");
            let d = crate::notify::Policy::default();
            crate::notify::endpoints(var("WEBHOOKS").as_deref(), allow_private).map(|endpoints| crate::notify::Policy {
                endpoints,
                max_attempts: num("WEBHOOKS_MAX_ATTEMPTS", i64::from(d.max_attempts)).clamp(1, 50) as u32,
                retry_s: num("WEBHOOKS_RETRY_SECONDS", i64::from(d.retry_s)).clamp(1, 3600) as u32,
                timeout_ms: num("WEBHOOKS_TIMEOUT_MS", d.timeout_ms as i64).clamp(100, 60_000) as u64,
                allow_private,
            })
        };

        let auth = match type_errors.iter().find(|(name, _)| AUTH_VARS.contains(&name.as_str())) {
            Some((_, why)) => AuthMode::Invalid(why.clone()),
            None => AuthMode::from_config(
                var("AUTH_MODE").as_deref(),
                var("AUTH_JWT_SECRET").as_deref(),
                var("AUTH_JWKS").as_deref(),
                var("AUTH_ISSUER").as_deref(),
                var("AUTH_AUDIENCE").as_deref(),
            ),
        };
        let stream_key = var("STREAM_TOKEN_SECRET")
            .or_else(|| var("AUTH_JWT_SECRET"))
            .map(String::into_bytes)
            .or_else(|| matches!(auth, AuthMode::Dev).then(|| b"threadline-development-stream-key".to_vec()));
        let agent_defaults = AgentConfig::default();
        let single = var("LLM_MODEL").unwrap_or_else(|| agent_defaults.model.clone());
        let catalog = Catalog::parse(var("LLM_MODELS").as_deref(), &single, var("LLM_MODEL_INPUT").as_deref());
        let file_types = var("FILE_TYPES").map(|t| crate::files::Types::parse(&t)).transpose();
        let file_defaults = crate::files::FileLimits::default();
        let model_keys = catalog
            .as_ref()
            .map(|c| c.models.iter().filter_map(|(id, m)| Some((id.clone(), var(m.key_name.as_deref()?)?))).collect())
            .unwrap_or_default();
        let webhook_url = var("AGENT_WEBHOOK_URL");
        let tools = Toolbox::parse(var("TOOLS").as_deref()).map(Rc::new);
        let quota = Quota::parse(var("QUOTA").as_deref());
        let quota_period = quota.as_ref().ok().and_then(|q| q.as_ref().map(|q| q.period));
        let mcp_raw = var("MCP_SERVERS").map(|raw| serde_json::from_str::<serde_json::Value>(&raw));
        let (mcp_servers, mut mcp_warnings) = match &mcp_raw {
            Some(Ok(v)) => crate::agent::mcp::parse_servers(Some(v), &var),
            Some(Err(e)) => (Vec::new(), vec![format!("MCP_SERVERS is not valid JSON ({e}): no MCP server is used")]),
            None => (Vec::new(), Vec::new()),
        };
        mcp_warnings.shrink_to_fit();
        let mut known_tools = tools.as_ref().map(|t| t.http_names()).unwrap_or_default();
        known_tools.extend(mcp_servers.iter().map(|s| format!("{}__*", s.name)));
        let agents = match &catalog {
            Ok(c) => Agents::parse(var("AGENTS").as_deref(), c, &known_tools),
            Err(e) => Err(e.clone()),
        };
        let mcp_ttl = num("MCP_CACHE_TTL_MS", crate::agent::mcp::DEFAULT_TTL_MS);
        let otlp = crate::trace::Otlp::from_vars(
            var("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").as_deref(),
            var("OTEL_EXPORTER_OTLP_HEADERS").as_deref(),
            var("OTEL_SERVICE_NAME").as_deref(),
        );
        Settings {
            agora_path: var("AGORA_PATH"),
            agora_mount: std::cell::OnceCell::new(),
            otlp: otlp.clone().ok().flatten(),
            otlp_error: otlp.clone().err(),
            type_errors: type_errors.into_iter().map(|(_, why)| why).collect(),
            mcp: Rc::new(crate::agent::mcp::Registry::new(mcp_servers, mcp_ttl)),
            mcp_warnings,
            files: crate::files::FileLimits {
                max_file_bytes: num("MAX_FILE_BYTES", file_defaults.max_file_bytes as i64).max(1) as usize,
                max_files: num("MAX_FILES_PER_MESSAGE", file_defaults.max_files as i64).max(1) as usize,
                types: file_types.clone().ok().flatten().unwrap_or_default(),
                grace_ms: num("FILE_GRACE_MS", file_defaults.grace_ms).max(1_000),
            },
            file_types_error: file_types.err(),
            agents,
            quota,
            message_timestamps: var("AGENT_MESSAGE_TIMESTAMPS").is_some_and(|v| v == "1" || v == "true"),
            thread: Config {
                run_idle_timeout_ms: num("RUN_IDLE_TIMEOUT_MS", defaults.run_idle_timeout_ms),
                restart_grace_ms: num("RUN_RESTART_GRACE_MS", defaults.restart_grace_ms),
                replay_page: defaults.replay_page,
                approval_policy: policy.clone().unwrap_or_default(),
                max_event_bytes: num("MAX_EVENT_BYTES", defaults.max_event_bytes as i64).min(1_900_000) as usize,
                driver: if webhook_url.is_some() { Driver::Webhook } else { Driver::Builtin },
                max_queue_bytes: num("MAX_QUEUE_BYTES", defaults.max_queue_bytes as i64).clamp(1_000, 1_500_000)
                    as usize,
                quota_period,
                tracing: otlp.as_ref().is_ok_and(Option::is_some),
                webhooks: webhooks.as_ref().map(|p| Rc::new(p.endpoints.clone())).unwrap_or_default(),
            },
            policy_error: policy.err(),
            model_keys,
            catalog,
            auth,
            stream_key,
            allowed_origins: var("ALLOWED_ORIGINS")
                .map(|v| {
                    v.split(',').map(|o| o.trim().trim_end_matches('/').to_owned()).filter(|o| !o.is_empty()).collect()
                })
                .unwrap_or_default(),
            runs_per_minute: num("RUNS_PER_MINUTE", 60),
            thread_ttl_ms: var("THREAD_TTL_DAYS")
                .and_then(|d| d.trim().parse::<f64>().ok())
                .filter(|d| *d >= 0.0)
                .map_or(90 * 86_400_000, |d| (d * 86_400_000.0) as i64),
            streams_auth: match var("STREAMS_AUTH").as_deref().map(str::trim) {
                None => StreamsAuth::Off,
                Some("none") => StreamsAuth::Open,
                Some("jwt") => StreamsAuth::Role(var("STREAMS_ROLE").map_or("streams".into(), |r| r.trim().to_owned())),
                Some(other) => StreamsAuth::Invalid(format!("STREAMS_AUTH `{other}` is not one of none, jwt")),
            },
            stream_token_ttl_ms: num("STREAM_TOKEN_TTL_MS", crate::auth::STREAM_TOKEN_TTL_MS).max(1_000),
            webhook_timeout_ms: num("AGENT_WEBHOOK_TIMEOUT_MS", 10_000).max(100) as u64,
            streams_long_poll_ms: num("STREAMS_LONG_POLL_MS", 20_000).max(100) as u64,
            webhooks,
            admin_role: var("ADMIN_ROLE").map_or("admin".into(), |r| r.trim().to_owned()),
            webhook_url,
            public_url: var("PUBLIC_URL").map(|u| u.trim().trim_end_matches('/').to_owned()),
            debug_routes: var("DEBUG_ROUTES").is_some_and(|v| v == "1" || v == "true"),
            debug_wakes: var("DEBUG_WAKES").is_some_and(|v| v == "1" || v == "true"),
            ping_ms: num("SSE_PING_MS", crate::wire::sse::PING_INTERVAL_MS as i64).max(100) as u64,
            limits: Limits {
                max_body_bytes: num("MAX_BODY_BYTES", 256 * 1024) as usize,
                max_message_bytes: num("MAX_MESSAGE_BYTES", 32 * 1024) as usize,
                max_batch_bytes: num("MAX_BATCH_BYTES", 1024 * 1024) as usize,
                max_batch_events: num("MAX_BATCH_EVENTS", 1000) as usize,
                max_subscribers: num("MAX_SUBSCRIBERS", 1000) as usize,
            },
            agent: AgentConfig {
                model: var("LLM_MODEL").unwrap_or(agent_defaults.model),
                max_steps: num("AGENT_MAX_STEPS", agent_defaults.max_steps as i64).max(1) as u32,
                stall_timeout_ms: num("LLM_STALL_TIMEOUT_MS", agent_defaults.stall_timeout_ms as i64).max(1) as u64,
                system_prompt: var("AGENT_SYSTEM_PROMPT").unwrap_or(agent_defaults.system_prompt),
                context_window: num("AGENT_CONTEXT_WINDOW", agent_defaults.context_window as i64).max(256) as u64,
                compact_at: share(var("AGENT_COMPACT_AT").as_deref()).unwrap_or(agent_defaults.compact_at),
                age_turns: num("AGENT_TOOL_RESULT_AGE_TURNS", agent_defaults.age_turns as i64).max(0) as usize,
                age_bytes: num("AGENT_TOOL_RESULT_AGE_BYTES", agent_defaults.age_bytes as i64).max(100) as usize,
                max_tool_result_bytes: num("MAX_TOOL_RESULT_BYTES", agent_defaults.max_tool_result_bytes as i64)
                    .clamp(1_000, 900_000) as usize,
                max_model_bytes: num("MAX_MODEL_BYTES", agent_defaults.max_model_bytes as i64).max(10_000) as usize,
                model_id: None,
                price: None,
                allowed_tools: None,
                output_check_url: var("OUTPUT_CHECK_URL"),
                input_images: true,
                max_output_tokens: None,
            },
            llm: var("LLM_BASE_URL").map(|base_url| ModelEndpoint { base_url, api_key: var("LLM_API_KEY") }),
            tools,
            heartbeat_ms: num("AGENT_HEARTBEAT_MS", 10_000).max(1_000),
        }
    }

    /// Settings for native tests: every variable unset but `vars`.
    pub fn from_pairs(vars: &[(&str, &str)]) -> Settings {
        Settings::from_vars(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned()))
    }

    /// What the deployment should be told at start-up about its variables
    /// (logged once, with what the protocols say: `front::warnings`).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if matches!(self.auth, AuthMode::Dev) {
            out.push("AUTH_MODE=dev: every request acts as the local actor `dev` (for development only)".to_owned());
        }
        out.extend(self.type_errors.iter().cloned());
        out.extend(self.otlp_error.iter().cloned());
        out.extend(self.mcp_warnings.iter().cloned());
        if let Err(e) = &self.webhooks {
            out.push(format!("{e}; no webhook is delivered"));
        }
        if let Some(e) = &self.file_types_error {
            out.push(format!("{e}; the default file types apply ({})", crate::files::media::DEFAULT_TYPES.join(", ")));
        }
        if self.webhook_url.is_some() && self.public_url.is_none() {
            out.push(
                "AGENT_WEBHOOK_URL is set without PUBLIC_URL: publish URLs use the origin of the send that started each run; set PUBLIC_URL to the origin agents should publish to".to_owned(),
            );
        }
        out
    }

    /// The model endpoint and provider model name of a run that picked
    /// catalog model `id` (the default when `None`).
    pub fn model_for(&self, id: Option<&str>) -> (ModelEndpoint, AgentConfig) {
        let mut cfg = self.agent.clone();
        let mut endpoint = self.llm.clone().unwrap_or(ModelEndpoint { base_url: String::new(), api_key: None });
        if let Ok(catalog) = &self.catalog {
            let id = id.unwrap_or(&catalog.default);
            if let Some(m) = catalog.models.get(id) {
                cfg.model = m.model.clone();
                cfg.model_id = Some(id.to_owned());
                cfg.price = m.price();
                cfg.input_images = m.takes(crate::files::media::Input::Image);
                cfg.max_output_tokens = m.max_output_tokens;
                if let Some(window) = m.context_window {
                    cfg.context_window = window;
                }
                if let Some(url) = &m.base_url {
                    endpoint.base_url = url.clone();
                }
                if let Some(key) = self.model_keys.get(id) {
                    endpoint.api_key = Some(key.clone());
                }
            }
        }
        (endpoint, cfg)
    }

    /// [`Settings::model_for`], for a turn of agent `agent` (the default for
    /// `None`): its system prompt and its tools.
    pub fn turn_config(&self, model: Option<&str>, agent: Option<&str>) -> (ModelEndpoint, AgentConfig) {
        let (endpoint, mut cfg) = self.model_for(model);
        if let Some((_, a)) = self.agents.as_ref().ok().and_then(|agents| agents.get(agent).ok()) {
            if let Some(prompt) = &a.system_prompt {
                cfg.system_prompt = prompt.clone();
            }
            cfg.allowed_tools = a.tools.clone();
        }
        (endpoint, cfg)
    }
}

/// `APPROVAL_POLICY`: per tool, whether approval is required, who may
/// approve, and how long a request waits before it lapses; and how long
/// every request waits when its tool says nothing (`ttlMs`). Written as
/// `{"<tool>": {...}}`, or as agora's `{"ttlMs"?, "tools": {"<tool>": {...}}}`.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub tools: BTreeMap<String, ToolPolicy>,
    /// Every request lapses after this long unless its tool's rule says.
    pub ttl_ms: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPolicy {
    #[serde(default)]
    pub required: Option<bool>,
    #[serde(default)]
    pub approver: Option<String>,
    #[serde(default)]
    pub ttl_ms: Option<i64>,
}

/// agora's shape of the policy.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Shorthand {
    #[serde(default)]
    ttl_ms: Option<i64>,
    #[serde(default)]
    tools: BTreeMap<String, ToolPolicy>,
}

impl Policy {
    pub fn parse(json: Option<&str>) -> Result<Policy, String> {
        let Some(s) = json.map(str::trim).filter(|s| !s.is_empty()) else { return Ok(Policy::default()) };
        let bad = |e: serde_json::Error| format!("APPROVAL_POLICY is invalid: {e}");
        let v: serde_json::Value = serde_json::from_str(s).map_err(bad)?;
        // agora's shape names `tools` (an object) or a number `ttlMs`.
        let shorthand = v.get("tools").is_some_and(serde_json::Value::is_object)
            || v.get("ttlMs").is_some_and(serde_json::Value::is_number);
        let policy = if shorthand {
            let p: Shorthand = serde_json::from_value(v).map_err(bad)?;
            Policy { tools: p.tools, ttl_ms: p.ttl_ms }
        } else {
            Policy { tools: serde_json::from_value(v).map_err(bad)?, ttl_ms: None }
        };
        if policy.ttl_ms.iter().chain(policy.tools.values().filter_map(|t| t.ttl_ms.as_ref())).any(|t| *t <= 0) {
            return Err("APPROVAL_POLICY is invalid: `ttlMs` must be a positive number of milliseconds".to_owned());
        }
        Ok(policy)
    }

    /// How long a request for `tool` waits.
    pub fn ttl_for(&self, tool: &str) -> Option<i64> {
        self.get(tool).and_then(|p| p.ttl_ms).or(self.ttl_ms)
    }

    pub fn get(&self, tool: &str) -> Option<&ToolPolicy> {
        self.tools.get(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(vars: Vec<(&'static str, Var)>) -> Settings {
        Settings::from_env(move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn a_json_variable_reads_the_same_as_a_string_or_a_toml_table() {
        let text = env(vec![("APPROVAL_POLICY", Var::Text(r#"{"delete-note":{"ttlMs":5000}}"#.into()))]);
        let table = env(vec![("APPROVAL_POLICY", Var::Value(json!({"delete-note": {"ttlMs": 5000}})))]);
        for s in [&text, &table] {
            assert!(s.policy_error.is_none());
            assert_eq!(s.thread.approval_policy.ttl_for("delete-note"), Some(5000));
            assert!(s.type_errors.is_empty());
        }
        let tools = env(vec![(
            "TOOLS",
            Var::Value(json!([{"name": "weather", "description": "d", "url": "https://example.com/w"}])),
        )]);
        assert_eq!(tools.tools.as_ref().unwrap().http_names(), vec!["weather".to_owned()]);
    }

    #[test]
    fn a_json_variable_of_the_wrong_type_is_said_and_refuses_what_it_governs() {
        let s = env(vec![("APPROVAL_POLICY", Var::Value(json!(5)))]);
        assert_eq!(s.type_errors.len(), 1);
        assert!(s.type_errors[0].contains("APPROVAL_POLICY is a number"), "{:?}", s.type_errors);
        assert!(s.warnings().iter().any(|w| w.contains("APPROVAL_POLICY")));
        // Not "no approvals": the policy's error refuses runs (503).
        assert!(s.policy_error.is_some());
        let s = env(vec![("TOOLS", Var::Value(json!(true)))]);
        assert!(s.tools.is_err());
        assert!(s.type_errors[0].contains("TOOLS is a boolean"));
    }

    #[test]
    fn a_scalar_takes_numbers_and_booleans_as_written_and_refuses_a_table() {
        let s = env(vec![("RUN_IDLE_TIMEOUT_MS", Var::Value(json!(1234))), ("DEBUG_ROUTES", Var::Value(json!(true)))]);
        assert_eq!(s.thread.run_idle_timeout_ms, 1234);
        assert!(s.debug_routes);
        assert!(s.type_errors.is_empty());
        let s = env(vec![("RUN_IDLE_TIMEOUT_MS", Var::Value(json!({"ms": 5})))]);
        assert_eq!(s.thread.run_idle_timeout_ms, Config::default().run_idle_timeout_ms);
        assert!(s.type_errors[0].contains("RUN_IDLE_TIMEOUT_MS is a table"));
    }

    #[test]
    fn an_authentication_variable_of_the_wrong_type_refuses_every_request() {
        let s = env(vec![("AUTH_MODE", Var::Text("dev".into())), ("AUTH_JWT_SECRET", Var::Value(json!({"k": 1})))]);
        assert!(matches!(&s.auth, AuthMode::Invalid(why) if why.contains("AUTH_JWT_SECRET is a table")));
        let e = s.auth.authenticate(None, 0).unwrap_err();
        assert_eq!(e.status, 503);
        // A JWK set may be a table: it is JSON.
        let s = env(vec![("AUTH_JWKS", Var::Value(json!({"keys": "nope"})))]);
        assert!(s.type_errors.is_empty());
    }

    #[test]
    fn every_variable_the_docs_name_has_a_type() {
        let docs = include_str!("../../docs/configuration.md");
        let mut documented: Vec<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .flat_map(|l| l.split('|').next().unwrap_or("").split(','))
            .map(|n| n.trim().trim_matches('`'))
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .collect();
        documented.sort_unstable();
        documented.dedup();
        let mut known: Vec<&str> = VARS.iter().chain(JSON_VARS).chain(AUTH_VARS).copied().collect();
        known.sort_unstable();
        known.dedup();
        assert_eq!(documented, known);
    }
}
