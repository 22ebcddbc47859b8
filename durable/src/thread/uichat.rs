//! The AI SDK's routes on a thread (`docs/protocols/005-ai-sdk.md`): a
//! `useChat` send, its reconnect, the history as `UIMessage[]`. The thread
//! holds the history: of what the client sends, only its last message is
//! read ([`UiChat`]).
//!
//! Invariants, each enforced here:
//! - a user message id the thread has seen starts nothing: the send
//!   follows that message's run while it is active, else 409;
//! - a continuation decides only requests of the message it continues, each
//!   as the confirm route would (the same access rule), and its stream
//!   begins after the earliest of those requests, so the client, which holds
//!   the message up to them, gets the rest once;
//! - the history's assistant message of a run has the id its stream's
//!   `start` carries (the run id), and is the fold of the same chunks.

use super::service::{Answer, Given};
use super::{Follow, Sink, Thread};
use crate::access::{Caller, Grant};
use crate::effect::Effect;
use crate::error::ApiError;
use crate::ids;
use crate::protocols::ai_sdk::mapping as uistream;
use crate::reply::Reply;
use crate::request::{self, UiChat};
use crate::settings::Settings;
use crate::store::{RunState, Store};
use serde_json::{json, Value};

/// What a send follows: the run's UI stream, from a point of its log.
pub fn follow_body(run_id: &str, after: u64, continuing: bool) -> Value {
    json!({ "follow": { "runId": run_id, "after": after, "continue": continuing } })
}

/// A protocol's user message, by the client's id.
pub(super) enum Seen {
    /// Not seen: the run it will start.
    New(String),
    /// Its run is active: the send follows it.
    Active(String),
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The run of the client's user message `id` (`<thread>.u_<id>`, so
    /// finding it needs no scan). A message the thread has seen starts
    /// nothing: its run while active, else 409 `message_already_sent` (also
    /// while it waits in the queue). The AI SDK's and AG-UI's sends share
    /// it: one message is one run, whichever protocol sent it.
    pub(super) fn message_run(&self, thread: &str, id: &str) -> Result<Seen, ApiError> {
        let run_id = ids::scoped(thread, &format!("u_{id}"));
        if let Some(run) = self.store.run(&run_id).map_err(ApiError::storage)? {
            if self.active_run().is_some_and(|a| a.run_id == run.run_id) {
                return Ok(Seen::Active(run.run_id));
            }
            return Err(ApiError::message_already_sent(&run.run_id));
        }
        if self.queue.items.iter().any(|i| i.message_id == id) {
            return Err(ApiError::message_already_sent(&run_id));
        }
        Ok(Seen::New(run_id))
    }

    /// `POST /api/chat`: a new user message (sent with the client's id),
    /// a regenerate, or the continuation of an assistant message whose
    /// approval requests the person answered. Answers what the Worker
    /// follows ([`follow_body`]), or, for a queued message, a stream that
    /// says so.
    pub(super) fn ui_chat(
        &mut self,
        thread: &str,
        body: &Value,
        (grant, caller, origin): (Grant, &Caller, &str),
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let options = |extra: Value| {
            let mut send = extra;
            for k in ["mode", "model"] {
                if let Some(v) = body.get(k) {
                    send[k] = v.clone();
                }
            }
            send
        };
        let sent = match UiChat::parse(body, settings.limits.max_message_bytes)? {
            UiChat::Message { id, text } => {
                let run_id = match self.message_run(thread, &id)? {
                    Seen::New(run_id) => run_id,
                    Seen::Active(run_id) => return Ok(reply(follow_body(&run_id, 0, false))),
                };
                let client_tools = self.client_tools(body, settings)?;
                let send = options(json!({ "message": text }));
                self.send(
                    thread,
                    &send,
                    Given { ids: Some((id, run_id)), client_tools },
                    (grant, caller, origin),
                    settings,
                    now,
                    effects,
                )?
            }
            UiChat::Regenerate => {
                let send = options(json!({ "regenerate": true }));
                self.send(thread, &send, Given::default(), (grant, caller, origin), settings, now, effects)?
            }
            UiChat::Continue { message_id, approvals, outputs } => {
                return self.ui_continue(&message_id, &approvals, &outputs, caller, settings, now, effects);
            }
        };
        Ok(match sent {
            super::service::Sent::Run { run_id, .. } => reply(follow_body(&run_id, 0, false)),
            super::service::Sent::Queued(queued) => {
                let mut out = Vec::new();
                uistream::encode(&json!({ "type": "data-queued", "data": queued, "transient": true }), &mut out);
                out.extend_from_slice(uistream::DONE);
                let mut r = Reply::new(200).body(out);
                for (k, v) in uistream::HEADERS {
                    r.set(k, *v);
                }
                Answer::Reply(r)
            }
        })
    }

    /// Decides the answered requests of run `message_id` and follows the
    /// run from its earliest one.
    #[allow(clippy::too_many_arguments)]
    fn ui_continue(
        &mut self,
        message_id: &str,
        approvals: &[request::UiApproval],
        outputs: &[request::ToolOutput],
        caller: &Caller,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let run = self.store.run(message_id).map_err(ApiError::storage)?.ok_or_else(|| {
            ApiError::nothing_to_continue("the assistant message to continue is not a run of this thread")
        })?;
        let mut answers = Vec::new();
        for a in approvals {
            let Some(c) = self.confirmation(&a.id)?.filter(|c| c.run_id == run.run_id) else { continue };
            let mut decision = json!({ "approved": a.approved });
            if let Some(reason) = &a.reason {
                decision["userInput"] = reason.clone().into();
            }
            answers.push((c, decision));
        }
        // The client's own tools: its outcomes settle their requests.
        answers.extend(self.client_tool_answers(&run.run_id, outputs)?);
        if answers.is_empty() {
            return Err(ApiError::nothing_to_continue(
                "no answered approval request or client tool call belongs to this message",
            ));
        }
        self.decide_for(caller, &answers, settings, now, effects)?;
        let requests: Vec<&str> = answers.iter().map(|(c, _)| c.request_id.as_str()).collect();
        // The stream goes on after the earliest request the client answered.
        let records = self.store.run_records(&run.run_id).map_err(ApiError::storage)?;
        let after = records
            .iter()
            .filter(|r| r.data.contains("\"confirmation-request\"") && requests.iter().any(|q| r.data.contains(q)))
            .map(|r| r.seq)
            .min()
            .unwrap_or(self.last_seq);
        Ok(reply(follow_body(&run.run_id, after, true)))
    }

    /// `GET /api/chat/:id/stream`: the active run from its start, or 204
    /// (no active run, no thread, or not the caller's: nothing leaks).
    pub(super) fn ui_stream(&mut self, granted: bool, settings: &Settings) -> Result<Answer, ApiError> {
        let Some(run) = self.active_run().filter(|_| granted).map(|r| r.run_id.clone()) else {
            return Ok(Answer::Reply(Reply::new(204)));
        };
        self.make_room(settings.limits.max_subscribers)?;
        Ok(Answer::Follow { follow: Follow::run(&run), after: 0 })
    }

    /// `GET /api/chat/:id/runs/:runId/stream?after=`: the run from a point.
    pub(super) fn ui_run_stream(
        &mut self,
        run: &str,
        query: &[(String, String)],
        settings: &Settings,
    ) -> Result<Answer, ApiError> {
        let after = request::cursor(None, request::query_first(query, "after").as_deref())?;
        self.store.run(run).map_err(ApiError::storage)?.ok_or_else(ApiError::nothing_to_resume)?;
        self.make_room(settings.limits.max_subscribers)?;
        Ok(Answer::Follow { follow: Follow::run(run), after })
    }

    /// `GET /api/chat/:id/messages`: the thread's conversation as the
    /// `UIMessage[]` `useChat` starts from, oldest first (a page of runs,
    /// newest page first, as on the messages route). A running run's answer
    /// is left out: its stream (`resumeStream()`) brings it whole; a run
    /// waiting for a person is in, with its request to answer.
    pub fn ui_messages(&self, limit: usize, page: usize) -> Result<Value, ApiError> {
        let (runs, _) = self.store.runs_page(page.saturating_mul(limit), limit).map_err(ApiError::storage)?;
        let mut out = Vec::with_capacity(runs.len() * 2);
        for run in runs.iter().rev().filter(|r| !r.replaced) {
            out.push(uistream::user_message(&run.message_id, &run.message));
            let running = run.state == RunState::Running;
            if running && !(self.active_run().is_some_and(|a| a.run_id == run.run_id) && self.is_suspended()) {
                continue;
            }
            let events = self.run_events(&run.run_id)?;
            out.push(uistream::fold(&run.run_id, &run.agent_id, &events).to_json());
        }
        Ok(Value::Array(out))
    }
}

fn reply(body: Value) -> Answer {
    Answer::Reply(Reply::json(200, &body))
}
