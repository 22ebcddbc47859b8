//! Spans and log lines out of the Worker and the objects: each log line to
//! the console (Workers Logs reads JSON lines), each span to the OTLP/HTTP
//! collector the core's settings name, as one JSON post per batch under
//! `waitUntil`, after the answer: a slow or absent collector never delays a
//! request or a stream. What the spans say is the core's (`trace`).

use std::cell::RefCell;
use std::time::Duration;
use threadline_durable::trace::{Otlp, Span};
use worker::*;

/// A post to the collector is given up after this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Spans held for the next export, at most this many (a collector that is
/// far behind loses the oldest, never the isolate's memory).
const MOST_PENDING: usize = 2048;

thread_local! {
    /// The spans this isolate's objects recorded since their last export.
    static PENDING: RefCell<Vec<Span>> = const { RefCell::new(Vec::new()) };
}

/// Holds `spans` for the next [`take`].
pub fn record(spans: impl IntoIterator<Item = Span>) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.extend(spans);
        let over = p.len().saturating_sub(MOST_PENDING);
        p.drain(..over);
    });
}

/// The spans held, for an export.
pub fn take() -> Vec<Span> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// Writes one structured log line.
pub fn log(line: &str) {
    console_log!("{line}");
}

/// Posts `spans` to the collector (a future for `waitUntil`); a failure is
/// a warning naming the status, never the headers (they hold credentials).
pub async fn export(otlp: Otlp, spans: Vec<Span>) {
    if spans.is_empty() {
        return;
    }
    let body = otlp.encode(&spans);
    let sent = async {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        for (k, v) in &otlp.headers {
            headers.set(k, v)?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_headers(headers).with_body(Some(body.into()));
        let resp = Fetch::Request(Request::new_with_init(&otlp.url, &init)?).send().await?;
        if resp.status_code() >= 300 {
            return Err(Error::RustError(format!("the collector answered {}", resp.status_code())));
        }
        Ok(())
    };
    let timeout = Delay::from(EXPORT_TIMEOUT);
    futures_util::pin_mut!(sent);
    futures_util::pin_mut!(timeout);
    match futures_util::future::select(sent, timeout).await {
        futures_util::future::Either::Left((Ok(()), _)) => {}
        futures_util::future::Either::Left((Err(e), _)) => {
            console_warn!("traces: {} spans not exported: {e}", spans.len())
        }
        futures_util::future::Either::Right(_) => {
            console_warn!("traces: {} spans not exported: the collector did not answer in 10 s", spans.len())
        }
    }
}
