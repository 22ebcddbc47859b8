// JSON Schema on the platform's JavaScript, for the core's checks (tool
// arguments, structured answers, a send's output schema): see
// src/json_schema.rs. @cfworker/json-schema is made for Workers (no eval,
// the platform's own regular expressions), so the wasm carries no regex
// engine or Unicode tables.
import { Validator } from "@cfworker/json-schema";

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
  if (!top) throw `metaschema ${root} is missing`;
  const v = new Validator(pin(top, root), draft, false);
  for (const d of own) if (d !== top) v.addSchema(pin(d, root));
  const built = { draft, meta: v };
  metas.set(root, built);
  return built;
}

// A violation as the core reads it: a JSON Pointer into the instance and a
// message.
const pointer = (loc) => loc.replace(/^#/, "");

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

/** Compiles `schema` (JSON text): a validator, or throws a string saying
 *  why its draft's metaschema refuses it. */
export function compile(schema) {
  if (docs === null) throw "the metaschemas are not installed";
  const value = JSON.parse(schema);
  const named = typeof value === "object" && value !== null && typeof value.$schema === "string" ? strip(value.$schema) : DEFAULT;
  const draft = meta(named);
  if (!draft) throw `\`$schema\` names a draft this validator does not take: ${named}`;
  const checked = draft.meta.validate(value);
  if (!checked.valid) {
    // The deepest error says what is wrong; the ones above it only that
    // something below them is.
    const depth = (e) => e.instanceLocation.split("/").length;
    const deepest = Math.max(...checked.errors.map(depth));
    const [first] = violations(checked.errors.filter((e) => depth(e) === deepest), 1);
    throw first.path === "" ? first.message : `${first.path}: ${first.message}`;
  }
  return new Validator(value, draft.draft, false);
}

/** What is wrong with `instance` (JSON text) against `validator`: a JSON
 *  array of at most `limit` {path, message}, empty when it is valid. */
export function check(validator, instance, limit) {
  const result = validator.validate(JSON.parse(instance));
  return JSON.stringify(result.valid ? [] : violations(result.errors, limit));
}
