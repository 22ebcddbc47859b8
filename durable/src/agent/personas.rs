//! The agents (personas) a deployment offers (`AGENTS`, agora's "Locking an
//! agent to one model"): each a label, and optionally its own system
//! prompt, the HTTP tools it may call, its default model, or a model it is
//! locked to. A send, a queued send and a regenerate may name one (`agent`);
//! the turn runs as it. Without `AGENTS`, and whenever `AGENTS` has no
//! `default` entry, a `default` agent is built from the deployment's own
//! settings (`AGENT_SYSTEM_PROMPT`, every tool, the catalog's default).

use crate::agent::models::{Catalog, Picker};
use crate::wire::error::ApiError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The agent a turn runs as when its send names none.
pub const DEFAULT: &str = "default";

/// A model an agent is locked to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDef {
    pub label: String,
    /// Replaces `AGENT_SYSTEM_PROMPT` for its turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// The HTTP tools of `TOOLS` it may call (none: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Its default model (a send or the thread's pin still choose).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Every turn runs on this model, whatever a send or the pin names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked: Option<Locked>,
}

impl AgentDef {
    /// How the catalog sees a turn of this agent, for a caller of `roles`.
    pub fn picker<'a>(&'a self, roles: &'a [String]) -> Picker<'a> {
        Picker {
            roles,
            locked: self.locked.as_ref().map(|l| (l.model.as_str(), l.reason.as_deref())),
            agent_model: self.model.as_deref(),
        }
    }
}

/// The deployment's agents, `default` among them.
#[derive(Clone, Debug, PartialEq)]
pub struct Agents(pub BTreeMap<String, AgentDef>);

impl Agents {
    /// Parses `AGENTS` (`{"<id>": {label, systemPrompt?, tools?, model?,
    /// locked?: {model, reason?}}}`), checking every model it names against
    /// `catalog` and every tool against `tools` (the names `TOOLS` declares).
    pub fn parse(json: Option<&str>, catalog: &Catalog, tools: &[String]) -> Result<Agents, String> {
        let mut agents: BTreeMap<String, AgentDef> = match json.map(str::trim).filter(|s| !s.is_empty()) {
            None => BTreeMap::new(),
            Some(s) => serde_json::from_str(s).map_err(|e| format!("AGENTS is invalid: {e}"))?,
        };
        agents.entry(DEFAULT.to_owned()).or_insert_with(|| AgentDef {
            label: "Default".to_owned(),
            system_prompt: None,
            tools: None,
            model: None,
            locked: None,
        });
        for (id, a) in &agents {
            crate::wire::ids::id(id)
                .map_err(|_| format!("AGENTS: `{id}` is not an id (1 to 128 of A-Z a-z 0-9 _ -)"))?;
            for model in a.model.iter().chain(a.locked.as_ref().map(|l| &l.model)) {
                if !catalog.models.contains_key(model) {
                    return Err(format!("AGENTS: `{id}` names model `{model}`, which LLM_MODELS does not list"));
                }
            }
            // A known name, or an MCP tool's (`<server>__...`, listed here as
            // the prefix and `*`): its server's tools are known at run time.
            let known = |t: &String| {
                tools.contains(t) || tools.iter().any(|k| k.strip_suffix('*').is_some_and(|p| t.starts_with(p)))
            };
            if let Some(bad) = a.tools.iter().flatten().find(|t| !known(t)) {
                return Err(format!(
                    "AGENTS: `{id}` names tool `{bad}`, which neither TOOLS nor an MCP server declares"
                ));
            }
        }
        Ok(Agents(agents))
    }

    /// The agent `id` names (the default for `None`): 400 `agent_not_found`
    /// for one the deployment does not offer.
    pub fn get(&self, id: Option<&str>) -> Result<(&str, &AgentDef), ApiError> {
        let id = id.unwrap_or(DEFAULT);
        self.0.get_key_value(id).map(|(k, v)| (k.as_str(), v)).ok_or_else(|| {
            ApiError::agent_not_found(format!("there is no agent `{id}` (GET /agent/agents lists them)"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog::parse(Some(r#"{"default":"m1","models":{"m1":{"model":"x"},"m2":{"model":"y"}}}"#), "z", None).unwrap()
    }

    #[test]
    fn a_default_is_always_there() {
        let a = Agents::parse(None, &catalog(), &[]).unwrap();
        assert_eq!(a.get(None).unwrap().0, "default");
        assert_eq!(a.get(Some("nope")).unwrap_err().code, "agent_not_found");
    }

    #[test]
    fn locked_agents_and_checks() {
        let tools = ["weather".to_owned()];
        let a = Agents::parse(
            Some(r#"{"support":{"label":"Support","tools":["weather"],"locked":{"model":"m2","reason":"policy"}}}"#),
            &catalog(),
            &tools,
        )
        .unwrap();
        let (_, support) = a.get(Some("support")).unwrap();
        assert_eq!(catalog().pick(Some("m2"), Some("m1"), &support.picker(&[])).unwrap(), "m2");
        assert!(Agents::parse(Some(r#"{"x":{"label":"X","model":"nope"}}"#), &catalog(), &tools).is_err());
        assert!(Agents::parse(Some(r#"{"x":{"label":"X","tools":["nope"]}}"#), &catalog(), &tools).is_err());
        assert!(Agents::parse(Some(r#"{"x":{"label":"X","extra":1}}"#), &catalog(), &tools).is_err());
        assert!(Agents::parse(Some(r#"{"a b":{"label":"X"}}"#), &catalog(), &tools).is_err());
    }
}
