//! The model's context kept within its window: how big a request is taken
//! to be ([`estimate`], corrected by what the provider last reported), the
//! budget a model's window gives ([`Budget`]), where a run's context is cut
//! when it must be compacted ([`plan`]), the request that asks the model for
//! the summary ([`summary_request`]), and the context that follows ([`apply`]).
//!
//! A run's context is laid out as
//! `[system prompt, summary?] [memory turns...] [page context?, user message] [steps...]`:
//! the head is never summarised away (the agent's instructions, opencode
//! #16960), the memory is the earlier conversation turn by turn
//! ([`Layout::turns`]), and a step is an assistant message with its tool
//! calls followed by their results.
//!
//! Invariants enforced here:
//! - A cut never falls between a tool call and its result: the memory is
//!   folded in whole turns (a turn's tool calls are one assistant message
//!   there), the run's own part in whole steps.
//! - The run's user message stays: what the person asked for this turn is
//!   never only in a summary.
//! - Nothing is folded that the next request needs to answer: the run's
//!   newest step stays.

use crate::agent::charge;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The window a model is given when the catalog says nothing of it
/// (`AGENT_CONTEXT_WINDOW`): small enough for most models served today.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// The most tokens of context a run keeps, whatever its model's window: a
/// run's checkpoint holds its context in one row, and at the estimate's
/// three bytes a token this keeps it under 1.5 MB, below a Durable Object
/// row's 2 MB.
pub const MAX_CONTEXT_TOKENS: u64 = 500_000;

/// Tokens kept for the summary when planning a cut: what the summary step
/// may answer with (its `max_tokens`), at most the model's answer room.
pub const SUMMARY_TOKENS: u64 = 1_024;

/// Tokens taken for the summary step's instruction.
const SUMMARY_PROMPT_TOKENS: u64 = 200;

/// The instruction of the summary step.
pub const SUMMARY_PROMPT: &str = "You compact a conversation between a person and an AI agent, so the agent can \
go on within its context window. Write a summary of the conversation you are given that keeps: what the person \
asked for (in their words where it matters), the decisions made, the open tasks and questions, the facts learned \
from files and tools (names, ids, numbers, paths, results), and anything the person asked to remember. Fold the \
earlier summary in when there is one. Leave out greetings and repetition. Write plain notes, at most 400 words.";

/// How a compacted context names its summary (and how the memory finds it).
pub const SUMMARY_HEADER: &str =
    "Summary of the earlier conversation (compacted; the whole conversation is in the thread's history):\n";

/// What a new run remembers of the conversation
/// (`Conversation::history` in the thread): the summary of its compacted part, and the
/// turns after it, oldest first, each as chat messages.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    pub summary: Option<String>,
    pub turns: Vec<(String, Vec<Value>)>,
}

impl Memory {
    /// As chat messages: the summary's, then the turns'.
    pub fn messages(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self.summary.iter().map(|s| summary_message(s)).collect();
        out.extend(self.turns.iter().flat_map(|(_, m)| m.iter().cloned()));
        out
    }

    /// [`Memory::messages`] read back: the summary (its message first),
    /// and the rest.
    pub fn parse(mut messages: Vec<Value>) -> (Option<String>, Vec<Value>) {
        let header = SUMMARY_HEADER;
        let summary = messages
            .first()
            .and_then(|m| m["content"].as_str())
            .and_then(|c| c.strip_prefix(header))
            .map(str::to_owned);
        if summary.is_some() {
            messages.remove(0);
        }
        (summary, messages)
    }
}

/// A model's window and what a call may answer with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// The model's context window, in tokens (at most [`MAX_CONTEXT_TOKENS`]).
    pub window: u64,
    /// The tokens kept for the answer: the model's `maxOutputTokens`.
    pub output: u64,
    /// The share of the window past which the context is compacted
    /// (`AGENT_COMPACT_AT`).
    pub compact_at: f64,
}

impl Budget {
    /// What the summary step may answer with.
    pub fn summary_tokens(&self) -> u64 {
        SUMMARY_TOKENS.min(self.output.max(64))
    }

    /// The most bytes of transcript a summary step sends: its request stays
    /// within the limit too (at the estimate's rate, as corrected).
    pub fn transcript_bytes(&self, cal: Option<Calibration>) -> usize {
        let room = self.window.saturating_sub(self.summary_tokens() + SUMMARY_PROMPT_TOKENS);
        let ratio = cal.map_or(1.0, |c| c.ratio()).max(1.0);
        ((room * 3) as f64 / ratio) as usize
    }

    pub fn new(window: u64, output: u64, compact_at: f64) -> Budget {
        Budget { window: window.min(MAX_CONTEXT_TOKENS), output, compact_at: compact_at.clamp(0.1, 1.0) }
    }

    /// The most a request may hold: its window less the answer's tokens.
    pub fn limit(&self) -> u64 {
        self.window.saturating_sub(self.output)
    }

    /// Past this, the context is compacted before the call.
    pub fn threshold(&self) -> u64 {
        ((self.window as f64 * self.compact_at) as u64).min(self.limit())
    }

    /// What a compaction aims to leave: half the threshold, so the next one
    /// comes after as much conversation again.
    pub fn target(&self) -> u64 {
        self.threshold() / 2
    }
}

/// The provider's count of the thread's last call against the estimate of
/// it: what corrects the next estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
    pub estimated: u64,
    pub reported: u64,
}

impl Calibration {
    /// Reported over estimated, within 0.5 and 4 (a provider that counted
    /// oddly once moves the estimate at most that far).
    pub fn ratio(&self) -> f64 {
        if self.estimated == 0 || self.reported == 0 {
            return 1.0;
        }
        (self.reported as f64 / self.estimated as f64).clamp(0.5, 4.0)
    }
}

/// The tokens a request of `bytes` of JSON text referring to `files` is
/// taken to be: three bytes a token ([`charge::text_tokens`], which errs
/// high on English and code), a file at [`charge::FILE_TOKENS`], times what
/// the provider last reported against the same estimate.
pub fn estimate(bytes: usize, files: usize, calibration: Option<Calibration>) -> u64 {
    let raw = raw_estimate(bytes, files);
    match calibration {
        Some(c) => (raw as f64 * c.ratio()).ceil() as u64,
        None => raw,
    }
}

/// [`estimate`] before the provider's correction.
pub fn raw_estimate(bytes: usize, files: usize) -> u64 {
    charge::text_tokens(bytes) + files as u64 * charge::FILE_TOKENS
}

/// The [`estimate`] of `messages` and `extra` bytes (the tools' schemas):
/// what a context is taken to be, wherever it is measured.
pub fn tokens(messages: &[Value], extra: usize, calibration: Option<Calibration>) -> u64 {
    let bytes: usize = messages.iter().map(|m| m.to_string().len()).sum::<usize>() + extra;
    estimate(bytes, crate::agent::attachments::keys(messages).len(), calibration)
}

/// Where a run's context came from: what may be folded into a summary, and
/// what the summary then covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Layout {
    /// The messages no compaction replaces: the system prompt, and the
    /// summary when there is one.
    pub head: usize,
    /// The memory's turns after the head, oldest first.
    pub turns: Vec<Span>,
    /// The messages that open the run's own part: the page context and the
    /// user message.
    pub intro: usize,
    /// The run's tool calls the summary in the head already covers.
    #[serde(default)]
    pub calls: u32,
    /// The summary in the head, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// One turn of the memory: its run and how many messages it takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    pub run_id: String,
    pub messages: usize,
}

impl Layout {
    /// How many messages the memory's first `turns` turns take.
    fn turn_messages(&self, turns: usize) -> usize {
        self.turns.iter().take(turns).map(|t| t.messages).sum()
    }

    /// Where the run's own part starts.
    fn own(&self) -> usize {
        self.head + self.turn_messages(self.turns.len())
    }

    /// The run's steps: each one's first message's index and its length.
    fn steps(&self, messages: &[Value]) -> Vec<(usize, usize)> {
        let start = (self.own() + self.intro).min(messages.len());
        let mut steps: Vec<(usize, usize)> = Vec::new();
        for (i, m) in messages.iter().enumerate().skip(start) {
            if m["role"] == "assistant" || steps.is_empty() {
                steps.push((i, 1));
            } else if let Some(last) = steps.last_mut() {
                last.1 += 1;
            }
        }
        steps
    }
}

/// What a compaction folds: the oldest `turns` of the memory, then the
/// run's oldest `steps` (only once every turn is folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub turns: usize,
    pub steps: usize,
}

/// The least to fold for the context to come down to the budget's target,
/// or (when even all that may be folded does not get there) all of it;
/// `None` when nothing may be folded. `extra` is the request's bytes beyond
/// its messages (the tools' schemas).
pub fn plan(
    messages: &[Value],
    layout: &Layout,
    budget: &Budget,
    cal: Option<Calibration>,
    extra: usize,
) -> Option<Plan> {
    let head = tokens(&messages[..layout.head.min(messages.len())], 0, cal)
        + budget.summary_tokens()
        + estimate(extra, 0, None);
    let steps = layout.steps(messages);
    let mut candidates = Vec::new();
    for turns in 1..=layout.turns.len() {
        candidates.push(Plan { turns, steps: 0 });
    }
    // The newest step stays: it is what the model answers.
    for s in 1..steps.len() {
        candidates.push(Plan { turns: layout.turns.len(), steps: s });
    }
    let last = *candidates.last()?;
    let after = |p: &Plan| head + tokens(&kept(messages, layout, p), 0, cal);
    Some(candidates.into_iter().find(|p| after(p) <= budget.target()).unwrap_or(last))
}

/// The messages a plan keeps after the head.
fn kept(messages: &[Value], layout: &Layout, plan: &Plan) -> Vec<Value> {
    let from = layout.head + layout.turn_messages(plan.turns);
    let own = layout.own();
    let steps = layout.steps(messages);
    let (skip_from, skip_to) = match plan.steps {
        0 => (own, own),
        n => (steps[0].0, steps[n - 1].0 + steps[n - 1].1),
    };
    messages[from.min(messages.len())..]
        .iter()
        .enumerate()
        .filter(|(i, _)| !(skip_from..skip_to).contains(&(i + from)))
        .map(|(_, m)| m.clone())
        .collect()
}

/// The messages a plan folds, in order.
pub fn folded(messages: &[Value], layout: &Layout, plan: &Plan) -> Vec<Value> {
    let to = layout.head + layout.turn_messages(plan.turns);
    let mut out: Vec<Value> = messages[layout.head.min(messages.len())..to.min(messages.len())].to_vec();
    out.extend_from_slice(folded_steps(messages, layout, plan));
    out
}

/// The run's own steps a plan folds (none when it folds only turns).
fn folded_steps<'m>(messages: &'m [Value], layout: &Layout, plan: &Plan) -> &'m [Value] {
    if plan.steps == 0 {
        return &[];
    }
    let steps = layout.steps(messages);
    &messages[steps[0].0..steps[plan.steps - 1].0 + steps[plan.steps - 1].1]
}

/// The run's tool calls a summary covers after `plan`: those it covered
/// before, and the calls of the steps the plan folds.
fn calls_after(messages: &[Value], layout: &Layout, plan: &Plan) -> u32 {
    let folded = folded_steps(messages, layout, plan);
    layout.calls + folded.iter().map(|m| m["tool_calls"].as_array().map_or(0, Vec::len) as u32).sum::<u32>()
}

/// What a compaction covers, as it is stored: the conversation up to and
/// including run `through` (its first `calls` tool calls only, when set:
/// the run was compacted while it ran), and the first run it folded that
/// the summary before it had not.
#[derive(Clone, Debug, PartialEq)]
pub struct Covers {
    pub from: String,
    pub through: String,
    pub calls: Option<u32>,
    /// How many messages of the model's context the summary replaced.
    pub messages: usize,
}

/// What a plan covers, for the run `run_id` whose context it compacts.
pub fn covers(messages: &[Value], layout: &Layout, plan: &Plan, run_id: &str) -> Covers {
    let folded = folded(messages, layout, plan);
    let from = layout.turns.first().map_or(run_id, |t| t.run_id.as_str()).to_owned();
    if plan.steps == 0 {
        let through = layout.turns[plan.turns - 1].run_id.clone();
        Covers { from, through, calls: None, messages: folded.len() }
    } else {
        let calls = calls_after(messages, layout, plan);
        Covers { from, through: run_id.to_owned(), calls: Some(calls), messages: folded.len() }
    }
}

/// The summary step's request: its instruction, then the earlier summary
/// and the folded messages as one transcript (a tool result cut to a few
/// thousand characters: the summary keeps facts, not dumps).
pub fn summary_request(previous: Option<&str>, folded: &[Value], max_bytes: usize) -> Vec<Value> {
    const RESULT_CHARS: usize = 4_000;
    let mut transcript = String::new();
    if let Some(s) = previous {
        transcript.push_str("Earlier summary:\n");
        transcript.push_str(s);
        transcript.push_str("\n\n");
    }
    transcript.push_str("Conversation:\n");
    for m in folded {
        let role = m["role"].as_str().unwrap_or("?");
        let text = content_text(&m["content"]);
        match role {
            "tool" => transcript.push_str(&format!("[tool result] {}\n", cut(&text, RESULT_CHARS))),
            _ => {
                if !text.is_empty() {
                    transcript.push_str(&format!("{role}: {text}\n"));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let f = &c["function"];
                    transcript.push_str(&format!(
                        "[tool call] {}({})\n",
                        f["name"].as_str().unwrap_or("?"),
                        cut(f["arguments"].as_str().unwrap_or(""), RESULT_CHARS)
                    ));
                }
            }
        }
    }
    // Past what the request may hold, the oldest of it goes (the earlier
    // summary is at its start, and the newest is what matters most next).
    if transcript.len() > max_bytes {
        let mut cut = transcript.len() - max_bytes + 40;
        while !transcript.is_char_boundary(cut) {
            cut += 1;
        }
        transcript = format!("[…the start is left out]\n{}", &transcript[cut..]);
    }
    vec![json!({ "role": "system", "content": SUMMARY_PROMPT }), json!({ "role": "user", "content": transcript })]
}

/// The text of a message's content (a file part names its file).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p["type"].as_str() {
                Some("text") => p["text"].as_str().unwrap_or("").to_owned(),
                _ => "[file]".to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// `text` cut to `max` characters, saying how much was left out.
fn cut(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… [{} more characters]", n - max)
}

/// The summary message of a compacted context.
pub fn summary_message(summary: &str) -> Value {
    json!({ "role": "system", "content": format!("{SUMMARY_HEADER}{summary}") })
}

/// The context after a compaction: the system prompt, the new summary, and
/// what the plan keeps; and its layout.
pub fn apply(messages: &[Value], layout: &Layout, plan: &Plan, summary: &str) -> (Vec<Value>, Layout) {
    let mut out = vec![messages[0].clone(), summary_message(summary)];
    out.extend(kept(messages, layout, plan));
    let next = Layout {
        head: 2,
        turns: layout.turns[plan.turns..].to_vec(),
        intro: layout.intro,
        calls: calls_after(messages, layout, plan),
        summary: Some(summary.to_owned()),
    };
    (out, next)
}

/// What a tool result cut to fit the window ends with.
pub const CUT_TO_FIT: &str = "… [cut to fit the model's context window: the whole result is in the thread's history]";

/// Cuts the largest tool results from `from` on, largest first, until
/// `excess` bytes are gone (each keeps at least its first 1,000
/// characters and ends with [`CUT_TO_FIT`]); whether they are.
pub fn shrink_results(messages: &mut [Value], from: usize, excess: usize) -> bool {
    const KEEP: usize = 1_000;
    let mut big: Vec<(usize, usize)> = messages
        .iter()
        .enumerate()
        .skip(from)
        .filter(|(_, m)| m["role"] == "tool")
        .filter_map(|(i, m)| m["content"].as_str().map(|c| (i, c.len())))
        .filter(|(_, n)| *n > KEEP + CUT_TO_FIT.len())
        .collect();
    big.sort_by_key(|b| std::cmp::Reverse(b.1));
    let mut left = excess;
    for (i, len) in big {
        if left == 0 {
            break;
        }
        let Some(text) = messages[i]["content"].as_str() else { continue };
        let mut keep = len.saturating_sub(left + CUT_TO_FIT.len()).max(KEEP);
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        let cut = format!("{}{CUT_TO_FIT}", &text[..keep]);
        left = left.saturating_sub(len - cut.len());
        messages[i]["content"] = Value::String(cut);
    }
    left == 0
}

/// Where the run's own part starts (its page context and message), for a
/// context of `layout`; 1 (after the system prompt) without one.
pub fn own_start(layout: Option<&Layout>) -> usize {
    layout.map_or(1, Layout::own)
}

/// Whether a context over the hard limit can be brought under it without a
/// summary: its oldest memory turns dropped (a summary step that failed).
/// Returns the context and layout with as few turns dropped as needed, or
/// `None` when even none of them left is too big.
pub fn trim(
    messages: &[Value],
    layout: &Layout,
    budget: &Budget,
    cal: Option<Calibration>,
    extra: usize,
) -> Option<(Vec<Value>, Layout)> {
    for drop in 0..=layout.turns.len() {
        let from = layout.head + layout.turn_messages(drop);
        let mut out = messages[..layout.head].to_vec();
        out.extend_from_slice(&messages[from..]);
        if tokens(&out, extra, cal) <= budget.limit() {
            let next = Layout { turns: layout.turns[drop..].to_vec(), ..layout.clone() };
            return Some((out, next));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str) -> Value {
        json!({ "role": role, "content": text })
    }

    fn call(id: &str) -> Value {
        json!({ "role": "assistant", "content": null, "tool_calls": [{ "id": id, "type": "function", "function": { "name": "lookup", "arguments": "{}" } }] })
    }

    fn result(id: &str, text: &str) -> Value {
        json!({ "role": "tool", "tool_call_id": id, "content": text })
    }

    /// system, three memory turns of 2 messages, user, two steps.
    fn context() -> (Vec<Value>, Layout) {
        let big = "x".repeat(3_000);
        let mut m = vec![msg("system", "be brief")];
        let mut turns = Vec::new();
        for i in 0..3 {
            m.push(msg("user", &format!("q{i} {big}")));
            m.push(msg("assistant", &format!("a{i} {big}")));
            turns.push(Span { run_id: format!("r{i}"), messages: 2 });
        }
        m.push(msg("user", "now"));
        m.extend([call("c1"), result("c1", &big), call("c2"), result("c2", "small")]);
        (m, Layout { head: 1, turns, intro: 1, calls: 0, summary: None })
    }

    #[test]
    fn the_budget_keeps_the_answer_room_and_compacts_at_its_share() {
        let b = Budget::new(10_000, 1_000, 0.75);
        assert_eq!((b.limit(), b.threshold(), b.target()), (9_000, 7_500, 3_750));
        assert_eq!(Budget::new(10_000, 4_000, 0.9).threshold(), 6_000, "never past the limit");
        assert_eq!(Budget::new(2_000_000, 1_000, 0.75).window, MAX_CONTEXT_TOKENS);
    }

    #[test]
    fn the_estimate_follows_what_the_provider_reported() {
        assert_eq!(estimate(300, 0, None), 100);
        let c = Calibration { estimated: 100, reported: 150 };
        assert_eq!(estimate(300, 0, Some(c)), 150);
        assert_eq!(estimate(300, 0, Some(Calibration { estimated: 100, reported: 10_000 })), 400, "at most 4x");
        assert_eq!(estimate(300, 0, Some(Calibration { estimated: 0, reported: 5 })), 100);
    }

    #[test]
    fn a_plan_folds_the_fewest_oldest_turns_that_reach_the_target() {
        let (m, l) = context();
        // Each turn is ~2,000 tokens; the steps ~1,000.
        let p = plan(&m, &l, &Budget::new(8_000, 500, 0.75), None, 0).unwrap();
        assert_eq!(p, Plan { turns: 3, steps: 0 });
        let p = plan(&m, &l, &Budget::new(20_000, 500, 0.75), None, 0).unwrap();
        assert_eq!(p, Plan { turns: 1, steps: 0 });
        let c = covers(&m, &l, &p, "r9");
        assert_eq!((c.from.as_str(), c.through.as_str(), c.calls, c.messages), ("r0", "r0", None, 2));
    }

    #[test]
    fn a_run_too_big_alone_folds_its_steps_but_never_its_newest_or_its_message() {
        let (m, l) = context();
        let p = plan(&m, &l, &Budget::new(3_000, 500, 0.75), None, 0).unwrap();
        assert_eq!(p, Plan { turns: 3, steps: 1 }, "the newest step stays");
        let c = covers(&m, &l, &p, "r9");
        assert_eq!((c.through.as_str(), c.calls), ("r9", Some(1)));
        let (after, next) = apply(&m, &l, &p, "S");
        assert_eq!(after[0], m[0], "the system prompt stays first");
        assert_eq!(after[1]["content"], format!("{SUMMARY_HEADER}S"));
        assert_eq!(after[2], msg("user", "now"), "the run's message stays");
        assert_eq!(after[3], call("c2"));
        assert_eq!(after[4], result("c2", "small"), "a call keeps its result");
        assert_eq!(after.len(), 5);
        assert_eq!((next.head, next.turns.len(), next.calls), (2, 0, 1));
        // Nothing more to fold: one step left.
        assert_eq!(plan(&after, &next, &Budget::new(3_000, 500, 0.75), None, 0), None);
    }

    #[test]
    fn a_cut_never_separates_a_call_from_its_result() {
        let (m, l) = context();
        for window in [2_000, 4_000, 8_000, 12_000, 16_000, 40_000] {
            let Some(p) = plan(&m, &l, &Budget::new(window, 500, 0.75), None, 0) else { continue };
            let (after, _) = apply(&m, &l, &p, "S");
            for (i, msg) in after.iter().enumerate() {
                if msg["role"] == "tool" {
                    let id = &msg["tool_call_id"];
                    let called = after[..i]
                        .iter()
                        .any(|a| a["tool_calls"].as_array().is_some_and(|cs| cs.iter().any(|c| &c["id"] == id)));
                    assert!(called, "window {window}: result {id} without its call");
                }
            }
            let folded = folded(&m, &l, &p);
            assert!(folded.first().is_none_or(|f| f["role"] != "tool"));
        }
    }

    #[test]
    fn the_summary_request_holds_the_transcript_and_the_earlier_summary() {
        let (m, l) = context();
        let p = Plan { turns: 1, steps: 0 };
        let req = summary_request(Some("earlier"), &folded(&m, &l, &p), 1 << 20);
        assert_eq!(req[0]["content"], SUMMARY_PROMPT);
        let t = req[1]["content"].as_str().unwrap();
        assert!(t.starts_with("Earlier summary:\nearlier") && t.contains("user: q0") && t.contains("assistant: a0"));
        let (m2, l2) = (m.clone(), l.clone());
        let all = summary_request(None, &folded(&m2, &l2, &Plan { turns: 3, steps: 1 }), 1 << 20);
        let t = all[1]["content"].as_str().unwrap();
        assert!(t.contains("[tool call] lookup({})") && t.contains("[tool result] xxx"));
        let short = summary_request(None, &folded(&m2, &l2, &Plan { turns: 3, steps: 1 }), 500);
        let t = short[1]["content"].as_str().unwrap();
        assert!(t.len() <= 560 && t.starts_with("[…the start is left out]"), "{}", t.len());
    }

    #[test]
    fn a_result_too_big_for_the_window_is_cut_to_fit_with_a_marker() {
        let (mut m, l) = context();
        m[11] = result("c2", &"z".repeat(50_000));
        assert!(shrink_results(&mut m, own_start(Some(&l)), 40_000));
        let cut = m[11]["content"].as_str().unwrap();
        assert!(cut.len() <= 10_000 + CUT_TO_FIT.len() && cut.ends_with(CUT_TO_FIT), "{}", cut.len());
        assert_eq!(m[9]["content"].as_str().unwrap().len(), 3_000, "the smaller result was enough to leave");
        // The memory is never cut here; nor below 1,000 characters.
        let (mut m, l) = context();
        assert!(!shrink_results(&mut m, own_start(Some(&l)), 1_000_000));
        assert!(m[9]["content"].as_str().unwrap().starts_with(&"x".repeat(1_000)));
        assert!(m[9]["content"].as_str().unwrap().ends_with(CUT_TO_FIT));
        assert_eq!(m[1]["content"].as_str().unwrap().len(), 3_003);
    }

    #[test]
    fn trimming_drops_the_oldest_turns_only_as_far_as_needed() {
        let (m, l) = context();
        let (after, next) = trim(&m, &l, &Budget::new(5_000, 500, 0.75), None, 0).unwrap();
        assert_eq!(next.turns.len(), 1);
        assert_eq!(after[1]["content"].as_str().unwrap()[..2], *"q2");
        assert!(trim(&m, &l, &Budget::new(500, 100, 0.75), None, 0).is_none());
    }
}
