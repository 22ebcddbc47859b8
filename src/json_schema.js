// JSON Schema on the platform's JavaScript, for the core's checks (tool
// arguments, structured answers, a send's output schema): see
// src/json_schema.rs. @cfworker/json-schema is made for Workers (no eval),
// so the wasm carries no regex engine or Unicode tables.
//
// Everything here runs on the isolate every thread of this Worker shares, on
// schemas and values a caller chose, so three rules hold (docs/security.md,
// "Schemas and patterns"):
// - a schema the engine could not apply is refused when it is declared
//   (`compile` throws a sentence): a `$ref` that resolves nowhere in it, a
//   loop of references that never descends into the value, a value checked
//   against more than MAX_EXPANSION subschemas, a pattern the linear engine
//   cannot run;
// - patterns run in linear time: `pattern` and `patternProperties` are
//   matched by RE2 (re2js), never by the platform's backtracking RegExp, and
//   the `url` format's backtracking expression is replaced;
// - a check does bounded work: every subschema applied and every character
//   a pattern reads is counted against MAX_WORK, and a check that would pass
//   it throws, which the Rust side receives as an error (every import there
//   is declared `catch`).
import { Validator, format } from "@cfworker/json-schema";
import { RE2JS } from "re2js";

// The drafts by their metaschema's id, with the draft @cfworker/json-schema
// validates them as (it has no draft 6: draft 7 is its superset).
const DRAFTS = [
  ["https://json-schema.org/draft/2020-12/schema", "2020-12"],
  ["https://json-schema.org/draft/2019-09/schema", "2019-09"],
  ["http://json-schema.org/draft-07/schema", "7"],
  ["http://json-schema.org/draft-06/schema", "7"],
  ["http://json-schema.org/draft-04/schema", "4"],
];
const DEFAULT = DRAFTS[0][0];

/** Most work one check may do: a subschema applied to a value is one unit,
 *  a pattern reading a string costs its length times its program's size
 *  over 16. Ordinary tool arguments take tens to a few hundred; a unit is
 *  about a microsecond, so a check stops within about a quarter second. */
export const MAX_WORK = 250_000;
/** Most subschemas one value may be checked against in place (through
 *  `$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else` and
 *  dependent schemas), counted on the schema when it is declared. */
export const MAX_EXPANSION = 10_000;
/** Longest chain of in-place subschemas (each a frame of the engine's
 *  recursion, and a copy of the errors below it). */
export const MAX_IN_PLACE_DEPTH = 64;
/** Largest RE2 program a pattern may compile to (`a{1000}` is about 1,000
 *  instructions). */
export const MAX_PATTERN_PROGRAM = 5_000;

/** The metaschema documents (JSON text) the shell installed, parsed when a
 *  schema is first checked; each draft's validator, built when a schema of
 *  that draft is first checked. An isolate starts without this work, and
 *  builds only the drafts its schemas name. */
let docs = null;
let parsed = null;
const metas = new Map();

const strip = (id) => id.replace(/#$/, "");

// `$dynamicRef: "#meta"` (2020-12) and `$recursiveRef: "#"` (2019-09) in a
// metaschema's vocabularies point back at the root metaschema when a schema
// is checked against it; they are pinned to that root, so nested
// subschemas are checked as the dynamic reference would.
function pin(node, root) {
  if (Array.isArray(node)) return node.map((n) => pin(n, root));
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "$dynamicRef" || k === "$recursiveRef") out.$ref = root;
    else out[k] = pin(v, root);
  }
  return out;
}

const idOf = (d) => strip(d.$id ?? d.id ?? "");

/** Keeps `all`, a JSON array of every metaschema document (roots and
 *  their vocabularies), for the drafts' validators. */
export function install(all) {
  docs = all;
  parsed = null;
  metas.clear();
}

/** The validator of the draft whose metaschema is `root`, and the draft
 *  @cfworker/json-schema validates its schemas as; undefined for a draft
 *  it does not take. */
function meta(root) {
  const known = metas.get(root);
  if (known) return known;
  const draft = DRAFTS.find(([id]) => id === root)?.[1];
  if (!draft) return undefined;
  parsed ??= JSON.parse(docs);
  const family = root.replace(/\/schema$/, "/");
  const own = parsed.filter((d) => idOf(d) === root || idOf(d).startsWith(family + "meta/"));
  const top = own.find((d) => idOf(d) === root);
  if (!top) throw new Error(`metaschema ${root} is missing`);
  const v = new Validator(pin(top, root), draft, false);
  for (const d of own) if (d !== top) v.addSchema(pin(d, root));
  meter(v);
  const built = { draft, meta: v };
  metas.set(root, built);
  return built;
}

// ---------------------------------------------------------------------------
// Work, counted

/** Thrown when a check passes MAX_WORK. */
class TooMuchWork extends Error {}

/** What the running check may still do (Infinity outside a check). */
let remaining = Infinity;

function spend(units) {
  remaining -= units;
  if (remaining < 0) {
    remaining = -Infinity;
    throw new TooMuchWork(`checking this value would take more than ${MAX_WORK} steps; it was not checked`);
  }
}

/** Every object subschema of `validator` counts one unit each time it is
 *  applied: @cfworker/json-schema's `validate` reads `__absolute_ref__`
 *  (or `$ref`, where that is already fixed) exactly once per application,
 *  so an accessor there sees every one. */
function meter(validator) {
  const seen = new Set();
  for (const schema of Object.values(validator.lookup)) {
    if (schema === null || typeof schema !== "object" || seen.has(schema)) continue;
    seen.add(schema);
    const fixed = Object.getOwnPropertyDescriptor(schema, "__absolute_ref__");
    if (fixed === undefined) {
      Object.defineProperty(schema, "__absolute_ref__", { get: () => void spend(1), configurable: true });
    } else {
      const ref = schema.$ref;
      Object.defineProperty(schema, "$ref", {
        get: () => (spend(1), ref),
        enumerable: true,
        configurable: true,
      });
    }
  }
}

/** Runs `f` as one check: at most MAX_WORK units, patterns on RE2. */
function counted(f) {
  remaining = MAX_WORK;
  const native = globalThis.RegExp;
  globalThis.RegExp = LinearRegExp;
  try {
    return f();
  } finally {
    globalThis.RegExp = native;
    remaining = Infinity;
  }
}

// ---------------------------------------------------------------------------
// Patterns, in linear time

const NativeRegExp = RegExp;

/** Compiled patterns by their source (bounded: cleared when full). */
const linear = new Map();
const LINEAR_KEPT = 2_000;

// JavaScript's `\s` with the u flag (ECMA-262 WhiteSpace and LineTerminator).
const SPACE = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
// General categories by their long names (RE2 knows the short ones).
const CATEGORIES = {
  Letter: "L", Cased_Letter: "LC", Uppercase_Letter: "Lu", Lowercase_Letter: "Ll", Titlecase_Letter: "Lt",
  Modifier_Letter: "Lm", Other_Letter: "Lo", Mark: "M", Combining_Mark: "M", Nonspacing_Mark: "Mn",
  Spacing_Mark: "Mc", Enclosing_Mark: "Me", Number: "N", Decimal_Number: "Nd", digit: "Nd", Letter_Number: "Nl",
  Other_Number: "No", Punctuation: "P", punct: "P", Connector_Punctuation: "Pc", Dash_Punctuation: "Pd",
  Open_Punctuation: "Ps", Close_Punctuation: "Pe", Initial_Punctuation: "Pi", Final_Punctuation: "Pf",
  Other_Punctuation: "Po", Symbol: "S", Math_Symbol: "Sm", Currency_Symbol: "Sc", Modifier_Symbol: "Sk",
  Other_Symbol: "So", Separator: "Z", Space_Separator: "Zs", Line_Separator: "Zl", Paragraph_Separator: "Zp",
  Other: "C", Control: "Cc", cntrl: "Cc", Format: "Cf", Surrogate: "Cs", Private_Use: "Co",
};

/** A JavaScript (u flag) pattern in RE2's syntax, where the two read the
 *  same thing differently: `.` and `\s` as JavaScript means them, Unicode
 *  properties by the names RE2 knows, `[]` and `[^]`. Throws a sentence for
 *  what RE2 cannot match in linear time (lookaround, back-references). */
export function toRe2(source) {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\") {
      const n = source[i + 1];
      if (n === "s") out += inClass ? SPACE : `[${SPACE}]`;
      else if (n === "S" && !inClass) out += `[^${SPACE}]`;
      else if (/[1-9]/.test(n ?? "") || n === "k") {
        throw "uses a back-reference, which no engine can match in linear time";
      } else if ((n === "p" || n === "P") && source[i + 2] === "{") {
        const end = source.indexOf("}", i + 3);
        if (end < 0) throw "has an unterminated \\p{...}";
        let name = source.slice(i + 3, end);
        const eq = name.indexOf("=");
        if (eq >= 0) {
          const key = name.slice(0, eq);
          name = name.slice(eq + 1);
          if (key === "General_Category" || key === "gc") name = CATEGORIES[name] ?? name;
          else if (key !== "Script" && key !== "sc") throw `uses \\${n}{${key}=...}, which the linear engine does not know`;
        } else {
          name = CATEGORIES[name] ?? name;
        }
        out += `\\${n}{${name}}`;
        i = end;
        continue;
      } else {
        out += c + (n ?? "");
      }
      i++;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      out += c === "[" ? "\\[" : c;
      continue;
    }
    if (c === "[") {
      if (source.startsWith("[]", i)) {
        out += "[^\\x00-\\x{10FFFF}]";
        i += 1;
      } else if (source.startsWith("[^]", i)) {
        out += "[\\x00-\\x{10FFFF}]";
        i += 2;
      } else {
        inClass = true;
        out += c;
        if (source[i + 1] === "^") out += source[++i];
      }
      continue;
    }
    if (c === "(" && source[i + 1] === "?") {
      if (/^\(\?(=|!|<=|<!)/.test(source.slice(i, i + 4))) {
        throw "uses lookahead or lookbehind, which the linear engine does not take";
      }
    }
    out += c === "." ? "[^\\n\\r\\x{2028}\\x{2029}]" : c;
  }
  return RE2JS.translateRegExp(out);
}

/** `source` compiled for RE2, with its program's size; throws a sentence. */
function compilePattern(source) {
  const known = linear.get(source);
  if (known) return known;
  try {
    new NativeRegExp(source, "u");
  } catch (e) {
    throw `is not a valid regular expression: ${e.message}`;
  }
  let re;
  try {
    re = RE2JS.compile(toRe2(source));
  } catch (e) {
    throw typeof e === "string" ? e : `cannot be matched in linear time: ${e.message}`;
  }
  const size = re.re2().prog.inst.length;
  if (size > MAX_PATTERN_PROGRAM) {
    throw `compiles to ${size} instructions, over the ${MAX_PATTERN_PROGRAM} a pattern may have`;
  }
  if (linear.size >= LINEAR_KEPT) linear.clear();
  const compiled = { re, cost: Math.max(1, Math.ceil(size / 16)) };
  linear.set(source, compiled);
  return compiled;
}

/** What the engine gets for `RegExp` during a check: the platform's
 *  constructor still says whether a string is a valid expression (the
 *  `regex` format); matching is RE2's, and counted. */
function LinearRegExp(source, flags) {
  const native = new NativeRegExp(source, flags);
  return {
    source: native.source,
    flags: native.flags,
    test(input) {
      const text = String(input);
      const { re, cost } = compilePattern(native.source);
      spend(Math.ceil((text.length + 1) * cost));
      return re.test(text);
    },
  };
}

// @cfworker/json-schema's `url` format backtracks without bound on a long
// host (its expression has \S+(?::\S*)?@ before the host alternatives): an
// absolute http(s) or ftp URL as the platform's URL parser reads it instead.
format.url = (input) => {
  if (input.length > 8_192 || !/^(?:https?|ftp):\/\//i.test(input)) return false;
  try {
    return /^[a-z0-9.-]+$|^\[[0-9a-f:.]+\]$/.test(new URL(input).hostname);
  } catch {
    return false;
  }
};

// Formats are looked up by the name a schema gives: `format: "constructor"`
// or `"__defineSetter__"` must find nothing (an unknown format is not
// asserted), not Object.prototype's methods.
Object.setPrototypeOf(format, null);

// ---------------------------------------------------------------------------
// Declaring a schema

// A violation as the core reads it: a JSON Pointer into the instance and a
// message.
const pointer = (loc) => loc.replace(/^#/, "");
/** Where a subschema is, as a JSON Pointer into the schema. */
const where = (schema) => {
  const uri = schema?.__absolute_uri__ ?? "";
  const hash = uri.indexOf("#");
  return (hash < 0 ? "" : uri.slice(hash + 1)) || "/";
};

// Keywords whose subschemas apply to the same value, and to values inside it.
const IN_PLACE_ONE = ["not", "if", "then", "else"];
const IN_PLACE_MANY = ["allOf", "anyOf", "oneOf"];
const IN_PLACE_MAP = ["dependentSchemas", "dependencies"];
const INSIDE_ONE = ["additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contains", "propertyNames"];
const INSIDE_MAP = ["properties", "patternProperties", "$defs", "definitions"];

const isSchema = (s) => s !== null && typeof s === "object" && !Array.isArray(s);

/** The subschemas applied to the same value as `s`, in the engine's own
 *  order (in drafts 4 and 7 a `$ref` stands alone). */
function inPlace(s, draft, lookup, anchors) {
  const out = [];
  if (!isSchema(s)) return out;
  const ref = Object.getOwnPropertyDescriptor(s, "__absolute_ref__")?.value;
  if (s.$ref !== undefined) out.push(lookup[ref ?? s.$ref]);
  if (s.$ref !== undefined && (draft === "4" || draft === "7")) return out;
  if (s.$recursiveRef === "#") out.push(lookup[s.__absolute_recursive_ref__], ...anchors);
  for (const k of IN_PLACE_ONE) if (s[k] !== undefined) out.push(s[k]);
  for (const k of IN_PLACE_MANY) if (Array.isArray(s[k])) out.push(...s[k]);
  for (const k of IN_PLACE_MAP) if (isSchema(s[k])) for (const v of Object.values(s[k])) if (!Array.isArray(v)) out.push(v);
  return out.filter(isSchema);
}

/** The subschemas applied to values inside the one `s` is applied to. */
function inside(s) {
  const out = [];
  for (const k of INSIDE_ONE) if (s[k] !== undefined) out.push(s[k]);
  for (const k of INSIDE_MAP) if (isSchema(s[k])) out.push(...Object.values(s[k]));
  if (Array.isArray(s.items)) out.push(...s.items);
  else if (s.items !== undefined) out.push(s.items);
  if (Array.isArray(s.prefixItems)) out.push(...s.prefixItems);
  return out.filter(isSchema);
}

/** Refuses, with a sentence, a schema the engine could not apply: a
 *  reference that resolves nowhere, a loop of references that never
 *  descends, a value checked against too many subschemas, a pattern the
 *  linear engine cannot run. Says whether any subschema it can reach asks
 *  for `uniqueItems`. */
function usable(validator) {
  const { schema: root, lookup, draft } = validator;
  if (!isSchema(root)) return false;
  let unique = false;
  // The subschemas the engine can reach from the root, each once.
  const reach = [];
  const seen = new Set();
  const anchors = Object.values(lookup).filter((s) => isSchema(s) && s.$recursiveAnchor === true);
  const todo = [root];
  while (todo.length > 0) {
    const s = todo.pop();
    if (seen.has(s)) continue;
    seen.add(s);
    reach.push(s);
    if (s.$ref !== undefined) {
      const ref = Object.getOwnPropertyDescriptor(s, "__absolute_ref__")?.value ?? s.$ref;
      if (lookup[ref] === undefined) {
        throw `${where(s)}: \`$ref\` "${s.$ref}" resolves to nothing in this schema (references are followed only inside it)`;
      }
    }
    if (s.$recursiveRef !== undefined && lookup[s.__absolute_recursive_ref__] === undefined) {
      throw `${where(s)}: \`$recursiveRef\` "${s.$recursiveRef}" resolves to nothing in this schema`;
    }
    for (const t of inPlace(s, draft, lookup, anchors).concat(inside(s))) todo.push(t);
  }
  // Loops among in-place subschemas never end; a DAG of them can still
  // grow exponentially: each subschema's expansion, counted.
  // Each subschema's expansion (how many subschemas it applies to one
  // value) and depth (its longest in-place chain), counted once each.
  const expansion = new Map();
  const open = new Set();
  const expand = (s) => {
    const known = expansion.get(s);
    if (known !== undefined) return known;
    if (open.has(s)) {
      throw `${where(s)}: its references lead back to it without descending into the value, so checking any value would never end`;
    }
    open.add(s);
    const own = { count: 1, depth: 1 };
    for (const t of inPlace(s, draft, lookup, anchors)) {
      const below = expand(t);
      own.count = Math.min(own.count + below.count, MAX_EXPANSION + 1);
      own.depth = Math.max(own.depth, below.depth + 1);
      if (own.depth > MAX_IN_PLACE_DEPTH) {
        throw `${where(s)}: its subschemas apply one inside another more than ${MAX_IN_PLACE_DEPTH} deep to one value`;
      }
    }
    open.delete(s);
    expansion.set(s, own);
    return own;
  };
  for (const s of reach) {
    unique ||= s.uniqueItems === true;
    if (expand(s).count > MAX_EXPANSION) {
      throw `${where(s)}: one value would be checked against more than ${MAX_EXPANSION} subschemas`;
    }
    const patterns = [];
    if (typeof s.pattern === "string") patterns.push(["pattern", s.pattern]);
    if (isSchema(s.patternProperties)) patterns.push(...Object.keys(s.patternProperties).map((p) => ["patternProperties", p]));
    for (const [keyword, p] of patterns) {
      try {
        compilePattern(p);
      } catch (why) {
        throw `${where(s)}: \`${keyword}\` ${JSON.stringify(p)} ${why}`;
      }
    }
  }
  return unique;
}

/** What `uniqueItems` could cost on `value`: its arrays' item pairs, over 8
 *  (a comparison of two small items costs about an eighth of applying a
 *  subschema). */
function pairs(value) {
  let n = 0;
  const todo = [value];
  while (todo.length > 0) {
    const v = todo.pop();
    if (v === null || typeof v !== "object") continue;
    if (Array.isArray(v)) n += (v.length * (v.length - 1)) / 16;
    for (const item of Array.isArray(v) ? v : Object.values(v)) todo.push(item);
  }
  return Math.ceil(n);
}

// Keywords whose error only says that one below it failed: the one below
// says what.
const WRAPPERS = new Set(["properties", "patternProperties", "items", "prefixItems", "additionalItems", "allOf", "$ref", "$dynamicRef", "$recursiveRef", "dependentSchemas", "then", "else"]);

function violations(errors, limit) {
  let found = errors.filter((e) => !WRAPPERS.has(e.keyword));
  // `false` (a property no schema allows) repeats what the keyword above
  // it (additionalProperties, unevaluatedProperties) says better.
  found = found.filter((e) => e.keyword !== "false" || found.length === 1);
  if (found.length === 0) found = errors.slice(-1);
  return found.slice(0, limit).map((e) => ({ path: pointer(e.instanceLocation), message: e.error }));
}

/** The sentence a refusal throws (an engine's Error, or our own). */
const sentence = (e) => (typeof e === "string" ? e : e instanceof TooMuchWork ? e.message : `the schema cannot be used: ${e?.message ?? e}`);

/** Compiles `schema` (JSON text): a validator, or throws a string saying
 *  why it is refused (its draft's metaschema, or a rule above). */
export function compile(schema) {
  if (docs === null) throw "the metaschemas are not installed";
  const value = JSON.parse(schema);
  const named = typeof value === "object" && value !== null && typeof value.$schema === "string" ? strip(value.$schema) : DEFAULT;
  try {
    const draft = meta(named);
    if (!draft) throw `\`$schema\` names a draft this validator does not take: ${named}`;
    const checked = counted(() => draft.meta.validate(value));
    if (!checked.valid) {
      // The deepest error says what is wrong; the ones above it only that
      // something below them is.
      const depth = (e) => e.instanceLocation.split("/").length;
      const deepest = Math.max(...checked.errors.map(depth));
      const [first] = violations(checked.errors.filter((e) => depth(e) === deepest), 1);
      throw first.path === "" ? first.message : `${first.path}: ${first.message}`;
    }
    const validator = new Validator(value, draft.draft, false);
    const unique = usable(validator);
    meter(validator);
    return { validator, unique };
  } catch (e) {
    throw sentence(e);
  }
}

/** What is wrong with `instance` (JSON text) against `validator`: a JSON
 *  array of at most `limit` {path, message}, empty when it is valid. Throws
 *  an Error when the check would pass MAX_WORK (the Rust side imports this
 *  with `catch`, as it does everything that can throw). */
export function check(compiled, instance, limit) {
  const value = JSON.parse(instance);
  const result = counted(() => {
    // `uniqueItems` compares an array's items pairwise: counted up front.
    if (compiled.unique) spend(pairs(value));
    return compiled.validator.validate(value);
  });
  return JSON.stringify(result.valid ? [] : violations(result.errors, limit));
}
