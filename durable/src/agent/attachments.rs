//! A message's attachments as the model sees them. The run's messages (and
//! its checkpoints) hold a small reference for each stored file, a
//! `threadline_file` content part naming its object's key; just before each
//! model call the references are read from the bucket and sent as the
//! OpenAI-compatible content parts a provider takes: images as `image_url`
//! (inline base64: a provider cannot reach the bucket), PDFs as `file`
//! parts, text-like files as text. A checkpoint never holds the bytes, so
//! it stays far below SQLite's row limit whatever is attached.

use crate::files::media::{self, Input};
use crate::files::Attachment;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

/// A file's bytes read from the bucket, or why they could not be.
pub type FileBytes = Result<std::rc::Rc<Vec<u8>>, String>;

/// The content part type of a stored file's reference.
pub const FILE_PART: &str = "threadline_file";

/// A user message's content: its text, then its attachments (references
/// for stored files, which [`resolve`] replaces; `https:` images as they
/// are; any other URL named in text).
pub fn user_content(text: &str, attachments: &[Attachment], key_of: &dyn Fn(&str) -> String) -> Value {
    if attachments.is_empty() {
        return Value::String(text.to_owned());
    }
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({ "type": "text", "text": text }));
    }
    for a in attachments {
        parts.push(match a {
            Attachment::File(f) => json!({
                "type": FILE_PART,
                "key": key_of(&f.sha256),
                "mediaType": f.media_type,
                "name": f.name,
                "size": f.size,
            }),
            Attachment::Url { url, media_type, .. } if media::input(media_type) == Input::Image => {
                json!({ "type": "image_url", "image_url": { "url": url } })
            }
            Attachment::Url { url, media_type, name } => json!({
                "type": "text",
                "text": format!("[attached {}: {} at {url}]", name.as_deref().unwrap_or("file"), media_type),
            }),
        });
    }
    Value::Array(parts)
}

/// The keys of the stored files `messages` refer to.
pub fn keys(messages: &[Value]) -> Vec<String> {
    let mut keys = Vec::new();
    for m in messages {
        for p in m["content"].as_array().into_iter().flatten() {
            if p["type"] == FILE_PART {
                if let Some(k) = p["key"].as_str().filter(|k| !keys.iter().any(|x: &String| x == k)) {
                    keys.push(k.to_owned());
                }
            }
        }
    }
    keys
}

/// `messages` with each stored file's reference replaced by the content
/// part its type is sent as; `read` gives the bytes of a key (or why they
/// could not be read: the model is told so in the file's place).
pub fn resolve(messages: &[Value], read: &dyn Fn(&str) -> Option<FileBytes>) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let Some(parts) = m["content"].as_array().filter(|ps| ps.iter().any(|p| p["type"] == FILE_PART)) else {
                return m.clone();
            };
            let parts: Vec<Value> = parts
                .iter()
                .map(|p| {
                    if p["type"] != FILE_PART {
                        return p.clone();
                    }
                    let key = p["key"].as_str().unwrap_or_default();
                    let media_type = p["mediaType"].as_str().unwrap_or("application/octet-stream");
                    let name = p["name"].as_str().unwrap_or("file");
                    match read(key) {
                        Some(Ok(bytes)) => part(media_type, name, &bytes),
                        Some(Err(why)) => {
                            json!({ "type": "text", "text": format!("[{name} could not be read: {why}]") })
                        }
                        None => json!({ "type": "text", "text": format!("[{name} was not read]") }),
                    }
                })
                .collect();
            let mut m = m.clone();
            m["content"] = Value::Array(parts);
            m
        })
        .collect()
}

/// One file as a provider takes it.
fn part(media_type: &str, name: &str, bytes: &[u8]) -> Value {
    match media::input(media_type) {
        Input::Image => json!({
            "type": "image_url",
            "image_url": { "url": format!("data:{media_type};base64,{}", B64.encode(bytes)) },
        }),
        Input::File => json!({
            "type": "file",
            "file": { "filename": name, "file_data": format!("data:{media_type};base64,{}", B64.encode(bytes)) },
        }),
        Input::Text => json!({
            "type": "text",
            "text": format!("<file name=\"{}\" type=\"{media_type}\">\n{}\n</file>", name.replace('"', "'"), String::from_utf8_lossy(bytes)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::NewFile;
    use std::rc::Rc;

    #[test]
    fn references_become_what_the_provider_takes() {
        let png = NewFile::of(b"\x89PNG", "image/png", Some("a.png")).reference();
        let pdf = NewFile::of(b"%PDF-1", "application/pdf", Some("b.pdf")).reference();
        let csv = NewFile::of(b"a,b\n1,2", "text/csv", Some("c.csv")).reference();
        let url = Attachment::Url { url: "https://x/y.png".into(), media_type: "image/png".into(), name: None };
        let attachments =
            [Attachment::File(png.clone()), Attachment::File(pdf.clone()), Attachment::File(csv.clone()), url];
        let content = user_content("look", &attachments, &|sha| format!("k/{sha}"));
        let messages = vec![json!({ "role": "user", "content": content })];
        assert_eq!(
            keys(&messages),
            [format!("k/{}", png.sha256), format!("k/{}", pdf.sha256), format!("k/{}", csv.sha256)]
        );
        let stored = [(&png, &b"\x89PNG"[..]), (&pdf, &b"%PDF-1"[..]), (&csv, &b"a,b\n1,2"[..])];
        let read = |k: &str| stored.iter().find(|(f, _)| k.ends_with(&f.sha256)).map(|(_, b)| Ok(Rc::new(b.to_vec())));
        let sent = resolve(&messages, &read);
        let parts = sent[0]["content"].as_array().unwrap();
        assert_eq!(parts[0], json!({ "type": "text", "text": "look" }));
        assert_eq!(parts[1]["image_url"]["url"], "data:image/png;base64,iVBORw==");
        assert_eq!(
            parts[2],
            json!({ "type": "file", "file": { "filename": "b.pdf", "file_data": "data:application/pdf;base64,JVBERi0x" } })
        );
        assert_eq!(parts[3]["text"], "<file name=\"c.csv\" type=\"text/csv\">\na,b\n1,2\n</file>");
        assert_eq!(parts[4], json!({ "type": "image_url", "image_url": { "url": "https://x/y.png" } }));
        let failed = resolve(&messages, &|_| Some(Err("gone".into())));
        assert_eq!(failed[0]["content"][1]["text"], "[a.png could not be read: gone]");
        assert_eq!(user_content("plain", &[], &|s| s.to_owned()), json!("plain"));
    }
}
