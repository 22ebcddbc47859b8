//! Webhook deliveries through Cloudflare Queues (`DELIVERIES`): a thread
//! hands its deliveries to the queue ([`enqueue`]); the Worker's consumer
//! ([`queue`]) makes each attempt, signed, and does what the core says
//! follows it (`notify::after`): done, again later as a new message with a
//! delay (the same `webhook-id`), or a dead letter in the deployer's
//! directory. An attempt runs in the consumer, never in a thread's object:
//! a slow or failing endpoint delays no run and no stream.

use crate::now_ms;
use threadline_durable::notify::{self, Delivery, Next, Outcome};
use threadline_durable::DirectoryOp;
use worker::*;

/// The queue's binding.
const QUEUE: &str = "DELIVERIES";

/// Hands `deliveries` to the queue, each as its JSON text (a message body
/// with no map in it reaches the consumer as it was sent).
pub(crate) async fn enqueue(env: &Env, deliveries: &[Delivery]) -> Result<()> {
    let queue = env.queue(QUEUE)?;
    let bodies: Vec<String> = deliveries.iter().map(|d| serde_json::to_string(d).unwrap_or_default()).collect();
    queue.send_batch(BatchMessageBuilder::new().messages(bodies).build()).await
}

/// Sends `delivery` again after `delay_s`.
async fn again(env: &Env, delivery: &Delivery, delay_s: u32) -> Result<()> {
    let body = serde_json::to_string(delivery).unwrap_or_default();
    env.queue(QUEUE)?.send(MessageBuilder::new(body).delay_seconds(delay_s).build()).await
}

/// The consumer: one attempt per message, the batch's attempts at once (an
/// endpoint that hangs holds its own attempt, up to `WEBHOOKS_TIMEOUT_MS`,
/// not the others'). A message is acknowledged once what follows its
/// attempt is in hand (the next attempt queued, the dead letter stored); if
/// that fails, the queue delivers it again. Never an error: the platform
/// would retry the whole batch.
#[event(queue)]
pub async fn queue(batch: MessageBatch<String>, env: Env, _ctx: Context) -> Result<()> {
    let settings = crate::settings(&env);
    let handled = batch.raw_iter().map(|message| {
        let (env, settings) = (&env, &settings);
        async move {
            let Some(delivery) = message.body().as_string().and_then(|t| serde_json::from_str::<Delivery>(&t).ok())
            else {
                console_error!("webhooks: a message that is no delivery was dropped");
                message.ack();
                return;
            };
            let Ok(policy) = &settings.webhooks else {
                message.ack();
                return;
            };
            match settle(env, policy, &delivery).await {
                Ok(()) => message.ack(),
                Err(e) => {
                    console_error!("webhooks: {e}");
                    message.retry();
                }
            }
        }
    });
    futures_util::future::join_all(handled).await;
    Ok(())
}

/// One attempt of `delivery`, and what follows it put in hand.
async fn settle(env: &Env, policy: &notify::Policy, delivery: &Delivery) -> Result<()> {
    let outcome = attempt(env, delivery, policy).await;
    match notify::after(delivery, outcome, policy, now_ms(), crate::ids::random_u64()) {
        Next::Done => Ok(()),
        Next::Again { delivery, delay_s } => again(env, &delivery, delay_s).await,
        Next::Dead(letter) => {
            console_warn!(
                "webhooks: {} to {} is a dead letter: {}",
                letter.delivery.id,
                letter.delivery.url,
                letter.last_error
            );
            let call = threadline_durable::front::deployer_call(&DirectoryOp::DeadLetter { letter: Box::new(letter) });
            crate::took(env, &call, "webhooks").await.map_err(Error::RustError)
        }
    }
}

/// One attempt: the delivery, signed now, POSTed with the policy's timeout.
async fn attempt(env: &Env, d: &Delivery, policy: &notify::Policy) -> Outcome {
    let failed = |status: Option<u16>, error: String| Outcome::Failed { status, error };
    if !policy.allow_private && notify::url_host(&d.url).is_none_or(notify::private_host) {
        return failed(None, "a private, loopback or link-local address (WEBHOOKS_ALLOW_PRIVATE)".into());
    }
    let secret = env.secret(&d.secret).map(|s| s.to_string()).or_else(|_| env.var(&d.secret).map(|v| v.to_string()));
    let keys = match secret
        .map_err(|_| format!("no {} is set", d.secret))
        .and_then(|s| notify::sign::keys(&s).map_err(|e| e.0))
    {
        Ok(keys) => keys,
        Err(why) => return failed(None, why),
    };
    let timestamp = now_ms() / 1000;
    let headers = Headers::new();
    let _ = headers.set("content-type", "application/json");
    let _ = headers.set("webhook-id", &d.id);
    let _ = headers.set("webhook-timestamp", &timestamp.to_string());
    let _ = headers.set("webhook-signature", &notify::sign::signature(&keys, &d.id, timestamp, d.body.as_bytes()));
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(d.body.clone().into()));
    let req = match Request::new_with_init(&d.url, &init) {
        Ok(req) => req,
        Err(e) => return failed(None, e.to_string()),
    };
    let abort = AbortController::default();
    let signal = abort.signal();
    let call = async {
        match Fetch::Request(req).send_with_signal(&signal).await {
            Ok(resp) if (200..300).contains(&resp.status_code()) => Outcome::Delivered,
            Ok(resp) => failed(Some(resp.status_code()), format!("HTTP {}", resp.status_code())),
            Err(e) => failed(None, e.to_string()),
        }
    };
    use futures_util::future::{select, Either};
    let timeout = Delay::from(std::time::Duration::from_millis(policy.timeout_ms));
    let outcome = match select(std::pin::pin!(call), timeout).await {
        Either::Left((outcome, _)) => outcome,
        Either::Right(_) => {
            abort.abort();
            failed(None, format!("no answer within {} ms (WEBHOOKS_TIMEOUT_MS)", policy.timeout_ms))
        }
    };
    outcome
}
