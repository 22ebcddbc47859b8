//! A `tools/call` result as the agent uses it: the tool's event (its
//! `tool-result`, or `tool-error` for `isError: true`) and what the model is
//! told next. Every kind of content a server returns is kept in a form a
//! client can show: text as text, images as files of the thread (stored
//! by the agent before this mapping: the log and the checkpoint hold a
//! reference, never the bytes), resource links as links, embedded
//! resources with their text; structured content beside them.

use super::wire::CallResult;
use crate::files::FileRef;
use base64::Engine;
use serde_json::{json, Value};

/// An image a result carries, decoded: the agent stores it as a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// Its place in the result's `content`.
    pub index: usize,
    pub bytes: Vec<u8>,
    pub media_type: String,
}

/// The images of a result (those whose base64 does not decode are left to
/// [`outcome`], which says so).
pub fn images(r: &CallResult) -> Vec<Image> {
    let b64 = base64::engine::general_purpose::STANDARD;
    r.content
        .iter()
        .enumerate()
        .filter(|(_, c)| c["type"] == "image")
        .filter_map(|(index, c)| {
            let bytes = b64.decode(c["data"].as_str()?).ok()?;
            let media_type = c["mimeType"].as_str().unwrap_or("application/octet-stream").to_owned();
            Some(Image { index, bytes, media_type })
        })
        .collect()
}

/// What a call came to: the event's result, what the model is told, and
/// the stored images it is shown.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    pub result: Value,
    pub told: String,
    pub images: Vec<FileRef>,
}

/// The outcome of result `r` whose images were stored as `stored` (by
/// content index: the file, or why it could not be stored); a tool error
/// (`isError: true`) is `Err` with its text. `thread` names the files'
/// URLs.
pub fn outcome(
    r: CallResult,
    stored: &[(usize, Result<FileRef, String>)],
    thread: &str,
) -> Result<ToolOutcome, String> {
    let text_of = |c: &Value| c["text"].as_str().unwrap_or_default().to_owned();
    if r.is_error {
        let text: Vec<String> = r.content.iter().filter(|c| c["type"] == "text").map(text_of).collect();
        return Err(if text.is_empty() { "the tool reported an error".to_owned() } else { text.join("\n") });
    }
    let mut blocks = Vec::new();
    let mut told = Vec::new();
    let mut images = Vec::new();
    for (i, c) in r.content.iter().enumerate() {
        match c["type"].as_str().unwrap_or_default() {
            "text" => {
                told.push(text_of(c));
                blocks.push(json!({ "type": "text", "text": text_of(c) }));
            }
            "image" => match stored.iter().find(|(at, _)| *at == i).map(|(_, f)| f) {
                Some(Ok(f)) => {
                    told.push(format!("[an image, {}: shown next]", f.media_type));
                    blocks.push(json!({
                        "type": "image", "fileId": f.file_id, "mediaType": f.media_type, "size": f.size,
                        "url": crate::files::file_url("", thread, &f.file_id),
                    }));
                    images.push(f.clone());
                }
                Some(Err(why)) => {
                    told.push(format!("[an image that could not be kept: {why}]"));
                    blocks.push(json!({ "type": "image", "mediaType": c["mimeType"], "error": why }));
                }
                None => {
                    told.push("[an image whose data is not base64]".to_owned());
                    blocks.push(
                        json!({ "type": "image", "mediaType": c["mimeType"], "error": "its data is not base64" }),
                    );
                }
            },
            "audio" => {
                told.push(format!("[audio, {}]", c["mimeType"].as_str().unwrap_or("unknown type")));
                blocks.push(json!({ "type": "audio", "mimeType": c["mimeType"] }));
            }
            "resource_link" => {
                let name = c["name"].as_str().or(c["title"].as_str()).unwrap_or("a resource");
                told.push(format!("[link: {name} <{}>]", c["uri"].as_str().unwrap_or_default()));
                let mut link = c.clone();
                link.as_object_mut().map(|o| o.remove("_meta"));
                blocks.push(link);
            }
            "resource" => {
                let res = &c["resource"];
                let uri = res["uri"].as_str().unwrap_or_default();
                let mut block = json!({ "type": "resource", "uri": uri, "mimeType": res["mimeType"] });
                match (res["text"].as_str(), res["blob"].as_str()) {
                    (Some(text), _) => {
                        told.push(format!("[resource <{uri}>]\n{text}"));
                        block["text"] = text.into();
                    }
                    (None, Some(blob)) => {
                        told.push(format!("[a binary resource <{uri}>, {} bytes of base64]", blob.len()));
                        block["blobBytes"] = blob.len().into();
                    }
                    (None, None) => told.push(format!("[resource <{uri}>]")),
                }
                blocks.push(block);
            }
            other => {
                told.push(format!("[content of type `{other}`]"));
                blocks.push(json!({ "type": other }));
            }
        }
    }
    if let Some(s) = &r.structured_content {
        told.push(format!("Structured result: {s}"));
    }
    let only_text = r.structured_content.is_none() && blocks.len() == 1 && blocks[0]["type"] == "text";
    let result = if only_text {
        blocks[0]["text"].clone()
    } else {
        let mut v = json!({ "content": blocks });
        if let Some(s) = r.structured_content {
            v["structuredContent"] = s;
        }
        v
    };
    Ok(ToolOutcome { result, told: told.join("\n"), images })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::NewFile;

    fn call(v: Value) -> CallResult {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_structured_and_errors() {
        let plain = outcome(call(json!({"content": [{"type": "text", "text": "2 notes"}]})), &[], "t").unwrap();
        assert_eq!((plain.result, plain.told.as_str()), (json!("2 notes"), "2 notes"));
        let structured = outcome(
            call(json!({"content": [{"type": "text", "text": "2 notes"}], "structuredContent": {"notes": [1, 2]}})),
            &[],
            "t",
        )
        .unwrap();
        assert_eq!(structured.result["structuredContent"], json!({"notes": [1, 2]}));
        assert_eq!(structured.result["content"][0]["text"], "2 notes");
        assert!(structured.told.contains(r#"Structured result: {"notes":[1,2]}"#));
        let err = outcome(call(json!({"content": [{"type": "text", "text": "offline"}], "isError": true})), &[], "t");
        assert_eq!(err, Err("offline".to_owned()));
    }

    #[test]
    fn images_links_and_resources() {
        let r = call(json!({"content": [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.md", "name": "a.md", "_meta": {"x": 1}},
            {"type": "resource", "resource": {"uri": "mem://n1", "mimeType": "text/plain", "text": "milk"}},
            {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAAA"}},
            {"type": "image", "data": "%%%", "mimeType": "image/png"},
        ]}));
        let found = images(&r);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].index, &found[0].bytes[..4]), (0, &b"\x89PNG"[..]));
        let file = NewFile::of(&found[0].bytes, "image/png", None).reference();
        let out = outcome(r, &[(0, Ok(file.clone()))], "t1").unwrap();
        let blocks = out.result["content"].as_array().unwrap();
        assert_eq!(blocks[0]["fileId"], file.file_id.as_str());
        assert_eq!(blocks[0]["url"], format!("/v1/threads/t1/files/{}", file.file_id));
        assert!(blocks[1].get("_meta").is_none());
        assert_eq!(blocks[2]["text"], "milk");
        assert_eq!(blocks[3]["blobBytes"], 4);
        assert!(blocks[4]["error"].is_string());
        assert_eq!(out.images, [file]);
        assert!(out.told.contains("[link: a.md <file:///a.md>]") && out.told.contains("milk"));
    }
}
