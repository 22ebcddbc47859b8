//! A request on a thread, whichever protocol it came in: what it carries
//! ([`Call`]), what it is answered with ([`Answer`], [`Outcome`]), and the
//! operations the protocols' routes are made of (admission, cancel, follow,
//! decide, delete, the alarm). Which route does what is each protocol's
//! (`protocols/<name>/mod.rs`); none of them is named here.

use super::error::Error;
use super::send::tell_agent;
use super::{Follow, Sink, Thread};
use crate::access::{self, Access, Caller, Facts, Grant};
use crate::effect::Effect;
use crate::settings::Settings;
use crate::storage::store::Confirmation;
use crate::storage::store::{Driver, Store};
use crate::wire::error::ApiError;
use crate::wire::reply::Reply;
use serde_json::Value;

/// The proof that a request was let in on this thread: only the thread
/// makes one ([`Thread::admit`], after `access::decide`; and for what the
/// thread does on its own, such as its TTL's delete). Every operation that
/// changes what a thread holds for a caller takes one, so a route that
/// forgot its access rule could not call it; the protocols' registry admits
/// each request once, by the route's declared rule, before the route runs
/// (`protocols::handle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admitted {
    grant: Grant,
}

impl Admitted {
    /// What the caller may do on the route.
    pub fn grant(&self) -> Grant {
        self.grant
    }

    /// The thread acting on its own (its alarm).
    pub(in crate::thread) fn by_the_thread() -> Admitted {
        Admitted { grant: Grant::Owner }
    }
}

/// One request as the object's shell received it, its route apart.
pub struct Call<'a> {
    pub caller: &'a Caller,
    /// The query string's pairs.
    pub query: &'a [(String, String)],
    /// A request header, by lower-case name.
    pub header: &'a dyn Fn(&str) -> Option<String>,
    pub body: &'a [u8],
    /// The origin the request came in at (`https://host`).
    pub origin: &'a str,
    /// A fresh random number (a log's generation, cursor jitter).
    pub random: u64,
    /// What the object's shell knows of its own instance (debug stats).
    pub instance: &'a Instance,
    /// The caller's budget, as their directory told the Worker (a send,
    /// with `QUOTA` set).
    pub budget: Option<crate::agent::quota::Budget>,
    /// Files the Worker read from the request and checked, by the index its
    /// body's markers name them with (`None`: not this send's).
    pub files: &'a [Option<crate::files::NewFile>],
    /// Check the request and reserve its files, and store nothing else:
    /// the Worker stores their bytes, then makes the request again.
    pub reserve: bool,
    /// The answer to the call this request's first serving asked the shell
    /// to make ([`Answer::Consult`]); the request is served again with it.
    pub consulted: Option<Consulted<'a>>,
}

/// Another object's answer, as the shell read it.
#[derive(Clone, Copy, Debug)]
pub struct Consulted<'a> {
    pub status: u16,
    pub body: &'a [u8],
}

/// The object's instance, as its shell counts it: reported by the debug
/// stats, so a test can see that an idle thread holds no request and that
/// it was evicted (a new instance answers after it slept).
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// A random id drawn when the instance was constructed.
    pub id: String,
    /// Requests and socket events in progress, this one excluded.
    pub inflight: u32,
    /// Events this instance has handled, this one included.
    pub handled: u64,
    /// Events handled by every instance of the object (with
    /// `DEBUG_WAKES=1`, which stores the count: it outlives eviction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handled_ever: Option<u64>,
    /// In-memory timers and built-in agent loops running (each keeps the
    /// object awake).
    pub tasks: u32,
    /// The object's SQLite database, in bytes, as the platform reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_bytes: Option<u64>,
}

/// What to answer.
#[derive(Debug)]
pub enum Answer {
    Reply(Reply),
    /// A stream: open a subscriber socket following `follow` after seq
    /// `after` (`Thread::subscribe` gives its hello). The Worker relays it to
    /// the client in the route's protocol (`feed`).
    Follow {
        follow: Follow,
        after: u64,
    },
    /// The same stream, written by the object itself with `plan`'s feed: a
    /// run is in progress, and the object is awake for it anyway
    /// ([`crate::feed::held`]). It moves to a socket when the run ends.
    Hold {
        follow: Follow,
        after: u64,
        plan: crate::feed::Plan,
    },
    /// Ask another object this, then serve the request again with its
    /// answer ([`Call::consulted`]): a fork reads its shared history from
    /// its source, and a source hands a new fork its offer. Asked once per
    /// request.
    Consult(crate::wire::forward::ObjectCall),
}

impl Answer {
    /// A JSON answer.
    pub fn json<T: serde::Serialize + ?Sized>(status: u16, body: &T) -> Answer {
        Answer::Reply(Reply::json(status, body))
    }
}

/// The answer, and what the shell must do.
#[derive(Debug)]
pub struct Outcome {
    pub answer: Answer,
    pub effects: Vec<Effect>,
}

impl<S: Store, K: Sink> Thread<S, K> {
    /// Whether `caller` may do what a route of kind `access` does here
    /// (`access::decide`, on the owner this thread holds; for a decision,
    /// on the request it names). `not_found` is the route's answer for an
    /// unknown id, which everyone the thread hides itself from gets.
    pub fn admit(
        &self,
        access: Access,
        not_found: ApiError,
        caller: &Caller,
        request: Option<access::Request>,
    ) -> Result<Admitted, Error> {
        // Publishing depends on the run's token only: no read on the hot path.
        let owner =
            if matches!(access, Access::Publish | Access::Object) { None } else { self.conversation().owner()? };
        let exists = owner.is_some() || self.journal.last_seq() > 0;
        let grant = access::decide(access, not_found, caller, &Facts { owner: owner.as_deref(), exists, request })
            .map_err(Error::Denied)?;
        Ok(Admitted { grant })
    }

    /// Follows `follow` from seq `after`: the stream the Worker relays, once
    /// there is room for one more.
    pub fn follow(&mut self, follow: Follow, after: u64, settings: &Settings) -> Result<Answer, Error> {
        self.journal.subscribers().make_room(settings.limits.max_subscribers)?;
        Ok(Answer::Follow { follow, after })
    }

    /// Follows run `run` of this thread from seq `after` (404
    /// `nothing_to_resume` for a run it never had).
    pub fn follow_run(&mut self, run: &str, after: u64, settings: &Settings) -> Result<Answer, Error> {
        self.journal.store().run(run)?.ok_or(Error::NothingToResume)?;
        self.follow(Follow::run(run), after, settings)
    }

    /// Cancels the active run, if any, and stops its agents: the built-in
    /// agent (and its sub-agents, background ones too) stop and their
    /// fetches are aborted; an external one is told. The run's events end
    /// with the `run-finish` just stored. Returns the run cancelled.
    ///
    /// With no active run it is a no-op (Instance AI's "if the run already
    /// completed"): background agents that outlived their run go on, unless
    /// `background` asks for them to stop too.
    pub fn cancel_run(
        &mut self,
        _: &Admitted,
        settings: &Settings,
        now: i64,
        background: bool,
        effects: &mut Vec<Effect>,
    ) -> Result<Option<String>, Error> {
        let cancelled = self.cancel(now)?;
        if cancelled.is_some() || background {
            effects.push(Effect::StopAgents);
        }
        if let Some(run_id) = &cancelled {
            effects.extend(tell_agent(settings, crate::webhook::cancel(run_id, "user_cancelled")));
        }
        Ok(cancelled)
    }

    /// Deletes the thread: its agents stop, its storage is wiped (its
    /// streams end), and its owner's directory forgets it.
    pub fn delete(&mut self, _: &Admitted, now: i64, effects: &mut Vec<Effect>) -> Result<(), Error> {
        effects.push(Effect::StopAgents);
        effects.extend(self.deleted_deliveries(now)?);
        // What the thread's calls cost goes to their senders first: the
        // calls in flight are charged as cut, and a charge the directory
        // does not take survives the wipe (`Thread::owes_charges`).
        effects.extend(self.charges().deliveries(true, now)?);
        effects.push(Effect::Wipe { files: self.conversation().files_prefix()? });
        if let Some(owner) = self.conversation().owner()? {
            let op = crate::directory::Op::Unregister { thread_id: self.journal.thread_id().to_owned() };
            effects.push(Effect::Directory { actor: owner, op });
        }
        Ok(())
    }

    /// Pins a model for the thread's later sends (`None` unpins).
    pub fn set_pin(&mut self, model: Option<&str>) -> Result<(), Error> {
        Ok(self.journal.store_mut().set_meta(super::meta::PIN_KEY, model)?)
    }

    /// Decides request `request_id` for `caller` with decision `body`:
    /// requests whose time is up settle first, the caller is admitted for
    /// the request it names, the decision is recorded, and its run goes on.
    #[allow(clippy::too_many_arguments)]
    pub fn decide_as(
        &mut self,
        caller: &Caller,
        via: &str,
        request_id: &str,
        body: &Value,
        settings: &Settings,
        now: i64,
        effects: &mut Vec<Effect>,
    ) -> Result<Confirmation, Error> {
        effects.extend(self.clock().settle_lapsed(settings, now)?);
        let found = self.requests().get(request_id)?;
        self.admit(Access::Decide, ApiError::confirmation_not_found(), caller, Some(held(found.as_ref())))?;
        let c = self.decisions().decide(request_id, body, super::By { actor: caller.id(), via }, now)?;
        effects.extend(after_settled(self, &c, settings)?);
        Ok(c)
    }
}

/// A confirmation was decided or lapsed: its run goes on. The built-in
/// agent resumes once every request of its step is settled; an external
/// agent is told through its webhook.
pub(super) fn after_settled<S: Store, K: Sink>(
    thread: &Thread<S, K>,
    c: &Confirmation,
    settings: &Settings,
) -> Result<Vec<Effect>, Error> {
    let driver = thread.conversation().run(&c.run_id)?.map(|r| r.driver);
    Ok(match driver {
        Some(Driver::Builtin) => super::agent::resume_if_ready(thread, &c.run_id, settings)?.into_iter().collect(),
        Some(Driver::Webhook) => tell_agent(settings, c.webhook_signal()),
        None => Vec::new(),
    })
}

/// The request a decision route names, as access sees it.
pub fn held(c: Option<&Confirmation>) -> access::Request<'_> {
    match c {
        Some(c) => access::Request::Held { decider: c.decider() },
        None => access::Request::Unknown,
    }
}
