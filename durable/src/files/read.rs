//! A request body read as files, as it streams: the raw bytes of one file
//! (`Content-Type` its type, `?name=` its name), `multipart/form-data`
//! with any number of files (`multer`, the parser axum uses), or a JSON
//! send with its inline files decoded out ([`scan`](super::scan)). Each
//! limit refuses the moment it is passed, so an oversized body is never
//! read to its end.

use super::scan::{Inline, Scanner, Slots};
use super::FileLimits;
use crate::wire::error::ApiError;
use futures_util::{Stream, StreamExt};

/// How a body carries its files.
#[derive(Clone, Debug, PartialEq)]
pub enum Form {
    /// The body is one file.
    Raw { media_type: String, name: Option<String> },
    /// `multipart/form-data` with this boundary: each part with a file name
    /// (or a type) is a file.
    Multipart { boundary: String },
    /// A JSON send with files at these slots; the rest at most `rest_limit`
    /// bytes.
    Json { slots: Slots, rest_limit: usize },
}

impl Form {
    /// An upload's form, from its `Content-Type` and `?name=`.
    pub fn upload(content_type: Option<&str>, name: Option<String>) -> Result<Form, ApiError> {
        let content_type = content_type.unwrap_or_default();
        let media_type = super::media::essence(content_type);
        if media_type == "multipart/form-data" {
            let boundary = multer::parse_boundary(content_type)
                .map_err(|_| ApiError::invalid_file("`multipart/form-data` without a boundary"))?;
            return Ok(Form::Multipart { boundary });
        }
        if media_type.is_empty() {
            return Err(ApiError::invalid_file(
                "an upload needs its file's type as `Content-Type` (or `multipart/form-data`)",
            ));
        }
        Ok(Form::Raw { media_type, name })
    }
}

/// A file as it came in a body, before it is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub bytes: Vec<u8>,
    /// The type the body declared for it (its part's `Content-Type`, the
    /// upload's, a `data:` URL's), when it did.
    pub declared: Option<String>,
    pub name: Option<String>,
    /// An earlier message's file, let go ([`Slots::group`]).
    pub dropped: bool,
}

impl From<Inline> for Incoming {
    fn from(i: Inline) -> Incoming {
        Incoming { bytes: i.bytes, declared: i.data_url_type, name: None, dropped: i.dropped }
    }
}

/// What a body held: its JSON without the files (a JSON send), and the
/// files.
#[derive(Debug, Default)]
pub struct Read {
    pub json: Option<Vec<u8>>,
    pub files: Vec<Incoming>,
}

/// Reads `body` as `form` says, within `limits`.
pub async fn read<S, E>(body: S, form: Form, limits: &FileLimits) -> Result<Read, ApiError>
where
    S: Stream<Item = Result<Vec<u8>, E>> + Unpin,
    E: std::fmt::Display,
{
    match form {
        Form::Raw { media_type, name } => {
            let bytes =
                collect(body, limits.max_file_bytes, || ApiError::file_too_large(limits.max_file_bytes)).await?;
            if bytes.is_empty() {
                return Err(ApiError::invalid_file("the upload is empty"));
            }
            let name = name.map(|n| super::clean_name(&n));
            Ok(Read { json: None, files: vec![Incoming { bytes, declared: Some(media_type), name, dropped: false }] })
        }
        Form::Json { slots, rest_limit } => {
            let mut scanner = Scanner::new(slots, rest_limit, limits.max_file_bytes, limits.max_files);
            let cap = limits.send_body_cap(rest_limit);
            let (mut body, mut read) = (body, 0usize);
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(unreadable)?;
                read += chunk.len();
                if read > cap {
                    return Err(ApiError::body_too_large(cap));
                }
                scanner.push(&chunk)?;
            }
            let scanned = scanner.finish()?;
            Ok(Read { json: Some(scanned.json), files: scanned.files.into_iter().map(Incoming::from).collect() })
        }
        Form::Multipart { boundary } => multipart(body, boundary, limits).await,
    }
}

/// A body's bytes, at most `limit` (`too_large` past it).
async fn collect<S, E>(mut body: S, limit: usize, too_large: impl Fn() -> ApiError) -> Result<Vec<u8>, ApiError>
where
    S: Stream<Item = Result<Vec<u8>, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(unreadable)?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn unreadable(e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_body(format!("the body could not be read: {e}"))
}

/// A multipart body's files. `multer` reads from a channel (it wants a
/// `Send` stream, which a runtime's body is not); the body is fed into it
/// as it arrives, a few chunks ahead at most.
///
/// Invariant: at most [`FileLimits::multipart_cap`] bytes are read, whatever
/// the framing (a declared length over it is refused before reading, a
/// chunked body the moment it passes it).
async fn multipart<S, E>(mut body: S, boundary: String, limits: &FileLimits) -> Result<Read, ApiError>
where
    S: Stream<Item = Result<Vec<u8>, E>> + Unpin,
    E: std::fmt::Display,
{
    use futures_util::SinkExt;
    let cap = limits.multipart_cap();
    let (mut tx, rx) = futures_channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    let feed = async move {
        let mut read = 0usize;
        while let Some(chunk) = body.next().await {
            let item = chunk.map_err(|e| std::io::Error::other(e.to_string())).and_then(|c| {
                read += c.len();
                if read > cap {
                    return Err(std::io::Error::other("over the cap"));
                }
                Ok(c)
            });
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                return read > cap;
            }
        }
        false
    };
    let parse = async move {
        let mut parts = multer::Multipart::new(rx, boundary);
        let mut files = Vec::new();
        while let Some(mut field) = parts.next_field().await.map_err(bad_multipart)? {
            let is_file = field.file_name().is_some() || field.content_type().is_some();
            let declared = field.content_type().map(|m| super::media::essence(m.as_ref()));
            let name = field.file_name().map(super::clean_name);
            let mut bytes = Vec::new();
            while let Some(chunk) = field.chunk().await.map_err(bad_multipart)? {
                if bytes.len() + chunk.len() > limits.max_file_bytes {
                    return Err(ApiError::file_too_large(limits.max_file_bytes));
                }
                bytes.extend_from_slice(&chunk);
            }
            if !is_file {
                continue;
            }
            if files.len() == limits.max_files {
                return Err(ApiError::too_many_files(limits.max_files));
            }
            files.push(Incoming { bytes, declared, name, dropped: false });
        }
        if files.is_empty() {
            return Err(ApiError::invalid_file("the form holds no file"));
        }
        Ok(Read { json: None, files })
    };
    // The parser ending first (a refusal) drops the channel: feeding stops.
    let (over, read) = futures_util::future::join(feed, parse).await;
    if over {
        return Err(ApiError::body_too_large(cap));
    }
    read
}

fn bad_multipart(e: multer::Error) -> ApiError {
    ApiError::invalid_file(format!("the multipart body is malformed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_executor::block_on;
    use futures_util::stream;

    fn chunks(body: &[u8], size: usize) -> impl Stream<Item = Result<Vec<u8>, String>> + Unpin {
        stream::iter(body.chunks(size).map(|c| Ok(c.to_vec())).collect::<Vec<_>>())
    }

    fn limits(max_file_bytes: usize, max_files: usize) -> FileLimits {
        FileLimits { max_file_bytes, max_files, ..FileLimits::default() }
    }

    #[test]
    fn raw_uploads() {
        let form = Form::upload(Some("image/PNG"), Some("a\u{0}.png".into())).unwrap();
        let got = block_on(read(chunks(b"abcdef", 2), form.clone(), &limits(6, 1))).unwrap();
        assert_eq!(got.files[0].bytes, b"abcdef");
        assert_eq!(got.files[0].declared.as_deref(), Some("image/png"));
        assert_eq!(got.files[0].name.as_deref(), Some("a.png"));
        assert_eq!(
            block_on(read(chunks(b"abcdefg", 2), form.clone(), &limits(6, 1))).unwrap_err().code,
            "file_too_large"
        );
        assert_eq!(block_on(read(chunks(b"", 2), form, &limits(6, 1))).unwrap_err().code, "invalid_file");
        assert_eq!(Form::upload(None, None).unwrap_err().code, "invalid_file");
        assert_eq!(Form::upload(Some("multipart/form-data"), None).unwrap_err().code, "invalid_file");
    }

    /// A part: its field name, file name, type and bytes.
    type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

    fn form(parts: &[Part]) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, file, ty, bytes) in parts {
            out.extend_from_slice(b"--XyZ\r\n");
            let file = file.map(|f| format!("; filename=\"{f}\"")).unwrap_or_default();
            out.extend_from_slice(format!("Content-Disposition: form-data; name=\"{field}\"{file}\r\n").as_bytes());
            if let Some(ty) = ty {
                out.extend_from_slice(format!("Content-Type: {ty}\r\n").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"--XyZ--\r\n");
        out
    }

    #[test]
    fn multipart_uploads() {
        let body = form(&[
            ("note", None, None, b"not a file"),
            ("files", Some("a.txt"), Some("text/plain; charset=utf-8"), b"hello\r\n--Xy is not the boundary"),
            ("files", Some("b.png"), Some("image/png"), b"\x89PNG\r\n\x1a\n"),
        ]);
        let form_of = || Form::upload(Some("multipart/form-data; boundary=XyZ"), None).unwrap();
        for size in [1, 3, 64, 4096] {
            let got = block_on(read(chunks(&body, size), form_of(), &limits(100, 2)))
                .unwrap_or_else(|e| panic!("chunks of {size}: {e:?}"));
            assert_eq!(got.files.len(), 2, "chunks of {size}");
            assert_eq!(got.files[0].bytes, b"hello\r\n--Xy is not the boundary");
            assert_eq!(got.files[0].declared.as_deref(), Some("text/plain"));
            assert_eq!(got.files[0].name.as_deref(), Some("a.txt"));
            assert_eq!(got.files[1].declared.as_deref(), Some("image/png"));
        }
        assert_eq!(block_on(read(chunks(&body, 7), form_of(), &limits(100, 1))).unwrap_err().code, "too_many_files");
        assert_eq!(block_on(read(chunks(&body, 7), form_of(), &limits(10, 2))).unwrap_err().code, "file_too_large");
        let empty = form(&[("note", None, None, b"x")]);
        assert_eq!(block_on(read(chunks(&empty, 7), form_of(), &limits(10, 2))).unwrap_err().code, "invalid_file");
        assert_eq!(block_on(read(chunks(b"garbage", 7), form_of(), &limits(10, 2))).unwrap_err().code, "invalid_file");
    }

    /// A form is counted as it streams: many fields that are no file, each
    /// within the file limit, pass the form's cap and are refused there,
    /// not read to their end.
    #[test]
    fn a_multipart_body_is_capped_whatever_its_framing() {
        let field = vec![b'x'; 1_000];
        let fields: Vec<Part> = (0..200).map(|_| ("note", None, None, field.as_slice())).collect();
        let mut parts = fields.clone();
        parts.push(("f", Some("a.txt"), Some("text/plain"), b"hi"));
        let body = form(&parts);
        let l = FileLimits { max_file_bytes: 1_000, max_files: 2, ..FileLimits::default() };
        assert!(body.len() > l.multipart_cap());
        let form_of = || Form::upload(Some("multipart/form-data; boundary=XyZ"), None).unwrap();
        let read_chunks = std::cell::Cell::new(0usize);
        let counted = stream::iter(body.chunks(4096).map(|c| Ok::<_, String>(c.to_vec())).collect::<Vec<_>>())
            .inspect(|_| read_chunks.set(read_chunks.get() + 1));
        let err = block_on(read(counted, form_of(), &l)).unwrap_err();
        assert_eq!((err.status, err.code), (413, "body_too_large"));
        assert!(read_chunks.get() * 4096 <= l.multipart_cap() + 3 * 4096, "stopped near the cap");
        // The same fields under the cap are read (and hold one file).
        let small = form(&[fields[0], ("f", Some("a.txt"), Some("text/plain"), b"hi")]);
        assert_eq!(block_on(read(chunks(&small, 4096), form_of(), &l)).unwrap().files.len(), 1);
    }
}
