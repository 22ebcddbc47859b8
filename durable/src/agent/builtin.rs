//! What the built-in tools do to a run's state, apart from the loop: the
//! task list (`create-tasks`, `update-tasks`), the confirmation a call asks
//! a person for, and the usage a run adds up.

use super::openai;
use super::tools::ToolKind;
use serde_json::{json, Value};

/// The `confirmation-request` for a call (without its `requestId`).
pub(super) fn confirmation_payload(kind: &ToolKind<'_>, call: &openai::ToolCallParts, args: &Value) -> Value {
    match kind {
        ToolKind::AskUser => {
            let mut p = json!({
                "toolCallId": call.id,
                "toolName": call.name,
                "args": args,
                "severity": args["severity"].as_str().unwrap_or("info"),
                "message": args["message"].as_str().unwrap_or("The assistant has a question."),
                "inputType": args["inputType"].as_str().unwrap_or("text"),
            });
            for key in ["questions", "tasks", "introMessage"] {
                if let Some(v) = args.get(key) {
                    p[key] = v.clone();
                }
            }
            p
        }
        ToolKind::Http(tool) => json!({
            "toolCallId": call.id,
            "toolName": call.name,
            "args": args,
            "severity": tool.severity.as_deref().unwrap_or("warning"),
            "message": format!("Allow `{}` to run?{}", tool.name,
                if tool.description.is_empty() { String::new() } else { format!(" ({})", tool.description) }),
            "inputType": "approval",
        }),
        _ => Value::Null,
    }
}

/// `create-tasks` replaces the list; `update-tasks` merges by id. Returns
/// the tool's result.
pub(super) fn apply_tasks(tasks: &mut Vec<Value>, args: &Value, create: bool) -> Value {
    let incoming = args["tasks"].as_array().cloned().unwrap_or_default();
    if create {
        tasks.clear();
    }
    for mut t in incoming {
        if t.get("status").is_none() {
            t["status"] = "todo".into();
        }
        if t.get("description").is_none() {
            t["description"] = "".into();
        }
        match tasks.iter_mut().find(|x| x["id"] == t["id"]) {
            Some(existing) => {
                if let (Some(e), Some(n)) = (existing.as_object_mut(), t.as_object()) {
                    for (k, v) in n {
                        if !(create || (k == "description" && v == "")) {
                            e.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            None => tasks.push(t),
        }
    }
    json!({ "tasks": tasks })
}

pub(super) fn add_usage(acc: Option<&Value>, u: &Value) -> Value {
    let mut out = acc.cloned().unwrap_or_else(|| json!({}));
    for key in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        let sum = out[key].as_u64().unwrap_or(0) + u[key].as_u64().unwrap_or(0);
        out[key] = sum.into();
    }
    out
}

pub(super) fn excerpt(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_create_and_update() {
        let mut tasks = Vec::new();
        apply_tasks(&mut tasks, &json!({"tasks":[{"id":"a","description":"A"},{"id":"b","description":"B"}]}), true);
        apply_tasks(&mut tasks, &json!({"tasks":[{"id":"a","status":"done"}]}), false);
        assert_eq!(tasks[0], json!({"id":"a","description":"A","status":"done"}));
        assert_eq!(tasks[1]["status"], "todo");
    }
}
