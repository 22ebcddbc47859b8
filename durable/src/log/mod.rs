//! The conversation log and its folds: the event schema, typed
//! (`event`); deltas coalesced into the blocks that are stored
//! (`coalesce`); text segments read back the same live and replayed
//! (`segment`); the agent-tree fold (`reducer`) and the conversation's
//! active path as a client folds it (`branches`); and the stored shapes an
//! event carries: the message queue (`queued`) and what a message asks of
//! its turn (`turn`). Everything here is a value: no storage, no thread.

pub mod branches;
pub mod coalesce;
pub mod event;
pub mod queued;
pub mod reducer;
pub mod segment;
pub mod turn;
