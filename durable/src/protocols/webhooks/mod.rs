//! The deployer's view of the webhooks (`WEBHOOKS`, `notify`): the
//! deliveries whose attempts were spent, and replaying one.
//!
//! - `GET /v1/webhooks/dead-letters?limit=N`: newest first,
//!   `{deadLetters: [{delivery, attempts, lastStatus, lastError, at, replayedAt}]}`.
//! - `POST /v1/webhooks/dead-letters/:id/replay`: the delivery goes to the
//!   queue again, as a first attempt with the same `webhook-id` (202).
//!
//! Both are the deployer's: callers holding `ADMIN_ROLE` (default `admin`);
//! 401 without a caller, 403 `role_required` without the role.

use super::{AtWorker, Gate, Target};
use crate::access::{Access, Caller};
use crate::directory::Op;
use crate::effect::Effect;
use crate::input::{self, Head};
use crate::settings::Settings;
use crate::storage::store::Store;
use crate::thread::{Answer, Call, Sink, Thread};
use crate::wire::error::ApiError;
use crate::wire::reply::Reply;
use crate::wire::route::Spec;
use serde::{Deserialize, Serialize};

/// A webhooks route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "route", rename_all = "camelCase")]
pub enum Route {
    /// `GET /v1/webhooks/dead-letters`.
    DeadLetters,
    /// `POST /v1/webhooks/dead-letters/:id/replay`.
    Replay { id: String },
}

use Route as R;

impl super::Protocol for Route {
    const ROUTES: &'static [Spec<Route>] = &[
        Spec { path: "/v1/webhooks/dead-letters", methods: &["GET"], build: |_, _| Ok(R::DeadLetters) },
        Spec {
            path: "/v1/webhooks/dead-letters/:id/replay",
            methods: &["POST"],
            build: |p, _| Ok(R::Replay { id: crate::wire::ids::id(p.raw("id"))? }),
        },
    ];

    fn target(&self) -> Target {
        Target::Worker
    }

    fn thread(&self) -> &str {
        ""
    }

    fn access(&self) -> Access {
        Access::Owner
    }

    fn serve<S: Store, K: Sink>(
        &self,
        _t: &mut Thread<S, K>,
        _call: &Call,
        _gate: &Gate,
        _settings: &Settings,
        _now: i64,
        _effects: &mut Vec<Effect>,
    ) -> Result<Answer, ApiError> {
        Err(ApiError::not_found_route("the webhooks' dead letters are the deployer's directory's"))
    }

    fn at_worker(&self, caller: &Caller, head: &Head, settings: &Settings, now: i64) -> Result<AtWorker, ApiError> {
        if caller.id().is_none() {
            return Err(ApiError::unauthorized("the webhooks' dead letters are the deployer's".to_owned()));
        }
        if !caller.roles().contains(&settings.admin_role) {
            return Err(ApiError::role_required(&settings.admin_role));
        }
        match self {
            R::DeadLetters => {
                let limit = match input::query_first(&input::query_pairs(head.query), "limit") {
                    None => 100,
                    Some(v) => v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=500).contains(n))
                        .ok_or_else(|| ApiError::invalid_query("`limit` must be a whole number from 1 to 500"))?,
                };
                Ok(AtWorker::Deployer(Op::DeadLetters { limit }))
            }
            R::Replay { id } => Ok(AtWorker::Deployer(Op::Replay { id: id.clone(), at: now })),
        }
    }

    fn directory_reply(&self, body: &[u8]) -> Result<Reply, ApiError> {
        let answer: serde_json::Value = serde_json::from_slice(body).map_err(ApiError::unavailable)?;
        Ok(Reply::json(if matches!(self, R::Replay { .. }) { 202 } else { 200 }, &answer))
    }
}
