//! What the thread's model calls cost their senders ([`crate::agent::charge`]):
//! each call held before it is made, settled when it ends, and kept until
//! the sender's directory has it.
//!
//! Invariants enforced here:
//! - every model call of a run (its sub-agents' and background sub-agents'
//!   included) is charged to the actor whose turn the run is, once: a
//!   charge's id is unique, stored before the call, and the directory
//!   counts an id once;
//! - however a call ends (answered, cut by length, its tools cancelled, the
//!   run cancelled or failed, the instance gone, the thread deleted or
//!   expired) its charge is settled: what the provider reported, else the
//!   estimate of what was sent and streamed;
//! - a charge leaves the thread's storage only once its directory took it.

use super::budgets::Budgets;
use super::error::Error;
use super::{Sink, Thread};
use crate::agent::charge::{Charge, Spend};
use crate::agent::models::Price;
use crate::agent::quota::Period;
use crate::directory::Op;
use crate::effect::Effect;
use crate::storage::store::Store;
use crate::wire::ids;

/// A call's hold, as the thread took it.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    /// The charge's id: settle the call with it.
    pub id: String,
    /// With `QUOTA` and a sender's limit: the hold to ask their directory
    /// for (a refusal means the call must not be made: release it).
    pub ask: Option<(String, Op)>,
}

/// First retry of a delivery that failed, doubled up to [`RETRY_MAX_MS`].
const RETRY_MS: i64 = 2_000;
const RETRY_MAX_MS: i64 = 300_000;

/// Most charges one delivery carries (an op travels in one header).
const BATCH: usize = 20;

/// When undelivered charges are next tried, and the wait before that
/// (doubled after each failure, up to [`RETRY_MAX_MS`]); `None` when
/// nothing is owed.
#[derive(Debug, Default)]
pub struct Retry(Option<(i64, i64)>);

impl Retry {
    /// When undelivered charges are next tried (the alarm's).
    pub fn next_at(&self) -> Option<i64> {
        self.0.map(|(at, _)| at)
    }
}

/// A thread's charges: its store's charge rows, the retry of their
/// delivery, and what the thread knows of its senders' budgets, borrowed
/// from the thread ([`Thread::charges`]) so a charge changes here and
/// nowhere else.
pub struct Charges<'t, S> {
    store: &'t mut S,
    retry: &'t mut Retry,
    budgets: &'t mut Budgets,
    thread_id: &'t str,
    ids: &'t dyn ids::Random,
    quota_period: Option<Period>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// The thread's charges, to hold, settle and deliver.
    pub fn charges(&mut self) -> Charges<'_, S> {
        let (store, thread_id) = self.journal.store_and_id();
        Charges {
            store,
            retry: &mut self.charge_retry,
            budgets: &mut self.budgets,
            thread_id,
            ids: &*self.ids,
            quota_period: self.config.quota_period,
        }
    }
}

impl<S: Store> Charges<'_, S> {
    /// Holds what a model call of run `run_id` may use (`spend`, at `price`,
    /// on `model`), for the actor whose turn the run is. `None` when the run
    /// has no actor to charge (an unauthenticated caller's).
    pub fn hold(
        &mut self,
        run_id: &str,
        model: Option<&str>,
        spend: Spend,
        price: Option<Price>,
        now: i64,
    ) -> Result<Option<Held>, Error> {
        let Some(run) = self.store.run(run_id)? else { return Ok(None) };
        let Some(actor) = run.turn.actor.clone() else { return Ok(None) };
        let id = ids::scoped(self.thread_id, &self.ids.id("charge"));
        let charge = Charge {
            id: id.clone(),
            actor: actor.clone(),
            run_id: run_id.to_owned(),
            at: now,
            model: model.map(str::to_owned),
            spend,
            held: true,
            estimated: false,
            price: price.map(|p| (p.input, p.output)),
        };
        self.store.put_charge(&charge)?;
        // Held against the limit the sender's last send carried: a run
        // resumed after a restart, before its sender sends again, is
        // charged but held against none (docs/agents.md, "Budgets").
        let limit = self.budgets.limit(&actor);
        let ask = match (self.quota_period, limit) {
            (Some(period), Some(limit)) => {
                let since = period.window(now).0;
                Some((actor, Op::Hold { id: id.clone(), at: now, spend, limit, since }))
            }
            _ => None,
        };
        Ok(Some(Held { id, ask }))
    }

    /// The directory refused a hold: the call is not made, and costs
    /// nothing.
    pub fn release(&mut self, id: &str) -> Result<(), Error> {
        Ok(self.store.delete_charge(id)?)
    }

    /// A call ended: `used` is what its provider reported, `None` for a call
    /// cut before it reported (charged its request and the `streamed`
    /// bytes). Returns the delivery to its directory.
    pub fn settle(&mut self, id: &str, used: Option<Spend>, streamed: usize, now: i64) -> Result<Vec<Effect>, Error> {
        let charges = self.store.charges()?;
        let Some(mut charge) = charges.into_iter().find(|c| c.id == id && c.held) else { return Ok(Vec::new()) };
        charge.spend = match used {
            Some(spend) => spend,
            None => charge.cut(streamed),
        };
        charge.estimated = used.is_none();
        charge.held = false;
        charge.at = now;
        self.store.put_charge(&charge)?;
        self.spent(&charge.actor, charge.spend, now);
        Ok(vec![Effect::Charge { actor: charge.actor.clone(), charges: vec![charge] }])
    }

    /// The directory took these charges: they leave the thread.
    pub fn charged(&mut self, ids: &[String]) -> Result<(), Error> {
        for id in ids {
            self.store.delete_charge(id)?;
        }
        if self.store.charges()?.iter().all(|c| c.held) {
            *self.retry = Retry(None);
        }
        Ok(())
    }

    /// A delivery failed: the alarm tries again, later each time.
    pub fn charge_failed(&mut self, now: i64) {
        let wait = self.retry.0.map_or(RETRY_MS, |(_, wait)| (wait * 2).min(RETRY_MAX_MS));
        *self.retry = Retry(Some((now + wait, wait)));
    }

    /// The alarm: when it is time, the undelivered charges go again (the
    /// next try is after the same wait, unless this one is reported).
    pub fn charge_alarm(&mut self, now: i64) -> Result<Vec<Effect>, Error> {
        match self.retry.0 {
            Some((at, wait)) if at <= now => {
                *self.retry = Retry(Some((now + wait, wait)));
                self.deliveries(false, now)
            }
            _ => Ok(Vec::new()),
        }
    }

    /// On load: calls still held were cut with the instance that made them
    /// (settled as cut), and what is owed is delivered soon.
    pub fn charges_on_load(&mut self, now: i64) -> Result<(), Error> {
        let charges = self.store.charges()?;
        if charges.is_empty() {
            return Ok(());
        }
        self.deliveries(true, now)?;
        *self.retry = Retry(Some((now, RETRY_MS)));
        Ok(())
    }

    /// Every settled charge the directories do not have yet, one delivery
    /// per actor. With `cut_held`, calls still held are settled first as
    /// cut (their instance is gone, or their thread is going).
    pub fn deliveries(&mut self, cut_held: bool, now: i64) -> Result<Vec<Effect>, Error> {
        let mut charges = self.store.charges()?;
        if cut_held {
            for c in charges.iter_mut().filter(|c| c.held) {
                c.spend = c.cut(0);
                c.held = false;
                c.estimated = true;
                self.store.put_charge(c)?;
                self.spent(&c.actor.clone(), c.spend, now);
            }
        }
        let mut out: Vec<Effect> = Vec::new();
        for c in charges.into_iter().filter(|c| !c.held) {
            let open = out
                .iter_mut()
                .find(|e| matches!(e, Effect::Charge { actor, charges } if *actor == c.actor && charges.len() < BATCH));
            match open {
                Some(Effect::Charge { charges, .. }) => charges.push(c),
                _ => out.push(Effect::Charge { actor: c.actor.clone(), charges: vec![c] }),
            }
        }
        Ok(out)
    }

    /// Whether charges are still owed to a directory (a thread being
    /// deleted keeps them until they are delivered).
    pub fn owes_charges(&self) -> Result<bool, Error> {
        Ok(!self.owed_charges()?.is_empty())
    }

    /// The charges the thread still owes: what a wipe keeps
    /// ([`keep_charges`]).
    pub fn owed_charges(&self) -> Result<Vec<Charge>, Error> {
        Ok(self.store.charges()?)
    }

    /// What the thread knows of `actor`'s spend grows by `spend` (their
    /// directory's figure arrives with their next send).
    fn spent(&mut self, actor: &str, spend: Spend, now: i64) {
        self.budgets.add_usage(
            actor,
            crate::agent::quota::Used { tokens: spend.tokens(), cost_usd: spend.cost_usd },
            now,
        );
    }
}

/// Stores `charges` again in a wiped thread's storage: the thread that
/// loads next delivers them (`Charges::charges_on_load`).
pub fn keep_charges<S: Store>(store: &mut S, charges: &[Charge]) -> Result<(), Error> {
    for c in charges {
        store.put_charge(c)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::StartRun;
    use super::*;
    use crate::agent::quota::{Limit, Period};
    use crate::settings::Config;
    use crate::storage::store::{Driver, MemoryStore, Turn};

    struct NoSink;
    impl Sink for NoSink {
        fn send(&mut self, _: bytes::Bytes) -> bool {
            true
        }
        fn is_closed(&self) -> bool {
            false
        }
    }

    fn builtin_thread(quota_period: Option<Period>) -> Thread<MemoryStore, NoSink> {
        Thread::load(MemoryStore::default(), Config { quota_period, ..Config::default() }, 0).unwrap()
    }

    /// A run of `actor`'s turn, sent with `limit`: its id.
    fn send_as(t: &mut Thread<MemoryStore, NoSink>, actor: &str, limit: Option<Limit>) -> String {
        let run_id = format!("run-{actor}");
        if let Some(limit) = limit {
            t.budgets.learn(actor, crate::agent::quota::Budget { limit, used: Default::default(), since: 0 });
        }
        let turn = Turn { actor: Some(actor.into()), ..Turn::default() };
        let run = StartRun {
            run_id: run_id.clone(),
            message_id: format!("msg-{actor}"),
            message: "hi".into(),
            publish_token: "token".into(),
            driver: Driver::Builtin,
            model: None,
            turn,
            place: Default::default(),
        };
        t.start_run(run, 0).unwrap();
        run_id
    }

    fn spend(i: u64, o: u64) -> Spend {
        Spend { input_tokens: i, output_tokens: o, cost_usd: 0.0 }
    }

    #[test]
    fn a_call_is_held_then_charged_once_and_kept_until_its_directory_has_it() {
        let mut t = builtin_thread(Some(Period::Day));
        let run = send_as(&mut t, "alice", Some(Limit { tokens: Some(1_000), cost_usd: None }));
        let held = t.charges().hold(&run, Some("m"), spend(100, 50), None, 10).unwrap().unwrap();
        let (actor, op) = held.ask.clone().expect("a hold is asked for with QUOTA and a limit");
        assert_eq!(actor, "alice");
        assert!(matches!(op, Op::Hold { ref id, spend: s, .. } if *id == held.id && s == spend(100, 50)));
        assert!(t.charges().deliveries(false, 11).unwrap().is_empty(), "a held call is not delivered");
        let effects = t.charges().settle(&held.id, Some(spend(70, 5)), 0, 20).unwrap();
        let [Effect::Charge { actor, charges }] = effects.as_slice() else { panic!("{effects:?}") };
        assert_eq!((actor.as_str(), charges.len(), charges[0].spend), ("alice", 1, spend(70, 5)));
        assert!(!charges[0].held && !charges[0].estimated);
        // Settling twice charges once.
        assert!(t.charges().settle(&held.id, Some(spend(70, 5)), 0, 21).unwrap().is_empty());
        // Until the directory took it, it is owed, and delivered again.
        assert!(t.charges().owes_charges().unwrap());
        t.charges().charge_failed(30);
        assert_eq!(t.clock().charge_deadline(), Some(30 + RETRY_MS));
        t.charges().charge_failed(40);
        assert_eq!(t.clock().charge_deadline(), Some(40 + 2 * RETRY_MS), "later each time");
        assert_eq!(t.charges().deliveries(false, 50).unwrap().len(), 1);
        t.charges().charged(std::slice::from_ref(&held.id)).unwrap();
        assert!(!t.charges().owes_charges().unwrap());
        assert_eq!(t.clock().charge_deadline(), None);
    }

    #[test]
    fn a_cut_call_is_charged_its_request_and_what_it_streamed() {
        let mut t = builtin_thread(None);
        let run = send_as(&mut t, "bob", None);
        let held = t.charges().hold(&run, None, spend(300, 4_096), None, 0).unwrap().unwrap();
        assert_eq!(held.ask, None, "no QUOTA: nothing to reserve");
        let effects = t.charges().settle(&held.id, None, 30, 5).unwrap();
        let [Effect::Charge { charges, .. }] = effects.as_slice() else { panic!() };
        assert_eq!(charges[0].spend, spend(300, 10));
        assert!(charges[0].estimated);
    }

    #[test]
    fn calls_still_held_when_their_instance_is_gone_are_charged_as_cut() {
        let mut t = builtin_thread(None);
        let run = send_as(&mut t, "carol", None);
        let a = t.charges().hold(&run, None, spend(10, 100), None, 0).unwrap().unwrap();
        let b = t.charges().hold(&run, None, spend(20, 100), None, 0).unwrap().unwrap();
        t.charges().settle(&b.id, Some(spend(20, 3)), 0, 1).unwrap();
        let effects = t.charges().deliveries(true, 2).unwrap();
        let [Effect::Charge { charges, .. }] = effects.as_slice() else { panic!("{effects:?}") };
        let by = |id: &str| charges.iter().find(|c| c.id == id).unwrap().clone();
        assert_eq!(by(&a.id).spend, spend(10, 0));
        assert!(by(&a.id).estimated);
        assert_eq!(by(&b.id).spend, spend(20, 3));
    }

    #[test]
    fn a_refused_hold_costs_nothing_and_a_run_without_an_actor_holds_nothing() {
        let mut t = builtin_thread(Some(Period::Day));
        let run = send_as(&mut t, "dave", Some(Limit { tokens: Some(1), cost_usd: None }));
        let held = t.charges().hold(&run, None, spend(1, 1), None, 0).unwrap().unwrap();
        t.charges().release(&held.id).unwrap();
        assert!(!t.charges().owes_charges().unwrap());
        assert_eq!(t.charges().hold("no-such-run", None, spend(1, 1), None, 0).unwrap(), None);
    }
}
