//! Human-in-the-loop confirmations: the records a thread keeps for each
//! `confirmation-request`, the approval policy, the decision bodies of
//! `POST /instance-ai/confirm/:requestId`, and the rules of a request's life
//! (pending, then approved, denied, expired or cancelled; never twice). Who
//! may decide is `access`'s; the thread stores what these rules decide.
//!
//! A request id is `<threadId>.<local id>`: the stateless Worker routes a
//! decision to the thread that holds the request from the id alone, and a
//! thread only ever looks up its own requests, so a decision can never apply
//! to another thread's request. Thread ids cannot contain `.`.

use crate::access::Decider;
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Where a confirmation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmState {
    Pending,
    Approved,
    Denied,
    Expired,
    Cancelled,
}

impl ConfirmState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmState::Pending => "pending",
            ConfirmState::Approved => "approved",
            ConfirmState::Denied => "denied",
            ConfirmState::Expired => "expired",
            ConfirmState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> ConfirmState {
        match s {
            "approved" => ConfirmState::Approved,
            "denied" => ConfirmState::Denied,
            "expired" => ConfirmState::Expired,
            "cancelled" => ConfirmState::Cancelled,
            _ => ConfirmState::Pending,
        }
    }
}

/// One confirmation a thread holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    pub request_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub tool_call_id: String,
    pub tool_name: String,
    /// `approval | text | questions | plan-review`
    pub input_type: String,
    pub state: ConfirmState,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    /// The role a decider must hold, from the approval policy.
    pub approver: Option<String>,
    /// The decision as given (`{approved, userInput?, scope?, answers?}`).
    pub decision: Option<Value>,
    /// The id the external agent chose, sent back in its webhook callback.
    pub agent_request_id: Option<String>,
}

/// `APPROVAL_POLICY`: per tool, whether approval is required, who may
/// approve, and how long a request waits before it lapses.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Policy(pub BTreeMap<String, ToolPolicy>);

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPolicy {
    #[serde(default)]
    pub required: Option<bool>,
    #[serde(default)]
    pub approver: Option<String>,
    #[serde(default)]
    pub ttl_ms: Option<i64>,
}

impl Policy {
    pub fn parse(json: Option<&str>) -> Result<Policy, String> {
        match json.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(Policy::default()),
            Some(s) => serde_json::from_str(s).map_err(|e| format!("APPROVAL_POLICY is invalid: {e}")),
        }
    }

    pub fn get(&self, tool: &str) -> Option<&ToolPolicy> {
        self.0.get(tool)
    }
}

/// The input type of a request a client's own tool waits on.
pub const CLIENT_TOOL: &str = "client-tool";

/// A thread-scoped request id.
pub fn request_id(thread_id: &str, local: &str) -> String {
    crate::ids::scoped(thread_id, local)
}

/// The thread a request id belongs to; 404 for an id that is not one.
pub fn thread_of(request_id: &str) -> Result<&str, ApiError> {
    crate::ids::thread_of(request_id).ok_or_else(ApiError::confirmation_not_found)
}

impl Confirmation {
    /// A new pending request for a canonical `confirmation-request`
    /// `payload`, with the TTL and approver the policy sets for its tool.
    pub fn pending(
        request_id: String,
        run_id: &str,
        agent_id: &str,
        payload: &Value,
        policy: &Policy,
        agent_request_id: Option<String>,
        now: i64,
    ) -> Confirmation {
        let field = |k: &str| payload[k].as_str().unwrap_or_default().to_owned();
        let rule = policy.get(payload["toolName"].as_str().unwrap_or_default());
        let input_type = payload["inputType"].as_str().unwrap_or("approval").to_owned();
        // Only approvals go to a role: what a client tool returned, and the
        // owner's answers, are the owner's to give.
        let approver = match input_type.as_str() {
            "approval" | "plan-review" => rule.and_then(|p| p.approver.clone()),
            _ => None,
        };
        Confirmation {
            request_id,
            run_id: run_id.to_owned(),
            agent_id: agent_id.to_owned(),
            tool_call_id: field("toolCallId"),
            tool_name: field("toolName"),
            input_type,
            state: ConfirmState::Pending,
            created_at: now,
            expires_at: rule.and_then(|p| p.ttl_ms).map(|ttl| now + ttl),
            approver,
            decision: None,
            agent_request_id,
        }
    }

    /// Who may decide it. A client tool's result and an answer to a
    /// question are the thread owner's whatever the record names (a record
    /// stored before this rule may carry a policy's role); an approval or a
    /// plan review goes to the role its policy named, else to the owner.
    pub fn decider(&self) -> Decider<'_> {
        match (self.input_type.as_str(), self.approver.as_deref()) {
            (CLIENT_TOOL | "text" | "questions", _) | (_, None) => Decider::Owner,
            (_, Some(role)) => Decider::Role(role),
        }
    }

    /// Still pending, but its time is up: it settles as expired.
    pub fn lapsed(&self, now: i64) -> bool {
        self.state == ConfirmState::Pending && self.expires_at.is_some_and(|t| t <= now)
    }

    /// Checks a decision `body` against this request: 410
    /// `confirmation_expired` once it lapsed, 409 `confirmation_decided`
    /// once settled, 400 `invalid_decision` for a body that does not fit its
    /// input type. Returns the decision as it is recorded.
    pub fn check(&self, body: &Value) -> Result<Value, ApiError> {
        match self.state {
            ConfirmState::Pending => {}
            ConfirmState::Expired => return Err(ApiError::confirmation_expired()),
            other => return Err(ApiError::confirmation_decided(other.as_str())),
        }
        check_decision(&self.input_type, body)
    }

    /// Records a checked decision. Returns the tool approved for the rest of
    /// the thread, when the decision says `scope: "session"`.
    pub fn apply(&mut self, decision: Value) -> Option<String> {
        let approved = decision["approved"].as_bool() == Some(true);
        self.state = if approved { ConfirmState::Approved } else { ConfirmState::Denied };
        let session = (approved && decision["scope"] == "session").then(|| self.tool_name.clone());
        self.decision = Some(decision);
        session
    }

    /// What the external agent's webhook is told once this request settles.
    pub fn webhook_signal(&self) -> Value {
        let mut decision = self.decision.clone().unwrap_or_else(|| serde_json::json!({ "approved": false }));
        decision["state"] = self.state.as_str().into();
        serde_json::json!({
            "type": "confirmation",
            "runId": self.run_id,
            "requestId": self.agent_request_id.clone().unwrap_or_else(|| self.request_id.clone()),
            "toolCallId": self.tool_call_id,
            "decision": decision,
        })
    }
}

/// A decision body checked against the request's input type.
///
/// - `approval`: `{approved: bool, userInput?: string, scope?: "once"|"session"}`
/// - `plan-review`: `{approved: bool, userInput?: string}`
/// - `client-tool`: `{result}` (any JSON) or `{error}` (a string): what the client's run of it gave
/// - `text`, `questions`: `{answers: [{questionId, selectedOptions[], customText?, skipped?}]}`
///   (`approved` optional, default true)
pub fn check_decision(input_type: &str, body: &Value) -> Result<Value, ApiError> {
    let bad = |m: &str| ApiError::invalid_decision(m.to_owned());
    let Some(obj) = body.as_object() else { return Err(bad("the body must be a JSON object")) };
    let mut out = Map::new();
    let approved = match obj.get("approved") {
        Some(Value::Bool(b)) => Some(*b),
        None => None,
        Some(_) => return Err(bad("`approved` must be a boolean")),
    };
    match obj.get("userInput") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.len() <= 8_192 => {
            out.insert("userInput".into(), s.clone().into());
        }
        Some(_) => return Err(bad("`userInput` must be a string of at most 8 KiB")),
    }
    match obj.get("scope") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "once" || s == "session" => {
            if input_type != "approval" {
                return Err(bad("`scope` applies to approvals only"));
            }
            out.insert("scope".into(), s.clone().into());
        }
        Some(_) => return Err(bad("`scope` must be \"once\" or \"session\"")),
    }
    match input_type {
        // The client ran the tool: its result (any JSON), or its error.
        CLIENT_TOOL => {
            match (obj.get("result"), obj.get("error")) {
                (_, Some(Value::String(e))) => {
                    out.insert("error".into(), e.clone().into());
                }
                (Some(r), None | Some(Value::Null)) => {
                    out.insert("result".into(), r.clone());
                }
                _ if approved == Some(false) => {}
                _ => return Err(bad("a client tool's outcome is `{result}` or `{error}` (a string)")),
            }
            if let Some(Value::String(m)) = obj.get("messageId") {
                out.insert("messageId".into(), m.clone().into());
            }
            out.insert("approved".into(), approved.unwrap_or(true).into());
        }
        "text" | "questions" => {
            let Some(Value::Array(answers)) = obj.get("answers") else {
                return Err(bad("`answers` (an array) is required for this request"));
            };
            let mut clean = Vec::with_capacity(answers.len());
            for a in answers {
                let qid = a.get("questionId").and_then(Value::as_str);
                let opts = a.get("selectedOptions").map(|v| v.as_array().map(|x| x.iter().all(Value::is_string)));
                let custom = a.get("customText");
                let skipped = a.get("skipped");
                let ok = qid.is_some()
                    && matches!(opts, None | Some(Some(true)))
                    && custom.is_none_or(|c| c.is_string() || c.is_null())
                    && skipped.is_none_or(|s| s.is_boolean() || s.is_null());
                if !ok {
                    return Err(bad("each answer is {questionId, selectedOptions[], customText?, skipped?}"));
                }
                let mut entry = Map::new();
                entry.insert("questionId".into(), qid.unwrap_or_default().into());
                entry.insert(
                    "selectedOptions".into(),
                    a.get("selectedOptions").cloned().unwrap_or(Value::Array(vec![])),
                );
                if let Some(Value::String(t)) = custom {
                    entry.insert("customText".into(), t.clone().into());
                }
                if let Some(Value::Bool(s)) = skipped {
                    entry.insert("skipped".into(), (*s).into());
                }
                clean.push(Value::Object(entry));
            }
            out.insert("approved".into(), approved.unwrap_or(true).into());
            out.insert("answers".into(), Value::Array(clean));
        }
        _ => {
            let Some(a) = approved else { return Err(bad("`approved` (a boolean) is required")) };
            out.insert("approved".into(), a.into());
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_ids_carry_their_thread() {
        let id = request_id("t-1", "cr_abc");
        assert_eq!(thread_of(&id).unwrap(), "t-1");
        for bad in ["nodot", ".x", "t.", "t.a.b", "bad id.x"] {
            assert_eq!(thread_of(bad).unwrap_err().status, 404, "{bad}");
        }
    }

    #[test]
    fn decisions_by_input_type() {
        assert_eq!(
            check_decision("approval", &json!({"approved":true,"scope":"session","extra":1})).unwrap(),
            json!({"scope":"session","approved":true})
        );
        assert_eq!(check_decision("approval", &json!({"approved":false,"userInput":"no"})).unwrap()["userInput"], "no");
        assert!(check_decision("approval", &json!({})).is_err());
        assert!(check_decision("approval", &json!({"approved":"yes"})).is_err());
        assert!(check_decision("approval", &json!({"approved":true,"scope":"forever"})).is_err());
        assert!(check_decision("plan-review", &json!({"approved":true,"scope":"session"})).is_err());
        let q = check_decision("questions", &json!({"answers":[{"questionId":"q1","selectedOptions":["a"]}]})).unwrap();
        assert_eq!(q["approved"], true);
        assert_eq!(q["answers"][0]["selectedOptions"], json!(["a"]));
        assert!(check_decision("questions", &json!({"answers":[{"selectedOptions":[]}]})).is_err());
        assert!(check_decision("text", &json!({"approved":true})).is_err());
        assert!(check_decision("text", &json!([])).is_err());
    }
}
