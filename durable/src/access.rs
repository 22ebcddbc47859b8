//! Who may do what on a thread: the one access decision, for every route.
//!
//! The stateless Worker authenticates (`auth`) and hands the thread a
//! [`Caller`]; the route says what it does ([`Access`]); the thread supplies
//! the [`Facts`] it holds (its owner, and for a decision the request
//! decided); [`decide`] answers with a [`Grant`] or the refusal. No other
//! code decides access: the shell only carries the caller across the hop,
//! and the thread only acts within the grant.
//!
//! Invariants enforced here:
//! - A thread belongs to the actor whose accepted send created it. Anyone
//!   else gets, on every route of it, the 404 an unknown id gets on that
//!   route, so existence never leaks.
//! - Each request says who decides it ([`Decider`]): a client tool's result
//!   and an answer to a question are the owner's alone, whatever role a
//!   policy or a stored record names; an approval whose policy names a role
//!   is decided by holders of that role only (403 `approver_required`, the
//!   owner included); any other approval is the owner's. A caller who may
//!   not decide a request gets the answer an unknown id gets, so a stranger
//!   learns nothing of it. The same rule for every protocol's route: each
//!   admits a decision through [`decide`] with the request's [`Decider`].
//! - A thread that does not exist yet is nobody's: any actor may follow its
//!   stream, read its (empty) status and messages and cancel nothing on the
//!   routes that say so ([`Access::ReaderOrNew`], [`Access::OwnerOrNew`]),
//!   which store nothing; the send that creates it makes it the sender's,
//!   and ends every other actor's follow of it (`Thread::claim`).
//! - A stream token reads one thread's streams and nothing else.
//! - Publishing needs no caller: the run's publish token is checked by the
//!   thread (`Thread::authorize_publish`), and nothing else publishes.

use crate::auth::Actor;
use crate::wire::error::ApiError;
use serde::{Deserialize, Serialize};

/// Who is calling, as the Worker authenticated it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Caller {
    /// No credential: publishing routes, whose bearer is the run's token.
    Nobody,
    /// An authenticated actor (a JWT, or the `dev` / `none` modes' actor).
    Actor { id: String, roles: Vec<String> },
    /// A stream token (`?token=`): read-only, one thread, until `expires_at`.
    StreamToken { id: String, expires_at: i64 },
}

impl Caller {
    pub fn actor(a: Actor) -> Caller {
        Caller::Actor { id: a.id, roles: a.roles }
    }

    /// The actor's roles (none for a stream token or nobody).
    pub fn roles(&self) -> &[String] {
        match self {
            Caller::Actor { roles, .. } => roles,
            _ => &[],
        }
    }

    /// The actor's id, when there is one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Caller::Nobody => None,
            Caller::Actor { id, .. } | Caller::StreamToken { id, .. } => Some(id),
        }
    }
}

/// What the thread knows that access depends on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// The actor who created the thread (`None`: nobody yet).
    pub owner: Option<&'a str>,
    /// Whether the thread exists: a thread of nobody's that holds anything
    /// (one from before threads had owners) is not a new one.
    pub exists: bool,
    /// For a decision route, the request it decides.
    pub request: Option<Request<'a>>,
}

/// The confirmation a decision route names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// The thread holds no such request.
    Unknown,
    /// A request, and who may decide it.
    Held { decider: Decider<'a> },
}

/// Who may decide a request (`Confirmation::decider` says, for each one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider<'a> {
    /// The thread's owner, and nobody else.
    Owner,
    /// Holders of this role, and nobody else (the owner included).
    Role(&'a str),
}

/// What a route does, as access sees it: every protocol's route says which
/// of these it is, and [`decide`] knows nothing else of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Sends a message: the owner's, and anyone's on a thread nobody owns
    /// (an accepted send claims it).
    Send,
    /// The owner's only.
    Owner,
    /// Reads the thread's streams: the owner's, and a stream token's.
    Reader,
    /// [`Access::Reader`], and any actor's on a thread that does not exist
    /// yet (n8n's events route: a page opens its stream before its first
    /// message).
    ReaderOrNew,
    /// [`Access::Owner`], and any actor's on a thread that does not exist
    /// yet, which answers as an empty thread (n8n's status, messages and
    /// cancel).
    OwnerOrNew,
    /// Decides a request: who may, the request says ([`Decider`]).
    Decide,
    /// Publishes into a run: the run's token decides, checked by the thread.
    Publish,
    /// An object's own call (a fork reading its source's shared turns): its
    /// route has no path, so no client's request is ever one; only the
    /// Worker and objects set the header that names it (`wire::forward`).
    Object,
}

impl Access {
    /// Whether the route reads a thread's streams (where a stream token
    /// is taken).
    pub fn reads_streams(self) -> bool {
        matches!(self, Access::Reader | Access::ReaderOrNew)
    }
}

/// What the caller may do on the route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The thread's owner.
    Owner,
    /// A send to a thread nobody owns: the caller owns it once the send is
    /// accepted (a refused send claims nothing).
    Claim,
    /// A holder of the role the decided request names (not the owner).
    Approver,
    /// A stream-token holder reading the thread's streams.
    Reader,
    /// A publisher: the thread checks its bearer against the run's token.
    Publisher,
    /// An object's own call.
    Object,
    /// An actor on a thread that does not exist yet, on a route that
    /// answers as an empty thread: it stores nothing, and a follow ends if
    /// another actor creates the thread.
    Prospect,
}

/// The one access decision. `Err` is the route's refusal: `not_found`, the
/// answer an unknown id gets on the route (existence does not leak), or
/// 403 `approver_required`.
pub fn decide(access: Access, not_found: ApiError, caller: &Caller, facts: &Facts) -> Result<Grant, ApiError> {
    if access == Access::Publish {
        return Ok(Grant::Publisher);
    }
    if access == Access::Object {
        return Ok(Grant::Object);
    }
    let hidden = || Err(not_found.clone());
    match caller {
        Caller::Nobody => hidden(),
        Caller::StreamToken { id, .. } => {
            if access.reads_streams() && facts.owner == Some(id.as_str()) {
                Ok(Grant::Reader)
            } else {
                hidden()
            }
        }
        Caller::Actor { id, roles } => {
            let owner = facts.owner == Some(id.as_str());
            if access == Access::Decide {
                return match facts.request {
                    None | Some(Request::Unknown) => hidden(),
                    Some(Request::Held { decider: Decider::Role(role) }) if roles.iter().any(|r| r == role) => {
                        Ok(if owner { Grant::Owner } else { Grant::Approver })
                    }
                    Some(Request::Held { decider: Decider::Role(role) }) if owner => {
                        Err(ApiError::approver_required(role))
                    }
                    Some(Request::Held { decider: Decider::Owner }) if owner => Ok(Grant::Owner),
                    Some(Request::Held { .. }) => hidden(),
                };
            }
            match facts.owner {
                Some(_) if owner => Ok(Grant::Owner),
                None if access == Access::Send => Ok(Grant::Claim),
                None if !facts.exists && matches!(access, Access::ReaderOrNew | Access::OwnerOrNew) => {
                    Ok(Grant::Prospect)
                }
                _ => hidden(),
            }
        }
    }
}
