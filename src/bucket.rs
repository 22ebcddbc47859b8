//! The bucket of the threads' files (R2, binding `FILES`): the core decides
//! every key, range and header; this carries the bytes.

use futures_util::StreamExt;
use threadline_durable::files::serve::FilePlan;
use threadline_durable::front::Put;
use worker::*;

/// The bucket.
pub fn bucket(env: &Env) -> Result<Bucket> {
    env.bucket("FILES")
}

/// Stores the bytes of each file, with its type and hash (R2 checks the
/// hash on the way in, so a corrupted upload is never stored).
pub async fn put(env: &Env, puts: Vec<Put>) -> std::result::Result<(), String> {
    let bucket = bucket(env).map_err(|e| e.to_string())?;
    for p in puts {
        put_one(&bucket, &p.key, p.bytes, &p.media_type, &p.sha256).await?;
    }
    Ok(())
}

/// Stores one file's bytes at `key` (a tool's image).
pub async fn put_one(
    bucket: &Bucket,
    key: &str,
    bytes: Vec<u8>,
    media_type: &str,
    sha256: &str,
) -> std::result::Result<(), String> {
    let sha = hex_bytes(sha256).ok_or("a file's hash is not hex")?;
    let meta = HttpMetadata { content_type: Some(media_type.to_owned()), ..HttpMetadata::default() };
    bucket.put(key, bytes).http_metadata(meta).sha256(sha).execute().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// A stored file's answer, as the plan says: its bytes streamed from the
/// bucket without passing through wasm (none for `HEAD`).
pub async fn serve(env: &Env, plan: FilePlan, head_only: bool) -> Result<Response> {
    let headers = Headers::new();
    for (k, v) in &plan.headers {
        headers.set(k, v)?;
    }
    if head_only {
        return Ok(Response::empty()?.with_status(plan.status).with_headers(headers));
    }
    let bucket = bucket(env)?;
    let mut get = bucket.get(plan.key.as_str());
    if plan.status == 206 {
        get = get.range(Range::OffsetWithLength { offset: plan.offset, length: plan.length });
    }
    let Some(object) = get.execute().await? else {
        // Reserved, but its bytes never arrived (the upload failed midway).
        return crate::http::error(&threadline_durable::ApiError::file_not_found());
    };
    let body = object.body().ok_or_else(|| Error::RustError("an object without a body".into()))?.response_body()?;
    Ok(Response::from_body(body)?.with_status(plan.status).with_headers(headers))
}

/// A file's bytes, whole (the built-in agent gives them to its model).
pub async fn read(bucket: &Bucket, key: &str) -> std::result::Result<Vec<u8>, String> {
    let object = bucket.get(key).execute().await.map_err(|e| e.to_string())?.ok_or("the file's bytes are missing")?;
    let body = object.body().ok_or("an object without a body")?;
    let mut stream = body.stream().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(object.size() as usize);
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// Removes these objects.
pub async fn delete(env: &Env, keys: &[String]) -> std::result::Result<(), String> {
    let bucket = bucket(env).map_err(|e| e.to_string())?;
    for chunk in keys.chunks(1000) {
        bucket.delete_multiple(chunk.to_vec()).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Removes every object whose key starts with `prefix`.
pub async fn delete_prefix(env: &Env, prefix: &str) -> std::result::Result<(), String> {
    let bucket = bucket(env).map_err(|e| e.to_string())?;
    loop {
        let page = bucket.list().prefix(prefix).limit(1000).execute().await.map_err(|e| e.to_string())?;
        let keys: Vec<String> = page.objects().iter().map(Object::key).collect();
        if keys.is_empty() {
            return Ok(());
        }
        bucket.delete_multiple(keys).await.map_err(|e| e.to_string())?;
        if !page.truncated() {
            return Ok(());
        }
    }
}

/// A request's body as the core's file reader takes it.
pub fn body_stream(
    req: &crate::http::Incoming,
) -> impl futures_util::Stream<Item = std::result::Result<Vec<u8>, String>> + Unpin {
    match req.byte_stream() {
        Some(s) => s.map(|c| c.map_err(|e| e.to_string())).left_stream(),
        // No body at all: an empty stream.
        None => futures_util::stream::empty().right_stream(),
    }
}

/// Reads what is left of a body, dropping it.
pub async fn drain(body: &mut (impl futures_util::Stream<Item = std::result::Result<Vec<u8>, String>> + Unpin)) {
    while let Some(Ok(_)) = body.next().await {}
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}
