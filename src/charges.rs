//! Model calls' charges, delivered to the directory of the actor who owes
//! them: the core says what to deliver and hears whether it arrived.

use crate::live::Shared;
use crate::now_ms;
use threadline_durable::agent::charge::Charge;
use threadline_durable::DirectoryOp;
use worker::*;

/// Delivers model calls' charges to `actor`'s directory, and tells the core
/// whether it has them (or the alarm tries again).
pub(crate) async fn deliver(env: &Env, core: &Shared, actor: &str, charges: Vec<Charge>) {
    let ids: Vec<String> = charges.iter().map(|c| c.id.clone()).collect();
    let call = threadline_durable::front::directory_call(actor, &DirectoryOp::Charge { charges });
    let delivered = crate::took(env, &call, "charges").await.is_ok();
    let mut slot = core.borrow_mut();
    let Some(core) = slot.as_mut() else { return };
    if delivered {
        if let Err(e) = core.charges().charged(&ids) {
            console_error!("charges: {e}");
        }
    } else {
        core.charges().charge_failed(now_ms());
    }
}
