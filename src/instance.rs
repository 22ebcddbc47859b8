//! What a thread object's instance knows of itself, for the debug stats
//! (`DEBUG_ROUTES`): a random id drawn when it was constructed, the events
//! in progress and handled, and with `DEBUG_WAKES` the events every
//! instance handled, counted in storage across evictions. A test or a
//! benchmark reads them to see that an idle thread holds no request and
//! that it slept.

use crate::object::Inner;
use std::cell::Cell;
use threadline_durable::thread::Instance;

/// Stored count of the events every instance handled (`DEBUG_WAKES`).
const HANDLED_KEY: &str = "debug:handled";

/// The instance's counts.
pub struct Counts {
    id: String,
    inflight: Cell<u32>,
    handled: Cell<u64>,
}

impl Counts {
    pub fn new() -> Counts {
        Counts { id: format!("{:x}", crate::ids::random_u64()), inflight: Cell::new(0), handled: Cell::new(0) }
    }
}

/// One event in progress on the object (a request, a socket event, an
/// alarm): counted while it runs.
pub struct Event<'a>(&'a Inner);

impl Drop for Event<'_> {
    fn drop(&mut self) {
        let inflight = &self.0.counts.inflight;
        inflight.set(inflight.get() - 1);
    }
}

impl Inner {
    /// Counts an event for the debug stats; with `DEBUG_WAKES`, in storage
    /// too (the input gate holds other events while it is written).
    pub async fn event(&self) -> Event<'_> {
        let counts = &self.counts;
        counts.inflight.set(counts.inflight.get() + 1);
        counts.handled.set(counts.handled.get() + 1);
        if self.settings.debug_wakes {
            let n: u64 = self.storage.get(HANDLED_KEY).await.ok().flatten().unwrap_or(0);
            let _ = self.storage.put(HANDLED_KEY, n + 1).await;
        }
        Event(self)
    }

    /// The instance's facts, for the debug stats (the asking event excluded
    /// from those in progress).
    pub async fn instance(&self) -> Instance {
        let handled_ever = match self.settings.debug_wakes {
            true => self.storage.get(HANDLED_KEY).await.ok().flatten(),
            false => None,
        };
        let timer = u32::from(self.flush_timer.get().is_some());
        let counts = &self.counts;
        Instance {
            id: counts.id.clone(),
            inflight: counts.inflight.get().saturating_sub(1),
            handled: counts.handled.get(),
            handled_ever,
            tasks: timer + self.agents.borrow().len() as u32,
        }
    }
}
