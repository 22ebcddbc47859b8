// The Worker's JSON Schema engine (src/json_schema.js) attacked directly, in
// Node, as an outsider's schemas and values would reach it: self-referencing,
// unresolvable, exponential, deep and huge schemas; backtracking patterns and
// formats; and, beside the attacks, its patterns checked against JavaScript's
// own RegExp on the same strings (the linear engine must read them the same).
// Each test has a timeout: an unbounded check fails it rather than hang.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as engine from "../src/json_schema.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// The same documents, in the same order, as src/json_schema.rs installs.
const METASCHEMAS = [
  "draft4.json", "draft6.json", "draft7.json",
  "draft2019-09/schema.json", "draft2019-09/meta/applicator.json", "draft2019-09/meta/content.json", "draft2019-09/meta/core.json",
  "draft2019-09/meta/format.json", "draft2019-09/meta/meta-data.json", "draft2019-09/meta/validation.json",
  "draft2020-12/schema.json", "draft2020-12/meta/applicator.json", "draft2020-12/meta/content.json", "draft2020-12/meta/core.json",
  "draft2020-12/meta/format-annotation.json", "draft2020-12/meta/meta-data.json", "draft2020-12/meta/unevaluated.json",
  "draft2020-12/meta/validation.json",
];
engine.install("[" + METASCHEMAS.map((f) => fs.readFileSync(path.join(root, "src/metaschemas", f), "utf8")).join(",") + "]");

/** The schema compiled, or the sentence it is refused with. */
function compile(schema) {
  try {
    return { ok: engine.compile(JSON.stringify(schema)) };
  } catch (e) {
    assert.equal(typeof e, "string", `a refusal is a sentence, not ${e}`);
    return { refused: e };
  }
}
const compiled = (schema) => {
  const c = compile(schema);
  assert.ok(c.ok, c.refused);
  return c.ok;
};
/** The violations, or the error the check threw. */
function check(c, value) {
  try {
    return { violations: JSON.parse(engine.check(c, JSON.stringify(value), 5)) };
  } catch (e) {
    assert.ok(e instanceof Error, `a check throws Errors only: ${e}`);
    return { threw: e.message };
  }
}
const T = { timeout: 20_000 };

describe("refused when declared", () => {
  const refusals = [
    ["a reference to itself", { $ref: "#" }, /never end/],
    ["a loop through $defs", { allOf: [{ $ref: "#/$defs/a" }], $defs: { a: { anyOf: [{ $ref: "#" }] } } }, /never end/],
    ["a loop through not and if", { $defs: { a: { not: { if: { $ref: "#/$defs/a" } } } }, $ref: "#/$defs/a" }, /never end/],
    ["a draft-07 loop", { $schema: "http://json-schema.org/draft-07/schema#", definitions: { a: { $ref: "#/definitions/a" } }, $ref: "#/definitions/a" }, /never end/],
    ["a 2019-09 recursive loop", { $schema: "https://json-schema.org/draft/2019-09/schema", $recursiveAnchor: true, allOf: [{ $recursiveRef: "#" }] }, /never end/],
    ["a remote reference", { properties: { a: { $ref: "http://127.0.0.1:9/x" } } }, /resolves to nothing/],
    ["a pointer to nothing", { $ref: "#/$defs/missing" }, /resolves to nothing/],
    ["an anchor that is not there", { $ref: "#nowhere" }, /resolves to nothing/],
    ["lookahead", { pattern: "^(?=a)a+$" }, /lookahead/],
    ["lookbehind", { pattern: "(?<!a)b" }, /lookbehind/],
    ["a back-reference", { pattern: "^(a+)\\1$" }, /back-reference/],
    ["a named back-reference", { pattern: "^(?<x>a)\\k<x>$" }, /back-reference/],
    ["a pattern that is no expression", { pattern: "(" }, /regex|regular expression/],
    ["a pattern property key with lookahead", { patternProperties: { "^(?=x)": {} } }, /lookahead/],
    ["a huge program", { pattern: "^[a-z]{1000}[0-9]{1000}[A-Z]{1000}[a-z]{1000}[0-9]{1000}[A-Z]{1000}$" }, /instructions/],
  ];
  for (const [what, schema, why] of refusals) {
    test(what, T, () => {
      const c = compile(schema);
      assert.ok(c.refused, `accepted: ${JSON.stringify(schema)}`);
      assert.match(c.refused, why);
    });
  }

  test("a schema that fans out exponentially in place", T, () => {
    const $defs = {};
    for (let i = 0; i < 30; i++) $defs[`l${i}`] = i === 0 ? { type: "string" } : { allOf: [{ $ref: `#/$defs/l${i - 1}` }, { $ref: `#/$defs/l${i - 1}` }] };
    assert.match(compile({ $defs, $ref: "#/$defs/l29" }).refused, /more than 10000 subschemas/);
  });

  test("a chain of references deeper than the engine's frames", T, () => {
    const $defs = {};
    for (let i = 0; i < 100; i++) $defs[`l${i}`] = i === 99 ? { type: "string" } : { $ref: `#/$defs/l${i + 1}` };
    assert.match(compile({ $defs, $ref: "#/$defs/l0" }).refused, /more than 64 deep/);
  });

  test("a format that names Object.prototype is no format, not a crash", T, () => {
    for (const name of ["constructor", "__defineSetter__", "__proto__", "toString", "hasOwnProperty"]) {
      assert.deepEqual(check(compiled({ type: "string", format: name }), "x"), { violations: [] }, name);
    }
  });

  // A JSON body nests at most 128 deep (the core's parser), so a schema in
  // one at most about 60 levels of `properties`: deeper still is refused,
  // as a sentence, not a crash.
  test("nesting as deep as a body can carry", T, () => {
    let schema = { type: "string" };
    for (let i = 0; i < 60; i++) schema = { type: "object", properties: { a: schema } };
    const c = compiled(schema);
    let value = "x";
    for (let i = 0; i < 60; i++) value = { a: value };
    assert.deepEqual(check(c, value), { violations: [] });
    for (let i = 0; i < 2000; i++) schema = { type: "object", properties: { a: schema } };
    assert.match(compile(schema).refused, /cannot be used: Maximum call stack size exceeded/);
  });
});

describe("bounded when checked", () => {
  test("backtracking patterns answer at once, and as JavaScript would", T, () => {
    for (const [pattern, subject] of [
      ["^(a|a)*$", "a".repeat(40) + "!"],
      ["^(a+)+$", "a".repeat(5000) + "!"],
      ["^(a|aa)+$", "a".repeat(5000) + "!"],
      ["^(.*a){20}$", "a".repeat(200) + "!"],
      ["^(\\w+\\s?)*$", "word ".repeat(2000) + "!"],
      ["^([a-zA-Z0-9])(([\\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$", "a".repeat(3000) + "!"],
    ]) {
      const c = compiled({ type: "string", pattern });
      assert.deepEqual(check(c, subject), { violations: [{ path: "", message: "String does not match pattern." }] }, pattern);
    }
  });

  test("a string too long for its pattern's budget is not checked, and says so", T, () => {
    const c = compiled({ type: "string", pattern: "^(a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p)*$" });
    assert.match(check(c, "a".repeat(2_000_000)).threw, /would take more than 250000 steps/);
    assert.deepEqual(check(c, "abc".repeat(1000)), { violations: [] });
  });

  test("formats on long hostile strings", T, () => {
    const formats = ["date", "time", "date-time", "duration", "uri", "uri-reference", "uri-template", "url", "email", "hostname", "ipv4", "ipv6", "regex", "uuid", "json-pointer", "json-pointer-uri-fragment", "relative-json-pointer"];
    for (const format of formats) {
      const c = compiled({ type: "string", format });
      for (const s of ["a", ":", "a:", "a.", "-", "%00", "a@", "~0/"]) {
        for (const pre of ["", "http://", "a@", "#", "P", "0/"]) {
          const r = check(c, pre + s.repeat(4000 / s.length) + "!");
          assert.ok(r.violations || r.threw, format);
        }
      }
    }
    const url = compiled({ type: "string", format: "url" });
    assert.deepEqual(check(url, "https://example.com/a?b=c#d"), { violations: [] });
    assert.equal(check(url, "http://" + "a".repeat(5000) + "!").violations.length, 1);
    assert.equal(check(url, "mailto:x@example.com").violations.length, 1);
  });

  test("a schema whose applications multiply with the value's depth stops at its bound", T, () => {
    const c = compiled({ type: "object", properties: { a: { allOf: [{ $ref: "#" }, { $ref: "#" }] } } });
    let value = {};
    for (let i = 0; i < 40; i++) value = { a: value };
    assert.match(check(c, value).threw, /would take more than 250000 steps; it was not checked/);
    assert.deepEqual(check(c, { a: { a: {} } }), { violations: [] });
  });

  test("uniqueItems on a huge array stops at its bound; on a small one it compares", T, () => {
    const c = compiled({ type: "array", uniqueItems: true });
    assert.match(check(c, Array.from({ length: 200_000 }, (_, i) => i)).threw, /would take more than/);
    assert.deepEqual(check(c, [1, 2, 1]).violations[0].message, "Duplicate items at indexes 0 and 2.");
    assert.deepEqual(check(c, Array.from({ length: 500 }, (_, i) => i)), { violations: [] });
  });

  test("a check leaves the platform's RegExp as it was, even when it throws", T, () => {
    const before = globalThis.RegExp;
    const c = compiled({ type: "object", properties: { a: { allOf: [{ $ref: "#" }, { $ref: "#" }] } } });
    let value = {};
    for (let i = 0; i < 40; i++) value = { a: value };
    check(c, value);
    assert.equal(globalThis.RegExp, before);
    assert.equal(/^(a)\1$/.test("aa"), true);
  });
});

describe("patterns read as JavaScript reads them", () => {
  const patterns = [
    "^[A-Za-z ]+$", "^\\d{3}-\\d{4}$", "^\\p{Lu}\\p{Ll}+$", "^\\p{Script=Greek}+$", "^\\p{sc=Latin}+$", "^\\p{General_Category=Uppercase_Letter}$",
    "^\\P{Letter}+$", "^.$", "^.+$", "^\\s*$", "^\\S+$", "^[\\s,]+$", "^[^\\s]+$", "\\bword\\b", "^\\w+$", "^[^]$", "^a[]?b$",
    "^\\u00e9$", "^\\u{1F600}$", "^[\\u0041-\\u005A]+$", "^(?:ab|cd)*$", "^(?<year>\\d{4})-(?<m>\\d\\d)$", "^a{2,3}$", "^a+?b$", "^\\.\\*\\+$",
    "^[\\]\\[]+$", "x$", "^x", "^\\t\\n$", "^[\\p{L}\\p{N}_-]{3,16}$", "^\\cJ$", "^\\0$", "^[-a]+$", "colou?r",
  ];
  const subjects = [
    "", "a", "ab", "abc", "Oslo", "Éric", "éric", "ERIC", "αβγ", "Abc def", "555-1234", "55-1234", "😀", "\u2028", "\n", "\u00a0", "a\u00a0b", " \t ",
    "a,b", "word", "a word here", "sword", "é", "ABC", "abab", "abcd", "2026-12", "aa", "aaa", "aaaa", "aab", ".*+", "[]", "x", "xx", "yx", "\t\n",
    "user_name", "us", "\u0000", "-a-", "color", "colour", "12", "١٢",
  ];
  test("the same verdict as the platform's RegExp on every pattern and string", T, () => {
    const differ = [];
    for (const pattern of patterns) {
      const c = compiled({ type: "string", pattern });
      const native = new RegExp(pattern, "u");
      for (const s of subjects) {
        const ours = check(c, s).violations.length === 0;
        if (ours !== native.test(s)) differ.push(`${pattern} on ${JSON.stringify(s)}: JavaScript ${!ours}, ours ${ours}`);
      }
    }
    assert.deepEqual(differ, []);
  });

  test("patternProperties keys, as JavaScript reads them", T, () => {
    const c = compiled({ type: "object", patternProperties: { "^x-\\p{Ll}+$": { type: "number" } }, additionalProperties: false });
    assert.deepEqual(check(c, { "x-été": 1 }), { violations: [] });
    assert.equal(check(c, { "x-été": "no" }).violations.length, 1);
    assert.equal(check(c, { "x-ÉTÉ": 1 }).violations.length, 1);
  });
});
