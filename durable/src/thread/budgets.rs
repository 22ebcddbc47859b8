//! What the thread knows of its senders' budgets (`QUOTA`): learned with
//! each send from the sender's directory, plus what the thread's own turns
//! used since. A part that owns its fields and its rule: a budget counts
//! only within the period it was learned for (a new period starts from what
//! the directory says), and a queued message is checked against its
//! sender's as it starts.

use crate::agent::quota::{Budget, Limit, Period, Used};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Budgets {
    /// The quota's period (`QUOTA`); `None`: no quota, nobody is ever over.
    period: Option<Period>,
    known: BTreeMap<String, Budget>,
}

impl Budgets {
    pub fn new(period: Option<Period>) -> Budgets {
        Budgets { period, known: BTreeMap::new() }
    }

    /// What `actor`'s directory said of their budget: a new period replaces
    /// what was known; within one, the limit is the directory's and what was
    /// used the larger of the two counts (the thread's own turns may be
    /// ahead of the directory's).
    pub fn learn(&mut self, actor: &str, budget: Budget) {
        let known = self.known.entry(actor.to_owned()).or_insert(budget);
        if known.since != budget.since {
            *known = budget;
        } else {
            known.limit = budget.limit;
            known.used = Used {
                tokens: known.used.tokens.max(budget.used.tokens),
                cost_usd: known.used.cost_usd.max(budget.used.cost_usd),
            };
        }
    }

    /// Whether `actor` has spent their budget for the period holding `now`,
    /// as far as the thread knows.
    pub fn over(&self, actor: &str, now: i64) -> bool {
        let Some(period) = self.period else { return false };
        self.known.get(actor).is_some_and(|b| b.since == period.window(now).0 && b.limit.exhausted(b.used))
    }

    /// Adds `used` to what `actor` spent in the period holding `now` (their
    /// model calls' charges).
    pub fn add_usage(&mut self, actor: &str, used: Used, now: i64) {
        let Some(period) = self.period else { return };
        if let Some(b) = self.known.get_mut(actor).filter(|b| b.since == period.window(now).0) {
            b.used = b.used + used;
        }
    }

    /// `actor`'s limit, when the thread has learned their budget.
    pub fn limit(&self, actor: &str) -> Option<Limit> {
        self.known.get(actor).map(|b| b.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    fn budget(tokens: u64, used: u64, since: i64) -> Budget {
        Budget {
            limit: Limit { tokens: Some(tokens), cost_usd: None },
            used: Used { tokens: used, cost_usd: 0.0 },
            since,
        }
    }

    #[test]
    fn a_budget_counts_within_its_period_and_the_larger_count_wins() {
        let mut b = Budgets::new(Some(Period::Hour));
        b.learn("ann", budget(100, 40, 0));
        assert!(!b.over("ann", 10));
        b.add_usage("ann", Used { tokens: 60, cost_usd: 0.0 }, 10);
        assert!(b.over("ann", 10), "the thread's own turns count");
        // The directory is behind the thread within the period: the larger count stays.
        b.learn("ann", budget(100, 50, 0));
        assert!(b.over("ann", 10));
        // Another period: what was spent before does not count, nor is it added to.
        assert!(!b.over("ann", HOUR + 1));
        b.add_usage("ann", Used { tokens: 500, cost_usd: 0.0 }, HOUR + 1);
        b.learn("ann", budget(100, 5, HOUR));
        assert!(!b.over("ann", HOUR + 1));
        assert_eq!(b.limit("ann").and_then(|l| l.tokens), Some(100));
        assert_eq!(b.limit("bob"), None);
    }

    #[test]
    fn without_a_quota_nobody_is_over() {
        let mut b = Budgets::new(None);
        b.learn("ann", budget(1, 5, 0));
        assert!(!b.over("ann", 0));
    }
}
