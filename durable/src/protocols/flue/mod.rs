//! Flue's contract over Durable Streams offsets
//! (`docs/protocols/flue-streaming-protocol.md`): agent instances by name
//! and id (`GET`/`HEAD /agents/:name/:id`, the thread `id` as the agent
//! `name` serves it; `POST` sends to it and `POST .../abort` stops it, as
//! `@flue/sdk` 2's `send()` and `abort()` call them ([`bodies`])),
//! workflow runs by id (`GET`/`HEAD /runs/:runId`,
//! each event stamped with its version `v`), and the two conversation
//! views, also served on `/v1/threads/:id?view=`: `history`, one
//! `FlueConversationSnapshot`, and `updates`, Flue's UI projection
//! ([`projection`]) after an offset, caught up here ([`history`]) or live
//! ([`stream`]).

pub mod bodies;
pub mod history;
pub mod projection;
pub mod stream;

use super::durable_streams::views;
use super::{BodyKind, Gate, Target};
use crate::access::Access;
use crate::effect::Effect;
use crate::wire::error::ApiError;
use crate::feed::{Plan, Relay};
use crate::input;
use crate::wire::route::Spec;
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::thread::error::Error;
use crate::thread::{Answer, Call, Follow, Sink, Thread};
use projection::Resume;
use serde::{Deserialize, Serialize};

/// A Flue route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /agents/:name/:id`: the thread `id` as the agent `name` serves
    /// it; `view=history` unless the query names `updates`.
    Agent { thread: String, name: String },
    /// `GET /runs/:runId`: one run's events, versioned.
    Run { thread: String, run: String },
    /// `GET /agents/:name/:id/attachments/:fileId`: a file of the
    /// conversation, where Flue's client looks for a `file` part's bytes.
    Attachment { thread: String, name: String, file: String },
    /// `POST /agents/:name/:id`: a message to the conversation (2.x's
    /// `{kind: "user", body}`, 1.x's `{message}`); queued while it is busy.
    Send { thread: String, name: String },
    /// `POST /agents/:name/:id/abort`: stops the running answer and drops
    /// every queued message.
    Abort { thread: String, name: String },
    /// `GET /v1/threads/:threadId?view=history|updates`: the conversation
    /// view on Durable Streams' path (no path of Flue's own: the registry
    /// hands it here for the query, `protocols::refine`); `view=updates`
    /// unless the query names `history`.
    View { thread: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec {
            path: "/agents/:name/:id",
            methods: &["GET", "POST"],
            build: |p, method| {
                let (thread, name) = (p.thread("id")?, crate::wire::ids::id(p.raw("name"))?);
                Ok(match method {
                    "POST" => R::Send { thread, name },
                    _ => R::Agent { thread, name },
                })
            },
        },
        Spec {
            path: "/agents/:name/:id/abort",
            methods: &["POST"],
            build: |p, _| Ok(R::Abort { thread: p.thread("id")?, name: crate::wire::ids::id(p.raw("name"))? }),
        },
        Spec {
            path: "/agents/:name/:id/attachments/:fileId",
            methods: &["GET"],
            build: |p, _| {
                let (thread, name) = (p.thread("id")?, crate::wire::ids::id(p.raw("name"))?);
                Ok(R::Attachment { thread, name, file: p.raw("fileId").to_owned() })
            },
        },
        Spec {
            path: "/runs/:runId",
            methods: &["GET"],
            build: |p, _| {
                let run = crate::wire::ids::run_id(p.raw("runId"))?;
                let thread = crate::wire::ids::thread_of(&run).ok_or_else(ApiError::run_not_found)?.to_owned();
                Ok(R::Run { thread, run })
            },
        },
    ];

    fn target(&self) -> Target {
        Target::Thread
    }

    fn thread(&self) -> &str {
        match self {
            R::Agent { thread, .. }
            | R::Run { thread, .. }
            | R::Attachment { thread, .. }
            | R::Send { thread, .. }
            | R::Abort { thread, .. }
            | R::View { thread } => thread,
        }
    }

    fn access(&self) -> Access {
        match self {
            R::Send { .. } => Access::Send,
            R::Abort { .. } => Access::Owner,
            _ => Access::Reader,
        }
    }

    fn body(&self) -> BodyKind {
        match self {
            R::Send { .. } => BodyKind::Send(crate::files::spec::SLOTS),
            _ => BodyKind::None,
        }
    }

    fn not_found(&self) -> ApiError {
        match self {
            R::Attachment { .. } => ApiError::file_not_found(),
            _ => ApiError::thread_not_found(),
        }
    }

    fn serves_file(&self) -> bool {
        matches!(self, R::Attachment { .. })
    }

    fn plan(&self, query: &[(String, String)], _: Option<&str>, now: i64) -> Result<Option<Plan>, ApiError> {
        match self {
            R::Agent { thread, .. } => plan_view(thread, query, now, true),
            R::View { thread } => plan_view(thread, query, now, false),
            R::Attachment { .. } | R::Send { .. } | R::Abort { .. } => Ok(None),
            R::Run { run, .. } => {
                use crate::protocols::durable_streams::stream::{LongPoll, SseView};
                let cursor = input::query_first(query, "cursor");
                let v = views::RUN_EVENT_VERSION;
                // Where the reader stands (the object checks the offset):
                // `-1` is the start, `now` is followed from the tail.
                let skip = match input::query_first(query, "offset").as_deref() {
                    Some("now") => None,
                    Some(o) => Some(crate::streams::offset::Offset::parse(o).map_or(0, |o| o.lo)),
                    None => Some(0),
                };
                Ok(match input::query_first(query, "live").as_deref() {
                    Some("sse") => {
                        let view = SseView::new(Some(run.clone()), cursor, now).versioned(v).flue_text(skip);
                        Some(Plan::new(Box::new(Relay::new(view)), crate::wire::sse::headers()))
                    }
                    Some("long-poll") => {
                        let view = LongPoll::new(Some(run.clone()), cursor).versioned(v).flue_text(skip);
                        Some(Plan::new(Box::new(Relay::new(view)), Vec::new()).one_shot())
                    }
                    _ => None,
                })
            }
        }
    }

    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        gate: &Gate,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        let grant = gate.admitted()?;
        match self {
            R::Send { thread, name } => {
                if input::query_first(call.query, "wait").is_some() {
                    return Err(ApiError::invalid_body("`?wait` is not served: wait for the answer with view=updates from the receipt's offset"));
                }
                let body = input::json(call.body, settings.limits.max_body_bytes)?;
                let send = bodies::FlueSend::parse(&body)?;
                send_message(t, thread, name, send, crate::thread::Sender::of(grant, call), settings, now, effects)
            }
            R::Abort { name, .. } => {
                if !t.conversation().served_by(name)? {
                    return Err(ApiError::thread_not_found());
                }
                // The queue first: a cancelled run must not hand the thread on.
                let dropped = t.edit_queue(gate.admitted()?, crate::thread::QueueEdit::Clear, now)?;
                let cancelled = t.cancel_run(gate.admitted()?, settings, now, false, effects)?;
                Ok(Answer::json(200, &serde_json::json!({ "aborted": dropped || cancelled.is_some() })))
            }
            R::Agent { thread, name } => {
                // A name that does not serve the thread is no such stream.
                if !t.conversation().served_by(name)? {
                    return Err(ApiError::thread_not_found());
                }
                read(t, thread, call, settings, true)
            }
            R::View { thread } => read(t, thread, call, settings, false),
            R::Run { run, .. } => {
                let answer = views::read_versioned(t, Some(run), call.query, call.random, settings, Some(views::RUN_EVENT_VERSION))?;
                Ok(run_etag(answer, call))
            }
            R::Attachment { name, file, .. } => {
                if !t.conversation().served_by(name)? {
                    return Err(ApiError::file_not_found());
                }
                super::file_routes::read(t, file, call)
            }
        }
    }
}

/// A catch-up read of a run carries an `ETag`, as the conversation's do:
/// the offset asked for and the one the answer ends at determine its bytes,
/// so a read repeated with `If-None-Match` while nothing was stored gets 304
/// without a body. A live read is left as it is.
fn run_etag(answer: Answer, call: &Call) -> Answer {
    use crate::streams::wire;
    let Answer::Reply(reply) = answer else { return answer };
    let next = reply.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(wire::NEXT_OFFSET)).map(|(_, v)| v.clone());
    let (Some(next), 200) = (next, reply.status) else { return Answer::Reply(reply) };
    let from = input::query_all(call.query, "offset").join(",");
    let tail = input::query_first(call.query, "tail").unwrap_or_default();
    let tag = history::etag("run", &format!("{from}:{tail}"), &next);
    if let Some(mut r) = history::not_modified(&tag, (call.header)("if-none-match").as_deref(), &next) {
        // Up to date only if the answer it stands for was.
        if !reply.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(wire::UP_TO_DATE)) {
            r.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(wire::UP_TO_DATE));
        }
        return Answer::Reply(r);
    }
    Answer::Reply(reply.header("etag", tag))
}

/// Which conversation view a query asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    History,
    Updates,
}

impl View {
    /// `view`, defaulting to `history` where a plain GET is one (Flue's
    /// agent route).
    pub fn parse(raw: Option<&str>, history_by_default: bool) -> Result<Option<View>, ApiError> {
        match raw {
            None if history_by_default => Ok(Some(View::History)),
            None => Ok(None),
            Some("history") => Ok(Some(View::History)),
            Some("updates") => Ok(Some(View::Updates)),
            Some(_) => Err(ApiError::invalid_view("`view` is `history` or `updates`")),
        }
    }
}

/// How the Worker relays a live `view=updates` read (`None`: not one).
pub fn plan_view(
    conversation: &str,
    query: &[(String, String)],
    now: i64,
    history_by_default: bool,
) -> Result<Option<Plan>, ApiError> {
    let q = |name: &str| input::query_first(query, name);
    if View::parse(q("view").as_deref(), history_by_default)? != Some(View::Updates) {
        return Ok(None);
    }
    // The object checks the offset against its log before following; a
    // malformed one never gets this far.
    let Some((base, chars)) = q("offset").as_deref().and_then(stream::split_offset).map(|(b, c)| (b.to_owned(), c)) else {
        return Ok(None);
    };
    let seq = crate::streams::offset::Offset::parse(&base).map_or(0, |o| o.lo);
    let resume = Resume { seq, chars };
    let cursor = q("cursor");
    Ok(match q("live").as_deref() {
        Some("sse") => {
            let updates = stream::Updates::sse(conversation.to_owned(), resume, cursor, now);
            Some(Plan::new(Box::new(Relay::new(updates)), crate::wire::sse::headers()))
        }
        Some("long-poll") => {
            let updates = stream::Updates::long_poll(conversation.to_owned(), resume, cursor);
            Some(Plan::new(Box::new(Relay::new(updates)), Vec::new()).one_shot())
        }
        _ => None,
    })
}

/// A conversation view of the thread: the history snapshot, a catch-up
/// `updates` page, or a live `updates` read's subscription. History and
/// updates refuse `tail`: a suffix of the log cannot be projected.
pub fn read<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    conversation: &str,
    call: &Call,
    settings: &Settings,
    history_by_default: bool,
) -> Result<Answer, ApiError> {
    let q = |name: &str| input::query_first(call.query, name);
    let view = View::parse(q("view").as_deref(), history_by_default)?.ok_or_else(|| ApiError::invalid_view("no view"))?;
    if q("tail").is_some() {
        return Err(ApiError::tail_not_supported());
    }
    let live = q("live");
    let offset = input::query_all(call.query, "offset");
    let gen = t.journal_mut().generation(|| call.random)?;
    let if_none_match = (call.header)("if-none-match");
    match view {
        View::History => {
            if live.is_some() {
                return Err(ApiError::invalid_live("view=history is one snapshot; follow it with view=updates"));
            }
            if !offset.is_empty() {
                return Err(ApiError::invalid_offset("view=history is the whole conversation; it takes no offset"));
            }
            history::history(t, conversation, gen, if_none_match.as_deref()).map(Answer::Reply)
        }
        View::Updates => {
            let [from] = offset.as_slice() else {
                return Err(match offset.len() {
                    0 => ApiError::offset_required("view=updates resumes after an offset: pass ?offset="),
                    _ => ApiError::invalid_offset("one `offset`"),
                });
            };
            let resume = history::resume(from, gen, t.conversation().last_seq()).map_err(|e| {
                // Flue's route answers an offset it no longer serves with
                // 416, which its client recovers from (400 would end it).
                let well_formed = stream::split_offset(from)
                    .is_some_and(|(b, _)| b == "-1" || crate::streams::offset::Offset::parse(b).is_some());
                let gone = e.code == "stale_offset" || (e.code == "invalid_offset" && well_formed);
                if history_by_default && gone {
                    ApiError::offset_gone()
                } else {
                    e
                }
            })?;
            match live.as_deref() {
                None => history::updates(t, conversation, gen, from, resume, if_none_match.as_deref()).map(Answer::Reply),
                // The projection is rebuilt from the log's start: the
                // relay drops what lies up to the reader's offset.
                Some("sse" | "long-poll") => Ok(t.follow(Follow::log(), 0, settings)?),
                Some(_) => Err(ApiError::invalid_live("`live` is `long-poll` or `sse`")),
            }
        }
    }
}

/// `POST /agents/:name/:id`: the message goes to the thread as any send
/// does (the same access, limits, files and budget), in `queue` mode: Flue
/// never refuses a busy conversation, it answers later. Answers Flue's
/// admission receipt, 202 `{streamUrl, offset, submissionId, uid}`: the
/// submission is the run, the offset the stream's head before it, so a
/// reader from there sees the whole exchange.
#[allow(clippy::too_many_arguments)]
fn send_message<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    thread: &str,
    name: &str,
    send: bodies::FlueSend,
    who: crate::thread::Sender,
    settings: &Settings,
    now: i64,
    effects: &mut Vec<Effect>,
) -> Result<Answer, ApiError> {
    use crate::thread::{Given, Seen, Sent};
    let gen = t.journal_mut().generation(|| who.random)?;
    // The incarnation, as history's `incarnation` writes it.
    let uid = format!("{gen:016}");
    let exists = t.conversation().last_seq() > 0;
    match &send.uid {
        Some(None) if exists => return Err(ApiError::agent_instance_exists(&uid)),
        Some(Some(u)) if *u != uid || !exists => return Err(ApiError::agent_instance_not_found()),
        _ => {}
    }
    if exists && !t.conversation().served_by(name)? {
        return Err(ApiError::thread_not_found());
    }
    let stream_url = format!("{}/agents/{name}/{thread}", who.origin);
    let receipt = |submission: &str, offset: String, deduplicated: bool| {
        let body = Receipt { stream_url: &stream_url, offset: &offset, submission_id: submission, uid: &uid, deduplicated };
        let reply = crate::wire::reply::Reply::json(202, &body)
            .header("location", stream_url.clone())
            .header(crate::streams::wire::NEXT_OFFSET, offset);
        Answer::Reply(reply)
    };
    let mut given = Given::default();
    if let Some(id) = &send.message_id {
        let run = match t.message_run(id) {
            Ok(Seen::New(run)) => run,
            Ok(Seen::Active(run)) => return Ok(receipt(&run, "-1".into(), true)),
            // Sent before (answered, or waiting in the queue): the same receipt.
            Err(Error::MessageAlreadySent { .. }) => {
                return Ok(receipt(&crate::wire::ids::client_message_run(thread, id), "-1".into(), true))
            }
            Err(e) => return Err(e.into()),
        };
        given.ids = Some((id.clone(), run));
    }
    let head = views::offset(gen, t.conversation().last_seq());
    let agent = (name != crate::agent::personas::DEFAULT).then_some(name);
    let body = serde_json::to_value(Submit { message: &send.text, attachments: &send.attachments, mode: "queue", agent })
        .expect("a send serialises");
    let given_run = given.ids.as_ref().map(|(_, run)| run.clone());
    let submission = match t.send(&body, given, who, settings, now, effects)? {
        Sent::Run { run_id, .. } => run_id,
        Sent::Queued(q) => q.run_id.or(given_run).unwrap_or(q.message_id),
        Sent::Reserved(body) => return Ok(Answer::json(200, &body)),
    };
    Ok(receipt(&submission, head, false))
}

/// A submission's receipt (`202`): where its stream is read, from where,
/// the submission's id, the stream's instance, and whether the message was
/// sent before.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Receipt<'a> {
    stream_url: &'a str,
    offset: &'a str,
    submission_id: &'a str,
    uid: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deduplicated: bool,
}

/// A submission as the thread's send takes it: queued behind the run
/// holding the thread, as the agent it names (none for `default`).
#[derive(serde::Serialize)]
struct Submit<'a> {
    message: &'a str,
    attachments: &'a [serde_json::Value],
    mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
}

