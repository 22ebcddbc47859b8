//! Whether a relay's client is still reading. The stateless Worker learns
//! that a client left only when the runtime stops taking the bytes it
//! writes: a connection that closed is not always reported, and the
//! response's stream then simply stops draining. A relay whose backlog has
//! not moved for [`Backlog::stale_ms`], or has grown past
//! [`MAX_QUEUED`] writes, ends; its client (if it is still there) resumes
//! from its cursor, and the thread's object frees the subscriber's slot.

/// Most writes a client may leave unread before its stream is ended.
pub const MAX_QUEUED: usize = 1024;

/// What the relay does about its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientVerdict {
    Reading,
    /// Nothing drained for the stale time: the client is gone.
    Stalled,
    /// Too much unread: the client cannot keep up.
    TooFar,
}

/// A relay's unread writes, observed at each write and keep-alive tick.
#[derive(Debug)]
pub struct Backlog {
    /// Unread writes as of the last observation, plus the writes since.
    expected: usize,
    /// When the client last took something (or had nothing to take).
    progress_at: i64,
    stale_ms: i64,
}

impl Backlog {
    /// A relay that pings every `ping_ms`: a healthy client drains at least
    /// that often, so twice that and a second of slack is the stale time.
    pub fn new(now: i64, ping_ms: u64) -> Backlog {
        Backlog { expected: 0, progress_at: now, stale_ms: 2 * ping_ms as i64 + 1_000 }
    }

    pub fn stale_ms(&self) -> i64 {
        self.stale_ms
    }

    /// Observes `queued` unread writes at `now`.
    pub fn observe(&mut self, queued: usize, now: i64) -> ClientVerdict {
        if queued == 0 || queued < self.expected {
            self.progress_at = now;
        }
        self.expected = queued;
        if queued > MAX_QUEUED {
            ClientVerdict::TooFar
        } else if queued > 0 && now - self.progress_at > self.stale_ms {
            ClientVerdict::Stalled
        } else {
            ClientVerdict::Reading
        }
    }

    /// One more write queued.
    pub fn wrote(&mut self) {
        self.expected += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draining_client_is_reading_however_long_its_backlog() {
        let mut b = Backlog::new(0, 100);
        assert_eq!(b.stale_ms(), 1_200);
        // Always a few writes behind, but always taking some.
        for t in 0..100 {
            b.wrote();
            b.wrote();
            assert_eq!(b.observe(5, t * 1_000), ClientVerdict::Reading);
        }
    }

    #[test]
    fn a_backlog_that_does_not_move_goes_stale() {
        let mut b = Backlog::new(0, 100);
        b.wrote();
        assert_eq!(b.observe(1, 500), ClientVerdict::Reading);
        b.wrote();
        assert_eq!(b.observe(2, 1_000), ClientVerdict::Reading);
        assert_eq!(b.observe(2, 1_201), ClientVerdict::Stalled, "nothing taken since 0");
        // An empty backlog is never stale, however quiet.
        let mut idle = Backlog::new(0, 100);
        assert_eq!(idle.observe(0, 1_000_000), ClientVerdict::Reading);
    }

    #[test]
    fn too_much_unread_ends_at_once() {
        let mut b = Backlog::new(0, 100);
        assert_eq!(b.observe(MAX_QUEUED + 1, 1), ClientVerdict::TooFar);
    }
}
