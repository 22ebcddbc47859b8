//! The runtime's floor for an object-held stream in Rust: what
//! `tests/bench/floor-held/index.js` does, on the worker crate and
//! wasm-bindgen at the versions threadline pins, written as a team would
//! write it with them. `make bench` serves it beside the JavaScript floor,
//! so the two say what the toolchain costs on the same path and threadline's
//! row says what is its own. Same routes, same work: the Worker forwards a
//! subscribe to the thread's object and passes its answer on as is; the
//! object keeps a writer per subscriber, stores each published event in
//! SQLite and writes it to every writer as an SSE frame. No auth, no
//! validation, no replay, no keep-alives.
use std::cell::{Cell, RefCell};
use wasm_bindgen::prelude::*;
use worker::*;

#[wasm_bindgen]
extern "C" {
    /// workerd's native pass-through stream (as threadline's held streams).
    #[wasm_bindgen(js_name = IdentityTransformStream)]
    type IdentityStream;
    #[wasm_bindgen(constructor, js_class = "IdentityTransformStream", catch)]
    fn new() -> std::result::Result<IdentityStream, JsValue>;
    #[wasm_bindgen(method, getter)]
    fn readable(this: &IdentityStream) -> web_sys::ReadableStream;
    #[wasm_bindgen(method, getter)]
    fn writable(this: &IdentityStream) -> web_sys::WritableStream;
}

#[event(fetch)]
async fn main(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let path = req.path();
    let parts: Vec<&str> = path.split('/').collect();
    let thread = || env.durable_object("THREAD")?.get_by_name(parts[3]);
    match (req.method(), parts.get(2), parts.get(4)) {
        (Method::Get, Some(&"events"), _) => thread()?.fetch_with_str("https://thread/subscribe").await,
        (Method::Post, _, Some(&"runs")) => {
            let init = web_sys::RequestInit::new();
            init.set_method("POST");
            if let Some(body) = req.inner().body() {
                init.set_body(&body);
            }
            let publish = web_sys::Request::new_with_str_and_init("https://thread/publish", &init)?;
            thread()?.fetch_with_request(Request::from(publish)).await
        }
        _ => Response::error("not found", 404),
    }
}

#[durable_object]
pub struct ThreadObject {
    state: State,
    seq: Cell<i64>,
    /// One writer per open subscriber response.
    writers: RefCell<Vec<web_sys::WritableStreamDefaultWriter>>,
}

#[derive(serde::Deserialize)]
struct Last {
    seq: i64,
}

impl DurableObject for ThreadObject {
    fn new(state: State, _env: Env) -> Self {
        let sql = state.storage().sql();
        let create = "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, data TEXT NOT NULL)";
        sql.exec(create, None).expect("the events table");
        let last = sql.exec("SELECT COALESCE(MAX(seq), 0) AS seq FROM events", None).and_then(|c| c.one::<Last>());
        let seq = Cell::new(last.expect("the last seq").seq);
        ThreadObject { state, seq, writers: RefCell::default() }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        if req.path() == "/subscribe" {
            let stream = IdentityStream::new()?;
            self.writers.borrow_mut().push(stream.writable().get_writer()?);
            let headers = Headers::new();
            headers.set("content-type", "text/event-stream")?;
            return Ok(Response::from_body(ResponseBody::Stream(stream.readable()))?.with_headers(headers));
        }
        let body = req.text().await?;
        let events: Vec<&serde_json::value::RawValue> = serde_json::from_str(&body)?;
        let sql = self.state.storage().sql();
        let mut frames = Vec::with_capacity(events.len());
        for event in events {
            self.seq.set(self.seq.get() + 1);
            let insert = "INSERT INTO events (seq, data) VALUES (?, ?)";
            sql.exec(insert, vec![self.seq.get().into(), event.get().into()])?;
            frames.push(js_sys::Uint8Array::from(format!("data: {}\n\n", event.get()).as_bytes()));
        }
        // Not awaited: a write settles when its reader takes it.
        for writer in self.writers.borrow().iter() {
            for frame in &frames {
                let _ = writer.write_with_chunk(frame);
            }
        }
        Response::from_json(&serde_json::json!({ "lastEventId": self.seq.get() }))
    }
}

/// The other classes wrangler.toml binds, unused here.
macro_rules! unused_object {
    ($name:ident) => {
        #[durable_object]
        pub struct $name {}

        impl DurableObject for $name {
            fn new(_state: State, _env: Env) -> Self {
                $name {}
            }

            async fn fetch(&self, _req: Request) -> Result<Response> {
                Response::error("not found", 404)
            }
        }
    };
}

unused_object!(Directory);
unused_object!(StreamObject);
