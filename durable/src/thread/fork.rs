//! Forking a conversation: a new thread whose history is this thread's path
//! up to a message, shared, not copied. The fork keeps where it came from
//! (its source thread, the run its shared history ends with, the source's
//! log position then) and the model's memory of that history; the turns
//! themselves stay in the source's log, below the position, where nothing
//! changes, and the fork reads them from the source when a history view
//! needs them ([`Answer::Consult`]: the object's shell asks the source's
//! object and serves the request again with its answer).
//!
//! Invariants:
//! - a fork is made whole or not at all: the source checks and offers, the
//!   new thread adopts the offer only while it holds nothing (no owner, no
//!   log: 409 `thread_exists`), in one block, owned by the caller;
//! - a fork's own turns follow its shared history: its first run's memory
//!   is the shared memory, and its history views show the shared turns
//!   first, then its own;
//! - what the source answers for a fork is its path up to the fork's run,
//!   and only the source's owner can have made the fork; a source deleted
//!   since shows the fork's own turns alone.

use super::conversation::{page_window, Shared, TurnRead};
use super::error::{Busy, Error};
use super::meta;
use super::serve::{Call, Consulted};
use super::{Admitted, Sink, Thread, ROOT_AGENT};
use crate::access::Caller;
use crate::log::event::payload::Title;
use crate::log::event::{Event, Payload};
use crate::storage::store::{Driver, RunRecord, RunState, Store, Turn};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::meta::ForkedFrom;

/// Which of the conversation's turns a route shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Page `page` of `limit` turns, newest page first.
    Page { limit: usize, page: usize },
    /// Turns `start..end`, oldest first.
    Range { start: usize, end: usize },
}

/// The shared turns a fork asks its source for: `start..end` of the
/// source's path to `run_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedRead {
    pub thread_id: String,
    pub run_id: String,
    pub start: usize,
    pub end: usize,
}

/// What the source hands the new thread: the adopt call's body (an
/// object's own call, never a client's).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkOffer {
    pub thread_id: String,
    pub from: ForkedFrom,
    /// The model's memory of the shared history (chat messages, newest
    /// kept within the memory budget), which the fork's runs start from.
    pub memory: Vec<Value>,
}

/// `POST .../fork`'s answer, made by the new thread.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    pub thread_id: String,
    pub forked_from: ForkedFrom,
}

/// A shared turn as the source answers it: the run's record and its events.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SharedTurn {
    run_id: String,
    message_id: String,
    message: String,
    agent_id: String,
    state: RunState,
    #[serde(default)]
    reason: Option<String>,
    created_at: i64,
    #[serde(default)]
    finished_at: Option<i64>,
    #[serde(default)]
    usage: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    turn: Turn,
    events: Vec<Event>,
}

impl SharedTurn {
    fn of(turn: TurnRead) -> SharedTurn {
        let r = turn.run;
        SharedTurn {
            run_id: r.run_id,
            message_id: r.message_id,
            message: r.message,
            agent_id: r.agent_id,
            state: r.state,
            reason: r.reason,
            created_at: r.created_at,
            finished_at: r.finished_at,
            usage: r.usage,
            model: r.model,
            turn: r.turn,
            events: turn.events,
        }
    }

    /// The turn as the fork's views read it: of the source's thread, with
    /// no sibling in the fork.
    fn read(self, source: &str) -> TurnRead {
        let run = RunRecord {
            run_id: self.run_id,
            message_id: self.message_id,
            message: self.message,
            agent_id: self.agent_id,
            state: self.state,
            reason: self.reason,
            token_hash: String::new(),
            created_at: self.created_at,
            finished_at: self.finished_at,
            driver: Driver::Builtin,
            usage: self.usage,
            model: self.model,
            replaced: false,
            turn: self.turn,
            parent: None,
        };
        TurnRead { run, events: self.events, branches: Default::default(), home: Some(source.to_owned()) }
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// `POST .../fork {messageId, threadId?}` on the source: the offer for
    /// a new thread (`thread_id`, else a new id) whose history is this
    /// thread's path through `message_id` (a user message: its turn; an
    /// answer: its run). 409 `run_active` while a run holds the thread,
    /// 404 `message_not_found`.
    pub fn fork_offer(
        &mut self,
        _: &Admitted,
        message_id: &str,
        thread_id: Option<String>,
        random: u64,
        recall: &super::conversation::Recall,
    ) -> Result<ForkOffer, Error> {
        self.runs.check_free(Busy::Branch)?;
        let run_id = self.conversation().answer_to(message_id)?.ok_or(Error::MessageNotFound)?;
        let generation = meta::generation(self.journal.store_mut(), || random)?;
        let conversation = self.conversation();
        let offset = crate::streams::offset::Offset::new(generation, conversation.last_seq()).to_string();
        let memory = conversation.memory_through(&run_id, recall)?.messages();
        let title = conversation.title()?.unwrap_or_default();
        let turns = conversation.turns_through_count(&run_id)?;
        let from = ForkedFrom {
            thread_id: conversation.thread_id().to_owned(),
            message_id: message_id.to_owned(),
            run_id,
            offset,
            title,
            turns,
        };
        let thread_id = thread_id.unwrap_or_else(|| self.ids.id("fork"));
        if thread_id == from.thread_id {
            return Err(Error::ThreadExists);
        }
        Ok(ForkOffer { thread_id, from, memory })
    }

    /// The new thread takes `offer`, while it holds nothing: it is then the
    /// caller's, its history the source's path, its title the source's (in
    /// its log, and in the caller's list of threads at once). 409
    /// `thread_exists` for a thread that has an owner, a log or a fork of
    /// its own already.
    pub fn adopt(&mut self, admitted: &Admitted, caller: &Caller, offer: ForkOffer, now: i64) -> Result<Forked, Error> {
        let c = self.conversation();
        if c.last_seq() > 0 || c.owner()?.is_some() || c.forked_from()?.is_some() {
            return Err(Error::ThreadExists);
        }
        let from = serde_json::to_string(&offer.from).expect("a fork's source serialises");
        let memory = serde_json::to_string(&offer.memory).expect("a memory serialises");
        let store = self.journal.store_mut();
        store.set_meta(meta::FORK_KEY, Some(&from))?;
        store.set_meta(meta::FORK_MEMORY_KEY, Some(&memory))?;
        self.take_ownership(admitted.grant(), caller)?;
        let title = Payload::ThreadTitleUpdated(Title { title: offer.from.title.clone() });
        if let Err(e) = self.commit(vec![Event::new(title, "thread", ROOT_AGENT, now)], None) {
            // Nothing of a failed adoption is kept: the thread holds nothing,
            // and the same fork may be made again.
            let store = self.journal.store_mut();
            for key in [meta::FORK_KEY, meta::FORK_MEMORY_KEY, meta::OWNER_KEY] {
                store.set_meta(key, None)?;
            }
            return Err(e);
        }
        if let Some(actor) = caller.id() {
            let thread_id = self.journal.thread_id().to_owned();
            let op = crate::directory::Op::Register { thread_id, title: offer.from.title.clone(), at: now };
            self.outbox.push(crate::effect::Effect::Directory { actor: actor.to_owned(), op });
        }
        Ok(Forked { thread_id: offer.thread_id, forked_from: offer.from })
    }

    /// The source's side of a fork's history read: turns `start..end` of
    /// its path to `run_id`, oldest first, with their events (an object's
    /// own call).
    pub fn shared_turns(&self, run_id: &str, start: usize, end: usize) -> Result<Value, Error> {
        let turns = self.conversation().turns_through(run_id, start, end)?;
        let shared: Vec<SharedTurn> = turns.into_iter().map(SharedTurn::of).collect();
        Ok(serde_json::to_value(shared).expect("shared turns serialise"))
    }

    /// Before a route that shows the conversation's turns (`window` of
    /// them), on a fork: the source to ask for the shared turns the window
    /// holds (`start..end` of its path to `run_id`; the shell asks, then
    /// serves the request again with the answer, [`Call::consulted`]), or
    /// `None` when there is nothing to ask: no fork, no shared turn in the
    /// window, or the answer is here. The window's shared turns are then
    /// held for this request.
    pub fn share(&mut self, call: &Call, window: Window) -> Result<Option<SharedRead>, Error> {
        let c = self.conversation();
        let Some(from) = c.forked_from()? else { return Ok(None) };
        let (start, end) = match window {
            Window::Page { limit, page } => page_window(from.turns + c.path_len()?, limit, page),
            Window::Range { start, end } => (start, end),
        };
        let end = end.min(from.turns);
        let read = SharedRead { thread_id: from.thread_id.clone(), run_id: from.run_id.clone(), start, end };
        let turns: Vec<SharedTurn> = match call.consulted {
            _ if start >= end => Vec::new(),
            None => return Ok(Some(read)),
            Some(Consulted { status: 200, body }) => {
                serde_json::from_slice(body).map_err(|e| Error::Unavailable(e.to_string()))?
            }
            // A source deleted since: the fork shows its own turns.
            Some(Consulted { status: 404, .. }) => {
                self.shared = Some(Shared::default());
                return Ok(None);
            }
            Some(Consulted { status, .. }) => {
                return Err(Error::Unavailable(format!("the fork's source answered {status}")))
            }
        };
        let turns = turns.into_iter().map(|t| t.read(&from.thread_id)).collect();
        self.shared = Some(Shared { at: start, total: from.turns, turns });
        Ok(None)
    }

    /// The request is served: the source's turns are not kept.
    pub fn unshare(&mut self) {
        self.shared = None;
    }
}
