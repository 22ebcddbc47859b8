//! The inbox: every thread of an actor, with its live state, kept by their
//! directory from what each thread reports of itself ([`Report`]), and a
//! change log that streams it (`GET /v1/inbox`).
//!
//! Invariants enforced here:
//! - a thread's row changes only with a report of a higher `version` than
//!   the one it holds: a report that arrives twice, or after a newer one,
//!   changes nothing (the thread retries until it hears it was taken);
//! - every change of a row (a report taken, a read mark moved, the thread
//!   deleted) appends the row as it now is to the change log, under the
//!   next `seq`, in the same synchronous block: a reader that resumes after
//!   `seq` gets every change it missed, in order, then live ones;
//! - the log keeps every change of the last [`KEPT`], and beyond that the
//!   newest change of each thread, so a reader resuming from any point
//!   still ends with every row as it is.

use super::Value;
use crate::storage::db::Db;
use crate::wire::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Changes kept whatever they are; older ones are kept only while they are
/// their thread's newest.
pub const KEPT: i64 = 1_000;

/// The inbox log's generation in its Durable Streams offsets (`1_<seq>`):
/// the log is never reset, so there is one.
pub const GENERATION: u64 = 1;

/// Most rows one page of `GET /v1/inbox` holds, and its default.
pub const MAX_PAGE: usize = 500;
pub const DEFAULT_PAGE: usize = 100;

/// Most changes one replay page carries over the socket.
pub const REPLAY_PAGE: usize = 200;

/// Where a thread stands, as its inbox row says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Nothing runs, nothing waits.
    #[default]
    Idle,
    /// A run is under way.
    Running,
    /// A run waits for the person: a confirmation, an answer.
    Waiting,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Running => "running",
            State::Waiting => "waiting",
        }
    }
}

/// The run that ended last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    pub run_id: String,
    /// `completed`, `cancelled`, `error`, ...
    pub status: String,
    pub at: i64,
}

/// What a waiting thread waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    pub request_id: String,
    /// `approval`, `question`, `plan-review`, a client tool's `tool-result`...
    pub kind: String,
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// What a thread reports of itself to its owner's directory: ids and states,
/// never message text (the title is the thread's own label).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub thread_id: String,
    /// Counts the thread's reports (1, 2, ...): the directory takes one only
    /// above the version it holds.
    pub version: u64,
    /// The thread's last event id when it reported.
    pub event_id: u64,
    pub title: String,
    pub state: State,
    /// The run under way, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Wait>,
    /// Messages in the thread's queue.
    pub queued: u64,
    /// The last event worth a person's reading (a run's end, a request for
    /// them): the row is unread while the read mark is below it.
    pub answer_id: u64,
    pub created_at: i64,
    /// When the thread last changed.
    pub updated_at: i64,
    pub runs: u64,
    /// What the thread's runs used.
    pub tokens: u64,
    pub cost_usd: f64,
}

/// Which rows a listing holds (`?state=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    Idle,
    Running,
    Waiting,
    Unread,
}

impl Filter {
    pub fn parse(raw: &str) -> Result<Filter, ApiError> {
        Ok(match raw {
            "idle" => Filter::Idle,
            "running" => Filter::Running,
            "waiting" => Filter::Waiting,
            "unread" => Filter::Unread,
            _ => return Err(ApiError::invalid_query("`state` is one of idle, running, waiting, unread")),
        })
    }

    fn sql(self) -> &'static str {
        match self {
            Filter::Idle => " AND state = 'idle'",
            Filter::Running => " AND state = 'running'",
            Filter::Waiting => " AND state = 'waiting'",
            Filter::Unread => " AND answer_id > read_id",
        }
    }
}

/// A page of a listing: at most `limit` rows after `cursor` (the last row
/// of the page before), newest change first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Filter>,
}

impl Page {
    /// A page from a request's query: `limit` (1 to [`MAX_PAGE`]),
    /// `cursor`, `state`.
    pub fn from_query(query: &[(String, String)]) -> Result<Page, ApiError> {
        let get = |k: &str| crate::input::query_first(query, k);
        let limit = match get("limit") {
            None => None,
            Some(v) => Some(v.parse::<usize>().ok().filter(|n| (1..=MAX_PAGE).contains(n)).ok_or_else(|| {
                ApiError::invalid_query(format!("`limit` must be a whole number from 1 to {MAX_PAGE}"))
            })?),
        };
        let cursor = get("cursor");
        if let Some(c) = &cursor {
            Cursor::parse(c)?;
        }
        let state = get("state").map(|s| Filter::parse(&s)).transpose()?;
        Ok(Page { limit, cursor, state })
    }
}

/// Where a page ends: the last row's change time and thread id.
struct Cursor {
    updated_at: i64,
    thread_id: String,
}

impl Cursor {
    fn parse(raw: &str) -> Result<Cursor, ApiError> {
        let bad = || ApiError::invalid_query("`cursor` is not one this listing gave");
        let (at, id) = raw.split_once('.').ok_or_else(bad)?;
        let updated_at = at.parse().map_err(|_| bad())?;
        if id.is_empty() || id.len() > 512 {
            return Err(bad());
        }
        Ok(Cursor { updated_at, thread_id: id.to_owned() })
    }

    fn text(&self) -> String {
        format!("{}.{}", self.updated_at, self.thread_id)
    }
}

/// The columns a row is read with.
const COLUMNS: &str =
    "thread_id, title, created_at, updated_at, runs, report, read_id, answer_id, state, version, deleted";

/// A thread's inbox row, as readers get it: its report (a row of a thread
/// that has not reported since the directory learned of reports has what
/// the directory had: its title, times and runs), its read mark, whether
/// it is unread, and `deleted` once the thread is gone.
fn view(r: Vec<Value>) -> serde_json::Value {
    let mut r = r.into_iter();
    let mut next = || r.next().unwrap_or(Value::Null);
    let (thread_id, title, created_at, updated_at, runs) = (next().text(), next().text(), next(), next(), next());
    let report = next().text();
    let (read_id, answer_id, state, version, deleted) = (next().int(), next().int(), next().text(), next(), next());
    let mut row = report
        .as_deref()
        .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| {
            json!({
                "threadId": thread_id, "title": title, "state": state.unwrap_or_default(), "queued": 0,
                "eventId": 0, "answerId": 0, "createdAt": created_at.int(), "updatedAt": updated_at.int(),
                "runs": runs.int(), "tokens": 0, "costUsd": 0.0, "version": version.int(),
            })
        });
    row["readEventId"] = read_id.into();
    row["unread"] = (answer_id > read_id).into();
    if deleted.int() != 0 {
        row["deleted"] = true.into();
    }
    row
}

/// The inbox over a directory's storage.
pub struct Inbox<'d, D: Db> {
    pub(super) db: &'d D,
}

impl<D: Db> Inbox<'_, D> {
    /// Takes `report` unless the row holds it or a newer one; `None` when
    /// it changed nothing, else the change (its seq and row).
    pub fn take(&self, report: &Report) -> Result<Option<(u64, String)>, ApiError> {
        let held = self
            .db
            .run("SELECT version, deleted FROM threads WHERE thread_id = ?", &[report.thread_id.as_str().into()])?;
        if let Some(r) = held.rows.first() {
            if r.first().map_or(0, Value::int) >= report.version as i64 && r.get(1).map_or(0, Value::int) == 0 {
                return Ok(None);
            }
        }
        let data = serde_json::to_string(report).map_err(ApiError::unavailable)?;
        self.db.run(
            "INSERT INTO threads (thread_id, title, created_at, updated_at, runs, report, answer_id, state, version, deleted)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
             ON CONFLICT (thread_id) DO UPDATE SET title = excluded.title, updated_at = excluded.updated_at,
               runs = excluded.runs, report = excluded.report, answer_id = excluded.answer_id, state = excluded.state,
               version = excluded.version, deleted = 0,
               read_id = CASE WHEN threads.deleted = 1 THEN 0 ELSE threads.read_id END",
            &[
                report.thread_id.as_str().into(),
                report.title.as_str().into(),
                report.created_at.into(),
                report.updated_at.into(),
                (report.runs as i64).into(),
                data.as_str().into(),
                (report.answer_id as i64).into(),
                report.state.as_str().into(),
                (report.version as i64).into(),
            ],
        )?;
        self.changed(&report.thread_id).map(Some)
    }

    /// A row the directory knew before reports (a run's start registered
    /// it) changed: its change.
    pub fn registered(&self, thread_id: &str) -> Result<(u64, String), ApiError> {
        self.changed(thread_id)
    }

    /// Moves `thread_id`'s read mark up to `event_id` (never down, never past
    /// what the thread reported): its row, and the change when it moved.
    /// 404 when the actor has no such thread.
    pub fn read(&self, thread_id: &str, event_id: u64) -> Result<(serde_json::Value, Option<(u64, String)>), ApiError> {
        let known = self
            .db
            .run("SELECT read_id, report FROM threads WHERE thread_id = ? AND deleted = 0", &[thread_id.into()])?;
        let Some(r) = known.rows.first() else { return Err(ApiError::thread_not_found()) };
        let reported: u64 = r
            .get(1)
            .and_then(|v| v.clone().text())
            .and_then(|t| serde_json::from_str::<Report>(&t).ok())
            .map_or(event_id, |r| r.event_id.max(r.answer_id));
        let mark = event_id.min(reported) as i64;
        let change = if mark > r.first().map_or(0, Value::int) {
            self.db.run("UPDATE threads SET read_id = ? WHERE thread_id = ?", &[mark.into(), thread_id.into()])?;
            Some(self.changed(thread_id)?)
        } else {
            None
        };
        Ok((self.row(thread_id)?.unwrap_or_default(), change))
    }

    /// The thread is gone: its row says so (once), and stays in the log as
    /// its last change; listings leave it out.
    pub fn deleted(&self, thread_id: &str) -> Result<Option<(u64, String)>, ApiError> {
        let live = self.db.run("SELECT 1 FROM threads WHERE thread_id = ? AND deleted = 0", &[thread_id.into()])?;
        if live.rows.is_empty() {
            return Ok(None);
        }
        self.db.run(
            "UPDATE threads SET deleted = 1, state = 'idle', report = NULL, answer_id = 0, read_id = 0 WHERE thread_id = ?",
            &[thread_id.into()],
        )?;
        self.changed(thread_id).map(Some)
    }

    fn row(&self, thread_id: &str) -> Result<Option<serde_json::Value>, ApiError> {
        let rows = self.db.run(&format!("SELECT {COLUMNS} FROM threads WHERE thread_id = ?"), &[thread_id.into()])?;
        Ok(rows.rows.into_iter().next().map(view))
    }

    /// Appends the row as it now is to the change log, and trims the log.
    fn changed(&self, thread_id: &str) -> Result<(u64, String), ApiError> {
        let row = self.row(thread_id)?.ok_or_else(ApiError::thread_not_found)?;
        let data = row.to_string();
        self.db
            .run("INSERT INTO changes (thread_id, data) VALUES (?, ?)", &[thread_id.into(), data.as_str().into()])?;
        let seq = self.high()?;
        self.db.run(
            "DELETE FROM changes WHERE seq <= ? AND seq NOT IN (SELECT MAX(seq) FROM changes GROUP BY thread_id)",
            &[(seq as i64 - KEPT).into()],
        )?;
        Ok((seq, data))
    }

    /// The last change's seq (0: none yet).
    pub fn high(&self) -> Result<u64, ApiError> {
        let r = self.db.run("SELECT COALESCE(MAX(seq), 0) FROM changes", &[])?;
        Ok(r.first().map_or(0, |v| v.int()).max(0) as u64)
    }

    /// Changes after `after` up to `high`, at most `limit`, in order.
    pub fn changes(&self, after: u64, high: u64, limit: usize) -> Result<Vec<(u64, String)>, ApiError> {
        let rows = self.db.run(
            "SELECT seq, data FROM changes WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            &[(after as i64).into(), (high as i64).into(), (limit as i64).into()],
        )?;
        Ok(rows
            .rows
            .into_iter()
            .map(|r| {
                let mut r = r.into_iter();
                let seq = r.next().map_or(0, |v| v.int()) as u64;
                (seq, r.next().and_then(|v| v.text()).unwrap_or_default())
            })
            .collect())
    }

    /// One page of the actor's threads (deleted ones left out), newest
    /// change first: `{rows, nextCursor, eventId}` (`eventId`: the change
    /// log's top, where a stream that follows this snapshot starts).
    pub fn list(&self, page: &Page) -> Result<serde_json::Value, ApiError> {
        let limit = page.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
        let high = self.high()?;
        let filter = page.state.map_or("", Filter::sql);
        let mut params: Vec<Value> = Vec::new();
        let mut after = String::new();
        if let Some(c) = page.cursor.as_deref().map(Cursor::parse).transpose()? {
            after = " AND (updated_at < ? OR (updated_at = ? AND thread_id > ?))".into();
            params.extend([c.updated_at.into(), c.updated_at.into(), c.thread_id.as_str().into()]);
        }
        params.push((limit as i64 + 1).into());
        let rows = self.db.run(
            &format!(
                "SELECT {COLUMNS} FROM threads WHERE deleted = 0{filter}{after}
                 ORDER BY updated_at DESC, thread_id LIMIT ?"
            ),
            &params,
        )?;
        let mut rows: Vec<serde_json::Value> = rows.rows.into_iter().map(view).collect();
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = rows.last().filter(|_| more).map(|r| {
            Cursor {
                updated_at: r["updatedAt"].as_i64().unwrap_or(0),
                thread_id: r["threadId"].as_str().unwrap_or("").into(),
            }
            .text()
        });
        Ok(json!({ "rows": rows, "nextCursor": next, "eventId": high }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_what_no_listing_gave() {
        let c = Cursor::parse("12.t.a").unwrap();
        assert_eq!((c.updated_at, c.thread_id.as_str()), (12, "t.a"));
        assert_eq!(c.text(), "12.t.a");
        for bad in ["", "x.a", "12", "12.", "-"] {
            assert!(Cursor::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_page_reads_its_query() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let p = Page::from_query(&q(&[("limit", "5"), ("state", "waiting")])).unwrap();
        assert_eq!((p.limit, p.state), (Some(5), Some(Filter::Waiting)));
        for bad in [("limit", "0"), ("limit", "501"), ("limit", "x"), ("state", "asleep"), ("cursor", "nope")] {
            let e = Page::from_query(&q(&[bad])).unwrap_err();
            assert_eq!(e.code, "invalid_query", "{bad:?}");
        }
    }
}
