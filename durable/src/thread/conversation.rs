//! The conversation as the protocols read it: the log a page at a time, a
//! run's record and its records, the runs the conversation shows with their
//! messages and agent trees, what the thread used, and the memory a new run
//! starts from.
//!
//! A [`Conversation`] borrows the thread's store read-only, so nothing read
//! through it can change the thread; protocols read a thread here, never
//! through its store, so what a protocol may see of a thread is this file.
//! Which runs a conversation shows is decided once, by [`shown`].

use super::error::Error;
use super::tree::{Branch, Target, Tree, TreeCache};
use crate::agent::context::Memory;
use crate::log::event::payload::ContextCompacted;
use crate::log::event::Event;
use crate::log::queued::Queue;
use crate::log::reducer::{self, AgentNode};
use crate::storage::store::{Confirmation, Record, RunLink, RunRecord, Store};
use serde_json::{json, Value};

/// One turn of the conversation ([`Conversation::turns`]): a run it shows
/// (the user's message and what answered it), the run's events, and where
/// its message and its answer stand among their siblings.
#[derive(Clone, Debug)]
pub struct TurnRead {
    pub run: RunRecord,
    pub events: Vec<Event>,
    pub branches: Branches,
    /// The thread the turn is of, when not this one: a fork's shared turn
    /// is its source's (its files are read there).
    pub home: Option<String>,
}

/// Where a turn stands in the tree: its user message among the messages
/// after the same turn (edits), its answer among the answers to the same
/// message (regenerates). `None` where it has no sibling: a view leaves
/// the field out, so a conversation that never branched (every thread of
/// before) reads as it did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Branches {
    pub message: Option<Branch>,
    pub answer: Option<Branch>,
}

impl Branches {
    fn of(tree: &Tree, run: &RunRecord) -> Branches {
        let branched = |b: Option<Branch>| b.filter(|b| b.count > 1);
        Branches { message: branched(tree.messages(&run.run_id)), answer: branched(tree.answers(&run.run_id)) }
    }
}

impl TurnRead {
    /// The root agent's tree, folded from the turn's events: its text,
    /// reasoning, tool calls and sub-agents.
    pub fn root(&self) -> Option<AgentNode> {
        reducer::fold(&self.events).tree()
    }

    /// The quiet marker a history view shows on the turn's answer: the
    /// last compaction of the model's context made during it (or asked for
    /// after it), which every later turn's context starts from.
    pub fn compacted(&self) -> Option<ContextCompacted> {
        self.events.iter().rev().find_map(|e| match &e.payload {
            crate::log::event::Payload::ContextCompacted(c) => Some(c.clone()),
            _ => None,
        })
    }

    /// The thread the turn is of: `here`, or a fork's source.
    pub fn thread<'a>(&'a self, here: &'a str) -> &'a str {
        self.home.as_deref().unwrap_or(here)
    }
}

/// How far a memory is read ([`Conversation::history`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Recall {
    /// The most bytes of turns read (more could not be sent: the model's
    /// limit at the estimate's three bytes a token).
    pub max_bytes: usize,
    /// Tool results of turns older than this many are stubs when larger
    /// than `age_bytes` (0: never).
    pub age_turns: usize,
    pub age_bytes: usize,
}

impl Recall {
    /// As a run with `cfg` reads it.
    pub fn of(cfg: &crate::agent::AgentConfig) -> Recall {
        Recall { max_bytes: cfg.budget().limit() as usize * 3, age_turns: cfg.age_turns, age_bytes: cfg.age_bytes }
    }
}

/// One run as the memory holds it, before it is written as messages.
struct Remembered {
    run: RunRecord,
    /// Its message is in (not when a compaction covered its first calls).
    with_message: bool,
    /// Its root agent's tool calls: name, arguments, outcome.
    calls: Vec<(String, String, String)>,
    text: String,
    bytes: usize,
}

impl Remembered {
    /// The turn as chat messages: the user's (with its files), then the
    /// answer with its tool calls in brackets, a result longer than
    /// `aged` bytes as a stub.
    fn messages(&self, files_prefix: &str, aged: Option<usize>) -> Vec<Value> {
        let mut out = Vec::new();
        if self.with_message {
            out.push(crate::agent::memory_message(&self.run.message, &self.run.turn.attachments, files_prefix));
        }
        let mut answer = String::new();
        for (name, args, outcome) in &self.calls {
            match aged.filter(|max| outcome.len() > *max) {
                Some(_) => answer.push_str(&format!(
                    "[tool {name}({args}) → a result of {} characters, left out here: the whole result is in the thread's history]\n",
                    outcome.chars().count()
                )),
                None => answer.push_str(&format!("[tool {name}({args}) → {outcome}]\n")),
            }
        }
        answer.push_str(&self.text);
        if !answer.is_empty() {
            out.push(json!({ "role": "assistant", "content": answer }));
        }
        out
    }
}

/// Whether a conversation shows `run`: every run but an answer a
/// regenerate replaced. The one rule every history view applies, through
/// [`Conversation::turns`] (and the memory a run starts from).
fn shown(run: &RunRecord) -> bool {
    !run.replaced
}

/// A thread's conversation, read in one synchronous block
/// ([`Thread::conversation`](super::Thread::conversation)): the log's last
/// seq and the queue are as they were when it was taken.
pub struct Conversation<'t, S: Store> {
    store: &'t S,
    thread_id: &'t str,
    last_seq: u64,
    queue: &'t Queue,
    /// On a fork, the source's turns its history shares, as far as the
    /// request being served brought them ([`Thread::share`](super::Thread::share)).
    shared: Option<&'t Shared>,
    /// The thread's tree as last read ([`TreeCache`]); none for a
    /// conversation read apart from its thread.
    trees: Option<&'t TreeCache>,
}

/// A window of a fork's shared turns: `turns` are the shared history's
/// turns from index `at`, of `total` (oldest first).
#[derive(Clone, Debug, Default)]
pub struct Shared {
    pub at: usize,
    pub total: usize,
    pub turns: Vec<TurnRead>,
}

impl Shared {
    /// Shared turn `i` (of the whole shared history), when the window has it.
    fn get(&self, i: usize) -> Option<&TurnRead> {
        i.checked_sub(self.at).and_then(|k| self.turns.get(k))
    }
}

impl<'t, S: Store> Conversation<'t, S> {
    pub(super) fn new(store: &'t S, thread_id: &'t str, last_seq: u64, queue: &'t Queue) -> Self {
        Conversation { store, thread_id, last_seq, queue, shared: None, trees: None }
    }

    /// The conversation reading its tree through the thread's cache.
    pub(super) fn with_trees(self, trees: &'t TreeCache) -> Self {
        Conversation { trees: Some(trees), ..self }
    }

    /// The conversation with a fork's shared turns before its own.
    pub(super) fn with_shared(self, shared: &'t Shared) -> Self {
        Conversation { shared: Some(shared), ..self }
    }

    /// How many turns the fork's shared history has: as the request's
    /// window of it says (0 when the source is gone), else as the fork was
    /// made; 0 on a thread that is no fork.
    fn shared_total(&self) -> usize {
        match self.shared {
            Some(s) => s.total,
            None => self.forked_from().ok().flatten().map_or(0, |f| f.turns),
        }
    }

    /// The own path's turn count, for a fork's window of its history.
    pub fn path_len(&self) -> Result<usize, Error> {
        Ok(self.tree()?.path().len())
    }

    /// The thread's title: a fork's is its source's; else its first turn's
    /// message's, as the agent titled it (`None` before a first turn).
    pub fn title(&self) -> Result<Option<String>, Error> {
        if let Some(from) = self.forked_from()? {
            return Ok(Some(from.title));
        }
        let tree = self.tree()?;
        let Some(first) = tree.path().first().map(|l| l.run_id.clone()) else { return Ok(None) };
        Ok(self.store.run(&first)?.map(|r| crate::agent::title_for(&r.message, &r.turn.attachments)))
    }

    /// Where the thread was forked from, when it is a fork.
    pub fn forked_from(&self) -> Result<Option<super::meta::ForkedFrom>, Error> {
        super::meta::forked_from(self.store)
    }

    /// The thread's id, as the Worker routed it.
    pub fn thread_id(&self) -> &'t str {
        self.thread_id
    }

    /// The log's last seq when the conversation was taken.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The messages waiting to run, as stored.
    pub fn queue(&self) -> &'t Queue {
        self.queue
    }
    /// The log's records after `after` up to `up_to`, at most `limit`.
    pub fn log_page(&self, after: u64, up_to: u64, limit: usize) -> Result<Vec<Record>, Error> {
        Ok(self.store.read_range(after, up_to, limit)?)
    }

    /// A run of this thread, or `None`.
    pub fn run(&self, run_id: &str) -> Result<Option<RunRecord>, Error> {
        Ok(self.store.run(run_id)?)
    }

    /// A run of this thread, or 404 `run_not_found`.
    pub fn known_run(&self, run_id: &str) -> Result<RunRecord, Error> {
        self.run(run_id)?.ok_or(Error::RunNotFound)
    }

    /// Every record of a run, in order.
    pub fn run_records(&self, run_id: &str) -> Result<Vec<Record>, Error> {
        Ok(self.store.run_records(run_id)?)
    }

    /// A run's records after `after`, at most `limit`.
    pub fn run_page(&self, run_id: &str, after: u64, limit: usize) -> Result<Vec<Record>, Error> {
        Ok(self.store.run_range(run_id, after, limit)?)
    }

    /// The events of one run, parsed back from the log.
    pub fn run_events(&self, run_id: &str) -> Result<Vec<Event>, Error> {
        run_events(self.store, run_id)
    }

    /// The request for a person a tool call raised, whatever its state.
    pub fn request_for_call(&self, tool_call_id: &str) -> Result<Option<Confirmation>, Error> {
        Ok(self.store.confirmation_by_call(tool_call_id)?)
    }

    /// A stored producer's state (Durable Streams' idempotent appends), by
    /// its key.
    pub fn producer_state<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        Ok(self.store.meta(key)?.and_then(|v| serde_json::from_str(&v).ok()))
    }

    /// The active path's leaf: the stored choice ([`LEAF_KEY`](super::meta::LEAF_KEY))
    /// when it names a run, else (a thread of before) the newest run in the
    /// tree, read from the newest runs down: a send reads a run or two, not
    /// the whole tree.
    pub fn leaf(&self) -> Result<Option<String>, Error> {
        const PAGE: usize = 8;
        if let Some(leaf) = self.chosen_leaf()? {
            return Ok(Some(leaf));
        }
        for page in 0.. {
            let (runs, total) = self.store.runs_page(page * PAGE, PAGE)?;
            if let Some(run) = runs.iter().find(|r| !r.replaced) {
                return Ok(Some(run.run_id.clone()));
            }
            if (page + 1) * PAGE >= total {
                break;
            }
        }
        Ok(None)
    }

    /// The stored leaf, when it names a run of the tree.
    fn chosen_leaf(&self) -> Result<Option<String>, Error> {
        let Some(leaf) = self.store.meta(super::meta::LEAF_KEY)? else { return Ok(None) };
        Ok(self.store.run(&leaf)?.filter(shown).map(|r| r.run_id))
    }

    /// The conversation's tree: every run's place in it, and the active
    /// path's leaf ([`Tree`]).
    pub fn tree(&self) -> Result<std::rc::Rc<Tree>, Error> {
        let read = || -> Result<Tree, Error> {
            Ok(Tree::new(self.store.run_links()?, self.store.meta(super::meta::LEAF_KEY)?))
        };
        match self.trees {
            Some(cache) => cache.at(self.last_seq, read),
            None => read().map(std::rc::Rc::new),
        }
    }

    /// The answer `id` names: itself when it is an answer (a run id), else
    /// an answer to the user message it names (the one on the active path
    /// when it is there); `None` when it names neither. For a client that
    /// asks for a message's answer again by the message's id.
    pub fn answer_to(&self, id: &str) -> Result<Option<String>, Error> {
        let tree = self.tree()?;
        Ok(match tree.find(id) {
            Some(Target::Answer(run)) => Some(run.run_id.clone()),
            Some(Target::Message(run)) => {
                let on_path = tree.path().into_iter().find(|l| l.message_id == id).map(|l| l.run_id.clone());
                Some(on_path.unwrap_or_else(|| run.run_id.clone()))
            }
            None => None,
        })
    }

    /// How many runs the thread has had, replaced ones included.
    pub fn run_count(&self) -> Result<usize, Error> {
        Ok(self.store.runs_page(0, 1)?.1)
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

    /// Page `page` of `limit` turns of the active path (newest page first),
    /// oldest first within it, each with its events, read once; and how
    /// many turns the path has (the pages there are; other branches' runs
    /// are in none). What every protocol's messages view is made of, in its
    /// own words: protocols read the conversation here, never through the
    /// store. A fork's shared turns come first, then its own.
    pub fn turns(&self, limit: usize, page: usize) -> Result<(Vec<TurnRead>, usize), Error> {
        let tree = self.tree()?;
        let path = tree.path();
        let total = self.shared_total() + path.len();
        let (start, end) = page_window(total, limit, page);
        Ok((self.read_turns(&tree, &path, start, end)?, total))
    }

    /// Turns `start..end` of the path through `run_id`, oldest first (a
    /// fork's shared turns first): what a fork made at it shares.
    pub fn turns_through(&self, run_id: &str, start: usize, end: usize) -> Result<Vec<TurnRead>, Error> {
        let tree = self.tree()?;
        if tree.answer(run_id).is_none() {
            return Err(Error::RunNotFound);
        }
        self.read_turns(&tree, &tree.path_to(run_id), start, end)
    }

    /// Turns `start..end` of a fork's shared turns followed by `path`
    /// (this thread's own), as far as there are: the shared ones from the
    /// window the request brought, the own ones read from the store.
    fn read_turns(&self, tree: &Tree, path: &[&RunLink], start: usize, end: usize) -> Result<Vec<TurnRead>, Error> {
        let shared = self.shared_total();
        let end = end.min(shared + path.len());
        let mut turns = Vec::with_capacity(end.saturating_sub(start));
        for i in start..end {
            match i.checked_sub(shared) {
                None => turns.extend(self.shared.and_then(|s| s.get(i)).cloned()),
                Some(own) => turns.extend(self.turn(tree, &path[own].run_id)?),
            }
        }
        Ok(turns)
    }

    /// How many turns the path through `run_id` has, a fork's shared ones
    /// included: what a fork made at it shares.
    pub fn turns_through_count(&self, run_id: &str) -> Result<usize, Error> {
        Ok(self.shared_total() + self.tree()?.path_to(run_id).len())
    }

    /// One of this thread's turns, read; `None` for a run it does not show.
    fn turn(&self, tree: &Tree, run_id: &str) -> Result<Option<TurnRead>, Error> {
        let Some(run) = self.store.run(run_id)?.filter(shown) else { return Ok(None) };
        let events = self.run_events(&run.run_id)?;
        let branches = Branches::of(tree, &run);
        Ok(Some(TurnRead { run, events, branches, home: None }))
    }

    /// `GET /instance-ai/threads/:threadId/usage`: what the thread's runs
    /// used, per model: every run's (an answer given again and a branch
    /// left count: their tokens were spent), and under `activePath` the
    /// runs of the path the conversation shows.
    pub fn usage(&self) -> Result<Value, Error> {
        const PAGE: usize = 500;
        let path: std::collections::HashSet<String> =
            self.tree()?.path().into_iter().map(|l| l.run_id.clone()).collect();
        let (mut runs, mut on_path) = (Vec::new(), Vec::new());
        for page in 0.. {
            let (rows, total) = self.store.runs_page(page * PAGE, PAGE)?;
            for r in &rows {
                let Some(used) = r.usage.as_deref().and_then(|u| crate::agent::usage::of_run(u, r.model.as_deref()))
                else {
                    continue;
                };
                if path.contains(&r.run_id) {
                    on_path.push(used.clone());
                }
                runs.push(used);
            }
            if rows.len() < PAGE || (page + 1) * PAGE >= total {
                break;
            }
        }
        let mut out = crate::agent::usage::view(crate::agent::usage::sum(runs), None);
        out["threadId"] = self.thread_id.to_owned().into();
        out["activePath"] = crate::agent::usage::view(crate::agent::usage::sum(on_path), None);
        Ok(out)
    }

    /// What a new run `run_id` remembers: the conversation on its path
    /// before it (else the active path), as [`Conversation::memory_of`] reads it.
    pub fn history(&self, run_id: &str, recall: &Recall) -> Result<Memory, Error> {
        let tree = self.tree()?;
        let mut path = tree.path_to(run_id);
        if path.is_empty() {
            path = tree.path();
        }
        let before: Vec<&str> = path.iter().map(|l| l.run_id.as_str()).filter(|r| *r != run_id).collect();
        self.memory_of(&before, recall)
    }

    /// The memory of the path through `run_id`, that run included: what a
    /// fork made at it remembers.
    pub fn memory_through(&self, run_id: &str, recall: &Recall) -> Result<Memory, Error> {
        let tree = self.tree()?;
        let path: Vec<&str> = tree.path_to(run_id).iter().map(|l| l.run_id.as_str()).collect();
        self.memory_of(&path, recall)
    }

    /// The memory of `path`'s runs (oldest first), read newest first, run
    /// by run, down to the newest compaction through one of them (its
    /// summary stands for everything before), or as far as `recall` lets
    /// (what a thread never compacted remembers within its model's window).
    /// On a fork, the shared memory comes before its own turns.
    ///
    /// Invariant: a run's memory is read from its own path only: a
    /// compaction summarises the path up to the run it runs through, which
    /// in a tree is that run's path alone, so a branch never remembers
    /// another branch's turns.
    fn memory_of(&self, path: &[&str], recall: &Recall) -> Result<Memory, Error> {
        let mut newest_first: Vec<Remembered> = Vec::new();
        let mut summary = None;
        let mut used = 0;
        let mut full = false;
        for run_id in path.iter().rev() {
            if let Some(c) = self.compaction(run_id)? {
                summary = Some(c.summary);
                // Compacted while it ran: its message and later calls remain.
                if let Some(calls) = c.calls {
                    newest_first.extend(self.remembered(run_id, calls as usize)?);
                }
                break;
            }
            let Some(turn) = self.remembered(run_id, 0)? else { continue };
            if used + turn.bytes > recall.max_bytes {
                full = true;
                break;
            }
            used += turn.bytes;
            newest_first.push(turn);
        }
        let mut turns = Vec::new();
        if summary.is_none() && !full {
            if let Some(from) = self.forked_from()? {
                let shared: Vec<Value> = self
                    .store
                    .meta(super::meta::FORK_MEMORY_KEY)?
                    .and_then(|m| serde_json::from_str(&m).ok())
                    .unwrap_or_default();
                let (s, rest) = Memory::parse(shared);
                let folded = self.compaction(&from.run_id)?;
                if folded.is_none() && !rest.is_empty() {
                    turns.push((from.run_id.clone(), rest));
                }
                summary = folded.map(|c| c.summary).or(s);
            }
        }
        // Large tool results age in blocks of `age_turns`, so what is sent
        // changes once every so many turns, not at every turn.
        let count = newest_first.len();
        let aged = match recall.age_turns {
            0 => 0,
            n => (count.saturating_sub(n) / n) * n,
        };
        let prefix = self.files_prefix()?.unwrap_or_default();
        for (i, turn) in newest_first.into_iter().rev().enumerate() {
            let messages = turn.messages(&prefix, (i < aged).then_some(recall.age_bytes));
            turns.push((turn.run.run_id.clone(), messages));
        }
        Ok(Memory { summary, turns })
    }

    /// The provider's count of the thread's last model call against its
    /// estimate, when one was reported.
    pub fn calibration(&self) -> Result<Option<crate::agent::context::Calibration>, Error> {
        Ok(self.store.meta(super::meta::CALIBRATION_KEY)?.and_then(|c| serde_json::from_str(&c).ok()))
    }

    /// The compaction through `run_id`, as stored.
    pub fn compaction(&self, run_id: &str) -> Result<Option<ContextCompacted>, Error> {
        Ok(self.store.compaction(run_id)?.and_then(|d| serde_json::from_str(&d).ok()))
    }

    /// One run as the memory holds it: its message, its root agent's tool
    /// calls after the first `skip` (each with its outcome) and its answer.
    fn remembered(&self, run_id: &str, skip: usize) -> Result<Option<Remembered>, Error> {
        let Some(run) = self.store.run(run_id)?.filter(shown) else { return Ok(None) };
        let folded = reducer::fold(&self.run_events(&run.run_id)?);
        let mut calls = Vec::new();
        let mut text = String::new();
        if let Some(root) = folded.tree() {
            for tc in root.tool_calls.iter().skip(skip) {
                let outcome = match (&tc.result, &tc.error) {
                    (Some(r), _) => r.to_string(),
                    (_, Some(e)) => format!("error: {e}"),
                    _ => "no result".into(),
                };
                calls.push((tc.tool_name.clone(), tc.args.to_string(), outcome));
            }
            text = root.text_content;
        }
        let bytes = run.message.len()
            + text.len()
            + calls.iter().map(|(n, a, o)| n.len() + a.len() + o.len() + 12).sum::<usize>();
        Ok(Some(Remembered { run, with_message: skip == 0, calls, text, bytes }))
    }

    /// Where the thread's files are: the prefix of every key (none before a
    /// file was reserved).
    pub fn files_prefix(&self) -> Result<Option<String>, Error> {
        Ok(self.stored_generation()?.map(|g| crate::files::prefix(self.thread_id, g)))
    }

    /// The actor who created the thread.
    pub fn owner(&self) -> Result<Option<String>, Error> {
        Ok(self.store.meta(super::meta::OWNER_KEY)?)
    }

    /// The thread's pinned model, if any.
    pub fn pin(&self) -> Result<Option<String>, Error> {
        Ok(self.store.meta(super::meta::PIN_KEY)?)
    }

    /// The run's last checkpoint; an unreadable one counts as none.
    pub fn checkpoint(&self, run_id: &str) -> Result<Option<crate::agent::Checkpoint>, Error> {
        let data = self.store.checkpoint(run_id)?;
        Ok(data.and_then(|d| serde_json::from_str(&d).ok()))
    }

    /// The log's generation if one was drawn (a log never read from a
    /// position has none yet).
    pub fn stored_generation(&self) -> Result<Option<u64>, Error> {
        super::meta::stored_generation(self.store)
    }
}

/// Page `page` of `limit` turns of `total`, newest page first: the turns'
/// indices `start..end`, oldest first.
pub fn page_window(total: usize, limit: usize, page: usize) -> (usize, usize) {
    let end = total.saturating_sub(page.saturating_mul(limit));
    (end.saturating_sub(limit), end)
}

/// Every event of a run, in order (a record that does not read back is
/// left out).
pub(super) fn run_events<S: Store>(store: &S, run_id: &str) -> Result<Vec<Event>, Error> {
    let records = store.run_records(run_id)?;
    Ok(records.iter().filter_map(|r| serde_json::from_str(&r.data).ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::MemoryStore;
    use crate::storage::store::RunState;

    fn run(id: &str, message: &str, at: i64, replaced: bool, parent: Option<&str>) -> RunRecord {
        RunRecord {
            message: message.into(),
            state: RunState::Completed,
            created_at: at,
            finished_at: Some(at + 1),
            replaced,
            parent: parent.map(str::to_owned),
            ..RunRecord::running(id)
        }
    }

    /// `r2`'s answer was replaced (before the tree: it is in no path), `r3`
    /// follows `r1`.
    fn store() -> MemoryStore {
        let mut s = MemoryStore::default();
        let runs = [
            run("r1", "first", 1, false, None),
            run("r2", "answered twice", 2, true, None),
            run("r3", "again", 3, false, Some("r1")),
        ];
        s.commit(&[], &runs).unwrap();
        s
    }

    /// A replaced answer is in the store and in the thread's usage, never in
    /// what the conversation shows or in the memory a run starts from.
    #[test]
    fn the_conversation_shows_every_run_but_a_replaced_answer() {
        let s = store();
        let queue = Queue::default();
        let c = Conversation::new(&s, "t", 0, &queue);
        let (turns, total) = c.turns(10, 0).unwrap();
        assert_eq!(turns.iter().map(|t| t.run.run_id.as_str()).collect::<Vec<_>>(), ["r1", "r3"]);
        assert_eq!(total, 2, "the total counts the active path's runs");
        let recall = Recall { max_bytes: 10_000, age_turns: 0, age_bytes: 0 };
        let memory = c.history("none", &recall).unwrap().messages();
        let said: Vec<_> = memory.iter().map(|m| m["content"].to_string()).collect();
        assert!(said.iter().all(|m| !m.contains("answered twice")), "{said:?}");
        assert_eq!(memory.len(), 2, "two user messages without answers: {memory:?}");
    }

    /// Pages are of the active path: a run on no path takes no place.
    #[test]
    fn pages_run_newest_first_and_oldest_first_within() {
        let s = store();
        let queue = Queue::default();
        let c = Conversation::new(&s, "t", 0, &queue);
        let ids = |page: Vec<TurnRead>| page.into_iter().map(|t| t.run.run_id).collect::<Vec<_>>();
        assert_eq!(ids(c.turns(1, 0).unwrap().0), ["r3"]);
        assert_eq!(ids(c.turns(1, 1).unwrap().0), ["r1"]);
        assert!(c.turns(1, 2).unwrap().0.is_empty());
        assert_eq!(ids(c.turns(2, 0).unwrap().0), ["r1", "r3"]);
        assert_eq!(c.leaf().unwrap().as_deref(), Some("r3"));
        assert_eq!(c.tree().unwrap().leaf(), Some("r3"), "the leaf read alone is the tree's");
    }

    /// Past a page of replaced answers, the leaf is still found.
    #[test]
    fn the_leaf_is_the_newest_run_no_regenerate_replaced() {
        let mut s = MemoryStore::default();
        let mut runs = vec![run("r0", "kept", 0, false, None)];
        runs.extend((1..20).map(|i| run(&format!("r{i}"), "replaced", i, true, None)));
        s.commit(&[], &runs).unwrap();
        let queue = Queue::default();
        let c = Conversation::new(&s, "t", 0, &queue);
        assert_eq!(c.leaf().unwrap().as_deref(), Some("r0"));
        assert_eq!(Conversation::new(&MemoryStore::default(), "t", 0, &queue).leaf().unwrap(), None);
        assert!(c.known_run("r99").is_err_and(|e| matches!(e, Error::RunNotFound)));
    }
}
