//! The history as the `UIMessage[]` `useChat` starts from
//! (`GET /api/chat/:id/messages`): the fold of the same chunks the stream
//! sends ([`mapping::fold`](super::mapping::fold)), so a client's message
//! and the history's are the same message.

use super::mapping;
use crate::wire::error::ApiError;
use crate::storage::store::{RunState, Store};
use crate::thread::tree::Branch;
use crate::thread::{Sink, Thread};
use serde_json::Value;

/// The thread's conversation, oldest first (a page of runs, newest page
/// first, as on the messages route). A running run's answer is left out:
/// its stream (`resumeStream()`) brings it whole; a run waiting for a
/// person is in, with its request to answer. Files are `file` parts with
/// their URL on `origin`.
pub fn messages<S: Store, K: Sink>(t: &Thread<S, K>, limit: usize, page: usize, origin: &str) -> Result<Value, ApiError> {
    let conversation = t.conversation();
    let (turns, _) = conversation.turns(limit, page)?;
    let mut out = Vec::with_capacity(turns.len() * 2);
    for turn in &turns {
        let run = &turn.run;
        let home = turn.thread(conversation.thread_id());
        let user = mapping::user_message_with(&run.message_id, &run.message, &run.turn.attachments, origin, home);
        out.push(with_branch(user, turn.branches.message.as_ref()));
        let running = run.state == RunState::Running;
        if running && !(t.runs().active_run().is_some_and(|a| a.run_id == run.run_id) && t.runs().is_suspended()) {
            continue;
        }
        let answer = mapping::fold(&run.run_id, &run.agent_id, &turn.events).to_json();
        out.push(with_branch(answer, turn.branches.answer.as_ref()));
    }
    Ok(Value::Array(out))
}

/// A message with where it stands among its siblings in its `metadata`
/// (`metadata.branch: {index, count, ids}`, an extension: the client keeps
/// a message's metadata as it is); a message with no sibling is as it was.
fn with_branch(mut message: Value, branch: Option<&Branch>) -> Value {
    let Some(branch) = branch else { return message };
    if let Some(m) = message.as_object_mut() {
        let metadata = m.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("branch".to_owned(), serde_json::to_value(branch).expect("a branch serialises"));
        }
    }
    message
}
