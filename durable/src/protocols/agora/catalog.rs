//! What agora's client reads of the deployment and the caller
//! (`AgentCatalogEntry`, `ModelCatalogView`, `QuotaReport`, `ThreadSummary`
//! in agora's `types.ts` and `spi/`): the agents, a bare array; the models
//! grouped by provider, with the lock an agent puts on them; the caller's
//! budget as windows; the caller's threads, a bare array. Each keeps the
//! fields the first form of these routes had where they do not collide
//! with agora's (`id`/`label` on an agent, the flat `models` list).

use crate::agent::models::{CatalogView, ModelView};
use crate::agent::personas::{Agents, DEFAULT};
use crate::agent::quota::{Limit, Used};
use crate::wire::time::rfc3339;
use serde::{Deserialize, Serialize};

/// An agent as agora's client lists it (`AgentCatalogEntry`), with the first
/// form's `id` and `label`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEntry {
    pub name: String,
    pub description: String,
    pub id: String,
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_default: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_reason: Option<String>,
}

/// `GET /agent/agents`: `[{name, description, isDefault?, lockedModel?}]`,
/// the default first.
pub fn agents(agents: &Agents) -> Vec<AgentEntry> {
    let mut out: Vec<AgentEntry> = agents
        .0
        .iter()
        .map(|(id, a)| AgentEntry {
            name: id.clone(),
            description: a.label.clone(),
            id: id.clone(),
            label: a.label.clone(),
            is_default: (id == DEFAULT).then_some(true),
            model: a.locked.as_ref().map(|l| &l.model).or(a.model.as_ref()).cloned(),
            locked_model: a.locked.as_ref().map(|l| l.model.clone()),
            locked_reason: a.locked.as_ref().and_then(|l| l.reason.clone()),
        })
        .collect();
    out.sort_by_key(|a| a.is_default != Some(true));
    out
}

/// agora's `ModelCatalogView`: the catalog's view as it is (the first form's
/// flat `models`), with the models grouped by provider and the lock.
#[derive(Debug, Serialize)]
pub struct Models {
    #[serde(flatten)]
    pub view: CatalogView,
    pub providers: Vec<Provider>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked: Option<Locked>,
}

#[derive(Debug, Serialize)]
pub struct Provider {
    pub id: String,
    pub label: String,
    /// The view's entries, each without its provider (the list says it).
    pub models: Vec<ModelView>,
}

#[derive(Debug, Serialize)]
pub struct Locked {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /agent/models?agent=`: the catalog's view (`Catalog::view`) with
/// agora's `providers: [{id, label, models}]`, in the order the catalog
/// lists them, and `locked: {model, reason?}` when the agent is locked.
pub fn models(view: CatalogView, locked: Option<(&str, Option<&str>)>) -> Models {
    let mut providers: Vec<Provider> = Vec::new();
    for m in &view.models {
        let mut entry = m.clone();
        let provider = entry.provider.take().unwrap_or_else(|| DEFAULT.to_owned());
        match providers.iter_mut().find(|p| p.id == provider) {
            Some(p) => p.models.push(entry),
            None => {
                let label = view.provider_labels.get(&provider).cloned().unwrap_or_else(|| provider.clone());
                providers.push(Provider { id: provider, label, models: vec![entry] });
            }
        }
    }
    let locked = locked.map(|(model, reason)| Locked { model: model.to_owned(), reason: reason.map(str::to_owned) });
    Models { view, providers, locked }
}

/// The caller's budget as their directory reports it (`quota::Config::view`),
/// or, with no `QUOTA`, `unlimited`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaView {
    pub period: Option<String>,
    pub used: Option<Used>,
    pub limit: Limit,
    pub resets_at: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unlimited: bool,
}

impl QuotaView {
    /// No `QUOTA`: no limit, and nothing counted.
    pub fn unlimited() -> QuotaView {
        QuotaView { period: None, used: None, limit: Limit::default(), resets_at: None, unlimited: true }
    }
}

/// agora's `QuotaReport`: the view, with its `windows` and, when the budget
/// is spent, `blocked`.
#[derive(Debug, Serialize)]
pub struct Quota {
    #[serde(flatten)]
    pub view: QuotaView,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Blocked>,
    pub windows: Vec<Window>,
}

#[derive(Debug, Serialize)]
pub struct Blocked {
    pub period: Option<String>,
    pub reason: &'static str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    pub period: Option<String>,
    pub used_tokens: u64,
    pub used_usd: f64,
    pub resets_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_usd: Option<f64>,
}

/// `GET /agent/quota`: the directory's view (`{period, used, limit,
/// resetsAt}`, or `unlimited`) with agora's `windows` and, when the budget
/// is spent, `blocked: {period, reason}`.
pub fn quota(view: QuotaView) -> Quota {
    if view.unlimited {
        return Quota { view, blocked: None, windows: Vec::new() };
    }
    let used = view.used.unwrap_or_default();
    let window = Window {
        period: view.period.clone(),
        used_tokens: used.tokens,
        used_usd: used.cost_usd,
        resets_at: view.resets_at.clone(),
        limit_tokens: view.limit.tokens,
        limit_usd: view.limit.cost_usd,
    };
    let spent = view.limit.tokens.is_some_and(|l| used.tokens >= l)
        || view.limit.cost_usd.is_some_and(|l| used.cost_usd >= l);
    let blocked = spent.then(|| Blocked { period: view.period.clone(), reason: crate::thread::QUOTA_EXCEEDED });
    Quota { view, blocked, windows: vec![window] }
}

/// A thread as the caller's directory lists it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub thread_id: String,
    pub title: Option<String>,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub runs: Option<i64>,
}

/// The directory's answer to a list (a page of the inbox).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub rows: Vec<Row>,
    /// Where the next page starts, when there is one.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// agora's `ThreadSummary`, with the first form's `threadId` and `runs`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSummary {
    pub id: String,
    pub title: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub transient: bool,
    pub persona: Option<String>,
    pub thread_id: String,
    pub runs: Option<i64>,
}

/// `GET /agent/threads`: the directory's rows as `[{id, title, createdAt,
/// updatedAt, transient, persona}]` (times in ISO 8601), newest first, with
/// `threadId` and `runs`.
pub fn threads(rows: Vec<Row>) -> Vec<ThreadSummary> {
    rows.into_iter()
        .map(|r| ThreadSummary {
            id: r.thread_id.clone(),
            title: r.title,
            created_at: r.created_at.map(rfc3339),
            updated_at: r.updated_at.map(rfc3339),
            transient: false,
            persona: None,
            thread_id: r.thread_id,
            runs: r.runs,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn agents_in_agoras_words() {
        let catalog = crate::agent::models::Catalog::parse(Some(r#"{"default":"m1","models":{"m1":{"model":"x"},"m2":{"model":"y"}}}"#), "z", None)
            .unwrap();
        let plain = Agents::parse(None, &catalog, &[]).unwrap();
        assert_eq!(
            serde_json::to_string(&agents(&plain)).unwrap(),
            json!([{"name": "default", "description": "Default", "id": "default", "label": "Default", "isDefault": true}]).to_string()
        );
        let tools = ["weather".to_owned()];
        let locked = Agents::parse(
            Some(r#"{"support":{"label":"Support","tools":["weather"],"locked":{"model":"m2","reason":"policy"}}}"#),
            &catalog,
            &tools,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&agents(&locked)[1]).unwrap(),
            json!({"name": "support", "description": "Support", "id": "support", "label": "Support", "model": "m2", "lockedModel": "m2", "lockedReason": "policy"})
        );
    }

    #[test]
    fn models_grouped_by_provider_and_the_lock() {
        let model = |id: &str, label: &str, available: bool, provider: &str| ModelView {
            id: id.into(),
            label: label.into(),
            available,
            unavailable_reason: (!available).then(|| "no".into()),
            badges: None,
            provider: Some(provider.into()),
        };
        let view = CatalogView {
            default: Some("openai/a".into()),
            models: vec![
                model("openai/a", "A", true, "openai"),
                model("local", "L", false, "lab"),
                ModelView { badges: Some(vec!["fast".into()]), ..model("openai/b", "B", true, "openai") },
            ],
            provider_labels: [("openai".to_owned(), "OpenAI".to_owned())].into(),
        };
        let v = serde_json::to_value(models(view, Some(("openai/a", Some("house rule"))))).unwrap();
        assert_eq!(
            v["providers"],
            json!([
                { "id": "openai", "label": "OpenAI", "models": [
                    { "id": "openai/a", "label": "A", "available": true },
                    { "id": "openai/b", "label": "B", "available": true, "badges": ["fast"] } ] },
                { "id": "lab", "label": "lab", "models": [
                    { "id": "local", "label": "L", "available": false, "unavailableReason": "no" } ] },
            ])
        );
        assert_eq!(v["locked"], json!({ "model": "openai/a", "reason": "house rule" }));
        assert_eq!(v["default"], "openai/a");
    }

    #[test]
    fn quota_windows_and_blocked() {
        let read = |v: Value| serde_json::to_string(&quota(serde_json::from_value(v).unwrap())).unwrap();
        let view = json!({ "period": "day", "used": { "tokens": 100, "costUsd": 0.5 },
                           "limit": { "tokens": 100 }, "resetsAt": "2026-12-05T00:00:00.000Z" });
        assert_eq!(
            read(view),
            json!({ "period": "day", "used": { "tokens": 100, "costUsd": 0.5 }, "limit": { "tokens": 100 },
                    "resetsAt": "2026-12-05T00:00:00.000Z",
                    "blocked": { "period": "day", "reason": "quota_exceeded" },
                    "windows": [{ "period": "day", "usedTokens": 100, "usedUsd": 0.5,
                                  "resetsAt": "2026-12-05T00:00:00.000Z", "limitTokens": 100 }] })
            .to_string()
        );
        let open = read(json!({ "period": "day", "used": { "tokens": 1, "costUsd": 0.0 }, "limit": { "costUsd": 1.0 }, "resetsAt": "x" }));
        assert!(!open.contains("blocked"), "{open}");
        assert_eq!(
            serde_json::to_string(&quota(QuotaView::unlimited())).unwrap(),
            r#"{"period":null,"used":null,"limit":{},"resetsAt":null,"unlimited":true,"windows":[]}"#
        );
    }

    #[test]
    fn threads_as_summaries() {
        let listed: Listed = serde_json::from_value(
            json!({ "rows": [{ "threadId": "t1", "title": null, "createdAt": 0, "updatedAt": 1000, "runs": 2 }] }),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&threads(listed.rows)).unwrap(),
            json!([{ "id": "t1", "title": null, "createdAt": "1970-01-01T00:00:00.000Z",
                     "updatedAt": "1970-01-01T00:00:01.000Z", "transient": false, "persona": null,
                     "threadId": "t1", "runs": 2 }])
            .to_string()
        );
    }
}
