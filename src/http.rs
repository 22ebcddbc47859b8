//! Response helpers shared by the Worker and the Durable Object.

use threadline_durable::ApiError;
use worker::{Headers, Response, Result};

/// Every JSON response carries these.
fn json_headers() -> Headers {
    let h = Headers::new();
    let _ = h.set("content-type", "application/json; charset=utf-8");
    let _ = h.set("cache-control", "no-store");
    h
}

pub fn json(status: u16, body: &serde_json::Value) -> Result<Response> {
    Ok(Response::from_bytes(body.to_string().into_bytes())?
        .with_status(status)
        .with_headers(json_headers()))
}

pub fn error(e: &ApiError) -> Result<Response> {
    let resp = json(e.status, &e.body())?;
    if let Some(allow) = e.details.get("allow").and_then(|v| v.as_str()) {
        let _ = resp.headers().set("allow", allow);
    }
    if let Some(secs) = e.details.get("retryAfter").and_then(|v| v.as_i64()) {
        let _ = resp.headers().set("retry-after", &secs.to_string());
    }
    Ok(resp)
}

/// Maps a platform error to a JSON 5xx: the only path to a 5xx is storage or
/// the platform failing, never bad input.
pub fn internal(e: worker::Error) -> ApiError {
    ApiError::new(503, "unavailable", format!("the thread is unavailable: {e}"))
}

/// Reads a JSON body: 400 `invalid_json` when it is not JSON, 413 when larger
/// than `limit` bytes.
pub async fn read_json(req: &mut worker::Request, limit: usize) -> std::result::Result<serde_json::Value, ApiError> {
    let bytes = req.bytes().await.map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?;
    if bytes.len() > limit {
        return Err(ApiError::new(413, "body_too_large", format!("the body is over {limit} bytes")));
    }
    if bytes.is_empty() {
        return Err(ApiError::bad_request("invalid_json", "the body is empty; a JSON body is required"));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not valid JSON: {e}")))
}

/// A response's headers as a mutable copy: a response forwarded from an
/// object has immutable headers.
pub fn mutable_headers(resp: &Response) -> Result<Headers> {
    let headers = Headers::new();
    for (k, v) in resp.headers().entries() {
        headers.set(&k, &v)?;
    }
    Ok(headers)
}

/// Every value of query parameter `name`, in order.
pub fn query_all(url: &worker::Url, name: &str) -> Vec<String> {
    url.query_pairs().filter(|(k, _)| k == name).map(|(_, v)| v.into_owned()).collect()
}

/// A Durable Streams [`Reply`](threadline_durable::streams::Reply) decided by the core, as a response.
pub fn reply(r: threadline_durable::streams::Reply) -> Result<Response> {
    let headers = Headers::new();
    for (k, v) in &r.headers {
        headers.set(k, v)?;
    }
    let resp = if r.body.is_empty() { Response::empty()? } else { Response::from_bytes(r.body)? };
    Ok(resp.with_status(r.status).with_headers(headers))
}

/// The headers of a Durable Streams SSE response (a stream's, a thread's or a
/// run's): exactly `text/event-stream`, and nothing on the way may buffer or
/// compress it (`content-encoding: identity`, PROTOCOLS.md §3).
pub fn ds_sse_headers() -> Headers {
    let headers = Headers::new();
    for (k, v) in [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("connection", "keep-alive"),
        ("content-encoding", "identity"),
        ("x-accel-buffering", "no"),
    ] {
        let _ = headers.set(k, v);
    }
    headers
}
