//! Server-Sent-Events framing, apart from any I/O (as axum's `response/sse.rs`).
//!
//! A [`Frame`] is validated when built: an `event:` name may not contain a line
//! break (it would end the field early and let the rest be parsed as another
//! field), and multi-line data is split into one `data:` line per line, so no
//! payload can forge an `id:` line. Frames are encoded into a caller's buffer
//! so a batch of events becomes one write per subscriber.
//!
//! Reading is here too: a [`Decoder`] turns an SSE byte stream (a model's
//! completion stream, an MCP server's answer) into its events' data, however
//! it is chunked.

/// Why a frame could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// The field value contains `\r` or `\n`.
    LineBreak(&'static str),
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldError::LineBreak(field) => write!(f, "SSE field `{field}` contains a line break"),
        }
    }
}

/// One SSE frame: optional `id:`, optional `event:`, and data.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    id: Option<u64>,
    event: Option<&'a str>,
    data: &'a str,
}

impl<'a> Frame<'a> {
    pub fn data(data: &'a str) -> Frame<'a> {
        Frame { id: None, event: None, data }
    }

    pub fn id(mut self, id: u64) -> Frame<'a> {
        self.id = Some(id);
        self
    }

    pub fn event(mut self, name: &'a str) -> Result<Frame<'a>, FieldError> {
        if name.contains(['\r', '\n']) {
            return Err(FieldError::LineBreak("event"));
        }
        self.event = Some(name);
        Ok(self)
    }

    /// Appends the encoded frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(name) = self.event {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
        }
        if let Some(id) = self.id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
            out.push(b'\n');
        }
        for line in split_lines(self.data) {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
        out.push(b'\n');
    }
}

/// Splits on `\r\n`, `\r` and `\n`, the three line ends SSE parsers accept.
fn split_lines(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let s = rest?;
        match memchr::memchr2(b'\r', b'\n', s.as_bytes()) {
            None => {
                rest = None;
                Some(s)
            }
            Some(i) => {
                let skip = if s[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&s[i + skip..]);
                Some(&s[..i])
            }
        }
    })
}

/// The headers of every SSE response (the events route, run streams, the
/// Durable Streams views): exactly `text/event-stream`, never cached, and
/// nothing on the way may buffer or compress it (`content-encoding:
/// identity`, `x-accel-buffering: no`). `Connection` is hop-by-hop: the
/// runtime may drop it.
pub const HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("content-encoding", "identity"),
    ("x-accel-buffering", "no"),
];

/// [`HEADERS`] as a response's header list.
pub fn headers() -> Vec<(&'static str, String)> {
    HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// The keep-alive frame sent every [`PING_INTERVAL_MS`].
pub const PING: &[u8] = b": ping\n\n";
pub const PING_INTERVAL_MS: u64 = 15_000;

/// Decodes an SSE byte stream into the payloads of its `data:` fields, one
/// per event (multi-line data joined with `\n`), whatever the chunking.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    data: Vec<String>,
}

impl Decoder {
    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // `\r\n` is one line end; a lone `\r` at the buffer's end may be
            // half of one, so wait for the next byte.
            if self.buf[end] == b'\r' && end + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[end] == b'\r' && self.buf.get(end + 1) == Some(&b'\n') { 2 } else { 1 };
            let line: Vec<u8> = self.buf.drain(..end + skip).take(end).collect();
            let line = String::from_utf8_lossy(&line);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(v) = line.strip_prefix("data:") {
                self.data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
            }
            // Comments and other fields (`event:`, `id:`, `retry:`) carry
            // nothing its readers (a model's completion stream, an MCP
            // server's answer) need.
        }
        out
    }

    /// At end of stream: an event left without its blank line.
    pub fn finish(&mut self) -> Option<String> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = String::from_utf8_lossy(&rest);
            if let Some(v) = line.strip_prefix("data:") {
                self.data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
            }
        }
        (!self.data.is_empty()).then(|| std::mem::take(&mut self.data).join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_handles_any_chunking_and_line_ends() {
        let stream = b"data: {\"a\":1}\n\n: comment\r\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        for size in 1..stream.len() {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for piece in stream.chunks(size) {
                got.extend(d.push(piece));
            }
            assert_eq!(got, vec!["{\"a\":1}", "x\ny", "[DONE]"], "chunk size {size}");
        }
        let mut d = Decoder::default();
        assert!(d.push(b"data: tail").is_empty());
        assert_eq!(d.finish().as_deref(), Some("tail"));
    }

    fn enc(f: Frame) -> String {
        let mut out = Vec::new();
        f.encode(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn durable_frame_is_id_then_data() {
        assert_eq!(enc(Frame::data("{\"a\":1}").id(42)), "id: 42\ndata: {\"a\":1}\n\n");
    }

    #[test]
    fn ephemeral_frame_has_no_id_line() {
        assert_eq!(enc(Frame::data("x")), "data: x\n\n");
    }

    #[test]
    fn named_event_comes_first() {
        assert_eq!(enc(Frame::data("{}").event("meta").unwrap().id(1)), "event: meta\nid: 1\ndata: {}\n\n");
    }

    #[test]
    fn multiline_data_cannot_forge_fields() {
        assert_eq!(enc(Frame::data("a\nid: 9\r\nb\rc")), "data: a\ndata: id: 9\ndata: b\ndata: c\n\n");
        assert_eq!(enc(Frame::data("")), "data: \n\n");
        assert_eq!(enc(Frame::data("end\n")), "data: end\ndata: \n\n");
    }

    #[test]
    fn event_name_with_line_break_is_refused() {
        assert_eq!(Frame::data("x").event("a\nb"), Err(FieldError::LineBreak("event")));
    }
}
