//! An actor's directory: one small object per actor (`actor:<id>`) that
//! keeps their inbox (every thread they started, with its live state:
//! [`inbox`]), counts their sends for the per-minute limit, and sums what
//! their turns used for their budget (`QUOTA`). Threads report their state
//! as it changes; a thread's own object stays the source of truth for
//! everything in it. The object's shell hands each [`Op`] here and answers
//! with the [`Reply`]; what changed in the inbox it sends to the inbox's
//! subscribers ([`Directory::published`]), sockets the Worker relays, so
//! the object sleeps between changes as a thread does.
//!
//! What the actor used is the sum of their charges (one per model call,
//! counted once by its id: `crate::agent::charge`); the calls in flight hold what
//! they may use. Invariant: a hold is granted only while what the actor
//! used and holds is under their limit, and an object handles one op at a
//! time, so however many calls start at once, the actor passes their limit
//! by at most one call's hold (when each call stays within what it held).

pub mod inbox;

use crate::agent::charge::{Charge, Spend};
use crate::agent::quota::{Limit, Quota, Used};
use crate::feed::socket;
use crate::storage::db::{Db, Value};
use crate::storage::migrations::{self, OpenError};
use crate::wire::error::ApiError;
use crate::wire::reply::Reply;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The window of the per-minute send limit.
pub const WINDOW_MS: i64 = 60_000;

/// What a directory is asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Op {
    /// A run started on the thread: list it, or count one more run on it.
    #[serde(rename_all = "camelCase")]
    Register { thread_id: String, title: String, at: i64 },
    /// The thread is gone.
    #[serde(rename_all = "camelCase")]
    Unregister { thread_id: String },
    /// One more send, if the window has room for it (`limit` a minute; 0:
    /// no limit). With `since` (the start of the budget's period) the answer
    /// is `{used: {tokens, costUsd}}`, what the actor used since.
    Admit {
        limit: i64,
        now: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<i64>,
    },
    /// A turn of the actor's ended having used this much (`model`, input
    /// and output since storage 3; an op from an older Worker has none).
    #[serde(rename_all = "camelCase")]
    Usage {
        at: i64,
        tokens: u64,
        cost_usd: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default)]
        input_tokens: u64,
        #[serde(default)]
        output_tokens: u64,
    },
    /// `GET /instance-ai/usage`: what the actor's turns used since `since`,
    /// per model.
    Totals { since: i64 },
    /// `GET /agent/quota`: the actor's standing in the period holding `now`.
    Quota { quota: Quota, limit: Limit, now: i64 },
    /// A model call is about to start: hold `spend` against `limit` in the
    /// period starting at `since`. `{used}` when held; 429 `{used}` when
    /// what the actor used and holds leaves nothing (nothing is held). The
    /// same `id` twice holds once.
    #[serde(rename_all = "camelCase")]
    Hold { id: String, at: i64, spend: Spend, limit: Limit, since: i64 },
    /// Model calls ended: count each charge once (by its id) and drop its
    /// hold.
    Charge { charges: Vec<Charge> },
    /// The actor's threads, newest first: the first page of [`Op::Inbox`]
    /// (what a Worker of before asks).
    List,
    /// Threads report their state (in the order they made the reports; a
    /// report at or below the version a row holds changes nothing).
    Report { reports: Vec<inbox::Report> },
    /// `POST /instance-ai/threads/:threadId/read`: the actor has read the
    /// thread up to `event_id`. 404 for a thread that is not theirs.
    #[serde(rename_all = "camelCase")]
    Read { thread_id: String, event_id: u64 },
    /// `GET /v1/inbox`: a page of the actor's threads, newest first.
    Inbox { page: inbox::Page },
    /// A Durable Streams catch-up read of the inbox: at most `limit` changes
    /// after `after` (past the top: none), `{changes: [[seq, row]], after,
    /// high}`.
    Changes { after: u64, limit: usize },
    /// A subscriber of the inbox's changes after `after` (`None`: from now):
    /// its socket's hello ([`Directory::follow`]).
    Follow {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<u64>,
    },
    /// A webhook delivery's attempts are spent: kept (by its id, replacing
    /// an earlier letter of the same delivery) for the deployer. Sent to
    /// the deployer's directory ([`DEPLOYER`]).
    DeadLetter { letter: Box<crate::notify::DeadLetter> },
    /// `GET /v1/webhooks/dead-letters`: the letters, newest first,
    /// `{deadLetters: [...]}`.
    DeadLetters { limit: usize },
    /// `POST /v1/webhooks/dead-letters/:id/replay`: its delivery goes to
    /// the queue again as a first attempt (the same id), and the letter
    /// says when (`replayedAt`). 404 for no such letter.
    Replay { id: String, at: i64 },
    /// `POST /debug/inbox/outage` (with `DEBUG_ROUTES`): the directory
    /// refuses threads' reports (503) until `until`, as an unreachable one
    /// would: a fault to prove that reports wait and arrive once.
    Outage { until: i64 },
    /// `GET /debug/inbox/stats` (with `DEBUG_ROUTES`): the object's
    /// instance (the shell fills `instance`), the readers it holds and the
    /// inbox's size: whether an idle inbox sleeps.
    Stats {
        #[serde(skip)]
        instance: Option<serde_json::Value>,
        #[serde(skip)]
        readers: usize,
    },
}

/// The name of the deployer's directory: the webhooks' dead letters.
pub const DEPLOYER: &str = "deployer:webhooks";

/// The name of `actor`'s directory object.
pub fn name(actor: &str) -> String {
    format!("actor:{actor}")
}

/// Whether one more send may go, with `count` sends in the window (the
/// oldest at `oldest`) and at most `limit` a minute: `Err(seconds)` to wait
/// until the oldest leaves the window (at least one).
pub fn admit(count: i64, oldest: Option<i64>, limit: i64, now: i64) -> Result<(), i64> {
    if count < limit {
        return Ok(());
    }
    let retry_ms = oldest.map_or(WINDOW_MS, |o| o + WINDOW_MS - now).max(1_000);
    Err((retry_ms + 999) / 1000)
}

/// An actor's directory on its storage.
pub struct Directory<D: Db> {
    db: D,
    /// The inbox changes made since the shell last took them: socket lines
    /// for every subscriber ([`Directory::published`]).
    published: std::cell::RefCell<Vec<u8>>,
    /// Reports are refused until then ([`Op::Outage`]; in memory only).
    outage_until: std::cell::Cell<i64>,
    /// Deliveries an op gave back to the queue (a replay), for the shell.
    outgoing: std::cell::RefCell<Vec<crate::notify::Delivery>>,
}

impl<D: Db> Directory<D> {
    /// Opens the directory, bringing storage to the current layout first.
    pub fn open(db: D) -> Result<Directory<D>, OpenError> {
        migrations::migrate(&db, &migrations::DIRECTORY)?;
        Ok(Directory {
            db,
            published: Default::default(),
            outage_until: Default::default(),
            outgoing: Default::default(),
        })
    }

    /// Carries out `op`.
    pub fn handle(&self, op: &Op) -> Reply {
        self.handle_at(op, i64::MAX)
    }

    /// Carries out `op` at `now` (an injected outage refuses reports until
    /// its end).
    pub fn handle_at(&self, op: &Op, now: i64) -> Reply {
        if matches!(op, Op::Report { .. }) && now < self.outage_until.get() {
            return Reply::error(&ApiError::unavailable("the directory is out (an injected fault)"));
        }
        self.serve(op).unwrap_or_else(|e| Reply::error(&e))
    }

    /// The inbox.
    pub fn inbox(&self) -> inbox::Inbox<'_, D> {
        inbox::Inbox { db: &self.db }
    }

    /// What changed in the inbox since this was last asked: one message for
    /// every subscriber (its changes, in order), or `None`.
    ///
    /// Invariant (persist, then fan out): a change is here only once stored;
    /// the shell sends it after the op that made it, before the next op.
    pub fn published(&self) -> Option<bytes::Bytes> {
        let out = std::mem::take(&mut *self.published.borrow_mut());
        (!out.is_empty()).then(|| bytes::Bytes::from(out))
    }

    /// The deliveries the last op gave back to the queue (a replay): the
    /// shell sends them, and answers 503 when the queue does not take them.
    pub fn outgoing(&self) -> Vec<crate::notify::Delivery> {
        std::mem::take(&mut *self.outgoing.borrow_mut())
    }

    /// A new subscriber's hello, following changes after `after` (`None`:
    /// from now): the window `(after, high]` and its first page. The shell
    /// accepts the socket in the same synchronous block, so no change falls
    /// between the hello and the socket's first live message.
    pub fn follow(&self, after: Option<u64>) -> Result<bytes::Bytes, ApiError> {
        let inbox = self.inbox();
        let high = inbox.high()?;
        let after = after.unwrap_or(high).min(high);
        let mut out = Vec::new();
        socket::hello(high, inbox::GENERATION, after, &mut out);
        self.page_into(after, high, &mut out)?;
        Ok(bytes::Bytes::from(out))
    }

    /// The next replay page a subscriber's relay asks for (`page <after>
    /// <high>`), or `None` for a message that is not a page request.
    pub fn page(&self, request: &str) -> Result<Option<bytes::Bytes>, ApiError> {
        let Some((after, high)) = socket::parse_page_request(request) else { return Ok(None) };
        let mut out = Vec::new();
        self.page_into(after, high, &mut out)?;
        Ok(Some(bytes::Bytes::from(out)))
    }

    fn page_into(&self, after: u64, high: u64, out: &mut Vec<u8>) -> Result<(), ApiError> {
        let changes = self.inbox().changes(after, high, inbox::REPLAY_PAGE)?;
        for (seq, data) in &changes {
            socket::durable(*seq, data, out);
        }
        let last = match changes.last() {
            Some((seq, _)) if changes.len() == inbox::REPLAY_PAGE && *seq < high => *seq,
            _ => high,
        };
        socket::page_end(last, out);
        Ok(())
    }

    /// A change made: sent to the subscribers once the op is done.
    fn publish(&self, change: Option<(u64, String)>) {
        if let Some((seq, data)) = change {
            socket::durable(seq, &data, &mut self.published.borrow_mut());
        }
    }

    fn serve(&self, op: &Op) -> Result<Reply, ApiError> {
        let db = &self.db;
        let storage = ApiError::storage;
        match op {
            Op::Register { thread_id, title, at } => {
                db.exec(
                    "INSERT INTO threads (thread_id, title, created_at, updated_at) VALUES (?, ?, ?, ?)
                     ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at, runs = runs + 1, deleted = 0",
                    &[thread_id.as_str().into(), title.as_str().into(), (*at).into(), (*at).into()],
                )
                .map_err(storage)?;
                self.publish(Some(self.inbox().registered(thread_id)?));
                Ok(Reply::new(204))
            }
            Op::Unregister { thread_id } => {
                self.publish(self.inbox().deleted(thread_id)?);
                Ok(Reply::new(204))
            }
            Op::Report { reports } => {
                for r in reports {
                    self.publish(self.inbox().take(r)?);
                }
                Ok(Reply::new(204))
            }
            Op::Read { thread_id, event_id } => {
                let (row, change) = self.inbox().read(thread_id, *event_id)?;
                self.publish(change);
                Ok(Reply::json(200, &row))
            }
            Op::Inbox { page } => Ok(Reply::json(200, &self.inbox().list(page)?)),
            Op::Changes { after, limit } => {
                let high = self.inbox().high()?;
                let after = (*after).min(high);
                let changes: Vec<serde_json::Value> = self
                    .inbox()
                    .changes(after, high, (*limit).min(inbox::REPLAY_PAGE))?
                    .into_iter()
                    .map(|(seq, data)| {
                        let row: serde_json::Value = serde_json::from_str(&data).unwrap_or_default();
                        json!([seq, row])
                    })
                    .collect();
                Ok(Reply::json(200, &json!({ "changes": changes, "after": after, "high": high })))
            }
            Op::Follow { .. } => Err(ApiError::unavailable("a subscriber is accepted over a socket")),
            Op::DeadLetter { letter } => {
                let data = serde_json::to_string(letter).map_err(ApiError::unavailable)?;
                db.exec(
                    "INSERT INTO dead_letters (id, at, data, replayed_at) VALUES (?, ?, ?, NULL)
                     ON CONFLICT (id) DO UPDATE SET at = excluded.at, data = excluded.data, replayed_at = NULL",
                    &[letter.delivery.id.as_str().into(), letter.at.into(), data.as_str().into()],
                )
                .map_err(storage)?;
                Ok(Reply::new(204))
            }
            Op::DeadLetters { limit } => {
                let rows = db
                    .run(
                        "SELECT data, replayed_at FROM dead_letters ORDER BY at DESC, id LIMIT ?",
                        &[(*limit as i64).into()],
                    )
                    .map_err(storage)?;
                let letters: Vec<serde_json::Value> = rows
                    .rows
                    .into_iter()
                    .filter_map(|r| {
                        let mut r = r.into_iter();
                        let mut letter: serde_json::Value = serde_json::from_str(&r.next()?.text()?).ok()?;
                        let replayed = r.next().filter(|v| *v != Value::Null).map(|v| v.int());
                        letter["replayedAt"] = replayed.into();
                        Some(letter)
                    })
                    .collect();
                Ok(Reply::json(200, &json!({ "deadLetters": letters })))
            }
            Op::Replay { id, at } => {
                let row =
                    db.run("SELECT data FROM dead_letters WHERE id = ?", &[id.as_str().into()]).map_err(storage)?;
                let letter: Option<crate::notify::DeadLetter> =
                    row.first().and_then(|v| v.text()).and_then(|t| serde_json::from_str(&t).ok());
                let Some(letter) = letter else {
                    return Err(ApiError::dead_letter_not_found());
                };
                db.exec("UPDATE dead_letters SET replayed_at = ? WHERE id = ?", &[(*at).into(), id.as_str().into()])
                    .map_err(storage)?;
                let delivery = crate::notify::Delivery { attempt: 1, ..letter.delivery };
                self.outgoing.borrow_mut().push(delivery);
                Ok(Reply::json(202, &json!({ "replayed": id, "replayedAt": at })))
            }
            Op::Stats { instance, readers } => {
                let inbox = self.inbox();
                let rows = db.run("SELECT COUNT(*) FROM threads WHERE deleted = 0", &[]).map_err(storage)?;
                let threads = rows.first().map_or(0, |v| v.int());
                let body =
                    json!({ "instance": instance, "readers": readers, "threads": threads, "eventId": inbox.high()? });
                Ok(Reply::json(200, &body))
            }
            Op::Outage { until } => {
                self.outage_until.set(*until);
                Ok(Reply::new(204))
            }
            Op::Admit { limit, now, since } => {
                if *limit > 0 {
                    // A sliding window over the last minute's sends.
                    db.exec("DELETE FROM sends WHERE at <= ?", &[(now - WINDOW_MS).into()]).map_err(storage)?;
                    let window = db.run("SELECT COUNT(*), MIN(at) FROM sends", &[]).map_err(storage)?;
                    let row = window.rows.into_iter().next().unwrap_or_default();
                    let count = row.first().map_or(0, Value::int);
                    let oldest = row.get(1).filter(|v| **v != Value::Null).map(Value::int);
                    if let Err(retry) = admit(count, oldest, *limit, *now) {
                        return Ok(Reply::json(429, &json!({ "retryAfter": retry })));
                    }
                    db.exec("INSERT INTO sends (at) VALUES (?)", &[(*now).into()]).map_err(storage)?;
                }
                match since {
                    Some(since) => Ok(Reply::json(200, &json!({ "used": self.used(*since)? }))),
                    None => Ok(Reply::new(204)),
                }
            }
            Op::Usage { at, tokens, cost_usd, model, input_tokens, output_tokens } => {
                // Nothing older than the longest period is ever asked for.
                db.exec("DELETE FROM usage WHERE at < ?", &[(at - USAGE_KEPT_MS).into()]).map_err(storage)?;
                db.exec(
                    "INSERT INTO usage (at, tokens, cost_usd, model, input_tokens, output_tokens) VALUES (?, ?, ?, ?, ?, ?)",
                    &[
                        (*at).into(),
                        (*tokens as i64).into(),
                        Value::Real(*cost_usd),
                        model.as_deref().map_or(Value::Null, Into::into),
                        (*input_tokens as i64).into(),
                        (*output_tokens as i64).into(),
                    ],
                )
                .map_err(storage)?;
                Ok(Reply::new(204))
            }
            Op::Hold { id, at, spend, limit, since } => {
                let known = db.run("SELECT 1 FROM holds WHERE id = ?", &[id.as_str().into()]).map_err(storage)?;
                let used = self.used(*since)?;
                if known.rows.is_empty() {
                    if limit.exhausted(used + self.held(*since)?) {
                        return Ok(Reply::json(429, &json!({ "used": used, "limit": limit })));
                    }
                    db.exec(
                        "INSERT INTO holds (id, at, tokens, cost_usd) VALUES (?, ?, ?, ?)",
                        &[
                            id.as_str().into(),
                            (*at).into(),
                            (spend.tokens() as i64).into(),
                            Value::Real(spend.cost_usd),
                        ],
                    )
                    .map_err(storage)?;
                }
                Ok(Reply::json(200, &json!({ "used": used })))
            }
            Op::Charge { charges } => {
                let oldest = charges.iter().map(|c| c.at).min().unwrap_or(0);
                db.exec("DELETE FROM usage WHERE at < ?", &[(oldest - USAGE_KEPT_MS).into()]).map_err(storage)?;
                db.exec("DELETE FROM holds WHERE at < ?", &[(oldest - USAGE_KEPT_MS).into()]).map_err(storage)?;
                for c in charges.iter().filter(|c| !c.held) {
                    db.exec(
                        "INSERT OR IGNORE INTO usage (at, tokens, cost_usd, model, input_tokens, output_tokens, charge_id, run_id)
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        &[
                            c.at.into(),
                            (c.spend.tokens() as i64).into(),
                            Value::Real(c.spend.cost_usd),
                            c.model.as_deref().map_or(Value::Null, Into::into),
                            (c.spend.input_tokens as i64).into(),
                            (c.spend.output_tokens as i64).into(),
                            c.id.as_str().into(),
                            c.run_id.as_str().into(),
                        ],
                    )
                    .map_err(storage)?;
                    db.exec("DELETE FROM holds WHERE id = ?", &[c.id.as_str().into()]).map_err(storage)?;
                }
                Ok(Reply::new(204))
            }
            Op::Totals { since } => {
                // A turn is a run: its calls are one charge each (older
                // rows, one per turn, have no run).
                let rows = db
                    .run(
                        "SELECT model, COUNT(DISTINCT run_id) + SUM(run_id IS NULL), SUM(input_tokens), SUM(output_tokens),
                                SUM(tokens), SUM(cost_usd)
                         FROM usage WHERE at >= ? GROUP BY model ORDER BY model",
                        &[(*since).into()],
                    )
                    .map_err(storage)?;
                let models = rows.rows.into_iter().map(|r| {
                    let mut r = r.into_iter();
                    let mut next = || r.next().unwrap_or(Value::Null);
                    let model = next().text();
                    let (turns, input, output, tokens) = (next().int(), next().int(), next().int(), next().int());
                    crate::agent::usage::Totals { model, turns, input, output, tokens, cost_usd: next().real() }
                });
                Ok(Reply::json(200, &crate::agent::usage::view(models.collect(), Some(*since))))
            }
            Op::Quota { quota, limit, now } => {
                let used = self.used(quota.period.window(*now).0)?;
                Ok(Reply::json(200, &quota.view(used, *limit, *now)))
            }
            Op::List => Ok(Reply::json(200, &self.inbox().list(&inbox::Page::default())?)),
        }
    }
}

impl<D: Db> Directory<D> {
    /// What the actor's turns used since `since` (their charges).
    fn used(&self, since: i64) -> Result<Used, ApiError> {
        self.sum("usage", since)
    }

    /// What the actor's calls in flight since `since` hold.
    fn held(&self, since: i64) -> Result<Used, ApiError> {
        self.sum("holds", since)
    }

    fn sum(&self, table: &str, since: i64) -> Result<Used, ApiError> {
        let sums = self.db.run(
            &format!("SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0.0) FROM {table} WHERE at >= ?"),
            &[since.into()],
        )?;
        let row = sums.rows.into_iter().next().unwrap_or_default();
        Ok(Used {
            tokens: row.first().map_or(0, Value::int).max(0) as u64,
            cost_usd: row.get(1).map_or(0.0, Value::real),
        })
    }
}

/// How long usage rows are kept: longer than the longest period (a month).
const USAGE_KEPT_MS: i64 = 32 * 86_400_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliding_minute() {
        assert_eq!(admit(1, Some(0), 2, 10), Ok(()));
        assert_eq!(admit(2, Some(0), 2, 10_000), Err(50));
        assert_eq!(admit(2, Some(0), 2, 59_900), Err(1), "at least a second");
        assert_eq!(admit(5, None, 2, 0), Err(60));
    }
}
