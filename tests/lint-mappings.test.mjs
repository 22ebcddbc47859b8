// The mapping lint (`make lint`, local/lint-mappings.mjs) finds what it must:
// a catch-all arm in a match over the log's events, however it is written,
// and string-keyed indexing; and it leaves alone what is not one.
import { test } from "node:test";
import assert from "node:assert/strict";
import { check } from "../local/lint-mappings.mjs";

test("a catch-all arm over events is found; exhaustive matches and other matches pass", () => {
  const src = `
fn frames(ev: &Event) -> Vec<Value> {
    match &ev.payload {
        Payload::RunStart(s) => vec![json!({ "a": "=> {" })],
        Payload::ToolCall(c) if c.args.is_null() => { let x = match y { 1 => 2, _ => 3 }; vec![] }
        _ => Vec::new(),
    }
}
fn kinds(k: Kind) -> u8 {
    match k {
        Kind::RunStart | Kind::RunFinish => 1,
        other if other.class() == Class::Ephemeral => 2,
    }
}
fn fine(p: &Payload) -> u8 {
    match p {
        Payload::RunStart(_) => 1,
        // _ => 0, a comment is not an arm
        Payload::RunFinish(_) | Payload::Status(_) => 2,
    }
}
fn strings(s: &str) -> u8 {
    match s { "a" => 1, _ => 0 }
}
#[cfg(test)]
mod tests {
    fn t(p: Payload) { match p { Payload::RunStart(_) => {}, _ => {} } }
}
`;
  const { arms } = check(src);
  assert.deepEqual(
    arms.map((a) => a.pattern),
    ["_", "other if other.class() == Class::Ephemeral"],
  );
  assert.deepEqual(arms.map((a) => a.line), [3, 10]);
});

test("string-keyed indexing is found by line; array literals, strings and tests are not", () => {
  const src = `
fn f(p: &Value) -> Value {
    let a = p["usage"]["prompt_tokens"].clone();
    for k in ["title", "goal"] { let _ = k; }
    let s = "x[\\"y\\"]";
    let r = r#"q["z"]"#;
    v[ "spaced" ].clone()
}
#[cfg(test)]
mod tests { fn g(v: Value) { let _ = v["k"]; } }
`;
  assert.deepEqual(check(src).indexing, [3, 3, 7]);
});

test("a protocol reaching into the thread's store is found", () => {
  const src = `
fn f<S: Store, K: Sink>(t: &mut Thread<S, K>) {
    let run = t.store().run("r");
    t.store_mut().set_meta("k", None);
    let ok = t.run("r");
}
#[cfg(test)]
mod tests { fn g(t: &mut T) { t.store_mut().meta.clear(); } }
`;
  assert.deepEqual(check(src).store.map((s) => [s.line, s.call]), [[3, ".store()"], [4, ".store_mut()"]]);
});
