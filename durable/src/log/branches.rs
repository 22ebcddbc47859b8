//! The conversation's active path as a client folds it from the log: the
//! thread-level twin of the agent-tree reducer ([`super::reducer`]). The
//! server keeps the tree in its runs table (`thread::tree`); a client that
//! reads the raw log (a Durable Streams reader, another tab replaying from
//! a cursor) finds the same path by three rules, read in order:
//!
//! - a `run-start` without `branch` follows the active leaf, and is the leaf;
//! - a `run-start` with `branch` follows its `branch.parent` (none at a
//!   first turn), and is the leaf;
//! - a `branch-switched` makes its `leaf` the leaf.
//!
//! The TypeScript client's `ActivePath` (`client/src/tree.ts`) is this
//! fold's twin; both fold the fixture logs in `tests/fixtures/branches/` to
//! the paths recorded there.

use crate::log::event::{Event, Payload};
use std::collections::HashMap;

/// The runs seen so far, each with the run its turn follows, and the leaf.
#[derive(Debug, Default)]
pub struct ActivePath {
    parent: HashMap<String, Option<String>>,
    leaf: Option<String>,
}

impl ActivePath {
    /// Folds one event; events of other kinds change nothing.
    pub fn apply(&mut self, ev: &Event) {
        match &ev.payload {
            Payload::RunStart(start) => {
                let follows = match &start.branch {
                    Some(point) => point.parent.clone(),
                    None => self.leaf.clone(),
                };
                // A run-start seen twice (a replay over a live read) keeps
                // the place it had.
                self.parent.entry(ev.run_id.clone()).or_insert(follows);
                self.leaf = Some(ev.run_id.clone());
            }
            Payload::BranchSwitched(switched) => self.leaf = Some(switched.leaf.clone()),
            _ => {}
        }
    }

    /// The active path, first turn first: the leaf and the runs it follows.
    pub fn path(&self) -> Vec<String> {
        let mut path = Vec::new();
        let mut at = self.leaf.clone();
        while let Some(run) = at {
            // A path is never longer than the runs seen (a log cannot hold
            // a cycle, but a fold does not trust its input).
            if path.len() > self.parent.len() {
                break;
            }
            at = self.parent.get(&run).cloned().flatten();
            path.push(run);
        }
        path.reverse();
        path
    }
}

/// The active path of `events`, folded in order.
pub fn active_path<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<String> {
    let mut p = ActivePath::default();
    for ev in events {
        p.apply(ev);
    }
    p.path()
}
