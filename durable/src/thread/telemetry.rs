//! What the thread tells operators: a log line for each run that ends, and,
//! with traces on, the run's span and each decision's wait
//! ([`crate::trace`]). Recorded once the run's end (or the decision) is
//! stored, as an effect the shell carries out off the request's path.

use crate::effect::Effect;
use crate::storage::store::{Confirmation, RunRecord};
use crate::trace::{RunTrace, SpanKind};
use serde_json::json;

/// The run's trace: under the request that sent it when that was kept.
pub(super) fn run_trace(thread_id: &str, run: &RunRecord) -> RunTrace {
    RunTrace::of(thread_id, &run.run_id, run.turn.trace.as_deref())
}

/// A run ended: its log line, and its span with traces on (`tracing`).
pub(super) fn run_ended(thread_id: &str, tracing: bool, run: &RunRecord) -> Effect {
    let trace = run_trace(thread_id, run);
    let end = run.finished_at.unwrap_or(run.created_at);
    let usage = run.usage.as_deref().and_then(|u| crate::agent::usage::of_run(u, run.model.as_deref()));
    let mut fields = json!({
        "threadId": thread_id,
        "runId": run.run_id,
        "status": run.state.as_str(),
        "driver": run.driver.as_str(),
        "durationMs": end - run.created_at,
    });
    if let Some(reason) = &run.reason {
        fields["reason"] = reason.clone().into();
    }
    if let Some(u) = &usage {
        fields["model"] = u.model.clone().into();
        fields["inputTokens"] = u.input.into();
        fields["outputTokens"] = u.output.into();
    }
    let log = crate::trace::log_line("run", Some(&hex::encode(trace.trace)), &fields);
    let mut spans = Vec::new();
    if tracing {
        let mut span = trace
            .run_span(run.created_at, end)
            .attr("gen_ai.operation.name", "invoke_agent")
            .attr("gen_ai.agent.name", run.agent_id.clone())
            .attr("gen_ai.conversation.id", thread_id.to_owned())
            .attr("threadline.thread.id", thread_id.to_owned())
            .attr("threadline.run.id", run.run_id.clone())
            .attr("threadline.run.status", run.state.as_str())
            .attr("threadline.run.driver", run.driver.as_str());
        if let Some(u) = &usage {
            if let Some(m) = &u.model {
                span = span.attr("gen_ai.request.model", m.clone());
            }
            span = span.attr("gen_ai.usage.input_tokens", u.input).attr("gen_ai.usage.output_tokens", u.output);
        }
        let failed = !matches!(run.state.as_str(), "completed" | "cancelled");
        spans.push(span.failed(failed.then(|| run.reason.clone().unwrap_or_else(|| run.state.as_str().to_owned()))));
    }
    Effect::Telemetry { spans, log: Some(log) }
}

/// A decision was made (or lapsed): the span of the wait for it, under
/// its run (`active`, while it holds the lock), with traces on.
pub(super) fn decision_settled(
    thread_id: &str,
    tracing: bool,
    active: Option<&RunRecord>,
    c: &Confirmation,
    now: i64,
) -> Option<Effect> {
    if !tracing {
        return None;
    }
    let trace = match active.filter(|r| r.run_id == c.run_id) {
        Some(r) => run_trace(thread_id, r),
        None => RunTrace::of(thread_id, &c.run_id, None),
    };
    let mut span = trace
        .child(&c.request_id, format!("await_decision {}", c.tool_name), SpanKind::Internal, c.created_at, now)
        .attr("threadline.thread.id", thread_id.to_owned())
        .attr("threadline.run.id", c.run_id.clone())
        .attr("threadline.confirmation.id", c.request_id.clone())
        .attr("threadline.confirmation.input_type", c.input_type.clone())
        .attr("threadline.confirmation.state", c.state.as_str())
        .attr("gen_ai.tool.name", c.tool_name.clone())
        .attr("gen_ai.tool.call.id", c.tool_call_id.clone());
    if let Some(by) = &c.decided_by {
        span = span.attr("threadline.confirmation.decided_by", by.clone());
    }
    Some(Effect::Telemetry { spans: vec![span], log: None })
}
