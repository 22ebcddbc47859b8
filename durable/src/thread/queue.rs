//! The message queue's operations (the queue itself is `log::queued::Queue`):
//! queue, interrupt, edit, move, remove, pause, resume, and regenerate, and
//! starting what waits. Each stores the new queue and announces it before
//! the queue in memory changes (`Thread::save_queue`).

use super::error::{Busy, Error};
use super::{Admitted, Sink, StartRun, Started, Thread, ROOT_AGENT};
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
    /// replaces a dead holder (`Thread::replace_dead_holder`), and starts
    /// the head when nothing runs (its sender's budget is checked again).
    Pause(bool),
}

impl<S: Store, K: Sink> Thread<S, K> {
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

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
        let item = self.new_item(message, model, turn, given, now);
        if self.runs.holder().is_none() && self.queue.items.is_empty() && !self.queue.paused {
            let run = self.start_item(item.clone(), now)?;
            return Ok((item, 0, Some(run)));
        }
        let mut queue = self.queue.clone();
        let position = queue.push(item.clone()).map_err(Error::Input)?;
        self.save_queue(queue, now)?;
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
        let item = self.new_item(message, model, turn, given, now);
        let Some(active) = self.runs.holder().map(str::to_owned) else {
            self.start_item(item.clone(), now)?;
            return Ok((item, None));
        };
        self.interrupting = Some(item.clone());
        if let Err(e) = self.end_run(&active, FinishStatus::Cancelled, "interrupted", now) {
            self.interrupting = None;
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
        let mut queue = self.queue.clone();
        let item = queue.remove(message_id).map_err(Error::Input)?;
        self.save_queue(queue, now)?;
        let Some(active) = self.runs.holder().map(str::to_owned) else {
            self.start_item(item, now)?;
            return Ok(None);
        };
        self.interrupting = Some(item);
        if let Err(e) = self.end_run(&active, FinishStatus::Cancelled, "interrupted", now) {
            self.interrupting = None;
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
                if self.queue.items.is_empty() {
                    return Ok(false);
                }
                let dropped = self.queue.items.iter().map(|i| i.run_id.clone()).collect();
                let queue = Queue { items: Vec::new(), ..self.queue.clone() };
                self.save_queue_dropping(queue, dropped, now)?;
            }
            QueueEdit::Patch { message_id, patch } => {
                let mut queue = self.queue.clone();
                queue.patch(message_id, patch, now).map_err(Error::Input)?;
                self.save_queue(queue, now)?;
            }
            QueueEdit::Remove { message_id } => {
                let mut queue = self.queue.clone();
                let item = queue.remove(message_id).map_err(Error::Input)?;
                self.save_queue_dropping(queue, vec![item.run_id], now)?;
            }
            QueueEdit::Pause(paused) => {
                if !paused {
                    self.replace_dead_holder(now)?;
                }
                let queue =
                    Queue { paused, paused_reason: None, paused_at: paused.then_some(now), ..self.queue.clone() };
                self.save_queue(queue, now)?;
                self.start_next(now)?;
            }
        }
        Ok(true)
    }

    /// `regenerate: true`: answers the thread's last user message again under
    /// a new run; the answer it replaces no longer feeds the model.
    pub fn regenerate(&mut self, model: Option<String>, turn: Turn, now: i64) -> Result<RunRecord, Error> {
        self.runs.check_free(Busy::Regenerate)?;
        let (runs, _) = self.journal.store().runs_page(0, 1)?;
        let Some(mut last) = runs.into_iter().next() else {
            return Err(Error::NothingToRegenerate);
        };
        last.replaced = true;
        self.journal.store_mut().commit(&[], std::slice::from_ref(&last))?;
        // The same user message, answered again: it keeps its id.
        let run_id = crate::wire::ids::scoped(self.journal.thread_id(), &self.ids.id("run"));
        let item = self.new_item(last.message, model, turn, Some((last.message_id, run_id)), now);
        self.start_item(item, now)
    }
}

/// Starting what waits: a queued item made, started and saved.
impl<S: Store, K: Sink> Thread<S, K> {
    /// A new queued message (its id is also its run's, known up front);
    /// `given` names its message and run (a client's send keeps the
    /// client's message id).
    pub(super) fn new_item(
        &self,
        message: String,
        model: Option<String>,
        turn: Turn,
        given: Option<(String, String)>,
        now: i64,
    ) -> QueueItem {
        let (message_id, run_id) = given.unwrap_or_else(|| {
            let id = ids::scoped(self.journal.thread_id(), &self.ids.id("msg"));
            (id.clone(), id)
        });
        QueueItem { message_id, run_id, message, queued_at: now, updated_at: None, model, turn }
    }

    /// Takes the run lock for `item`; the run waits in `started` for the
    /// service to launch it.
    pub(super) fn start_item(&mut self, item: QueueItem, now: i64) -> Result<RunRecord, Error> {
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
            },
            now,
        )?;
        self.started.push(Started { run: run.clone(), publish_token: token, client_tools: Vec::new() });
        Ok(run)
    }

    /// Starts the next message when no run holds the thread: an interrupting
    /// one first, else the queue's head (unless paused, see [`Thread::take_next`]).
    pub(super) fn start_next(&mut self, now: i64) -> Result<(), Error> {
        if self.runs.holder().is_some() {
            return Ok(());
        }
        if let Some(item) = self.interrupting.take() {
            self.start_item(item, now)?;
            return Ok(());
        }
        let (queue, next) = self.take_next(now);
        if queue != self.queue {
            self.save_queue(queue, now)?;
        }
        if let Some(item) = next {
            self.start_item(item, now)?;
        }
        Ok(())
    }

    /// Stores `queue` as the thread's queue and announces it (a durable
    /// `queue-updated` with the whole queue, so every tab sees the same
    /// snapshot). The queue in memory changes only once storage took it.
    ///
    /// Invariant: the stored queue, one row and one event, stays under
    /// `max_queue_bytes` (413 `queue_too_large`, nothing changed).
    pub(super) fn save_queue(&mut self, queue: Queue, now: i64) -> Result<(), Error> {
        self.save_queue_dropping(queue, Vec::new(), now)
    }

    /// [`Thread::save_queue`] for a change that drops messages which will
    /// never run (removed, cleared): their run ids ride on the event as
    /// `dropped`, so a view that shows submissions settles each (Flue's
    /// `submission-settled {outcome: "aborted"}`).
    pub(super) fn save_queue_dropping(&mut self, queue: Queue, dropped: Vec<String>, now: i64) -> Result<(), Error> {
        let doc = serde_json::to_string(&queue).expect("the queue serialises");
        if doc.len() > self.config.max_queue_bytes
            && doc.len() > serde_json::to_string(&self.queue).map_or(0, |d| d.len())
        {
            return Err(Error::QueueTooLarge { size: doc.len(), limit: self.config.max_queue_bytes });
        }
        self.store_queue(&queue)?;
        self.queue = queue;
        let run_id = self.runs.holder().unwrap_or("thread").to_owned();
        let update = crate::log::queued::QueueUpdate { queue: self.queue.clone(), started: None, dropped };
        let ev = Event::new(Payload::QueueUpdated(update), &run_id, ROOT_AGENT, now);
        self.commit(vec![ev], None)
    }
}
