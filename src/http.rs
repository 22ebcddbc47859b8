//! Moving bytes between the runtime and the core: a decided [`Reply`] as a
//! response, an SSE body as a streaming response, a request's body and
//! headers as the core reads them.

use crate::live::Body;
use futures_util::StreamExt;
use threadline_durable::{ApiError, Reply};
use worker::{Headers, Request, Response, Result};

/// A decided answer as a response.
pub fn reply(r: Reply) -> Result<Response> {
    let headers = Headers::new();
    for (k, v) in &r.headers {
        headers.set(k, v)?;
    }
    let resp = if r.body.is_empty() { Response::empty()? } else { Response::from_bytes(r.body)? };
    Ok(resp.with_status(r.status).with_headers(headers))
}

/// A refusal as a response.
pub fn error(e: &ApiError) -> Result<Response> {
    reply(Reply::error(e))
}

/// An SSE body with its headers as a streaming response.
pub fn stream(body: Body, headers: &[(&str, String)]) -> Result<Response> {
    let h = Headers::new();
    for (k, v) in headers {
        h.set(k, v)?;
    }
    Ok(Response::from_stream(body.map(Ok::<_, worker::Error>))?.with_headers(h))
}

/// The SSE header set of the core, as owned pairs.
pub fn sse_headers() -> Vec<(&'static str, String)> {
    threadline_durable::sse::HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// Maps a platform error to a JSON 503: the only path to a 5xx is storage or
/// the platform failing, never bad input.
pub fn internal(e: worker::Error) -> ApiError {
    ApiError::unavailable(e)
}

/// A request header by name.
pub fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// Why a body was not read.
pub enum BodyError {
    /// Over the route's limit (declared, or found while reading).
    TooLarge,
    Unreadable(String),
}

impl BodyError {
    pub fn api(self, limit: usize) -> ApiError {
        match self {
            BodyError::TooLarge => ApiError::body_too_large(limit),
            BodyError::Unreadable(e) => ApiError::invalid_body(e),
        }
    }
}

/// A request's body, never holding more than `limit` bytes: a declared
/// `Content-Length` over it is refused before anything is read, and a
/// chunked body is read with a running count and dropped at the limit.
/// Methods without a body read nothing.
pub async fn body(req: &mut Request, limit: usize) -> std::result::Result<Vec<u8>, BodyError> {
    use worker::Method::{Delete, Get, Head, Options};
    if matches!(req.method(), Get | Head | Delete | Options) {
        return Ok(Vec::new());
    }
    let declared = header(req, "content-length").and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let Ok(mut stream) = req.stream() else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Unreadable(e.to_string()))?;
        if out.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
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
