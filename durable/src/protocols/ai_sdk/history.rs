//! The history as the `UIMessage[]` `useChat` starts from
//! (`GET /api/chat/:id/messages`): the fold of the same chunks the stream
//! sends ([`mapping::fold`](super::mapping::fold)), so a client's message
//! and the history's are the same message.

use super::mapping;
use crate::wire::error::ApiError;
use crate::storage::store::{RunState, Store};
use crate::thread::{Sink, Thread};
use serde_json::Value;

/// The thread's conversation, oldest first (a page of runs, newest page
/// first, as on the messages route). A running run's answer is left out:
/// its stream (`resumeStream()`) brings it whole; a run waiting for a
/// person is in, with its request to answer. Files are `file` parts with
/// their URL on `origin`.
pub fn messages<S: Store, K: Sink>(t: &Thread<S, K>, limit: usize, page: usize, origin: &str) -> Result<Value, ApiError> {
    let (runs, _) = t.conversation().page(limit, page)?;
    let mut out = Vec::with_capacity(runs.len() * 2);
    for run in &runs {
        out.push(mapping::user_message_with(&run.message_id, &run.message, &run.turn.attachments, origin, t.conversation().thread_id()));
        let running = run.state == RunState::Running;
        if running && !(t.runs().active_run().is_some_and(|a| a.run_id == run.run_id) && t.runs().is_suspended()) {
            continue;
        }
        let events = t.conversation().run_events(&run.run_id)?;
        out.push(mapping::fold(&run.run_id, &run.agent_id, &events).to_json());
    }
    Ok(Value::Array(out))
}
