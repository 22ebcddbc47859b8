//! What a thread object's instance knows of itself, for the debug stats
//! (`DEBUG_ROUTES`): a random id drawn when it was constructed, the events
//! in progress and handled, and with `DEBUG_WAKES` the events every
//! instance handled, counted in storage across evictions. A test or a
//! benchmark reads them to see that an idle thread holds no request and
//! that it slept.

use std::cell::Cell;
use threadline_durable::thread::Instance;
use worker::Storage;

/// Stored count of the events every instance handled (`DEBUG_WAKES`).
const HANDLED_KEY: &str = "debug:handled";

/// The instance's counts.
pub struct Counts {
    id: String,
    inflight: Cell<u32>,
    handled: Cell<u64>,
}

/// One event in progress on the object (a request, a socket event, an
/// alarm): counted while it runs.
pub struct Event<'a>(&'a Counts);

impl Drop for Event<'_> {
    fn drop(&mut self) {
        self.0.inflight.set(self.0.inflight.get() - 1);
    }
}

impl Counts {
    pub fn new() -> Counts {
        Counts { id: format!("{:x}", crate::ids::random_u64()), inflight: Cell::new(0), handled: Cell::new(0) }
    }

    /// Counts an event; with `DEBUG_WAKES` (`wakes`), in storage too (the
    /// input gate holds other events while it is written).
    pub async fn event(&self, storage: &Storage, wakes: bool) -> Event<'_> {
        self.inflight.set(self.inflight.get() + 1);
        self.handled.set(self.handled.get() + 1);
        if wakes {
            let n: u64 = storage.get(HANDLED_KEY).await.ok().flatten().unwrap_or(0);
            let _ = storage.put(HANDLED_KEY, n + 1).await;
        }
        Event(self)
    }

    /// The instance's facts, for the debug stats (the asking event excluded
    /// from those in progress); `tasks`: its timers and agent loops running.
    pub async fn facts(&self, storage: &Storage, wakes: bool, tasks: u32) -> Instance {
        let handled_ever = match wakes {
            true => storage.get(HANDLED_KEY).await.ok().flatten(),
            false => None,
        };
        Instance {
            id: self.id.clone(),
            inflight: self.inflight.get().saturating_sub(1),
            handled: self.handled.get(),
            handled_ever,
            tasks,
            database_bytes: Some(storage.sql().database_size() as u64),
        }
    }
}
