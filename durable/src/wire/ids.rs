//! Identifiers: what a thread, run, message or request id may be, and the
//! scoped ids (`<threadId>.<local id>`) that let a route naming only a run,
//! a tool call or a confirmation find its thread with no lookup.
//!
//! Every module that checks or builds an id imports this one; it imports
//! nothing of the crate but the error type, so it sits at the bottom of the
//! import graph.

use crate::wire::error::ApiError;

/// The root agent id of every run a thread starts.
pub const ROOT_AGENT: &str = "orchestrator";

/// Longest thread or run id (and each half of a scoped id).
pub const MAX_ID: usize = 128;

/// Thread and run ids: 1 to [`MAX_ID`] of `A-Z a-z 0-9 _ -`. No `.`: the
/// dot separates a scoped id's thread from its local part.
pub fn id(raw: &str) -> Result<String, ApiError> {
    if is_id(raw) {
        Ok(raw.to_owned())
    } else {
        Err(ApiError::invalid_id(format!("ids are 1 to {MAX_ID} characters of A-Z, a-z, 0-9, `_` and `-`")))
    }
}

fn is_id(raw: &str) -> bool {
    !raw.is_empty() && raw.len() <= MAX_ID && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Run (and tool call, and queued message) ids the server makes carry their
/// thread: `<threadId>.<local id>`, so a route that names only a run finds
/// its thread. Plain ids are accepted too (runs of older threads, agents' own).
pub fn run_id(raw: &str) -> Result<String, ApiError> {
    match raw.split_once('.') {
        Some((thread, local)) if raw.len() <= 2 * MAX_ID + 1 => {
            id(thread)?;
            id(local)?;
            Ok(raw.to_owned())
        }
        Some(_) => Err(ApiError::invalid_id("run ids are `<threadId>.<id>`")),
        None => id(raw),
    }
}

/// The thread a scoped id (`<threadId>.<id>`) belongs to.
pub fn thread_of(scoped: &str) -> Option<&str> {
    let (thread, local) = scoped.split_once('.')?;
    (is_id(thread) && is_id(local)).then_some(thread)
}

/// The run of a client's user message `id` on `thread` (`<thread>.u_<id>`):
/// known from the id alone, so a message sent again finds its run.
pub fn client_message_run(thread: &str, id: &str) -> String {
    scoped(thread, &format!("u_{id}"))
}

/// `<threadId>.<local>` (just `local` when the thread is not known yet).
pub fn scoped(thread: &str, local: &str) -> String {
    if thread.is_empty() {
        local.to_owned()
    } else {
        format!("{thread}.{local}")
    }
}

/// Where a thread draws new ids and secrets: the platform's CSPRNG in the
/// Worker, a counter in tests.
pub trait Random {
    /// A new id with `prefix` (`run_…`, `msg_…`): unique, not secret.
    fn id(&self, prefix: &str) -> String;
    /// A bearer token (a run's publish token): secret, so with the entropy
    /// a credential needs.
    fn token(&self) -> String;
}

/// Ids and tokens for tests and for native runs without a platform CSPRNG:
/// `prefix-1`, `prefix-2`, ..., `token-3`.
#[derive(Debug, Default)]
pub struct Counter(std::cell::Cell<u64>);

impl Counter {
    fn next(&self, prefix: &str) -> String {
        self.0.set(self.0.get() + 1);
        format!("{prefix}-{}", self.0.get())
    }
}

impl Random for Counter {
    fn id(&self, prefix: &str) -> String {
        self.next(prefix)
    }

    fn token(&self) -> String {
        self.next("token")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_scoped_ids() {
        assert_eq!(id("t-1_A").unwrap(), "t-1_A");
        for bad in ["", "a.b", "a b", "ä", &"x".repeat(MAX_ID + 1)] {
            assert_eq!(id(bad).unwrap_err().code, "invalid_id", "{bad:?}");
        }
        assert_eq!(run_id("t.run_1").unwrap(), "t.run_1");
        assert_eq!(run_id("plain").unwrap(), "plain");
        assert!(run_id("a.b.c").is_err());
        assert_eq!(thread_of(&scoped("t-1", "cr_abc")), Some("t-1"));
        for bad in ["nodot", ".x", "t.", "t.a.b", "bad id.x"] {
            assert_eq!(thread_of(bad), None, "{bad}");
        }
        assert_eq!(scoped("", "x"), "x");
    }
}
