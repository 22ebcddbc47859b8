//! A cancellation token with no runtime: cancelling wakes every future
//! waiting on [`CancelToken::cancelled`], so the agent loop can race each
//! await (model stream, tool call, sub-agent) against it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Rc<RefCell<State>>,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    wakers: Vec<Waker>,
}

impl CancelToken {
    pub fn cancel(&self) {
        let wakers = {
            let mut s = self.inner.borrow_mut();
            s.cancelled = true;
            std::mem::take(&mut s.wakers)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.borrow().cancelled
    }

    /// Resolves once [`CancelToken::cancel`] has been called.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { token: self.clone() }
    }

    /// Runs `fut` unless the token is cancelled first (`None`).
    pub async fn run<F: Future>(&self, fut: F) -> Option<F::Output> {
        use futures_util::future::{select, Either};
        let fut = std::pin::pin!(fut);
        match select(fut, self.cancelled()).await {
            Either::Left((out, _)) => Some(out),
            Either::Right(_) => None,
        }
    }
}

pub struct Cancelled {
    token: CancelToken,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.token.inner.borrow_mut();
        if s.cancelled {
            return Poll::Ready(());
        }
        if !s.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            s.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::pending;

    #[test]
    fn cancel_ends_a_pending_future() {
        let token = CancelToken::default();
        let t2 = token.clone();
        let out = futures_executor_lite(async move {
            let waiting = token.run(pending::<()>());
            t2.cancel();
            waiting.await
        });
        assert_eq!(out, None);
        let token = CancelToken::default();
        assert_eq!(futures_executor_lite(async move { token.run(async { 5 }).await }), Some(5));
    }

    /// Polls a future to completion on this thread (the token needs no runtime).
    fn futures_executor_lite<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
