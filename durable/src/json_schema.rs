//! JSON Schema validation, behind an engine the shell installs.
//!
//! The core checks JSON against JSON Schemas in three places: a tool call's
//! arguments (declared HTTP tools, the built-in ones, a client's tools), a
//! structured answer against its `output.schema`, and a send's
//! `output.schema` itself (a schema its draft's metaschema accepts). It asks
//! an [`Engine`] for each, so the validator is the host's choice:
//!
//! - natively (tests, tools), the `jsonschema` crate (feature `jsonschema`,
//!   on by default);
//! - on Workers, the shell installs one on the platform's JavaScript
//!   (`@cfworker/json-schema`, made for Workers, with the platform's own
//!   regular expressions), which keeps a regex engine and Unicode tables out
//!   of the wasm (see docs/performance.md, "The Worker's size").
//!
//! Both take drafts 4, 6, 7, 2019-09 and 2020-12, chosen by the schema's
//! `$schema` (2020-12 when it names none).
//!
//! Schemas and the values checked against them come from callers (a
//! client's tools, a send's `output.schema`, a model's arguments), so an
//! engine refuses at [`Engine::compile`] any schema it could not apply, and
//! a check may end without a verdict ([`Failed::Unchecked`]: it would do
//! more work than the engine allows) rather than run unbounded. Neither
//! can panic or trap: see docs/security.md, "Schemas and patterns".

use serde_json::Value;
use std::fmt;
use std::sync::OnceLock;

/// A validator: compiles schemas.
pub trait Engine: Sync {
    /// Compiles `schema`, or says why it is not a JSON Schema its draft's
    /// metaschema accepts.
    fn compile(&self, schema: &Value) -> Result<Box<dyn Compiled>, String>;
}

/// A compiled schema.
pub trait Compiled {
    /// What is wrong with `instance`, at most `limit` of them, the most
    /// specific first found; empty when it is valid. `Err` says why the
    /// engine gave no verdict (the check would pass its bound on work).
    fn violations(&self, instance: &Value, limit: usize) -> Result<Vec<Violation>, String>;
}

/// Why a value did not pass its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failed {
    /// It is not valid: at most the asked number of violations.
    Invalid(Vec<Violation>),
    /// The engine could not say (why, in its words): the value is not
    /// accepted either.
    Unchecked(String),
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failed::Invalid(found) => f.write_str(&join(found)),
            Failed::Unchecked(why) => write!(f, "it could not be checked: {why}"),
        }
    }
}

/// One way an instance fails its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// A JSON Pointer into the instance (`/city`; empty for the whole).
    pub path: String,
    /// What is wrong there, in the engine's words.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

static ENGINE: OnceLock<&'static dyn Engine> = OnceLock::new();

/// Installs the engine every [`Schema`] compiles with, once per process (an
/// isolate on Workers): the first call wins, and reports whether it did.
pub fn install(engine: &'static dyn Engine) -> bool {
    ENGINE.set(engine).is_ok()
}

fn engine() -> Result<&'static dyn Engine, String> {
    if let Some(e) = ENGINE.get() {
        return Ok(*e);
    }
    #[cfg(feature = "jsonschema")]
    {
        Ok(&native::Native)
    }
    #[cfg(not(feature = "jsonschema"))]
    {
        Err("no JSON Schema validator is installed".to_owned())
    }
}

/// A compiled JSON Schema.
pub struct Schema(Box<dyn Compiled>);

impl Schema {
    /// Compiles `schema` with the installed engine.
    pub fn compile(schema: &Value) -> Result<Schema, String> {
        engine()?.compile(schema).map(Schema)
    }

    /// `Ok` when `instance` is valid, else at most `limit` violations, or
    /// why the engine could not say.
    pub fn check(&self, instance: &Value, limit: usize) -> Result<(), Failed> {
        match self.0.violations(instance, limit.max(1)) {
            Ok(found) if found.is_empty() => Ok(()),
            Ok(found) => Err(Failed::Invalid(found)),
            Err(why) => Err(Failed::Unchecked(why)),
        }
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schema")
    }
}

/// Violations as one line, `; ` between them.
pub fn join(violations: &[Violation]) -> String {
    violations.iter().map(Violation::to_string).collect::<Vec<_>>().join("; ")
}

#[cfg(feature = "jsonschema")]
mod native {
    use super::{Compiled, Engine, Violation};
    use serde_json::Value;

    /// The `jsonschema` crate: a schema is checked against its draft's
    /// metaschema as it compiles.
    pub(super) struct Native;

    impl Engine for Native {
        fn compile(&self, schema: &Value) -> Result<Box<dyn Compiled>, String> {
            jsonschema::validator_for(schema).map(|v| Box::new(v) as Box<dyn Compiled>).map_err(|e| e.to_string())
        }
    }

    impl Compiled for jsonschema::Validator {
        fn violations(&self, instance: &Value, limit: usize) -> Result<Vec<Violation>, String> {
            Ok(self
                .iter_errors(instance)
                .take(limit)
                .map(|e| Violation { path: e.instance_path().to_string(), message: e.to_string() })
                .collect())
        }
    }
}

#[cfg(all(test, feature = "jsonschema"))]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_its_metaschema_refuses_does_not_compile() {
        assert!(Schema::compile(&json!({"type": 7})).is_err());
        assert!(Schema::compile(&json!({"properties": {"a": {"minLength": "x"}}})).is_err());
        assert!(Schema::compile(&json!({"type": "object"})).is_ok());
    }

    #[test]
    fn violations_name_where_and_what() {
        let s = Schema::compile(&json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"]
        }))
        .unwrap();
        assert_eq!(s.check(&json!({"city": "Lisbon"}), 5), Ok(()));
        let Err(Failed::Invalid(bad)) = s.check(&json!({"city": 1}), 5) else { panic!("invalid") };
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].path, "/city");
        assert!(join(&bad).starts_with("/city: "), "{}", join(&bad));
        let Err(Failed::Invalid(missing)) = s.check(&json!({}), 5) else { panic!("invalid") };
        assert_eq!(missing[0].path, "");
        assert_eq!(missing[0].to_string(), missing[0].message);
    }

    #[test]
    fn at_most_limit_violations() {
        let s = Schema::compile(&json!({"type": "object", "required": ["a", "b", "c"]})).unwrap();
        let Err(Failed::Invalid(found)) = s.check(&json!({}), 2) else { panic!("invalid") };
        assert_eq!(found.len(), 2);
    }

    /// An engine that gives no verdict: the value is refused, saying why.
    #[test]
    fn a_check_without_a_verdict_refuses_the_value() {
        struct Gives(Result<Vec<Violation>, String>);
        impl Compiled for Gives {
            fn violations(&self, _: &Value, _: usize) -> Result<Vec<Violation>, String> {
                self.0.clone()
            }
        }
        let unchecked = Schema(Box::new(Gives(Err("too much work".into()))));
        let failed = unchecked.check(&json!(1), 5).unwrap_err();
        assert_eq!(failed, Failed::Unchecked("too much work".into()));
        assert_eq!(failed.to_string(), "it could not be checked: too much work");
        assert_eq!(Schema(Box::new(Gives(Ok(Vec::new())))).check(&json!(1), 5), Ok(()));
    }
}
