//! `Directory`: an actor's directory object (the threads they started,
//! their sends of the last minute). A shell around the core's
//! `Directory` (the core's): every operation arrives decided
//! ([`forward`]) and is answered by the core.

use threadline_durable::{wire::forward, ApiError};
use threadline_durable::{Directory as Core, DirectoryOp as Op};
use worker::*;

#[durable_object]
pub struct Directory {
    /// The core over the object's SQLite, or why its storage could not be
    /// opened (every request is then refused with it).
    core: std::result::Result<Core<crate::store::DoSql>, ApiError>,
}

impl DurableObject for Directory {
    fn new(state: State, _env: Env) -> Self {
        let core = Core::open(crate::store::DoSql(state.storage().sql())).map_err(Into::into);
        Directory { core }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let op = forward::decode::<Op>(req.headers().get(forward::HEADER)?.as_deref());
        let reply = match (&self.core, op) {
            (Err(e), _) => threadline_durable::Reply::error(e),
            (Ok(_), None) => threadline_durable::Reply::error(&ApiError::not_found_route("no such operation")),
            (Ok(core), Some(op)) => core.handle(&op),
        };
        crate::http::reply(reply)
    }
}
