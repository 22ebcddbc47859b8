//! The protocol's wire pieces, apart from I/O: header names, the answer a
//! decision produces ([`Reply`]), SSE `data`/`control` frames, response
//! cursors, JSON-mode bodies and `Stream-Expires-At` timestamps.

use base64::Engine as _;
use serde_json::{Map, Value};

pub const NEXT_OFFSET: &str = "stream-next-offset";
pub const UP_TO_DATE: &str = "stream-up-to-date";
pub const CURSOR: &str = "stream-cursor";
pub const CLOSED: &str = "stream-closed";
pub const TTL: &str = "stream-ttl";
pub const EXPIRES_AT: &str = "stream-expires-at";
pub const SEQ: &str = "stream-seq";
pub const PRODUCER_ID: &str = "producer-id";
pub const PRODUCER_EPOCH: &str = "producer-epoch";
pub const PRODUCER_SEQ: &str = "producer-seq";
pub const PRODUCER_EXPECTED_SEQ: &str = "producer-expected-seq";
pub const PRODUCER_RECEIVED_SEQ: &str = "producer-received-seq";
pub const FORKED_FROM: &str = "stream-forked-from";
pub const FORK_OFFSET: &str = "stream-fork-offset";
pub const FORK_SUB_OFFSET: &str = "stream-fork-sub-offset";
pub const SSE_ENCODING: &str = "stream-sse-data-encoding";

/// Headers every Durable Streams answer carries (CORS for any origin, and
/// the browser security headers of the protocol's section 10.7).
pub const COMMON_HEADERS: &[(&str, &str)] = &[
    ("access-control-allow-origin", "*"),
    ("access-control-allow-methods", "GET, POST, PUT, DELETE, HEAD, OPTIONS"),
    (
        "access-control-allow-headers",
        "content-type, authorization, if-none-match, last-event-id, Stream-Seq, Stream-TTL, Stream-Expires-At, Stream-Closed, Producer-Id, Producer-Epoch, Producer-Seq, Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset",
    ),
    (
        "access-control-expose-headers",
        "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, Stream-TTL, Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, Producer-Expected-Seq, Producer-Received-Seq, etag, content-type, content-encoding, location, vary",
    ),
    ("x-content-type-options", "nosniff"),
    ("cross-origin-resource-policy", "cross-origin"),
    // Stored content is never an active document on the app's origin: a
    // stream created as `text/html` opened in a browser runs no script, in
    // a sandbox with no origin, and loads nothing.
    ("content-security-policy", "sandbox; default-src 'none'"),
];

pub use crate::wire::reply::Reply;

/// Appends one SSE event. Every line of `payload` (split on CRLF, CR or LF,
/// all three being SSE line ends) gets its own `data:` line, so no payload
/// can end the event early or forge another field. No space follows
/// `data:`: a client strips exactly one, which would eat a payload's own.
pub fn sse_event(event: &str, payload: &str, out: &mut Vec<u8>) {
    debug_assert!(!event.contains(['\r', '\n']));
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.push(b'\n');
    let mut rest = payload;
    loop {
        let end = rest.find(['\r', '\n']);
        out.extend_from_slice(b"data:");
        out.extend_from_slice(&rest.as_bytes()[..end.unwrap_or(rest.len())]);
        out.push(b'\n');
        match end {
            None => break,
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
        }
    }
    out.push(b'\n');
}

/// An `event: control` frame.
pub fn sse_control(next: &str, cursor: Option<&str>, up_to_date: bool, closed: bool, out: &mut Vec<u8>) {
    let mut m = Map::new();
    m.insert("streamNextOffset".into(), next.into());
    if closed {
        m.insert("streamClosed".into(), true.into());
    } else {
        if let Some(c) = cursor {
            m.insert("streamCursor".into(), c.into());
        }
        if up_to_date {
            m.insert("upToDate".into(), true.into());
        }
    }
    sse_event("control", &Value::Object(m).to_string(), out);
}

/// Base64 for an SSE `data` frame of a binary stream.
pub fn base64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// How long a live SSE connection is held before the server ends it; clients
/// resume from their last offset, so no connection is kept forever
/// (`docs/protocols/notes-from-source-and-trackers.md` §3: recycle at about 60 s).
pub const SSE_RECYCLE_MS: i64 = 60_000;

/// The jitter, in cursor intervals (1 to 180), a live answer adds to a cursor
/// the client already holds, from a random draw.
pub fn cursor_jitter(random: u64) -> u64 {
    1 + random % 180
}

/// Cursor epoch (2024-10-09T00:00:00Z) and interval of the protocol's
/// CDN-collapsing cursors.
const CURSOR_EPOCH_MS: i64 = 1_728_432_000_000;
const CURSOR_INTERVAL_MS: i64 = 20_000;

/// The `Stream-Cursor` of a live answer: the current 20-second interval
/// number, or, when the client already sent that interval or a later one,
/// a later interval (by `jitter_intervals`, at least 1), so a client never
/// gets back the cursor it sent and caches never collapse two rounds.
pub fn response_cursor(client: Option<&str>, now_ms: i64, jitter_intervals: u64) -> String {
    let current = (now_ms - CURSOR_EPOCH_MS).div_euclid(CURSOR_INTERVAL_MS);
    match client.and_then(|c| c.trim().parse::<i64>().ok()) {
        Some(c) if c >= current => (c + jitter_intervals.max(1) as i64).to_string(),
        _ => current.to_string(),
    }
}

/// `type/subtype` lower-cased, parameters dropped.
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

pub fn is_json(content_type: &str) -> bool {
    media_type(content_type) == "application/json"
}

/// Text types travel as text in SSE; every other type as base64.
pub fn is_text(content_type: &str) -> bool {
    let t = media_type(content_type);
    t.starts_with("text/") || t == "application/json"
}

/// Why a JSON-mode body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    Invalid,
    EmptyArray,
}

/// A JSON-mode append: one value, or an array whose elements are appended
/// as separate messages. Returns the stored form (each element's compact
/// JSON followed by `,`); an empty array is refused, except in a create's
/// initial body where it means "no messages".
pub fn json_append(body: &[u8], initial: bool) -> Result<Vec<u8>, JsonError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| JsonError::Invalid)?;
    let items = match value {
        Value::Array(items) if items.is_empty() => {
            return if initial { Ok(Vec::new()) } else { Err(JsonError::EmptyArray) };
        }
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in items {
        out.extend_from_slice(item.to_string().as_bytes());
        out.push(b',');
    }
    Ok(out)
}

/// The stored JSON fragments of several messages as one JSON array.
pub fn json_array<'a>(fragments: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![b'['];
    for f in fragments {
        let f = f.strip_suffix(b",").unwrap_or(f);
        if f.is_empty() {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(f);
    }
    out.push(b']');
    out
}

/// Parses an RFC 3339 timestamp (`2026-01-02T03:04:05.678Z`, or with a
/// `±hh:mm` offset) to epoch milliseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = std::str::from_utf8(&b[start..i.min(start + 3)]).ok()?;
        ms = format!("{frac:0<3}").parse().ok()?;
    }
    let zone = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hh = num(i + 1..i + 3)?;
            let mm = num(i + 4..i + 6)?;
            let _ = (h1, h2, m1, m2);
            let minutes = hh * 60 + mm;
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y2, m2) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) - zone * 60) * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_event_splits_every_line_end() {
        let mut out = Vec::new();
        sse_event("data", "a\r\nb\rc\nd", &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "event: data\ndata:a\ndata:b\ndata:c\ndata:d\n\n");
        let mut out = Vec::new();
        sse_event("data", " x", &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "event: data\ndata: x\n\n");
    }

    #[test]
    fn control_frames() {
        let mut out = Vec::new();
        sse_control("0_1", Some("7"), true, false, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: control\ndata:{\"streamNextOffset\":\"0_1\",\"streamCursor\":\"7\",\"upToDate\":true}\n\n"
        );
        let mut out = Vec::new();
        sse_control("0_1", Some("7"), true, true, &mut out);
        assert!(String::from_utf8(out).unwrap().contains("\"streamClosed\":true}"));
    }

    #[test]
    fn cursors_never_repeat_the_clients() {
        let now = CURSOR_EPOCH_MS + 100 * CURSOR_INTERVAL_MS + 5;
        assert_eq!(response_cursor(None, now, 3), "100");
        assert_eq!(response_cursor(Some("50"), now, 3), "100");
        assert_eq!(response_cursor(Some("100"), now, 3), "103");
        assert_eq!(response_cursor(Some("100"), now, 0), "101");
        assert_eq!(response_cursor(Some("junk"), now, 3), "100");
    }

    #[test]
    fn json_mode() {
        assert_eq!(json_append(b"[1, {\"a\": 2}]", false).unwrap(), b"1,{\"a\":2},");
        assert_eq!(json_append(b"{\"a\":1}", false).unwrap(), b"{\"a\":1},");
        assert_eq!(json_append(b"[]", false), Err(JsonError::EmptyArray));
        assert_eq!(json_append(b"[]", true).unwrap(), b"");
        assert_eq!(json_append(b"{nope", false), Err(JsonError::Invalid));
        assert_eq!(json_array([&b"1,2,"[..], b"3,"]), b"[1,2,3]");
        assert_eq!(json_array(std::iter::empty()), b"[]");
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2024-10-09T00:00:00.000Z"), Some(CURSOR_EPOCH_MS));
        assert_eq!(parse_rfc3339("2024-10-09T02:00:00.5+02:00"), Some(CURSOR_EPOCH_MS + 500));
        for bad in ["not-a-timestamp", "2024-13-01T00:00:00Z", "2024-10-09", "2024-10-09T00:00:00"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
