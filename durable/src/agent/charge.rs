//! What a model call costs the actor whose turn caused it.
//!
//! Every model call the built-in agent makes (the orchestrator's steps, a
//! sub-agent's, a background sub-agent's after its run ended) is charged on
//! its own, through one path:
//!
//! 1. Before the call, the thread **holds** what it may use: an estimate
//!    from the request's size and the model's output cap ([`estimate`]),
//!    stored as a held [`Charge`] in the thread and, with `QUOTA`, reserved
//!    in the actor's directory, which refuses it when their budget has
//!    nothing left (`Op::Hold`).
//! 2. When the call ends, however it ends, the charge is **settled**: what
//!    the provider reported, or, for a call cut before it reported (cancelled,
//!    failed, stalled), the estimate of what was sent and streamed.
//! 3. The settled charge stays in the thread's storage (its outbox) until
//!    the directory has it (`Op::Charge`), retried by the thread's alarm;
//!    the directory counts a charge once, by its id, and drops its hold.
//!
//! A held charge found when a thread loads was cut with the instance that
//! made it: it is settled then as estimated. Deleting a thread delivers its
//! charges first, and keeps the ones its directory did not take.

use crate::agent::models::Price;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tokens one call may use (a hold) or used (a charge), and their price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
}

impl Spend {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// What a provider's `usage` (`{prompt_tokens, completion_tokens,
    /// costUsd?}`) says was used.
    pub fn reported(usage: &Value) -> Spend {
        let n = |k: &str| usage[k].as_u64().unwrap_or(0);
        Spend {
            input_tokens: n("prompt_tokens"),
            output_tokens: n("completion_tokens"),
            cost_usd: usage["costUsd"].as_f64().filter(|c| c.is_finite() && *c >= 0.0).unwrap_or(0.0),
        }
    }

    fn priced(input_tokens: u64, output_tokens: u64, price: Option<Price>) -> Spend {
        let cost_usd =
            price.map_or(0.0, |p| (input_tokens as f64 * p.input + output_tokens as f64 * p.output) / 1_000_000.0);
        Spend { input_tokens, output_tokens, cost_usd }
    }
}

/// What a call's output is counted as when its model names no cap
/// (`maxOutputTokens` in `LLM_MODELS`).
pub const DEFAULT_OUTPUT_CAP: u64 = 4_096;

/// What a file or image the request refers to is counted as, before the
/// provider says (its bytes are not text).
pub const FILE_TOKENS: u64 = 1_600;

/// Tokens `bytes` of a request's text are taken to be: one per three bytes,
/// rounded up. Providers' tokenizers give about four English characters a
/// token and one to three bytes of other scripts (a CJK character is three
/// bytes and about a token), so this errs high.
pub fn text_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(3)
}

/// What a call may use: its request (`request_bytes` of JSON text, `files`
/// referred to) and its output cap, at the model's price.
pub fn estimate(request_bytes: usize, files: usize, output_cap: u64, price: Option<Price>) -> Spend {
    Spend::priced(text_tokens(request_bytes) + files as u64 * FILE_TOKENS, output_cap, price)
}

/// What a call cut before its provider reported is charged: its whole
/// request, and what it streamed back (`streamed` bytes).
pub fn cut(hold: &Spend, streamed: usize, price: Option<Price>) -> Spend {
    Spend::priced(hold.input_tokens, text_tokens(streamed), price)
}

/// One model call's charge to the actor whose turn caused it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    /// Unique across threads (the thread's id and a random part): the
    /// directory counts a charge once by it, however often it is sent.
    pub id: String,
    pub actor: String,
    /// The run whose turn made the call (its sub-agents' included).
    pub run_id: String,
    /// When the call started (its hold) or ended (its charge), ms.
    pub at: i64,
    /// The catalog id (or provider model name) of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(flatten)]
    pub spend: Spend,
    /// The call is in flight: `spend` is what it may use.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// The provider reported nothing (the call was cut): `spend` is the
    /// estimate of what was sent and streamed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// The price the call was made at, to settle a cut call with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<(f64, f64)>,
}

impl Charge {
    /// The call was cut before its provider reported: what it is charged.
    pub fn cut(&self, streamed: usize) -> Spend {
        cut(&self.spend, streamed, self.price.map(|(input, output)| Price { input, output }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_estimate_errs_high_and_prices_what_it_counts() {
        let price = Price { input: 1.0, output: 2.0 };
        let e = estimate(3_000, 1, 500, Some(price));
        assert_eq!(e.input_tokens, 1_000 + FILE_TOKENS);
        assert_eq!(e.output_tokens, 500);
        assert!((e.cost_usd - (2_600.0 + 1_000.0) / 1_000_000.0).abs() < 1e-12);
        assert_eq!(estimate(1, 0, 0, None), Spend { input_tokens: 1, output_tokens: 0, cost_usd: 0.0 });
        // "日本語" is nine bytes and about three tokens.
        assert_eq!(text_tokens("日本語".len()), 3);
    }

    #[test]
    fn a_reported_usage_is_read_as_reported() {
        let s = Spend::reported(&json!({"prompt_tokens": 7, "completion_tokens": 3, "costUsd": 0.5}));
        assert_eq!(s, Spend { input_tokens: 7, output_tokens: 3, cost_usd: 0.5 });
        assert_eq!(s.tokens(), 10);
        let hostile = Spend::reported(&json!({"prompt_tokens": -1, "completion_tokens": "x", "costUsd": -3.0}));
        assert_eq!(hostile, Spend::default());
    }

    #[test]
    fn a_cut_call_is_charged_its_request_and_what_it_streamed() {
        let hold = Spend { input_tokens: 100, output_tokens: 50, cost_usd: 0.0 };
        assert_eq!(cut(&hold, 30, None), Spend { input_tokens: 100, output_tokens: 10, cost_usd: 0.0 });
        // More than the cap streamed (a provider that ignored it) counts as streamed.
        assert_eq!(cut(&hold, 3_000, None).output_tokens, 1_000);
        let c = Charge {
            id: "t/c".into(),
            actor: "a".into(),
            run_id: "r".into(),
            at: 0,
            model: None,
            spend: hold,
            held: true,
            estimated: false,
            price: Some((1.0, 1.0)),
        };
        assert_eq!(c.cut(0).cost_usd, 100.0 / 1_000_000.0);
        let stored = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Charge>(&stored).unwrap(), c);
    }
}
