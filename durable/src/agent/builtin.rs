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
        ToolKind::Client(tool) => json!({
            "toolCallId": call.id,
            "toolName": call.name,
            "args": args,
            "severity": "info",
            "message": format!("`{}` runs in the client", tool.name),
            "inputType": crate::log::event::payload::InputType::ClientTool.as_str(),
        }),
        ToolKind::Mcp(tool) => json!({
            "toolCallId": call.id,
            "toolName": call.name,
            "args": args,
            "severity": if tool.tool.destructive() { "destructive" } else { "warning" },
            "message": format!("Allow `{}` of the MCP server `{}` to run?{}", tool.tool.label(), tool.server,
                tool.tool.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()),
            "inputType": "approval",
            "server": tool.server,
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
    // What the provider served from its prompt cache, when it says.
    if let Some(cached) = u["prompt_tokens_details"]["cached_tokens"].as_u64() {
        out["cached_tokens"] = (out["cached_tokens"].as_u64().unwrap_or(0) + cached).into();
    }
    if u.get("costUsd").is_some() || out.get("costUsd").is_some() {
        out["costUsd"] = (out["costUsd"].as_f64().unwrap_or(0.0) + u["costUsd"].as_f64().unwrap_or(0.0)).into();
    }
    out
}

/// `text` cut so that, as a JSON string, it takes at most `limit` bytes
/// with a marker that says so; `total`: the whole answer's size when known.
pub(super) fn truncated(text: &str, limit: usize, total: Option<usize>) -> String {
    let budget = limit.saturating_sub(200);
    let mut used = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        used += json_len(c);
        if used > budget {
            break;
        }
        end = i + c.len_utf8();
    }
    let size = total.map_or_else(|| format!("more than {limit} bytes"), |n| format!("{n} bytes"));
    format!("{}\n[truncated by threadline: the answer was {size}; only the first {end} bytes are kept]", &text[..end])
}

/// Bytes `c` takes inside a JSON string.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// A tool result that takes at most `limit` bytes as JSON.
pub(super) fn cap_result(v: Value, limit: usize) -> Value {
    let json = serde_json::to_string(&v).unwrap_or_default();
    if json.len() <= limit {
        return v;
    }
    let text = match v {
        Value::String(s) => s,
        _ => json,
    };
    let n = text.len();
    Value::String(truncated(&text, limit, Some(n)))
}

/// An error text that takes at most `limit` bytes as JSON.
pub(super) fn cap_text(e: String, limit: usize) -> String {
    if serde_json::to_string(&e).map_or(0, |j| j.len()) <= limit {
        e
    } else {
        let n = e.len();
        truncated(&e, limit, Some(n))
    }
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
    fn results_past_the_limit_are_cut_with_a_marker() {
        let small = json!({"ok": true});
        assert_eq!(cap_result(small.clone(), 1000), small);
        let big = json!({"data": "\u{1}".repeat(100_000)});
        let capped = cap_result(big, 10_000);
        let text = capped.as_str().unwrap();
        assert!(serde_json::to_string(&capped).unwrap().len() <= 10_000, "escapes counted");
        assert!(text.contains("[truncated by threadline"), "{}", &text[text.len() - 120..]);
        assert!(truncated("ééé", 203, None).starts_with("é\n"), "cut at a character boundary");
    }

    #[test]
    fn tasks_create_and_update() {
        let mut tasks = Vec::new();
        apply_tasks(&mut tasks, &json!({"tasks":[{"id":"a","description":"A"},{"id":"b","description":"B"}]}), true);
        apply_tasks(&mut tasks, &json!({"tasks":[{"id":"a","status":"done"}]}), false);
        assert_eq!(tasks[0], json!({"id":"a","description":"A","status":"done"}));
        assert_eq!(tasks[1]["status"], "todo");
    }
}
