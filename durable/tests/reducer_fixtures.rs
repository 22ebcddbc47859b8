//! The reducer fixture logs (`tests/fixtures/reducer/*.json`) fold to the
//! trees recorded beside them. The TypeScript client folds the same files in
//! its own tests (`client/test/reducer.test.mjs`): one set of logs holds the
//! two reducers equal. `THREADLINE_BLESS=1` records the Rust fold's trees
//! (after `node tests/fixtures/make.mjs` changes the logs).

use serde_json::Value;
use std::path::Path;
use threadline_durable::log::branches::active_path;
use threadline_durable::{fold, Event};

#[test]
fn fixture_logs_fold_to_their_recorded_trees() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reducer");
    let bless = std::env::var_os("THREADLINE_BLESS").is_some();
    let mut seen = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let mut fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let events: Vec<Event> =
            serde_json::from_value(fixture["events"].clone()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tree = serde_json::to_value(fold(&events).tree()).unwrap();
        if bless {
            fixture["tree"] = tree;
            std::fs::write(path, serde_json::to_string_pretty(&fixture).unwrap() + "\n").unwrap();
        } else {
            assert_eq!(tree, fixture["tree"], "{}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 9, "expected the fixture logs in {}", dir.display());
}

/// The branch fixture logs (`tests/fixtures/branches/*.json`) fold to the
/// active paths recorded beside them; the TypeScript client's `ActivePath`
/// folds the same files (`client/test/reducer.test.mjs`).
#[test]
fn branch_logs_fold_to_their_recorded_paths() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/branches");
    let bless = std::env::var_os("THREADLINE_BLESS").is_some();
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let mut seen = 0;
    for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let mut fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let events: Vec<Event> =
            serde_json::from_value(fixture["events"].clone()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let found = serde_json::to_value(active_path(&events)).unwrap();
        if bless {
            fixture["path"] = found;
            std::fs::write(path, serde_json::to_string_pretty(&fixture).unwrap() + "\n").unwrap();
        } else {
            assert_eq!(found, fixture["path"], "{}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 5, "expected the branch logs in {}", dir.display());
}
