//! The model catalog (`LLM_MODELS`, `docs/protocols/agora-streaming-and-http.md` "Models"): which models a
//! send may pick, the default, and the rule for a turn's model: the send's
//! pick, else the thread's pin, else the default. A model the catalog does
//! not list as available is refused (400 `model_not_allowed`), on a send and
//! on a pin: clients only send listed ids, but the server does not trust that.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// The provider's model name sent in requests.
    pub model: String,
    #[serde(default)]
    pub label: String,
    /// Overrides `LLM_BASE_URL` for this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the variable (secret) holding this model's API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_name: Option<String>,
    #[serde(default = "yes")]
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub default: String,
    pub models: BTreeMap<String, ModelEntry>,
}

impl Catalog {
    /// Parses `LLM_MODELS`; with none, a catalog of the one `LLM_MODEL`.
    pub fn parse(json: Option<&str>, single_model: &str) -> Result<Catalog, String> {
        let catalog = match json.map(str::trim).filter(|s| !s.is_empty()) {
            None => {
                let mut models = BTreeMap::new();
                models.insert(
                    single_model.to_owned(),
                    ModelEntry {
                        model: single_model.to_owned(),
                        label: single_model.to_owned(),
                        base_url: None,
                        key_name: None,
                        available: true,
                        unavailable_reason: None,
                    },
                );
                Catalog { default: single_model.to_owned(), models }
            }
            Some(s) => serde_json::from_str::<Catalog>(s).map_err(|e| format!("LLM_MODELS is invalid: {e}"))?,
        };
        match catalog.models.get(&catalog.default) {
            Some(m) if m.available => Ok(catalog),
            _ => Err(format!("LLM_MODELS: the default `{}` is not an available model of the catalog", catalog.default)),
        }
    }

    /// Checks a picked id: listed and available.
    pub fn check(&self, id: &str) -> Result<&ModelEntry, ApiError> {
        match self.models.get(id) {
            Some(m) if m.available => Ok(m),
            Some(m) => Err(ApiError::model_not_allowed(format!(
                "`{id}` is not available{}",
                m.unavailable_reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            ))),
            None => Err(ApiError::model_not_allowed(format!("`{id}` is not in the model catalog"))),
        }
    }

    /// A turn's model id: the send's pick, else the pin, else the default.
    pub fn pick<'a>(&'a self, send: Option<&'a str>, pin: Option<&'a str>) -> Result<&'a str, ApiError> {
        if let Some(id) = send {
            self.check(id)?;
            return Ok(id);
        }
        match pin {
            // A pin that became unavailable falls back to the default.
            Some(id) if self.check(id).is_ok() => Ok(id),
            _ => Ok(&self.default),
        }
    }

    /// `GET /agent/models`.
    pub fn view(&self) -> serde_json::Value {
        let models: Vec<_> = self
            .models
            .iter()
            .map(|(id, m)| {
                let mut v = serde_json::json!({ "id": id, "label": m.label, "available": m.available });
                if let Some(r) = &m.unavailable_reason {
                    v["unavailableReason"] = r.clone().into();
                }
                v
            })
            .collect();
        serde_json::json!({ "default": self.default, "models": models })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_rules() {
        let c = Catalog::parse(
            Some(
                r#"{"default":"fast","models":{"fast":{"model":"m1","label":"Fast"},"big":{"model":"m2","label":"Big"},
                "locked":{"model":"m3","available":false,"unavailableReason":"over budget"}}}"#,
            ),
            "x",
        )
        .unwrap();
        assert_eq!(c.pick(None, None).unwrap(), "fast");
        assert_eq!(c.pick(None, Some("big")).unwrap(), "big");
        assert_eq!(c.pick(Some("fast"), Some("big")).unwrap(), "fast");
        assert_eq!(c.pick(Some("locked"), None).unwrap_err().code, "model_not_allowed");
        assert_eq!(c.pick(Some("nope"), None).unwrap_err().code, "model_not_allowed");
        assert_eq!(c.pick(None, Some("locked")).unwrap(), "fast");
        assert_eq!(c.view()["models"].as_array().unwrap().len(), 3);
        assert!(Catalog::parse(Some(r#"{"default":"none","models":{}}"#), "x").is_err());
        assert_eq!(Catalog::parse(None, "gpt").unwrap().pick(None, None).unwrap(), "gpt");
    }
}
