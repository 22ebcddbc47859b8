//! Requests waiting for a person: recorded when their `confirmation-request`
//! is published, decided once, lapsed by the alarm, cancelled with their run.
//! The rules of a request's life are `confirm`'s; who may decide is
//! `access`'s; this file keeps the records and the run's suspension in step.

use super::error::Error;
use super::journal::{publish_in_run, Journal};
use super::run_lock::RunLock;
use super::serve::held;
use super::{Config, Sink, Thread};
use crate::access::{Access, Caller, Decider};
use crate::agent::Asking;
use crate::effect::Effect;
use crate::log::event::{self, Event, Kind, Payload};
use crate::settings::Policy;
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::storage::store::{ConfirmState, Confirmation, CLIENT_TOOL};
use crate::wire::error::ApiError;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;

/// A decision body as the confirm route takes it ([`check_decision`]), for
/// a protocol whose client says its decision in its own words, and for a
/// client tool's outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// An approval remembered for the thread's session, or for this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<ApprovalScope>,
    /// What the person said with it (a denial's reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_input: Option<String>,
    /// A client tool's result (any JSON, `null` included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// A client tool's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The client's message that carried a client tool's outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// How long an approval holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalScope {
    Once,
    Session,
}

impl DecisionBody {
    /// The body, as the confirm route reads it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a decision body serialises")
    }
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The thread's requests waiting for a person, and the approval policy
    /// that raises them, to read.
    pub fn requests(&self) -> Requests<'_, S> {
        Requests { store: self.journal.store(), policy: &self.config.approval_policy }
    }

    /// The thread's requests, to raise, decide, lapse and cancel.
    pub(super) fn decisions(&mut self) -> Decisions<'_, S, K> {
        Decisions { journal: &mut self.journal, runs: &mut self.runs, config: &self.config, outbox: &mut self.outbox }
    }

    /// Decides, for a protocol's client that answers several at once, the
    /// requests it answered, each with the confirm route's decision body,
    /// and pushes what the runs that go on need onto `effects`.
    ///
    /// Invariant: a batch is admitted whole or not at all. Requests whose
    /// time is up settle first (that is the alarm's work, done early, and
    /// stands whatever the batch); then every answer is admitted as the
    /// confirm route would admit it and checked against its request before
    /// any is recorded, so a refusal (who answers, or an answer that does
    /// not fit its request) stores nothing and tells no agent anything. An
    /// answer to a request already settled (in another tab) is skipped, its
    /// outcome being in the log.
    pub fn decide_batch(
        &mut self,
        caller: &Caller,
        answers: &[(Confirmation, Value)],
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), Error> {
        effects.extend(self.clock().settle_lapsed(settings, now)?);
        let mut checked = Vec::with_capacity(answers.len());
        for (given, body) in answers {
            // The request as stored now, not as the caller read it.
            let c = self.requests().get(&given.request_id)?.ok_or(Error::ConfirmationNotFound)?;
            self.admit(Access::Decide, ApiError::confirmation_not_found(), caller, Some(held(Some(&c))))?;
            if c.state == ConfirmState::Pending
                && !checked.iter().any(|(d, _): &(Confirmation, _)| d.request_id == c.request_id)
            {
                let decision = c.check(body)?;
                checked.push((c, decision));
            }
        }
        for (c, decision) in checked {
            let decided = self.decisions().record(c, decision, By { actor: caller.id(), via: "web" }, now)?;
            effects.extend(super::serve::after_settled(self, &decided, settings)?);
        }
        Ok(())
    }
}

/// The thread's requests, read: each by its id or its tool call, when the
/// next lapses, and whether a tool's call needs a person's approval.
pub struct Requests<'t, S> {
    store: &'t S,
    policy: &'t Policy,
}

impl<S: Store> Requests<'_, S> {
    pub fn get(&self, request_id: &str) -> Result<Option<Confirmation>, Error> {
        Ok(self.store.confirmation(request_id)?)
    }

    /// The confirmation of tool call `tool_call_id` (of `run_id`, if given):
    /// a route may name the call rather than the request.
    pub fn for_call(&self, tool_call_id: &str, run_id: Option<&str>) -> Result<Option<Confirmation>, Error> {
        let found = self.store.confirmation_by_call(tool_call_id)?;
        Ok(found.filter(|c| run_id.is_none_or(|r| r == c.run_id)))
    }

    /// When the next pending confirmation lapses.
    pub fn next_expiry(&self) -> Result<Option<i64>, Error> {
        Ok(self.store.pending_confirmations()?.iter().filter_map(|c| c.expires_at).min())
    }

    /// Whether calling `tool` first needs a person's approval: declared
    /// `approval: "required"` (`declared`) or required by `APPROVAL_POLICY`,
    /// and not already approved for the thread's session. When the session
    /// store cannot be read, it asks: never run unapproved.
    pub fn needs_approval(&self, tool: &str, declared: bool) -> bool {
        self.approval(tool, declared) == Asking::Ask
    }

    /// [`Requests::needs_approval`], telling a remembered approval apart.
    pub fn approval(&self, tool: &str, declared: bool) -> Asking {
        let required = self.policy.get(tool).and_then(|p| p.required).unwrap_or(declared);
        match (required, self.session_approved(tool).unwrap_or(false)) {
            (false, _) => Asking::Free,
            (true, true) => Asking::Remembered,
            (true, false) => Asking::Ask,
        }
    }

    /// The requests of run `run_id` that a client's tool `outputs` answer
    /// (client tools' only), with their decision bodies: the result, or the
    /// error, and the message that carried it.
    pub fn client_tool_answers(
        &self,
        run_id: &str,
        outputs: &[crate::input::ToolOutput],
    ) -> Result<Vec<(Confirmation, Value)>, Error> {
        let mut answers = Vec::new();
        for o in outputs {
            let Some(c) = self.for_call(&o.tool_call_id, Some(run_id))? else { continue };
            if c.input_type != crate::storage::store::CLIENT_TOOL {
                continue;
            }
            let (result, error) = match &o.outcome {
                Ok(result) => (Some(result.clone()), None),
                Err(error) => (None, Some(error.clone())),
            };
            let decision = DecisionBody { result, error, message_id: o.message_id.clone(), ..DecisionBody::default() };
            answers.push((c, decision.to_value()));
        }
        Ok(answers)
    }

    /// Whether `tool` was approved with scope `session` on this thread.
    pub fn session_approved(&self, tool: &str) -> Result<bool, Error> {
        Ok(self.store.session_approved(tool)?)
    }
}

/// The thread's requests, changed: each raised as its run publishes it,
/// decided once, lapsed, or cancelled with its run. Borrows the journal
/// (where a request and how it settled are announced), the run lock (which
/// a pending request suspends) and the outbox (what an operator is told).
pub struct Decisions<'t, S: Store, K: Sink> {
    journal: &'t mut Journal<S, K>,
    runs: &'t mut RunLock,
    config: &'t Config,
    outbox: &'t mut Vec<Effect>,
}

impl<S: Store, K: Sink> Decisions<'_, S, K> {
    /// Publishes a `confirmation-request` into `run_id` and records it as
    /// pending, with the approval policy's TTL and approver for its tool.
    /// `payload` is the request; its `requestId` is replaced by a
    /// thread-scoped one made from `local_id`. Returns the request id.
    pub fn request(
        &mut self,
        run_id: &str,
        agent_id: &str,
        payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<String, Error> {
        let (ev, record) = self.event(run_id, agent_id, payload, local_id, agent_request_id, now)?;
        let request_id = record.request_id.clone();
        publish_in_run(self.journal, self.runs, run_id, vec![ev], now)?;
        self.store_pending(vec![record])?;
        Ok(request_id)
    }

    /// The event and the pending record of a new request (409
    /// `duplicate_request` when the thread already holds its id).
    pub(super) fn event(
        &self,
        run_id: &str,
        agent_id: &str,
        mut payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<(Event, Confirmation), Error> {
        let request_id = crate::wire::ids::scoped(self.journal.thread_id(), local_id);
        payload["requestId"] = request_id.clone().into();
        let mut request: event::payload::ConfirmationRequest =
            event::accept(payload).map_err(|e| Error::invalid_event(e.0))?;
        if self.store().confirmation(&request_id)?.is_some() {
            return Err(Error::DuplicateRequest);
        }
        let record = Confirmation::pending(
            request_id,
            run_id,
            agent_id,
            &request,
            &self.config.approval_policy,
            agent_request_id,
            now,
        );
        // The request says who decides it and until when, as stored.
        request.approver = Some(record.approver.clone().unwrap_or_else(|| REQUESTER.to_owned()));
        if let Some(at) = record.expires_at {
            request.expires_at = Some(at);
        }
        Ok((Event::new(Payload::ConfirmationRequest(Box::new(request)), run_id, agent_id, now), record))
    }

    /// Stores new pending requests; each suspends its run until settled.
    pub(super) fn store_pending(&mut self, records: Vec<Confirmation>) -> Result<(), Error> {
        for record in records {
            self.journal.store_mut().put_confirmation(&record)?;
            self.runs.suspend(&record.run_id);
        }
        Ok(())
    }

    /// Settles `run_id`'s pending requests as cancelled (its run is ending):
    /// no decision applies any more.
    pub(super) fn cancel_of(&mut self, run_id: &str) -> Result<(), Error> {
        for mut c in self.store().pending_confirmations()? {
            if c.run_id == run_id {
                c.state = ConfirmState::Cancelled;
                self.journal.store_mut().put_confirmation(&c)?;
            }
        }
        Ok(())
    }

    /// Applies a decision to `request_id` (the caller was admitted by
    /// `access::decide`).
    ///
    /// 404 for a request this thread does not hold, 410 `confirmation_expired`
    /// once it lapsed, 409 `confirmation_decided` once decided (or settled by
    /// a cancel), 400 for a body that does not fit its input type. A
    /// `session` approval approves later calls of the same tool in this
    /// thread.
    pub fn decide(&mut self, request_id: &str, body: &Value, by: By, now: i64) -> Result<Confirmation, Error> {
        let (c, decision) = self.check(request_id, body, now)?;
        self.record(c, decision, by, now)
    }

    /// Checks a decision on `request_id` without recording it: the request
    /// as it stands (a lapsed one is settled as expired first) and the
    /// decision as it would be recorded, or the refusal `decide` answers.
    fn check(&mut self, request_id: &str, body: &Value, now: i64) -> Result<(Confirmation, Value), Error> {
        let mut c = self.store().confirmation(request_id)?.ok_or(Error::ConfirmationNotFound)?;
        if c.lapsed(now) {
            self.expire(&mut c)?;
        }
        let decision = c.check(body)?;
        Ok((c, decision))
    }

    /// Records a checked decision: the request settles, and its run goes
    /// on once nothing else of it is pending.
    ///
    /// Who decided and through which surface are stored on the request
    /// (`decidedBy`, `decidedVia`), and its run's log says how the request
    /// settled (`confirmation-settled`).
    pub(super) fn record(&mut self, c: Confirmation, decision: Value, by: By, now: i64) -> Result<Confirmation, Error> {
        let mut decided = c;
        decided.decided_by = by.actor.map(str::to_owned);
        decided.decided_via = Some(by.via.to_owned());
        let session = decided.apply(decision);
        self.journal.store_mut().put_confirmation(&decided)?;
        if let Some(tool) = session {
            self.journal.store_mut().approve_for_session(&tool)?;
        }
        self.runs.settled(&decided.run_id, now);
        if let Some(told) = super::telemetry::decision_settled(
            self.journal.thread_id(),
            self.config.tracing,
            self.runs.active_run(),
            &decided,
            now,
        ) {
            self.outbox.push(told);
        }
        self.announce_settled(&decided, now)?;
        Ok(decided)
    }

    fn expire(&mut self, c: &mut Confirmation) -> Result<(), Error> {
        let mut lapsed = c.clone();
        lapsed.state = ConfirmState::Expired;
        self.journal.store_mut().put_confirmation(&lapsed)?;
        *c = lapsed;
        let now = c.expires_at.unwrap_or_default();
        self.runs.settled(&c.run_id, now);
        if let Some(told) = super::telemetry::decision_settled(
            self.journal.thread_id(),
            self.config.tracing,
            self.runs.active_run(),
            c,
            now,
        ) {
            self.outbox.push(told);
        }
        self.announce_settled(c, now)
    }

    /// `confirmation-settled` into the request's run, while it runs: how it
    /// settled, who decided, through which surface, remembered or why not.
    fn announce_settled(&mut self, c: &Confirmation, now: i64) -> Result<(), Error> {
        if !self.runs.holds(&c.run_id) {
            return Ok(());
        }
        let mut p = serde_json::json!({
            "requestId": c.request_id,
            "toolCallId": c.tool_call_id,
            "toolName": c.tool_name,
            "status": c.state.as_str(),
        });
        if let Value::Object(fields) = &mut p {
            fields.extend(c.settlement());
        }
        let ev = Event::built(Kind::ConfirmationSettled, &c.run_id, &c.agent_id, now, p);
        publish_in_run(self.journal, self.runs, &c.run_id, vec![ev], now)
    }

    /// Settles every pending confirmation whose time is up; returns them.
    pub fn expire_due(&mut self, now: i64) -> Result<Vec<Confirmation>, Error> {
        let mut out = Vec::new();
        for mut c in self.store().pending_confirmations()? {
            if c.lapsed(now) {
                self.expire(&mut c)?;
                out.push(c);
            }
        }
        Ok(out)
    }

    fn store(&self) -> &S {
        self.journal.store()
    }
}

/// Who may decide a request the policy gives no role: the person chatting.
pub const REQUESTER: &str = "requester";

/// Who decided, and through which surface (agora's `via`, `web` when not said).
#[derive(Clone, Copy, Debug)]
pub struct By<'a> {
    pub actor: Option<&'a str>,
    pub via: &'a str,
}

impl Confirmation {
    /// A new pending request for a canonical `confirmation-request`
    /// `payload`, with the TTL and approver the policy sets for its tool.
    pub fn pending(
        request_id: String,
        run_id: &str,
        agent_id: &str,
        request: &event::payload::ConfirmationRequest,
        policy: &Policy,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Confirmation {
        let rule = policy.get(&request.tool_name);
        let input_type = request.input_type.as_ref().map_or("approval", |t| t.as_str()).to_owned();
        // Only approvals go to a role: what a client tool returned, and the
        // owner's answers, are the owner's to give.
        let approval = matches!(input_type.as_str(), "approval" | "plan-review");
        let approver = if approval { rule.and_then(|p| p.approver.clone()) } else { None };
        // The policy's global TTL is for approvals; a question or a client
        // tool lapses only when its own rule says.
        let ttl = if approval { policy.ttl_for(&request.tool_name) } else { rule.and_then(|p| p.ttl_ms) };
        Confirmation {
            request_id,
            run_id: run_id.to_owned(),
            agent_id: agent_id.to_owned(),
            tool_call_id: request.tool_call_id.clone(),
            tool_name: request.tool_name.clone(),
            input_type,
            state: ConfirmState::Pending,
            created_at: now,
            expires_at: ttl.map(|ttl| now + ttl),
            approver,
            decision: None,
            agent_request_id,
            decided_by: None,
            decided_via: None,
        }
    }

    /// Who may decide it. A client tool's result and an answer to a
    /// question are the thread owner's whatever the record names (a record
    /// stored before this rule may carry a policy's role); an approval or a
    /// plan review goes to the role its policy named, else to the owner.
    pub fn decider(&self) -> Decider<'_> {
        match (self.input_type.as_str(), self.approver.as_deref()) {
            (CLIENT_TOOL | "text" | "questions", _) | (_, None) => Decider::Owner,
            (_, Some(role)) => Decider::Role(role),
        }
    }

    /// How it settled, as the log and agora's history say it: `decidedBy`,
    /// `decidedVia`, `remember` (a session approval), and the `reason` of a
    /// denial that gave one.
    pub fn settlement(&self) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(by) = &self.decided_by {
            out.insert("decidedBy".into(), by.clone().into());
        }
        if let Some(via) = &self.decided_via {
            out.insert("decidedVia".into(), via.clone().into());
        }
        let d = self.decision.as_ref();
        if d.is_some_and(|d| d["scope"] == "session") {
            out.insert("remember".into(), true.into());
        }
        let reason = d.and_then(|d| d["userInput"].as_str()).filter(|r| !r.is_empty());
        if let Some(r) = reason.filter(|_| self.state == ConfirmState::Denied) {
            out.insert("reason".into(), r.into());
        }
        out
    }

    /// The client's message that carried a client tool's outcome
    /// ([`DecisionBody::message_id`]), once decided.
    pub fn client_message_id(&self) -> Option<&str> {
        self.decision.as_ref()?.get("messageId")?.as_str()
    }

    /// Still pending, but its time is up: it settles as expired.
    pub fn lapsed(&self, now: i64) -> bool {
        self.state == ConfirmState::Pending && self.expires_at.is_some_and(|t| t <= now)
    }

    /// Checks a decision `body` against this request: 410
    /// `confirmation_expired` once it lapsed, 409 `confirmation_decided`
    /// once settled, 400 `invalid_decision` for a body that does not fit its
    /// input type. Returns the decision as it is recorded.
    pub fn check(&self, body: &Value) -> Result<Value, Error> {
        match self.state {
            ConfirmState::Pending => {}
            ConfirmState::Expired => return Err(Error::ConfirmationExpired),
            other => return Err(Error::ConfirmationDecided(other)),
        }
        check_decision(&self.input_type, body)
    }

    /// Records a checked decision. Returns the tool approved for the rest of
    /// the thread, when the decision says `scope: "session"`.
    pub fn apply(&mut self, decision: Value) -> Option<String> {
        let approved = decision["approved"].as_bool() == Some(true);
        self.state = if approved { ConfirmState::Approved } else { ConfirmState::Denied };
        let session = (approved && decision["scope"] == "session").then(|| self.tool_name.clone());
        self.decision = Some(decision);
        session
    }

    /// What the external agent's webhook is told once this request settles.
    pub fn webhook_signal(&self) -> Value {
        let mut decision = self.decision.clone().unwrap_or_else(|| serde_json::json!({ "approved": false }));
        decision["state"] = self.state.as_str().into();
        serde_json::json!({
            "type": "confirmation",
            "runId": self.run_id,
            "requestId": self.agent_request_id.clone().unwrap_or_else(|| self.request_id.clone()),
            "toolCallId": self.tool_call_id,
            "decision": decision,
        })
    }
}

/// A decision body checked against the request's input type.
///
/// - `approval`: `{approved: bool, userInput?: string, scope?: "once"|"session"}`
/// - `plan-review`: `{approved: bool, userInput?: string}`
/// - `client-tool`: `{result}` (any JSON) or `{error}` (a string): what the client's run of it gave
/// - `text`, `questions`: `{answers: [{questionId, selectedOptions[], customText?, skipped?}]}`
///   (`approved` optional, default true)
pub fn check_decision(input_type: &str, body: &Value) -> Result<Value, Error> {
    let bad = |m: &str| Error::InvalidDecision(m.to_owned());
    let Some(obj) = body.as_object() else { return Err(bad("the body must be a JSON object")) };
    let mut out = Map::new();
    let approved = match obj.get("approved") {
        Some(Value::Bool(b)) => Some(*b),
        None => None,
        Some(_) => return Err(bad("`approved` must be a boolean")),
    };
    match obj.get("userInput") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= 8_192 => {
            out.insert("userInput".into(), s.clone().into());
        }
        Some(_) => return Err(bad("`userInput` must be a string of at most 8 KiB")),
    }
    match obj.get("scope") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "once" || s == "session" => {
            if input_type != "approval" {
                return Err(bad("`scope` applies to approvals only"));
            }
            out.insert("scope".into(), s.clone().into());
        }
        Some(_) => return Err(bad("`scope` must be \"once\" or \"session\"")),
    }
    match input_type {
        // The client ran the tool: its result (any JSON), or its error.
        CLIENT_TOOL => {
            match (obj.get("result"), obj.get("error")) {
                (_, Some(Value::String(e))) => {
                    out.insert("error".into(), e.clone().into());
                }
                (Some(r), None | Some(Value::Null)) => {
                    out.insert("result".into(), r.clone());
                }
                _ if approved == Some(false) => {}
                _ => return Err(bad("a client tool's outcome is `{result}` or `{error}` (a string)")),
            }
            if let Some(Value::String(m)) = obj.get("messageId") {
                out.insert("messageId".into(), m.clone().into());
            }
            out.insert("approved".into(), approved.unwrap_or(true).into());
        }
        "text" | "questions" => {
            let Some(Value::Array(answers)) = obj.get("answers") else {
                return Err(bad("`answers` (an array) is required for this request"));
            };
            let mut clean = Vec::with_capacity(answers.len());
            for a in answers {
                let qid = a.get("questionId").and_then(Value::as_str);
                let opts = a.get("selectedOptions").map(|v| v.as_array().map(|x| x.iter().all(Value::is_string)));
                let custom = a.get("customText");
                let skipped = a.get("skipped");
                let ok = qid.is_some()
                    && matches!(opts, None | Some(Some(true)))
                    && custom.is_none_or(|c| c.is_string() || c.is_null())
                    && skipped.is_none_or(|s| s.is_boolean() || s.is_null());
                if !ok {
                    return Err(bad("each answer is {questionId, selectedOptions[], customText?, skipped?}"));
                }
                let mut entry = Map::new();
                entry.insert("questionId".into(), qid.unwrap_or_default().into());
                entry.insert(
                    "selectedOptions".into(),
                    a.get("selectedOptions").cloned().unwrap_or(Value::Array(vec![])),
                );
                if let Some(Value::String(t)) = custom {
                    entry.insert("customText".into(), t.clone().into());
                }
                if let Some(Value::Bool(s)) = skipped {
                    entry.insert("skipped".into(), (*s).into());
                }
                clean.push(Value::Object(entry));
            }
            out.insert("approved".into(), approved.unwrap_or(true).into());
            out.insert("answers".into(), Value::Array(clean));
        }
        _ => {
            let Some(a) = approved else { return Err(bad("`approved` (a boolean) is required")) };
            out.insert("approved".into(), a.into());
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_by_input_type() {
        assert_eq!(
            check_decision("approval", &json!({"approved":true,"scope":"session","extra":1})).unwrap(),
            json!({"scope":"session","approved":true})
        );
        assert_eq!(check_decision("approval", &json!({"approved":false,"userInput":"no"})).unwrap()["userInput"], "no");
        assert!(check_decision("approval", &json!({})).is_err());
        assert!(check_decision("approval", &json!({"approved":"yes"})).is_err());
        assert!(check_decision("approval", &json!({"approved":true,"scope":"forever"})).is_err());
        assert!(check_decision("plan-review", &json!({"approved":true,"scope":"session"})).is_err());
        let q = check_decision("questions", &json!({"answers":[{"questionId":"q1","selectedOptions":["a"]}]})).unwrap();
        assert_eq!(q["approved"], true);
        assert_eq!(q["answers"][0]["selectedOptions"], json!(["a"]));
        assert!(check_decision("questions", &json!({"answers":[{"selectedOptions":[]}]})).is_err());
        assert!(check_decision("text", &json!({"approved":true})).is_err());
        assert!(check_decision("text", &json!([])).is_err());
    }
}

#[cfg(test)]
mod decision_tests {
    use super::*;
    use crate::storage::store::{MemoryStore, RunRecord};
    use crate::thread::Discard;
    use serde_json::json;

    struct Parts {
        journal: Journal<MemoryStore, Discard>,
        runs: RunLock,
        config: Config,
        outbox: Vec<Effect>,
    }

    impl Parts {
        fn new(policy: &str) -> Parts {
            let mut journal = Journal::open(MemoryStore::default(), 0).unwrap();
            journal.set_thread_id("t1");
            let mut runs = RunLock::default();
            runs.take(RunRecord::running("r1"), 0).unwrap();
            let config = Config { approval_policy: Policy::parse(Some(policy)).unwrap(), ..Config::default() };
            Parts { journal, runs, config, outbox: Vec::new() }
        }

        fn decisions(&mut self) -> Decisions<'_, MemoryStore, Discard> {
            Decisions {
                journal: &mut self.journal,
                runs: &mut self.runs,
                config: &self.config,
                outbox: &mut self.outbox,
            }
        }

        fn requests(&self) -> Requests<'_, MemoryStore> {
            Requests { store: self.journal.store(), policy: &self.config.approval_policy }
        }
    }

    fn ask(tool: &str, call: &str) -> Value {
        json!({"toolCallId": call, "toolName": tool, "args": {}, "severity": "info", "message": "ok?"})
    }

    /// A request suspends its run until it is decided, once; the decision is
    /// announced in the run, and a second one is refused without a change.
    #[test]
    fn a_request_suspends_its_run_until_decided_once() {
        let mut p = Parts::new(r#"{"deploy": {"required": true}}"#);
        let id = p.decisions().request("r1", "root", ask("deploy", "c1"), "q1", None, 5).unwrap();
        assert_eq!(id, crate::wire::ids::scoped("t1", "q1"));
        assert!(p.runs.is_suspended());
        assert!(p.requests().needs_approval("deploy", false));
        assert_eq!(p.requests().for_call("c1", Some("r1")).unwrap().unwrap().request_id, id);
        let by = By { actor: Some("ann"), via: "web" };
        let decided = p.decisions().decide(&id, &json!({"approved": true}), by, 6).unwrap();
        assert_eq!(decided.state, ConfirmState::Approved);
        assert_eq!(decided.decided_by.as_deref(), Some("ann"));
        assert!(!p.runs.is_suspended(), "nothing else of the run waits");
        let seq = p.journal.last_seq();
        let again = p.decisions().decide(&id, &json!({"approved": false}), by, 7).unwrap_err();
        assert!(matches!(again, Error::ConfirmationDecided(ConfirmState::Approved)), "{again:?}");
        assert_eq!(p.journal.last_seq(), seq, "a refused decision announces nothing");
        let err = p.decisions().request("r1", "root", ask("deploy", "c2"), "q1", None, 8).unwrap_err();
        assert!(matches!(err, Error::DuplicateRequest));
    }

    /// A request whose time is up lapses with the alarm: its run goes on, a
    /// late decision meets `confirmation_expired`.
    #[test]
    fn a_lapsed_request_is_expired_and_its_run_goes_on() {
        let mut p = Parts::new(r#"{"ttlMs": 100, "tools": {"deploy": {"required": true}}}"#);
        let id = p.decisions().request("r1", "root", ask("deploy", "c1"), "q1", None, 0).unwrap();
        assert_eq!(p.requests().next_expiry().unwrap(), Some(100));
        assert!(p.decisions().expire_due(99).unwrap().is_empty());
        let lapsed = p.decisions().expire_due(100).unwrap();
        assert_eq!(lapsed.len(), 1);
        assert!(!p.runs.is_suspended());
        let late = p.decisions().decide(&id, &json!({"approved": true}), By { actor: None, via: "web" }, 101);
        assert!(matches!(late, Err(Error::ConfirmationExpired)));
        assert_eq!(p.requests().next_expiry().unwrap(), None);
    }

    #[test]
    fn a_request_outside_the_active_run_is_refused() {
        let mut p = Parts::new("{}");
        let err = p.decisions().request("r9", "root", ask("deploy", "c1"), "q1", None, 0).unwrap_err();
        assert!(matches!(err, Error::RunFinished { .. }));
        assert!(p.requests().get(&crate::wire::ids::scoped("t1", "q1")).unwrap().is_none(), "nothing stored");
    }
}
