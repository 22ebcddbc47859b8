//! The events route (`GET /instance-ai/events/:threadId`): every durable
//! event with its seq as the SSE `id:`, live events without one, a `: ping`
//! comment when quiet (`docs/protocols/n8n-instance-ai-streaming-protocol.md`).

use crate::log::event::Kind;
use crate::feed::Framer;
use crate::wire::sse::{Frame, PING};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Default)]
pub struct Events;

/// A `thread::RunSnapshot` as it crosses to the relay: the tree and the
/// tasks pass through as they were serialised.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunSync {
    run_id: String,
    agent_tree: Value,
    suspended: bool,
    background_tasks: Value,
}

/// Instance AI's `run-sync`: one run, its group the run itself.
fn run_sync(state: RunSync) -> Value {
    let run = &state.run_id;
    json!({
        "runId": run,
        "messageGroupId": run,
        "runIds": [run],
        "agentTree": state.agent_tree,
        "status": if state.suspended { "suspended" } else { "active" },
        "backgroundTasks": state.background_tasks,
    })
}

/// Whether n8n's event union (`@n8n/api-types`) has `kind`. threadline's
/// own kinds it lacks are left off this route: its editor refuses each with
/// a console warning, and nothing here needs them (a step's usage is on the
/// run's message; a decision shows as the call's result). They stay in the
/// log and on the other protocols' routes. (`queue-updated` and
/// `branch-switched` stay: the queue and the branch routes are this
/// route's too, and the page follows them here.)
///
/// Every kind is named: a new kind of the log does not compile until this
/// protocol decides whether its clients get it.
fn n8n_has(kind: Kind) -> bool {
    match kind {
        Kind::StepStart | Kind::StepFinish | Kind::ConfirmationSettled => false,
        Kind::RunStart
        | Kind::RunFinish
        | Kind::TextDelta
        | Kind::ReasoningDelta
        | Kind::TextBlock
        | Kind::ReasoningBlock
        | Kind::ToolInputStart
        | Kind::ToolCall
        | Kind::ToolResult
        | Kind::ToolError
        | Kind::ToolInterrupted
        | Kind::AgentSpawned
        | Kind::AgentCompleted
        | Kind::ConfirmationRequest
        | Kind::TasksUpdate
        | Kind::Status
        | Kind::Error
        | Kind::ThreadTitleUpdated
        | Kind::FilesystemRequest
        | Kind::QueueUpdated
        | Kind::BranchSwitched
        | Kind::ContextCompacted
        | Kind::ContextCompactionFailed => true,
    }
}

/// Whether a stored event (canonical JSON, `type` first) is one of n8n's.
fn n8n_kind(data: &str) -> bool {
    let name = data.strip_prefix("{\"type\":\"").and_then(|rest| rest.split_once('"')).map(|(name, _)| name);
    name.and_then(Kind::parse).is_none_or(n8n_has)
}

impl Framer for Events {
    /// A frame is its record and seq, nothing else: live, every subscriber
    /// of the route gets the same bytes for a message.
    const PURE: bool = true;
    const MOVES: bool = true;

    fn durable(&mut self, seq: u64, data: &str, out: &mut Vec<u8>) {
        if n8n_kind(data) {
            Frame::data(data).id(seq).encode(out);
        }
    }

    fn live(&mut self, data: &str, out: &mut Vec<u8>) {
        if n8n_kind(data) {
            Frame::data(data).encode(out);
        }
    }

    /// `event: run-sync` (seed line 350), without an id: the browser's
    /// replay cursor never points at it.
    fn run_state(&mut self, data: &str, out: &mut Vec<u8>) {
        let Ok(state) = serde_json::from_str::<RunSync>(data) else { return };
        Frame::data(&run_sync(state).to_string()).event("run-sync").expect("a fixed name").encode(out);
    }

    fn keepalive(&mut self, _now: i64, _random: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(PING);
    }

    /// Live, a frame depends on nothing before it: the state is empty.
    fn save(&self) -> Option<String> {
        Some(String::new())
    }

    fn restore(&mut self, state: &str) -> bool {
        state.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feed::{socket, Feed, Relay};

    #[test]
    fn threadlines_own_kinds_stay_off_the_route() {
        let record = |kind: Kind, payload: &str| {
            format!(r#"{{"type":"{}","runId":"r","agentId":"a","ts":1,"payload":{payload}}}"#, kind.as_str())
        };
        for kind in [Kind::StepStart, Kind::StepFinish, Kind::ConfirmationSettled] {
            assert!(!n8n_kind(&record(kind, "{}")), "{}", kind.as_str());
        }
        for kind in [Kind::RunStart, Kind::TextDelta, Kind::QueueUpdated, Kind::ToolCall] {
            assert!(n8n_kind(&record(kind, r#"{"note":"step-start"}"#)), "{}", kind.as_str());
        }
        // A kind this release does not know (a newer one's) passes as before.
        assert!(n8n_kind(r#"{"type":"from-a-later-release","runId":"r"}"#));
    }

    fn message(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    /// What sharing frames between relays rests on: a live relay's answer
    /// to a message is the same whatever it saw before, and only a live
    /// relay offers to share.
    #[test]
    fn live_frames_depend_on_the_message_alone() {
        let hello = message(|o| {
            socket::hello(2, 1, 0, o);
            socket::durable(1, "{\"a\":1}", o);
            socket::durable(2, "{\"a\":2}", o);
            socket::page_end(2, o);
        });
        let next = message(|o| {
            socket::durable(3, "{\"a\":3}", o);
            socket::live("{\"t\":\"x\\ny\"}", o);
        });
        let mut seasoned = Relay::new(Events);
        assert_eq!(seasoned.shared_frames(), None, "not live before its hello");
        let first = Feed::on_message(&mut seasoned, &hello, 0, 1);
        assert!(first.page.is_none() && !first.done);
        assert_eq!(seasoned.shared_frames(), Some(std::any::type_name::<Events>()));
        for i in 0..3 {
            let _ = Feed::on_message(&mut seasoned, &next, i, i as u64);
        }
        let mut fresh = Relay::new(Events);
        let _ = Feed::on_message(&mut fresh, &message(|o| socket::hello(2, 1, 2, o)), 0, 9);
        let fresh = Feed::on_message(&mut fresh, &next, 50, 77);
        let again = Feed::on_message(&mut seasoned, &next, 99, 5);
        assert_eq!(again.out, fresh.out);
        assert!(again.page.is_none() && !again.done);
        assert_eq!(String::from_utf8(again.out).unwrap(), "id: 3\ndata: {\"a\":3}\n\ndata: {\"t\":\"x\\ny\"}\n\n");
    }
}
