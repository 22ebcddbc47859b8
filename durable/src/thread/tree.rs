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

/// Every run's place in the conversation, oldest first.
#[derive(Debug, Default)]
pub struct Tree {
    links: Vec<RunLink>,
}

impl Tree {
    pub fn new(links: Vec<RunLink>) -> Tree {
        Tree { links: links.into_iter().filter(|l| !l.replaced).collect() }
    }

    fn get(&self, run_id: &str) -> Option<&RunLink> {
        self.links.iter().find(|l| l.run_id == run_id)
    }

    /// The active path's leaf: the newest run of the tree (what
    /// [`Conversation::leaf`](super::Conversation::leaf) reads without the
    /// tree).
    pub fn leaf(&self) -> Option<&str> {
        self.links.last().map(|l| l.run_id.as_str())
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(run: &str, parent: Option<&str>, replaced: bool) -> RunLink {
        RunLink { run_id: run.into(), parent: parent.map(str::to_owned), message_id: format!("m-{run}"), replaced }
    }

    fn ids(path: Vec<&RunLink>) -> Vec<&str> {
        path.into_iter().map(|l| l.run_id.as_str()).collect()
    }

    #[test]
    fn the_active_path_runs_from_the_first_turn_to_the_newest_leaf() {
        let tree = Tree::new(vec![
            link("a", None, false),
            link("b", Some("a"), false),
            link("b-old", None, true),
            link("c", Some("b"), false),
            link("c2", Some("b"), false),
        ]);
        assert_eq!(tree.leaf(), Some("c2"));
        assert_eq!(ids(tree.path()), ["a", "b", "c2"]);
        assert_eq!(ids(tree.path_to("c")), ["a", "b", "c"]);
        assert!(tree.path_to("b-old").is_empty(), "a replaced answer is in no path");
        assert!(Tree::default().path().is_empty());
    }

    #[test]
    fn a_parent_outside_the_tree_ends_the_path() {
        let tree = Tree::new(vec![link("a", Some("gone"), false), link("b", Some("a"), false)]);
        assert_eq!(ids(tree.path()), ["a", "b"]);
    }
}
