//! Files, natively, through both halves of the core as a deployment runs
//! them: the Worker's exchange (read the body, check the files, reserve,
//! store, send) and the thread's object (reserve, attach, read back), with
//! the bucket a map. Each refusal is checked to store nothing.

mod support;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use futures_executor::block_on;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use support::T;
use threadline_durable::files::read;
use threadline_durable::front::{Exchange, Step};
use threadline_durable::protocols::{self, Context};
use threadline_durable::thread::{self, Answer};
use threadline_durable::wire::forward::{self, Body, Object, ObjectCall};
use threadline_durable::{Access, ApiError, Effect, Head, Settings, Store};

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

/// A deployment: its settings, its threads, its bucket.
struct World {
    settings: Settings,
    threads: BTreeMap<String, T>,
    bucket: BTreeMap<String, Vec<u8>>,
    /// Calls made to threads, in order, as `(reserve, route)`.
    calls: Vec<bool>,
}

/// How a request ended: the reply's status and body, a stream followed,
/// or a file streamed.
#[derive(Debug)]
enum End {
    Reply(u16, Value),
    Followed,
    File(threadline_durable::files::serve::FilePlan),
}

impl World {
    fn new(vars: &[(&str, &str)]) -> World {
        let mut all = vec![("AUTH_MODE", "dev"), ("RUNS_PER_MINUTE", "0"), ("AGENT_WEBHOOK_URL", "http://agent")];
        all.extend_from_slice(vars);
        World {
            settings: Settings::from_pairs(&all),
            threads: BTreeMap::new(),
            bucket: BTreeMap::new(),
            calls: Vec::new(),
        }
    }

    /// A request through the Worker's exchange, to its end.
    fn request(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> End {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let headers: Vec<(String, String)> = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let settings = self.settings.clone();
        let (mut x, mut step) = Exchange::start(&Head { method, path, query, header: &header }, &settings, 1_000);
        let mut last: Option<(u16, Vec<u8>)> = None;
        loop {
            step = match step {
                Step::Reply(r) => return End::Reply(r.status, serde_json::from_slice(&r.body).unwrap_or(Value::Null)),
                Step::ReadBody { .. } => x.body(Ok(body.to_vec()), &|p| format!("{p}_new")),
                Step::ReadFiles(form) => {
                    // In chunks of 7 bytes: the readers do not care where they split.
                    let chunks: Vec<Result<Vec<u8>, String>> = body.chunks(7).map(|c| Ok(c.to_vec())).collect();
                    let got = block_on(read::read(futures_util::stream::iter(chunks), form, &settings.files));
                    x.files_read(got, &|p| format!("{p}_new"))
                }
                Step::Call(c) => {
                    let (status, out) = self.call(&c, body, &header);
                    last = Some((status, out.clone()));
                    x.answer(status, out)
                }
                Step::Pass(c) => {
                    let (status, out) = self.call(&c, body, &header);
                    return End::Reply(status, serde_json::from_slice(&out).unwrap_or(Value::Null));
                }
                Step::Respond => {
                    let (status, out) = last.take().expect("a call was made");
                    return End::Reply(status, serde_json::from_slice(&out).unwrap_or(Value::Null));
                }
                Step::Relay(..) => return End::Followed,
                Step::Store(puts) => {
                    for p in puts {
                        self.bucket.insert(p.key, p.bytes);
                    }
                    x.stored(Ok(()))
                }
                Step::File(plan) => return End::File(plan),
            };
        }
    }

    /// A call to a thread's object, as its shell serves it.
    fn call(&mut self, c: &ObjectCall, client_body: &[u8], header: &dyn Fn(&str) -> Option<String>) -> (u16, Vec<u8>) {
        let Object::Thread(name) = &c.object else { panic!("only threads here") };
        let ctx: Context = forward::decode(Some(&c.context)).expect("a context");
        self.calls.push(ctx.reserve);
        let body = match &c.body {
            Body::Bytes(b) => b.clone(),
            Body::Client => client_body.to_vec(),
            Body::None => Vec::new(),
        };
        let settings = self.settings.clone();
        let t = self.threads.entry(name.clone()).or_insert_with(|| support::thread(&settings));
        let call = thread::Call {
            caller: &ctx.caller,
            query: &[],
            header,
            body: &body,
            origin: "https://w.test",
            random: 7,
            instance: &Default::default(),
            budget: ctx.budget,
            files: &ctx.files,
            reserve: ctx.reserve,
            consulted: None,
        };
        let outcome = protocols::handle(t, &ctx.route, &call, &settings, 1_000);
        match outcome.answer {
            Answer::Reply(r) => (r.status, r.body),
            Answer::Follow { .. } | Answer::Hold { .. } => (200, b"{}".to_vec()),
            Answer::Consult(_) => panic!("a thread that is no fork asks no other object"),
        }
    }

    fn thread(&self, id: &str) -> &T {
        &self.threads[id]
    }
}

fn data_url(media_type: &str, bytes: &[u8]) -> String {
    format!("data:{media_type};base64,{}", B64.encode(bytes))
}

/// `useChat`'s `sendMessage({ text, files })`: the files as `data:` URLs.
fn ui_chat(thread: &str, message: &str, files: &[(&str, &str, &[u8])]) -> Vec<u8> {
    let mut parts = vec![json!({"type": "text", "text": "look"})];
    for (name, ty, bytes) in files {
        parts.push(json!({"type": "file", "mediaType": ty, "filename": name, "url": data_url(ty, bytes)}));
    }
    json!({"id": thread, "messages": [{"id": message, "role": "user", "parts": parts}], "trigger": "submit-message"})
        .to_string()
        .into_bytes()
}

#[test]
fn a_send_with_inline_files_reserves_stores_then_sends() {
    let mut w = World::new(&[]);
    let body = ui_chat("t1", "m1", &[("shot.png", "image/png", PNG), ("notes.txt", "text/plain", b"hello")]);
    assert!(body.len() > 64, "a send bigger than its JSON");
    let end = w.request("POST", "/api/chat", &[("content-type", "application/json")], &body);
    assert!(matches!(end, End::Followed), "{end:?}");
    assert_eq!(w.calls, [true, false], "a reservation, then the send");
    assert_eq!(w.bucket.len(), 2);
    assert!(w.bucket.values().any(|b| b == PNG));

    // The message holds references; the files are attached; the log's
    // run-start names them.
    let t = w.thread("t1");
    let run = t.runs().active_run().unwrap().clone();
    assert_eq!(run.turn.attachments.len(), 2);
    let json = serde_json::to_value(&run.turn.attachments).unwrap();
    assert_eq!(json[0]["name"], "shot.png");
    assert_eq!(json[0]["mediaType"], "image/png");
    assert_eq!(json[0]["size"], PNG.len());
    assert!(t.journal().store().file_count().unwrap() == 2);
    let start = &t.conversation().run_events(&run.run_id).unwrap()[0];
    assert_eq!(start.payload_json()["attachments"][1]["name"], "notes.txt");

    // Read back: the plan the Worker streams the bytes by.
    let id = json[0]["fileId"].as_str().unwrap().to_owned();
    let End::File(plan) = w.request("GET", &format!("/v1/threads/t1/files/{id}"), &[], b"") else { panic!("a file") };
    assert_eq!(w.bucket[&plan.key], PNG);
    assert!(plan.headers.contains(&("etag".into(), format!("\"{}\"", json[0]["sha256"].as_str().unwrap()))));
    // Another thread does not hold it.
    let end = w.request("GET", &format!("/v1/threads/t2/files/{id}"), &[], b"");
    assert!(matches!(end, End::Reply(404, ref b) if b["error"]["code"] == "file_not_found"), "{end:?}");
}

#[test]
fn the_same_bytes_are_stored_once() {
    let mut w = World::new(&[]);
    w.request("POST", "/api/chat", &[], &ui_chat("t1", "m1", &[("a.png", "image/png", PNG)]));
    let id = w.thread("t1").runs().active_run().unwrap().run_id.clone();
    w.threads.get_mut("t1").unwrap().cancel(2_000).unwrap();
    assert!(w.thread("t1").runs().active_run().is_none(), "{id} ended");
    w.calls.clear();
    let end = w.request("POST", "/api/chat", &[], &ui_chat("t1", "m2", &[("again.png", "image/png", PNG)]));
    assert!(matches!(end, End::Followed), "{end:?}");
    assert_eq!(w.bucket.len(), 1, "one object for the same bytes");
    let run = w.thread("t1").runs().active_run().unwrap().clone();
    assert_eq!(
        serde_json::to_value(&run.turn.attachments).unwrap()[0]["name"],
        "again.png",
        "each message keeps its name"
    );
}

#[test]
fn refusals_store_nothing() {
    let html = b"<!DOCTYPE html><html><script>alert(1)</script>";
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("a type FILE_TYPES does not list", ui_chat("t1", "m1", &[("x.html", "text/html", b"<p>")]), 415, "unsupported_media_type"),
        ("bytes that contradict their type", ui_chat("t1", "m1", &[("x.png", "image/png", html)]), 415, "file_type_mismatch"),
        ("a file over MAX_FILE_BYTES", ui_chat("t1", "m1", &[("big.txt", "text/plain", &[b'a'; 300])]), 413, "file_too_large"),
        (
            "more files than MAX_FILES_PER_MESSAGE",
            ui_chat("t1", "m1", &[("a.txt", "text/plain", b"a"), ("b.txt", "text/plain", b"b"), ("c.txt", "text/plain", b"c")]),
            400,
            "too_many_files",
        ),
        (
            "a malformed data: URL",
            json!({"id": "t1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,!!!!"}]}]}).to_string().into_bytes(),
            400,
            "invalid_file",
        ),
        (
            "another thread's file",
            json!({"id": "t1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "url": "https://w.test/v1/threads/t9/files/f_00000000000000000000000000000000"}]}]}).to_string().into_bytes(),
            404,
            "file_not_found",
        ),
    ];
    for (what, body, status, code) in cases {
        let mut w = World::new(&[("MAX_FILE_BYTES", "200"), ("MAX_FILES_PER_MESSAGE", "2")]);
        let end = w.request("POST", "/api/chat", &[], &body);
        let End::Reply(got, b) = &end else { panic!("{what}: {end:?}") };
        assert_eq!((*got, b["error"]["code"].as_str().unwrap()), (status, code), "{what}");
        assert!(w.bucket.is_empty(), "{what}: the bucket is as it was");
        assert!(
            w.threads.values().all(|t| t.journal().last_seq() == 0 && t.journal().store().file_count().unwrap() == 0),
            "{what}: nothing stored"
        );
    }
}

#[test]
fn a_model_that_cannot_take_a_type_refuses_before_anything_is_stored() {
    let mut w = World::new(&[("LLM_MODEL_INPUT", "text")]);
    let end = w.request("POST", "/api/chat", &[], &ui_chat("t1", "m1", &[("a.png", "image/png", PNG)]));
    let End::Reply(400, b) = &end else { panic!("{end:?}") };
    assert_eq!(b["error"]["code"], "unsupported_attachment");
    assert!(b["error"]["message"].as_str().unwrap().contains("image"), "{b}");
    assert_eq!(w.calls, [true], "refused at the reservation");
    assert!(w.bucket.is_empty());
    assert_eq!(w.thread("t1").journal().store().file_count().unwrap(), 0);
    // Text files it takes.
    let end = w.request("POST", "/api/chat", &[], &ui_chat("t1", "m2", &[("a.csv", "text/csv", b"a,b")]));
    assert!(matches!(end, End::Followed), "{end:?}");
}

#[test]
fn a_busy_thread_refuses_at_the_reservation() {
    let mut w = World::new(&[]);
    w.request("POST", "/api/chat", &[], &ui_chat("t1", "m1", &[]));
    assert!(w.thread("t1").runs().active_run().is_some());
    let end = w.request("POST", "/api/chat", &[], &ui_chat("t1", "m2", &[("a.png", "image/png", PNG)]));
    assert!(matches!(&end, End::Reply(409, b) if b["error"]["code"] == "run_active"), "{end:?}");
    assert!(w.bucket.is_empty());
}

#[test]
fn uploads_then_a_send_by_file_id() {
    let mut w = World::new(&[]);
    let end = w.request(
        "POST",
        "/v1/threads/t1/files?name=r%C3%A9sum%C3%A9.pdf",
        &[("content-type", "application/pdf")],
        b"%PDF-1.7 ...",
    );
    let End::Reply(201, b) = &end else { panic!("{end:?}") };
    let file = &b["files"][0];
    assert_eq!(file["name"], "résumé.pdf");
    assert_eq!(file["mediaType"], "application/pdf");
    assert!(file["url"].as_str().unwrap().starts_with("https://w.test/v1/threads/t1/files/f_"));
    assert_eq!(w.bucket.len(), 1);
    let t = w.thread("t1");
    assert_eq!(t.conversation().owner().unwrap().as_deref(), Some("dev"), "an upload claims a thread nobody owns");

    // Instance AI's send names it (threadline's extension); the model must
    // take PDFs.
    let send = json!({"message": "summarise", "attachments": [{"fileId": file["fileId"]}]}).to_string();
    let end = w.request("POST", "/instance-ai/chat/t1", &[], send.as_bytes());
    assert!(matches!(&end, End::Reply(400, b) if b["error"]["code"] == "unsupported_attachment"), "{end:?}");
    w.settings = Settings::from_pairs(&[
        ("AUTH_MODE", "dev"),
        ("RUNS_PER_MINUTE", "0"),
        ("AGENT_WEBHOOK_URL", "http://agent"),
        ("LLM_MODEL_INPUT", "text,image,file"),
    ]);
    let end = w.request("POST", "/instance-ai/chat/t1", &[], send.as_bytes());
    assert!(matches!(&end, End::Reply(200, b) if b["runId"].is_string()), "{end:?}");
    let run = w.thread("t1").runs().active_run().unwrap().clone();
    assert_eq!(serde_json::to_value(&run.turn.attachments).unwrap()[0]["name"], "résumé.pdf");

    // n8n's own shape: base64 inline.
    w.threads.get_mut("t1").unwrap().cancel(2_000).unwrap();
    let n8n = json!({"message": "and this", "attachments": [{"data": B64.encode(b"a,b\n1,2"), "mimeType": "text/csv", "fileName": "t.csv"}]});
    let end = w.request("POST", "/instance-ai/chat/t1", &[], n8n.to_string().as_bytes());
    assert!(matches!(&end, End::Reply(200, _)), "{end:?}");
    assert_eq!(w.bucket.len(), 2);
}

#[test]
fn the_same_bytes_uploaded_again_under_another_name_are_named_as_last_uploaded() {
    let mut w = World::new(&[]);
    let up = |w: &mut World, name: &str| match w.request(
        "POST",
        &format!("/v1/threads/t1/files?name={name}"),
        &[("content-type", "text/plain")],
        b"same",
    ) {
        End::Reply(201, b) => b["files"][0]["fileId"].as_str().unwrap().to_owned(),
        other => panic!("{other:?}"),
    };
    let first = up(&mut w, "red.txt");
    assert_eq!(up(&mut w, "raw.txt"), first, "one file for the same bytes");
    let send = json!({"message": "x", "attachments": [{"fileId": first}]}).to_string();
    assert!(matches!(w.request("POST", "/instance-ai/chat/t1", &[], send.as_bytes()), End::Reply(200, _)));
    let run = w.thread("t1").runs().active_run().unwrap().clone();
    assert_eq!(run.turn.attachments[0].name(), Some("raw.txt"));
    assert_eq!(w.bucket.len(), 1);
}

#[test]
fn multipart_uploads_and_their_limits() {
    let mut w = World::new(&[("MAX_FILES_PER_MESSAGE", "2")]);
    let form = |parts: &[(&str, &str, &[u8])]| {
        let mut out = Vec::new();
        for (name, ty, bytes) in parts {
            out.extend_from_slice(format!("--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\nContent-Type: {ty}\r\n\r\n").as_bytes());
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"--B--\r\n");
        out
    };
    let ct = [("content-type", "multipart/form-data; boundary=B")];
    let end = w.request(
        "POST",
        "/v1/threads/t1/files",
        &ct,
        &form(&[("a.png", "image/png", PNG), ("b.md", "text/markdown", b"# hi")]),
    );
    let End::Reply(201, b) = &end else { panic!("{end:?}") };
    assert_eq!(b["files"].as_array().unwrap().len(), 2);
    let three = form(&[("a.txt", "text/plain", b"a"), ("b.txt", "text/plain", b"b"), ("c.txt", "text/plain", b"c")]);
    assert!(matches!(w.request("POST", "/v1/threads/t1/files", &ct, &three), End::Reply(400, _)));
    let html = form(&[("evil.png", "image/png", b"<html><script>x</script>")]);
    assert!(matches!(w.request("POST", "/v1/threads/t1/files", &ct, &html), End::Reply(415, _)));
    assert_eq!(w.bucket.len(), 2, "refused uploads store nothing");
}

#[test]
fn unsent_uploads_are_removed_after_the_grace_period() {
    let mut w = World::new(&[("FILE_GRACE_MS", "60000")]);
    w.request("POST", "/v1/threads/t1/files", &[("content-type", "text/plain")], b"never sent");
    let w_settings = w.settings.clone();
    let t = w.threads.get_mut("t1").unwrap();
    assert_eq!(
        t.clock().next_alarm(1_000, &w_settings),
        Some(61_000),
        "the alarm comes at the end of the grace period"
    );
    assert!(t.clock().alarm(&w_settings, 30_000).unwrap().iter().all(|e| !matches!(e, Effect::DeleteFiles { .. })));
    let effects = t.clock().alarm(&w_settings, 61_000).unwrap();
    let Some(Effect::DeleteFiles { keys, ids }) = effects.iter().find(|e| matches!(e, Effect::DeleteFiles { .. }))
    else {
        panic!("{effects:?}")
    };
    assert_eq!(keys.len(), 1);
    // While it is being removed, the same bytes cannot be reserved again.
    let end = w.request("POST", "/v1/threads/t1/files", &[("content-type", "text/plain")], b"never sent");
    assert!(matches!(&end, End::Reply(409, b) if b["error"]["code"] == "file_busy"), "{end:?}");
    let t = w.threads.get_mut("t1").unwrap();
    t.journal_mut().files_mut().files_deleted(ids).unwrap();
    assert_eq!(t.journal().store().file_count().unwrap(), 0);
    // An attached file is never removed.
    let body = ui_chat("t1", "m1", &[("keep.txt", "text/plain", b"kept")]);
    assert!(matches!(w.request("POST", "/api/chat", &[], &body), End::Followed));
    let t = w.threads.get_mut("t1").unwrap();
    let effects = t.clock().alarm(&w_settings, 10_000_000).unwrap();
    assert!(effects.iter().all(|e| !matches!(e, Effect::DeleteFiles { .. })), "{effects:?}");
}

#[test]
fn deleting_a_thread_removes_its_files() {
    let mut w = World::new(&[]);
    w.request("POST", "/v1/threads/t1/files", &[("content-type", "text/plain")], b"bytes");
    let t = w.threads.get_mut("t1").unwrap();
    let mut effects = Vec::new();
    let owner = support::actor("dev", &[]);
    let admitted = t.admit(Access::Owner, ApiError::thread_not_found(), &owner, None).unwrap();
    t.delete(&admitted, 0, &mut effects).unwrap();
    let prefix = effects.iter().find_map(|e| match e {
        Effect::Wipe { files } => files.clone(),
        _ => None,
    });
    let prefix = prefix.expect("the thread's files go with it");
    assert!(!w.bucket.is_empty() && w.bucket.keys().all(|k| k.starts_with(&prefix)), "{prefix}");
}
