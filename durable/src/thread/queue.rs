//! The messages waiting to run ([`Waiting`]: the queue, `log::queued::Queue`,
//! and an interrupting message) and the operations on them: queue,
//! interrupt, edit, move, remove, pause, resume, and regenerate, and
//! starting what waits. Each stores the new queue and announces it before
//! the queue in memory changes (`Thread::save_queue`).

use super::budgets::Budgets;
use super::error::Error;
use super::meta::QUEUE_KEY;
use super::{Admitted, Place, Sink, StartRun, Started, Thread, QUOTA_EXCEEDED, ROOT_AGENT};
use crate::log::event::{Event, FinishStatus, Payload};
use crate::log::queued::{Queue, QueueItem, QueuePatch};
use crate::storage::store::{RunRecord, Store, Turn};
use crate::wire::ids;

/// A person's change to the waiting messages.
#[derive(Clone, Debug)]
pub enum QueueEdit<'a> {
    /// Every waiting message leaves (the queue's pause stays as it is).
    Clear,
    /// One waiting message changes: its text, its files, its place (an
    /// edit and a move are patches).
    Patch { message_id: &'a str, patch: QueuePatch },
    /// One waiting message leaves; it will never run.
    Remove { message_id: &'a str },
    /// Pausing keeps every message; resuming clears why the queue paused,
    /// replaces a dead holder (`Clock::replace_dead_holder`), and starts
    /// the head when nothing runs (its sender's budget is checked again).
    Pause(bool),
}

/// The messages waiting to run: the stored queue, and a message that
/// interrupted the active run (it starts next, first, and is never stored:
/// the run it interrupts ends in the same block).
///
/// Invariant: the queue here is the stored one. It changes only after
/// storage took the new one ([`Thread::save_queue`], the handoff in
/// [`Thread::publish_events`]).
#[derive(Default)]
pub struct Waiting {
    queue: Queue,
    interrupting: Option<QueueItem>,
}

/// What follows a finished run ([`Waiting::handoff`]).
pub(super) struct Handoff {
    pub queue: Queue,
    pub item: Option<QueueItem>,
    pub interrupting: bool,
    /// The run's last event before its `run-finish`.
    pub event: Event,
}

impl Waiting {
    /// The queue as stored (an unreadable one is an empty queue).
    pub(super) fn load<S: Store>(store: &S) -> Result<Self, Error> {
        let queue = store.meta(QUEUE_KEY)?.map(|q| serde_json::from_str(&q).unwrap_or_default()).unwrap_or_default();
        Ok(Waiting { queue, interrupting: None })
    }

    pub(super) fn queue(&self) -> &Queue {
        &self.queue
    }

    /// What follows the end of run `run_id`: an interrupting message, else
    /// the queue's head (unless the queue is paused, or its sender's budget
    /// is spent, which pauses it); `None` when nothing waits.
    pub(super) fn handoff(&self, run_id: &str, budgets: &Budgets, now: i64) -> Option<Handoff> {
        let (queue, item, interrupting) = match self.interrupting.clone() {
            Some(item) => (self.queue.clone(), Some(item), true),
            None if self.queue.items.is_empty() => return None,
            None => {
                let (queue, item) = self.take_next(budgets, now);
                (queue, item, false)
            }
        };
        let started = item
            .as_ref()
            .map(|i| crate::log::queued::QueueStart { message_id: i.message_id.clone(), run_id: i.run_id.clone() });
        let update = crate::log::queued::QueueUpdate { queue: queue.clone(), started, dropped: Vec::new() };
        let event = Event::new(Payload::QueueUpdated(update), run_id, ROOT_AGENT, now);
        Some(Handoff { queue, item, interrupting, event })
    }

    /// The handoff took place (its queue stored, its run finished).
    pub(super) fn handed_off(&mut self, handoff: &Handoff) {
        self.queue = handoff.queue.clone();
        if handoff.interrupting {
            self.interrupting = None;
        }
    }

    /// The queue once its head is taken, and the head: none while the queue
    /// is paused, and none when the head's sender has spent their budget,
    /// which pauses the queue (`quota_exceeded`) until it is resumed.
    fn take_next(&self, budgets: &Budgets, now: i64) -> (Queue, Option<QueueItem>) {
        let mut queue = self.queue.clone();
        let Some(head) = queue.items.first().filter(|_| !queue.paused) else { return (queue, None) };
        if head.turn.actor.as_deref().is_some_and(|a| budgets.over(a, now)) {
            queue.paused = true;
            queue.paused_reason = Some(QUOTA_EXCEEDED.to_owned());
            queue.paused_at = Some(now);
            return (queue, None);
        }
        let item = queue.pop_next();
        (queue, item)
    }

    /// Stores `queue` as the thread's (the caller then holds it).
    pub(super) fn store<S: Store>(store: &mut S, queue: &Queue) -> Result<(), Error> {
        let doc = serde_json::to_string(queue).expect("the queue serialises");
        Ok(store.set_meta(QUEUE_KEY, Some(&doc))?)
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// `mode: "queue"`: starts the message at once when the thread is free
    /// (and nothing waits before it), else queues it. Returns the item, its
    /// position, and the run when it started.
    pub fn enqueue(
        &mut self,
        message: String,
        model: Option<String>,
        turn: Turn,
        given: Option<(String, String)>,
        now: i64,
    ) -> Result<(QueueItem, usize, Option<RunRecord>), Error> {
        let item = new_item(&*self.ids, self.journal.thread_id(), message, model, turn, given, now);
        if self.runs.holder().is_none() && self.waiting.queue.items.is_empty() && !self.waiting.queue.paused {
            let run = self.start_item(item.clone(), Place::Leaf, now)?;
            return Ok((item, 0, Some(run)));
        }
        let mut queue = self.waiting.queue.clone();
        let position = queue.push(item.clone()).map_err(Error::Input)?;
        self.save_queue(queue, Vec::new(), now)?;
        // A paused queue on an idle thread keeps it; otherwise it may start.
        self.start_next(now)?;
        Ok((item, position, None))
    }

    /// `mode: "interrupt"`: cancels the active run and runs this message next.
    /// Returns the item and the run it interrupted.
    pub fn interrupt(
        &mut self,
        message: String,
        model: Option<String>,
        turn: Turn,
        given: Option<(String, String)>,
        now: i64,
    ) -> Result<(QueueItem, Option<String>), Error> {
        let item = new_item(&*self.ids, self.journal.thread_id(), message, model, turn, given, now);
        let Some(active) = self.runs.holder().map(str::to_owned) else {
            self.start_item(item.clone(), Place::Leaf, now)?;
            return Ok((item, None));
        };
        self.waiting.interrupting = Some(item.clone());
        if let Err(e) = self.end_run(&active, FinishStatus::Cancelled, "interrupted", now) {
            self.waiting.interrupting = None;
            return Err(e);
        }
        Ok((item, Some(active)))
    }

    /// Runs waiting message `message_id` now (agora's "send this one now"):
    /// it leaves the queue, and the run holding the thread is cancelled for
    /// it exactly as an interrupting send's (it starts in the block that
    /// ends that run, paused queue or not); on an idle thread it starts at
    /// once. Returns the run it interrupted.
    pub fn queue_interrupt(
        &mut self,
        message_id: &str,
        settings: &crate::settings::Settings,
        now: i64,
        effects: &mut Vec<crate::effect::Effect>,
    ) -> Result<Option<String>, Error> {
        let mut queue = self.waiting.queue.clone();
        let item = queue.remove(message_id).map_err(Error::Input)?;
        self.save_queue(queue, Vec::new(), now)?;
        let Some(active) = self.runs.holder().map(str::to_owned) else {
            self.start_item(item, Place::Leaf, now)?;
            return Ok(None);
        };
        self.waiting.interrupting = Some(item);
        if let Err(e) = self.end_run(&active, FinishStatus::Cancelled, "interrupted", now) {
            self.waiting.interrupting = None;
            return Err(e);
        }
        effects.push(crate::effect::Effect::StopAgents);
        effects.extend(super::send::tell_agent(settings, crate::webhook::cancel(&active, "interrupted")));
        Ok(Some(active))
    }

    /// A person's change to the waiting messages (the queue routes), stored
    /// and announced as one. Returns whether it changed anything: `false`
    /// only for clearing a queue with nothing waiting.
    pub fn edit_queue(&mut self, _: &Admitted, edit: QueueEdit<'_>, now: i64) -> Result<bool, Error> {
        match edit {
            QueueEdit::Clear => {
                if self.waiting.queue.items.is_empty() {
                    return Ok(false);
                }
                let dropped = self.waiting.queue.items.iter().map(|i| i.run_id.clone()).collect();
                let queue = Queue { items: Vec::new(), ..self.waiting.queue.clone() };
                self.save_queue(queue, dropped, now)?;
            }
            QueueEdit::Patch { message_id, patch } => {
                let mut queue = self.waiting.queue.clone();
                queue.patch(message_id, patch, now).map_err(Error::Input)?;
                self.save_queue(queue, Vec::new(), now)?;
            }
            QueueEdit::Remove { message_id } => {
                let mut queue = self.waiting.queue.clone();
                let item = queue.remove(message_id).map_err(Error::Input)?;
                self.save_queue(queue, vec![item.run_id], now)?;
            }
            QueueEdit::Pause(paused) => {
                if !paused {
                    self.clock().replace_dead_holder(now)?;
                }
                let queue = Queue {
                    paused,
                    paused_reason: None,
                    paused_at: paused.then_some(now),
                    ..self.waiting.queue.clone()
                };
                self.save_queue(queue, Vec::new(), now)?;
                self.start_next(now)?;
            }
        }
        Ok(true)
    }

    /// `regenerate: true`: answers again, under a new run beside it, the
    /// user message `point` names ([`Thread::regenerate_point`]); the new
    /// answer is the active path's leaf, and the one it answers again stays
    /// in the tree ([`branch`](super::branch)).
    pub(super) fn regenerate(
        &mut self,
        model: Option<String>,
        turn: Turn,
        point: super::branch::Branching,
        now: i64,
    ) -> Result<RunRecord, Error> {
        // The same user message, answered again: it keeps its id.
        let run_id = crate::wire::ids::scoped(self.journal.thread_id(), &self.ids.id("run"));
        let item = new_item(
            &*self.ids,
            self.journal.thread_id(),
            point.run.message,
            model,
            turn,
            Some((point.run.message_id, run_id)),
            now,
        );
        self.start_item(item, point.place, now)
    }
}

/// Starting what waits: a queued item made, started and saved.
impl<S: Store, K: Sink> Thread<S, K> {
    /// Takes the run lock for `item`; the run waits in `started` for the
    /// service to launch it.
    pub(super) fn start_item(&mut self, item: QueueItem, place: Place, now: i64) -> Result<RunRecord, Error> {
        let token = self.ids.token();
        let run = self.start_run(
            StartRun {
                run_id: item.run_id,
                message_id: item.message_id,
                message: item.message,
                publish_token: token.clone(),
                driver: self.config.driver,
                model: item.model,
                // The turn records when it was queued, unless the send said
                // when it was sent.
                turn: Turn { sent_at: item.turn.sent_at.or(Some(item.queued_at)), ..item.turn },
                place,
            },
            now,
        )?;
        self.started.push(Started { run: run.clone(), publish_token: token, client_tools: Vec::new() });
        Ok(run)
    }

    /// Starts the next message when no run holds the thread: an interrupting
    /// one first, else the queue's head (unless paused, see [`Waiting::handoff`]).
    pub(super) fn start_next(&mut self, now: i64) -> Result<(), Error> {
        if self.runs.holder().is_some() {
            return Ok(());
        }
        if let Some(item) = self.waiting.interrupting.take() {
            self.start_item(item, Place::Leaf, now)?;
            return Ok(());
        }
        let (queue, next) = self.waiting.take_next(&self.budgets, now);
        if queue != self.waiting.queue {
            self.save_queue(queue, Vec::new(), now)?;
        }
        if let Some(item) = next {
            self.start_item(item, Place::Leaf, now)?;
        }
        Ok(())
    }

    /// Stores `queue` as the thread's queue and announces it (a durable
    /// `queue-updated` with the whole queue, so every tab sees the same
    /// snapshot). The queue in memory changes only once storage took it.
    /// A change that drops messages which will never run (removed, cleared)
    /// names their run ids in `dropped`, so a view that shows submissions
    /// settles each (Flue's `submission-settled {outcome: "aborted"}`).
    ///
    /// Invariant: the stored queue, one row and one event, stays under
    /// `max_queue_bytes` (413 `queue_too_large`, nothing changed).
    pub(super) fn save_queue(&mut self, queue: Queue, dropped: Vec<String>, now: i64) -> Result<(), Error> {
        let doc = serde_json::to_string(&queue).expect("the queue serialises");
        if doc.len() > self.config.max_queue_bytes
            && doc.len() > serde_json::to_string(&self.waiting.queue).map_or(0, |d| d.len())
        {
            return Err(Error::QueueTooLarge { size: doc.len(), limit: self.config.max_queue_bytes });
        }
        Waiting::store(self.journal.store_mut(), &queue)?;
        self.waiting.queue = queue;
        let run_id = self.runs.holder().unwrap_or("thread").to_owned();
        let update = crate::log::queued::QueueUpdate { queue: self.waiting.queue.clone(), started: None, dropped };
        let ev = Event::new(Payload::QueueUpdated(update), &run_id, ROOT_AGENT, now);
        self.commit(vec![ev], None)
    }
}

/// A new queued message (its id is also its run's, known up front, drawn
/// from `ids`); `given` names its message and run (a client's send keeps
/// the client's message id).
fn new_item(
    ids: &dyn ids::Random,
    thread_id: &str,
    message: String,
    model: Option<String>,
    turn: Turn,
    given: Option<(String, String)>,
    now: i64,
) -> QueueItem {
    let (message_id, run_id) = given.unwrap_or_else(|| {
        let id = ids::scoped(thread_id, &ids.id("msg"));
        (id.clone(), id)
    });
    QueueItem { message_id, run_id, message, queued_at: now, updated_at: None, model, turn }
}
