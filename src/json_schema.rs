//! The core's JSON Schema engine on Workers: `@cfworker/json-schema` on
//! the platform's JavaScript (src/json_schema.js), so the wasm carries no
//! regex engine or Unicode tables. Installed once per isolate at start.
//!
//! Schemas and instances cross as JSON text, violations come back as JSON
//! text: a few hundred bytes per tool call.

use serde::Deserialize;
use serde_json::Value;
use threadline_durable::json_schema::{Compiled, Engine, Violation};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/json_schema.js")]
extern "C" {
    #[wasm_bindgen(js_name = install)]
    fn js_install(docs: &str);
    #[wasm_bindgen(catch, js_name = compile)]
    fn js_compile(schema: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_name = check)]
    fn js_check(validator: &JsValue, instance: &str, limit: u32) -> String;
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
    js_install(&format!("[{}]", METASCHEMAS.join(",")));
    threadline_durable::json_schema::install(&PLATFORM);
}

fn describe(e: &JsValue) -> String {
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
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
    fn violations(&self, instance: &Value, limit: usize) -> Vec<Violation> {
        let found = js_check(&self.0, &instance.to_string(), limit.try_into().unwrap_or(u32::MAX));
        match serde_json::from_str::<Vec<Found>>(&found) {
            Ok(v) => v.into_iter().map(|f| Violation { path: f.path, message: f.message }).collect(),
            Err(e) => {
                vec![Violation { path: String::new(), message: format!("the validator's answer was unreadable: {e}") }]
            }
        }
    }
}
