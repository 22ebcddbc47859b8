//! What a thread's object sends a subscriber's socket: plain text, one line
//! per item, read by the stateless Worker that holds the client's stream.
//!
//! ```text
//! H <high> <gen> <after>   the hello: first line of the first message (the
//!                    replay window is `(after, high]`, in log generation gen)
//! D <seq> <json>     a durable record (stored, with its seq)
//! L <json>           a live event (never stored: deltas, status)
//! S <json>           an open segment's text so far, for a joining client
//! Y <json>           a live run's state, for a joining client to
//!                    re-synchronise with (Instance AI's `run-sync`)
//! P <last>           a replay page ends, having reached seq <last>
//! K                  write a keep-alive now (the thread is full and looks
//!                    for subscribers whose client left: a write finds them)
//! E                  the run followed has ended (in the hello: its end is
//!                    at or below the window's top, nothing more will come)
//! R <json string>    a held stream moves here: the relay's feed takes over
//!                    the state the object's feed saved (`Feed::save`), live,
//!                    at the frame boundary where the object's stream ended;
//!                    the messages after it are those published since
//! M <ticket>         this socket's stream moves to one the object holds (a
//!                    run began): the relay claims it with the ticket and
//!                    its feed's state (`Feed::save`), at this frame
//!                    boundary; the object keeps what is published meanwhile
//! ```
//!
//! An event's JSON never holds a raw line break (JSON escapes them), so a
//! line is always one item. A live batch is one message; the hello is one
//! message (its first page and the snapshot); a page the Worker asks for
//! (`page <after> <high>`) is one message ending with its `P` line.

/// One line of a message, borrowed from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    Hello {
        high: u64,
        gen: u64,
        after: u64,
    },
    Durable {
        seq: u64,
        data: &'a str,
    },
    Live(&'a str),
    Snapshot(&'a str),
    Sync(&'a str),
    PageEnd {
        last: u64,
    },
    Ended,
    Probe,
    /// A held stream's saved feed state, as a JSON string.
    Restore(&'a str),
    /// The stream moves to one the object holds, claimed with this ticket.
    Move(&'a str),
}

/// The close code of a subscriber's socket whose thread was deleted.
pub const GONE: u16 = 4404;

/// The close code a relay ends its socket with when the stream moved to
/// the object (`M`): the stream goes on, claimed with its ticket.
pub const MOVED: u16 = 4001;

/// The probe message, alone in its message.
pub const PROBE: &str = "K";

/// Appends a durable record's line.
pub fn durable(seq: u64, data: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"D ");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    out.push(b' ');
    out.extend_from_slice(data.as_bytes());
    out.push(b'\n');
}

/// Appends a live event's line.
pub fn live(data: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"L ");
    out.extend_from_slice(data.as_bytes());
    out.push(b'\n');
}

/// Appends a snapshot's line.
pub fn snapshot(data: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"S ");
    out.extend_from_slice(data.as_bytes());
    out.push(b'\n');
}

/// Appends a live run's state line.
pub fn sync(data: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"Y ");
    out.extend_from_slice(data.as_bytes());
    out.push(b'\n');
}

/// Appends the hello line.
pub fn hello(high: u64, gen: u64, after: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("H {high} {gen} {after}\n").as_bytes());
}

/// Appends a page's end.
pub fn page_end(last: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("P {last}\n").as_bytes());
}

/// Appends the line saying the followed run has ended.
pub fn ended(out: &mut Vec<u8>) {
    out.extend_from_slice(b"E\n");
}

/// Appends the line that hands a held stream's feed state to a relay.
pub fn restore(state: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"R ");
    out.extend_from_slice(serde_json::to_string(state).expect("a string serialises").as_bytes());
    out.push(b'\n');
}

/// The message that moves a socket's stream to the object (its ticket).
pub fn moving(ticket: &str) -> Vec<u8> {
    format!("M {ticket}\n").into_bytes()
}

/// The Worker's request for the next replay page: records after `after`,
/// up to `high`.
pub fn page_request(after: u64, high: u64) -> String {
    format!("page {after} {high}")
}

/// Reads a page request (`None`: not one).
pub fn parse_page_request(text: &str) -> Option<(u64, u64)> {
    let mut it = text.strip_prefix("page ")?.split(' ');
    let after = it.next()?.parse().ok()?;
    let high = it.next()?.parse().ok()?;
    it.next().is_none().then_some((after, high))
}

/// The lines of a message; a line that is none of the above is skipped (a
/// newer object's item an older Worker does not know).
pub fn lines(message: &str) -> impl Iterator<Item = Line<'_>> {
    message.split('\n').filter_map(|line| {
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        Some(match kind {
            "D" => {
                let (seq, data) = rest.split_once(' ')?;
                Line::Durable { seq: seq.parse().ok()?, data }
            }
            "L" => Line::Live(rest),
            "S" => Line::Snapshot(rest),
            "Y" => Line::Sync(rest),
            "P" => Line::PageEnd { last: rest.parse().ok()? },
            "E" => Line::Ended,
            "K" => Line::Probe,
            "R" => Line::Restore(rest),
            "M" => Line::Move(rest),
            "H" => {
                let mut it = rest.split(' ');
                let (high, gen, after) = (it.next()?, it.next()?, it.next()?);
                Line::Hello { high: high.parse().ok()?, gen: gen.parse().ok()?, after: after.parse().ok()? }
            }
            _ => return None,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let mut m = Vec::new();
        hello(7, 3, 2, &mut m);
        durable(5, r#"{"a":"x y"}"#, &mut m);
        snapshot(r#"{"s":1}"#, &mut m);
        page_end(5, &mut m);
        live(r#"{"l":"\n"}"#, &mut m);
        ended(&mut m);
        restore("a\nb", &mut m);
        m.extend_from_slice(&moving("t_1"));
        let text = String::from_utf8(m).unwrap();
        let got: Vec<_> = lines(&text).collect();
        assert_eq!(
            got,
            [
                Line::Hello { high: 7, gen: 3, after: 2 },
                Line::Durable { seq: 5, data: r#"{"a":"x y"}"# },
                Line::Snapshot(r#"{"s":1}"#),
                Line::PageEnd { last: 5 },
                Line::Live(r#"{"l":"\n"}"#),
                Line::Ended,
                Line::Restore(r#""a\nb""#),
                Line::Move("t_1"),
            ]
        );
        assert_eq!(parse_page_request(&page_request(4, 9)), Some((4, 9)));
        assert_eq!(parse_page_request("page 1"), None);
        assert_eq!(lines("X future item\nL {}").count(), 1, "unknown items are skipped");
    }
}
