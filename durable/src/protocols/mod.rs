//! The wire protocols, each in its own folder, and the one place they are
//! registered: the [`protocols!`] line at the bottom of this file. A
//! protocol's folder holds its routes and what they do (`mod.rs`), its
//! request bodies (`bodies.rs`), the mapping from the thread's log to its
//! frames (`mapping.rs`), its live framer (`stream.rs`) and its history view
//! (`history.rs`), over the thread's protocol-agnostic operations
//! (`thread`) and the relay (`feed`). Removing a folder and its name in
//! that line leaves everything else as it was, with one dependency between
//! protocols, one way: `flue` reads with `durable_streams`' offsets, run
//! reads and framers (Flue's wire is built on Durable Streams), and `inbox`
//! serves its changes as a Durable Stream with `durable_streams`' views. Flue's
//! conversation view on Durable Streams' `/v1/threads` path is handed to it
//! here, by the query ([`refine`]), so `durable_streams` names no other
//! protocol.
//!
//! A protocol is a route type implementing [`Protocol`]: its table of
//! paths ([`route::Spec`](crate::wire::route::Spec)), where each route's requests
//! go ([`Target`]), what each does as access sees it, and how it is served.
//! The registry makes one [`Route`] of them, which the Worker forwards to an
//! object with the request (`forward`), so the object serves exactly the
//! route the Worker matched.

mod error;

use crate::access::{Access, Caller};
use crate::directory;
use crate::effect::Effect;
use crate::feed::Plan;
use crate::input::Head;
use crate::settings::{Limits, Settings};
use crate::storage::store::Store;
use crate::thread::fork::Window;
use crate::thread::{Admitted, Answer, Call, Outcome, Sink, Thread};
use crate::wire::error::ApiError;
use crate::wire::forward::{self, Body, Object, ObjectCall};
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a route's requests go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The thread the route names (from its path).
    Thread,
    /// The thread its body names: the Worker reads the body first
    /// ([`Protocol::address`]).
    Body,
    /// No thread: the Worker answers it ([`Protocol::at_worker`]).
    Worker,
}

/// What the Worker does with a route that goes to no thread.
pub enum AtWorker {
    /// Answer this.
    Reply(Reply),
    /// Ask the caller's directory, and answer with
    /// [`Protocol::directory_reply`].
    Directory(directory::Op),
    /// A standalone Durable Stream's object answers (`/v1/stream/*`): the
    /// request goes to it as it is, or, for a live read, asks it for a
    /// reader's socket relayed with `live`.
    Stream { name: String, context: String, live: Option<Plan> },
    /// Follow the caller's directory (`op`, a [`directory::Op::Follow`]):
    /// it answers with a reader's socket, relayed with `plan`.
    Follow { op: directory::Op, plan: Plan },
    /// Ask the deployer's directory (the webhooks' dead letters), and
    /// answer with [`Protocol::directory_reply`].
    Deployer(directory::Op),
}

/// How a request was let in before its route runs ([`handle`]): admitted
/// by the route's declared access rule, or, on a decision route
/// ([`Access::Decide`]), left for the decision to admit against the request
/// it names (the thread's decide operations do, before anything changes).
pub enum Gate {
    Admitted(Admitted),
    ByRequest,
}

impl Gate {
    /// The admission a route's operations take. A decision route has none
    /// of its own: asking for one there is the route's bug, answered 503.
    pub fn admitted(&self) -> Result<&Admitted, ApiError> {
        match self {
            Gate::Admitted(a) => Ok(a),
            Gate::ByRequest => Err(ApiError::unavailable("a decision route is admitted for the request it names")),
        }
    }
}

/// How much body a route reads (its cap: `Limits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    None,
    /// A JSON body of at most `MAX_BODY_BYTES`.
    Json,
    /// A publish batch of at most `MAX_BATCH_BYTES`.
    Batch,
    /// A JSON send that may carry files inline at these slots: the Worker
    /// reads it as it streams, decoding the files out
    /// ([`files::scan`](crate::files::scan)); the rest is at most
    /// `MAX_BODY_BYTES`, each file at most `MAX_FILE_BYTES`.
    Send(crate::files::scan::Slots),
    /// Files: raw bytes or `multipart/form-data` ([`files::read`](crate::files::read)).
    Upload,
}

impl BodyKind {
    /// The most body bytes a route of this kind reads: the shell refuses a
    /// larger declared length before reading, and stops a chunked body at
    /// it. For a send and an upload, the JSON around the files (their own
    /// bounds are the files').
    pub fn limit(self, limits: &Limits) -> usize {
        match self {
            // Room for `{}` (what a `fetch` with a JSON body sends), checked
            // by [`crate::input::no_body`].
            BodyKind::None => crate::input::NO_BODY_BYTES,
            BodyKind::Upload => 0,
            BodyKind::Json | BodyKind::Send(_) => limits.max_body_bytes,
            BodyKind::Batch => limits.max_batch_bytes,
        }
    }
}

/// One protocol: its routes, and how each is served.
pub trait Protocol: Sized + 'static {
    /// The protocol's routes, in matching order.
    const ROUTES: &'static [Spec<Self>];

    /// Where the route's requests go.
    fn target(&self) -> Target {
        Target::Thread
    }
    /// The thread it names (empty until a body-addressed route is addressed).
    fn thread(&self) -> &str;
    /// What it does, as access sees it.
    fn access(&self) -> Access;
    /// Whether a request counts in its caller's sends per minute
    /// (`RUNS_PER_MINUTE`): every send, and what makes a thread as a send
    /// does (a fork).
    fn counts_as_send(&self) -> bool {
        self.access() == Access::Send
    }
    /// What it answers for an id it does not know, and a caller it may not
    /// serve on a thread that exists: the same, so existence does not leak.
    fn not_found(&self) -> ApiError {
        ApiError::thread_not_found()
    }
    /// How much body it reads.
    fn body(&self) -> BodyKind {
        BodyKind::None
    }
    /// A body-addressed route ([`Target::Body`]) learns its thread from the
    /// JSON body (a new thread's id from `new_id`).
    fn address(&mut self, _body: &Value, _new_id: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
        Ok(())
    }
    /// A send's attachments, translated into threadline's shape
    /// ([`files::spec`](crate::files::spec)): the Worker checks the files
    /// its body carries inline before anything is stored.
    fn attachments(&self, _body: &Value) -> Result<Vec<Value>, ApiError> {
        Ok(Vec::new())
    }
    /// A route whose thread answers with a stored file to stream
    /// ([`files::serve::FilePlan`](crate::files::serve::FilePlan)) when it may be read.
    fn serves_file(&self) -> bool {
        false
    }
    /// Serves the route on its thread, the request let in by `gate`.
    fn serve<S: Store, K: Sink>(
        &self,
        t: &mut Thread<S, K>,
        call: &Call,
        gate: &Gate,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError>;
    /// The answer to a request its route refused (admission or serving):
    /// the refusal itself, unless the route answers some refusals its own
    /// way (the AI SDK's resume answers a thread that is not the caller's
    /// as one with no run: 204).
    fn refused<S: Store, K: Sink>(&self, e: ApiError, _t: &Thread<S, K>) -> Result<Answer, ApiError> {
        Err(e)
    }
    /// How the Worker relays the route's stream, from its query and
    /// `Last-Event-ID`; `None` for a route that does not stream.
    fn plan(
        &self,
        _query: &[(String, String)],
        _last_event_id: Option<&str>,
        _now: i64,
    ) -> Result<Option<Plan>, ApiError> {
        Ok(None)
    }
    /// A send that answers with the run it started: from the thread's
    /// answer, the stream the Worker follows it with and how to relay it.
    fn after_send(&self, _reply: &Reply) -> Option<(Plan, Self)> {
        None
    }
    /// A `HEAD` on a streaming route: the stream's headers, without one.
    fn head(&self) -> Option<Reply> {
        None
    }
    /// A route of no thread ([`Target::Worker`]), for `caller`.
    fn at_worker(&self, _caller: &Caller, _head: &Head, _settings: &Settings, _now: i64) -> Result<AtWorker, ApiError> {
        Err(ApiError::not_found_route("this route is answered on its thread"))
    }
    /// Who calls the route, when it has its own rule (a standalone stream's
    /// `STREAMS_AUTH`); `None`: the Worker's authentication, with stream
    /// tokens on [`Access::Reader`] routes.
    fn identify(&self, _head: &Head, _settings: &Settings, _now: i64) -> Option<Result<Caller, ApiError>> {
        None
    }
    /// The headers every answer of the route carries, when they are the
    /// route's own rather than the Worker's (`ALLOWED_ORIGINS`' CORS).
    fn own_headers(&self) -> Option<&'static [(&'static str, &'static str)]> {
        None
    }
    /// The answer to a route the caller's directory answered.
    fn directory_reply(&self, _body: &[u8]) -> Result<Reply, ApiError> {
        Err(ApiError::unavailable("no directory answer is expected"))
    }
    /// Which of the conversation's turns the route shows, for a request
    /// with `query`: on a fork, the source's shared turns among them are
    /// read first ([`Thread::share`]).
    fn shows_turns(&self, _query: &[(String, String)]) -> Option<Window> {
        None
    }
}

/// What the Worker forwards to a thread's object with a request: who is
/// calling, and the route it matched (`forward`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Context {
    pub caller: Caller,
    pub route: Route,
    /// A send's caller's budget (`QUOTA`), from their directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::agent::quota::Budget>,
    /// The files the Worker read from the request and checked, by the index
    /// its body's markers name them with (`None`: not this send's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Option<crate::files::NewFile>>,
    /// Check the request and reserve its files only: the Worker stores
    /// their bytes, then makes the request again without it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserve: bool,
    /// A held stream's socket, claimed with its ticket when its run ended
    /// (`thread::Delivery`): the request was admitted when the stream
    /// opened; the ticket is the Worker's proof that it holds that stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// With a claim, the claiming relay's feed state (`Feed::save`): a
    /// socket's stream moving to the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// Most feed state a relay hands to the object with a claim (it travels in
/// a header): a larger one stays with its relay.
pub const MAX_CLAIM_STATE: usize = 4 * 1024;

impl Route {
    /// Whether the route reads the object's instance facts (the debug
    /// stats): the shell gathers them for it alone.
    pub fn reads_instance(&self) -> bool {
        matches!(self, Route::InstanceAi(instance_ai::Route::Stats { .. }))
    }
}

/// The call that claims a moving stream opened with `call`, by its ticket,
/// with the claiming relay's feed state when it gives one.
pub fn claim_call(call: &ObjectCall, ticket: &str, state: Option<String>) -> Option<ObjectCall> {
    let mut context: Context = forward::decode(Some(&call.context))?;
    context.claim = Some(ticket.to_owned());
    context.state = state.filter(|s| s.len() <= MAX_CLAIM_STATE);
    Some(ObjectCall { context: forward::encode(&context), socket: true, body: forward::Body::None, ..call.clone() })
}

/// The feed of a stream moving from its relay to the object: the route's
/// plan (as the Worker made it for the same request), its feed taking over
/// the relay's `state`. `None` when the route has no stream or the feed
/// refuses the state.
pub fn held_plan(
    route: &Route,
    query: &[(String, String)],
    last_event_id: Option<&str>,
    state: &str,
    now: i64,
) -> Option<Plan> {
    let mut plan = route.plan(query, last_event_id, now).ok()??;
    (!plan.one_shot && plan.feed.restore(state)).then_some(plan)
}

macro_rules! protocols {
    ($($name:ident => $variant:ident),* $(,)?) => {
        $(pub mod $name;)*

        /// A route of any protocol.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "protocol", content = "route", rename_all = "snake_case")]
        pub enum Route {
            $($variant($name::Route),)*
        }

        /// The route `method` + `path` names, of the first protocol whose
        /// table has the path: 404 `not_found` for no protocol's, 405 for a
        /// known path with another method, 400 for a malformed id. With it,
        /// the pattern the path matched (`http.route` in traces and logs),
        /// when one did.
        pub fn parse(method: &str, path: &str) -> (Result<Route, ApiError>, Option<&'static str>) {
            $(if let Some(found) = crate::wire::route::find($name::Route::ROUTES, method, path) {
                return (found.route.map(Route::$variant), Some(found.pattern));
            })*
            (Err(ApiError::not_found_route(format!("no route for {path}"))), None)
        }

        /// Every route served: `(methods, path pattern)`, in matching order.
        pub fn table() -> Vec<(&'static [&'static str], &'static str)> {
            let mut out = Vec::new();
            $(out.extend($name::Route::ROUTES.iter().map(|s| (s.methods, s.path)));)*
            out
        }

        impl Route {
            pub fn target(&self) -> Target { match self { $(Route::$variant(r) => r.target(),)* } }
            pub fn thread(&self) -> &str { match self { $(Route::$variant(r) => r.thread(),)* } }
            pub fn access(&self) -> Access { match self { $(Route::$variant(r) => r.access(),)* } }
            pub fn counts_as_send(&self) -> bool { match self { $(Route::$variant(r) => r.counts_as_send(),)* } }
            pub fn not_found(&self) -> ApiError { match self { $(Route::$variant(r) => r.not_found(),)* } }
            pub fn body(&self) -> BodyKind { match self { $(Route::$variant(r) => r.body(),)* } }
            pub fn address(&mut self, body: &Value, new_id: &dyn Fn(&str) -> String) -> Result<(), ApiError> {
                match self { $(Route::$variant(r) => r.address(body, new_id),)* }
            }
            pub fn plan(&self, query: &[(String, String)], last_event_id: Option<&str>, now: i64) -> Result<Option<Plan>, ApiError> {
                match self { $(Route::$variant(r) => r.plan(query, last_event_id, now),)* }
            }
            pub fn after_send(&self, reply: &Reply) -> Option<(Plan, Route)> {
                match self { $(Route::$variant(r) => r.after_send(reply).map(|(p, r)| (p, Route::$variant(r))),)* }
            }
            pub fn head(&self) -> Option<Reply> { match self { $(Route::$variant(r) => r.head(),)* } }
            pub fn at_worker(&self, caller: &Caller, head: &Head, settings: &Settings, now: i64) -> Result<AtWorker, ApiError> {
                match self { $(Route::$variant(r) => r.at_worker(caller, head, settings, now),)* }
            }
            pub fn identify(&self, head: &Head, settings: &Settings, now: i64) -> Option<Result<Caller, ApiError>> {
                match self { $(Route::$variant(r) => r.identify(head, settings, now),)* }
            }
            pub fn own_headers(&self) -> Option<&'static [(&'static str, &'static str)]> {
                match self { $(Route::$variant(r) => r.own_headers(),)* }
            }
            pub fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
                match self { $(Route::$variant(r) => r.directory_reply(body),)* }
            }
            pub fn attachments(&self, body: &Value) -> Result<Vec<Value>, ApiError> {
                match self { $(Route::$variant(r) => r.attachments(body),)* }
            }
            pub fn serves_file(&self) -> bool { match self { $(Route::$variant(r) => r.serves_file(),)* } }
            pub fn shows_turns(&self, query: &[(String, String)]) -> Option<Window> {
                match self { $(Route::$variant(r) => r.shows_turns(query),)* }
            }
            fn refused<S: Store, K: Sink>(&self, e: ApiError, t: &Thread<S, K>) -> Result<Answer, ApiError> {
                match self { $(Route::$variant(r) => r.refused(e, t),)* }
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
                match self { $(Route::$variant(r) => r.serve(t, call, gate, settings, now, effects),)* }
            }
        }
    };
}

/// A call to the thread of `ctx`'s route, carrying `ctx` (a subscriber's
/// socket is asked with `GET`): the Worker's, and an object's own.
pub fn thread_call(ctx: Context, body: Body, socket: bool) -> ObjectCall {
    let object = Object::Thread(ctx.route.thread().to_owned());
    let method = if socket { "GET" } else { "POST" };
    ObjectCall { object, method, context: forward::encode(&ctx), body, socket, path: "/" }
}

/// An object's own call to the thread `route` names, for `caller`, with
/// `body` (a fork's offer to its new thread).
pub fn object_call(route: Route, caller: Caller, body: Vec<u8>) -> ObjectCall {
    let context = Context { caller, route, budget: None, files: Vec::new(), reserve: false, claim: None, state: None };
    thread_call(context, Body::Bytes(body), false)
}

/// The route that serves what the query asks, when that is another
/// protocol's than the path's: `GET /v1/threads/:threadId?view=…` is Flue's
/// conversation view on Durable Streams' path. Decided here, in the
/// registry, so neither protocol names the other.
pub fn refine(route: Route, query: &[(String, String)]) -> Route {
    match route {
        Route::DurableStreams(durable_streams::Route::Thread { thread })
            if crate::input::query_first(query, "view").is_some() =>
        {
            Route::Flue(flue::Route::View { thread })
        }
        other => other,
    }
}

/// Serves one request on its thread. Refusals are answers too: nothing
/// here fails. Whatever the request did may have started a queued message:
/// its launch is among the effects.
///
/// Invariant: every request is admitted here, once, by the access rule its
/// route declares ([`Protocol::access`], a required method: a route without
/// one does not compile), before its route runs; a decision route is
/// admitted by its decision, for the request it names.
pub fn handle<S: Store, K: Sink>(
    t: &mut Thread<S, K>,
    route: &Route,
    call: &Call,
    settings: &Settings,
    now: i64,
) -> Outcome {
    t.journal_mut().set_thread_id(route.thread());
    let mut effects = Vec::new();
    let answer = match route.body() {
        BodyKind::None => crate::input::no_body(call.body),
        _ => Ok(()),
    }
    .and_then(|()| match route.access() {
        Access::Decide => Ok(Gate::ByRequest),
        access => Ok(Gate::Admitted(t.admit(access, route.not_found(), call.caller, None)?)),
    })
    .and_then(|gate| {
        // On a fork, the source's shared turns come first: asked for, or
        // brought by this second serving.
        if let Some(window) = route.shows_turns(call.query) {
            if let Some(read) = t.share(call, window)? {
                let read = instance_ai::Route::SharedTurns {
                    thread: read.thread_id,
                    run: read.run_id,
                    start: read.start,
                    end: read.end,
                };
                return Ok(Answer::Consult(object_call(Route::InstanceAi(read), Caller::Nobody, Vec::new())));
            }
        }
        route.serve(t, call, &gate, settings, now, &mut effects)
    })
    .or_else(|e| route.refused(e, t))
    .unwrap_or_else(|e| Answer::Reply(Reply::error(&e)));
    // A stream opened while a run keeps the object awake is held by it,
    // framed by the feed the Worker's relay would have run (the route's
    // plan, from the same request); one that cannot move (a long-poll, a
    // protocol whose feed does not carry its state over) stays a socket.
    let answer = match answer {
        Answer::Follow { mut follow, after } => {
            let last_event_id = (call.header)("last-event-id");
            match route.plan(call.query, last_event_id.as_deref(), now) {
                Ok(Some(plan)) if plan.one_shot || !plan.feed.moves() => {
                    follow.stays = true;
                    Answer::Follow { follow, after }
                }
                Ok(Some(plan)) if t.holds_streams(now) => Answer::Hold { follow, after, plan },
                _ => Answer::Follow { follow, after },
            }
        }
        answer => answer,
    };
    t.unshare();
    effects.extend(t.launch().started(settings, now));
    Outcome { answer, effects }
}

protocols! { inbox => Inbox, instance_ai => InstanceAi, agora => Agora, durable_streams => DurableStreams, flue => Flue, ai_sdk => AiSdk, ag_ui => AgUi, file_routes => Files, webhooks => Webhooks }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_view_on_a_streams_path_is_flues() {
        let query = |q: &str| crate::input::query_pairs(q);
        let (parsed, pattern) = parse("GET", "/v1/threads/t1");
        let route = parsed.unwrap();
        assert_eq!(pattern, Some("/v1/threads/:threadId"));
        assert_eq!(
            refine(route.clone(), &query("view=history")),
            Route::Flue(flue::Route::View { thread: "t1".into() })
        );
        assert_eq!(refine(route.clone(), &query("offset=-1")), route, "a plain read stays Durable Streams'");
        // The view is read as the path's route is: by a reader of the thread.
        assert_eq!(refine(route.clone(), &query("view=updates")).access(), route.access());
    }
}
