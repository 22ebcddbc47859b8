//! What the stateless Worker decides before anything reaches an object:
//! where a request goes, who is calling, and which browser origins may read
//! the answer. Plain functions of the request's method, path and headers;
//! the Worker only forwards bytes to the object these name.

use crate::access::Caller;
use crate::auth;
use crate::error::ApiError;
use crate::reply::Reply;
use crate::route::Route;
use crate::settings::{Settings, StreamsAuth};

/// Where a request goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Dispatch {
    /// A CORS preflight: answered by the Worker (204 when the origin may
    /// call, else 403), never forwarded.
    Preflight,
    /// `/v1/stream/*`: the standalone Durable Stream named by the path.
    Stream,
    /// `GET /agent/models`: the model catalog.
    Models,
    /// `GET /agent/threads`: the caller's threads, from their directory.
    ThreadList,
    /// agora's `POST /agent/chat`: the thread is named in the body (or new).
    AgoraChat,
    /// agora's `POST /agent/tool-call/approve|reject`: the thread is in the
    /// body's run or call id.
    AgoraDecision { approve: bool },
    /// The AI SDK's `POST /api/chat`: the thread is the body's chat `id`.
    UiChat,
    /// AG-UI's `POST /ag-ui`: the thread is the body's `threadId`.
    AguiRun,
    /// A route of one thread, to the thread's object.
    Thread(Route),
}

impl Dispatch {
    /// Parses the request line. Unknown paths are 404, wrong methods 405.
    pub fn parse(method: &str, path: &str) -> Result<Dispatch, ApiError> {
        if is_stream_path(path) {
            return Ok(Dispatch::Stream);
        }
        if method == "OPTIONS" {
            return Ok(Dispatch::Preflight);
        }
        let only = |allowed: &str, d: Dispatch| {
            if method == allowed {
                Ok(d)
            } else {
                Err(ApiError::method_not_allowed(path, allowed))
            }
        };
        match path {
            "/agent/models" => only("GET", Dispatch::Models),
            "/agent/threads" => only("GET", Dispatch::ThreadList),
            "/agent/chat" => only("POST", Dispatch::AgoraChat),
            "/agent/tool-call/approve" => only("POST", Dispatch::AgoraDecision { approve: true }),
            "/agent/tool-call/reject" => only("POST", Dispatch::AgoraDecision { approve: false }),
            "/api/chat" => only("POST", Dispatch::UiChat),
            "/ag-ui" => only("POST", Dispatch::AguiRun),
            _ => Route::parse(method, path).map(Dispatch::Thread),
        }
    }

    /// Whether the request needs a caller: everything but publishing (its
    /// bearer is the run's token, checked by the thread) and the
    /// standalone streams (their own rule: [`stream_caller`]).
    pub fn needs_caller(&self) -> bool {
        match self {
            Dispatch::Preflight | Dispatch::Stream => false,
            Dispatch::Thread(route) => !route.publishes(),
            _ => true,
        }
    }
}

/// The request's destination and caller. A caller is identified before an
/// unknown path is refused, so a caller without credentials learns nothing
/// about the surface (401 everywhere); only publishing paths go without.
pub fn plan(
    method: &str,
    path: &str,
    query_token: Option<&str>,
    authorization: Option<&str>,
    settings: &Settings,
    now: i64,
) -> Result<(Dispatch, Caller), ApiError> {
    let dispatch = Dispatch::parse(method, path);
    let publishing = method == "POST"
        && ((path.starts_with("/instance-ai/threads/") && path.ends_with("/events")) || path.starts_with("/v1/runs/"));
    let needs_caller = match &dispatch {
        Ok(d) => d.needs_caller(),
        Err(_) => !publishing,
    };
    let caller = if needs_caller {
        let route = match &dispatch {
            Ok(Dispatch::Thread(r)) => Some(r),
            _ => None,
        };
        identify(route, query_token, authorization, settings, now)?
    } else {
        Caller::Nobody
    };
    Ok((dispatch?, caller))
}

/// Who is calling. A browser's EventSource cannot send headers, so the
/// routes that read a thread's streams also take a stream token in
/// `?token=`: short lived, for one thread, read-only. A full JWT in a URL is
/// refused: URLs end up in logs, browser history and `Referer` headers,
/// where a long-lived credential must never be.
pub fn identify(
    route: Option<&Route>,
    query_token: Option<&str>,
    authorization: Option<&str>,
    settings: &Settings,
    now: i64,
) -> Result<Caller, ApiError> {
    if let Some(token) = query_token {
        if auth::looks_like_jwt(token) {
            return Err(ApiError::token_in_url());
        }
        let route = route.filter(|r| r.reads_stream()).ok_or_else(|| {
            ApiError::unauthorized("stream tokens are accepted on the events and run-stream routes only")
        })?;
        let key = settings.stream_key.as_deref().ok_or_else(ApiError::stream_tokens_not_configured)?;
        let (actor, expires_at) = auth::verify_stream_token(key, token, route.thread(), now)?;
        return Ok(Caller::StreamToken { id: actor.id, expires_at });
    }
    settings.auth.authenticate(authorization, now).map(Caller::actor)
}

/// Who may use `/v1/stream/*` (`STREAMS_AUTH`): nobody when it is unset
/// (404, as for any route that does not exist), anyone with `none`, and with
/// `jwt` authenticated callers holding `STREAMS_ROLE` (401 without a valid
/// token, 403 `role_required` without the role). A CORS preflight carries
/// no credentials: it is answered wherever the route is on.
pub fn stream_access(
    method: &str,
    authorization: Option<&str>,
    settings: &Settings,
    now: i64,
) -> Result<Caller, ApiError> {
    match &settings.streams_auth {
        StreamsAuth::Off => Err(ApiError::not_found_route(
            "no route for /v1/stream/*: the Durable Streams server is off (STREAMS_AUTH)",
        )),
        StreamsAuth::Invalid(e) => Err(ApiError::misconfigured(e.clone())),
        _ if method == "OPTIONS" => Ok(Caller::Nobody),
        StreamsAuth::Open => Ok(Caller::Nobody),
        StreamsAuth::Role(role) => {
            let actor = settings.auth.authenticate(authorization, now)?;
            if actor.roles.iter().any(|r| r == role) {
                Ok(Caller::actor(actor))
            } else {
                Err(ApiError::role_required(role))
            }
        }
    }
}

/// Whose per-minute send budget a send counts against: the actor's, or,
/// when every caller is the same anonymous actor (`AUTH_MODE=none`), the
/// client address's (`CF-Connecting-IP`, which Cloudflare sets and clients
/// cannot).
pub fn rate_key(caller: &Caller, client_ip: Option<&str>, settings: &Settings) -> String {
    match (&settings.auth, caller.id()) {
        (crate::auth::Mode::None, _) | (_, None) => format!("ip:{}", client_ip.unwrap_or("unknown")),
        (_, Some(id)) => id.to_owned(),
    }
}

/// The CORS headers for a request from `origin`, when `ALLOWED_ORIGINS`
/// lets it read the answer (`None`: no CORS headers, the browser refuses).
pub fn cors(origin: Option<&str>, settings: &Settings) -> Option<Vec<(&'static str, String)>> {
    let origin = origin?;
    let allowed = settings.allowed_origins.iter().any(|a| a == "*" || a == origin.trim_end_matches('/'));
    if !allowed {
        return None;
    }
    Some(vec![
        ("access-control-allow-origin", origin.to_owned()),
        ("vary", "Origin".to_owned()),
        ("access-control-allow-methods", "GET, POST, PATCH, DELETE, OPTIONS".to_owned()),
        (
            "access-control-allow-headers",
            "authorization, content-type, last-event-id, producer-id, producer-epoch, producer-seq".to_owned(),
        ),
        (
            "access-control-expose-headers",
            "x-agent-run-id, x-agent-thread-id, retry-after, stream-next-offset, stream-up-to-date, stream-cursor, stream-closed, producer-epoch, producer-seq, producer-expected-seq, producer-received-seq".to_owned(),
        ),
        ("access-control-max-age", "600".to_owned()),
    ])
}

/// `/v1/stream/*` is the standalone Durable Streams server, with its own
/// CORS, errors and auth (`stream_caller`).
pub fn is_stream_path(path: &str) -> bool {
    path.starts_with("/v1/stream/")
}

/// `HEAD` on the events and run-stream routes: the stream's headers,
/// without opening one.
pub fn head_reply(method: &str, route: &Route) -> Option<Reply> {
    let stream = matches!(route, Route::Events { .. } | Route::AgentStream { .. });
    let headers = match route {
        Route::UiStream { .. } | Route::UiRunStream { .. } => Some(crate::protocols::ai_sdk::mapping::HEADERS),
        Route::AguiStream { .. } => Some(crate::protocols::ag_ui::mapping::HEADERS),
        _ => None,
    };
    if let (true, Some(headers)) = (method == "HEAD", headers) {
        let mut r = Reply::new(200);
        for (k, v) in headers {
            r.set(k, *v);
        }
        return Some(r);
    }
    (method == "HEAD" && stream).then(|| {
        let mut r = Reply::new(200);
        for (k, v) in crate::sse::HEADERS {
            r.set(k, *v);
        }
        r
    })
}

/// Every answer of the Worker carries these.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[("x-content-type-options", "nosniff")];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_and_callers() {
        assert_eq!(Dispatch::parse("OPTIONS", "/anything").unwrap(), Dispatch::Preflight);
        assert_eq!(Dispatch::parse("GET", "/v1/stream/a").unwrap(), Dispatch::Stream);
        assert_eq!(Dispatch::parse("POST", "/agent/models").unwrap_err().code, "method_not_allowed");
        assert!(!Dispatch::parse("POST", "/instance-ai/threads/t/runs/r/events").unwrap().needs_caller());
        assert!(Dispatch::parse("GET", "/instance-ai/events/t").unwrap().needs_caller());
        let s = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        let events = Route::parse("GET", "/instance-ai/events/t").unwrap();
        let status = Route::parse("GET", "/instance-ai/threads/t/status").unwrap();
        let (token, _) = auth::issue_stream_token(s.stream_key.as_deref().unwrap(), "t", "dev", 0, 1_000);
        assert!(matches!(identify(Some(&events), Some(&token), None, &s, 1).unwrap(), Caller::StreamToken { .. }));
        assert_eq!(identify(Some(&status), Some(&token), None, &s, 1).unwrap_err().code, "unauthorized");
        assert_eq!(identify(Some(&events), Some("eyJa.b.c"), None, &s, 1).unwrap_err().code, "token_in_url");
    }

    #[test]
    fn streams_are_off_unless_configured() {
        let off = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        assert_eq!(stream_access("GET", None, &off, 0).unwrap_err().status, 404);
        assert_eq!(stream_access("OPTIONS", None, &off, 0).unwrap_err().status, 404);
        let open = Settings::from_pairs(&[("STREAMS_AUTH", "none")]);
        assert_eq!(stream_access("PUT", None, &open, 0), Ok(Caller::Nobody));
        let jwt = Settings::from_pairs(&[("STREAMS_AUTH", "jwt"), ("AUTH_MODE", "dev")]);
        assert_eq!(
            stream_access("GET", None, &jwt, 0).unwrap_err().code,
            "role_required",
            "dev's actor lacks `streams`"
        );
        let custom = Settings::from_pairs(&[("STREAMS_AUTH", "jwt"), ("STREAMS_ROLE", "dev"), ("AUTH_MODE", "dev")]);
        assert!(stream_access("GET", None, &custom, 0).is_ok());
        assert_eq!(
            stream_access("GET", None, &Settings::from_pairs(&[("STREAMS_AUTH", "yes")]), 0).unwrap_err().status,
            503
        );
    }

    #[test]
    fn anonymous_callers_are_counted_by_address() {
        let none = Settings::from_pairs(&[("AUTH_MODE", "none")]);
        let anon = Caller::Actor { id: "anonymous".into(), roles: vec![] };
        assert_eq!(rate_key(&anon, Some("1.1.1.1"), &none), "ip:1.1.1.1");
        let dev = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        assert_eq!(rate_key(&Caller::Actor { id: "dev".into(), roles: vec![] }, Some("1.1.1.1"), &dev), "dev");
    }

    #[test]
    fn cors_only_for_allowed_origins() {
        let s = Settings::from_pairs(&[("ALLOWED_ORIGINS", "https://app.example/")]);
        assert!(cors(Some("https://app.example"), &s).is_some());
        assert!(cors(Some("https://evil.example"), &s).is_none());
        assert!(cors(None, &s).is_none());
    }
}
