//! What a thread shows: its status, its messages with their agent trees,
//! the conversation memory a new run starts from, and the debug figures.

use super::error::Error;
use super::{Sink, Thread};
use crate::log::event::Event;
use crate::log::reducer;
use crate::storage::store::{RunRecord, RunState, Store};
use serde_json::{json, Value};

/// What a protocol adds to a run's user and assistant messages
/// ([`Thread::messages_with`]), given the run and its events.
pub type ExtendMessages<'a, E> = dyn FnMut(&RunRecord, &[Event], &mut Value, &mut Value) -> Result<(), E> + 'a;

/// Whether a conversation shows `run`: every run but an answer a
/// regenerate replaced. The one rule every history view applies, through
/// [`Thread::conversation_page`].
fn shown(run: &RunRecord) -> bool {
    !run.replaced
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The runs the conversation shows on page `page` of `limit` runs
    /// (newest page first), oldest first within it, and how many runs the
    /// thread has. Every protocol's history reads the conversation here,
    /// never through the store.
    pub fn conversation_page(&self, limit: usize, page: usize) -> Result<(Vec<RunRecord>, usize), Error> {
        let (runs, total) = self.store.runs_page(page.saturating_mul(limit), limit)?;
        Ok((runs.into_iter().rev().filter(shown).collect(), total))
    }

    /// `GET .../status`.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "hasActiveRun": self.active.is_some(),
            "isSuspended": self.is_suspended(),
            "backgroundTasks": self.background,
            "queue": self.queue,
        });
        if let Some(a) = &self.active {
            v["runId"] = a.record.run_id.clone().into();
        }
        v
    }

    /// Whether agent `name` serves the thread (Flue's `/agents/:name/:id`):
    /// it ran one of its turns (`default` for a turn that named none, and
    /// for a thread with no turn yet).
    pub fn served_by(&self, name: &str) -> Result<bool, Error> {
        let (runs, _) = self.store.runs_page(0, 10_000)?;
        if runs.is_empty() {
            return Ok(name == crate::agent::personas::DEFAULT);
        }
        Ok(runs.iter().any(|r| r.turn.agent.as_deref().unwrap_or(crate::agent::personas::DEFAULT) == name))
    }

    /// `GET .../messages`: a page of runs, newest page first (`page` 0),
    /// messages oldest first within it (each user message, then the
    /// assistant message answering it), each assistant message with its agent
    /// tree folded from the log, times in ISO 8601. `nextEventId` is read in the same block, so a
    /// client that connects from `nextEventId - 1` sees nothing twice.
    /// A user message's attachments carry their URL on `origin`.
    pub fn messages(&self, limit: usize, page: usize, origin: &str) -> Result<Value, Error> {
        self.messages_with(limit, page, origin, &mut |_, _, _, _| Ok(()))
    }

    /// [`Thread::messages`], each run's user and assistant messages handed
    /// to `extend` with the run and its events (read once), for a protocol
    /// whose view says more of them.
    pub fn messages_with<E: From<Error>>(
        &self,
        limit: usize,
        page: usize,
        origin: &str,
        extend: &mut ExtendMessages<E>,
    ) -> Result<Value, E> {
        let thread_id = &self.thread_id;
        let (runs, total) = self.conversation_page(limit, page)?;
        let mut messages = Vec::with_capacity(runs.len() * 2);
        for run in &runs {
            // A user message names no run, as n8n's own history does: n8n's
            // editor routes a run's live events to the message that names
            // it, whatever its role. Its answer follows it.
            let created_at = crate::wire::time::rfc3339(run.created_at);
            let mut user = json!({
                "id": run.message_id,
                "role": "user",
                "createdAt": created_at,
                "content": run.message,
                "reasoning": "",
                "isStreaming": false,
            });
            if !run.turn.attachments.is_empty() {
                let urls = run.turn.attachments.iter().map(|a| a.to_json(origin, thread_id)).collect();
                user["attachments"] = Value::Array(urls);
            }
            let events = self.run_events(&run.run_id)?;
            let tree = reducer::fold(&events);
            let root = tree.tree();
            let mut assistant = json!({
                "id": format!("{}:assistant", run.run_id),
                "runId": run.run_id,
                "role": "assistant",
                "createdAt": created_at,
                "content": root.as_ref().map(|r| r.text_content.clone()).unwrap_or_default(),
                "reasoning": root.as_ref().map(|r| r.reasoning.clone()).unwrap_or_default(),
                "isStreaming": run.state == RunState::Running,
                "status": run.state.as_str(),
                "usage": run.usage.as_deref().and_then(usage_view),
                "agentTree": root,
            });
            extend(run, &events, &mut user, &mut assistant)?;
            messages.push(user);
            messages.push(assistant);
        }
        Ok(json!({
            "threadId": thread_id,
            "messages": messages,
            "nextEventId": self.last_seq + 1,
            "queue": self.queue,
            "page": page,
            "limit": limit,
            "totalRuns": total,
        }))
    }

    /// `GET /instance-ai/threads/:threadId/usage`: what the thread's runs
    /// used, per model (regenerated answers count: their tokens were spent).
    pub fn usage(&self) -> Result<Value, Error> {
        const PAGE: usize = 500;
        let mut runs = Vec::new();
        for page in 0.. {
            let (rows, total) = self.store.runs_page(page * PAGE, PAGE)?;
            runs.extend(
                rows.iter().filter_map(|r| crate::agent::usage::of_run(r.usage.as_deref()?, r.model.as_deref())),
            );
            if rows.len() < PAGE || (page + 1) * PAGE >= total {
                break;
            }
        }
        let mut out = crate::agent::usage::view(crate::agent::usage::sum(runs), None);
        out["threadId"] = self.thread_id.clone().into();
        Ok(out)
    }

    /// Rows written since the store was opened.
    pub fn rows_written(&self) -> u64 {
        self.store.rows_written()
    }

    /// Bytes of delta text held in memory, not yet stored.
    pub fn buffered_bytes(&self) -> usize {
        self.coalescer.buffered_bytes()
    }

    /// Conversation memory for a new run: earlier runs' user messages, answers
    /// and tool results as chat messages, newest kept first within
    /// `budget_chars`, read run by run (never the whole history at once).
    pub fn history(&self, budget_chars: usize, exclude_run: &str) -> Result<Vec<Value>, Error> {
        let mut newest_first: Vec<Vec<Value>> = Vec::new();
        let mut used = 0;
        let prefix = self.files_prefix()?.unwrap_or_default();
        let mut offset = 0;
        'pages: loop {
            let (runs, _) = self.store.runs_page(offset, 20)?;
            if runs.is_empty() {
                break;
            }
            offset += runs.len();
            for run in runs.iter().filter(|r| r.run_id != exclude_run && shown(r)) {
                let tree = reducer::fold(&self.run_events(&run.run_id)?);
                let mut answer = String::new();
                if let Some(root) = tree.tree() {
                    for tc in &root.tool_calls {
                        let outcome = match (&tc.result, &tc.error) {
                            (Some(r), _) => r.to_string(),
                            (_, Some(e)) => format!("error: {e}"),
                            _ => "no result".into(),
                        };
                        answer.push_str(&format!("[tool {}({}) → {}]\n", tc.tool_name, tc.args, outcome));
                    }
                    answer.push_str(&root.text_content);
                }
                let cost = run.message.len() + answer.len();
                if used + cost > budget_chars {
                    break 'pages;
                }
                used += cost;
                let mut pair = vec![crate::agent::memory_message(&run.message, &run.turn.attachments, &prefix)];
                if !answer.is_empty() {
                    pair.push(json!({ "role": "assistant", "content": answer }));
                }
                newest_first.push(pair);
            }
        }
        Ok(newest_first.into_iter().rev().flatten().collect())
    }

    /// `GET .../debug/stats` (with `DEBUG_ROUTES`): the last id, rows
    /// written since the store opened, subscribers, unstored delta bytes,
    /// the files the thread holds, and the object's instance as its shell
    /// reports it.
    pub fn stats(&mut self, instance: &super::serve::Instance) -> Value {
        self.subscribers.prune();
        json!({
            "lastEventId": self.last_seq,
            "rowsWritten": self.rows_written(),
            "subscribers": self.subscribers.len(),
            "bufferedBytes": self.buffered_bytes(),
            "files": self.store.file_count().unwrap_or(0),
            "instance": instance,
        })
    }
}

/// A run's stored usage as the messages view shows it: the model's own
/// counts (and `costUsd`); the model the usage views name is kept out.
fn usage_view(stored: &str) -> Option<Value> {
    let mut v: Value = serde_json::from_str(stored).ok()?;
    if let Some(o) = v.as_object_mut() {
        o.remove("model");
    }
    Some(v)
}
