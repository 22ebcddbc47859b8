//! An attachment as a send names it, in threadline's own shape, which each
//! protocol's send is translated into (`attachments: [...]` of the send's
//! JSON): a stored file of the thread (`{fileId}`, or its URL), bytes
//! carried inline (`{data}` as base64 or a `data:` URL, or the marker a
//! [`scan`](super::scan) left), or an `https:` URL the model's provider
//! fetches itself. The field names of n8n's (`mimeType`, `fileName`) and of
//! the AI SDK's (`mediaType`, `filename`, `url`) are read too.

use super::read::Incoming;
use super::scan::{marker_index, Raw, Seg, Slot, Slots};
use super::{media, FileLimits, NewFile};
use crate::wire::error::ApiError;
use base64::Engine;
use serde_json::{Map, Value};

/// Where a send in threadline's own shape carries files inline:
/// `attachments[].data` (base64 or a `data:` URL, as n8n sends them) and
/// `attachments[].url` (a `data:` URL).
pub const SLOTS: Slots = Slots {
    slots: &[
        Slot { path: &[Seg::Key("attachments"), Seg::Item, Seg::Key("data")], raw: Raw::Always },
        Slot { path: &[Seg::Key("attachments"), Seg::Item, Seg::Key("url")], raw: Raw::No },
    ],
    group: None,
};

/// The attachments of a send in threadline's own shape (its body's
/// `attachments`, as they are).
pub fn own(body: &Value) -> Vec<Value> {
    body.get("attachments").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// Where an attachment's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file the thread stores.
    Stored(String),
    /// The `n`th file decoded out of the request.
    Inline(usize),
    /// Bytes still in the JSON (base64, or a `data:` URL).
    Data(String),
    /// An `https:` URL.
    Url(String),
}

/// One attachment of a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachmentSpec {
    pub source: Source,
    pub media_type: Option<String>,
    pub name: Option<String>,
}

impl AttachmentSpec {
    /// An attachment object of the send's JSON, on `thread`.
    pub fn parse(v: &Value, thread: &str) -> Result<AttachmentSpec, ApiError> {
        let Some(o) = v.as_object() else {
            return Err(ApiError::invalid_file("an attachment is an object: {fileId} or {data|url, mediaType, name}"));
        };
        let text = |keys: &[&str]| keys.iter().find_map(|k| o.get(*k).and_then(Value::as_str)).map(str::to_owned);
        let media_type = text(&["mediaType", "mimeType"]).map(|m| media::essence(&m)).filter(|m| !m.is_empty());
        let name = text(&["name", "fileName", "filename"]).map(|n| super::clean_name(&n)).filter(|n| !n.is_empty());
        let source = if let Some(id) = text(&["fileId", "id"]).filter(|id| super::is_file_id(id)) {
            Source::Stored(id)
        } else if let Some(d) = text(&["data"]) {
            match marker_index(&d) {
                Some(n) => Source::Inline(n),
                None => Source::Data(d),
            }
        } else if let Some(url) = text(&["url"]) {
            if let Some(n) = marker_index(&url) {
                Source::Inline(n)
            } else if let Some((owner, id)) = super::parse_any_file_url(&url) {
                if owner != thread {
                    return Err(ApiError::file_not_found());
                }
                Source::Stored(id.to_owned())
            } else if url.starts_with("data:") {
                Source::Data(url)
            } else if url.starts_with("https://") {
                Source::Url(url)
            } else {
                return Err(ApiError::invalid_file(
                    "an attachment's `url` is an `https:` URL, a `data:` URL or this thread's file URL",
                ));
            }
        } else if o.contains_key("fileId") {
            return Err(ApiError::file_not_found());
        } else {
            return Err(ApiError::invalid_file("an attachment names `fileId`, `data` or `url`"));
        };
        Ok(AttachmentSpec { source, media_type, name })
    }

    /// The canonical JSON of an attachment a protocol translated.
    pub fn json(source: Source, media_type: Option<&str>, name: Option<&str>) -> Value {
        let mut o = Map::new();
        match source {
            Source::Stored(id) => o.insert("fileId".into(), id.into()),
            Source::Inline(n) => o.insert("data".into(), format!("{}{n}", super::scan::MARKER).into()),
            Source::Data(d) => o.insert("data".into(), d.into()),
            Source::Url(u) => o.insert("url".into(), u.into()),
        };
        if let Some(m) = media_type {
            o.insert("mediaType".into(), m.into());
        }
        if let Some(n) = name {
            o.insert("name".into(), n.into());
        }
        Value::Object(o)
    }
}

/// A send's `attachments` (absent: none), at most `max`.
pub fn parse_list(v: Option<&Value>, thread: &str, max: usize) -> Result<Vec<AttachmentSpec>, ApiError> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(ApiError::invalid_file("`attachments` is an array")),
    };
    if list.len() > max {
        return Err(ApiError::too_many_files(max));
    }
    list.iter().map(|a| AttachmentSpec::parse(a, thread)).collect()
}

/// A file a send carries inline, checked and named, with its bytes: what
/// the Worker stores once the thread has reserved it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedFile {
    pub file: NewFile,
    pub bytes: Vec<u8>,
}

/// Checks the files of a send the Worker read: every inline file its
/// attachments name (bytes left in the JSON decoded now), its type
/// accepted and its bytes agreeing with it; each `https:` URL's declared
/// type accepted. Returns the inline files by their index in `specs`'
/// markers (`None`: not this send's, never stored), and rewrites `specs`'
/// JSON-held bytes as inline files.
pub fn admit(
    specs: &mut [AttachmentSpec],
    mut files: Vec<Incoming>,
    limits: &FileLimits,
) -> Result<Vec<Option<CheckedFile>>, ApiError> {
    if specs.len() > limits.max_files {
        return Err(ApiError::too_many_files(limits.max_files));
    }
    for spec in specs.iter_mut() {
        if let Source::Data(d) = &spec.source {
            let (bytes, declared) = decode_data(d, limits.max_file_bytes)?;
            files.push(Incoming { bytes, declared, name: None, dropped: false });
            spec.source = Source::Inline(files.len() - 1);
        }
    }
    let mut admitted: Vec<Option<CheckedFile>> = vec![None; files.len()];
    for spec in specs.iter() {
        match &spec.source {
            Source::Inline(n) if admitted.get(*n).is_some_and(Option::is_some) => {}
            Source::Inline(n) => {
                let Some(f) = files.get_mut(*n).filter(|f| !f.dropped) else {
                    return Err(ApiError::invalid_file(format!("no file was sent inline as #{n}")));
                };
                if f.bytes.is_empty() {
                    return Err(ApiError::invalid_file("a file is empty"));
                }
                let media_type = spec.media_type.clone().or_else(|| f.declared.clone()).ok_or_else(|| {
                    ApiError::invalid_file("an inline file needs its media type (`mediaType` or a `data:` URL's)")
                })?;
                media::check(&media_type, &f.bytes, &limits.types)?;
                let name = spec.name.as_deref().or(f.name.as_deref());
                let file = NewFile::of(&f.bytes, &media_type, name);
                admitted[*n] = Some(CheckedFile { file, bytes: std::mem::take(&mut f.bytes) });
            }
            Source::Url(_) => {
                let media_type = spec
                    .media_type
                    .as_deref()
                    .ok_or_else(|| ApiError::invalid_file("an attachment by URL needs its `mediaType`"))?;
                if !limits.types.allows(media_type) {
                    return Err(ApiError::unsupported_media_type(media_type, limits.types.list()));
                }
            }
            Source::Stored(_) | Source::Data(_) => {}
        }
    }
    Ok(admitted)
}

/// Checks an upload's files: each one's type accepted and agreeing with its
/// bytes.
pub fn admit_uploads(files: Vec<Incoming>, limits: &FileLimits) -> Result<Vec<CheckedFile>, ApiError> {
    files
        .into_iter()
        .map(|f| {
            let media_type =
                f.declared.clone().ok_or_else(|| ApiError::invalid_file("a file needs its `Content-Type`"))?;
            media::check(&media_type, &f.bytes, &limits.types)?;
            Ok(CheckedFile { file: NewFile::of(&f.bytes, &media_type, f.name.as_deref()), bytes: f.bytes })
        })
        .collect()
}

/// Bytes left in the JSON: a `data:` URL, or plain base64.
pub(crate) fn decode_data(d: &str, max: usize) -> Result<(Vec<u8>, Option<String>), ApiError> {
    let (declared, payload, base64) = match d.strip_prefix("data:") {
        Some(url) => {
            let (header, payload) = url
                .split_once(',')
                .ok_or_else(|| ApiError::invalid_file("a `data:` URL has no comma before its data"))?;
            let mut params = header.split(';');
            let ty = media::essence(params.next().unwrap_or_default());
            let base64 = params.any(|p| p.trim().eq_ignore_ascii_case("base64"));
            (Some(if ty.is_empty() { "text/plain".to_owned() } else { ty }), payload, base64)
        }
        None => (None, d, true),
    };
    let bytes = if base64 {
        let clean: String = payload
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect();
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        engine.decode(clean).map_err(|e| ApiError::invalid_file(format!("a file's base64 is malformed: {e}")))?
    } else {
        percent_decode(payload)?
    };
    if bytes.len() > max {
        return Err(ApiError::file_too_large(max));
    }
    Ok((bytes, declared))
}

fn percent_decode(s: &str) -> Result<Vec<u8>, ApiError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(v.ok_or_else(|| ApiError::invalid_file("a `data:` URL holds a malformed `%` escape"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    fn spec(v: Value) -> Result<AttachmentSpec, ApiError> {
        AttachmentSpec::parse(&v, "t1")
    }

    #[test]
    fn every_protocols_field_names() {
        let id = "f_2cf24dba5fb0a30e26e83b2ac5b9e29e";
        assert_eq!(spec(json!({"fileId": id})).unwrap().source, Source::Stored(id.into()));
        let url = format!("https://w.example/v1/threads/t1/files/{id}");
        assert_eq!(spec(json!({"url": url, "mediaType": "image/png"})).unwrap().source, Source::Stored(id.into()));
        let n8n = spec(json!({"data": "aGk=", "mimeType": "text/plain", "fileName": "hi.txt"})).unwrap();
        assert_eq!(
            n8n,
            AttachmentSpec {
                source: Source::Data("aGk=".into()),
                media_type: Some("text/plain".into()),
                name: Some("hi.txt".into())
            }
        );
        assert_eq!(spec(json!({"url": "threadline:inline:3", "filename": "x"})).unwrap().source, Source::Inline(3));
        assert_eq!(spec(json!({"url": "https://a/b.png"})).unwrap().source, Source::Url("https://a/b.png".into()));
        assert_eq!(spec(json!({"url": "javascript:alert(1)"})).unwrap_err().code, "invalid_file");
        assert_eq!(spec(json!({"url": "http://a/b.png"})).unwrap_err().code, "invalid_file");
        assert_eq!(spec(json!({"fileId": "f_nope"})).unwrap_err().code, "file_not_found");
        let other = format!("https://w.example/v1/threads/t2/files/{id}");
        assert_eq!(
            spec(json!({"url": other})).unwrap_err().code,
            "file_not_found",
            "another thread's file is no file here"
        );
        assert_eq!(spec(json!("x")).unwrap_err().code, "invalid_file");
        assert_eq!(parse_list(Some(&json!([{}, {}])), "t1", 1).unwrap_err().code, "too_many_files");
        let round = AttachmentSpec::json(Source::Inline(2), Some("image/png"), Some("a.png"));
        assert_eq!(
            spec(round).unwrap(),
            AttachmentSpec {
                source: Source::Inline(2),
                media_type: Some("image/png".into()),
                name: Some("a.png".into())
            }
        );
    }

    #[test]
    fn admitting_a_sends_files() {
        let limits = FileLimits::default();
        let files = vec![
            Incoming { bytes: PNG.to_vec(), declared: Some("image/png".into()), name: None, dropped: false },
            Incoming { bytes: Vec::new(), declared: None, name: None, dropped: true },
        ];
        let mut specs = vec![
            AttachmentSpec { source: Source::Inline(0), media_type: None, name: Some("a.png".into()) },
            AttachmentSpec {
                source: Source::Data(STANDARD.encode(b"hello")),
                media_type: Some("text/plain".into()),
                name: None,
            },
            AttachmentSpec {
                source: Source::Url("https://x/y.pdf".into()),
                media_type: Some("application/pdf".into()),
                name: None,
            },
        ];
        let admitted = admit(&mut specs, files.clone(), &limits).unwrap();
        assert_eq!(admitted.len(), 3);
        assert_eq!(admitted[0].as_ref().unwrap().file.name.as_deref(), Some("a.png"));
        assert_eq!(admitted[0].as_ref().unwrap().file.media_type, "image/png");
        assert!(admitted[1].is_none(), "an earlier message's file is not stored");
        assert_eq!(admitted[2].as_ref().unwrap().bytes, b"hello");
        assert_eq!(specs[1].source, Source::Inline(2));

        let refuse = |spec: AttachmentSpec| admit(&mut [spec], files.clone(), &limits).unwrap_err().code;
        assert_eq!(refuse(AttachmentSpec { source: Source::Inline(1), media_type: None, name: None }), "invalid_file");
        assert_eq!(refuse(AttachmentSpec { source: Source::Inline(9), media_type: None, name: None }), "invalid_file");
        assert_eq!(
            refuse(AttachmentSpec {
                source: Source::Inline(0),
                media_type: Some("application/pdf".into()),
                name: None
            }),
            "file_type_mismatch"
        );
        assert_eq!(
            refuse(AttachmentSpec {
                source: Source::Url("https://x".into()),
                media_type: Some("text/html".into()),
                name: None
            }),
            "unsupported_media_type"
        );
        assert_eq!(
            refuse(AttachmentSpec {
                source: Source::Data("data:image/png;base64,%%%".into()),
                media_type: None,
                name: None
            }),
            "invalid_file"
        );
        assert_eq!(
            refuse(AttachmentSpec {
                source: Source::Data("data:image/png;base64".into()),
                media_type: None,
                name: None
            }),
            "invalid_file"
        );
        assert_eq!(
            refuse(AttachmentSpec { source: Source::Data("aGk=".into()), media_type: None, name: None }),
            "invalid_file"
        );
        let small = FileLimits { max_file_bytes: 2, ..FileLimits::default() };
        let big = AttachmentSpec {
            source: Source::Data("aGVsbG8=".into()),
            media_type: Some("text/plain".into()),
            name: None,
        };
        assert_eq!(admit(&mut [big], Vec::new(), &small).unwrap_err().code, "file_too_large");
        assert_eq!(decode_data("data:text/plain,a%20b", 10).unwrap(), (b"a b".to_vec(), Some("text/plain".into())));
        assert_eq!(decode_data("data:,x", 10).unwrap().1.as_deref(), Some("text/plain"));
    }
}
