//! Stored data outlives the code: every object class records the version of
//! its storage's layout, and when it wakes brings old storage up to the
//! current layout, in one step, before it serves anything.
//!
//! A layout's history is a list of [`Migration`]s, plain ordered steps in
//! SQL; the shell only executes them (`db::Db`), here and natively in tests.
//! Version 1 is the layout of the first release (commit `2369c0a`, recorded
//! in `local/RELEASE`), which had no version table: its migration is that
//! layout's own `CREATE ... IF NOT EXISTS` statements, so it finds old
//! storage already there and creates it on new storage.
//!
//! Invariants enforced here:
//! - Every step can run twice: on storage interrupted half-way through an
//!   earlier attempt, a migration runs again from its first step and ends
//!   in the same layout (statements are `IF NOT EXISTS`, inserts `OR
//!   IGNORE`, updates idempotent, columns added only when missing).
//! - The version is written after a migration's last step, so a version
//!   never names a layout its storage does not have.
//! - Storage written by newer code is refused (503 `storage_too_new`, both
//!   versions in the message), never read: a rolling deploy can wake an
//!   object under older code for a while, and misreading would corrupt it.

use crate::storage::db::Db;
use crate::storage::db::StoreError;
use crate::wire::error::ApiError;

/// One statement of a migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statement {
    /// SQL that may run again on storage that already has it (idempotent).
    Sql(&'static str),
    /// `ALTER TABLE table ADD COLUMN column decl`, when the column is missing
    /// (SQLite has no `ADD COLUMN IF NOT EXISTS`).
    AddColumn { table: &'static str, column: &'static str, decl: &'static str },
}

/// The steps that take storage from `version - 1` to `version`.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    pub version: u32,
    /// What changed, for people (docs/upgrades.md lists these).
    pub note: &'static str,
    /// Empty for an additive change (a new meta key, a new optional JSON
    /// field): nothing to convert, but older code must not read storage
    /// that has it.
    pub steps: &'static [Statement],
}

/// One object class's layout history.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub class: &'static str,
    pub migrations: &'static [Migration],
}

impl Layout {
    /// The layout this code reads and writes.
    pub fn current(&self) -> u32 {
        self.migrations.last().map_or(0, |m| m.version)
    }
}

/// Why storage could not be opened.
#[derive(Clone, Debug, PartialEq)]
pub enum OpenError {
    /// Written by a newer release than this code.
    TooNew {
        class: &'static str,
        stored: u32,
        current: u32,
    },
    Store(StoreError),
}

impl From<StoreError> for OpenError {
    fn from(e: StoreError) -> OpenError {
        OpenError::Store(e)
    }
}

impl From<OpenError> for ApiError {
    fn from(e: OpenError) -> ApiError {
        match e {
            OpenError::TooNew { class, stored, current } => ApiError::storage_too_new(class, stored, current),
            OpenError::Store(e) => ApiError::storage(e),
        }
    }
}

const VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)";

/// The version storage records (0: none recorded, a new object or one
/// written by the first release).
pub fn stored_version(db: &impl Db) -> Result<u32, StoreError> {
    db.exec(VERSION_TABLE, &[])?;
    let version = db.run("SELECT version FROM schema_version WHERE id = 1", &[])?.first();
    Ok(version.map_or(0, |v| v.int()) as u32)
}

/// Brings storage to `schema`'s current layout; returns the version it
/// found. Runs nothing when storage is current (one read).
pub fn migrate(db: &impl Db, schema: &Layout) -> Result<u32, OpenError> {
    let stored = stored_version(db)?;
    let current = schema.current();
    if stored > current {
        return Err(OpenError::TooNew { class: schema.class, stored, current });
    }
    for m in schema.migrations.iter().filter(|m| m.version > stored) {
        run(db, m)?;
        db.exec(
            "INSERT INTO schema_version (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            &[i64::from(m.version).into()],
        )?;
    }
    Ok(stored)
}

/// Runs a migration's steps (not its version write).
pub fn run(db: &impl Db, m: &Migration) -> Result<(), StoreError> {
    for step in m.steps {
        run_step(db, step)?;
    }
    Ok(())
}

pub fn run_step(db: &impl Db, step: &Statement) -> Result<(), StoreError> {
    match *step {
        Statement::Sql(sql) => db.exec(sql, &[]).map(drop),
        Statement::AddColumn { table, column, decl } => {
            if db.columns(table)?.iter().any(|c| c == column) {
                Ok(())
            } else {
                db.exec(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"), &[]).map(drop)
            }
        }
    }
}

/// A thread's storage (`ThreadObject`).
pub const THREAD: Layout = Layout {
    class: "thread",
    migrations: &[
        Migration {
            version: 1,
            note: "the first release's layout: events, runs, meta, confirmations, session approvals, checkpoints",
            steps: &[
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS events (
                  seq    INTEGER PRIMARY KEY,
                  run_id TEXT NOT NULL,
                  type   TEXT NOT NULL,
                  data   TEXT NOT NULL
                )",
                ),
                Statement::Sql("CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq)"),
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS runs (
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
                )",
                ),
                // Small named documents: the queue, the owner, the pinned model,
                // the stream generation, producers' states.
                Statement::Sql("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
                // Confirmation requests (human in the loop), pending and settled.
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS confirmations (
                  request_id TEXT PRIMARY KEY,
                  run_id     TEXT NOT NULL,
                  state      TEXT NOT NULL,
                  data       TEXT NOT NULL
                )",
                ),
                Statement::Sql(
                    "CREATE INDEX IF NOT EXISTS pending_confirmations ON confirmations (state) WHERE state = 'pending'",
                ),
                // Tools approved with session scope: approved for the rest of the thread.
                Statement::Sql("CREATE TABLE IF NOT EXISTS session_approvals (tool TEXT PRIMARY KEY)"),
                // The built-in agent's progress, one row per run, replaced each step.
                Statement::Sql("CREATE TABLE IF NOT EXISTS checkpoints (run_id TEXT PRIMARY KEY, data TEXT NOT NULL)"),
                // The run lock, enforced by the database as well: one running run at most.
                Statement::Sql("CREATE UNIQUE INDEX IF NOT EXISTS one_running_run ON runs (state) WHERE state = 'running'"),
            ],
        },
        Migration {
            version: 2,
            note: "meta key `send_origin`: the origin of the last accepted send, for publish URLs without PUBLIC_URL \
               (additive: older storage simply has none yet)",
            steps: &[],
        },
        Migration {
            version: 3,
            note: "checkpoints may carry `clientTools` (the tools a client declared with its message), and \
               confirmations may have input type `client-tool` (additive: older storage has neither)",
            steps: &[],
        },
        Migration {
            version: 4,
            note: "runs gain column `turn` (what the message asked of its turn: agent, page context, structured \
               output, sent-at, actor; NULL on older rows, read as nothing asked), queue items may carry the same \
               fields and a paused queue its reason, confirmations' decisions record `decidedBy` and `via`, and \
               the log may hold `confirmation-settled` events",
            steps: &[Statement::AddColumn { table: "runs", column: "turn", decl: "TEXT" }],
        },
        Migration {
            version: 5,
            note: "the log's `tasks-update` events keep the shape they were published in: the seed's flat \
               `{tasks: [...]}` with its statuses (`completed`, `pending`), beside the schema's nested form \
               (older rows are all nested, with `done`/`todo`, which every reader still takes)",
            steps: &[],
        },
        Migration {
            version: 6,
            note: "table `files`: the thread's files (their bytes are in R2 under the thread's generation), \
               reserved, attached to a message, or being removed; a message's turn, its queue item and its \
               `run-start` may carry `attachments` (references, never bytes; older rows have none); a checkpoint's step \
               calls may carry `images` (an MCP tool's, as file references), and tool events `server`",
            steps: &[
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS files (
                  file_id     TEXT PRIMARY KEY,
                  sha256      TEXT NOT NULL,
                  media_type  TEXT NOT NULL,
                  size        INTEGER NOT NULL,
                  name        TEXT,
                  state       TEXT NOT NULL,
                  reserved_at INTEGER NOT NULL
                )",
                ),
                Statement::Sql("CREATE INDEX IF NOT EXISTS files_by_state ON files (state, reserved_at)"),
            ],
        },
        Migration {
            version: 7,
            note: "a message's turn (its run's `runs.turn`, its queue item) may carry `trace`, the `traceparent` \
               of the request that sent it, so its run's spans hang under that request (additive; older rows have none)",
            steps: &[],
        },
        Migration {
            version: 8,
            note: "table `charges`: each model call's charge to the actor whose turn made it, held while the call \
               runs and kept until the actor's directory has it",
            steps: &[Statement::Sql(
                "CREATE TABLE IF NOT EXISTS charges (id TEXT PRIMARY KEY, actor TEXT NOT NULL, data TEXT NOT NULL)",
            )],
        },
        Migration {
            version: 9,
            note: "the queue document's items may carry `updatedAt` (when the message was last edited) and a \
               paused queue `pausedAt` (additive: older documents have neither, read as never edited and paused \
               at an unknown time)",
            steps: &[],
        },
        Migration {
            version: 10,
            note: "runs name the run whose turn they follow (`parent`): the conversation is a tree. A run of \
               before follows the newest run before it that no regenerate replaced; an answer a regenerate \
               replaced is in no path (it shows nowhere, as before)",
            steps: &[
                Statement::AddColumn { table: "runs", column: "parent", decl: "TEXT" },
                Statement::Sql(
                    "UPDATE runs SET parent = (SELECT p.run_id FROM runs p WHERE p.replaced = 0 AND p.rowid < runs.rowid
                       ORDER BY p.rowid DESC LIMIT 1)
                     WHERE parent IS NULL AND replaced = 0",
                ),
            ],
        },
        Migration {
            version: 11,
            note: "the model's context is compacted: `compactions` holds, by the run it runs through, the summary \
               that replaces the conversation up to it (the `context-compacted` event's payload). A checkpoint is \
               kept only while its run runs: those of finished runs, never read again, are deleted",
            steps: &[
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS compactions (through_run TEXT PRIMARY KEY, data TEXT NOT NULL)",
                ),
                Statement::Sql(
                    "DELETE FROM checkpoints WHERE run_id NOT IN (SELECT run_id FROM runs WHERE state = 'running')",
                ),
            ],
        },
        Migration {
            version: 12,
            note: "meta key `inbox`: what the thread last reported to its owner's inbox, the reports their \
               directory has not taken yet and the webhook deliveries the queue has not (a thread of before has \
               none, and reports its state when it next loads); meta key `schedules`: the thread's schedules \
               (additive: a thread of before has none)",
            steps: &[],
        },
    ],
};

/// An actor's directory (`Directory`).
pub const DIRECTORY: Layout = Layout {
    class: "directory",
    migrations: &[
        Migration {
            version: 1,
            note: "the first release's layout: the actor's threads, and their sends of the last minute",
            steps: &[
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS threads (
                  thread_id  TEXT PRIMARY KEY,
                  title      TEXT NOT NULL,
                  created_at INTEGER NOT NULL,
                  updated_at INTEGER NOT NULL,
                  runs       INTEGER NOT NULL DEFAULT 1
                )",
                ),
                Statement::Sql("CREATE TABLE IF NOT EXISTS sends (at INTEGER NOT NULL)"),
            ],
        },
        Migration {
            version: 2,
            note: "table `usage`: what the actor's turns used (tokens, dollars), for their budget (`QUOTA`)",
            steps: &[
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS usage (at INTEGER NOT NULL, tokens INTEGER NOT NULL, cost_usd REAL NOT NULL)",
                ),
                Statement::Sql("CREATE INDEX IF NOT EXISTS usage_by_time ON usage (at)"),
            ],
        },
        Migration {
            version: 3,
            note: "usage rows name their model and split input and output tokens, for the actor's totals (`GET /instance-ai/usage`); rows of before count under no model",
            steps: &[
                Statement::AddColumn { table: "usage", column: "model", decl: "TEXT" },
                Statement::AddColumn { table: "usage", column: "input_tokens", decl: "INTEGER NOT NULL DEFAULT 0" },
                Statement::AddColumn { table: "usage", column: "output_tokens", decl: "INTEGER NOT NULL DEFAULT 0" },
            ],
        },
        Migration {
            version: 4,
            note: "usage rows are one model call's charge each, counted once by `charge_id`, with the `run_id` of \
               their turn (rows of before have neither, one per turn); table `holds`: what calls in flight may use, \
               counted in the actor's budget until their charge arrives",
            steps: &[
                Statement::AddColumn { table: "usage", column: "charge_id", decl: "TEXT" },
                Statement::AddColumn { table: "usage", column: "run_id", decl: "TEXT" },
                Statement::Sql("CREATE UNIQUE INDEX IF NOT EXISTS usage_by_charge ON usage (charge_id) WHERE charge_id IS NOT NULL"),
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS holds (id TEXT PRIMARY KEY, at INTEGER NOT NULL, tokens INTEGER NOT NULL, cost_usd REAL NOT NULL)",
                ),
            ],
        },
        Migration {
            version: 5,
            note: "the inbox: a thread's row holds the last state it reported (`report`, its `version`, `state`, \
               `answer_id`), the actor's read mark (`read_id`) and `deleted` once it is gone; table `changes`: every \
               change of a row, streamed to the inbox's readers. Rows of before report nothing until their thread \
               next wakes (each thread reports itself then): they read as idle, with their title, times and runs",
            steps: &[
                Statement::AddColumn { table: "threads", column: "report", decl: "TEXT" },
                Statement::AddColumn { table: "threads", column: "version", decl: "INTEGER NOT NULL DEFAULT 0" },
                Statement::AddColumn { table: "threads", column: "state", decl: "TEXT NOT NULL DEFAULT 'idle'" },
                Statement::AddColumn { table: "threads", column: "answer_id", decl: "INTEGER NOT NULL DEFAULT 0" },
                Statement::AddColumn { table: "threads", column: "read_id", decl: "INTEGER NOT NULL DEFAULT 0" },
                Statement::AddColumn { table: "threads", column: "deleted", decl: "INTEGER NOT NULL DEFAULT 0" },
                Statement::Sql("CREATE INDEX IF NOT EXISTS threads_by_change ON threads (updated_at DESC, thread_id)"),
                Statement::Sql(
                    "CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, thread_id TEXT NOT NULL, data TEXT NOT NULL)",
                ),
            ],
        },
        Migration {
            version: 6,
            note: "table `dead_letters` (the deployer's directory only): webhook deliveries whose attempts were \
               spent, by their `webhook-id`, for the deployer to list and replay",
            steps: &[Statement::Sql(
                "CREATE TABLE IF NOT EXISTS dead_letters (id TEXT PRIMARY KEY, at INTEGER NOT NULL, data TEXT NOT NULL,
                   replayed_at INTEGER)",
            )],
        },
    ],
};

/// A standalone Durable Stream (`StreamObject`).
pub const STREAM: Layout = Layout {
    class: "stream",
    migrations: &[Migration {
        version: 1,
        note: "the first release's layout: the stream's meta, its messages, its producers",
        steps: &[
            Statement::Sql("CREATE TABLE IF NOT EXISTS ds_meta (k INTEGER PRIMARY KEY CHECK (k = 1), data TEXT NOT NULL)"),
            Statement::Sql(
                "CREATE TABLE IF NOT EXISTS ds_messages (hi INTEGER NOT NULL, lo INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (hi, lo))",
            ),
            Statement::Sql("CREATE TABLE IF NOT EXISTS ds_producers (id TEXT PRIMARY KEY, data TEXT NOT NULL)"),
        ],
    }],
};
