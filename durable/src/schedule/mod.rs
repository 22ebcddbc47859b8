//! When a thread's schedules fire: a cron expression ([`cron`]), a time, or
//! every so many seconds. Pure: times are given.

pub mod cron;

use crate::wire::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Most schedules one thread holds.
pub const MAX_PER_THREAD: usize = 20;

/// The longest `everySeconds`: a year.
pub const MAX_EVERY_S: u64 = 365 * 86_400;

/// A thread's schedule: a message sent as the thread's owner when it fires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub schedule_id: String,
    pub message: String,
    /// Five fields, UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// Once, at this time (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_seconds: Option<u64>,
    /// When it fires next (ms).
    pub next_at: i64,
    pub created_at: i64,
    /// How many times it fired.
    #[serde(default)]
    pub fired: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<i64>,
    /// Firings the thread's queue could not take (it was full).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `POST .../schedules`' body: a message, and exactly one of `cron`, `at`
/// (RFC 3339, in the future), `everySeconds` (1 to a year).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Body {
    message: String,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    every_seconds: Option<u64>,
}

impl Schedule {
    /// A new schedule from a request's body, first firing after `now`; the
    /// id is `id`. `max_message` bounds the message's bytes.
    pub fn new(body: &Value, id: String, max_message: usize, now: i64) -> Result<Schedule, ApiError> {
        let bad = ApiError::invalid_schedule;
        let b: Body = serde_json::from_value(body.clone())
            .map_err(|e| bad(format!("a schedule is {{message, cron | at | everySeconds}}: {e}")))?;
        if b.message.trim().is_empty() {
            return Err(bad("`message` is empty".into()));
        }
        if b.message.len() > max_message {
            return Err(ApiError::message_too_large(max_message));
        }
        let mut s = Schedule {
            schedule_id: id,
            message: b.message,
            cron: None,
            at: None,
            every_seconds: None,
            next_at: 0,
            created_at: now,
            fired: 0,
            last_fired_at: None,
            dropped: 0,
        };
        match (b.cron, b.at, b.every_seconds) {
            (Some(expr), None, None) => {
                let cron = cron::Cron::parse(&expr).map_err(bad)?;
                s.next_at = cron.next_after(now).ok_or_else(|| bad(format!("`{expr}` never fires")))?;
                s.cron = Some(expr.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            (None, Some(at), None) => {
                let at = crate::streams::wire::parse_rfc3339(&at)
                    .ok_or_else(|| bad(format!("`at` is an RFC 3339 time, not `{at}`")))?;
                if at <= now {
                    return Err(bad("`at` is in the past".into()));
                }
                s.at = Some(at);
                s.next_at = at;
            }
            (None, None, Some(every)) => {
                if !(1..=MAX_EVERY_S).contains(&every) {
                    return Err(bad(format!("`everySeconds` is from 1 to {MAX_EVERY_S}")));
                }
                s.every_seconds = Some(every);
                s.next_at = now + every as i64 * 1000;
            }
            _ => return Err(bad("a schedule has exactly one of `cron`, `at` and `everySeconds`".into())),
        }
        Ok(s)
    }

    /// It fired at `now`: when it fires next (`None`: never, a one-time
    /// schedule). Times missed while nothing ran (the thread's object was
    /// away) fire once, not once each.
    pub fn fired(&mut self, now: i64) -> Option<i64> {
        self.fired += 1;
        self.last_fired_at = Some(now);
        let next = match (&self.cron, self.every_seconds) {
            (Some(expr), _) => cron::Cron::parse(expr).ok().and_then(|c| c.next_after(now)),
            (None, Some(every)) => {
                let period = every as i64 * 1000;
                let behind = (now - self.next_at).max(0) / period + 1;
                Some(self.next_at + behind * period)
            }
            (None, None) => None,
        };
        if let Some(next) = next {
            self.next_at = next;
        }
        next
    }

    /// The schedule as `GET .../schedules` shows it (times in RFC 3339).
    pub fn view(&self) -> Value {
        let t = crate::wire::time::rfc3339;
        let mut v = json!({
            "scheduleId": self.schedule_id,
            "message": self.message,
            "nextAt": t(self.next_at),
            "createdAt": t(self.created_at),
            "fired": self.fired,
        });
        if let Some(c) = &self.cron {
            v["cron"] = c.as_str().into();
        }
        if let Some(at) = self.at {
            v["at"] = t(at).into();
        }
        if let Some(e) = self.every_seconds {
            v["everySeconds"] = e.into();
        }
        if let Some(l) = self.last_fired_at {
            v["lastFiredAt"] = t(l).into();
        }
        if self.dropped > 0 {
            v["dropped"] = self.dropped.into();
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_one_of_cron_at_or_every() {
        let now = 1_796_477_050_000;
        let new = |b: Value| Schedule::new(&b, "s1".into(), 1000, now);
        let every = new(json!({"message": "ping", "everySeconds": 2})).unwrap();
        assert_eq!(every.next_at, now + 2000);
        let at = new(json!({"message": "once", "at": "2026-12-06T00:00:00Z"})).unwrap();
        assert_eq!(at.next_at, 1_796_515_200_000);
        let cron = new(json!({"message": "hourly", "cron": "0  *  * * *"})).unwrap();
        assert_eq!(cron.cron.as_deref(), Some("0 * * * *"));
        for bad in [
            json!({"message": "x"}),
            json!({"message": "x", "everySeconds": 2, "cron": "* * * * *"}),
            json!({"message": "x", "everySeconds": 0}),
            json!({"message": "x", "at": "2020-01-01T00:00:00Z"}),
            json!({"message": "x", "at": "tomorrow"}),
            json!({"message": "x", "cron": "* * *"}),
            json!({"message": "", "everySeconds": 2}),
            json!({"message": "x", "everySeconds": 2, "extra": true}),
            json!([1]),
        ] {
            assert_eq!(new(bad.clone()).unwrap_err().code, "invalid_schedule", "{bad}");
        }
        assert_eq!(new(json!({"message": "x".repeat(1001), "everySeconds": 2})).unwrap_err().code, "message_too_large");
    }

    #[test]
    fn missed_times_fire_once_and_the_next_is_in_the_future() {
        let mut s = Schedule::new(&json!({"message": "p", "everySeconds": 2}), "s".into(), 100, 0).unwrap();
        assert_eq!(s.fired(2_000), Some(4_000));
        // Asleep for 10 s: one firing, and the next on the period's grid.
        assert_eq!(s.fired(14_500), Some(16_000));
        assert_eq!(s.fired, 2);
        let mut once =
            Schedule::new(&json!({"message": "p", "at": "1970-01-01T00:00:05Z"}), "o".into(), 100, 0).unwrap();
        assert_eq!(once.fired(5_000), None);
    }
}
