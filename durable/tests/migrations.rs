//! Every object class's storage migrations, natively, on an in-memory
//! SQLite (the engine Durable Objects run): from nothing, from the first
//! release's layout with its data, after an attempt interrupted at every
//! step, and refusing storage written by newer code.

mod support;

use support::Lite;
use threadline_durable::storage::migrations::{self, Layout, OpenError};
use threadline_durable::ApiError;
use threadline_durable::Db;

fn lite() -> Lite {
    support::lite()
}

/// The integer a query answers.
fn count(db: &Lite, sql: &str) -> i64 {
    db.run(sql, &[]).unwrap().first().map_or(-1, |v| v.int())
}

/// The layout as SQLite records it (tables, indexes, their SQL with its
/// whitespace normalised: how a statement was indented is not layout).
fn layout(db: &Lite) -> Vec<(String, String, Option<String>)> {
    let mut stmt =
        db.0.prepare("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").unwrap();
    let norm = |sql: Option<String>| {
        sql.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ").replace("( ", "(").replace(" )", ")"))
    };
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, norm(r.get(2)?)))).unwrap().map(Result::unwrap).collect()
}

const SCHEMAS: [Layout; 3] = [migrations::THREAD, migrations::DIRECTORY, migrations::STREAM];

/// The thread schema exactly as the first release (2369c0a) created it, in
/// one script, with no version table.
const RELEASE_1_THREAD: &str = "
CREATE TABLE IF NOT EXISTS events (
  seq    INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  type   TEXT NOT NULL,
  data   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq);
CREATE TABLE IF NOT EXISTS runs (
  run_id      TEXT PRIMARY KEY,
  message_id  TEXT NOT NULL,
  message     TEXT NOT NULL,
  agent_id    TEXT NOT NULL,
  state       TEXT NOT NULL,
  reason      TEXT,
  token_hash  TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  finished_at INTEGER,
  driver      TEXT NOT NULL DEFAULT 'webhook',
  usage       TEXT,
  model       TEXT,
  replaced    INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS confirmations (
  request_id TEXT PRIMARY KEY,
  run_id     TEXT NOT NULL,
  state      TEXT NOT NULL,
  data       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pending_confirmations ON confirmations (state) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS session_approvals (tool TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS checkpoints (
  run_id TEXT PRIMARY KEY,
  data   TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_running_run ON runs (state) WHERE state = 'running';
INSERT INTO events VALUES (1, 't.r1', 'run-start', '{\"type\":\"run-start\"}');
INSERT INTO runs (run_id, message_id, message, agent_id, state, token_hash, created_at, driver)
  VALUES ('t.r1', 'm1', 'hi', 'orchestrator', 'running', 'h', 1, 'builtin');
INSERT INTO meta VALUES ('owner', 'alice');
";

#[test]
fn new_storage_gets_the_current_layout_and_its_version() {
    for s in SCHEMAS {
        let db = lite();
        assert_eq!(migrations::migrate(&db, &s).unwrap(), 0, "{}: nothing was stored", s.class);
        assert_eq!(migrations::stored_version(&db).unwrap(), s.current());
        let once = layout(&db);
        assert_eq!(migrations::migrate(&db, &s).unwrap(), s.current(), "{}: a second open finds it current", s.class);
        assert_eq!(layout(&db), once, "{}: and changes nothing", s.class);
    }
}

#[test]
fn storage_of_the_first_release_is_brought_up_with_its_data() {
    let db = lite();
    db.0.execute_batch(RELEASE_1_THREAD).unwrap();
    assert_eq!(migrations::migrate(&db, &migrations::THREAD).unwrap(), 0, "the first release recorded no version");
    assert_eq!(migrations::stored_version(&db).unwrap(), migrations::THREAD.current());
    assert_eq!(count(&db, "SELECT COUNT(*) FROM events"), 1);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM runs WHERE state = 'running'"), 1);
    let fresh = lite();
    migrations::migrate(&fresh, &migrations::THREAD).unwrap();
    assert_eq!(layout(&db), layout(&fresh), "the same layout as new storage");
}

#[test]
fn every_migration_survives_an_attempt_interrupted_at_any_step() {
    for s in SCHEMAS {
        let clean = lite();
        migrations::migrate(&clean, &s).unwrap();
        let want = layout(&clean);
        for (i, m) in s.migrations.iter().enumerate() {
            for k in 0..=m.steps.len() {
                let db = lite();
                for earlier in &s.migrations[..i] {
                    let partial = Layout { class: s.class, migrations: std::slice::from_ref(earlier) };
                    migrations::migrate(&db, &partial).unwrap();
                }
                // The attempt stops after k of its steps, before its version.
                for step in &m.steps[..k] {
                    migrations::run_step(&db, step).unwrap();
                }
                migrations::migrate(&db, &s).unwrap();
                assert_eq!(layout(&db), want, "{} v{}: interrupted after {k} steps", s.class, m.version);
                assert_eq!(migrations::stored_version(&db).unwrap(), s.current());
            }
        }
    }
}

#[test]
fn storage_written_by_newer_code_is_refused_not_misread() {
    for s in SCHEMAS {
        let db = lite();
        migrations::migrate(&db, &s).unwrap();
        let newer = s.current() + 1;
        db.exec("UPDATE schema_version SET version = ?", &[i64::from(newer).into()]).unwrap();
        let before = layout(&db);
        let e = migrations::migrate(&db, &s).unwrap_err();
        assert_eq!(e, OpenError::TooNew { class: s.class, stored: newer, current: s.current() });
        let api = ApiError::from(e);
        assert_eq!((api.status, api.code), (503, "storage_too_new"));
        assert!(
            api.message.contains(&newer.to_string()) && api.message.contains(&s.current().to_string()),
            "{}",
            api.message
        );
        assert_eq!(layout(&db), before, "nothing touched");
    }
}

#[test]
fn versions_are_numbered_one_by_one() {
    for s in SCHEMAS {
        let versions: Vec<u32> = s.migrations.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=s.current()).collect::<Vec<_>>(), "{}", s.class);
        assert!(s.migrations.iter().all(|m| !m.note.is_empty()), "{}: every migration says what changed", s.class);
        assert!(!s.migrations[0].steps.is_empty(), "{}: version 1 creates the layout", s.class);
    }
}

/// A directory written before charges (storage 3: one usage row per turn,
/// with no charge or run id) keeps counting those rows beside the charges
/// that follow, each row a turn.
#[test]
fn a_directory_of_before_charges_keeps_its_usage() {
    use threadline_durable::{Directory, DirectoryOp};
    let db = lite();
    let v3 = Layout { class: "directory", migrations: &migrations::DIRECTORY.migrations[..3] };
    migrations::migrate(&db, &v3).unwrap();
    db.0.execute_batch(
        "INSERT INTO usage (at, tokens, cost_usd, model, input_tokens, output_tokens) VALUES (10, 100, 0.0, 'm1', 60, 40);
         INSERT INTO usage (at, tokens, cost_usd, model, input_tokens, output_tokens) VALUES (20, 50, 0.0, 'm1', 30, 20);",
    )
    .unwrap();
    let d = Directory::open(db).unwrap();
    let charge: threadline_durable::agent::charge::Charge = serde_json::from_value(serde_json::json!({
        "id": "t/c1", "actor": "alice", "runId": "r9", "at": 30, "model": "m1", "inputTokens": 7, "outputTokens": 3
    }))
    .unwrap();
    assert_eq!(d.handle(&DirectoryOp::Charge { charges: vec![charge.clone(), charge] }).status, 204);
    let totals: serde_json::Value = serde_json::from_slice(&d.handle(&DirectoryOp::Totals { since: 0 }).body).unwrap();
    assert_eq!(
        totals["total"],
        serde_json::json!({"runs": 3, "inputTokens": 97, "outputTokens": 63, "totalTokens": 160})
    );
}

/// Runs stored before the conversation was a tree (storage v9) follow the
/// newest run before them that no regenerate replaced; a replaced answer is
/// in no path, so the conversation shows what it showed before.
#[test]
fn runs_of_before_the_tree_follow_one_another() {
    let db = lite();
    let v9 = Layout { class: "thread", migrations: &migrations::THREAD.migrations[..9] };
    migrations::migrate(&db, &v9).unwrap();
    let run = |id: &str, message: &str, replaced: i64| {
        db.exec(
            "INSERT INTO runs (run_id, message_id, message, agent_id, state, token_hash, created_at, replaced)
             VALUES (?, ?, 'hi', 'orchestrator', 'completed', 'h', 1, ?)",
            &[id.into(), message.into(), replaced.into()],
        )
        .unwrap();
    };
    run("t.a", "m1", 0);
    run("t.b", "m2", 1);
    run("t.b2", "m2", 0);
    run("t.c", "m3", 0);
    migrations::migrate(&db, &migrations::THREAD).unwrap();
    let store = threadline_durable::storage::store::SqlStore::open(db).unwrap();
    use threadline_durable::Store;
    let parents: Vec<_> = store.run_links().unwrap().into_iter().map(|l| (l.run_id, l.parent)).collect();
    assert_eq!(
        parents,
        [
            ("t.a".to_owned(), None),
            ("t.b".to_owned(), None),
            ("t.b2".to_owned(), Some("t.a".to_owned())),
            ("t.c".to_owned(), Some("t.b2".to_owned())),
        ]
    );
}
