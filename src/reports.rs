//! What a thread tells outside itself, carried for its core: reports to its
//! owner's inbox (their directory), delivered off the request's path, and
//! webhook deliveries handed to the queue. The core says when either is
//! due and what it holds, and hears whether it was taken (or its alarm
//! tries again).

use crate::now_ms;
use crate::object::Inner;
use std::rc::Rc;
use threadline_durable::directory::inbox::Report;
use threadline_durable::notify::Delivery;
use threadline_durable::{DirectoryOp, Effect};
use worker::*;

impl Inner {
    /// Asks the core whether its state changed since it last reported and,
    /// if so, delivers the report in the background; a thread's first
    /// report is delivered before the request that made it is answered, so
    /// a new thread is in its owner's inbox once its send is answered.
    pub(crate) async fn report(self: &Rc<Self>) {
        if let Ok(Ok(Some(Effect::Enqueue { deliveries }))) = self.with_core(|c| c.deliveries(now_ms())) {
            self.enqueue(deliveries).await;
        }
        let due = self.with_core(|c| (c.report(now_ms()), c.reported_before()));
        match due {
            Ok((Ok(Some(Effect::Report { actor, reports })), false)) => self.clone().deliver(actor, reports).await,
            Ok((Ok(Some(Effect::Report { actor, reports })), true)) => self.deliver_reports(actor, reports),
            Ok((Err(e), _)) => console_error!("report: {e}"),
            _ => {}
        }
    }

    /// [`Inner::report`] from a task that cannot wait (the agent's publish
    /// path): in the background.
    pub(crate) fn report_later(self: &Rc<Self>) {
        let inner = self.clone();
        wasm_bindgen_futures::spawn_local(async move { inner.report().await });
    }

    /// Hands webhook deliveries to the queue, and tells the core whether it
    /// took them (else the alarm tries again).
    pub(crate) async fn enqueue(self: &Rc<Self>, deliveries: Vec<Delivery>) {
        let sent = crate::deliveries::enqueue(&self.env, &deliveries).await;
        let ids: Vec<String> = deliveries.into_iter().map(|d| d.id).collect();
        let told = self.with_core(|c| match &sent {
            Ok(()) => c.enqueued(&ids),
            Err(_) => {
                c.enqueue_failed(now_ms());
                Ok(())
            }
        });
        if let Ok(Err(e)) = told {
            console_error!("webhooks: {e}");
        }
        if let Err(e) = sent {
            console_warn!("webhooks: the queue did not take {} deliveries: {e}", ids.len());
            self.arm_alarm().await;
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
        let taken = crate::took(&self.env, &call, "report").await.is_ok();
        let told = self.with_core(|c| if taken { c.reported(version) } else { c.report_failed(now_ms()) });
        if let Ok(Err(e)) = told {
            console_error!("report: {e}");
        }
        if !taken {
            self.arm_alarm().await;
        }
    }
}
