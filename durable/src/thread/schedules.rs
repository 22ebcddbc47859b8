//! A thread's schedules (`crate::schedule`): messages the thread sends as
//! its owner when they fire, on the thread's own alarm and its queue's
//! rules.
//!
//! Invariants enforced here:
//! - a firing and the schedule's next time are stored in one synchronous
//!   block with the message it sends (started, or queued behind the run
//!   that holds the thread): a restart between two firings loses none and
//!   doubles none (the alarm fires again at least once; a schedule already
//!   moved past `now` does not fire again);
//! - a firing is a send as the owner (their budget is checked as the turn
//!   starts, as for any queued message); a thread nobody owns fires nothing;
//! - a due schedule always moves to its next time, even when its firing
//!   could not be queued (a full queue drops that firing): an alarm never
//!   finds the same schedule due again at once.

use super::error::Error;
use super::{meta, Admitted, Sink, Thread};
use crate::log::turn::Turn;
use crate::schedule::{Schedule, MAX_PER_THREAD};
use crate::storage::store::Store;
use crate::wire::error::ApiError;
use serde_json::Value;

impl<S: Store, K: Sink> Thread<S, K> {
    /// The thread's schedules, soonest first.
    pub fn schedules(&self) -> &[Schedule] {
        &self.schedules
    }

    /// Adds a schedule from a request's body (`schedule::Schedule::new`).
    pub fn add_schedule(
        &mut self,
        _: &Admitted,
        body: &Value,
        max_message: usize,
        now: i64,
    ) -> Result<Schedule, Error> {
        if self.schedules.len() >= MAX_PER_THREAD {
            return Err(Error::Input(ApiError::too_many_schedules(MAX_PER_THREAD)));
        }
        let id = self.ids.id("sch");
        let schedule = Schedule::new(body, id, max_message, now).map_err(Error::Input)?;
        let mut all = self.schedules.clone();
        all.push(schedule.clone());
        self.store_schedules(all)?;
        Ok(schedule)
    }

    /// Removes schedule `id` (404 `schedule_not_found`).
    pub fn remove_schedule(&mut self, _: &Admitted, id: &str) -> Result<(), Error> {
        let mut all = self.schedules.clone();
        let before = all.len();
        all.retain(|s| s.schedule_id != id);
        if all.len() == before {
            return Err(Error::Input(ApiError::schedule_not_found()));
        }
        self.store_schedules(all)
    }

    /// When the next schedule fires (the alarm's).
    pub fn schedule_deadline(&self) -> Option<i64> {
        self.schedules.first().map(|s| s.next_at)
    }

    /// The alarm: each schedule due by `now` sends its message as the
    /// owner (started now, or queued), and moves to its next time (a
    /// one-time schedule goes).
    pub(super) fn fire_schedules(&mut self, now: i64) -> Result<(), Error> {
        if self.schedule_deadline().is_none_or(|at| at > now) {
            return Ok(());
        }
        let owner = self.conversation().owner()?;
        let mut all = self.schedules.clone();
        for s in all.iter_mut().filter(|s| s.next_at <= now) {
            if let Some(owner) = &owner {
                let turn = Turn { actor: Some(owner.clone()), sent_at: Some(now), ..Turn::default() };
                match self.enqueue(s.message.clone(), None, turn, None, now) {
                    Ok(_) => {}
                    // Storage failed: nothing is kept, the alarm tries again.
                    Err(e @ Error::Storage(_)) => return Err(e),
                    // A queue that cannot take it (full): this firing is
                    // dropped, and the schedule moves on, rather than fire
                    // again at once, for ever.
                    Err(_) => s.dropped += 1,
                }
            }
            if s.fired(now).is_none() {
                s.next_at = i64::MIN;
            }
        }
        all.retain(|s| s.next_at != i64::MIN);
        self.store_schedules(all)
    }

    /// Stores the schedules, soonest first; memory changes once storage
    /// took them.
    fn store_schedules(&mut self, mut all: Vec<Schedule>) -> Result<(), Error> {
        all.sort_by_key(|s| s.next_at);
        let text = (!all.is_empty()).then(|| serde_json::to_string(&all).expect("schedules serialise"));
        self.journal.store_mut().set_meta(meta::SCHEDULES_KEY, text.as_deref())?;
        self.schedules = all;
        Ok(())
    }
}

/// The schedules stored with a thread (none when none were made).
pub(super) fn load<S: Store>(store: &S) -> Result<Vec<Schedule>, Error> {
    let stored = store.meta(meta::SCHEDULES_KEY)?;
    Ok(stored.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default())
}
