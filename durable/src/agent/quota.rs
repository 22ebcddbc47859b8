//! Per-actor budgets (`QUOTA`, agora's quota): how many tokens, and how
//! many dollars of them, an actor's turns may use in a period (an hour, a
//! day or a month, in UTC), with other limits for some roles. The usage is
//! what providers reported, counted in the actor's directory; the check is
//! made when a turn starts, a queued turn against the actor who queued it.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The window a budget is counted over, in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Hour,
    Day,
    Month,
}

use crate::wire::time::rfc3339;
use crate::wire::time::{civil_from_days, days_from_civil, DAY, HOUR};

impl Period {
    fn as_str(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Month => "month",
        }
    }

    /// The window holding `now` (ms): its start and its end.
    pub fn window(self, now: i64) -> (i64, i64) {
        match self {
            Period::Hour => (now.div_euclid(HOUR) * HOUR, now.div_euclid(HOUR) * HOUR + HOUR),
            Period::Day => (now.div_euclid(DAY) * DAY, now.div_euclid(DAY) * DAY + DAY),
            Period::Month => {
                let (y, m, _) = civil_from_days(now.div_euclid(DAY));
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (days_from_civil(y, m, 1) * DAY, days_from_civil(ny, nm, 1) * DAY)
            }
        }
    }
}

/// A budget: tokens, dollars, or both (none: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// What an actor used in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Used {
    pub tokens: u64,
    pub cost_usd: f64,
}

impl Used {
    /// A run's usage, `{prompt_tokens, completion_tokens, costUsd?}`.
    pub fn of_usage(usage: &Value) -> Used {
        let n = |k: &str| usage[k].as_u64().unwrap_or(0);
        Used { tokens: n("prompt_tokens") + n("completion_tokens"), cost_usd: usage["costUsd"].as_f64().unwrap_or(0.0) }
    }
}

impl std::ops::Add for Used {
    type Output = Used;

    fn add(self, other: Used) -> Used {
        Used { tokens: self.tokens + other.tokens, cost_usd: self.cost_usd + other.cost_usd }
    }
}

impl Limit {
    /// Whether `used` leaves nothing for another turn.
    pub fn exhausted(&self, used: Used) -> bool {
        self.tokens.is_some_and(|t| used.tokens >= t) || self.cost_usd.is_some_and(|c| used.cost_usd >= c)
    }
}

/// `QUOTA`: `{period, tokens?, costUsd?, roles?: {ROLE: {tokens?, costUsd?}}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quota {
    pub period: Period,
    #[serde(default)]
    pub tokens: Option<u64>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// A role's own budget replaces the default for its holders (the most
    /// generous of the roles a caller holds).
    #[serde(default)]
    pub roles: BTreeMap<String, Limit>,
}

impl Quota {
    /// Parses `QUOTA`; none set is no limit (`None`).
    pub fn parse(json: Option<&str>) -> Result<Option<Quota>, String> {
        match json.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => serde_json::from_str(s).map(Some).map_err(|e| format!("QUOTA is invalid: {e}")),
        }
    }

    /// The budget of a caller holding `roles`.
    pub fn limit_for(&self, roles: &[String]) -> Limit {
        let mine: Vec<&Limit> = self.roles.iter().filter(|(r, _)| roles.contains(r)).map(|(_, l)| l).collect();
        if mine.is_empty() {
            return Limit { tokens: self.tokens, cost_usd: self.cost_usd };
        }
        // No limit on a field, in any of the caller's roles, is no limit.
        let most = |f: &dyn Fn(&Limit) -> Option<f64>| -> Option<f64> {
            mine.iter().map(|l| f(l)).try_fold(f64::MIN, |m, v| v.map(|v| m.max(v)))
        };
        Limit { tokens: most(&|l| l.tokens.map(|t| t as f64)).map(|t| t as u64), cost_usd: most(&|l| l.cost_usd) }
    }

    /// `GET /agent/quota`: `{period, used: {tokens, costUsd}, limit:
    /// {tokens?, costUsd?}, resetsAt}`.
    pub fn view(&self, used: Used, limit: Limit, now: i64) -> Value {
        json!({
            "period": self.period.as_str(),
            "used": used,
            "limit": limit,
            "resetsAt": rfc3339(self.period.window(now).1),
        })
    }
}

/// What a thread knows of an actor's budget: their limit, and what they had
/// used in the window starting at `since` (as their directory said, plus
/// what this thread's turns used since).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub limit: Limit,
    pub used: Used,
    pub since: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_in_utc() {
        // 2026-12-02T04:30:00Z
        let now = 1_796_185_800_000;
        assert_eq!(rfc3339(now), "2026-12-02T04:30:00.000Z");
        assert_eq!(rfc3339(Period::Hour.window(now).1), "2026-12-02T05:00:00.000Z");
        assert_eq!(rfc3339(Period::Day.window(now).0), "2026-12-02T00:00:00.000Z");
        let (start, end) = Period::Month.window(now);
        assert_eq!(
            (rfc3339(start).as_str(), rfc3339(end).as_str()),
            ("2026-12-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z")
        );
        assert_eq!(rfc3339(Period::Month.window(951_782_400_000).1), "2000-03-01T00:00:00.000Z"); // 2000-02-29
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn limits_by_role() {
        let q = Quota::parse(Some(r#"{"period":"day","tokens":100,"roles":{"PRO":{"tokens":1000},"VIP":{}}}"#))
            .unwrap()
            .unwrap();
        assert_eq!(q.limit_for(&[]), Limit { tokens: Some(100), cost_usd: None });
        assert_eq!(q.limit_for(&["PRO".into()]).tokens, Some(1000));
        assert_eq!(q.limit_for(&["PRO".into(), "VIP".into()]).tokens, None, "a role without a limit has none");
        assert!(q.limit_for(&[]).exhausted(Used { tokens: 100, cost_usd: 0.0 }));
        assert!(!q.limit_for(&[]).exhausted(Used { tokens: 99, cost_usd: 9.0 }));
        assert!(Quota::parse(Some(r#"{"period":"week"}"#)).is_err());
        assert_eq!(Quota::parse(None).unwrap(), None);
        let v = q.view(Used { tokens: 5, cost_usd: 0.5 }, q.limit_for(&[]), 0);
        assert_eq!(
            v,
            json!({"period":"day","used":{"tokens":5,"costUsd":0.5},"limit":{"tokens":100},"resetsAt":"1970-01-02T00:00:00.000Z"})
        );
    }
}
