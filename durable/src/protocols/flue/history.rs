//! Flue's conversation views answered on the thread: `view=history`, one
//! `FlueConversationSnapshot` folded from the whole log, and a catch-up
//! `view=updates` read, the chunks after an offset as a JSON array. Both
//! run the log's records, from the first, through one [`Projector`].
//!
//! Offsets name records: a record is one atomic batch of the projection
//! (each applies alone, whole), so a page ends only between records, and a
//! record that projects to nothing still moves the offset past it.
//! Catch-up answers are `no-store` and carry an `ETag`: a read repeated
//! with `If-None-Match` while nothing was stored gets 304 without a body.

use super::projection::{self, Conversation, Position, Projector, Resume};
use super::stream::{batch_reply, split_offset};
use crate::wire::error::ApiError;
use crate::protocols::durable_streams::views::{offset, resolve};
use crate::wire::reply::Reply;
use crate::storage::store::{Record, Store};
use crate::thread::tree::Tree;
use std::collections::HashSet;
use crate::streams::wire;
use crate::thread::{Sink, Thread};

/// Records read from the store at a time.
const READ: usize = 1000;

/// Chunks one catch-up page carries at least, before it ends at the next
/// record's boundary.
pub const PAGE_CHUNKS: usize = 1000;

/// Feeds every record up to `up_to` through `each`, a page at a time.
fn records<S: Store, K: Sink>(
    t: &Thread<S, K>,
    up_to: u64,
    mut each: impl FnMut(&Record) -> bool,
) -> Result<(), ApiError> {
    let mut after = 0;
    while after < up_to {
        let page = t.conversation().log_page(after, up_to, READ)?;
        let Some(last) = page.last().map(|r| r.seq) else { break };
        for r in &page {
            if !each(r) {
                return Ok(());
            }
        }
        after = last;
    }
    Ok(())
}

/// Whether the snapshot folds a record: a run's only when the run is on
/// the conversation's active path (a version left by an edit or an answer
/// given again is not shown); the thread's own records always.
fn shown(tree: &Tree, path: &HashSet<&str>, r: &Record) -> bool {
    path.contains(r.run_id.as_str()) || tree.answer(&r.run_id).is_none()
}

/// The reader's offset of a `view=updates` read: the record it read last
/// and the live characters it holds. `-1` is the start, `now` the tail.
pub fn resume(raw: &str, gen: u64, last: u64) -> Result<Resume, ApiError> {
    let bad = || ApiError::invalid_offset("an offset is one this stream returned");
    let (base, chars) = split_offset(raw).ok_or_else(bad)?;
    if chars > 0 && crate::streams::offset::Offset::parse(base).is_none() {
        return Err(bad());
    }
    let seq = resolve(&[base], gen, last)?.unwrap_or(0);
    Ok(Resume { seq, chars })
}

/// A quoted entity tag for a catch-up answer: what was asked and where the
/// answer ends determine its bytes.
pub fn etag(view: &str, from: &str, next: &str) -> String {
    format!("\"{view}:{from}:{next}\"")
}

/// 304 when the client holds this answer already.
pub fn not_modified(tag: &str, if_none_match: Option<&str>, next: &str) -> Option<Reply> {
    let held = if_none_match?.split(',').any(|t| t.trim() == tag || t.trim() == "*");
    held.then(|| {
        Reply::new(304)
            .header("etag", tag)
            .header("cache-control", "no-store")
            .header(wire::NEXT_OFFSET, next)
            .header(wire::UP_TO_DATE, "true")
    })
}

/// `view=history`: the snapshot at the log's tail, whose offset includes
/// every record, those the projection omits too.
///
/// Invariant (the snapshot reduces the whole physical prefix): mid-answer,
/// the text already streamed but not yet stored (the open segments) is
/// folded after the log, and the offset says how many characters of the
/// open segment the snapshot holds (`<offset>.<chars>`), so updates from it
/// carry on from the next character, neither repeating nor skipping one.
pub fn history<S: Store, K: Sink>(
    t: &Thread<S, K>,
    conversation: &str,
    gen: u64,
    if_none_match: Option<&str>,
) -> Result<Reply, ApiError> {
    let last = t.conversation().last_seq();
    let open = t.journal().open_segments();
    // Nothing streaming: the answer's offset is the log's, and a client
    // that holds it is told so before anything is folded.
    if open.is_empty() {
        let at = offset(gen, last);
        if let Some(r) = not_modified(&etag("history", "", &at), if_none_match, &at) {
            return Ok(r);
        }
    }
    let mut projector = Projector::new();
    let mut conv = Conversation::default();
    let mut fold = |data: &str| {
        for chunk in projector.item(data) {
            conv.apply(&chunk);
        }
    };
    let tree = t.conversation().tree()?;
    let path: HashSet<&str> = tree.path().into_iter().map(|l| l.run_id.as_str()).collect();
    let mut compactions = Vec::new();
    records(t, last, |r| {
        if shown(&tree, &path, r) {
            fold(&r.data);
            if r.data.starts_with("{\"type\":\"context-compacted\"") {
                if let Ok(ev) = serde_json::from_str::<crate::log::event::Event>(&r.data) {
                    if let crate::log::event::Payload::ContextCompacted(c) = ev.payload {
                        compactions.push((ev.run_id, c));
                    }
                }
            }
        }
        true
    })?;
    for segment in &open {
        fold(&segment.to_json());
    }
    // A submission's last answer marks the compaction made during it.
    for (run, c) in compactions {
        let last = conv.messages.iter_mut().rev().find(|m| m.role == "assistant" && m.submission_id.as_deref() == Some(run.as_str()));
        if let Some(meta) = last.and_then(|m| m.metadata.as_mut()) {
            meta.context_compacted = Some(Box::new(c));
        }
    }
    // Each message with versions says where it stands among them.
    for m in &mut conv.messages {
        let Some(run) = m.submission_id.as_deref() else { continue };
        let branch = if m.role == "user" { tree.messages(run) } else { tree.answers(run) };
        if let (Some(b), Some(meta)) = (branch.filter(|b| b.count > 1), m.metadata.as_mut()) {
            meta.branch = Some(b);
        }
    }
    let chars = projector.live_chars();
    let at = match chars {
        0 => offset(gen, last),
        n => format!("{}.{n}", offset(gen, last)),
    };
    let tag = etag("history", "", &at);
    if let Some(r) = not_modified(&tag, if_none_match, &at) {
        return Ok(r);
    }
    // The incarnation as offsets write their generation.
    let incarnation = format!("{gen:016}");
    Ok(Reply::json(200, &conv.snapshot(conversation, &at, &incarnation))
        .header("cache-control", "no-store")
        .header("etag", tag)
        .header(wire::NEXT_OFFSET, at)
        .header(wire::UP_TO_DATE, "true"))
}

/// A catch-up `view=updates` read: the chunks of the records after the
/// reader's offset, a page of whole records.
pub fn updates<S: Store, K: Sink>(
    t: &Thread<S, K>,
    conversation: &str,
    gen: u64,
    from: &str,
    resume: Resume,
    if_none_match: Option<&str>,
) -> Result<Reply, ApiError> {
    let last = t.conversation().last_seq();
    let mut projector = Projector::new();
    let mut chunks = Vec::new();
    let mut seq = resume.seq;
    let mut armed = false;
    records(t, last, |r| {
        let (s, data) = (r.seq, r.data.as_str());
        if s > resume.seq && !armed {
            armed = true;
            projector.resume_inside(resume.chars);
        }
        let out = projector.item(data);
        if s <= resume.seq {
            return true;
        }
        if chunks.len() >= PAGE_CHUNKS && !out.is_empty() {
            return false;
        }
        seq = s;
        chunks.extend(out.into_iter().enumerate().map(|(i, c)| (Position { batch: s, index: i as u64 }, c)));
        true
    })?;
    let at = if seq == resume.seq && resume.chars > 0 { from.to_owned() } else { offset(gen, seq) };
    let tag = etag("updates", from, &at);
    if let Some(r) = not_modified(&tag, if_none_match, &at) {
        return Ok(r);
    }
    let body = projection::json_array(conversation, &chunks);
    Ok(batch_reply(body, &at, seq >= last, None).header("etag", tag))
}
