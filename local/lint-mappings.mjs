// Checks the protocols' mappings from the log (`make lint`):
//
// 1. No catch-all arm in a `match` over the log's events. A `match` whose arms
//    name `Payload::` or `Kind::` variants must name every variant: a `_` arm
//    (or a bare binding, which is the same) would let a new event kind compile
//    without the protocol deciding what it means.
// 2. No string-keyed indexing (`x["key"]`) in protocols/: events, frames,
//    bodies and views are typed, so a field is read or written by its name
//    in a struct the compiler checks, never by a string.
// 3. No protocol reaches past the thread into its store (`.store()`,
//    `.store_mut()`): they read the conversation through the thread's read
//    model (`Thread::conversation`, `thread/conversation.rs`).
//
// Usage: node local/lint-mappings.mjs [dir ...]   (default: durable/src/protocols)

import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return path.endsWith(".rs") ? [path] : [];
  });
}

/** The source with comments and the insides of string and char literals
 *  blanked (same length, same line breaks), so braces and `=>` can be
 *  counted. */
export function mask(src) {
  const out = src.split("");
  const blank = (from, to) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    const next = src[i + 1];
    if (c === "/" && next === "/") {
      const end = src.indexOf("\n", i);
      const stop = end === -1 ? src.length : end;
      blank(i, stop);
      i = stop;
    } else if (c === "/" && next === "*") {
      let depth = 1;
      let j = i + 2;
      while (j < src.length && depth > 0) {
        if (src[j] === "/" && src[j + 1] === "*") (depth++, (j += 2));
        else if (src[j] === "*" && src[j + 1] === "/") (depth--, (j += 2));
        else j++;
      }
      blank(i, j);
      i = j;
    } else if ((c === "r" || (c === "b" && next === "r")) && /^b?r#*"/.test(src.slice(i, i + 40)) && !/\w/.test(src[i - 1] ?? "")) {
      const m = /^b?r(#*)"/.exec(src.slice(i));
      const close = '"' + m[1];
      const start = i + m[0].length;
      const end = src.indexOf(close, start);
      const stop = end === -1 ? src.length : end;
      blank(start, stop);
      i = stop + close.length;
    } else if (c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== '"') j += src[j] === "\\" ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else if (c === "'") {
      // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
      const m = /^'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'/.exec(src.slice(i));
      if (m) {
        blank(i + 1, i + m[0].length - 1);
        i += m[0].length;
      } else i++;
    } else i++;
  }
  return out.join("");
}

/** The index just past the block that opens at `open` (a `{`). */
function blockEnd(s, open) {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    if (s[i] === "{") depth++;
    else if (s[i] === "}" && --depth === 0) return i + 1;
  }
  return s.length;
}

/** The source without its `#[cfg(test)]` items (blanked). */
function withoutTests(s) {
  const out = s.split("");
  const re = /#\[cfg\(test\)\]/g;
  let m;
  while ((m = re.exec(s))) {
    const open = s.indexOf("{", m.index);
    const semi = s.indexOf(";", m.index);
    if (open === -1 || (semi !== -1 && semi < open)) continue; // a `use`
    const end = blockEnd(s, open);
    for (let k = m.index; k < end; k++) if (out[k] !== "\n") out[k] = " ";
  }
  return out.join("");
}

/** Each `match` in `s`: its line and the patterns of its arms. */
export function matches(s) {
  const found = [];
  const re = /\bmatch\b/g;
  let m;
  while ((m = re.exec(s))) {
    // The body opens at the first `{` outside parentheses and brackets.
    let depth = 0;
    let open = -1;
    for (let i = m.index + 5; i < s.length; i++) {
      const c = s[i];
      if (c === "(" || c === "[") depth++;
      else if (c === ")" || c === "]") depth--;
      else if (c === "{" && depth === 0) {
        open = i;
        break;
      } else if (c === ";" && depth === 0) break;
    }
    if (open === -1) continue;
    const patterns = [];
    let level = 0;
    let start = open + 1;
    for (let i = open; i < s.length; i++) {
      const c = s[i];
      if (c === "{" || c === "(" || c === "[") level++;
      else if (c === "}" || c === ")" || c === "]") {
        level--;
        if (level === 0) break;
        if (level === 1 && c === "}") start = i + 1;
      } else if (level === 1 && c === ",") start = i + 1;
      else if (level === 1 && c === "=" && s[i + 1] === ">") {
        patterns.push(s.slice(start, i).trim());
        start = i + 2;
      }
    }
    const line = s.slice(0, m.index).split("\n").length;
    found.push({ line, patterns });
  }
  return found;
}

/** A pattern that matches anything: `_`, `_ if …`, or a bare binding. */
export function catchAll(pattern) {
  const head = pattern.replace(/\s+if\s[\s\S]*$/, "").trim();
  return head === "_" || /^(ref\s+)?(mut\s+)?[a-z_][a-z0-9_]*$/.test(head);
}

/** The problems of one file's source: each catch-all arm of a match over
 *  the log's events; and its count of string-keyed indexings. */
export function check(src) {
  const code = withoutTests(mask(src));
  const arms = [];
  for (const { line, patterns } of matches(code)) {
    if (!patterns.some((p) => /\b(Payload|Kind)::/.test(p))) continue;
    for (const p of patterns.filter(catchAll)) arms.push({ line, pattern: p.split("\n")[0] });
  }
  // `x["key"]`: a `[` right after a value, then a string (whose quote
  // survives the masking); an array literal `["a", "b"]` is not counted.
  const indexing = [];
  const at = /[\w)\]]\[\s*"/g;
  let i;
  while ((i = at.exec(code))) indexing.push(code.slice(0, i.index).split("\n").length);
  const store = [];
  const re = /\.store(_mut)?\(\)/g;
  let m;
  while ((m = re.exec(code))) store.push({ line: code.slice(0, m.index).split("\n").length, call: m[0] });
  return { arms, indexing, store };
}

function main() {
  const roots = process.argv.slice(2);
  if (roots.length === 0) roots.push("durable/src/protocols");
  let problems = 0;
  for (const root of roots) {
    for (const path of files(root)) {
      const found = check(readFileSync(path, "utf8"));
      for (const { line, pattern } of found.arms) {
        console.error(`${relative(".", path)}:${line}: a match over the log's events has a catch-all arm \`${pattern} =>\`: name each variant`);
        problems++;
      }
      for (const line of found.indexing) {
        console.error(`${relative(".", path)}:${line}: string-keyed indexing (\`x["key"]\`): read or write a typed field instead`);
        problems++;
      }
      for (const { line, call } of found.store) {
        console.error(`${relative(".", path)}:${line}: \`${call}\` reaches into the thread's storage: read through the thread (Thread::conversation, thread/conversation.rs)`);
        problems++;
      }
    }
  }
  console.log(`lint-mappings: ${problems} problem(s) in ${roots.join(", ")}`);
  process.exit(problems === 0 ? 0 : 1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) main();
