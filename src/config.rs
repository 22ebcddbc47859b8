//! Configuration from `wrangler.toml` vars and secrets. Every variable, its
//! default and meaning is in the README's configuration table.

use worker::Env;

#[derive(Clone, Debug)]
pub struct Config {
    pub thread: threadline_durable::Config,
    /// Where external agents get their start and cancel signals.
    pub webhook_url: Option<String>,
    /// The origin publish URLs are built on; the request's origin when unset.
    pub public_url: Option<String>,
    pub debug_routes: bool,
    /// Keep-alive comment interval on SSE responses.
    pub ping_ms: u64,
    pub max_body_bytes: usize,
    pub max_message_bytes: usize,
    pub max_batch_bytes: usize,
    pub max_batch_events: usize,
    /// The built-in agent, when no webhook is set.
    pub agent: threadline_durable::agent::AgentConfig,
    pub llm_base_url: Option<String>,
    pub llm_api_key: Option<String>,
    /// `TOOLS` as given; parsed (and refused if invalid) when a run starts.
    pub tools_json: Option<String>,
    /// Alarm interval that keeps the object alive while the built-in agent runs.
    pub heartbeat_ms: i64,
    /// Why `APPROVAL_POLICY` could not be read: runs are refused rather than
    /// run tools without the approvals it asks for.
    pub policy_error: Option<String>,
    /// `LLM_MODELS` (or the one `LLM_MODEL`); an invalid catalog refuses sends.
    pub catalog: Result<threadline_durable::models::Catalog, String>,
    /// API keys of catalog models that name their own (`keyName`).
    pub model_keys: std::collections::BTreeMap<String, String>,
    /// How callers are authenticated.
    pub auth: threadline_durable::auth::Mode,
    /// The key stream tokens are signed with: `STREAM_TOKEN_SECRET`, else
    /// `AUTH_JWT_SECRET`, else (dev mode only) a fixed development key.
    pub stream_key: Option<Vec<u8>>,
    /// `ALLOWED_ORIGINS`: origins browsers may call from (`*` for any).
    pub allowed_origins: Vec<String>,
    /// Sends per actor per minute (429 with `Retry-After` beyond).
    pub runs_per_minute: i64,
    /// SSE and run-stream subscribers per thread (429 beyond).
    pub max_subscribers: usize,
    /// Idle threads are deleted after this long (0: never).
    pub thread_ttl_ms: i64,
    /// `STREAMS_AUTH=none`: `/v1/stream/*` takes requests without auth
    /// (dev, the conformance suite). Otherwise it needs an authenticated caller.
    pub streams_open: bool,
    /// How long a Durable Streams long-poll waits (`STREAMS_LONG_POLL_MS`, 20 s).
    pub streams_long_poll_ms: u64,
}

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string()).filter(|v| !v.trim().is_empty())
}

fn num(env: &Env, name: &str, default: i64) -> i64 {
    var(env, name).and_then(|v| v.trim().parse().ok()).filter(|n| *n >= 0).unwrap_or(default)
}

impl Config {
    pub fn from_env(env: &Env) -> Config {
        let defaults = threadline_durable::Config::default();
        let policy = threadline_durable::confirm::Policy::parse(var(env, "APPROVAL_POLICY").as_deref());
        let auth = threadline_durable::auth::Mode::from_config(
            var(env, "AUTH_MODE").as_deref(),
            var(env, "AUTH_JWT_SECRET").as_deref(),
            var(env, "AUTH_JWKS").as_deref(),
            var(env, "AUTH_ISSUER").as_deref(),
            var(env, "AUTH_AUDIENCE").as_deref(),
        );
        let stream_key = var(env, "STREAM_TOKEN_SECRET").or_else(|| var(env, "AUTH_JWT_SECRET")).map(String::into_bytes).or_else(|| {
            matches!(auth, threadline_durable::auth::Mode::Dev).then(|| b"threadline-development-stream-key".to_vec())
        });
        let single = var(env, "LLM_MODEL").unwrap_or_else(|| threadline_durable::agent::AgentConfig::default().model);
        let catalog = threadline_durable::models::Catalog::parse(var(env, "LLM_MODELS").as_deref(), &single);
        Config {
            thread: threadline_durable::Config {
                run_idle_timeout_ms: num(env, "RUN_IDLE_TIMEOUT_MS", defaults.run_idle_timeout_ms),
                restart_grace_ms: num(env, "RUN_RESTART_GRACE_MS", defaults.restart_grace_ms),
                replay_page: defaults.replay_page,
                approval_policy: policy.clone().unwrap_or_default(),
                max_event_bytes: num(env, "MAX_EVENT_BYTES", 1_000_000).min(1_900_000) as usize,
                driver: if var(env, "AGENT_WEBHOOK_URL").is_some() {
                    threadline_durable::store::Driver::Webhook
                } else {
                    threadline_durable::store::Driver::Builtin
                },
            },
            policy_error: policy.err(),
            model_keys: catalog
                .as_ref()
                .map(|c| {
                    c.models
                        .iter()
                        .filter_map(|(id, m)| Some((id.clone(), var(env, m.key_name.as_deref()?)?)))
                        .collect()
                })
                .unwrap_or_default(),
            catalog,
            auth,
            stream_key,
            allowed_origins: var(env, "ALLOWED_ORIGINS")
                .map(|v| v.split(',').map(|o| o.trim().trim_end_matches('/').to_owned()).filter(|o| !o.is_empty()).collect())
                .unwrap_or_default(),
            runs_per_minute: num(env, "RUNS_PER_MINUTE", 60),
            max_subscribers: num(env, "MAX_SUBSCRIBERS", 1000) as usize,
            thread_ttl_ms: var(env, "THREAD_TTL_DAYS")
                .and_then(|d| d.trim().parse::<f64>().ok())
                .filter(|d| *d >= 0.0)
                .map_or(90 * 86_400_000, |d| (d * 86_400_000.0) as i64),
            streams_open: var(env, "STREAMS_AUTH").is_some_and(|v| v.trim() == "none"),
            streams_long_poll_ms: num(env, "STREAMS_LONG_POLL_MS", 20_000).max(100) as u64,
            webhook_url: var(env, "AGENT_WEBHOOK_URL"),
            public_url: var(env, "PUBLIC_URL"),
            debug_routes: var(env, "DEBUG_ROUTES").is_some_and(|v| v == "1" || v == "true"),
            ping_ms: num(env, "SSE_PING_MS", threadline_durable::sse::PING_INTERVAL_MS as i64).max(100) as u64,
            max_body_bytes: num(env, "MAX_BODY_BYTES", 256 * 1024) as usize,
            max_message_bytes: num(env, "MAX_MESSAGE_BYTES", 32 * 1024) as usize,
            max_batch_bytes: num(env, "MAX_BATCH_BYTES", 1024 * 1024) as usize,
            max_batch_events: num(env, "MAX_BATCH_EVENTS", 1000) as usize,
            agent: {
                let d = threadline_durable::agent::AgentConfig::default();
                threadline_durable::agent::AgentConfig {
                    model: var(env, "LLM_MODEL").unwrap_or(d.model),
                    max_steps: num(env, "AGENT_MAX_STEPS", d.max_steps as i64).max(1) as u32,
                    stall_timeout_ms: num(env, "LLM_STALL_TIMEOUT_MS", d.stall_timeout_ms as i64).max(1) as u64,
                    system_prompt: var(env, "AGENT_SYSTEM_PROMPT").unwrap_or(d.system_prompt),
                    history_chars: num(env, "AGENT_HISTORY_CHARS", d.history_chars as i64) as usize,
                }
            },
            llm_base_url: var(env, "LLM_BASE_URL"),
            llm_api_key: var(env, "LLM_API_KEY"),
            tools_json: var(env, "TOOLS"),
            heartbeat_ms: num(env, "AGENT_HEARTBEAT_MS", 10_000).max(1_000),
        }
    }
}
