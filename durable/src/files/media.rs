//! Media types: which a deployment accepts (`FILE_TYPES`), what each is to
//! a model, and whether a file's leading bytes agree with its declared
//! type. A browser trusts a declared type only so far (the file route
//! answers `nosniff` and a sandbox policy besides), but the model and every
//! client reading the history trust it fully, so a file whose bytes say
//! otherwise is refused before it is stored.

use crate::wire::error::ApiError;

/// The types accepted unless `FILE_TYPES` says otherwise: images, PDF,
/// plain text, markdown, CSV and JSON.
pub const DEFAULT_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
];

/// What a file is to a model (the catalog's `input` names these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Given to the model as text.
    Text,
    /// An `image_url` content part.
    Image,
    /// A `file` content part (PDF).
    File,
}

impl Input {
    pub fn as_str(self) -> &'static str {
        match self {
            Input::Text => "text",
            Input::Image => "image",
            Input::File => "file",
        }
    }
}

/// The accepted media types: exact types, or `type/*`.
#[derive(Clone, Debug, PartialEq)]
pub struct Types(Vec<String>);

impl Default for Types {
    fn default() -> Types {
        Types(DEFAULT_TYPES.iter().map(|t| (*t).to_owned()).collect())
    }
}

impl Types {
    /// `FILE_TYPES`: comma-separated media types, `type/*` allowed.
    pub fn parse(raw: &str) -> Result<Types, String> {
        let mut out = Vec::new();
        for t in raw.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let t = t.to_ascii_lowercase();
            match t.split_once('/') {
                Some((a, b)) if !a.is_empty() && !b.is_empty() && a != "*" && !t.contains(';') => out.push(t),
                _ => return Err(format!("FILE_TYPES: `{t}` is not a media type (`image/png`, `image/*`)")),
            }
        }
        if out.is_empty() {
            return Err("FILE_TYPES is empty: name at least one media type".to_owned());
        }
        Ok(Types(out))
    }

    pub fn allows(&self, media_type: &str) -> bool {
        let (kind, _) = media_type.split_once('/').unwrap_or((media_type, ""));
        self.0.iter().any(|t| t == media_type || t.strip_suffix("/*") == Some(kind))
    }

    pub fn list(&self) -> &[String] {
        &self.0
    }
}

/// A declared type as compared: lower case, parameters dropped.
pub fn essence(media_type: &str) -> String {
    media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// What a type is to a model: raster images are images, PDF is a file,
/// text (and JSON, and any other type a deployment allows) is text.
pub fn input(media_type: &str) -> Input {
    match media_type {
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" => Input::Image,
        "application/pdf" => Input::File,
        _ => Input::Text,
    }
}

/// Whether a client may show it in place: raster images (anything else
/// downloads).
pub fn inline(media_type: &str) -> bool {
    input(media_type) == Input::Image
}

/// Checks a file: an accepted type (415 `unsupported_media_type`) whose
/// leading bytes do not contradict it (415 `file_type_mismatch`).
pub fn check(media_type: &str, bytes: &[u8], types: &Types) -> Result<(), ApiError> {
    if !types.allows(media_type) {
        return Err(ApiError::unsupported_media_type(media_type, types.list()));
    }
    match contradiction(media_type, bytes) {
        Some(found) => Err(ApiError::file_type_mismatch(media_type, found)),
        None => Ok(()),
    }
}

/// What the bytes are instead, when they contradict `media_type`.
fn contradiction(media_type: &str, bytes: &[u8]) -> Option<&'static str> {
    let signature: Option<&[&[u8]]> = match media_type {
        "image/png" => Some(&[b"\x89PNG\r\n\x1a\n"]),
        "image/jpeg" => Some(&[b"\xff\xd8\xff"]),
        "image/gif" => Some(&[b"GIF87a", b"GIF89a"]),
        "application/pdf" => Some(&[b"%PDF-"]),
        _ => None,
    };
    let webp = bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP";
    if let Some(sigs) = signature {
        return (!sigs.iter().any(|s| bytes.starts_with(s))).then(|| detect(bytes));
    }
    if media_type == "image/webp" {
        return (!webp).then(|| detect(bytes));
    }
    let text = media_type.starts_with("text/") || media_type == "application/json";
    // Text may hold HTML fragments (a README opens with `<p align=...>`):
    // only a whole page is refused. Any other type is refused on any HTML.
    if looks_like_html(bytes, if text { DOCUMENT_TAGS } else { ALL_TAGS }) {
        return Some("text/html");
    }
    if text {
        if std::str::from_utf8(bytes).is_err() || bytes.contains(&0) {
            return Some(detect(bytes));
        }
        if media_type == "application/json" && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() {
            return Some("text that is not JSON");
        }
    }
    None
}

/// A name for what leading bytes look like (for a refusal's message).
fn detect(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"\x89PNG") {
        "image/png"
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        "image/jpeg"
    } else if bytes.starts_with(b"GIF8") {
        "image/gif"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else if bytes.starts_with(b"%PDF-") {
        "application/pdf"
    } else if looks_like_html(bytes, ALL_TAGS) {
        "text/html"
    } else if std::str::from_utf8(bytes).is_ok() {
        "text"
    } else {
        "binary data"
    }
}

/// The tags that open a whole HTML page, or run script.
const DOCUMENT_TAGS: &[&[u8]] = &[b"<!doctype html", b"<html", b"<script", b"<iframe"];

/// The HTML patterns of the WHATWG MIME sniffing standard (§7.1).
const ALL_TAGS: &[&[u8]] = &[
    b"<!doctype html",
    b"<html",
    b"<head",
    b"<script",
    b"<iframe",
    b"<h1",
    b"<div",
    b"<font",
    b"<table",
    b"<a",
    b"<style",
    b"<title",
    b"<b",
    b"<body",
    b"<br",
    b"<p",
    b"<svg",
    b"<?xml",
];

/// Whether the bytes open with one of `tags` (case-insensitive, followed
/// by a space, `>` or `/`), or, with the full list, a comment. What a
/// browser skips before it decides is skipped first: a byte-order mark,
/// whitespace, and (with the document tags) whole comments, so
/// `<!-- -->\n<!DOCTYPE html>` is still a page. Linear in the bytes.
fn looks_like_html(bytes: &[u8], tags: &[&[u8]]) -> bool {
    let mut rest = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let head = loop {
        let start =
            rest.iter().position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\x0c' | b'\r')).unwrap_or(rest.len());
        rest = &rest[start..];
        if !rest.starts_with(b"<!--") {
            break &rest[..rest.len().min(32)];
        }
        if std::ptr::eq(tags, ALL_TAGS) {
            return true;
        }
        match memchr::memmem::find(&rest[4..], b"-->") {
            Some(end) => rest = &rest[4 + end + 3..],
            None => return false,
        }
    };
    tags.iter().any(|tag| {
        head.len() > tag.len()
            && head[..tag.len()].eq_ignore_ascii_case(tag)
            && matches!(head[tag.len()], b' ' | b'>' | b'\t' | b'\n' | b'\r' | b'/')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn accepted_types() {
        let d = Types::default();
        assert!(d.allows("image/png") && d.allows("text/csv") && !d.allows("text/html"));
        let t = Types::parse("image/*, application/pdf").unwrap();
        assert!(t.allows("image/avif") && t.allows("application/pdf") && !t.allows("text/plain"));
        assert!(Types::parse("nope").is_err());
        assert!(Types::parse("*/*").is_err());
        assert!(Types::parse(" , ").is_err());
        assert_eq!(essence("Text/Plain; charset=UTF-8"), "text/plain");
    }

    #[test]
    fn bytes_must_agree_with_the_declared_type() {
        let t = Types::default();
        assert!(check("image/png", PNG, &t).is_ok());
        assert!(check("image/jpeg", b"\xff\xd8\xff\xe0", &t).is_ok());
        assert!(check("image/webp", b"RIFF\0\0\0\0WEBPVP8 ", &t).is_ok());
        assert!(check("application/pdf", b"%PDF-1.7\n", &t).is_ok());
        assert!(check("text/markdown", "# Title\n\nsome *text* <b>inline</b>".as_bytes(), &t).is_ok());
        assert!(check("text/markdown", b"<p align=\"center\"><img src=\"logo.png\"></p>\n# Project", &t).is_ok());
        assert!(check("application/json", br#"{"a": [1, 2]}"#, &t).is_ok());

        let refused = |ty: &str, bytes: &[u8]| check(ty, bytes, &t).unwrap_err();
        let html = refused("image/png", b"<!DOCTYPE html><script>alert(1)</script>");
        assert_eq!((html.status, html.code), (415, "file_type_mismatch"));
        assert!(html.message.contains("text/html"), "{}", html.message);
        assert_eq!(refused("image/png", b"\xff\xd8\xff\xe0").code, "file_type_mismatch");
        assert_eq!(refused("text/plain", b"  <html><body>hi").code, "file_type_mismatch");
        assert_eq!(refused("text/plain", PNG).code, "file_type_mismatch");
        assert_eq!(refused("application/json", b"{nope").code, "file_type_mismatch");
        assert_eq!(refused("application/pdf", b"hello").code, "file_type_mismatch");
        assert_eq!(refused("text/html", b"<p>hi</p>").code, "unsupported_media_type");
        // A type a deployment adds is checked for HTML only.
        let zip = Types::parse("application/zip").unwrap();
        assert!(check("application/zip", b"PK\x03\x04", &zip).is_ok());
        assert_eq!(check("application/zip", b"<html>", &zip).unwrap_err().code, "file_type_mismatch");
    }

    /// What a browser skips before it sniffs, the check skips too: a page
    /// behind a byte-order mark or comments is still a page.
    #[test]
    fn a_page_behind_a_bom_or_comments_is_refused_as_text() {
        let t = Types::default();
        let refused = |ty: &str, bytes: &[u8]| check(ty, bytes, &t).map_err(|e| e.code);
        for page in [
            &b"\xef\xbb\xbf<!DOCTYPE html><script>alert(1)</script>"[..],
            b"<!-- a note --><!DOCTYPE html><p>x",
            b"\xef\xbb\xbf \n<!-- one -->\n<!--two-->  <html><body>",
            b"<!---->\n<script>alert(1)</script>",
        ] {
            for ty in ["text/plain", "text/markdown", "text/csv"] {
                assert_eq!(refused(ty, page), Err("file_type_mismatch"), "{ty}: {:?}", String::from_utf8_lossy(page));
            }
        }
        // Comments before ordinary text are text; an unclosed one too.
        assert!(check("text/markdown", b"<!-- badges -->\n# Title\n\ntext", &t).is_ok());
        assert!(check("text/plain", b"<!-- never closed <html>", &t).is_ok());
        assert!(check("text/plain", b"\xef\xbb\xbfplain text", &t).is_ok());
        // A huge run of comments is read once.
        let many = "<!-- x -->".repeat(200_000) + "<html>";
        assert_eq!(refused("text/plain", many.as_bytes()), Err("file_type_mismatch"));
    }

    #[test]
    fn what_a_type_is_to_a_model() {
        assert_eq!(input("image/png"), Input::Image);
        assert_eq!(input("application/pdf"), Input::File);
        assert_eq!(input("text/csv"), Input::Text);
        assert!(inline("image/webp") && !inline("image/svg+xml") && !inline("application/pdf"));
    }
}
