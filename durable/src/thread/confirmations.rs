//! Requests waiting for a person: recorded when their `confirmation-request`
//! is published, decided once, lapsed by the alarm, cancelled with their run.
//! The rules of a request's life are `confirm`'s; who may decide is
//! `access`'s; this file keeps the records and the run's suspension in step.

use super::service::held;
use super::{Sink, Thread};
use crate::access::{self, Caller, Facts};
use crate::confirm::{self, ConfirmState, Confirmation};
use crate::effect::Effect;
use crate::error::ApiError;
use crate::event::{self, Event, Kind};
use crate::route::Route;
use crate::settings::Settings;
use crate::store::Store;
use serde_json::Value;

impl<S: Store, K: Sink> Thread<S, K> {
    /// Publishes a `confirmation-request` into `run_id` and records it as
    /// pending, with the approval policy's TTL and approver for its tool.
    /// `payload` is the request; its `requestId` is replaced by a
    /// thread-scoped one made from `local_id`. Returns the request id.
    pub fn request_confirmation(
        &mut self,
        run_id: &str,
        agent_id: &str,
        payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<String, ApiError> {
        let (ev, record) = self.confirmation_event(run_id, agent_id, payload, local_id, agent_request_id, now)?;
        let request_id = record.request_id.clone();
        self.publish_run(run_id, vec![ev], now)?;
        self.store_confirmations(vec![record])?;
        Ok(request_id)
    }

    /// The event and the pending record of a new request (409
    /// `duplicate_request` when the thread already holds its id).
    pub(super) fn confirmation_event(
        &self,
        run_id: &str,
        agent_id: &str,
        mut payload: Value,
        local_id: &str,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Result<(Event, Confirmation), ApiError> {
        let request_id = confirm::request_id(&self.thread_id, local_id);
        payload["requestId"] = request_id.clone().into();
        let payload =
            event::canonical_payload(Kind::ConfirmationRequest, payload).map_err(|e| ApiError::invalid_event(e.0))?;
        if self.store.confirmation(&request_id).map_err(ApiError::storage)?.is_some() {
            return Err(ApiError::duplicate_request());
        }
        let record = Confirmation::pending(
            request_id,
            run_id,
            agent_id,
            &payload,
            &self.config.approval_policy,
            agent_request_id,
            now,
        );
        Ok((Event::new(Kind::ConfirmationRequest, run_id, agent_id, now, payload), record))
    }

    /// Stores new pending requests; each suspends its run until settled.
    pub(super) fn store_confirmations(&mut self, records: Vec<Confirmation>) -> Result<(), ApiError> {
        for record in records {
            self.store.put_confirmation(&record).map_err(ApiError::storage)?;
            if let Some(a) = self.active.as_mut().filter(|a| a.record.run_id == record.run_id) {
                a.pending += 1;
            }
        }
        Ok(())
    }

    /// Settles `run_id`'s pending requests as cancelled (its run is ending):
    /// no decision applies any more.
    pub(super) fn cancel_confirmations(&mut self, run_id: &str) -> Result<(), ApiError> {
        for mut c in self.store.pending_confirmations().map_err(ApiError::storage)? {
            if c.run_id == run_id {
                c.state = ConfirmState::Cancelled;
                self.store.put_confirmation(&c).map_err(ApiError::storage)?;
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
    pub fn decide(&mut self, request_id: &str, body: &Value, now: i64) -> Result<Confirmation, ApiError> {
        let (c, decision) = self.check_decision(request_id, body, now)?;
        self.record_decision(c, decision, now)
    }

    /// Checks a decision on `request_id` without recording it: the request
    /// as it stands (a lapsed one is settled as expired first) and the
    /// decision as it would be recorded, or the refusal `decide` answers.
    fn check_decision(&mut self, request_id: &str, body: &Value, now: i64) -> Result<(Confirmation, Value), ApiError> {
        let mut c = self.confirmation(request_id)?.ok_or_else(ApiError::confirmation_not_found)?;
        if c.lapsed(now) {
            self.expire(&mut c)?;
        }
        let decision = c.check(body)?;
        Ok((c, decision))
    }

    /// Records a checked decision: the request settles, and its run goes
    /// on once nothing else of it is pending.
    fn record_decision(&mut self, c: Confirmation, decision: Value, now: i64) -> Result<Confirmation, ApiError> {
        let mut decided = c;
        let session = decided.apply(decision);
        self.store.put_confirmation(&decided).map_err(ApiError::storage)?;
        if let Some(tool) = session {
            self.store.approve_for_session(&tool).map_err(ApiError::storage)?;
        }
        self.settled(&decided.run_id, now);
        Ok(decided)
    }

    fn expire(&mut self, c: &mut Confirmation) -> Result<(), ApiError> {
        let mut lapsed = c.clone();
        lapsed.state = ConfirmState::Expired;
        self.store.put_confirmation(&lapsed).map_err(ApiError::storage)?;
        *c = lapsed;
        let now = c.expires_at.unwrap_or_default();
        self.settled(&c.run_id, now);
        Ok(())
    }

    fn settled(&mut self, run_id: &str, now: i64) {
        if let Some(a) = self.active.as_mut().filter(|a| a.record.run_id == run_id) {
            a.pending = a.pending.saturating_sub(1);
            // The wait is over; the run's deadlines start again from now.
            a.last_activity = now.max(a.last_activity);
            a.found_on_load = None;
        }
    }

    /// Settles every pending confirmation whose time is up; returns them.
    pub fn expire_due(&mut self, now: i64) -> Result<Vec<Confirmation>, ApiError> {
        let mut out = Vec::new();
        for mut c in self.store.pending_confirmations().map_err(ApiError::storage)? {
            if c.lapsed(now) {
                self.expire(&mut c)?;
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Settles the requests whose time is up (their runs go on), so a late
    /// decision meets 410 and no run is left waiting.
    pub(super) fn settle_lapsed(&mut self, settings: &Settings, now: i64) -> Result<Vec<Effect>, ApiError> {
        let mut effects = Vec::new();
        for lapsed in self.expire_due(now)? {
            effects.extend(self.after_settled(&lapsed, settings)?);
        }
        Ok(effects)
    }

    /// Decides, for a protocol's client (the AI SDK's, AG-UI's), the
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
    pub(super) fn decide_for(
        &mut self,
        caller: &Caller,
        answers: &[(Confirmation, Value)],
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<(), ApiError> {
        effects.extend(self.settle_lapsed(settings, now)?);
        let owner = self.owner()?;
        let mut checked = Vec::with_capacity(answers.len());
        for (given, body) in answers {
            // The request as stored now, not as the caller read it.
            let c = self.confirmation(&given.request_id)?.ok_or_else(ApiError::confirmation_not_found)?;
            let route = Route::Confirm { thread: self.thread_id.clone(), request: c.request_id.clone() };
            access::decide(&route, caller, &Facts { owner: owner.as_deref(), request: Some(held(Some(&c))) })?;
            if c.state == ConfirmState::Pending
                && !checked.iter().any(|(d, _): &(Confirmation, _)| d.request_id == c.request_id)
            {
                let decision = c.check(body)?;
                checked.push((c, decision));
            }
        }
        for (c, decision) in checked {
            let decided = self.record_decision(c, decision, now)?;
            effects.extend(self.after_settled(&decided, settings)?);
        }
        Ok(())
    }

    /// When the next pending confirmation lapses.
    pub fn next_expiry(&self) -> Result<Option<i64>, ApiError> {
        Ok(self.store.pending_confirmations().map_err(ApiError::storage)?.iter().filter_map(|c| c.expires_at).min())
    }

    /// The confirmation of tool call `tool_call_id` (of `run_id`, if given):
    /// agora's approve/reject routes name the call, not the request.
    pub fn confirmation_for_call(
        &self,
        tool_call_id: &str,
        run_id: Option<&str>,
    ) -> Result<Option<Confirmation>, ApiError> {
        let found = self.store.confirmation_by_call(tool_call_id).map_err(ApiError::storage)?;
        Ok(found.filter(|c| run_id.is_none_or(|r| r == c.run_id)))
    }

    pub fn confirmation(&self, request_id: &str) -> Result<Option<Confirmation>, ApiError> {
        self.store.confirmation(request_id).map_err(ApiError::storage)
    }

    /// Whether calling `tool` first needs a person's approval: declared
    /// `approval: "required"` (`declared`) or required by `APPROVAL_POLICY`,
    /// and not already approved for the thread's session. When the session
    /// store cannot be read, it asks: never run unapproved.
    pub fn needs_approval(&self, tool: &str, declared: bool) -> bool {
        let required = self.config.approval_policy.get(tool).and_then(|p| p.required).unwrap_or(declared);
        required && !self.session_approved(tool).unwrap_or(false)
    }

    /// Whether `tool` was approved with scope `session` on this thread.
    pub fn session_approved(&self, tool: &str) -> Result<bool, ApiError> {
        self.store.session_approved(tool).map_err(ApiError::storage)
    }
}
