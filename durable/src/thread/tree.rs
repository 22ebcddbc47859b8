//! The conversation as a tree: each run follows the run whose turn came
//! before it on its path (`RunRecord::parent`), and the conversation shows
//! one path, the active one, from the first turn to its leaf. Nothing
//! stored is rewritten to change the path: a turn that takes another
//! branch is a new run beside the one it leaves.
//!
//! Invariant: a run a regenerate replaced before the tree (storage v10) is
//! in no path; every other run's parent is a run of the tree, older than
//! it, so the path from any leaf ends at a first turn.

use crate::storage::store::RunLink;
use std::collections::HashMap;

/// Every run's place in the conversation, oldest first, and the active
/// path's leaf.
#[derive(Debug, Default)]
pub struct Tree {
    links: Vec<RunLink>,
    /// Each run's index in `links`.
    index: HashMap<String, usize>,
    /// The runs that follow each run (`None`: the first turns), by index,
    /// oldest first: a turn's siblings are found without reading the tree.
    children: HashMap<Option<String>, Vec<usize>>,
    /// The leaf a person chose or the newest run started (the thread's
    /// stored choice); `None` for a thread of before, whose leaf is its
    /// newest run.
    active: Option<String>,
}

/// The tree as last read, kept while the log does not grow: a history read
/// of a long conversation reads its page of turns, not every run's link.
///
/// Invariant: it is keyed by the log's last seq, and nothing changes the
/// tree without an event in the same commit (a run's start and finish, a
/// switch of branch, a fork's adoption), so a tree read at the same seq is
/// the tree. A commit that fails restores what it wrote and keeps the seq.
#[derive(Debug, Default)]
pub struct TreeCache(std::cell::RefCell<Option<(u64, std::rc::Rc<Tree>)>>);

impl TreeCache {
    /// The tree at `seq`: the one kept, else `read()` (then kept).
    pub fn at<E>(&self, seq: u64, read: impl FnOnce() -> Result<Tree, E>) -> Result<std::rc::Rc<Tree>, E> {
        if let Some((at, tree)) = self.0.borrow().as_ref() {
            if *at == seq {
                return Ok(tree.clone());
            }
        }
        let tree = std::rc::Rc::new(read()?);
        *self.0.borrow_mut() = Some((seq, tree.clone()));
        Ok(tree)
    }
}

/// What a message id names in the tree: a user message (by the newest run
/// that carries it: an answer again keeps its message's id) or an answer
/// (by its run's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'t> {
    Message(&'t RunLink),
    Answer(&'t RunLink),
}

impl Tree {
    /// The tree of `links` (oldest first), its active path ending at
    /// `active` when that is one of its runs, else at its newest run.
    pub fn new(links: Vec<RunLink>, active: Option<String>) -> Tree {
        let links: Vec<RunLink> = links.into_iter().filter(|l| !l.replaced).collect();
        let index = links.iter().enumerate().map(|(i, l)| (l.run_id.clone(), i)).collect();
        let mut children: HashMap<Option<String>, Vec<usize>> = HashMap::new();
        for (i, l) in links.iter().enumerate() {
            children.entry(l.parent.clone()).or_default().push(i);
        }
        Tree { links, index, children, active }
    }

    /// The runs that follow the same turn as `run` (itself included), oldest first.
    fn siblings<'a>(&'a self, run: &'a RunLink) -> impl Iterator<Item = &'a RunLink> + 'a {
        self.children.get(&run.parent).into_iter().flatten().map(|&i| &self.links[i])
    }

    fn get(&self, run_id: &str) -> Option<&RunLink> {
        self.index.get(run_id).map(|&i| &self.links[i])
    }

    /// The active path's leaf: the chosen one, else the newest run.
    pub fn leaf(&self) -> Option<&str> {
        match self.active.as_deref().and_then(|a| self.get(a)) {
            Some(chosen) => Some(&chosen.run_id),
            None => self.links.last().map(|l| l.run_id.as_str()),
        }
    }

    /// The path from the first turn to `leaf` (its ancestors, then itself);
    /// empty for a run that is not in the tree.
    pub fn path_to(&self, leaf: &str) -> Vec<&RunLink> {
        let mut path = Vec::new();
        let mut at = self.get(leaf);
        while let Some(link) = at {
            // A cycle cannot be stored (a parent is older than its child),
            // but a path is never longer than the tree.
            if path.len() == self.links.len() {
                break;
            }
            path.push(link);
            at = link.parent.as_deref().and_then(|p| self.get(p));
        }
        path.reverse();
        path
    }

    /// The active path, first turn first.
    pub fn path(&self) -> Vec<&RunLink> {
        self.leaf().map(|leaf| self.path_to(leaf)).unwrap_or_default()
    }

    /// The answer `run_id` names (a run of the tree).
    pub fn answer(&self, run_id: &str) -> Option<Target<'_>> {
        self.get(run_id).map(Target::Answer)
    }

    /// The user message `message_id` names, by the newest run carrying it
    /// (an answer again keeps its message's id).
    pub fn message(&self, message_id: &str) -> Option<Target<'_>> {
        self.links.iter().rev().find(|l| l.message_id == message_id).map(Target::Message)
    }

    /// What `id` names, an answer first (a queued message's id is also its
    /// run's: either way it names that turn).
    pub fn find(&self, id: &str) -> Option<Target<'_>> {
        self.answer(id).or_else(|| self.message(id))
    }

    /// Where run `run_id`'s answer stands among the answers to the same
    /// message at the same place (a regenerate's siblings: same parent,
    /// same message id), oldest first; `None` for a run not in the tree.
    pub fn answers(&self, run_id: &str) -> Option<Branch> {
        let run = self.get(run_id)?;
        let ids: Vec<String> =
            self.siblings(run).filter(|l| l.message_id == run.message_id).map(|l| l.run_id.clone()).collect();
        Branch::at(ids, &run.run_id)
    }

    /// Where run `run_id`'s user message stands among the messages that
    /// follow the same turn (an edit's siblings: same parent, each message
    /// once, by its first run), oldest first; `None` for a run not in the
    /// tree.
    pub fn messages(&self, run_id: &str) -> Option<Branch> {
        let run = self.get(run_id)?;
        let mut ids: Vec<String> = Vec::new();
        for l in self.siblings(run) {
            if !ids.contains(&l.message_id) {
                ids.push(l.message_id.clone());
            }
        }
        Branch::at(ids, &run.message_id)
    }

    /// The newest run at or under `run_id` (itself, or a run whose path
    /// passes through it): the leaf a switch to that branch shows.
    pub fn leaf_under(&self, run_id: &str) -> Option<&str> {
        let start = *self.index.get(run_id)?;
        let mut under = vec![false; self.links.len()];
        let mut leaf = start;
        under[start] = true;
        // A child is newer than its parent: one pass in order finds them all.
        for (i, l) in self.links.iter().enumerate().skip(start + 1) {
            if l.parent.as_deref().and_then(|p| self.index.get(p)).is_some_and(|&p| under[p]) {
                under[i] = true;
                leaf = i;
            }
        }
        Some(&self.links[leaf].run_id)
    }

    /// The leaf a switch to `target` shows: under an answer, its newest
    /// turn; under a user message, the newest turn under any of its
    /// answers at that place.
    pub fn leaf_of(&self, target: Target<'_>) -> Option<&str> {
        match target {
            Target::Answer(run) => self.leaf_under(&run.run_id),
            Target::Message(run) => self
                .siblings(run)
                .filter(|l| l.message_id == run.message_id)
                .filter_map(|l| self.leaf_under(&l.run_id))
                .max_by_key(|leaf| self.index.get(*leaf).copied()),
        }
    }
}

/// Where one message or answer stands among its siblings: `index` of
/// `count`, and the siblings' ids in order (a client's `< i/n >`; a
/// message's siblings are message ids, an answer's are run ids). As the
/// history views carry it: `{index, count, ids}`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Branch {
    pub index: usize,
    pub count: usize,
    pub ids: Vec<String>,
}

impl Branch {
    fn at(ids: Vec<String>, id: &str) -> Option<Branch> {
        let index = ids.iter().position(|i| i == id)?;
        Some(Branch { index, count: ids.len(), ids })
    }
}

#[cfg(test)]
mod tests {
    /// A tree is read again only when the log has grown.
    #[test]
    fn the_tree_is_read_once_per_position_of_the_log() {
        let cache = TreeCache::default();
        let reads = std::cell::Cell::new(0);
        let read = || -> Result<Tree, ()> {
            reads.set(reads.get() + 1);
            Ok(Tree::default())
        };
        cache.at(5, read).unwrap();
        cache.at(5, read).unwrap();
        assert_eq!(reads.get(), 1);
        cache.at(6, read).unwrap();
        assert_eq!(reads.get(), 2);
        assert!(cache.at(7, || Err::<Tree, _>("storage")).is_err(), "a failed read keeps nothing");
        cache.at(6, read).unwrap();
        assert_eq!(reads.get(), 2);
    }

    use super::*;

    fn link(run: &str, parent: Option<&str>, replaced: bool) -> RunLink {
        RunLink { run_id: run.into(), parent: parent.map(str::to_owned), message_id: format!("m-{run}"), replaced }
    }

    fn ids(path: Vec<&RunLink>) -> Vec<&str> {
        path.into_iter().map(|l| l.run_id.as_str()).collect()
    }

    #[test]
    fn the_active_path_runs_from_the_first_turn_to_the_newest_leaf() {
        let tree = Tree::new(
            vec![
                link("a", None, false),
                link("b", Some("a"), false),
                link("b-old", None, true),
                link("c", Some("b"), false),
                link("c2", Some("b"), false),
            ],
            None,
        );
        assert_eq!(tree.leaf(), Some("c2"));
        assert_eq!(ids(tree.path()), ["a", "b", "c2"]);
        assert_eq!(ids(tree.path_to("c")), ["a", "b", "c"]);
        assert!(tree.path_to("b-old").is_empty(), "a replaced answer is in no path");
        assert!(Tree::default().path().is_empty());
    }

    /// `a` was answered twice (`a2` regenerates it), `b` follows `a2` and was
    /// edited into `e` (a new message after the same turn), which was
    /// answered and followed by `f`.
    #[test]
    fn siblings_are_counted_where_they_branch() {
        let mut regenerated = link("a2", None, false);
        regenerated.message_id = "m-a".into();
        let tree = Tree::new(
            vec![
                link("a", None, false),
                regenerated,
                link("b", Some("a2"), false),
                link("e", Some("a2"), false),
                link("f", Some("e"), false),
            ],
            None,
        );
        let answers = tree.answers("a2").unwrap();
        assert_eq!((answers.index, answers.count, answers.ids), (1, 2, vec!["a".to_owned(), "a2".to_owned()]));
        assert_eq!(tree.answers("b").unwrap().count, 1, "one answer to `b`");
        let messages = tree.messages("e").unwrap();
        assert_eq!((messages.index, messages.count), (1, 2));
        assert_eq!(messages.ids, ["m-b", "m-e"]);
        assert_eq!(tree.messages("a").unwrap().count, 1, "`a` and `a2` are one message");
        assert_eq!(tree.answers("gone"), None);
        assert_eq!(tree.leaf_under("b"), Some("b"));
        assert_eq!(tree.leaf_under("e"), Some("f"));
        assert_eq!(tree.leaf_under("a2"), Some("f"));
        assert_eq!(tree.leaf_under("a"), Some("a"), "nothing follows the first answer");
        assert_eq!(ids(tree.path_to("b")), ["a2", "b"]);
    }

    #[test]
    fn a_parent_outside_the_tree_ends_the_path() {
        let tree = Tree::new(vec![link("a", Some("gone"), false), link("b", Some("a"), false)], None);
        assert_eq!(ids(tree.path()), ["a", "b"]);
    }
}
