//! What the stateless Worker decides, as one exchange per request: where
//! the request goes, who is calling, which browser origins may read the
//! answer. The Worker's shell asks [`Exchange`] what to do next and carries
//! out each [`Step`] (answer, read the body, call an object, relay a
//! socket), handing back what it got; it never looks at a path, a route or
//! a caller itself.
//!
//! A request's way through: its route is found (`protocols::parse`); its
//! caller identified (401 before an unknown path is refused, so a caller
//! without credentials learns nothing about the surface; publishing goes
//! without); a route whose thread its body names has the body read first;
//! a send is counted against the caller's per-minute window (their
//! directory); then the route's object is called with what the Worker
//! decided ([`forward`](crate::wire::forward)), its stream relayed, or, for a
//! send that answers with its run, followed by that run's stream.

use crate::access::{Access, Caller};
use crate::agent::quota::Budget;
use crate::auth;
use crate::directory::{self, Op};
use crate::feed::Plan;
use crate::files::read::{Form, Read};
use crate::files::spec::{self, CheckedFile};
use crate::files::{self, NewFile};
use crate::input::{self, Head};
use crate::protocols::{self, AtWorker, BodyKind, Context, Route, Target};
use crate::settings::Settings;
use crate::wire::error::ApiError;
use crate::wire::forward::{self, Body, Object, ObjectCall};
use crate::wire::reply::Reply;

/// What the shell does next.
pub enum Step {
    /// Answer the client with this.
    Reply(Reply),
    /// Read the client's body, at most `limit` bytes, and hand it to
    /// [`Exchange::body`].
    ReadBody { limit: usize },
    /// Make this call and hand its answer to [`Exchange::answer`].
    Call(ObjectCall),
    /// Answer the client with the last call's answer: its status, its
    /// headers and the body read from it.
    Respond,
    /// Make this call; its answer is the client's.
    Pass(ObjectCall),
    /// Make this call (a socket) and relay it to the client with the plan.
    Relay(ObjectCall, Plan),
    /// Read the client's body as files ([`files::read::read`]) and hand
    /// what came to [`Exchange::files_read`].
    ReadFiles(Form),
    /// Store these files' bytes in the bucket (`FILES`), then tell
    /// [`Exchange::stored`] how it went.
    Store(Vec<Put>),
    /// Answer with a stored file: its bytes from the bucket, as the plan
    /// says (a range, its headers).
    File(files::serve::FilePlan),
}

/// One file's bytes to store, under its key.
#[derive(Debug)]
pub struct Put {
    pub key: String,
    pub bytes: Vec<u8>,
    pub media_type: String,
    /// Hex SHA-256 of `bytes` (the bucket checks it on the way in).
    pub sha256: String,
}

/// What every answer carries, whatever its step: the headers the Worker
/// adds, and whether the body is dropped (`HEAD`).
#[derive(Clone, Debug, Default)]
pub struct Finish {
    pub head_only: bool,
    /// The pattern of the route the path matched (`http.route` in traces
    /// and logs), when one did.
    pub route: Option<&'static str>,
    pub headers: Vec<(&'static str, String)>,
}

/// What the exchange waits for.
enum Waiting {
    Nothing,
    /// The client's body, to learn the route's thread.
    Body(Route, Caller),
    /// The directory's answer to a send's admission.
    Admission(Route, Caller, Body),
    /// The thread's answer to a send that may be followed by its run.
    Send(Route, Caller),
    /// The caller's directory's answer.
    Directory(Route),
    /// The client's body read as files, to learn what it carries.
    Files(Route, Caller),
    /// The thread's check of a request whose files the Worker holds: it
    /// reserves them (the request goes again once they are stored).
    Reserve(Route, Caller, Body, Option<Budget>),
    /// The files' bytes being stored; the thread's reservation.
    Stored(Route, Caller, Body, Option<Budget>, serde_json::Value),
    /// The thread's answer to a file read: the plan to stream it by.
    FileRead,
}

/// One request's exchange with the core.
pub struct Exchange<'s> {
    settings: &'s Settings,
    now: i64,
    method: &'static str,
    query: Vec<(String, String)>,
    last_event_id: Option<String>,
    client_ip: Option<String>,
    finish: Finish,
    waiting: Waiting,
    /// The files the request carries, checked, by the index its body's
    /// markers name them with (`None`: not this request's), until stored.
    files: Vec<Option<CheckedFile>>,
    /// Their bytes are in the bucket.
    stored: bool,
    content_type: Option<String>,
    /// A Worker route's query, kept while its body is read.
    worker_body: Option<String>,
}

/// The methods a request may have, as a static name (a call's).
fn method_name(method: &str) -> &'static str {
    const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
    METHODS.into_iter().find(|m| *m == method).unwrap_or("GET")
}

/// What the deployment is told at start-up (logged once): its variables'
/// warnings, and what a protocol refused of its configuration.
pub fn warnings(settings: &Settings) -> Vec<String> {
    let mut out = settings.warnings();
    if let Err(e) = protocols::agora::mount(settings) {
        out.push(format!("{e}; agora's routes stay under /{}", protocols::agora::MOUNT));
    }
    out
}

impl<'s> Exchange<'s> {
    /// Begins the exchange of `head`: the first step.
    pub fn start(head: &Head, settings: &'s Settings, now: i64) -> (Exchange<'s>, Step) {
        let mut x = Exchange {
            settings,
            now,
            method: method_name(head.method),
            query: input::query_pairs(head.query),
            last_event_id: (head.header)("last-event-id"),
            client_ip: (head.header)("cf-connecting-ip"),
            finish: Finish { head_only: head.method == "HEAD", route: None, headers: Vec::new() },
            waiting: Waiting::Nothing,
            files: Vec::new(),
            stored: false,
            content_type: (head.header)("content-type"),
            worker_body: None,
        };
        let step = x.begin(head).unwrap_or_else(|e| Step::Reply(Reply::error(&e)));
        (x, step)
    }

    /// What every answer of this exchange carries.
    pub fn finish(&self) -> &Finish {
        &self.finish
    }

    fn begin(&mut self, head: &Head) -> Result<Step, ApiError> {
        let mount = protocols::agora::mount(self.settings).unwrap_or(protocols::agora::MOUNT);
        let parsed = match head.path {
            ROUTES_PATH if self.settings.debug_routes => Err(ApiError::not_found_route("answered below")),
            _ => match protocols::agora::mounted(head.path, mount) {
                Some(path) => {
                    let (parsed, pattern) = protocols::parse(head.method, &path);
                    self.finish.route = pattern;
                    parsed.map(|r| protocols::refine(r, &self.query))
                }
                None => Err(ApiError::not_found_route(format!("no route for {}", head.path))),
            },
        };
        if let Some(own) = parsed.as_ref().ok().and_then(Route::own_headers) {
            self.finish.headers.extend(own.iter().map(|(k, v)| (*k, (*v).to_owned())));
        } else {
            self.finish.headers.extend(SECURITY_HEADERS.iter().map(|(k, v)| (*k, (*v).to_owned())));
            let allowed = cors((head.header)("origin").as_deref(), self.settings);
            let preflight = head.method == "OPTIONS";
            if let Some(h) = &allowed {
                self.finish.headers.extend(h.iter().cloned());
            }
            if preflight {
                // Answered by the Worker (204 when the origin may call, else
                // 403), never forwarded.
                return Ok(Step::Reply(Reply::new(if allowed.is_some() { 204 } else { 403 })));
            }
        }
        let token = input::query_first(&self.query, "token");
        let authorization = (head.header)("authorization");
        let (route, caller) = match parsed {
            Ok(route) => {
                let caller = match route.identify(head, self.settings, self.now) {
                    Some(own) => own?,
                    None => self.identify(Some(&route), token.as_deref(), authorization.as_deref())?,
                };
                (route, caller)
            }
            Err(e) => {
                // A caller is identified before an unknown path is refused,
                // so without credentials the answer is 401 everywhere; only
                // publishing paths go without.
                if !publishing(head.method, head.path) {
                    self.identify(None, token.as_deref(), authorization.as_deref())?;
                }
                if head.path == ROUTES_PATH && self.settings.debug_routes {
                    return Ok(Step::Reply(route_table(head.method)?));
                }
                return Err(e);
            }
        };
        if let Some(reply) = route.head().filter(|_| self.finish.head_only) {
            return Ok(Step::Reply(reply));
        }
        match route.target() {
            // A body the route reads before it goes anywhere.
            Target::Worker if route.body() == BodyKind::Json && self.worker_body.is_none() => {
                let limit = route.body().limit(&self.settings.limits);
                self.waiting = Waiting::Body(route, caller);
                self.worker_body = Some(head.query.to_owned());
                Ok(Step::ReadBody { limit })
            }
            Target::Worker => {
                let at = route.at_worker(&caller, head, self.settings, self.now)?;
                self.at_worker(route, &caller, at)
            }
            // A body that may carry files is read here, as it streams, its
            // files decoded out and checked before anything is stored.
            Target::Body | Target::Thread if matches!(route.body(), BodyKind::Send(_) | BodyKind::Upload) => {
                let form = self.files_form(&route, head)?;
                self.waiting = Waiting::Files(route, caller);
                Ok(Step::ReadFiles(form))
            }
            Target::Body => {
                let limit = route.body().limit(&self.settings.limits);
                self.waiting = Waiting::Body(route, caller);
                Ok(Step::ReadBody { limit })
            }
            Target::Thread => {
                // The body goes to the object as it arrives, never held here:
                // the object reads it with the route's cap (a declared length
                // over it is refused now, before anything is read).
                let limit = route.body().limit(&self.settings.limits);
                if head.declared_length().is_some_and(|n| n > limit as u64) {
                    return Err(ApiError::body_too_large(limit));
                }
                self.toward_thread(route, caller, Body::Client)
            }
        }
    }

    /// The step of a route the Worker answers ([`AtWorker`]), with or
    /// without the body it read first.
    fn at_worker(&mut self, route: Route, caller: &Caller, at: AtWorker) -> Result<Step, ApiError> {
        let actor = || caller.id().map(str::to_owned).ok_or_else(ApiError::thread_not_found);
        match at {
            AtWorker::Reply(r) => Ok(Step::Reply(r)),
            AtWorker::Stream { name, context, live } => {
                let call = ObjectCall {
                    object: Object::Stream(name),
                    method: self.method,
                    context,
                    body: Body::Client,
                    socket: false,
                    path: "/",
                };
                Ok(match live {
                    // A live read: the object answers with a reader's
                    // socket (or refuses), and the Worker relays it, so
                    // the object can sleep meanwhile.
                    Some(plan) => {
                        Step::Relay(ObjectCall { method: "GET", body: Body::None, socket: true, ..call }, plan)
                    }
                    None => Step::Pass(call),
                })
            }
            AtWorker::Directory(op) => {
                let call = directory_call(&actor()?, &op);
                self.waiting = Waiting::Directory(route);
                Ok(Step::Call(call))
            }
            AtWorker::Deployer(op) => {
                self.waiting = Waiting::Directory(route);
                Ok(Step::Call(deployer_call(&op)))
            }
            // The directory answers with a reader's socket, relayed: it
            // sleeps between changes.
            AtWorker::Follow { op, plan } => {
                Ok(Step::Relay(ObjectCall { method: "GET", socket: true, ..directory_call(&actor()?, &op) }, plan))
            }
        }
    }

    /// How a route's body carries its files: an upload's raw bytes (a
    /// declared length over `MAX_FILE_BYTES` refused before reading) or
    /// form, or a JSON send's slots.
    fn files_form(&self, route: &Route, head: &Head) -> Result<Form, ApiError> {
        let limits = &self.settings.files;
        match route.body() {
            BodyKind::Send(slots) => {
                let rest_limit = self.settings.limits.max_body_bytes;
                let cap = limits.send_body_cap(rest_limit);
                if head.declared_length().is_some_and(|n| n > cap as u64) {
                    return Err(ApiError::body_too_large(cap));
                }
                Ok(Form::Json { slots, rest_limit })
            }
            _ => {
                let name = input::query_first(&self.query, "name");
                let form = Form::upload(self.content_type.as_deref(), name)?;
                let declared = head.declared_length();
                match form {
                    Form::Raw { .. } if declared.is_some_and(|n| n > limits.max_file_bytes as u64) => {
                        Err(ApiError::file_too_large(limits.max_file_bytes))
                    }
                    // The same refusal as a chunked form gets once it passes
                    // the cap (`files::read`).
                    Form::Multipart { .. } if declared.is_some_and(|n| n > limits.multipart_cap() as u64) => {
                        Err(ApiError::body_too_large(limits.multipart_cap()))
                    }
                    form => Ok(form),
                }
            }
        }
    }

    /// The client's body read as files ([`Step::ReadFiles`]), or why it
    /// could not be: an upload's files are checked and reserved; a send's
    /// route learns its thread, its attachments are found and its inline
    /// files checked, then it goes toward its thread as any send.
    pub fn files_read(&mut self, read: Result<Read, ApiError>, new_id: &dyn Fn(&str) -> String) -> Step {
        let Waiting::Files(route, caller) = std::mem::replace(&mut self.waiting, Waiting::Nothing) else {
            return Step::Reply(Reply::error(&ApiError::unavailable("no files were asked for")));
        };
        self.with_files(route, caller, read, new_id).unwrap_or_else(|e| Step::Reply(Reply::error(&e)))
    }

    fn with_files(
        &mut self,
        mut route: Route,
        caller: Caller,
        read: Result<Read, ApiError>,
        new_id: &dyn Fn(&str) -> String,
    ) -> Result<Step, ApiError> {
        let read = read?;
        let limits = &self.settings.files;
        let Some(bytes) = read.json else {
            self.files = spec::admit_uploads(read.files, limits)?.into_iter().map(Some).collect();
            return self.call_thread(route, caller, Body::None, None);
        };
        let json = input::json(&bytes, self.settings.limits.max_body_bytes)?;
        if route.target() == Target::Body {
            route.address(&json, new_id)?;
        }
        let named = serde_json::Value::Array(route.attachments(&json)?);
        let mut specs = spec::parse_list(Some(&named), route.thread(), limits.max_files)?;
        self.files = spec::admit(&mut specs, read.files, limits)?;
        self.toward_thread(route, caller, Body::Bytes(bytes))
    }

    /// The files of this request, as the thread is told of them.
    fn new_files(&self) -> Vec<Option<NewFile>> {
        self.files.iter().map(|f| f.as_ref().map(|a| a.file.clone())).collect()
    }

    /// The bucket stored the files' bytes (or could not: 503).
    pub fn stored(&mut self, result: Result<(), String>) -> Step {
        let Waiting::Stored(route, caller, body, budget, reserved) =
            std::mem::replace(&mut self.waiting, Waiting::Nothing)
        else {
            return Step::Reply(Reply::error(&ApiError::unavailable("nothing was being stored")));
        };
        if let Err(e) = result {
            return Step::Reply(Reply::error(&ApiError::unavailable(format!("the files could not be stored: {e}"))));
        }
        self.stored = true;
        if route.body() == BodyKind::Upload {
            return Step::Reply(Reply::json(201, &serde_json::json!({ "files": reserved["files"] })));
        }
        self.call_thread(route, caller, body, budget).unwrap_or_else(|e| Step::Reply(Reply::error(&e)))
    }

    /// The thread reserved the request's files: store the bytes it does not
    /// keep already.
    fn reserved(&mut self, route: Route, caller: Caller, body: Body, budget: Option<Budget>, answer: &[u8]) -> Step {
        let reserved: serde_json::Value = serde_json::from_slice(answer).unwrap_or_default();
        let mut puts = Vec::new();
        for r in reserved["reserved"].as_array().into_iter().flatten() {
            let (Some(id), Some(key)) = (r["fileId"].as_str(), r["key"].as_str()) else { continue };
            let slot = self.files.iter_mut().find(|f| f.as_ref().is_some_and(|a| a.file.file_id == id));
            let Some(Some(admitted)) = slot else { continue };
            if r["put"].as_bool() != Some(false) && !admitted.bytes.is_empty() {
                let bytes = std::mem::take(&mut admitted.bytes);
                let (media_type, sha256) = (admitted.file.media_type.clone(), admitted.file.sha256.clone());
                puts.push(Put { key: key.to_owned(), bytes, media_type, sha256 });
            }
        }
        self.waiting = Waiting::Stored(route, caller, body, budget, reserved);
        if puts.is_empty() {
            return self.stored(Ok(()));
        }
        Step::Store(puts)
    }

    /// Who is calling. A browser's EventSource cannot send headers, so the
    /// routes that read a thread's streams also take a stream token in
    /// `?token=`: short lived, for one thread, read-only. A full JWT in a URL
    /// is refused: URLs end up in logs, browser history and `Referer`
    /// headers, where a long-lived credential must never be.
    fn identify(
        &self,
        route: Option<&Route>,
        token: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<Caller, ApiError> {
        if route.is_some_and(|r| r.access() == Access::Publish) {
            return Ok(Caller::Nobody);
        }
        if let Some(token) = token {
            if auth::looks_like_jwt(token) {
                return Err(ApiError::token_in_url());
            }
            let route =
                route.filter(|r| r.access().reads_streams() && r.target() == Target::Thread).ok_or_else(|| {
                    ApiError::unauthorized("stream tokens are accepted on the events and run-stream routes only")
                })?;
            let key = self.settings.stream_key.as_deref().ok_or_else(ApiError::stream_tokens_not_configured)?;
            let (actor, expires_at) = auth::verify_stream_token(key, token, route.thread(), self.now)?;
            return Ok(Caller::StreamToken { id: actor.id, expires_at });
        }
        self.settings.auth.authenticate(authorization, self.now).map(Caller::actor)
    }

    /// The client's body, as [`Step::ReadBody`] asked (or why it could not
    /// be read): the route learns its thread from it.
    pub fn body(&mut self, body: Result<Vec<u8>, ApiError>, new_id: &dyn Fn(&str) -> String) -> Step {
        let Waiting::Body(mut route, caller) = std::mem::replace(&mut self.waiting, Waiting::Nothing) else {
            return Step::Reply(Reply::error(&ApiError::unavailable("no body was asked for")));
        };
        let addressed = body.and_then(|bytes| {
            let json = input::json(&bytes, route.body().limit(&self.settings.limits))?;
            route.address(&json, new_id)?;
            Ok(bytes)
        });
        if route.target() == Target::Worker {
            // A Worker route that read its body: on to where it goes now.
            let query = self.worker_body.clone().unwrap_or_default();
            let no_header = |_: &str| None;
            let head = Head { method: self.method, path: "", query: &query, header: &no_header };
            let step = addressed.and_then(|_| {
                let at = route.at_worker(&caller, &head, self.settings, self.now)?;
                self.at_worker(route, &caller, at)
            });
            return step.unwrap_or_else(|e| Step::Reply(Reply::error(&e)));
        }
        match addressed.and_then(|bytes| self.toward_thread(route, caller, Body::Bytes(bytes))) {
            Ok(step) => step,
            Err(e) => Step::Reply(Reply::error(&e)),
        }
    }

    /// A call's answer (its status and body), as [`Step::Call`] asked.
    pub fn answer(&mut self, status: u16, body: Vec<u8>) -> Step {
        let reply = Reply::new(status).body(body);
        let next = match std::mem::replace(&mut self.waiting, Waiting::Nothing) {
            Waiting::Admission(route, caller, body) => {
                let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap_or_default();
                if reply.status == 429 {
                    let retry = answer["retryAfter"].as_i64().unwrap_or(60).max(1);
                    Err(ApiError::rate_limited(self.settings.runs_per_minute, retry))
                } else if reply.status / 100 != 2 {
                    Err(ApiError::unavailable(format!("the directory answered {}", reply.status)))
                } else {
                    // With `QUOTA`, the directory said what the caller used
                    // in the period so far: the thread checks it as the turn
                    // starts.
                    let budget = match (&self.settings.quota, &caller) {
                        (Ok(Some(q)), Caller::Actor { roles, .. }) => Some(Budget {
                            limit: q.limit_for(roles),
                            used: serde_json::from_value(answer["used"].clone()).unwrap_or_default(),
                            since: q.period.window(self.now).0,
                        }),
                        _ => None,
                    };
                    self.call_thread(route, caller, body, budget)
                }
            }
            Waiting::Send(route, caller) => match route.after_send(&reply) {
                Some((plan, follow)) => Ok(Step::Relay(thread_call(follow, caller, Body::None, true, None), plan)),
                None => Ok(Step::Respond),
            },
            // A refusal (a thread the caller has not) is the client's answer.
            Waiting::Directory(_) if reply.status / 100 != 2 => Ok(Step::Respond),
            Waiting::Directory(route) => route.directory_reply(&reply.body).map(Step::Reply),
            // A refusal is the client's answer; nothing was stored.
            Waiting::Reserve(..) if reply.status != 200 => Ok(Step::Respond),
            Waiting::Reserve(route, caller, body, budget) => {
                Ok(self.reserved(route, caller, body, budget, &reply.body))
            }
            Waiting::FileRead if reply.status != 200 => Ok(Step::Respond),
            Waiting::FileRead => serde_json::from_slice(&reply.body)
                .map(Step::File)
                .map_err(|e| ApiError::unavailable(format!("the thread's file plan is unreadable: {e}"))),
            Waiting::Nothing | Waiting::Body(..) | Waiting::Files(..) | Waiting::Stored(..) => {
                Err(ApiError::unavailable("no answer was asked for"))
            }
        };
        next.unwrap_or_else(|e| Step::Reply(Reply::error(&e)))
    }

    /// To the route's thread: sends are counted against the caller's
    /// per-minute limit first, and with `QUOTA` their directory says what
    /// they used in the period so far.
    fn toward_thread(&mut self, route: Route, caller: Caller, body: Body) -> Result<Step, ApiError> {
        let quota = self.settings.quota.as_ref().map_err(|e| ApiError::invalid_quota(e.clone()))?;
        if route.counts_as_send() && (self.settings.runs_per_minute > 0 || quota.is_some()) {
            let key = rate_key(&caller, self.client_ip.as_deref(), self.settings);
            let since = quota.as_ref().map(|q| q.period.window(self.now).0);
            let op = Op::Admit { limit: self.settings.runs_per_minute, now: self.now, since };
            self.waiting = Waiting::Admission(route, caller, body);
            return Ok(Step::Call(directory_call(&key, &op)));
        }
        self.call_thread(route, caller, body, None)
    }

    fn call_thread(
        &mut self,
        route: Route,
        caller: Caller,
        body: Body,
        budget: Option<Budget>,
    ) -> Result<Step, ApiError> {
        if let Some(plan) = route.plan(&self.query, self.last_event_id.as_deref(), self.now)? {
            let plan = match &caller {
                // A stream opened with a stream token ends when it expires.
                Caller::StreamToken { expires_at, .. } => plan.until(*expires_at),
                _ => plan,
            };
            return Ok(Step::Relay(thread_call(route, caller, Body::None, true, None), plan));
        }
        if self.files.iter().any(Option::is_some) && !self.stored {
            // First the thread checks the request and reserves its files;
            // their bytes are stored; then the request goes again.
            let ctx =
                Context { files: self.new_files(), reserve: true, ..context(route.clone(), caller.clone(), budget) };
            self.waiting = Waiting::Reserve(route, caller, body.clone(), budget);
            return Ok(Step::Call(protocols::thread_call(ctx, body, false)));
        }
        if route.serves_file() {
            self.waiting = Waiting::FileRead;
            return Ok(Step::Call(ObjectCall { method: "GET", ..thread_call(route, caller, Body::None, false, None) }));
        }
        let follows = matches!(body, Body::Bytes(_));
        let ctx = Context { files: self.new_files(), ..context(route.clone(), caller.clone(), budget) };
        let call = ObjectCall { method: self.method, ..protocols::thread_call(ctx, body, false) };
        if follows {
            // A send whose body named its thread may answer with a run to
            // follow (`Protocol::after_send`).
            self.waiting = Waiting::Send(route, caller);
            return Ok(Step::Call(call));
        }
        Ok(Step::Pass(call))
    }
}

/// `GET /debug/routes` (only with `DEBUG_ROUTES`): every route the router
/// has, `{routes: [{methods, path}]}` in matching order, this one last, so
/// a test can hold each of them against its access matrix.
pub const ROUTES_PATH: &str = "/debug/routes";

fn route_table(method: &str) -> Result<Reply, ApiError> {
    if method != "GET" && method != "HEAD" {
        return Err(ApiError::method_not_allowed(ROUTES_PATH, "GET"));
    }
    let mut routes: Vec<_> = protocols::table()
        .into_iter()
        .map(|(methods, path)| serde_json::json!({ "methods": methods, "path": path }))
        .collect();
    routes.push(serde_json::json!({ "methods": ["GET"], "path": ROUTES_PATH }));
    Ok(Reply::json(200, &serde_json::json!({ "routes": routes })))
}

/// What a call to a thread's object for `route` carries.
fn context(route: Route, caller: Caller, budget: Option<Budget>) -> Context {
    Context { caller, route, budget, files: Vec::new(), reserve: false, claim: None, state: None }
}

/// A call to a thread's object for `route`.
fn thread_call(route: Route, caller: Caller, body: Body, socket: bool, budget: Option<Budget>) -> ObjectCall {
    protocols::thread_call(context(route, caller, budget), body, socket)
}

/// A call to `actor`'s directory.
pub fn directory_call(actor: &str, op: &Op) -> ObjectCall {
    ObjectCall {
        object: Object::Directory(directory::name(actor)),
        method: "POST",
        context: forward::encode(op),
        body: Body::None,
        socket: false,
        path: "/",
    }
}

/// A call to the deployer's directory (the webhooks' dead letters).
pub fn deployer_call(op: &Op) -> ObjectCall {
    ObjectCall { object: Object::Directory(directory::DEPLOYER.to_owned()), ..directory_call("", op) }
}

/// Publishing paths: an external agent's, whose bearer is its run's token.
fn publishing(method: &str, path: &str) -> bool {
    method == "POST"
        && ((path.starts_with("/instance-ai/threads/") && path.ends_with("/events")) || path.starts_with("/v1/runs/"))
}

/// Whose per-minute send budget a send counts against: the actor's, or,
/// when every caller is the same anonymous actor (`AUTH_MODE=none`), the
/// client address's (`CF-Connecting-IP`, which Cloudflare sets and clients
/// cannot).
pub fn rate_key(caller: &Caller, client_ip: Option<&str>, settings: &Settings) -> String {
    match (&settings.auth, caller.id()) {
        (crate::auth::AuthMode::None, _) | (_, None) => format!("ip:{}", client_ip.unwrap_or("unknown")),
        (_, Some(id)) => id.to_owned(),
    }
}

/// The CORS headers for a request from `origin`, when `ALLOWED_ORIGINS`
/// lets it read the answer (`None`: no CORS headers, the browser refuses).
pub fn cors(origin: Option<&str>, settings: &Settings) -> Option<Vec<(&'static str, String)>> {
    let origin = origin?;
    let allowed = settings.allowed_origins.iter().any(|a| a == "*" || a == origin.trim_end_matches('/'));
    if !allowed {
        return None;
    }
    Some(vec![
        ("access-control-allow-origin", origin.to_owned()),
        ("vary", "Origin".to_owned()),
        ("access-control-allow-methods", "GET, POST, PATCH, DELETE, OPTIONS".to_owned()),
        (
            "access-control-allow-headers",
            "authorization, content-type, last-event-id, producer-id, producer-epoch, producer-seq".to_owned(),
        ),
        (
            "access-control-expose-headers",
            "x-agent-run-id, x-agent-thread-id, retry-after, stream-next-offset, stream-up-to-date, stream-cursor, stream-closed, producer-epoch, producer-seq, producer-expected-seq, producer-received-seq".to_owned(),
        ),
        ("access-control-max-age", "600".to_owned()),
    ])
}

/// Every answer of the Worker carries these.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[("x-content-type-options", "nosniff")];

#[cfg(test)]
mod tests {
    use super::*;

    fn start<'s>(method: &str, path: &str, headers: &[(&str, &str)], s: &'s Settings) -> (Exchange<'s>, Step) {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let headers: Vec<(String, String)> = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let header = move |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Exchange::start(&Head { method, path, query, header: &header }, s, 1)
    }

    fn refusal(step: &Step) -> (u16, String) {
        match step {
            Step::Reply(r) => {
                let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                (r.status, body["error"]["code"].as_str().unwrap_or_default().to_owned())
            }
            _ => (0, String::new()),
        }
    }

    #[test]
    fn the_exchange_names_the_route_pattern_its_path_matched() {
        let s = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        let route = |method, path| start(method, path, &[], &s).0.finish().route;
        assert_eq!(route("GET", "/instance-ai/threads/t1/usage"), Some("/instance-ai/threads/:threadId/usage"));
        assert_eq!(
            route("PUT", "/instance-ai/threads/t1/usage"),
            Some("/instance-ai/threads/:threadId/usage"),
            "a 405 too"
        );
        assert_eq!(route("GET", "/nowhere"), None);
    }

    #[test]
    fn routes_callers_and_stream_tokens() {
        let s = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        let (_, step) = start("POST", "/agent/models", &[], &s);
        assert_eq!(refusal(&step).1, "method_not_allowed");
        let (_, step) = start("POST", "/instance-ai/threads/t/runs/r/events", &[], &s);
        assert!(
            matches!(step, Step::Pass(ObjectCall { ref context, .. }) if forward::decode::<Context>(Some(context)).unwrap().caller == Caller::Nobody)
        );
        let (token, _) = auth::issue_stream_token(s.stream_key.as_deref().unwrap(), "t", "dev", 0, 1_000);
        let (_, events) = start("GET", &format!("/instance-ai/events/t?token={token}"), &[], &s);
        let Step::Relay(call, _) = events else { panic!("a stream") };
        let ctx: Context = forward::decode(Some(&call.context)).unwrap();
        assert!(matches!(ctx.caller, Caller::StreamToken { .. }));
        assert!(call.socket);
        let (_, status) = start("GET", &format!("/instance-ai/threads/t/status?token={token}"), &[], &s);
        assert_eq!(refusal(&status).1, "unauthorized");
        let (_, jwt) = start("GET", "/instance-ai/events/t?token=eyJa.b.c", &[], &s);
        assert_eq!(refusal(&jwt).1, "token_in_url");
    }

    #[test]
    fn unknown_paths_ask_for_credentials_first() {
        let jwt =
            Settings::from_pairs(&[("AUTH_MODE", "jwt"), ("AUTH_JWT_SECRET", "0123456789abcdef0123456789abcdef")]);
        assert_eq!(refusal(&start("GET", "/nope", &[], &jwt).1), (401, "unauthorized".into()));
        let dev = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        assert_eq!(refusal(&start("GET", "/nope", &[], &dev).1), (404, "not_found".into()));
        // The routes the thread's object once had inside are no routes.
        for path in
            ["/agent/threads/t/chat", "/agent/threads/t/tool-call/approve", "/api/chat/t", "/ag-ui/threads/t/run"]
        {
            assert_eq!(refusal(&start("POST", path, &[], &dev).1).0 / 100, 4, "{path}");
            assert_ne!(refusal(&start("POST", path, &[], &dev).1).0, 0, "{path}");
        }
    }

    #[test]
    fn streams_are_off_unless_configured() {
        let at = |s: &Settings, method: &str| refusal(&start(method, "/v1/stream/a", &[], s).1);
        let off = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        assert_eq!(at(&off, "GET").0, 404);
        assert_eq!(at(&off, "OPTIONS").0, 404);
        let open = Settings::from_pairs(&[("STREAMS_AUTH", "none")]);
        assert!(matches!(
            start("PUT", "/v1/stream/a", &[], &open).1,
            Step::Pass(ObjectCall { object: Object::Stream(_), .. })
        ));
        let jwt = Settings::from_pairs(&[("STREAMS_AUTH", "jwt"), ("AUTH_MODE", "dev")]);
        assert_eq!(at(&jwt, "GET").1, "role_required", "dev's actor lacks `streams`");
        let custom = Settings::from_pairs(&[("STREAMS_AUTH", "jwt"), ("STREAMS_ROLE", "dev"), ("AUTH_MODE", "dev")]);
        assert!(matches!(start("GET", "/v1/stream/a", &[], &custom).1, Step::Pass(_)));
        assert_eq!(at(&Settings::from_pairs(&[("STREAMS_AUTH", "yes")]), "GET").0, 503);
    }

    #[test]
    fn anonymous_callers_are_counted_by_address() {
        let none = Settings::from_pairs(&[("AUTH_MODE", "none")]);
        let anon = Caller::Actor { id: "anonymous".into(), roles: vec![] };
        assert_eq!(rate_key(&anon, Some("1.1.1.1"), &none), "ip:1.1.1.1");
        let dev = Settings::from_pairs(&[("AUTH_MODE", "dev")]);
        assert_eq!(rate_key(&Caller::Actor { id: "dev".into(), roles: vec![] }, Some("1.1.1.1"), &dev), "dev");
    }

    #[test]
    fn cors_only_for_allowed_origins() {
        let s = Settings::from_pairs(&[("ALLOWED_ORIGINS", "https://app.example/")]);
        assert!(cors(Some("https://app.example"), &s).is_some());
        assert!(cors(Some("https://evil.example"), &s).is_none());
        assert!(cors(None, &s).is_none());
    }
}
