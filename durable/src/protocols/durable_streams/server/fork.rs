//! Forks: the source side (its reference count and the pages it hands
//! over) and the new stream's side (copying its inheritance page by page).
//! A second `impl` of [`Streams`], apart from the reads and appends.

use super::log::{Meta, StreamLog};
use crate::streams::offset::Offset;
use crate::streams::wire::{self, Reply};
use super::{decode_messages, unavailable, Streams};
use serde::{Deserialize, Serialize};

/// Most message bytes one page of a fork's inheritance carries: a fork
/// never holds more of its source in memory than this.
pub const FORK_PAGE_BYTES: usize = 512 * 1024;

/// What a fork asks its source stream for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkRequest {
    pub source: String,
    pub offset: Option<Offset>,
    pub sub_offset: u64,
    /// Pages of at most [`FORK_PAGE_BYTES`] (a fork of an older release
    /// asks for everything at once).
    #[serde(default)]
    pub paged: bool,
    /// The next page: the messages after this offset. `None`: the first
    /// page, which also takes the fork's reference on the source.
    #[serde(default)]
    pub after: Option<Offset>,
}

/// What a source gives a new fork: its settings, the messages up to the fork
/// offset (copied: below the fork offset a stream never changes, so the
/// fork reads them as its own), and the prefix of a sub-offset fork.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkSource {
    pub content_type: String,
    pub ttl_seconds: Option<u64>,
    pub expires_at: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub offset: Offset,
    /// `[offset, base64 data]` pairs.
    pub messages: Vec<(Offset, String)>,
    /// Sent with the last page only.
    pub prefix: Option<String>,
    /// More pages follow (ask again `after` this page's last offset).
    #[serde(default)]
    pub more: bool,
}

impl<L: StreamLog> Streams<L> {
    /// The source side of a fork: checks the offset, counts one more fork
    /// (so this stream is only soft-deleted while the fork lives) and hands
    /// over what the fork inherits, page by page when the fork asks so
    /// (later pages only read: below the fork offset a stream never changes).
    pub fn fork_source(&mut self, f: &ForkRequest, now: i64) -> Result<ForkSource, Reply> {
        let Some(mut m) = self.live_meta(now)? else { return Err(Reply::text(404, "Source stream not found")) };
        let offset = f.offset.unwrap_or(m.tail);
        let page = if f.paged { FORK_PAGE_BYTES } else { usize::MAX };
        if f.after.is_none() {
            if m.soft_deleted {
                return Err(Reply::text(409, "source stream was deleted but still has active forks"));
            }
            if offset > m.tail {
                return Err(Reply::text(400, "Fork offset beyond source stream length"));
            }
        }
        let after = f.after.unwrap_or(Offset::ZERO);
        let read = self.log.read(after, offset, page).map_err(unavailable)?;
        let more = read.last().is_some_and(|last| last.offset < offset) && f.paged;
        let prefix = if more { None } else { self.fork_prefix(&m, offset, f.sub_offset)? };
        let messages = read.into_iter().map(|m| (m.offset, wire::base64(&m.data))).collect();
        if f.after.is_none() {
            m.ref_count += 1;
            self.log.put_meta(&m).map_err(unavailable)?;
        }
        Ok(ForkSource {
            content_type: m.content_type,
            ttl_seconds: m.ttl_seconds,
            expires_at: m.expires_at,
            expires_at_ms: m.expires_at_ms,
            offset,
            messages,
            prefix,
            more,
        })
    }

    /// The inherited start of the message at the fork offset, for a fork
    /// at a sub-offset (the reference server's semantics).
    fn fork_prefix(&self, m: &Meta, offset: Offset, sub_offset: u64) -> Result<Option<String>, Reply> {
        if sub_offset == 0 {
            return Ok(None);
        }
        let next = self.log.read(offset, Offset::new(u64::MAX, u64::MAX), 1).map_err(unavailable)?;
        let first = next.first().ok_or_else(|| Reply::text(400, "Invalid fork sub-offset: no data past forkOffset"))?;
        let data = if wire::is_json(&m.content_type) {
            let values: Vec<serde_json::Value> = serde_json::from_slice(&wire::json_array([first.data.as_slice()]))
                .map_err(|_| Reply::text(400, "Invalid fork sub-offset"))?;
            if sub_offset as usize > values.len() {
                return Err(Reply::text(400, "Invalid fork sub-offset: overshoots source message count"));
            }
            let mut out = Vec::new();
            for v in &values[..sub_offset as usize] {
                out.extend_from_slice(v.to_string().as_bytes());
                out.push(b',');
            }
            out
        } else {
            if sub_offset as usize > first.data.len() {
                return Err(Reply::text(400, "Invalid fork sub-offset: overshoots source message length"));
            }
            first.data[..sub_offset as usize].to_vec()
        };
        Ok(Some(wire::base64(&data)))
    }

    /// A fork's copy begins: what a crashed earlier attempt left is cleared,
    /// and other creates of this path wait (409) until it ends.
    pub fn begin_fork_copy(&mut self) -> Result<(), Reply> {
        self.log.clear().map_err(unavailable)?;
        self.copying = true;
        Ok(())
    }

    /// Appends one page of a fork's inheritance (not its last: that comes
    /// with the stream's meta, in [`Self::finish_create`]).
    pub fn copy_fork_page(&mut self, page: &ForkSource) -> Result<(), Reply> {
        let messages = decode_messages(&page.messages)?;
        self.log.append(&messages).map_err(|e| {
            self.copying = false;
            unavailable(e)
        })
    }

    /// A fork's copy failed: the path is free again (its rows are cleared at
    /// the next attempt).
    pub fn abandon_fork_copy(&mut self) {
        self.copying = false;
    }

    /// A fork of this stream went away: one reference fewer. A soft-deleted
    /// stream whose last fork went is removed now (and releases its own source).
    pub fn release(&mut self) -> Result<(), Reply> {
        let Some(mut m) = self.log.meta().map_err(unavailable)? else { return Ok(()) };
        m.ref_count = m.ref_count.saturating_sub(1);
        if m.ref_count == 0 && m.soft_deleted {
            self.log.clear().map_err(unavailable)?;
            self.release = m.forked_from;
        } else {
            self.log.put_meta(&m).map_err(unavailable)?;
        }
        Ok(())
    }
}
