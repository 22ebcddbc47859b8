//! Traces: a span for each request the Worker answers, each run, each model
//! call, each tool call (HTTP and MCP) and each wait for a person's
//! decision, with OpenTelemetry's GenAI semantic conventions on the model and
//! tool spans, encoded as OTLP/HTTP JSON for `OTEL_EXPORTER_OTLP_ENDPOINT`.
//!
//! How they hang together:
//! - the Worker's request span continues the caller's `traceparent` (W3C
//!   Trace Context) or starts a trace, and hands its own `traceparent` to
//!   the object it forwards to;
//! - a send stores that `traceparent` with its turn ([`Turn::trace`]), so a
//!   run started at once, from the queue, or resumed after a restart hangs
//!   under the request that sent it;
//! - a run's span id is derived from its run id ([`RunTrace::of`]), so every
//!   span of the run (model and tool calls, decisions), whichever instance of
//!   the object records it, names the same parent; the run's own span is
//!   recorded once, when the run ends.
//!
//! Invariant: spans are recorded after the fact and exported off the
//! request's path (`waitUntil`): a slow or absent collector never delays a
//! stream. The shells only carry bytes; the ids, the names and the
//! attributes are decided here.
//!
//! [`Turn::trace`]: crate::storage::store::Turn::trace

use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// A W3C `traceparent`: the trace, and the span a child hangs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub trace: [u8; 16],
    pub span: [u8; 8],
}

impl Parent {
    /// `00-<32 hex>-<16 hex>-<2 hex>`; `None` for anything else (or all-zero ids).
    pub fn parse(header: &str) -> Option<Parent> {
        let mut parts = header.trim().split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || flags.len() != 2 || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let mut out = Parent { trace: [0; 16], span: [0; 8] };
        hex::decode_to_slice(trace, &mut out.trace).ok()?;
        hex::decode_to_slice(span, &mut out.span).ok()?;
        (out.trace != [0; 16] && out.span != [0; 8]).then_some(out)
    }

    /// The header value (sampled).
    pub fn header(&self) -> String {
        format!("00-{}-{}-01", hex::encode(self.trace), hex::encode(self.span))
    }
}

/// A span's kind (OTLP's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Bool(bool),
    Strs(Vec<String>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Attr {
        Attr::Str(s.to_owned())
    }
}
impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(s)
    }
}
impl From<i64> for Attr {
    fn from(n: i64) -> Attr {
        Attr::Int(n)
    }
}
impl From<bool> for Attr {
    fn from(b: bool) -> Attr {
        Attr::Bool(b)
    }
}

/// A finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace: [u8; 16],
    pub id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    /// Milliseconds since the epoch (the platform's clock).
    pub start_ms: i64,
    pub end_ms: i64,
    pub attrs: Vec<(&'static str, Attr)>,
    /// Why it failed; `None`: it did not.
    pub error: Option<String>,
}

impl Span {
    pub fn attr(mut self, key: &'static str, value: impl Into<Attr>) -> Span {
        self.attrs.push((key, value.into()));
        self
    }

    pub fn failed(mut self, why: Option<String>) -> Span {
        self.error = why;
        self
    }

    /// The span's trace, for logs (`traceId`).
    pub fn trace_id(&self) -> String {
        hex::encode(self.trace)
    }
}

/// The first `N` bytes of SHA-256 over `parts`: an id that every instance of an
/// object derives the same from the same facts.
fn derive<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    let mut out = [0; N];
    out.copy_from_slice(&digest[..N]);
    out
}

/// The Worker's span for one request.
#[derive(Clone, Debug)]
pub struct RequestSpan {
    own: Parent,
    parent: Option<[u8; 8]>,
    start_ms: i64,
}

impl RequestSpan {
    /// Continues the caller's `traceparent` (a child of its span) or starts
    /// a trace; `random` gives the new ids.
    pub fn start(traceparent: Option<&str>, random: [u8; 24], now: i64) -> RequestSpan {
        let caller = traceparent.and_then(Parent::parse);
        let mut trace = [0; 16];
        trace.copy_from_slice(&random[..16]);
        let mut span = [0; 8];
        span.copy_from_slice(&random[16..]);
        RequestSpan {
            own: Parent { trace: caller.map_or(trace, |c| c.trace), span },
            parent: caller.map(|c| c.span),
            start_ms: now,
        }
    }

    /// The `traceparent` the object it forwards to hangs its work under.
    pub fn traceparent(&self) -> String {
        self.own.header()
    }

    /// The finished span: `route` is the path's pattern when one matched.
    pub fn finish(&self, method: &str, path: &str, route: Option<&str>, status: u16, now: i64) -> Span {
        let name = format!("{method} {}", route.unwrap_or("unmatched"));
        let mut span = Span {
            trace: self.own.trace,
            id: self.own.span,
            parent: self.parent,
            name,
            kind: SpanKind::Server,
            start_ms: self.start_ms,
            end_ms: now.max(self.start_ms),
            attrs: Vec::new(),
            error: (status >= 500).then(|| format!("status {status}")),
        }
        .attr("http.request.method", method)
        .attr("url.path", path)
        .attr("http.response.status_code", i64::from(status));
        if let Some(r) = route {
            span = span.attr("http.route", r);
        }
        span
    }
}

/// Where a run's spans hang: its trace, its span, and the request that sent
/// it (from the turn's stored `traceparent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunTrace {
    pub trace: [u8; 16],
    pub span: [u8; 8],
    pub parent: Option<[u8; 8]>,
}

impl RunTrace {
    /// A run's trace: under the send's request when its `traceparent` was
    /// kept, else a trace of its own (derived from the run id).
    pub fn of(thread_id: &str, run_id: &str, traceparent: Option<&str>) -> RunTrace {
        let sent = traceparent.and_then(Parent::parse);
        RunTrace {
            trace: sent.map_or_else(|| derive(&["threadline/trace", thread_id, run_id]), |p| p.trace),
            span: derive(&["threadline/run", thread_id, run_id]),
            parent: sent.map(|p| p.span),
        }
    }

    /// A span of the run (a model call, a tool call, a decision), its id
    /// derived from `key` (unique within the run).
    pub fn child(&self, key: &str, name: String, kind: SpanKind, start_ms: i64, end_ms: i64) -> Span {
        Span {
            trace: self.trace,
            id: derive(&["threadline/span", &hex::encode(self.span), key]),
            parent: Some(self.span),
            name,
            kind,
            start_ms,
            end_ms: end_ms.max(start_ms),
            attrs: Vec::new(),
            error: None,
        }
    }

    /// The run's own span.
    pub fn run_span(&self, start_ms: i64, end_ms: i64) -> Span {
        Span {
            trace: self.trace,
            id: self.span,
            parent: self.parent,
            name: "invoke_agent threadline".to_owned(),
            kind: SpanKind::Internal,
            start_ms,
            end_ms: end_ms.max(start_ms),
            attrs: Vec::new(),
            error: None,
        }
    }
}

/// Where spans go: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, with
/// `OTEL_EXPORTER_OTLP_HEADERS` (`key=value,...`, values percent-decoded).
#[derive(Clone, Debug, PartialEq)]
pub struct Otlp {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub service: String,
}

impl Otlp {
    /// `None` when no endpoint is set (tracing is off); the reason when a
    /// variable cannot be read (a start-up warning, and tracing off).
    pub fn from_vars(
        endpoint: Option<&str>,
        traces_endpoint: Option<&str>,
        headers: Option<&str>,
        service: Option<&str>,
    ) -> Result<Option<Otlp>, String> {
        let url = match (traces_endpoint.map(str::trim), endpoint.map(str::trim)) {
            (Some(t), _) => t.to_owned(),
            (None, Some(e)) => format!("{}/v1/traces", e.trim_end_matches('/')),
            (None, None) => return Ok(None),
        };
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(format!("OTEL_EXPORTER_OTLP_ENDPOINT `{url}` is not an http(s) URL: traces are off"));
        }
        let mut pairs = Vec::new();
        for pair in headers.unwrap_or("").split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = pair.split_once('=') else {
                return Err("OTEL_EXPORTER_OTLP_HEADERS is not `key=value,...`: traces are off".to_owned());
            };
            let decode = |s: &str| {
                form_urlencoded::parse(format!("v={}", s.trim().replace('+', "%2B")).as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
            };
            pairs.push((k.trim().to_ascii_lowercase(), decode(v).unwrap_or_default()));
        }
        let service = service.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("threadline").to_owned();
        Ok(Some(Otlp { url, headers: pairs, service }))
    }

    /// The `ExportTraceServiceRequest` for `spans`, as OTLP/HTTP's JSON
    /// encoding writes it (ids as hex, 64-bit integers as strings).
    pub fn encode(&self, spans: &[Span]) -> String {
        let mut out = String::with_capacity(256 + spans.len() * 512);
        out.push_str(r#"{"resourceSpans":[{"resource":{"attributes":["#);
        attr_json(&mut out, "service.name", &Attr::Str(self.service.clone()));
        out.push_str(r#"]},"scopeSpans":[{"scope":{"name":"threadline","version":""#);
        out.push_str(env!("CARGO_PKG_VERSION"));
        out.push_str(r#""},"spans":["#);
        for (i, s) in spans.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, r#"{{"traceId":"{}","spanId":"{}","#, hex::encode(s.trace), hex::encode(s.id));
            if let Some(p) = s.parent {
                let _ = write!(out, r#""parentSpanId":"{}","#, hex::encode(p));
            }
            let nanos = |ms: i64| (ms.max(0) as u128 * 1_000_000).to_string();
            let _ = write!(
                out,
                r#""name":{},"kind":{},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":["#,
                serde_json::Value::from(s.name.as_str()),
                s.kind as u8,
                nanos(s.start_ms),
                nanos(s.end_ms)
            );
            for (j, (k, v)) in s.attrs.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                attr_json(&mut out, k, v);
            }
            out.push_str("],\"status\":");
            match &s.error {
                None => out.push_str(r#"{"code":1}"#),
                Some(why) => {
                    let _ = write!(out, r#"{{"code":2,"message":{}}}"#, serde_json::Value::from(why.as_str()));
                }
            }
            out.push('}');
        }
        out.push_str("]}]}]}");
        out
    }
}

fn value_json(out: &mut String, v: &Attr) {
    match v {
        Attr::Str(s) => {
            let _ = write!(out, r#"{{"stringValue":{}}}"#, serde_json::Value::from(s.as_str()));
        }
        Attr::Int(n) => {
            let _ = write!(out, r#"{{"intValue":"{n}"}}"#);
        }
        Attr::Bool(b) => {
            let _ = write!(out, r#"{{"boolValue":{b}}}"#);
        }
        Attr::Strs(list) => {
            out.push_str(r#"{"arrayValue":{"values":["#);
            for (i, s) in list.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value_json(out, &Attr::Str(s.clone()));
            }
            out.push_str("]}}");
        }
    }
}

fn attr_json(out: &mut String, key: &str, v: &Attr) {
    let _ = write!(out, r#"{{"key":{},"value":"#, serde_json::Value::from(key));
    value_json(out, v);
    out.push('}');
}

/// A structured log line (Workers Logs indexes JSON lines): `level`,
/// `msg`, the trace, then `fields`' members, written straight out (no tree
/// is built: the Worker writes one per request). `fields` serialises as a
/// JSON object whose keys are none of the three before it.
pub fn log_line(msg: &str, trace_id: Option<&str>, fields: &impl serde::Serialize) -> String {
    let mut line = String::with_capacity(192);
    line.push_str(r#"{"level":"info","msg":"#);
    line.push_str(&serde_json::to_string(msg).expect("a string serialises"));
    if let Some(t) = trace_id {
        line.push_str(r#","traceId":"#);
        line.push_str(&serde_json::to_string(t).expect("a string serialises"));
    }
    let fields = serde_json::to_string(fields).expect("log fields serialise");
    let members = fields.strip_prefix('{').and_then(|f| f.strip_suffix('}')).expect("log fields are a JSON object");
    if !members.is_empty() {
        line.push(',');
        line.push_str(members);
    }
    line.push('}');
    line
}

/// The fields of a request's log line ([`log_line`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestLog<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The pattern of the route the path matched, when one did.
    pub route: Option<&'a str>,
    pub status: u16,
    pub duration_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A log line is one JSON object, byte for byte: level, msg, trace, then
    /// the fields in their order; strings escaped; no trace, no key.
    #[test]
    fn a_log_line_is_written_field_by_field() {
        let fields = RequestLog { method: "GET", path: "/a\"b\n", route: None, status: 404, duration_ms: 3 };
        assert_eq!(
            log_line("request", Some("0af7"), &fields),
            r#"{"level":"info","msg":"request","traceId":"0af7","method":"GET","path":"/a\"b\n","route":null,"status":404,"durationMs":3}"#
        );
        let fields = RequestLog { route: Some("/t/{id}"), ..fields };
        let line: serde_json::Value = serde_json::from_str(&log_line("request", None, &fields)).unwrap();
        assert_eq!(line["route"], "/t/{id}");
        assert!(line.get("traceId").is_none());
        assert_eq!(log_line("run", None, &json!({})), r#"{"level":"info","msg":"run"}"#);
        assert_eq!(log_line("r\"", None, &json!({"n": 1})), r#"{"level":"info","msg":"r\"","n":1}"#);
    }

    #[test]
    fn traceparent_round_trips_and_refuses_what_is_not_one() {
        let p = Parent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(p.header(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-zzf7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert_eq!(Parent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_request_continues_the_callers_trace_and_its_run_hangs_under_it() {
        let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let req = RequestSpan::start(Some(caller), [7; 24], 1000);
        let span = req.finish("POST", "/instance-ai/chat/t1", Some("/instance-ai/chat/:threadId"), 200, 1005);
        assert_eq!(hex::encode(span.trace), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(span.parent, Some([0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]));
        let run = RunTrace::of("t1", "run_1", Some(&req.traceparent()));
        assert_eq!(run.trace, span.trace);
        assert_eq!(run.parent, Some(span.id));
        // Every instance derives the same run span; children hang under it.
        assert_eq!(RunTrace::of("t1", "run_1", None).span, run.span);
        let child = run.child("step-1", "chat m".into(), SpanKind::Client, 1, 2);
        assert_eq!(child.parent, Some(run.span));
        assert_ne!(child.id, run.child("step-2", "chat m".into(), SpanKind::Client, 1, 2).id);
        // Without a caller, a fresh trace from the random bytes.
        let fresh = RequestSpan::start(Some("garbage"), [9; 24], 0).finish("GET", "/x", None, 404, 0);
        assert_eq!(fresh.trace, [9; 16]);
        assert_eq!(fresh.parent, None);
        assert_eq!(fresh.name, "GET unmatched");
    }

    #[test]
    fn otlp_json_is_what_collectors_read() {
        let otlp = Otlp::from_vars(Some("http://collector:4318/"), None, Some("x-api-key=a%20b, X-Other = c"), None)
            .unwrap()
            .unwrap();
        assert_eq!(otlp.url, "http://collector:4318/v1/traces");
        assert_eq!(otlp.headers, vec![("x-api-key".into(), "a b".into()), ("x-other".into(), "c".into())]);
        let run = RunTrace::of("t", "r", None);
        let span = run
            .child("k", "chat gpt".into(), SpanKind::Client, 1, 3)
            .attr("gen_ai.usage.input_tokens", 12i64)
            .attr("gen_ai.response.finish_reasons", Attr::Strs(vec!["stop".into()]))
            .failed(Some("boom \"x\"".into()));
        let v: serde_json::Value = serde_json::from_str(&otlp.encode(std::slice::from_ref(&span))).unwrap();
        let s = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(
            v["resourceSpans"][0]["resource"]["attributes"][0],
            json!({"key": "service.name", "value": {"stringValue": "threadline"}})
        );
        assert_eq!(s["traceId"], hex::encode(run.trace));
        assert_eq!(s["parentSpanId"], hex::encode(run.span));
        assert_eq!(s["kind"], 3);
        assert_eq!(s["startTimeUnixNano"], "1000000");
        assert_eq!(s["attributes"][0], json!({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}}));
        assert_eq!(s["attributes"][1]["value"]["arrayValue"]["values"][0]["stringValue"], "stop");
        assert_eq!(s["status"], json!({"code": 2, "message": "boom \"x\""}));
        assert_eq!(Otlp::from_vars(None, None, Some("k=v"), None), Ok(None));
        assert!(Otlp::from_vars(Some("collector:4318"), None, None, None).is_err());
        assert!(Otlp::from_vars(Some("http://c"), None, Some("novalue"), None).is_err());
    }
}
