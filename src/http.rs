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

/// The request's whole body (bodies are capped by the route before they
/// are read).
pub async fn body(req: &mut Request) -> std::result::Result<Vec<u8>, ApiError> {
    match req.method() {
        worker::Method::Get | worker::Method::Head | worker::Method::Delete | worker::Method::Options => Ok(Vec::new()),
        _ => req.bytes().await.map_err(|e| ApiError::invalid_body(e.to_string())),
    }
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
