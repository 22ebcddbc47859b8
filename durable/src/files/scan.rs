//! A JSON send read as it streams, with its inline files decoded out of it.
//!
//! Clients send files inside JSON: the AI SDK's `useChat` as `data:` URLs
//! in a message's `file` parts, AG-UI and n8n as base64 strings. Parsed
//! whole, such a body would be held twice (the text, then the decoded
//! bytes) and more (the parsed tree's copy of each string). The [`Scanner`]
//! instead follows the JSON's structure byte by byte, and when a string
//! value sits at one of the protocol's file [`Slot`]s and holds a `data:`
//! URL (or, for a raw slot, base64), decodes it as it arrives into the
//! file's bytes and writes a marker, `"threadline:inline:<n>"`, in its place.
//! What remains of the body is small JSON, bounded by `MAX_BODY_BYTES`; each
//! file is bounded by `MAX_FILE_BYTES` the moment it grows past it.
//!
//! The scanner does not validate JSON: what it passes through is parsed
//! afterwards (`serde_json`), and malformed input only ever yields JSON that
//! fails to parse there. A string it did not extract (a slot whose
//! discriminator came after it, a short inline value) stays in the body
//! and is decoded from the parsed JSON instead, within the body's bound.
//!
//! Messages: a client sends the whole conversation with each turn (the AI
//! SDK and AG-UI do), but only its last message is the send's. With a
//! [`Slots::group`] (the messages array), the files of earlier items are
//! dropped as soon as the next item starts, so only one message's files are
//! ever held.

use crate::wire::error::ApiError;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

/// The marker an extracted string leaves in the body: this prefix and the
/// file's index.
pub const MARKER: &str = "threadline:inline:";

/// The index a marker names.
pub fn marker_index(s: &str) -> Option<usize> {
    s.strip_prefix(MARKER)?.parse().ok()
}

/// One step of a slot's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg {
    /// An object's member.
    Key(&'static str),
    /// Any item of an array.
    Item,
}

/// Which strings at a slot are files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raw {
    /// Only `data:` URLs (any other string, an `https:` URL, passes).
    No,
    /// `data:` URLs, and any other string is base64.
    Always,
    /// As `Always` when the enclosing object's member `.0`, seen before
    /// this string, is the string `.1` (AG-UI's `source: {type: "data",
    /// value}`); else as `No`.
    When(&'static str, &'static str),
}

/// Where a JSON body carries files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub path: &'static [Seg],
    pub raw: Raw,
}

/// A protocol's file slots, and the array whose items are messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots {
    pub slots: &'static [Slot],
    /// Only the files of this array's last item are kept.
    pub group: Option<&'static [Seg]>,
}

/// A file decoded out of the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inline {
    pub bytes: Vec<u8>,
    /// The media type its `data:` URL declared (`None` for base64).
    pub data_url_type: Option<String>,
    /// An earlier message's: its bytes were let go.
    pub dropped: bool,
}

/// What a scan yields: the body without its files, and the files.
#[derive(Debug, Default)]
pub struct Scanned {
    pub json: Vec<u8>,
    pub files: Vec<Inline>,
}

/// Longest member name compared against slots (longer never matches).
const MAX_KEY: usize = 64;
/// Longest `data:` URL header (`data:<type>;base64,`).
const MAX_HEADER: usize = 512;
/// Longest discriminator value remembered.
const MAX_TAG: usize = 32;
/// Base64 is decoded in runs of this many characters (a multiple of 4).
const B64_RUN: usize = 4096;

#[derive(Debug)]
enum Container {
    Object {
        /// The member being read (its name), `None` before the first.
        key: Option<String>,
        /// `:` was seen: the next token is the member's value.
        value: bool,
        /// Short string members seen so far (discriminators).
        tags: Vec<(String, String)>,
    },
    Array {
        /// Items started so far.
        items: usize,
    },
}

#[derive(Debug)]
enum Lex {
    /// Between tokens.
    Between,
    /// Inside a number or literal: copied until a delimiter.
    Bare,
    /// Inside a string.
    Str(Str),
}

#[derive(Debug)]
struct Str {
    role: Role,
    /// After a `\`: the escape's next byte.
    escape: Escape,
}

#[derive(Debug, PartialEq)]
enum Escape {
    None,
    Backslash,
    /// `\u`, and the hex digits so far.
    Unicode(u32, u8),
}

#[derive(Debug)]
enum Role {
    /// A member name: decoded, to compare with slots.
    Key(String),
    /// A value copied as it is; `tag` also remembers it (a short
    /// discriminator of the enclosing object).
    Copy { tag: Option<(String, String)> },
    /// A value at a slot, undecided until its first characters are seen:
    /// its raw bytes (to pass it on unchanged) and what they decode to.
    Candidate { raw: Vec<u8>, text: String, base64: bool },
    /// A `data:` URL's header, up to its comma.
    Header { header: String },
    /// A file's payload, decoded into `files[index]`.
    Payload { index: usize, decode: Payload },
}

#[derive(Debug)]
enum Payload {
    /// Base64 characters not yet decoded.
    Base64(Vec<u8>),
    /// Percent-encoded; the hex digits of a `%XX` so far.
    Percent(Vec<u8>),
}

/// Base64 with either alphabet's last two characters and padding or not.
const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The scan of one body. Feed it the body's chunks in order
/// ([`Scanner::push`]), then [`Scanner::finish`].
pub struct Scanner {
    slots: Slots,
    rest_limit: usize,
    max_file_bytes: usize,
    max_files: usize,
    stack: Vec<Container>,
    lex: Lex,
    out: Vec<u8>,
    files: Vec<Inline>,
    /// Items of the group array started so far.
    group_items: usize,
    /// The group item each file came from.
    file_groups: Vec<usize>,
}

impl Scanner {
    pub fn new(slots: Slots, rest_limit: usize, max_file_bytes: usize, max_files: usize) -> Scanner {
        Scanner {
            slots,
            rest_limit,
            max_file_bytes,
            max_files,
            stack: Vec::new(),
            lex: Lex::Between,
            out: Vec::new(),
            files: Vec::new(),
            group_items: 0,
            file_groups: Vec::new(),
        }
    }

    /// Reads the next chunk: 413 `body_too_large` when the body without
    /// its files outgrows the limit, 413 `file_too_large` for a file over
    /// its limit, 400 `too_many_files`, 400 `invalid_file` for a malformed
    /// `data:` URL or base64.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        let mut i = 0;
        while i < chunk.len() {
            // Inside a file's base64 (most of a send's bytes), a run up to
            // the next quote or backslash is taken at once.
            let run = self.base64_run(&chunk[i..])?;
            i += run;
            if i < chunk.len() {
                self.byte(chunk[i])?;
                i += 1;
            }
        }
        if self.out.len() > self.rest_limit {
            return Err(ApiError::body_too_large(self.rest_limit));
        }
        Ok(())
    }

    /// The body's end.
    pub fn finish(mut self) -> Result<Scanned, ApiError> {
        if let Lex::Str(Str { role: Role::Payload { index, decode }, .. }) = &mut self.lex {
            // An unterminated string: the JSON will not parse; keep what came.
            let (index, decode) = (*index, std::mem::replace(decode, Payload::Percent(Vec::new())));
            self.end_payload(index, decode)?;
        }
        Ok(Scanned { json: self.out, files: self.files })
    }

    /// When the scan is inside a file's base64 (no escape pending), takes
    /// the bytes up to the next `"` or `\\`: how many it took.
    fn base64_run(&mut self, bytes: &[u8]) -> Result<usize, ApiError> {
        let Lex::Str(Str { role: Role::Payload { index, decode: Payload::Base64(pending) }, escape: Escape::None }) =
            &mut self.lex
        else {
            return Ok(0);
        };
        let index = *index;
        let end = memchr::memchr2(b'"', b'\\', bytes).unwrap_or(bytes.len());
        for &b in &bytes[..end] {
            match b {
                b' ' | b'\n' | b'\r' | b'\t' => {}
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => pending.push(b),
                b'-' => pending.push(b'+'),
                b'_' => pending.push(b'/'),
                _ => return Err(ApiError::invalid_file("a file's base64 holds a character outside base64")),
            }
        }
        if pending.len() >= B64_RUN {
            let whole = pending.len() / 4 * 4;
            let run: Vec<u8> = pending.drain(..whole).collect();
            self.decode_base64(index, &run, false)?;
        }
        Ok(end)
    }

    fn byte(&mut self, b: u8) -> Result<(), ApiError> {
        match &mut self.lex {
            Lex::Str(_) => self.string_byte(b),
            Lex::Bare => {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b':') {
                    self.lex = Lex::Between;
                    self.between(b)
                } else {
                    self.out.push(b);
                    Ok(())
                }
            }
            Lex::Between => self.between(b),
        }
    }

    fn between(&mut self, b: u8) -> Result<(), ApiError> {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'{' => {
                self.value_starts();
                self.stack.push(Container::Object { key: None, value: false, tags: Vec::new() });
            }
            b'[' => {
                self.value_starts();
                self.stack.push(Container::Array { items: 0 });
            }
            b'}' | b']' => {
                self.stack.pop();
            }
            b':' => {
                if let Some(Container::Object { value, .. }) = self.stack.last_mut() {
                    *value = true;
                }
            }
            b',' => {
                if let Some(Container::Object { value, .. }) = self.stack.last_mut() {
                    *value = false;
                }
            }
            b'"' => {
                let role = self.string_role();
                if !matches!(role, Role::Candidate { .. }) {
                    self.out.push(b'"');
                }
                self.lex = Lex::Str(Str { role, escape: Escape::None });
                return Ok(());
            }
            _ => {
                self.value_starts();
                self.lex = Lex::Bare;
            }
        }
        self.out.push(b);
        Ok(())
    }

    /// A value (not a member name) starts at the current position: an
    /// array counts its items, and a new item of the group array lets the
    /// previous items' files go.
    fn value_starts(&mut self) {
        if let Some(Container::Array { items }) = self.stack.last_mut() {
            *items += 1;
            if let Some(group) = self.slots.group {
                if path_matches(&self.stack, group) {
                    self.group_items += 1;
                    for (file, g) in self.files.iter_mut().zip(&self.file_groups) {
                        if *g < self.group_items && !file.dropped {
                            file.bytes = Vec::new();
                            file.dropped = true;
                        }
                    }
                }
            }
        }
    }

    /// What the string starting here is.
    fn string_role(&mut self) -> Role {
        let in_key = matches!(self.stack.last(), Some(Container::Object { value: false, .. }));
        if in_key {
            return Role::Key(String::new());
        }
        self.value_starts();
        if let Some(slot) = self.slots.slots.iter().find(|s| path_matches(&self.stack, s.path)) {
            let base64 = match slot.raw {
                Raw::No => false,
                Raw::Always => true,
                Raw::When(k, v) => match self.stack.last() {
                    Some(Container::Object { tags, .. }) => tags.iter().any(|(tk, tv)| tk == k && tv == v),
                    _ => false,
                },
            };
            return Role::Candidate { raw: Vec::new(), text: String::new(), base64 };
        }
        let tag = match self.stack.last() {
            Some(Container::Object { key: Some(k), .. })
                if self.slots.slots.iter().any(|s| matches!(s.raw, Raw::When(tk, _) if tk == k)) =>
            {
                Some((k.clone(), String::new()))
            }
            _ => None,
        };
        Role::Copy { tag }
    }

    fn string_byte(&mut self, b: u8) -> Result<(), ApiError> {
        let Lex::Str(s) = &mut self.lex else { return Ok(()) };
        // Candidates keep their raw bytes until they are decided.
        if let Role::Candidate { raw, .. } = &mut s.role {
            raw.push(b);
        } else if matches!(s.role, Role::Key(_) | Role::Copy { .. }) {
            self.out.push(b);
        }
        // Decode one JSON string character (or the string's end).
        let ch = match s.escape {
            Escape::None => match b {
                b'"' => return self.string_ends(),
                b'\\' => {
                    s.escape = Escape::Backslash;
                    return Ok(());
                }
                _ => Unit::Byte(b),
            },
            Escape::Backslash => {
                s.escape = Escape::None;
                match b {
                    b'u' => {
                        s.escape = Escape::Unicode(0, 0);
                        return Ok(());
                    }
                    b'n' => Unit::Byte(b'\n'),
                    b'r' => Unit::Byte(b'\r'),
                    b't' => Unit::Byte(b'\t'),
                    b'b' => Unit::Byte(8),
                    b'f' => Unit::Byte(12),
                    other => Unit::Byte(other),
                }
            }
            Escape::Unicode(v, n) => {
                let digit = (b as char).to_digit(16).unwrap_or(0);
                let v = v * 16 + digit;
                if n + 1 < 4 {
                    s.escape = Escape::Unicode(v, n + 1);
                    return Ok(());
                }
                s.escape = Escape::None;
                Unit::Char(char::from_u32(v).unwrap_or('\u{fffd}'))
            }
        };
        self.unit(ch)
    }

    /// One decoded character of the current string.
    fn unit(&mut self, u: Unit) -> Result<(), ApiError> {
        let Lex::Str(s) = &mut self.lex else { return Ok(()) };
        match &mut s.role {
            Role::Key(k) => {
                if k.len() <= MAX_KEY {
                    u.push_to(k);
                }
            }
            Role::Copy { tag: Some((_, v)) } => {
                if v.len() <= MAX_TAG {
                    u.push_to(v);
                }
            }
            Role::Copy { tag: None } => {}
            Role::Candidate { text, base64, .. } => {
                u.push_to(text);
                let base64 = *base64;
                if text.len() >= 5 || !"data:".starts_with(text.to_ascii_lowercase().as_str()) {
                    return self.decide(base64);
                }
            }
            Role::Header { header } => {
                if u == Unit::Byte(b',') {
                    let header = std::mem::take(header);
                    return self.begin_payload(Some(&header));
                }
                u.push_to(header);
                if header.len() > MAX_HEADER {
                    return Err(ApiError::invalid_file(
                        "a `data:` URL's header runs past 512 characters without a comma",
                    ));
                }
            }
            Role::Payload { index, decode } => {
                let index = *index;
                match decode {
                    Payload::Base64(pending) => match u {
                        Unit::Byte(b' ' | b'\n' | b'\r' | b'\t') => {}
                        Unit::Byte(b) if b.is_ascii() => {
                            pending.push(match b {
                                b'-' => b'+',
                                b'_' => b'/',
                                b => b,
                            });
                            if pending.len() >= B64_RUN {
                                let run = std::mem::take(pending);
                                self.decode_base64(index, &run, false)?;
                            }
                        }
                        _ => return Err(ApiError::invalid_file("a file's base64 holds a character outside base64")),
                    },
                    Payload::Percent(hex) => {
                        let mut bytes = Vec::new();
                        match u {
                            Unit::Byte(b'%') if hex.is_empty() => hex.push(b'%'),
                            Unit::Byte(b) if !hex.is_empty() => {
                                hex.push(b);
                                if hex.len() == 3 {
                                    let v = std::str::from_utf8(&hex[1..])
                                        .ok()
                                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                                    let Some(v) = v else {
                                        return Err(ApiError::invalid_file(
                                            "a `data:` URL holds a malformed `%` escape",
                                        ));
                                    };
                                    bytes.push(v);
                                    hex.clear();
                                }
                            }
                            u => bytes.extend_from_slice(u.encode(&mut [0; 4])),
                        }
                        self.append(index, &bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A candidate's first characters are in: a `data:` URL, base64 (a raw
    /// slot's), or a string passed on as it came.
    fn decide(&mut self, base64: bool) -> Result<(), ApiError> {
        let Lex::Str(s) = &mut self.lex else { return Ok(()) };
        let Role::Candidate { raw, text, .. } = &mut s.role else { return Ok(()) };
        let (raw, text) = (std::mem::take(raw), std::mem::take(text));
        if text.len() >= 5 && text.as_bytes()[..5].eq_ignore_ascii_case(b"data:") {
            s.role = Role::Header { header: text[5..].to_owned() };
            return Ok(());
        }
        if base64 {
            self.begin_payload(None)?;
            for b in text.bytes() {
                self.unit(Unit::Byte(b))?;
            }
            return Ok(());
        }
        // Passed on as it came (the closing quote is still to come: a
        // quote in `raw` is an escaped one).
        s.role = Role::Copy { tag: None };
        self.out.push(b'"');
        self.out.extend_from_slice(&raw);
        Ok(())
    }

    /// A file's payload starts (after its `data:` header, if any).
    fn begin_payload(&mut self, header: Option<&str>) -> Result<(), ApiError> {
        let (media_type, base64) = match header {
            Some(h) => {
                let mut params = h.split(';');
                let media_type = params.next().unwrap_or_default().trim().to_ascii_lowercase();
                let base64 = params.any(|p| p.trim().eq_ignore_ascii_case("base64"));
                let media_type = if media_type.is_empty() { "text/plain".to_owned() } else { media_type };
                (Some(media_type), base64)
            }
            None => (None, true),
        };
        let group_files = self.file_groups.iter().filter(|g| **g == self.group_items).count();
        if group_files >= self.max_files {
            return Err(ApiError::too_many_files(self.max_files));
        }
        let index = self.files.len();
        self.files.push(Inline { bytes: Vec::new(), data_url_type: media_type, dropped: false });
        self.file_groups.push(self.group_items);
        let decode = if base64 { Payload::Base64(Vec::new()) } else { Payload::Percent(Vec::new()) };
        if let Lex::Str(s) = &mut self.lex {
            s.role = Role::Payload { index, decode };
        }
        Ok(())
    }

    fn string_ends(&mut self) -> Result<(), ApiError> {
        let Lex::Str(s) = std::mem::replace(&mut self.lex, Lex::Between) else { return Ok(()) };
        match s.role {
            Role::Key(k) => {
                if let Some(Container::Object { key, .. }) = self.stack.last_mut() {
                    *key = Some(k);
                }
            }
            Role::Copy { tag: Some(tag) } => {
                if let Some(Container::Object { tags, .. }) = self.stack.last_mut() {
                    tags.push(tag);
                }
            }
            Role::Copy { tag: None } => {}
            Role::Candidate { raw, .. } => {
                // A short string, all of it seen: passed on.
                self.out.push(b'"');
                self.out.extend_from_slice(&raw);
            }
            Role::Header { .. } => {
                return Err(ApiError::invalid_file("a `data:` URL has no comma before its data"));
            }
            Role::Payload { index, decode } => {
                self.end_payload(index, decode)?;
                self.out.extend_from_slice(format!("\"{MARKER}{index}\"").as_bytes());
            }
        }
        Ok(())
    }

    fn end_payload(&mut self, index: usize, decode: Payload) -> Result<(), ApiError> {
        match decode {
            Payload::Base64(rest) => self.decode_base64(index, &rest, true),
            Payload::Percent(hex) if !hex.is_empty() => {
                Err(ApiError::invalid_file("a `data:` URL ends inside a `%` escape"))
            }
            Payload::Percent(_) => Ok(()),
        }
    }

    fn decode_base64(&mut self, index: usize, run: &[u8], last: bool) -> Result<(), ApiError> {
        if run.is_empty() {
            return Ok(());
        }
        if !last && run.len() % 4 != 0 {
            return Err(ApiError::invalid_file("base64 runs are decoded in multiples of four"));
        }
        let decoded =
            B64.decode(run).map_err(|e| ApiError::invalid_file(format!("a file's base64 is malformed: {e}")))?;
        self.append(index, &decoded)
    }

    fn append(&mut self, index: usize, bytes: &[u8]) -> Result<(), ApiError> {
        let Some(file) = self.files.get_mut(index) else { return Ok(()) };
        if file.bytes.len() + bytes.len() > self.max_file_bytes {
            return Err(ApiError::file_too_large(self.max_file_bytes));
        }
        file.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

/// One decoded character of a JSON string: a byte as it came (UTF-8 passes
/// byte by byte), or a character from a `\u` escape.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Byte(u8),
    Char(char),
}

impl Unit {
    fn encode(self, buf: &mut [u8; 4]) -> &[u8] {
        match self {
            Unit::Byte(b) => {
                buf[0] = b;
                &buf[..1]
            }
            Unit::Char(c) => c.encode_utf8(buf).as_bytes(),
        }
    }

    /// Appends to a decoded string (a lone byte of a multi-byte character
    /// goes in as the character it completes; invalid sequences are lost,
    /// which only ever makes a name or tag match nothing).
    fn push_to(self, s: &mut String) {
        match self {
            Unit::Byte(b) if b.is_ascii() => s.push(b as char),
            Unit::Byte(_) => s.push('\u{fffd}'),
            Unit::Char(c) => s.push(c),
        }
    }
}

/// Whether the path to the value starting now is `path`.
fn path_matches(stack: &[Container], path: &[Seg]) -> bool {
    stack.len() == path.len()
        && stack.iter().zip(path).all(|(c, seg)| match (c, seg) {
            (Container::Object { key: Some(k), value: true, .. }, Seg::Key(want)) => k == want,
            (Container::Array { .. }, Seg::Item) => true,
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const AI_SDK: Slots = Slots {
        slots: &[Slot {
            path: &[Seg::Key("messages"), Seg::Item, Seg::Key("parts"), Seg::Item, Seg::Key("url")],
            raw: Raw::No,
        }],
        group: Some(&[Seg::Key("messages"), Seg::Item]),
    };
    const AG_UI: Slots = Slots {
        slots: &[Slot {
            path: &[
                Seg::Key("messages"),
                Seg::Item,
                Seg::Key("content"),
                Seg::Item,
                Seg::Key("source"),
                Seg::Key("value"),
            ],
            raw: Raw::When("type", "data"),
        }],
        group: Some(&[Seg::Key("messages"), Seg::Item]),
    };
    const N8N: Slots = Slots {
        slots: &[Slot { path: &[Seg::Key("attachments"), Seg::Item, Seg::Key("data")], raw: Raw::Always }],
        group: None,
    };

    fn scan_chunks(slots: Slots, body: &[u8], chunk: usize) -> Result<Scanned, ApiError> {
        let mut s = Scanner::new(slots, 1 << 20, 1 << 20, 10);
        for c in body.chunks(chunk.max(1)) {
            s.push(c)?;
        }
        s.finish()
    }

    fn scan(slots: Slots, body: &Value) -> (Value, Vec<Inline>) {
        let out = scan_chunks(slots, body.to_string().as_bytes(), 7).unwrap();
        (serde_json::from_slice(&out.json).unwrap(), out.files)
    }

    #[test]
    fn data_urls_in_file_parts_are_decoded_out() {
        let png = b"\x89PNG\r\n\x1a\n-bytes-".to_vec();
        let url = format!("data:image/png;base64,{}", STANDARD.encode(&png));
        let body = json!({"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [
            {"type": "text", "text": "data:not a file, just text"},
            {"type": "file", "mediaType": "image/png", "filename": "a.png", "url": url},
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/b.png"},
            {"type": "file", "mediaType": "text/plain", "url": "data:,hello%20world%21"},
        ]}], "trigger": "submit-message"});
        let (rest, files) = scan(AI_SDK, &body);
        let parts = &rest["messages"][0]["parts"];
        assert_eq!(parts[0]["text"], "data:not a file, just text", "text is no slot");
        assert_eq!(parts[1]["url"], "threadline:inline:0");
        assert_eq!(parts[2]["url"], "https://example.com/b.png", "a URL passes");
        assert_eq!(parts[3]["url"], "threadline:inline:1");
        assert_eq!(files[0].bytes, png);
        assert_eq!(files[0].data_url_type.as_deref(), Some("image/png"));
        assert_eq!(files[1].bytes, b"hello world!");
        assert_eq!(files[1].data_url_type.as_deref(), Some("text/plain"));
        assert_eq!(rest["trigger"], "submit-message");
    }

    #[test]
    fn only_the_last_messages_files_are_kept() {
        let msg = |id: &str, bytes: &[u8]| json!({"id": id, "role": "user", "parts": [{"type": "file", "mediaType": "text/plain", "url": format!("data:text/plain;base64,{}", STANDARD.encode(bytes))}]});
        let body = json!({"messages": [msg("a", b"first"), {"id": "r", "role": "assistant", "parts": []}, msg("b", b"second")]});
        let (rest, files) = scan(AI_SDK, &body);
        assert_eq!(rest["messages"][2]["parts"][0]["url"], "threadline:inline:1");
        assert!(files[0].dropped && files[0].bytes.is_empty());
        assert_eq!(files[1].bytes, b"second");
        assert!(!files[1].dropped);
        // Ten files per message, however many the conversation had.
        let many: Vec<Value> = (0..10).map(|i| msg(&format!("m{i}"), b"x")).collect();
        let mut s = Scanner::new(AI_SDK, 1 << 20, 1 << 20, 1);
        assert!(s.push(json!({"messages": many}).to_string().as_bytes()).is_ok());
    }

    #[test]
    fn raw_base64_at_its_slots() {
        let body = json!({"message": "see", "attachments": [{"data": STANDARD.encode(b"raw bytes"), "mimeType": "text/plain", "fileName": "r.txt"}]});
        let (rest, files) = scan(N8N, &body);
        assert_eq!(rest["attachments"][0]["data"], "threadline:inline:0");
        assert_eq!(rest["attachments"][0]["fileName"], "r.txt");
        assert_eq!(files[0].bytes, b"raw bytes");
        assert_eq!(files[0].data_url_type, None);

        // AG-UI: base64 when the source says `type: "data"` first; a URL
        // source's value passes; a value before its type stays in the body.
        let v = STANDARD.encode(b"img");
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "data", "value": v, "mimeType": "image/png"}},
            {"type": "image", "source": {"type": "url", "value": "https://x/y.png"}},
            {"type": "image", "source": {"value": v, "type": "data"}},
        ]}]});
        let (rest, files) = scan(AG_UI, &body);
        let content = &rest["messages"][0]["content"];
        assert_eq!(content[0]["source"]["value"], "threadline:inline:0");
        assert_eq!(content[1]["source"]["value"], "https://x/y.png");
        assert_eq!(content[2]["source"]["value"], v.as_str());
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].bytes, b"img");
    }

    #[test]
    fn escapes_and_whitespace_inside_files() {
        let bytes: Vec<u8> = (0..=255).collect();
        let b64 = STANDARD.encode(&bytes);
        // `/` escaped as JSON allows, and line breaks as some encoders wrap.
        let escaped: String = b64
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if c == '/' {
                    "\\/".to_owned()
                } else if i % 76 == 75 {
                    format!("{c}\\n")
                } else {
                    c.to_string()
                }
            })
            .collect();
        let body = format!(r#"{{"attachments":[{{"data":"{escaped}","mimeType":"application/octet-stream"}}]}}"#);
        let out = scan_chunks(N8N, body.as_bytes(), 3).unwrap();
        assert_eq!(out.files[0].bytes, bytes);
        let pct = r#"{"attachments":[{"data":"data:text/plain,caf%C3%A9 \u00e9"}]}"#;
        assert_eq!(scan_chunks(N8N, pct.as_bytes(), 1).unwrap().files[0].bytes, "café é".as_bytes());
    }

    #[test]
    fn refusals() {
        let code = |slots, body: &str, max_file| {
            let mut s = Scanner::new(slots, 64, max_file, 2);
            s.push(body.as_bytes()).and_then(|_| s.finish().map(drop)).unwrap_err().code
        };
        let big = format!(r#"{{"attachments":[{{"data":"{}"}}]}}"#, STANDARD.encode([0u8; 100]));
        assert_eq!(code(N8N, &big, 99), "file_too_large");
        assert_eq!(code(N8N, r#"{"attachments":[{"data":"data:image/png;base64,@@@@"}]}"#, 99), "invalid_file");
        assert_eq!(code(N8N, r#"{"attachments":[{"data":"data:image/png;base64"}]}"#, 99), "invalid_file");
        assert_eq!(code(N8N, r#"{"attachments":[{"data":"data:text/plain,%G1"}]}"#, 99), "invalid_file");
        assert_eq!(
            code(N8N, r#"{"attachments":[{"data":"QQ=="},{"data":"QQ=="},{"data":"QQ=="}]}"#, 99),
            "too_many_files"
        );
        assert_eq!(code(N8N, &format!(r#"{{"message":"{}"}}"#, "x".repeat(100)), 99), "body_too_large");
        // Malformed JSON never panics: it fails to parse afterwards.
        for junk in ["}}]]:,", "{\"a\":\"\\u12", "[\"data:", "{\"attachments\":[{\"data\":\"QQ"] {
            let mut s = Scanner::new(N8N, 1 << 10, 1 << 10, 2);
            let _ = s.push(junk.as_bytes()).and_then(|_| s.finish().map(drop));
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z\"\\\\/ é\u{1F600}:]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever the JSON around them and wherever the chunks split, the
        /// body comes out as it went in with each file's string replaced by
        /// its marker, and each file's bytes as they were.
        #[test]
        fn scanning_is_the_reference_transformation(
            noise in arb_json(),
            files in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..300), any::<bool>()), 0..4),
            chunk in 1usize..64,
        ) {
            let parts: Vec<Value> = files.iter().map(|(bytes, pct)| {
                let url = if *pct {
                    let enc: String = bytes.iter().map(|b| format!("%{b:02X}")).collect();
                    format!("data:application/octet-stream,{enc}")
                } else {
                    format!("data:application/octet-stream;base64,{}", STANDARD.encode(bytes))
                };
                json!({"type": "file", "noise": noise.clone(), "url": url})
            }).collect();
            let body = json!({"before": noise.clone(), "messages": [{"role": "user", "parts": parts, "url": "data:,not a slot"}], "after": noise});
            let out = scan_chunks(AI_SDK, body.to_string().as_bytes(), chunk).unwrap();
            let rest: Value = serde_json::from_slice(&out.json).unwrap();
            let mut expected = body.clone();
            for (i, part) in expected["messages"][0]["parts"].as_array_mut().unwrap().iter_mut().enumerate() {
                part["url"] = format!("{MARKER}{i}").into();
            }
            prop_assert_eq!(rest, expected);
            prop_assert_eq!(out.files.len(), files.len());
            for (got, (bytes, _)) in out.files.iter().zip(&files) {
                prop_assert_eq!(&got.bytes, bytes);
            }
        }
    }
}
