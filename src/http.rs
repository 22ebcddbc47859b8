//! Moving bytes between the runtime and the core: a decided [`Reply`] as a
//! response, a request's body and headers as the core reads them.

use futures_util::StreamExt;
use threadline_durable::{ApiError, Reply};
use worker::{Headers, Response, Result};

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

/// A request as the Worker and the objects read it: the runtime's own,
/// with its method and headers fetched once (each is a call into
/// JavaScript). Never a `worker::Request` in the Worker: making one reads
/// the request's `cf`, which workerd builds into an object on first read,
/// for a value nothing here uses.
pub struct Incoming {
    pub raw: web_sys::Request,
    /// In capitals, as the router matches it (fetch leaves `patch` as the
    /// client wrote it).
    pub method: String,
    headers: web_sys::Headers,
}

impl Incoming {
    pub fn new(raw: web_sys::Request) -> Incoming {
        let (method, headers) = (raw.method().to_ascii_uppercase(), raw.headers());
        Incoming { raw, method, headers }
    }

    /// An object's request as the worker crate hands it over (its method and
    /// headers already read; the method is the one the Worker chose, never a
    /// client's).
    pub fn of(req: &worker::Request) -> Incoming {
        let raw = Clone::clone(req.inner());
        Incoming { raw, method: req.method().to_string(), headers: Clone::clone(&req.headers().0) }
    }

    /// A header by name.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).ok().flatten()
    }

    /// The declared `Content-Length`.
    pub fn declared_length(&self) -> Option<u64> {
        self.header("content-length").and_then(|v| v.trim().parse::<u64>().ok())
    }

    /// The body as a stream of chunks; `None` without a body, or once it
    /// was read.
    pub fn byte_stream(&self) -> Option<worker::ByteStream> {
        if self.raw.body_used() {
            return None;
        }
        self.raw.body().map(worker::ByteStream::from)
    }
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

/// A request's body, never holding more than `limit` bytes: a declared
/// `Content-Length` over it is refused before anything is read, and a
/// chunked body is read with a running count and dropped at the limit.
/// Methods without a body read nothing.
pub async fn body(req: &Incoming, limit: usize) -> std::result::Result<Vec<u8>, BodyError> {
    if matches!(req.method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS") {
        return Ok(Vec::new());
    }
    let declared = req.declared_length();
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let unreadable = |e: wasm_bindgen::JsValue| BodyError::Unreadable(worker::Error::from(e).to_string());
    if declared.is_some() {
        // A declared length within the cap: one read (the runtime holds the
        // body to the length it declared).
        let buffer = wasm_bindgen_futures::JsFuture::from(req.raw.array_buffer().map_err(unreadable)?).await;
        return Ok(js_sys::Uint8Array::new(&buffer.map_err(unreadable)?).to_vec());
    }
    let Some(mut stream) = req.byte_stream() else { return Ok(Vec::new()) };
    let mut out = Vec::new();
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
pub async fn discard_body(req: &Incoming) {
    if req.declared_length().is_none_or(|n| n > DISCARD_MAX) {
        return;
    }
    let Some(mut stream) = req.byte_stream() else { return };
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
