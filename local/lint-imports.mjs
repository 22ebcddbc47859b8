// Part of `make lint`: every JavaScript function the Worker imports through
// wasm-bindgen is declared `catch`, so an exception comes back to Rust as an
// `Err`. An import without it turns any exception into a trap, which ends
// the wasm instance and with it every run of every thread in the isolate.
// Getters of platform objects (which cannot throw) are the one exception.
//
//   node local/lint-imports.mjs [DIR]   (default: src/)
import fs from "node:fs";
import path from "node:path";
import { isMain } from "./is-main.mjs";

/** The imports of one Rust source without `catch`: [{line, name}]. */
export function uncaught(source) {
  const found = [];
  const lines = source.split("\n");
  let inExtern = false;
  let depth = 0;
  let attrs = [];
  lines.forEach((text, i) => {
    const line = text.trim();
    if (!inExtern) {
      if (/^(pub(\(crate\))?\s+)?(unsafe\s+)?extern\s+"C"\s*\{/.test(line)) {
        inExtern = true;
        depth = 1;
        attrs = [];
      }
      return;
    }
    depth += (line.match(/\{/g) ?? []).length - (line.match(/\}/g) ?? []).length;
    if (depth <= 0) {
      inExtern = false;
      return;
    }
    if (line.startsWith("#[")) attrs.push(line);
    else if (/^(pub(\(crate\))?\s+)?fn\s/.test(line)) {
      const attr = attrs.join(" ");
      const ok = /\bcatch\b/.test(attr) || /\bgetter\b/.test(attr);
      if (!ok) found.push({ line: i + 1, name: line.match(/fn\s+(\w+)/)?.[1] ?? line });
      attrs = [];
    } else if (!line.startsWith("///") && line !== "") attrs = [];
  });
  return found;
}

function rustFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? rustFiles(p) : e.name.endsWith(".rs") ? [p] : [];
  });
}

if (isMain(import.meta.url)) {
  const dir = process.argv[2] ?? "src";
  const bad = rustFiles(dir).flatMap((f) => uncaught(fs.readFileSync(f, "utf8")).map((u) => `${f}:${u.line}: \`${u.name}\` is imported without \`catch\``));
  if (bad.length > 0) {
    console.error(bad.join("\n"));
    console.error("Declare each with #[wasm_bindgen(catch, ...)] and a Result return: an uncaught JavaScript exception traps the wasm instance.");
    process.exit(1);
  }
}
