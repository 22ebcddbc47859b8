//! Moving bytes between the runtime and the core: a decided [`Reply`] as a
//! response, a request's body and headers as the core reads them.

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

/// Maps a platform error to a JSON 503: the only path to a 5xx is storage or
/// the platform failing, never bad input.
pub fn internal(e: worker::Error) -> ApiError {
    ApiError::unavailable(e)
}

/// A request URL's origin, path and query (without its `?`), split out of
/// the serialized URL the runtime hands over: it is absolute and already
/// normalised, so reparsing it (the `url` crate, tens of microseconds a
/// time in wasm) would only find the same three pieces.
pub fn url_parts(url: &str) -> (std::borrow::Cow<'_, str>, &str, &str) {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let path_at = url[authority..].find('/').map_or(url.len(), |i| authority + i);
    let rest = url[path_at..].split('#').next().unwrap_or_default();
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    // An origin never carries user info (a request off the network has none).
    let origin = match url[authority..path_at].rfind('@') {
        Some(at) => format!("{}{}", &url[..authority], &url[authority + at + 1..path_at]).into(),
        None => url[..path_at].into(),
    };
    (origin, if path.is_empty() { "/" } else { path }, query)
}

/// A request to an object at `url` with the client's `method` and `body`
/// and its headers, copied natively as the request is built (one call, not
/// a crossing per header). The objects trust no header a client can send:
/// the thread's object reads only the caller, which the Worker sets over
/// any copy a client sent.
pub fn forwarded(
    raw: &web_sys::Request,
    url: &str,
    method: &str,
    body: Option<&wasm_bindgen::JsValue>,
) -> Result<web_sys::Request> {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(raw.headers().as_ref());
    if let Some(body) = body {
        init.set_body(body);
    }
    Ok(web_sys::Request::new_with_str_and_init(url, &init)?)
}

/// [`forwarded`] with a body that is not the client's (bytes the Worker
/// holds, or none): the client's `Content-Length` would misstate it.
pub fn forwarded_own(
    raw: &web_sys::Request,
    url: &str,
    method: &str,
    body: Option<&wasm_bindgen::JsValue>,
) -> Result<web_sys::Request> {
    let req = forwarded(raw, url, method, body)?;
    req.headers().delete("content-length")?;
    req.headers().delete("content-type")?;
    Ok(req)
}

/// The same request as one for a subscriber's socket: `GET` with
/// `Upgrade: websocket` and no body (nor the length of the one a send that
/// is followed by its stream had).
pub fn socket_request(raw: &web_sys::Request, url: &str) -> Result<web_sys::Request> {
    let req = forwarded(raw, url, "GET", None)?;
    let headers = req.headers();
    headers.set("upgrade", "websocket")?;
    headers.delete("content-length")?;
    Ok(req)
}

/// A request header by name.
pub fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// A response header by name.
pub fn header_of(resp: &Response, name: &str) -> Option<String> {
    resp.headers().get(name).ok().flatten()
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

/// A request's declared `Content-Length`.
pub fn declared_length(req: &Request) -> Option<u64> {
    header(req, "content-length").and_then(|v| v.trim().parse::<u64>().ok())
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
    let declared = declared_length(req);
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    if declared.is_some() {
        // A declared length within the cap: one read (the runtime holds the
        // body to the length it declared).
        return req.bytes().await.map_err(|e| BodyError::Unreadable(e.to_string()));
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

/// Most declared bytes of a refused request's body read and discarded
/// ([`discard_body`]).
const DISCARD_MAX: u64 = 4 * 1024 * 1024;

/// Reads and discards a request's body that was refused without being
/// read, when it declares a `Content-Length` of at most [`DISCARD_MAX`]:
/// a client still writing it would otherwise find the connection closed
/// under it, and one that reuses the connection sees its next request
/// reset. A larger or undeclared body is left unread (the refusal is sent
/// at once, and the runtime closes the connection, as HTTP allows).
pub async fn discard_body(raw: web_sys::Request) {
    if raw.body_used() || raw.body().is_none() {
        return;
    }
    let declared = raw.headers().get("content-length").ok().flatten().and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_none_or(|n| n > DISCARD_MAX) {
        return;
    }
    let mut req = Request::from(raw);
    let Ok(mut stream) = req.stream() else { return };
    while let Some(Ok(_)) = stream.next().await {}
}

/// A response's headers as a mutable copy: a response forwarded from an
/// object has immutable headers.
pub fn mutable_headers(resp: &Response) -> Result<Headers> {
    // One native copy (`new Headers(h)`), not a crossing per header.
    Ok(Headers(web_sys::Headers::new_with_headers(&resp.headers().0)?))
}

/// The answer as the client gets it: with what every answer of its
/// exchange carries, and without its body for a `HEAD` (an SSE route's
/// stream is dropped, which ends its subscription).
pub fn finish(resp: Response, finish: &threadline_durable::front::Finish) -> Result<Response> {
    let resp = if finish.head_only {
        Response::empty()?.with_status(resp.status_code()).with_headers(resp.headers().clone())
    } else {
        resp
    };
    let headers = mutable_headers(&resp)?;
    for (k, v) in &finish.headers {
        headers.set(k, v)?;
    }
    Ok(resp.with_headers(headers))
}
