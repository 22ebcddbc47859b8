//! What agora's client reads of the deployment and the caller
//! (`AgentCatalogEntry`, `ModelCatalogView`, `QuotaReport`, `ThreadSummary`
//! in agora's `types.ts` and `spi/`): the agents, a bare array; the models
//! grouped by provider, with the lock an agent puts on them; the caller's
//! budget as windows; the caller's threads, a bare array. Each keeps the
//! fields the first form of these routes had where they do not collide
//! with agora's (`id`/`label` on an agent, the flat `models` list).

use crate::agent::personas::{Agents, DEFAULT};
use crate::wire::time::rfc3339;
use serde_json::{json, Map, Value};

/// `GET /agent/agents`: `[{name, description, isDefault?, lockedModel?}]`,
/// the default first.
pub fn agents(agents: &Agents) -> Value {
    let mut out: Vec<Value> = agents
        .0
        .iter()
        .map(|(id, a)| {
            let mut v = json!({ "name": id, "description": a.label, "id": id, "label": a.label });
            if id == DEFAULT {
                v["isDefault"] = true.into();
            }
            if let Some(m) = a.locked.as_ref().map(|l| &l.model).or(a.model.as_ref()) {
                v["model"] = m.clone().into();
            }
            if let Some(l) = &a.locked {
                v["lockedModel"] = l.model.clone().into();
                if let Some(r) = &l.reason {
                    v["lockedReason"] = r.clone().into();
                }
            }
            v
        })
        .collect();
    out.sort_by_key(|a| a["isDefault"] != true);
    Value::Array(out)
}

/// `GET /agent/models?agent=`: the catalog's view (`Catalog::view`) with
/// agora's `providers: [{id, label, models}]`, in the order the catalog
/// lists them, and `locked: {model, reason?}` when the agent is locked.
pub fn models(mut view: Value, locked: Option<(&str, Option<&str>)>) -> Value {
    let labels = view["providerLabels"].clone();
    let mut providers: Vec<(String, Vec<Value>)> = Vec::new();
    for m in view["models"].as_array().into_iter().flatten() {
        let provider = m["provider"].as_str().unwrap_or(DEFAULT).to_owned();
        let mut entry = Map::new();
        for k in ["id", "label", "available", "unavailableReason", "badges"] {
            if let Some(v) = m.get(k) {
                entry.insert(k.into(), v.clone());
            }
        }
        match providers.iter_mut().find(|(p, _)| *p == provider) {
            Some((_, models)) => models.push(Value::Object(entry)),
            None => providers.push((provider, vec![Value::Object(entry)])),
        }
    }
    let providers: Vec<Value> = providers
        .into_iter()
        .map(|(id, models)| {
            let label = labels[&id].as_str().unwrap_or(&id).to_owned();
            json!({ "id": id, "label": label, "models": models })
        })
        .collect();
    view["providers"] = providers.into();
    if let Some((model, reason)) = locked {
        view["locked"] = json!({ "model": model });
        if let Some(r) = reason {
            view["locked"]["reason"] = r.into();
        }
    }
    view
}

/// `GET /agent/quota`: the directory's view (`{period, used, limit,
/// resetsAt}`, or `unlimited`) with agora's `windows` and, when the budget
/// is spent, `blocked: {period, reason}`.
pub fn quota(mut view: Value) -> Value {
    if view["unlimited"] == true {
        view["windows"] = json!([]);
        return view;
    }
    let (used, limit) = (&view["used"], &view["limit"]);
    let mut window = json!({
        "period": view["period"],
        "usedTokens": used["tokens"],
        "usedUsd": used["costUsd"],
        "resetsAt": view["resetsAt"],
    });
    if let Some(t) = limit.get("tokens") {
        window["limitTokens"] = t.clone();
    }
    if let Some(c) = limit.get("costUsd") {
        window["limitUsd"] = c.clone();
    }
    let over = |u: &Value, l: Option<&Value>| l.and_then(Value::as_f64).is_some_and(|l| u.as_f64().unwrap_or(0.0) >= l);
    if over(&used["tokens"], limit.get("tokens")) || over(&used["costUsd"], limit.get("costUsd")) {
        view["blocked"] = json!({ "period": view["period"], "reason": crate::thread::QUOTA_EXCEEDED });
    }
    view["windows"] = json!([window]);
    view
}

/// `GET /agent/threads`: the directory's rows as `[{id, title, createdAt,
/// updatedAt, transient, persona}]` (times in ISO 8601), newest first, with
/// `threadId` and `runs`.
pub fn threads(rows: &Value) -> Value {
    let iso = |v: &Value| v.as_i64().map(rfc3339).map(Value::from).unwrap_or(Value::Null);
    let rows = rows.as_array().into_iter().flatten().map(|r| {
        json!({
            "id": r["threadId"],
            "title": r["title"],
            "createdAt": iso(&r["createdAt"]),
            "updatedAt": iso(&r["updatedAt"]),
            "transient": false,
            "persona": null,
            "threadId": r["threadId"],
            "runs": r["runs"],
        })
    });
    Value::Array(rows.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_in_agoras_words() {
        let catalog = crate::agent::models::Catalog::parse(Some(r#"{"default":"m1","models":{"m1":{"model":"x"},"m2":{"model":"y"}}}"#), "z", None)
            .unwrap();
        let plain = Agents::parse(None, &catalog, &[]).unwrap();
        assert_eq!(
            agents(&plain),
            json!([{"name": "default", "description": "Default", "isDefault": true, "id": "default", "label": "Default"}])
        );
        let tools = ["weather".to_owned()];
        let locked = Agents::parse(
            Some(r#"{"support":{"label":"Support","tools":["weather"],"locked":{"model":"m2","reason":"policy"}}}"#),
            &catalog,
            &tools,
        )
        .unwrap();
        assert_eq!(
            agents(&locked)[1],
            json!({"name": "support", "description": "Support", "id": "support", "label": "Support", "model": "m2", "lockedModel": "m2", "lockedReason": "policy"})
        );
    }

    #[test]
    fn models_grouped_by_provider_and_the_lock() {
        let view = json!({
            "default": "openai/a",
            "models": [
                { "id": "openai/a", "label": "A", "available": true, "provider": "openai" },
                { "id": "local", "label": "L", "available": false, "unavailableReason": "no", "provider": "lab" },
                { "id": "openai/b", "label": "B", "available": true, "badges": ["fast"], "provider": "openai" },
            ],
            "providerLabels": { "openai": "OpenAI" },
        });
        let v = models(view, Some(("openai/a", Some("house rule"))));
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
        let view = json!({ "period": "day", "used": { "tokens": 100, "costUsd": 0.5 },
                           "limit": { "tokens": 100 }, "resetsAt": "2026-12-05T00:00:00.000Z" });
        let v = quota(view);
        assert_eq!(
            v["windows"],
            json!([{ "period": "day", "usedTokens": 100, "limitTokens": 100, "usedUsd": 0.5,
                     "resetsAt": "2026-12-05T00:00:00.000Z" }])
        );
        assert_eq!(v["blocked"], json!({ "period": "day", "reason": "quota_exceeded" }));
        let v = quota(json!({ "period": "day", "used": { "tokens": 1, "costUsd": 0.0 }, "limit": { "costUsd": 1.0 }, "resetsAt": "x" }));
        assert!(v.get("blocked").is_none());
        assert_eq!(quota(json!({ "unlimited": true }))["windows"], json!([]));
    }

    #[test]
    fn threads_as_summaries() {
        let rows = json!([{ "threadId": "t1", "title": null, "createdAt": 0, "updatedAt": 1000, "runs": 2 }]);
        assert_eq!(
            threads(&rows),
            json!([{ "id": "t1", "title": null, "createdAt": "1970-01-01T00:00:00.000Z",
                     "updatedAt": "1970-01-01T00:00:01.000Z", "transient": false, "persona": null,
                     "threadId": "t1", "runs": 2 }])
        );
    }
}
