//! Files a message carries: what the thread stores of them (a small
//! reference, never the bytes), what a deployment accepts, and how the
//! bytes are read, checked, named and served. The bytes themselves live in
//! R2 (binding `FILES`), put and read by the shell; every decision about
//! them is made here.
//!
//! - [`media`]: the accepted media types (`FILE_TYPES`), what a type is to a
//!   model (text, image, file), and the leading-bytes check that refuses a
//!   file whose bytes contradict its declared type.
//! - [`scan`]: a JSON body read as it streams, with the `data:` URLs and
//!   base64 strings at a protocol's file slots decoded out of it as they
//!   arrive, so a send carrying files is never held twice.
//! - [`read`]: a request body as files: raw bytes, `multipart/form-data`,
//!   or a JSON send through [`scan`].
//! - [`spec`]: an attachment as a send names it (a stored file, bytes
//!   inline, an `https:` URL), whatever the protocol called its fields.
//! - [`serve`]: a stored file's answer: its headers, `Range`, `ETag`.
//!
//! Invariants enforced here:
//! - A file is named by its content: `fileId` and its object key derive
//!   from its SHA-256, so the same bytes sent twice to a thread are stored
//!   once. Keys carry the thread's log generation, so a deleted thread's
//!   files are never confused with those of a thread re-created under the
//!   same id.
//! - Every check that can refuse a file (size, count, type, bytes against
//!   type, a malformed `data:` URL) runs before anything is stored.

pub mod media;
pub mod read;
pub mod scan;
pub mod serve;
pub mod spec;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use media::Types;

/// Largest file, by default (`MAX_FILE_BYTES`): 10 MiB.
pub const DEFAULT_MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Most files one message (or one upload) carries, by default
/// (`MAX_FILES_PER_MESSAGE`).
pub const DEFAULT_MAX_FILES: usize = 10;
/// How long an upload no message refers to is kept (`FILE_GRACE_MS`):
/// 1 hour, then the thread's alarm removes it from the bucket.
pub const DEFAULT_GRACE_MS: i64 = 60 * 60 * 1000;
/// Longest file name kept (longer names are cut at a character boundary).
pub const MAX_NAME_BYTES: usize = 255;

/// What a deployment accepts.
#[derive(Clone, Debug, PartialEq)]
pub struct FileLimits {
    /// 413 `file_too_large` over it.
    pub max_file_bytes: usize,
    /// 400 `too_many_files` over it.
    pub max_files: usize,
    /// 415 `unsupported_media_type` for any other type.
    pub types: Types,
    /// Unreferenced uploads are removed after this long.
    pub grace_ms: i64,
}

impl FileLimits {
    /// The largest JSON send a route with inline files reads: its JSON
    /// (`rest`) and, as base64, the most files a message may carry. A body
    /// declared larger is refused before it is read.
    pub fn send_body_cap(&self, rest: usize) -> usize {
        let file_b64 = self.max_file_bytes.div_ceil(3) * 4 + 1024;
        rest.saturating_add(self.max_files.saturating_mul(file_b64))
    }

    /// The largest `multipart/form-data` upload read: the most files, and
    /// 64 KiB of form around them. Counted as the body streams, declared
    /// or chunked.
    pub fn multipart_cap(&self) -> usize {
        self.max_files.saturating_mul(self.max_file_bytes).saturating_add(64 * 1024)
    }
}

impl Default for FileLimits {
    fn default() -> FileLimits {
        FileLimits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            types: Types::default(),
            grace_ms: DEFAULT_GRACE_MS,
        }
    }
}

/// A stored file as the thread's log and its messages hold it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRef {
    pub file_id: String,
    pub media_type: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hex SHA-256 of the bytes (also the file's `ETag`).
    pub sha256: String,
}

/// An attachment of a message: a file the thread stores, or an `https:` URL
/// the model's provider fetches itself.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Attachment {
    File(FileRef),
    #[serde(rename_all = "camelCase")]
    Url {
        url: String,
        media_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

impl Attachment {
    pub fn media_type(&self) -> &str {
        match self {
            Attachment::File(f) => &f.media_type,
            Attachment::Url { media_type, .. } => media_type,
        }
    }

    pub fn name(&self) -> Option<&str> {
        match self {
            Attachment::File(f) => f.name.as_deref(),
            Attachment::Url { name, .. } => name.as_deref(),
        }
    }

    /// Where a client reads it: the thread's file route under `origin`, or
    /// the URL itself.
    pub fn url(&self, origin: &str, thread: &str) -> String {
        match self {
            Attachment::File(f) => file_url(origin, thread, &f.file_id),
            Attachment::Url { url, .. } => url.clone(),
        }
    }

    /// Its JSON in the log and the messages views, with `url` added.
    pub fn to_json(&self, origin: &str, thread: &str) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["url"] = self.url(origin, thread).into();
        v
    }
}

/// A file the Worker read from a request, checked, before it is stored:
/// what the thread records of it when it reserves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewFile {
    pub file_id: String,
    pub sha256: String,
    pub media_type: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl NewFile {
    /// What `bytes` are, declared as `media_type` and named `name`.
    pub fn of(bytes: &[u8], media_type: &str, name: Option<&str>) -> NewFile {
        let sha256 = hex::encode(Sha256::digest(bytes));
        NewFile {
            file_id: file_id(&sha256),
            sha256,
            media_type: media_type.to_owned(),
            size: bytes.len() as u64,
            name: name.map(clean_name).filter(|n| !n.is_empty()),
        }
    }

    pub fn reference(&self) -> FileRef {
        FileRef {
            file_id: self.file_id.clone(),
            media_type: self.media_type.clone(),
            size: self.size,
            name: self.name.clone(),
            sha256: self.sha256.clone(),
        }
    }
}

/// A file's id: `f_` and the first 128 bits of its SHA-256, in hex.
pub fn file_id(sha256: &str) -> String {
    format!("f_{}", &sha256[..32.min(sha256.len())])
}

/// Whether `id` is a file id (`f_` and 32 lower-case hex digits).
pub fn is_file_id(id: &str) -> bool {
    id.len() == 34 && id.starts_with("f_") && id[2..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The object key of a thread's file: under the thread and its log's
/// generation, named by the bytes' hash.
pub fn key(thread: &str, generation: u64, sha256: &str) -> String {
    format!("{}{sha256}", prefix(thread, generation))
}

/// Every key of a thread's files in one generation starts with this.
pub fn prefix(thread: &str, generation: u64) -> String {
    format!("threads/{thread}/{generation}/")
}

/// Where a client reads a thread's file.
pub fn file_url(origin: &str, thread: &str, file_id: &str) -> String {
    format!("{}/v1/threads/{thread}/files/{file_id}", origin.trim_end_matches('/'))
}

/// The file a URL of [`file_url`]'s shape names on `thread`: absolute (any
/// origin) or a path.
pub fn parse_file_url<'a>(url: &'a str, thread: &str) -> Option<&'a str> {
    parse_any_file_url(url).filter(|(t, _)| *t == thread).map(|(_, id)| id)
}

/// The thread and file a URL of [`file_url`]'s shape names.
pub fn parse_any_file_url(url: &str) -> Option<(&str, &str)> {
    let path = match url.find("://") {
        Some(i) => &url[url[i + 3..].find('/').map(|j| i + 3 + j)?..],
        None => url,
    };
    let path = path.split(['?', '#']).next()?;
    let (thread, id) = path.strip_prefix("/v1/threads/")?.split_once("/files/")?;
    (is_file_id(id) && !thread.contains('/')).then_some((thread, id))
}

/// A file name as kept: control characters and path separators dropped,
/// at most [`MAX_NAME_BYTES`].
pub fn clean_name(name: &str) -> String {
    let cleaned: String =
        name.chars().filter(|c| !c.is_control() && *c != '/' && *c != '\\').collect::<String>().trim().to_owned();
    let mut end = cleaned.len().min(MAX_NAME_BYTES);
    while !cleaned.is_char_boundary(end) {
        end -= 1;
    }
    cleaned[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_by_their_bytes() {
        let a = NewFile::of(b"hello", "text/plain", Some("a.txt"));
        let b = NewFile::of(b"hello", "text/plain", Some("b.txt"));
        assert_eq!(a.file_id, b.file_id);
        assert_eq!(a.sha256, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
        assert_eq!(a.file_id, "f_2cf24dba5fb0a30e26e83b2ac5b9e29e");
        assert!(is_file_id(&a.file_id));
        assert!(!is_file_id("f_2CF24DBA5FB0A30E26E83B2AC5B9E29E"));
        assert!(!is_file_id("../x"));
        assert_eq!(key("t1", 7, &a.sha256), format!("threads/t1/7/{}", a.sha256));
    }

    #[test]
    fn file_urls_round_trip() {
        let url = file_url("https://x.example/", "t1", "f_2cf24dba5fb0a30e26e83b2ac5b9e29e");
        assert_eq!(url, "https://x.example/v1/threads/t1/files/f_2cf24dba5fb0a30e26e83b2ac5b9e29e");
        assert_eq!(parse_file_url(&url, "t1"), Some("f_2cf24dba5fb0a30e26e83b2ac5b9e29e"));
        assert_eq!(
            parse_file_url("/v1/threads/t1/files/f_2cf24dba5fb0a30e26e83b2ac5b9e29e?token=x", "t1"),
            Some("f_2cf24dba5fb0a30e26e83b2ac5b9e29e")
        );
        assert_eq!(parse_file_url(&url, "t2"), None, "another thread's file is not this thread's");
        assert_eq!(parse_file_url("https://x.example/v1/threads/t1/files/nope", "t1"), None);
        assert_eq!(parse_file_url("https://x.example", "t1"), None);
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name(" ../etc/passwd\n"), "..etcpasswd");
        assert_eq!(clean_name(&"é".repeat(200)).len(), 254);
    }

    #[test]
    fn attachments_serialise_as_references() {
        let f = Attachment::File(NewFile::of(b"x", "text/plain", None).reference());
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["mediaType"], "text/plain");
        assert!(v.get("name").is_none());
        assert_eq!(serde_json::from_value::<Attachment>(v).unwrap(), f);
        let u = Attachment::Url { url: "https://a/b.png".into(), media_type: "image/png".into(), name: None };
        let v = serde_json::to_value(&u).unwrap();
        assert_eq!(serde_json::from_value::<Attachment>(v).unwrap(), u);
        assert_eq!(
            f.to_json("https://o", "t")["url"],
            format!("https://o/v1/threads/t/files/{}", file_id(&hex::encode(Sha256::digest(b"x"))))
        );
    }
}
