//! The model catalog (`LLM_MODELS`, `docs/protocols/agora-streaming-and-http.md` "Models"): which models a
//! send may pick, the default, and the rule for a turn's model: the send's
//! pick, else the thread's pin, else the default. A model the catalog does
//! not list as available is refused (400 `model_not_allowed`), on a send and
//! on a pin: clients only send listed ids, but the server does not trust that.

use crate::wire::error::ApiError;
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
    /// Short tags a picker shows beside the label (`["fast"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub badges: Vec<String>,
    /// The provider's key in `providerLabels` (`openai`); by default the
    /// part of the id before its `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Only callers holding one of these roles may pick it (none: anyone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// Prices, for a step's `costUsd` and the quota's cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_usd_per_m_tok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_usd_per_m_tok: Option<f64>,
    /// What the model takes besides text: `["text", "image", "file"]`
    /// (`file`: PDFs). Default: text and images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Vec<String>>,
    /// Most tokens one call may answer with: sent as `max_tokens`, and
    /// what a call holds of its sender's budget for its answer (default
    /// `charge::DEFAULT_OUTPUT_CAP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The model's context window, in tokens: what a call may hold, its
    /// answer included (default `AGENT_CONTEXT_WINDOW`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

impl ModelEntry {
    /// One model, nothing more said of it.
    pub fn plain(model: &str) -> ModelEntry {
        ModelEntry {
            model: model.to_owned(),
            label: model.to_owned(),
            base_url: None,
            key_name: None,
            available: true,
            unavailable_reason: None,
            badges: Vec::new(),
            provider: None,
            roles: None,
            input_usd_per_m_tok: None,
            output_usd_per_m_tok: None,
            input: None,
            max_output_tokens: None,
            context_window: None,
        }
    }

    /// Whether the model takes files that are `input` to it.
    pub fn takes(&self, input: crate::files::media::Input) -> bool {
        use crate::files::media::Input;
        match &self.input {
            None => matches!(input, Input::Text | Input::Image),
            Some(list) => input == Input::Text || list.iter().any(|i| i == input.as_str()),
        }
    }

    /// Its prices, when the catalog gives either (the other is then free).
    pub fn price(&self) -> Option<Price> {
        (self.input_usd_per_m_tok.is_some() || self.output_usd_per_m_tok.is_some()).then(|| Price {
            input: self.input_usd_per_m_tok.unwrap_or(0.0),
            output: self.output_usd_per_m_tok.unwrap_or(0.0),
        })
    }
}

/// A model's prices, in dollars per million input and output tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

impl Price {
    /// What `usage` (`{prompt_tokens, completion_tokens}`) cost.
    pub fn cost_usd(&self, usage: &serde_json::Value) -> f64 {
        let tokens = |k: &str| usage[k].as_f64().unwrap_or(0.0);
        (tokens("prompt_tokens") * self.input + tokens("completion_tokens") * self.output) / 1_000_000.0
    }
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub default: String,
    pub models: BTreeMap<String, ModelEntry>,
    /// A provider's name for people (`{"openai": "OpenAI"}`).
    #[serde(default, rename = "providerLabels", skip_serializing_if = "BTreeMap::is_empty")]
    pub provider_labels: BTreeMap<String, String>,
}

/// Who picks, as the catalog sees it: the caller's roles, and the agent
/// the turn runs as (a locked agent allows one model).
#[derive(Clone, Copy, Debug, Default)]
pub struct Picker<'a> {
    pub roles: &'a [String],
    /// The agent's locked model and why.
    pub locked: Option<(&'a str, Option<&'a str>)>,
    /// The agent's own default model.
    pub agent_model: Option<&'a str>,
}

impl Catalog {
    /// Parses `LLM_MODELS`; with none, a catalog of the one `LLM_MODEL`,
    /// taking `single_input` (`LLM_MODEL_INPUT`: `text,image,file`).
    pub fn parse(json: Option<&str>, single_model: &str, single_input: Option<&str>) -> Result<Catalog, String> {
        let catalog = match json.map(str::trim).filter(|s| !s.is_empty()) {
            None => {
                let mut models = BTreeMap::new();
                let mut entry = ModelEntry::plain(single_model);
                entry.input =
                    single_input.map(|i| i.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect());
                models.insert(single_model.to_owned(), entry);
                Catalog { default: single_model.to_owned(), models, provider_labels: BTreeMap::new() }
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
        self.check_for(id, &Picker::default())
    }

    /// Why `id` is not available to `who`, if it is not.
    fn unavailable(&self, id: &str, m: &ModelEntry, who: &Picker) -> Option<String> {
        if !m.available {
            return Some(m.unavailable_reason.clone().unwrap_or_else(|| "unavailable".to_owned()));
        }
        if let Some((locked, reason)) = who.locked {
            if locked != id {
                return Some(reason.map_or_else(|| format!("this agent runs on `{locked}`"), str::to_owned));
            }
        }
        match &m.roles {
            Some(roles) if !roles.iter().any(|r| who.roles.contains(r)) => {
                Some(format!("needs one of the roles {}", roles.join(", ")))
            }
            _ => None,
        }
    }

    /// Checks an id `who` picked: listed, and available to them (400
    /// `model_not_allowed` otherwise).
    pub fn check_for(&self, id: &str, who: &Picker) -> Result<&ModelEntry, ApiError> {
        let m = self
            .models
            .get(id)
            .ok_or_else(|| ApiError::model_not_allowed(format!("`{id}` is not in the model catalog")))?;
        match self.unavailable(id, m, who) {
            None => Ok(m),
            Some(why) => Err(ApiError::model_not_allowed(format!("`{id}` is not available: {why}"))),
        }
    }

    /// A turn's model id: a locked agent's model whatever was asked, else
    /// the send's pick, else the pin (while still available to `who`), else
    /// the agent's model, else the default.
    pub fn pick<'a>(
        &'a self,
        send: Option<&'a str>,
        pin: Option<&'a str>,
        who: &Picker<'a>,
    ) -> Result<&'a str, ApiError> {
        if let Some((locked, _)) = who.locked {
            if let Some(id) = send {
                self.check_for(id, who)?;
            }
            // A lock picks the model, not who may use it: the caller's
            // roles still apply.
            self.check_for(locked, who)?;
            return Ok(locked);
        }
        if let Some(id) = send {
            self.check_for(id, who)?;
            return Ok(id);
        }
        let usable = |id: &&str| self.check_for(id, who).is_ok();
        Ok(pin.filter(usable).or(who.agent_model.filter(usable)).unwrap_or(&self.default))
    }

    /// `GET /agent/models`, as `who` sees it: each model with `available`
    /// and, when not, `unavailableReason`; its label, badges and provider;
    /// the provider labels; and the default `who` would get.
    pub fn view(&self, who: &Picker) -> CatalogView {
        let models = self
            .models
            .iter()
            .map(|(id, m)| {
                let why = self.unavailable(id, m, who);
                ModelView {
                    id: id.clone(),
                    label: m.label.clone(),
                    available: why.is_none(),
                    unavailable_reason: why,
                    badges: (!m.badges.is_empty()).then(|| m.badges.clone()),
                    provider: m.provider.clone().or_else(|| id.split_once('/').map(|(p, _)| p.to_owned())),
                }
            })
            .collect();
        // None when nothing is available to them (an agent locked to a
        // model their roles do not reach).
        let default = match who.locked {
            Some(_) => self.pick(None, None, who).ok(),
            None => Some(self.pick(None, None, who).unwrap_or(&self.default)),
        };
        CatalogView { default: default.map(str::to_owned), models, provider_labels: self.provider_labels.clone() }
    }
}

/// The catalog as one caller sees it ([`Catalog::view`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogView {
    /// The model they get when they pick none (`null` when none is
    /// available to them).
    pub default: Option<String>,
    pub models: Vec<ModelView>,
    pub provider_labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelView {
    pub id: String,
    pub label: String,
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub badges: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
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
            None,
        )
        .unwrap();
        let anyone = Picker::default();
        assert_eq!(c.pick(None, None, &anyone).unwrap(), "fast");
        assert_eq!(c.pick(None, Some("big"), &anyone).unwrap(), "big");
        assert_eq!(c.pick(Some("fast"), Some("big"), &anyone).unwrap(), "fast");
        assert_eq!(c.pick(Some("locked"), None, &anyone).unwrap_err().code, "model_not_allowed");
        assert_eq!(c.pick(Some("nope"), None, &anyone).unwrap_err().code, "model_not_allowed");
        assert_eq!(c.pick(None, Some("locked"), &anyone).unwrap(), "fast");
        assert_eq!(c.view(&anyone).models.len(), 3);
        assert!(Catalog::parse(Some(r#"{"default":"none","models":{}}"#), "x", None).is_err());
        assert_eq!(Catalog::parse(None, "gpt", None).unwrap().pick(None, None, &anyone).unwrap(), "gpt");
        // What a model takes: text and images unless it says.
        use crate::files::media::Input;
        let plain = Catalog::parse(None, "gpt", None).unwrap();
        assert!(plain.models["gpt"].takes(Input::Image) && !plain.models["gpt"].takes(Input::File));
        let pdf = Catalog::parse(None, "gpt", Some("text, file")).unwrap();
        assert!(pdf.models["gpt"].takes(Input::File) && !pdf.models["gpt"].takes(Input::Image));
    }

    #[test]
    fn locked_agents_roles_and_prices() {
        let c = Catalog::parse(
            Some(
                r#"{"default":"a/fast","providerLabels":{"a":"A Inc"},"models":{
                "a/fast":{"model":"m1","label":"Fast","badges":["fast"],"inputUsdPerMTok":1.0,"outputUsdPerMTok":2.0},
                "a/big":{"model":"m2","label":"Big","roles":["PRO"]}}}"#,
            ),
            "x",
            None,
        )
        .unwrap();
        let pro = ["PRO".to_owned()];
        let locked = Picker { locked: Some(("a/big", Some("house rules"))), ..Picker::default() };
        let pro_locked = Picker { roles: &pro, ..locked };
        assert_eq!(c.pick(None, Some("a/fast"), &pro_locked).unwrap(), "a/big");
        assert_eq!(c.pick(Some("a/fast"), None, &locked).unwrap_err().code, "model_not_allowed");
        let view = serde_json::to_value(c.view(&locked)).unwrap();
        assert_eq!(view["models"][1]["unavailableReason"], "house rules");
        assert_eq!(view["models"][1]["badges"], serde_json::json!(["fast"]));
        assert_eq!(view["providerLabels"]["a"], "A Inc");
        assert_eq!(view["models"][0]["provider"], "a");
        // Roles: only a PRO caller may pick `a/big`, even through an agent
        // locked to it; the view then offers them no default.
        assert_eq!(c.pick(None, None, &locked).unwrap_err().code, "model_not_allowed");
        assert_eq!(c.pick(None, None, &pro_locked).unwrap(), "a/big");
        assert_eq!(c.view(&locked).default, None);
        assert_eq!(c.view(&pro_locked).default.as_deref(), Some("a/big"));
        assert!(c.check_for("a/big", &Picker::default()).is_err());
        assert!(c.check_for("a/big", &Picker { roles: &pro, ..Picker::default() }).is_ok());
        assert!(!c.view(&Picker::default()).models[0].available);
        let cost = c.models["a/fast"]
            .price()
            .map(|p| p.cost_usd(&serde_json::json!({"prompt_tokens": 1_000_000, "completion_tokens": 500_000})));
        assert_eq!(cost, Some(2.0));
        assert_eq!(c.models["a/big"].price(), None);
    }
}
