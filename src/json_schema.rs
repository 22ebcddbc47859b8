//! The core's JSON Schema engine on Workers: `@cfworker/json-schema` on
//! the platform's JavaScript (src/json_schema.js), so the wasm carries no
//! regex engine or Unicode tables. Installed once per isolate at start.
//!
//! Schemas and instances cross as JSON text, violations come back as JSON
//! text: a few hundred bytes per tool call.
//!
//! Every import is declared `catch`: a JavaScript exception (a refused
//! schema, a check that would pass its bound on work, anything the library
//! throws) comes back as an `Err`, never as a trap that would end every run
//! of the isolate. `make lint` refuses an import without it
//! (local/lint-imports.mjs).

use serde::Deserialize;
use serde_json::Value;
use threadline_durable::json_schema::{Compiled, Engine, Violation};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen(module = "/src/json_schema.js")]
extern "C" {
    #[wasm_bindgen(catch, js_name = install)]
    fn js_install(docs: &str) -> Result<(), JsValue>;
    #[wasm_bindgen(catch, js_name = compile)]
    fn js_compile(schema: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = check)]
    fn js_check(validator: &JsValue, instance: &str, limit: u32) -> Result<String, JsValue>;
}

/// Every draft's metaschema with its vocabularies, as the JSON Schema
/// organisation publishes them: a send's `output.schema` and a tool's
/// parameters are checked against the one their `$schema` names.
const METASCHEMAS: &[&str] = &[
    include_str!("metaschemas/draft4.json"),
    include_str!("metaschemas/draft6.json"),
    include_str!("metaschemas/draft7.json"),
    include_str!("metaschemas/draft2019-09/schema.json"),
    include_str!("metaschemas/draft2019-09/meta/applicator.json"),
    include_str!("metaschemas/draft2019-09/meta/content.json"),
    include_str!("metaschemas/draft2019-09/meta/core.json"),
    include_str!("metaschemas/draft2019-09/meta/format.json"),
    include_str!("metaschemas/draft2019-09/meta/meta-data.json"),
    include_str!("metaschemas/draft2019-09/meta/validation.json"),
    include_str!("metaschemas/draft2020-12/schema.json"),
    include_str!("metaschemas/draft2020-12/meta/applicator.json"),
    include_str!("metaschemas/draft2020-12/meta/content.json"),
    include_str!("metaschemas/draft2020-12/meta/core.json"),
    include_str!("metaschemas/draft2020-12/meta/format-annotation.json"),
    include_str!("metaschemas/draft2020-12/meta/meta-data.json"),
    include_str!("metaschemas/draft2020-12/meta/unevaluated.json"),
    include_str!("metaschemas/draft2020-12/meta/validation.json"),
];

struct Platform;

static PLATFORM: Platform = Platform;

/// Installs the engine, once per isolate: it hands the metaschemas' text
/// over; the JavaScript side parses them and builds a draft's validator
/// when a schema of that draft is first checked, so start-up does neither.
pub(crate) fn install() {
    match js_install(&format!("[{}]", METASCHEMAS.join(","))) {
        Ok(()) => {
            threadline_durable::json_schema::install(&PLATFORM);
        }
        // Every schema is then refused ("no JSON Schema validator is
        // installed"), and every run that needs one says so.
        Err(e) => worker::console_error!("json schema: {}", describe(&e)),
    }
}

/// A thrown value in words: a string as it is, an `Error` by its message.
fn describe(e: &JsValue) -> String {
    if let Some(s) = e.as_string() {
        return s;
    }
    match e.dyn_ref::<js_sys::Error>() {
        Some(error) => String::from(error.message()),
        None => format!("{e:?}"),
    }
}

impl Engine for Platform {
    fn compile(&self, schema: &Value) -> Result<Box<dyn Compiled>, String> {
        let validator = js_compile(&schema.to_string()).map_err(|e| describe(&e))?;
        Ok(Box::new(Platformed(validator)))
    }
}

struct Platformed(JsValue);

#[derive(Deserialize)]
struct Found {
    path: String,
    message: String,
}

impl Compiled for Platformed {
    fn violations(&self, instance: &Value, limit: usize) -> Result<Vec<Violation>, String> {
        let found =
            js_check(&self.0, &instance.to_string(), limit.try_into().unwrap_or(u32::MAX)).map_err(|e| describe(&e))?;
        serde_json::from_str::<Vec<Found>>(&found)
            .map(|v| v.into_iter().map(|f| Violation { path: f.path, message: f.message }).collect())
            .map_err(|e| format!("the validator's answer was unreadable: {e}"))
    }
}
