//! Changing the conversation's tree: an edit of a user message, another
//! answer to any message, and a switch of the active path. Nothing stored
//! is rewritten: an edit or an answer again is a new run beside the turn it
//! leaves (its `run-start` names where it joins, [`BranchPoint`]), and a
//! switch stores the new leaf and says so in the log (`branch-switched`),
//! so every client on the thread follows without reloading.
//!
//! Invariant: the tree changes only while no run holds the thread (409
//! `run_active`, nothing stored). A request for a person is its run's, so an
//! edit while one waits is refused the same way: no confirmation is ever
//! left open on a branch the conversation left.

use super::error::{Busy, Error};
use super::tree::Target;
use super::{Admitted, Place, Sink, Thread, ROOT_AGENT};
use crate::log::event::payload::{BranchPoint, BranchSwitched};
use crate::log::event::{Event, Payload};
use crate::storage::store::{RunRecord, Store};

/// A turn to branch from, and where the new run joins (not a fork of the
/// thread: that is [`super::fork`]).
pub struct Branching {
    /// The run that carried the message edited or answered again.
    pub run: RunRecord,
    pub place: Place,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Where an edit of user message `message_id` joins: beside it, after
    /// the turn it followed. 404 `message_not_found` for an id the tree
    /// does not hold, 400 `not_a_user_message` for an answer's.
    pub(super) fn edit_point(&self, message_id: &str) -> Result<Branching, Error> {
        self.runs.check_free(Busy::Branch)?;
        let tree = self.conversation().tree()?;
        let run_id = match (tree.message(message_id), tree.answer(message_id)) {
            (Some(Target::Message(run) | Target::Answer(run)), _) => run.run_id.clone(),
            (None, Some(_)) => return Err(Error::NotAUserMessage),
            (None, None) => return Err(Error::MessageNotFound),
        };
        let run = self.conversation().known_run(&run_id)?;
        let point = BranchPoint { parent: run.parent.clone(), edit_of: Some(message_id.to_owned()), regenerates: None };
        Ok(Branching { run, place: Place::Branch(point) })
    }

    /// Where another answer to the message answer `answer` answered joins:
    /// beside it. No `answer` is the active path's last. 404
    /// `message_not_found` for an id the tree does not hold, 400
    /// `not_an_answer` for a user message's; a thread with no turn has
    /// nothing to answer again.
    pub(super) fn regenerate_point(&self, answer: Option<&str>) -> Result<Branching, Error> {
        self.runs.check_free(Busy::Regenerate)?;
        let tree = self.conversation().tree()?;
        let run_id = match answer {
            None => tree.leaf().ok_or(Error::NothingToRegenerate)?.to_owned(),
            Some(id) => match (tree.answer(id), tree.message(id)) {
                (Some(Target::Answer(run) | Target::Message(run)), _) => run.run_id.clone(),
                (None, Some(_)) => return Err(Error::NotAnAnswer),
                (None, None) => return Err(Error::MessageNotFound),
            },
        };
        let run = self.conversation().known_run(&run_id)?;
        let point = BranchPoint { parent: run.parent.clone(), edit_of: None, regenerates: Some(run_id) };
        Ok(Branching { run, place: Place::Branch(point) })
    }

    /// `POST .../branch {messageId}`: makes the active path the one through
    /// `message_id` (a user message or an answer), to its newest turn. No
    /// run starts. Announced as `branch-switched` with the new leaf; a
    /// switch to the path already active stores nothing and says nothing.
    /// Returns the leaf.
    pub fn switch_branch(&mut self, _: &Admitted, message_id: &str, now: i64) -> Result<String, Error> {
        self.runs.check_free(Busy::Branch)?;
        let tree = self.conversation().tree()?;
        let target = tree.find(message_id).ok_or(Error::MessageNotFound)?;
        let leaf = tree.leaf_of(target).ok_or(Error::MessageNotFound)?.to_owned();
        if tree.leaf() == Some(leaf.as_str()) {
            return Ok(leaf);
        }
        let switched = BranchSwitched { leaf: leaf.clone(), message_id: message_id.to_owned() };
        let ev = Event::new(Payload::BranchSwitched(switched), "thread", ROOT_AGENT, now);
        self.commit_at_leaf(&leaf, vec![ev], None)?;
        Ok(leaf)
    }
}
