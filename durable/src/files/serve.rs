//! A stored file's answer: its headers, a `Range`, `If-None-Match`. The
//! bytes are R2's; what the answer says of them is decided here, so a
//! file is served the same from any shell.
//!
//! Invariants enforced here:
//! - A file is never run as a page of this origin: every answer carries
//!   `X-Content-Type-Options: nosniff` and `Content-Security-Policy:
//!   sandbox`, and only raster images are shown in place (`inline`); every
//!   other type downloads (`attachment`).
//! - Its `ETag` is its SHA-256, so a cached copy is valid exactly as long
//!   as the bytes are the same.

use super::{media, FileRef};
use crate::wire::reply::Reply;

/// How the shell answers a file read: stream `length` bytes from `offset`
/// of the object `key`, with this status and these headers. The thread
/// decides it; it travels to the Worker as JSON.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FilePlan {
    pub key: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub offset: u64,
    pub length: u64,
}

/// What to answer: the bytes (all, or a range), or a reply without them
/// (304, 416).
#[derive(Debug)]
pub enum FileAnswer {
    Bytes(FilePlan),
    Reply(Reply),
}

/// The answer to a read of `file` at `key`, given the request's `Range`
/// and `If-None-Match`.
pub fn answer(file: &FileRef, key: &str, range: Option<&str>, if_none_match: Option<&str>) -> FileAnswer {
    let etag = format!("\"{}\"", file.sha256);
    let mut headers: Vec<(&'static str, String)> = vec![
        ("etag", etag.clone()),
        ("cache-control", "private, max-age=31536000, immutable".to_owned()),
        ("accept-ranges", "bytes".to_owned()),
        ("x-content-type-options", "nosniff".to_owned()),
        ("content-security-policy", "sandbox; default-src 'none'".to_owned()),
    ];
    if if_none_match.is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*")) {
        let mut r = Reply::new(304);
        for (k, v) in headers {
            r.set(k, v);
        }
        return FileAnswer::Reply(r);
    }
    headers.push(("content-type", file.media_type.clone()));
    headers.push(("content-disposition", disposition(file)));
    let size = file.size;
    let (status, offset, length) = match range.map(|r| parse_range(r, size)) {
        None | Some(Range::Ignored) => (200, 0, size),
        Some(Range::Satisfiable(start, end)) => {
            headers.push(("content-range", format!("bytes {start}-{end}/{size}")));
            (206, start, end - start + 1)
        }
        Some(Range::Unsatisfiable) => {
            let mut r = Reply::error(&crate::wire::error::ApiError::range_not_satisfiable(size));
            r.set("content-range", format!("bytes */{size}"));
            return FileAnswer::Reply(r);
        }
    };
    headers.push(("content-length", length.to_string()));
    let headers = headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    FileAnswer::Bytes(FilePlan { key: key.to_owned(), status, headers, offset, length })
}

/// `inline` for raster images, else `attachment`, with the name (RFC 6266:
/// an ASCII fallback and the UTF-8 name).
fn disposition(file: &FileRef) -> String {
    let kind = if media::inline(&file.media_type) { "inline" } else { "attachment" };
    let Some(name) = &file.name else { return kind.to_owned() };
    let ascii: String =
        name.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' }).collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

#[derive(Debug, PartialEq)]
enum Range {
    /// Not one range this server serves (several, another unit, malformed):
    /// the whole file, as RFC 9110 allows.
    Ignored,
    /// `first-last`, inclusive.
    Satisfiable(u64, u64),
    Unsatisfiable,
}

/// One `bytes=` range of a file of `size` bytes.
fn parse_range(header: &str, size: u64) -> Range {
    let Some(spec) = header.trim().strip_prefix("bytes=") else { return Range::Ignored };
    if spec.contains(',') {
        return Range::Ignored;
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Range::Ignored };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| s.parse::<u64>().ok();
    match (a.is_empty(), b.is_empty()) {
        // `-n`: the last n bytes.
        (true, false) => match num(b) {
            Some(0) => Range::Unsatisfiable,
            Some(n) if size > 0 => Range::Satisfiable(size.saturating_sub(n), size - 1),
            Some(_) => Range::Unsatisfiable,
            None => Range::Ignored,
        },
        // `n-`: from n to the end.
        (false, true) => match num(a) {
            Some(start) if start < size => Range::Satisfiable(start, size - 1),
            Some(_) => Range::Unsatisfiable,
            None => Range::Ignored,
        },
        (false, false) => match (num(a), num(b)) {
            (Some(start), Some(end)) if start > end => Range::Ignored,
            (Some(start), Some(_)) if start >= size => Range::Unsatisfiable,
            (Some(start), Some(end)) => Range::Satisfiable(start, end.min(size - 1)),
            _ => Range::Ignored,
        },
        (true, true) => Range::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(media_type: &str, name: Option<&str>) -> FileRef {
        FileRef {
            file_id: "f_x".into(),
            media_type: media_type.into(),
            size: 10,
            name: name.map(Into::into),
            sha256: "ab".repeat(32),
        }
    }

    fn header<'a>(plan: &'a FilePlan, name: &str) -> Option<&'a str> {
        plan.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn whole_files_and_their_headers() {
        let FileAnswer::Bytes(p) = answer(&file("image/png", Some("shot.png")), "k", None, None) else { panic!() };
        assert_eq!((p.status, p.offset, p.length, p.key.as_str()), (200, 0, 10, "k"));
        assert_eq!(header(&p, "content-type"), Some("image/png"));
        assert_eq!(header(&p, "content-length"), Some("10"));
        assert_eq!(header(&p, "etag"), Some(format!("\"{}\"", "ab".repeat(32)).as_str()));
        assert_eq!(header(&p, "x-content-type-options"), Some("nosniff"));
        assert!(header(&p, "content-security-policy").unwrap().starts_with("sandbox"));
        assert_eq!(header(&p, "content-disposition"), Some("inline; filename=\"shot.png\"; filename*=UTF-8''shot.png"));
        let FileAnswer::Bytes(p) = answer(&file("text/html", Some("é\".html")), "k", None, None) else { panic!() };
        assert_eq!(
            header(&p, "content-disposition"),
            Some("attachment; filename=\"__.html\"; filename*=UTF-8''%C3%A9%22.html")
        );
        let FileAnswer::Reply(r) =
            answer(&file("image/png", None), "k", None, Some(&format!("W/\"x\", \"{}\"", "ab".repeat(32))))
        else {
            panic!()
        };
        assert_eq!(r.status, 304);
        assert!(r.body.is_empty());
    }

    #[test]
    fn ranges() {
        let at = |r: &str| match answer(&file("image/png", None), "k", Some(r), None) {
            FileAnswer::Bytes(p) => (p.status, p.offset, p.length, header(&p, "content-range").map(str::to_owned)),
            FileAnswer::Reply(r) => (r.status, 0, 0, r.get("content-range").map(str::to_owned)),
        };
        assert_eq!(at("bytes=0-3"), (206, 0, 4, Some("bytes 0-3/10".into())));
        assert_eq!(at("bytes=8-"), (206, 8, 2, Some("bytes 8-9/10".into())));
        assert_eq!(at("bytes=-3"), (206, 7, 3, Some("bytes 7-9/10".into())));
        assert_eq!(at("bytes=-30"), (206, 0, 10, Some("bytes 0-9/10".into())));
        assert_eq!(at("bytes=5-100"), (206, 5, 5, Some("bytes 5-9/10".into())));
        assert_eq!(at("bytes=10-"), (416, 0, 0, Some("bytes */10".into())));
        assert_eq!(at("bytes=0-1,4-5").0, 200);
        assert_eq!(at("items=0-1").0, 200);
        assert_eq!(at("bytes=5-1").0, 200);
        assert_eq!(at("bytes=x-1").0, 200);
    }
}
