//! Webhooks to the deployer's endpoints (`WEBHOOKS`): what happened on a
//! thread (a run finished or failed, a person's confirmation was requested
//! or lapsed, a budget was spent, the thread was deleted), delivered at
//! least once, signed as Standard Webhooks ([`sign`]).
//!
//! A thread keeps each delivery it owes until the queue has it
//! (`thread/inbox.rs`); the Worker's queue consumer makes each attempt and
//! asks [`after`] what follows: done, again later (the same `webhook-id`,
//! exponential backoff), or a dead letter once the attempts are spent,
//! which the deployer lists and replays. A delivery carries ids and states,
//! never message text.
//!
//! Invariants enforced here:
//! - a delivery's id is drawn once, when the thread decides it, and every
//!   attempt and replay carries it (receivers deduplicate on `webhook-id`);
//! - an endpoint on a private, loopback or link-local address is refused
//!   unless `WEBHOOKS_ALLOW_PRIVATE=1` ([`private_host`]), when the
//!   configuration is read and again before each attempt.

pub mod sign;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The events an endpoint may ask for.
pub const EVENTS: &[&str] = &[
    "run.finished",
    "run.failed",
    "confirmation.requested",
    "confirmation.expired",
    "quota.exceeded",
    "thread.deleted",
];

/// Most endpoints `WEBHOOKS` may declare.
pub const MAX_ENDPOINTS: usize = 20;

/// One endpoint, as `WEBHOOKS` declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub url: String,
    /// The events it wants (`*`: every one).
    pub events: Vec<String>,
    /// The name of the environment variable holding its `whsec_…` secret
    /// (two, space-separated, while it rotates).
    pub secret: String,
}

impl Endpoint {
    pub fn wants(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == event || e == "*")
    }
}

/// How deliveries are made (`WEBHOOKS_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub endpoints: Vec<Endpoint>,
    /// Attempts before a delivery is a dead letter (`WEBHOOKS_MAX_ATTEMPTS`).
    pub max_attempts: u32,
    /// The wait before the second attempt, doubled after each
    /// (`WEBHOOKS_RETRY_SECONDS`), up to [`MAX_DELAY_S`].
    pub retry_s: u32,
    /// How long an attempt waits for an answer (`WEBHOOKS_TIMEOUT_MS`).
    pub timeout_ms: u64,
    /// `WEBHOOKS_ALLOW_PRIVATE=1`: private addresses are allowed (tests,
    /// local development).
    pub allow_private: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { endpoints: Vec::new(), max_attempts: 8, retry_s: 10, timeout_ms: 15_000, allow_private: false }
    }
}

/// The longest wait between attempts (the queue's longest delay is 12 h).
pub const MAX_DELAY_S: u32 = 6 * 3600;

/// Reads `WEBHOOKS` (a JSON list of `{url, events, secret}`): the endpoints,
/// or why the list cannot be used (then none is called, and the deployment
/// is told at start-up).
pub fn endpoints(raw: Option<&str>, allow_private: bool) -> Result<Vec<Endpoint>, String> {
    let Some(raw) = raw else { return Ok(Vec::new()) };
    let list: Vec<Endpoint> =
        serde_json::from_str(raw).map_err(|e| format!("WEBHOOKS is not a list of {{url, events, secret}}: {e}"))?;
    if list.len() > MAX_ENDPOINTS {
        return Err(format!("WEBHOOKS declares {} endpoints; at most {MAX_ENDPOINTS}", list.len()));
    }
    for e in &list {
        let host = url_host(&e.url).ok_or_else(|| format!("WEBHOOKS: `{}` is not an http(s) URL", e.url))?;
        if !allow_private && !e.url.starts_with("https://") {
            return Err(format!(
                "WEBHOOKS: `{}` is not https (WEBHOOKS_ALLOW_PRIVATE=1 allows http for local development)",
                e.url
            ));
        }
        if !allow_private && private_host(host) {
            return Err(format!(
                "WEBHOOKS: `{}` is a private, loopback or link-local address (WEBHOOKS_ALLOW_PRIVATE=1 allows it)",
                e.url
            ));
        }
        if e.events.is_empty() {
            return Err(format!("WEBHOOKS: `{}` asks for no event", e.url));
        }
        if let Some(bad) = e.events.iter().find(|ev| *ev != "*" && !EVENTS.contains(&ev.as_str())) {
            return Err(format!("WEBHOOKS: `{bad}` is not an event (one of {}, or *)", EVENTS.join(", ")));
        }
        if e.secret.is_empty() || !e.secret.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
            return Err(format!(
                "WEBHOOKS: `secret` names the environment variable holding the endpoint's whsec_ secret (A-Z, 0-9, _), not `{}`",
                e.secret
            ));
        }
    }
    Ok(list)
}

/// The host of an `http(s)://` URL (an IPv6 literal without its brackets).
pub fn url_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

/// Whether `host` names a private, loopback, link-local or unspecified
/// address (a literal, or `localhost`): never the deployer's public
/// endpoint, and a way into their network.
pub fn private_host(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") || host.ends_with(".internal") {
        return true;
    }
    if let Ok(v4) = host.parse::<std::net::Ipv4Addr>() {
        return v4.is_private()
            || v4.is_loopback()
            || v4.is_link_local()
            || v4.is_unspecified()
            || v4.is_broadcast()
            || v4.octets()[0] == 0
            || (v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1]));
    }
    if let Ok(v6) = host.parse::<std::net::Ipv6Addr>() {
        if let Some(v4) = v6.to_ipv4_mapped() {
            return private_host(&v4.to_string());
        }
        let first = v6.segments()[0];
        return v6.is_loopback() || v6.is_unspecified() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80;
    }
    // Numbers in any base are an IPv4 address to a URL parser
    // (`http://2130706433/`, `http://0x7f.1/`): refused, whatever they name.
    host.split('.').all(|label| {
        let hex = label.strip_prefix("0x").map(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
        !label.is_empty() && hex.unwrap_or_else(|| label.chars().all(|c| c.is_ascii_digit()))
    })
}

/// What happened on a thread, for the endpoints that want it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub event: &'static str,
    pub data: Value,
}

/// One delivery to one endpoint: what the queue carries (as JSON text).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// `webhook-id`: the same on every attempt and replay.
    pub id: String,
    pub url: String,
    /// The environment variable holding the endpoint's secret.
    pub secret: String,
    pub event: String,
    /// The exact bytes signed and sent.
    pub body: String,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// When the delivery was decided (ms).
    pub at: i64,
}

impl Delivery {
    /// The deliveries of `notice` (on `thread`, whose owner is `actor`), one
    /// per endpoint that wants it, each with a fresh id from `id`.
    pub fn of(
        notice: &Notice,
        thread: &str,
        actor: Option<&str>,
        endpoints: &[Endpoint],
        now: i64,
        id: &mut dyn FnMut() -> String,
    ) -> Vec<Delivery> {
        let mut data = notice.data.clone();
        if let Some(map) = data.as_object_mut() {
            map.insert("threadId".into(), thread.into());
            if let Some(actor) = actor {
                map.insert("actor".into(), actor.into());
            }
        }
        let body =
            json!({ "type": notice.event, "timestamp": crate::wire::time::rfc3339(now), "data": data }).to_string();
        endpoints
            .iter()
            .filter(|e| e.wants(notice.event))
            .map(|e| Delivery {
                id: id(),
                url: e.url.clone(),
                secret: e.secret.clone(),
                event: notice.event.to_owned(),
                body: body.clone(),
                attempt: 1,
                at: now,
            })
            .collect()
    }
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A 2xx answer.
    Delivered,
    /// Another answer, none in time, or no connection.
    Failed { status: Option<u16>, error: String },
}

/// What follows an attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Done,
    /// Try again after `delay_s`, as this delivery (its next attempt).
    Again {
        delivery: Delivery,
        delay_s: u32,
    },
    /// The attempts are spent (or the endpoint is gone: 410): kept for the
    /// deployer to list and replay.
    Dead(DeadLetter),
}

/// A delivery whose attempts are spent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter {
    pub delivery: Delivery,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    pub last_error: String,
    /// When it was given up (ms).
    pub at: i64,
}

/// What follows `attempt`'s `outcome`: `random` spreads the retries of many
/// deliveries (up to a tenth more wait).
pub fn after(attempt: &Delivery, outcome: Outcome, policy: &Policy, now: i64, random: u64) -> Next {
    let (status, error) = match outcome {
        Outcome::Delivered => return Next::Done,
        Outcome::Failed { status, error } => (status, error),
    };
    if attempt.attempt >= policy.max_attempts || status == Some(410) {
        return Next::Dead(DeadLetter {
            delivery: attempt.clone(),
            attempts: attempt.attempt,
            last_status: status,
            last_error: error,
            at: now,
        });
    }
    let base = policy.retry_s.max(1).saturating_mul(1 << (attempt.attempt - 1).min(16)).min(MAX_DELAY_S);
    let jitter = (random % (u64::from(base) / 10 + 1)) as u32;
    Next::Again { delivery: Delivery { attempt: attempt.attempt + 1, ..attempt.clone() }, delay_s: base + jitter }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_and_link_local_hosts_are_refused() {
        for host in [
            "localhost",
            "a.localhost",
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
            "2130706433",
            "0x7f.1",
            "metadata.internal",
        ] {
            assert!(private_host(host), "{host}");
        }
        for host in ["example.com", "8.8.8.8", "2606:4700::1111", "hooks.example.org"] {
            assert!(!private_host(host), "{host}");
        }
        assert_eq!(url_host("https://user@[::1]:8443/x"), Some("::1"));
        assert_eq!(url_host("http://127.0.0.1:9/hook?x"), Some("127.0.0.1"));
        assert_eq!(url_host("ftp://x"), None);
    }

    #[test]
    fn webhooks_is_read_strictly() {
        let ok = r#"[{"url":"https://hooks.example.com/t","events":["run.finished"],"secret":"HOOK_SECRET"}]"#;
        assert_eq!(endpoints(Some(ok), false).unwrap().len(), 1);
        let local = r#"[{"url":"http://127.0.0.1:9/t","events":["*"],"secret":"S"}]"#;
        assert!(endpoints(Some(local), false).unwrap_err().contains("WEBHOOKS_ALLOW_PRIVATE"));
        assert!(endpoints(Some(local), true).is_ok());
        for bad in [
            "{}",
            r#"[{"url":"https://x.com","events":["run.exploded"],"secret":"S"}]"#,
            r#"[{"url":"https://x.com","events":[],"secret":"S"}]"#,
            r#"[{"url":"https://x.com","events":["*"],"secret":"whsec_abc"}]"#,
            r#"[{"url":"https://x.com","events":["*"],"secret":"S","extra":1}]"#,
            r#"[{"url":"http://x.com","events":["*"],"secret":"S"}]"#,
        ] {
            assert!(endpoints(Some(bad), false).is_err(), "{bad}");
        }
    }

    #[test]
    fn attempts_back_off_then_end_in_a_dead_letter_with_the_same_id() {
        let policy = Policy { max_attempts: 4, retry_s: 10, ..Policy::default() };
        let n = Notice { event: "run.finished", data: json!({"runId": "r1"}) };
        let eps = endpoints(Some(r#"[{"url":"https://a.com","events":["run.finished"],"secret":"A"},{"url":"https://b.com","events":["thread.deleted"],"secret":"B"}]"#), false).unwrap();
        let mut next = 0;
        let ds = Delivery::of(&n, "t1", Some("alice"), &eps, 0, &mut || {
            next += 1;
            format!("msg_{next}")
        });
        assert_eq!(ds.len(), 1, "only the endpoint that wants it");
        let body: Value = serde_json::from_str(&ds[0].body).unwrap();
        assert_eq!(body["data"], json!({"runId": "r1", "threadId": "t1", "actor": "alice"}));
        let fail = || Outcome::Failed { status: Some(500), error: "HTTP 500".into() };
        let mut d = ds[0].clone();
        let mut delays = Vec::new();
        loop {
            match after(&d, fail(), &policy, 0, 0) {
                Next::Again { delivery, delay_s } => {
                    assert_eq!(delivery.id, "msg_1");
                    delays.push(delay_s);
                    d = delivery;
                }
                Next::Dead(dead) => {
                    assert_eq!((dead.attempts, dead.delivery.id.as_str()), (4, "msg_1"));
                    break;
                }
                Next::Done => unreachable!(),
            }
        }
        assert_eq!(delays, [10, 20, 40]);
        assert_eq!(after(&ds[0], Outcome::Delivered, &policy, 0, 0), Next::Done);
        let gone = after(&ds[0], Outcome::Failed { status: Some(410), error: String::new() }, &policy, 0, 0);
        assert!(matches!(gone, Next::Dead(_)), "410: the endpoint is gone");
    }
}
