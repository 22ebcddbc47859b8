//! What runs used, as the usage routes show it: a thread's runs
//! (`GET /instance-ai/threads/:threadId/usage`, from its run records) and an
//! actor's turns across their threads (`GET /instance-ai/usage`, from their
//! directory), each per model with a total.
//!
//! Token counts are what the model reported (`prompt_tokens`,
//! `completion_tokens`, `total_tokens`); `costUsd` is the catalog's prices
//! applied to them, present only where the catalog prices the model.

use serde_json::{json, Value};

/// One model's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// The catalog id (or provider model name) the runs used; `None` for
    /// usage recorded before runs named their model.
    pub model: Option<String>,
    pub turns: i64,
    pub input: i64,
    pub output: i64,
    /// Total tokens (input and output, or what the model reported).
    pub tokens: i64,
    pub cost_usd: f64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.turns += other.turns;
        self.input += other.input;
        self.output += other.output;
        self.tokens += other.tokens;
        self.cost_usd += other.cost_usd;
    }

    fn json(&self) -> Value {
        let mut v = json!({
            "runs": self.turns,
            "inputTokens": self.input,
            "outputTokens": self.output,
            "totalTokens": self.tokens,
        });
        if self.cost_usd > 0.0 {
            v["costUsd"] = self.cost_usd.into();
        }
        v
    }
}

/// A run's usage as its record stores it (the agent's sum over its steps),
/// or `None` for a run that reported none.
pub fn of_run(usage: &str, picked: Option<&str>) -> Option<Totals> {
    let u: Value = serde_json::from_str(usage).ok().filter(Value::is_object)?;
    let n = |k: &str| u[k].as_i64().unwrap_or(0).max(0);
    let (input, output) = (n("prompt_tokens"), n("completion_tokens"));
    Some(Totals {
        model: u["model"].as_str().or(picked).map(str::to_owned),
        turns: 1,
        input,
        output,
        tokens: n("total_tokens").max(input + output),
        cost_usd: u["costUsd"].as_f64().unwrap_or(0.0).max(0.0),
    })
}

/// Sums `runs` per model (in model order) and overall.
pub fn sum(runs: impl IntoIterator<Item = Totals>) -> Vec<Totals> {
    let mut out: Vec<Totals> = Vec::new();
    for r in runs {
        match out.iter_mut().find(|t| t.model == r.model) {
            Some(t) => t.add(&r),
            None => out.push(r),
        }
    }
    out.sort_by(|a, b| a.model.cmp(&b.model));
    out
}

/// `{models: [{model, runs, inputTokens, outputTokens, totalTokens,
/// costUsd?}], total: {...}}`, with `since` (RFC 3339) when the figures
/// start at a time.
pub fn view(models: Vec<Totals>, since: Option<i64>) -> Value {
    let mut total = Totals::default();
    for m in &models {
        total.add(m);
    }
    let models: Vec<Value> = models
        .iter()
        .map(|m| {
            let mut v = m.json();
            v["model"] = m.model.clone().into();
            v
        })
        .collect();
    let mut out = json!({ "models": models, "total": total.json() });
    if let Some(since) = since {
        out["since"] = crate::wire::time::rfc3339(since).into();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_sum_per_model_and_cost_shows_only_where_priced() {
        let a = of_run(r#"{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"model":"m1"}"#, None).unwrap();
        let b = of_run(r#"{"prompt_tokens":1,"completion_tokens":1,"costUsd":0.5}"#, Some("m2")).unwrap();
        let c = of_run(r#"{"prompt_tokens":2,"completion_tokens":0,"model":"m1"}"#, Some("m2")).unwrap();
        assert_eq!(of_run("null", None), None);
        let v = view(sum([a, b, c]), None);
        assert_eq!(
            v,
            json!({
                "models": [
                    {"model": "m1", "runs": 2, "inputTokens": 5, "outputTokens": 4, "totalTokens": 9},
                    {"model": "m2", "runs": 1, "inputTokens": 1, "outputTokens": 1, "totalTokens": 2, "costUsd": 0.5},
                ],
                "total": {"runs": 3, "inputTokens": 6, "outputTokens": 5, "totalTokens": 11, "costUsd": 0.5},
            })
        );
    }
}
