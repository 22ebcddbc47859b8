//! A thread's reports to its owner's inbox (their directory), delivered off
//! the request's path: the core says when one is due and what it holds, and
//! hears whether the directory took it (or its alarm tries again).

use crate::now_ms;
use crate::object::Inner;
use std::rc::Rc;
use threadline_durable::directory::inbox::Report;
use threadline_durable::{DirectoryOp, Effect};
use worker::*;

impl Inner {
    /// Asks the core whether its state changed since it last reported and,
    /// if so, delivers the report in the background; a thread's first
    /// report is delivered before the request that made it is answered, so
    /// a new thread is in its owner's inbox once its send is answered.
    pub(crate) async fn report(self: &Rc<Self>) {
        let due = self.with_core(|c| c.report(now_ms()));
        match due {
            Ok(Ok(Some(Effect::Report { actor, reports }))) if reports.first().is_some_and(|r| r.version == 1) => {
                self.clone().deliver(actor, reports).await
            }
            Ok(Ok(Some(Effect::Report { actor, reports }))) => self.deliver_reports(actor, reports),
            Ok(Err(e)) => console_error!("report: {e}"),
            _ => {}
        }
    }

    /// [`Inner::report`] from a task that cannot wait (the agent's publish
    /// path): always in the background.
    pub(crate) fn report_later(self: &Rc<Self>) {
        let due = self.with_core(|c| c.report(now_ms()));
        match due {
            Ok(Ok(Some(Effect::Report { actor, reports }))) => self.deliver_reports(actor, reports),
            Ok(Err(e)) => console_error!("report: {e}"),
            _ => {}
        }
    }

    /// Tells `actor`'s directory the thread's `reports` in the background.
    pub(crate) fn deliver_reports(self: &Rc<Self>, actor: String, reports: Vec<Report>) {
        let inner = self.clone();
        wasm_bindgen_futures::spawn_local(async move { inner.deliver(actor, reports).await });
    }

    /// Tells `actor`'s directory the thread's `reports`, and the core
    /// whether it took them; when it did not, the alarm is kept at the
    /// retry.
    async fn deliver(self: Rc<Self>, actor: String, reports: Vec<Report>) {
        let Some(version) = reports.last().map(|r| r.version) else { return };
        let call = threadline_durable::front::directory_call(&actor, &DirectoryOp::Report { reports });
        let taken = match crate::call(&self.env, None, &call).await {
            Ok(resp) if (200..300).contains(&resp.status_code()) => true,
            Ok(resp) => {
                console_warn!("report: the directory answered {}", resp.status_code());
                false
            }
            Err(e) => {
                console_warn!("report: {e}");
                false
            }
        };
        let told = self.with_core(|c| {
            if taken {
                c.reported(version)
            } else {
                c.report_failed(now_ms());
                Ok(())
            }
        });
        if let Ok(Err(e)) = told {
            console_error!("report: {e}");
        }
        if !taken {
            self.arm_alarm().await;
        }
    }
}
