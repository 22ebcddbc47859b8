//! A text or reasoning segment as the protocols that frame it per delta see
//! it (agora's run frames, the AI SDK's chunks, AG-UI's events): the deltas
//! that went out live, and the blocks that store them.
//!
//! Invariant (live and replayed alike): a block records each delta's byte
//! length (`parts`), so it becomes exactly the deltas it was built from; a
//! block (or the snapshot a joining client gets) that extends what was sent
//! of its segment yields only the deltas not sent yet. So a client that saw
//! some deltas live and then gets the block sees every character once, and a
//! replay that has only blocks sends the same pieces the live stream did.

use crate::log::event::Event;

/// A text or reasoning event, read.
#[derive(Debug)]
pub struct Piece<'a> {
    pub reasoning: bool,
    /// The segment's whole text so far (a block, a snapshot), or a delta's.
    pub text: &'a str,
    /// A live delta: it adds to the segment (a block or snapshot replaces).
    pub delta: bool,
    /// The byte length of each delta the text was built from.
    pub parts: Vec<usize>,
}

impl<'a> Piece<'a> {
    /// The piece of a text or reasoning event (`None` for other kinds).
    pub fn of(ev: &'a Event) -> Option<Piece<'a>> {
        let (t, reasoning, delta_kind) = ev.payload.text()?;
        let text = t.text.as_str();
        let delta = delta_kind && t.snapshot != Some(true);
        let parts = match &t.parts {
            Some(parts) if !delta && parts.iter().sum::<usize>() == text.len() => parts.clone(),
            _ => vec![text.len()],
        };
        Some(Piece { reasoning, text, delta, parts })
    }
}

/// What was sent of an open segment.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SentText {
    pub reasoning: bool,
    pub response_id: Option<String>,
    pub text: String,
    /// How many deltas that was.
    pub parts: usize,
}

impl SentText {
    pub fn new(reasoning: bool, response_id: Option<String>) -> SentText {
        SentText { reasoning, response_id, text: String::new(), parts: 0 }
    }

    /// Whether `piece` of `response_id` goes on with this segment: same kind
    /// and response, and a delta, or a block that extends what was sent.
    pub fn continues(&self, piece: &Piece, response_id: &Option<String>) -> bool {
        self.reasoning == piece.reasoning
            && self.response_id == *response_id
            && (piece.delta || piece.text.starts_with(&self.text))
    }

    /// The deltas of `piece` not sent yet (never an empty one), recorded as
    /// sent.
    pub fn advance(&mut self, piece: &Piece) -> Vec<String> {
        if piece.delta {
            self.text.push_str(piece.text);
            self.parts += 1;
            return if piece.text.is_empty() { Vec::new() } else { vec![piece.text.to_owned()] };
        }
        let mut out = Vec::new();
        let mut at = 0;
        for (i, len) in piece.parts.iter().enumerate() {
            let part = piece.text.get(at..at + len).unwrap_or_default();
            if i >= self.parts && !part.is_empty() {
                out.push(part.to_owned());
            }
            at += len;
        }
        self.text = piece.text.to_owned();
        self.parts = self.parts.max(piece.parts.len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event::Kind;
    use serde_json::{json, Value};

    fn ev(kind: Kind, payload: Value) -> Event {
        Event::from_json(kind, "r", "o", 0, payload).unwrap()
    }

    #[test]
    fn a_block_after_live_deltas_yields_only_what_was_not_sent() {
        let d1 = ev(Kind::TextDelta, json!({"text": "He"}));
        let block = ev(Kind::TextBlock, json!({"text": "Hello", "parts": [2, 3]}));
        let mut sent = SentText::new(false, None);
        assert_eq!(sent.advance(&Piece::of(&d1).unwrap()), ["He"]);
        let b = Piece::of(&block).unwrap();
        assert!(sent.continues(&b, &None));
        assert_eq!(sent.advance(&b), ["llo"]);
        // Replayed from the block alone: the same pieces.
        assert_eq!(SentText::new(false, None).advance(&b), ["He", "llo"]);
        // A block whose parts do not add up is one piece.
        let odd = ev(Kind::TextBlock, json!({"text": "abc", "parts": [1]}));
        assert_eq!(SentText::new(false, None).advance(&Piece::of(&odd).unwrap()), ["abc"]);
        assert!(Piece::of(&ev(Kind::StepStart, json!({}))).is_none());
    }
}
