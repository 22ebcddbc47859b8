//! Why a thread operation did not happen, in the thread's own terms.
//!
//! The thread knows conflicts, missing things, refusals and bad input; it
//! knows no HTTP. Each protocol answers an [`Error`] through
//! `protocols::error` (the one `From<Error> for ApiError`), where every
//! variant gets its status and its stable code: a variant added here does
//! not compile until it is given one there.
//!
//! A failed operation has kept nothing: every operation checks before it
//! writes, and a write that fails ([`Error::Storage`]) rolls its block back.

use crate::storage::store::{ConfirmState, StoreError};
use crate::wire::error::ApiError;

#[derive(Clone, Debug)]
pub enum Error {
    /// The object's storage failed; nothing of the operation was kept.
    Storage(StoreError),
    /// The caller may not do this here. `access::decide` has already chosen
    /// how the route hides what the caller may not see (its own 404, or a
    /// 403 for who may see but not act), so the refusal is carried as the
    /// route answers it.
    Denied(ApiError),

    /// A run holds the thread's run lock.
    RunActive {
        run_id: String,
        why: Busy,
    },
    /// The run has finished: nothing more is stored into it.
    RunFinished {
        run_id: String,
    },
    /// A client's message id whose answer is over (send it with a new id).
    MessageAlreadySent {
        run_id: String,
    },
    /// A background task that has ended.
    TaskFinished,
    /// A confirmation with this request id exists.
    DuplicateRequest,
    /// The confirmation lapsed before a decision.
    ConfirmationExpired,
    /// The confirmation was settled already (approved, denied, cancelled).
    ConfirmationDecided(ConfirmState),
    /// The file is being removed; it may be sent again in a moment.
    FileBusy,

    RunNotFound,
    ConfirmationNotFound,
    FileNotFound,
    /// A run to resume that the thread never had.
    NothingToResume,
    /// Regenerate on a thread with no message to answer again.
    NothingToRegenerate,
    /// A fork's new thread holds something already (an owner, a log).
    ThreadExists,
    /// A message id (to edit, answer again or switch to) the thread's
    /// tree does not hold.
    MessageNotFound,
    /// An answer again to a user message: only an answer is regenerated.
    NotAnAnswer,
    /// An edit of an answer: only a user message is edited.
    NotAUserMessage,
    /// A compaction a person asked for is under way.
    CompactionActive,
    /// The model's window cannot hold the system prompt, the tools and the
    /// message with room for an answer (estimated tokens).
    ContextTooSmall {
        model: String,
        needed: u64,
        limit: u64,
    },

    /// Publishing without a run's token, or with another run's.
    PublishTokenMissing,
    PublishTokenWrong,
    /// The sender's budget for the period is spent (`QUOTA`).
    QuotaExceeded,
    /// The thread serves `max` streams at once already.
    TooManySubscribers {
        max: usize,
    },
    /// The queue, stored whole as one row, would pass `limit` bytes.
    QueueTooLarge {
        size: usize,
        limit: usize,
    },

    /// A published event that does not fit: `index` within its batch when
    /// it came in one.
    InvalidEvent {
        index: Option<usize>,
        why: String,
    },
    EventTooLarge {
        index: usize,
        size: usize,
        limit: usize,
    },
    InvalidDecision(String),
    InvalidFile(String),
    /// A file the picked model does not take (`input` is what it takes).
    UnsupportedAttachment {
        model: String,
        media_type: String,
        input: String,
    },
    InvalidClientTools(String),

    /// The deployment's configuration does not allow the operation.
    AgentNotConfigured,
    Misconfigured {
        setting: Setting,
        why: String,
    },
    /// A platform part the operation needed is missing.
    Unavailable(String),

    /// What the caller sent, refused where it is read (a message body, a
    /// file's bytes, an agent or model name, a queue edit): that reader's
    /// answer, kept as it is.
    Input(ApiError),
}

/// What the run lock was asked for when it was found held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// A new run (a send in `reject` mode, a run started by a publisher).
    Start,
    /// Regenerating an answer, which waits until the run settles.
    Regenerate,
    /// Editing a message, switching or forking a branch: the tree changes
    /// only while no run holds the thread.
    Branch,
    /// Compacting the conversation between runs.
    Compact,
}

/// The deployment settings an operation read and found broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// `AGENT_TOOLS` / the built-in agent's tools.
    Tools,
    /// `AGENTS`.
    Agents,
    /// `MODELS`.
    Models,
    /// `APPROVAL_POLICY`.
    ApprovalPolicy,
}

impl Error {
    /// An invalid published event, alone or not in a batch.
    pub fn invalid_event(why: impl Into<String>) -> Error {
        Error::InvalidEvent { index: None, why: why.into() }
    }

    /// The event at `index` of a batch is invalid.
    pub fn invalid_event_at(index: usize, why: impl std::fmt::Display) -> Error {
        Error::InvalidEvent { index: Some(index), why: why.to_string() }
    }

    pub fn run_active(run_id: &str, why: Busy) -> Error {
        Error::RunActive { run_id: run_id.to_owned(), why }
    }

    /// Whether the operation met a state it cannot change (a run that
    /// ended or holds the lock, a request settled already): expected in a
    /// race, never a fault to report.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Error::RunActive { .. }
                | Error::RunFinished { .. }
                | Error::MessageAlreadySent { .. }
                | Error::TaskFinished
                | Error::DuplicateRequest
                | Error::ConfirmationDecided(_)
                | Error::FileBusy
                | Error::ThreadExists
                | Error::CompactionActive
        )
    }
}

impl From<StoreError> for Error {
    fn from(err: StoreError) -> Error {
        Error::Storage(err)
    }
}
