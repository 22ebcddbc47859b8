//! The actor directory: one small Durable Object per actor (`actor:<sub>`)
//! that lists the threads they started (`GET /agent/threads`) and counts
//! their sends for the per-minute limit. Threads register themselves when a
//! run starts; a thread's own object stays the source of truth for
//! everything in it.

use serde::Deserialize;
use serde_json::json;
use threadline_durable::directory::{self, WINDOW_MS};
use worker::*;

#[durable_object]
pub struct Directory {
    sql: SqlStorage,
    /// Storage brought to the current layout, or why not (every request is
    /// then refused with it).
    opened: std::result::Result<(), threadline_durable::ApiError>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Register {
    thread_id: String,
    title: String,
    at: f64,
}

#[derive(Deserialize)]
struct Admit {
    limit: i64,
    now: f64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Unregister {
    thread_id: String,
}

#[derive(Deserialize, serde::Serialize)]
struct Row {
    thread_id: String,
    title: String,
    created_at: f64,
    updated_at: f64,
    runs: f64,
}

impl DurableObject for Directory {
    fn new(state: State, _env: Env) -> Self {
        let sql = state.storage().sql();
        let opened = crate::store::open(&sql, &threadline_durable::schema::DIRECTORY).map_err(Into::into);
        Directory { sql, opened }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Err(e) = &self.opened {
            return crate::http::error(e);
        }
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/register") => {
                let r: Register = req.json().await?;
                self.sql.exec(
                    "INSERT INTO threads (thread_id, title, created_at, updated_at) VALUES (?, ?, ?, ?)
                     ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at, runs = runs + 1",
                    vec![r.thread_id.into(), r.title.into(), (r.at as i64).into(), (r.at as i64).into()],
                )?;
                Response::ok("")
            }
            (Method::Post, "/admit") => {
                // A sliding window over the last minute's sends.
                let a: Admit = req.json().await?;
                let now = a.now as i64;
                self.sql.exec("DELETE FROM sends WHERE at <= ?", vec![(now - WINDOW_MS).into()])?;
                #[derive(Deserialize)]
                struct Window {
                    n: f64,
                    oldest: Option<f64>,
                }
                let w: Window = self.sql.exec("SELECT COUNT(*) AS n, MIN(at) AS oldest FROM sends", None)?.one()?;
                if let Err(retry) = directory::admit(w.n as i64, w.oldest.map(|o| o as i64), a.limit, now) {
                    return Ok(Response::from_json(&json!({ "retryAfter": retry }))?.with_status(429));
                }
                self.sql.exec("INSERT INTO sends (at) VALUES (?)", vec![now.into()])?;
                Response::ok("")
            }
            (Method::Post, "/unregister") => {
                let u: Unregister =
                    serde_json::from_slice(&req.bytes().await?).map_err(|e| Error::RustError(e.to_string()))?;
                self.sql.exec("DELETE FROM threads WHERE thread_id = ?", vec![u.thread_id.into()])?;
                Response::ok("")
            }
            (Method::Get, "/threads") => {
                let rows: Vec<Row> = self
                    .sql
                    .exec("SELECT thread_id, title, created_at, updated_at, runs FROM threads ORDER BY updated_at DESC LIMIT 200", None)?
                    .to_array()?;
                let threads: Vec<_> = rows
                    .iter()
                    .map(|r| {
                        json!({
                            "threadId": r.thread_id,
                            "title": r.title,
                            "createdAt": r.created_at as i64,
                            "updatedAt": r.updated_at as i64,
                            "runs": r.runs as i64,
                        })
                    })
                    .collect();
                Response::from_json(&json!({ "threads": threads }))
            }
            _ => Response::error("not found", 404),
        }
    }
}
