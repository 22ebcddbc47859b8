//! The agent's side of compaction ([`context`](super::context) decides what
//! to fold): before each model call the context is brought within the
//! model's window; past `AGENT_COMPACT_AT` the model is asked, in a quiet
//! step of its own, for a summary of the oldest part, recorded as a durable
//! `context-compacted`.
//!
//! Invariants enforced here:
//! - No model call is sent over its window less its answer's room. Past a
//!   compaction, the run's own largest tool results are cut to fit (with a
//!   marker: the whole result is in the history), then its oldest memory
//!   turns are left out; a context that still cannot be brought under it
//!   fails the run (`context_exceeded`), before the call.
//! - The `context-compacted` event (with the thread's record of it, which
//!   later runs' memories read) and the checkpoint with the compacted
//!   context are written in one synchronous block, so a restart finds both
//!   or neither: a run that died mid-compaction resumes from the checkpoint
//!   before it and compacts once.
//! - A summary step that fails does not fail the run: it goes on with the
//!   context it had (its oldest turns left out only when that was over the
//!   window), and `context-compaction-failed` says why.

use super::context::{self, Layout, Plan};
use super::step::Ask;
use super::*;
use crate::log::event::payload::{ContextCompacted, ContextCompactionFailed};
use crate::log::event::Payload;

impl<H: Host> Agent<H> {
    /// The bytes of the tools' schemas a step sends.
    fn schema_bytes(&self) -> usize {
        let defs = self.definitions();
        if defs.is_empty() {
            0
        } else {
            Value::Array(defs).to_string().len()
        }
    }

    /// Brings `cp`'s context within the model's window before a call.
    pub(super) async fn fit(&self, cp: &mut Checkpoint) -> Result<(), Halt> {
        let budget = self.cfg.budget();
        // The tools offered do not change within a step: measured once.
        let schemas = self.schema_bytes();
        let size = |cp: &Checkpoint| context::tokens(&cp.messages, schemas, cp.calibration);
        let before = size(cp);
        if before <= budget.threshold() {
            return Ok(());
        }
        let layout = cp.context.clone().filter(|_| self.orchestrator && !self.compact_failed.get());
        let plan = layout.as_ref().and_then(|l| context::plan(&cp.messages, l, &budget, cp.calibration, schemas));
        let failed = match (layout, plan) {
            (Some(layout), Some(plan)) => match self.compact(cp, &layout, plan, before, schemas, false).await {
                Ok(()) => None,
                Err(Halt::Failed(why)) => Some(why),
                Err(h) => return Err(h),
            },
            _ => None,
        };
        let mut now = size(cp);
        if now > budget.limit() {
            // A result too big for the window even alone (a tool's answer
            // of up to MAX_TOOL_RESULT_BYTES) is cut to fit, with a marker.
            let ratio = cp.calibration.map_or(1.0, |c| c.ratio());
            let excess = ((now - budget.limit()) as f64 * 3.0 / ratio) as usize + 1_024;
            let from = context::own_start(cp.context.as_ref());
            context::shrink_results(&mut cp.messages, from, excess);
            now = size(cp);
        }
        let mut dropped = 0;
        if now > budget.limit() {
            let trimmed = cp
                .context
                .as_ref()
                .filter(|_| self.orchestrator)
                .and_then(|l| context::trim(&cp.messages, l, &budget, cp.calibration, schemas));
            match trimmed {
                Some((messages, layout)) => {
                    dropped = cp.context.as_ref().map_or(0, |l| l.turns.len() - layout.turns.len()) as u32;
                    cp.messages = messages;
                    cp.context = Some(layout);
                }
                None => return Err(self.too_big(now, budget.limit())),
            }
        }
        if let Some(reason) = failed {
            self.compact_failed.set(true);
            let failed = ContextCompactionFailed { reason, tokens: before, dropped };
            self.publish(vec![self.payload(Payload::ContextCompactionFailed(failed))])?;
        }
        Ok(())
    }

    /// Asks the model for the summary `plan` folds, and puts it in `cp`'s
    /// context, recorded. `Halt::Failed` when no summary came (the context
    /// is as it was).
    async fn compact(
        &self,
        cp: &mut Checkpoint,
        layout: &Layout,
        plan: Plan,
        before: u64,
        schemas: usize,
        requested: bool,
    ) -> Result<(), Halt> {
        let folded = context::folded(&cp.messages, layout, &plan);
        let budget = self.cfg.budget();
        let request =
            context::summary_request(layout.summary.as_deref(), &folded, budget.transcript_bytes(cp.calibration));
        let ask = Ask { quiet: true, max_tokens: Some(budget.summary_tokens()) };
        let step = match self.traced_step(&request, ask).await {
            Ok(step) => step,
            // A quiet step publishes nothing of its failure: the run goes
            // on, and `context-compaction-failed` says why.
            Err(Halt::Failed(why)) => return Err(Halt::Failed(format!("the summary step failed: {why}"))),
            Err(h) => return Err(h),
        };
        if let Some(u) = &step.usage {
            cp.usage = Some(self.add_usage(cp.usage.as_ref(), u));
        }
        let summary = step.text.trim();
        if summary.is_empty() {
            return Err(Halt::Failed("the model's summary was empty".into()));
        }
        if step.finish.as_deref() == Some("length") && summary.len() < 40 {
            return Err(Halt::Failed("the model's summary was cut off".into()));
        }
        let covers = context::covers(&cp.messages, layout, &plan, &self.run_id);
        let (messages, next) = context::apply(&cp.messages, layout, &plan, summary);
        let previous = std::mem::replace(&mut cp.messages, messages);
        cp.context = Some(next);
        let payload = ContextCompacted {
            summary: summary.to_owned(),
            from: covers.from,
            through: covers.through,
            calls: covers.calls,
            messages: covers.messages as u32,
            model: self.model_name().unwrap_or_default().to_owned(),
            tokens_before: before,
            tokens_after: context::tokens(&cp.messages, schemas, cp.calibration),
            usage: step.usage.clone(),
            requested,
        };
        // One synchronous block: the event (and the thread's record of
        // it), then the checkpoint holding the context it made.
        if let Err(h) = self.publish(vec![self.payload(Payload::ContextCompacted(payload))]) {
            cp.messages = previous;
            cp.context = Some(layout.clone());
            return Err(h);
        }
        if self.orchestrator && self.scope == Scope::Run {
            self.host.checkpoint(cp);
        }
        Ok(())
    }

    /// A compaction a person asked for, between runs: the whole memory is
    /// folded. Its outcome is published into the run it
    /// runs through; a failure says why.
    pub(super) async fn compact_requested(&self, mut cp: Checkpoint) {
        let Some(layout) = cp.context.clone() else { return };
        if layout.turns.is_empty() {
            return;
        }
        let schemas = self.schema_bytes();
        let before = context::tokens(&cp.messages, schemas, cp.calibration);
        let plan = Plan { turns: layout.turns.len(), steps: 0 };
        if let Err(Halt::Failed(reason)) = self.compact(&mut cp, &layout, plan, before, schemas, true).await {
            let failed = ContextCompactionFailed { reason, tokens: before, dropped: 0 };
            let _ = self.publish(vec![self.payload(Payload::ContextCompactionFailed(failed))]);
        }
    }

    /// The run cannot go on: even its own messages are over the window.
    fn too_big(&self, tokens: u64, limit: u64) -> Halt {
        let why = format!(
            "The conversation's context (about {tokens} tokens) is over what the model takes ({limit} tokens: its window less its answer's room), even compacted."
        );
        match self.publish(vec![self.event(Kind::Error, json!({ "content": why, "code": "context_exceeded" }))]) {
            Ok(()) => Halt::Failed("context_exceeded".into()),
            Err(h) => h,
        }
    }

    fn payload(&self, payload: Payload) -> Event {
        Event::new(payload, &self.run_id, &self.agent_id, self.host.now())
    }
}
