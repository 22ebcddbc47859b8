// The TypeScript reducer folds the shared fixture logs to the trees the Rust
// reducer recorded (durable/tests/reducer_fixtures.rs checks the same files).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fold, TreeBuilder, activePath } from "../dist/index.js";

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../durable/tests/fixtures/reducer");
const fixtures = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => ({ name: f, ...JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")) }));

test("there are fixture logs to compare", () => {
  assert.ok(fixtures.length >= 9, `fixtures in ${dir}`);
});

for (const f of fixtures) {
  test(`${f.name}: folds to the Rust reducer's tree`, () => {
    assert.ok(f.tree, "the fixture has a recorded tree (THREADLINE_BLESS=1 cargo test)");
    assert.deepEqual(fold(f.events), f.tree);
  });

  test(`${f.name}: a tree restored at any point continues as if folded`, () => {
    // The server's messages view folds the durable events it stored; a page
    // restores from that tree and folds what the stream sends after it.
    for (let k = 0; k <= f.events.length; k++) {
      const stored = f.events.slice(0, k).filter((e) => e.id !== undefined);
      const rest = f.events.slice(k);
      const restored = TreeBuilder.fromTree(fold(stored));
      for (const e of rest) restored.apply(e);
      assert.deepEqual(restored.tree(), fold([...stored, ...rest]), `split at ${k}`);
    }
  });
}

// n8n's own reducer (@n8n/api-types, as n8n's editor runs it) folds the same
// logs to the same trees, but where a fixture exercises what threadline adds
// to it (each said here).
const EXTENSIONS = {
  "confirmation-and-tasks.json": "a confirmation for a call not yet announced announces it (n8n drops it)",
  "mcp-server-tools.json": "an MCP tool call names its server",
  "snapshot-after-reconnect.json": "a snapshot delta replaces like a block (n8n's editor takes run-sync instead)",
  "sub-agents-late-announce.json": "an agent that publishes before its agent-spawned gets a node (n8n drops its events)",
};
const { EditorThread } = await import("../../tests/n8n-editor/index.mjs");
for (const f of fixtures) {
  test(`${f.name}: n8n's editor folds it to the same tree${EXTENSIONS[f.name] ? ` (not: ${EXTENSIONS[f.name]})` : ""}`, () => {
    const editor = new EditorThread();
    editor.connect();
    for (const { id, ...event } of f.events) editor.receive({ id: id === undefined ? undefined : String(id), data: JSON.stringify(event) });
    if (EXTENSIONS[f.name]) assert.notDeepStrictEqual(editor.treeOf(f.events[0].runId), f.tree, "the extension shows");
    else assert.deepEqual(editor.treeOf(f.events[0].runId), f.tree);
  });
}

test("fromTree of nothing is an empty builder", () => {
  assert.equal(TreeBuilder.fromTree(null).tree(), null);
});

// The conversation's active path, folded from the branch fixture logs, is
// the one the Rust fold recorded (durable/tests/reducer_fixtures.rs).
const branchDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../durable/tests/fixtures/branches");
const branchLogs = fs.readdirSync(branchDir).filter((f) => f.endsWith(".json")).sort();
test("there are branch logs to compare", () => assert.ok(branchLogs.length >= 5));
for (const name of branchLogs) {
  test(`${name}: folds to the Rust fold's active path`, () => {
    const f = JSON.parse(fs.readFileSync(path.join(branchDir, name), "utf8"));
    assert.ok(f.path, "the fixture has a recorded path (THREADLINE_BLESS=1 cargo test)");
    assert.deepEqual(activePath(f.events), f.path);
  });
}
