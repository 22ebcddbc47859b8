//! AG-UI's routes on a thread (`docs/protocols/006-ag-ui.md`): a run
//! (`POST /ag-ui`), its re-attach, and the history as AG-UI messages.
//!
//! Invariants, each enforced here:
//! - a user message id the thread has seen starts nothing (the same rule,
//!   and the same run id, as the AI SDK's route: one message is one run
//!   whichever protocol sent it);
//! - `resume` decides only requests of one run, each as the confirm route
//!   would (the same access rule), and its stream shows that run after the
//!   last of them, under a new `RUN_STARTED`;
//! - the history is the fold of the same numbered events the streams send.

use super::service::{Answer, Given};
use super::uichat::Seen;
use super::{Follow, Sink, Thread};
use crate::access::{Caller, Grant};
use crate::effect::Effect;
use crate::error::ApiError;
use crate::event::Kind;
use crate::protocols::ag_ui::history::AguiMessages;
use crate::protocols::ag_ui::mapping::AguiMapper;
use crate::reply::Reply;
use crate::request::{AguiResume, AguiRun};
use crate::settings::Settings;
use crate::store::{RunState, Store};
use serde_json::{json, Value};

/// What an AG-UI run follows: the thread run's stream, after the requests
/// `resume` answered (none for a new run).
pub fn agui_follow(run_id: &str, resumed: &[String]) -> Value {
    json!({ "follow": { "runId": run_id, "resume": resumed } })
}

/// The confirm route's decision body for an AG-UI answer to a request of
/// `input_type`: `payload` is `{approved, reason?}` for an approval or a plan
/// review, `{answers}` for questions and text; `cancelled` declines.
pub fn agui_decision(input_type: &str, r: &AguiResume) -> Value {
    let payload = r.payload.clone().unwrap_or_else(|| json!({}));
    let mut d = match input_type {
        "text" | "questions" if r.resolved => json!({ "answers": payload["answers"] }),
        "text" | "questions" => json!({ "approved": false, "answers": [] }),
        _ => json!({ "approved": r.resolved && payload["approved"].as_bool() != Some(false) }),
    };
    if let Some(reason) = payload["reason"].as_str() {
        d["userInput"] = reason.into();
    }
    d
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// `POST /ag-ui`: a new user message, or the answers to a run's
    /// interrupts. Answers what the Worker follows ([`agui_follow`]).
    pub(super) fn agui_run(
        &mut self,
        thread: &str,
        body: &Value,
        (grant, caller, origin): (Grant, &Caller, &str),
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        match AguiRun::parse(body, settings.limits.max_message_bytes)? {
            AguiRun::Message { id, text } => {
                let run_id = match self.message_run(thread, &id)? {
                    Seen::New(run_id) => run_id,
                    Seen::Active(run_id) => return Ok(reply(agui_follow(&run_id, &[]))),
                };
                let client_tools = self.client_tools(body, settings)?;
                let send = json!({ "message": text });
                match self.send(
                    thread,
                    &send,
                    Given { ids: Some((id, run_id)), client_tools },
                    (grant, caller, origin),
                    settings,
                    now,
                    effects,
                )? {
                    super::service::Sent::Run { run_id, .. } => Ok(reply(agui_follow(&run_id, &[]))),
                    super::service::Sent::Queued(_) => unreachable!("an AG-UI send does not queue"),
                }
            }
            AguiRun::Resume(answers) => self.agui_resume(&answers, caller, settings, now, effects),
            AguiRun::ToolResults(outputs) => {
                // The run waiting on the client: the active one.
                let run = self
                    .active_run()
                    .map(|r| r.run_id.clone())
                    .ok_or_else(|| ApiError::nothing_to_continue("no run of this thread waits for a client tool"))?;
                let answers = self.client_tool_answers(&run, &outputs)?;
                if answers.is_empty() {
                    return Err(ApiError::nothing_to_continue("no tool result answers a call the run waits for"));
                }
                self.decide_for(caller, &answers, settings, now, effects)?;
                let resumed: Vec<String> = answers.into_iter().map(|(c, _)| c.request_id).collect();
                Ok(reply(agui_follow(&run, &resumed)))
            }
        }
    }

    fn agui_resume(
        &mut self,
        answers: &[AguiResume],
        caller: &Caller,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let mut run: Option<String> = None;
        let mut decisions = Vec::new();
        for a in answers {
            let c = self.confirmation(&a.interrupt_id)?.ok_or_else(ApiError::confirmation_not_found)?;
            match &run {
                Some(r) if *r != c.run_id => {
                    return Err(ApiError::invalid_decision("`resume` answers the interrupts of one run"))
                }
                _ => run = Some(c.run_id.clone()),
            }
            let decision = agui_decision(&c.input_type, a);
            decisions.push((c, decision));
        }
        self.decide_for(caller, &decisions, settings, now, effects)?;
        let resumed: Vec<String> = decisions.into_iter().map(|(c, _)| c.request_id).collect();
        let run = run.ok_or_else(ApiError::confirmation_not_found)?;
        Ok(reply(agui_follow(&run, &resumed)))
    }

    /// `GET /ag-ui/threads/:id/runs/:runId`: the run's stream, replayed from
    /// the start (the Worker drops what the cursor says was seen).
    pub(super) fn agui_stream(&mut self, run: &str, settings: &Settings) -> Result<Answer, ApiError> {
        self.store.run(run).map_err(ApiError::storage)?.ok_or_else(ApiError::nothing_to_resume)?;
        self.make_room(settings.limits.max_subscribers)?;
        Ok(Answer::Follow { follow: Follow::run(run), after: 0 })
    }

    /// `GET /ag-ui/threads/:id/messages`: the conversation as the messages an
    /// `HttpAgent` holds (a page of runs, oldest first). A running run's
    /// answer is left out: its stream brings it.
    pub fn agui_messages(&self, limit: usize, page: usize) -> Result<Value, ApiError> {
        let (runs, _) = self.store.runs_page(page.saturating_mul(limit), limit).map_err(ApiError::storage)?;
        let mut fold = AguiMessages::default();
        for run in runs.iter().rev().filter(|r| !r.replaced) {
            let running = run.state == RunState::Running;
            let waiting = self.active_run().is_some_and(|a| a.run_id == run.run_id) && self.is_suspended();
            if running && !waiting {
                fold.apply(&json!({ "type": "RUN_STARTED", "input": { "messages": [
                    { "id": run.message_id, "role": "user", "content": run.message }
                ] } }));
                continue;
            }
            let events = self.run_events(&run.run_id)?;
            // The client tool results the client sent, by call: the history
            // shows them under the client's message ids.
            let mut client_results = std::collections::HashMap::new();
            for ev in events.iter().filter(|e| matches!(e.kind, Kind::ToolResult | Kind::ToolError)) {
                let call = ev.payload["toolCallId"].as_str().unwrap_or_default();
                if let Some(c) = self.confirmation_for_call(call, Some(&run.run_id))? {
                    if let Some(m) = c.decision.as_ref().and_then(|d| d["messageId"].as_str()) {
                        client_results.insert(call.to_owned(), m.to_owned());
                    }
                }
            }
            let mut mapper =
                AguiMapper::new(&self.thread_id, &run.run_id, &run.agent_id).with_client_results(client_results);
            for ev in events {
                for (_, e) in mapper.map(&ev) {
                    fold.apply(&e);
                }
            }
        }
        Ok(Value::Array(fold.messages))
    }
}

fn reply(body: Value) -> Answer {
    Answer::Reply(Reply::json(200, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_answers_become_decisions() {
        let r = |resolved, payload: Value| AguiResume { interrupt_id: "q".into(), resolved, payload: Some(payload) };
        assert_eq!(agui_decision("approval", &r(true, json!({}))), json!({"approved": true}));
        assert_eq!(
            agui_decision("approval", &r(true, json!({"approved": false, "reason": "no"}))),
            json!({"approved": false, "userInput": "no"})
        );
        assert_eq!(agui_decision("approval", &r(false, json!({}))), json!({"approved": false}));
        assert_eq!(
            agui_decision("questions", &r(true, json!({"answers": [{"questionId": "q1"}]}))),
            json!({"answers": [{"questionId": "q1"}]})
        );
        assert_eq!(agui_decision("questions", &r(false, json!({}))), json!({"approved": false, "answers": []}));
    }
}
