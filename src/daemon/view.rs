//! What the API asks of the daemon ([`View`]): requests into the main
//! loop, each with its reply channel, and the value the loop publishes for
//! `/readyz` and the token.
//!
//! The main loop owns the routes core (the stability layer, the probes,
//! the drain) and the peers; it answers a [`Request`] by building the
//! answer from them at that moment and sending it back as a value. The
//! API's task awaits it, serialises it and writes it out, so a slow
//! client holds up nobody but itself. The queue is bounded and every wait
//! for an answer is bounded ([`ANSWER_WAIT`]): a loop that is busy (a
//! large snapshot being applied) or gone gets the client a 503 saying so,
//! never a wait without end and never a blocked runtime thread.

use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::state::{Published, Readiness};
use crate::api::{Answer, Unavailable};
use crate::report::status::{DrainStatus, Explanation, RoutePage, Status};

/// Requests waiting for the main loop. A client beyond them waits for room
/// (within [`ANSWER_WAIT`]); the API's connection slots bound how many do.
pub const REQUEST_QUEUE: usize = 32;

/// How long a request waits for the main loop's answer, room in the queue
/// included: then the API answers 503. Shorter than `holdfast status`'s own
/// 5 s, so the command shows the reason rather than its timeout.
pub const ANSWER_WAIT: Duration = Duration::from_secs(3);

/// A request of the API to the main loop; the loop sends the answer on
/// `reply` (nobody waits for it any more if the receiver is gone).
#[derive(Debug)]
pub enum Request {
    /// The status with one page of routes (`RoutePage::NONE`: the counts
    /// alone, for `/metrics` and the node status writer).
    Status {
        page: RoutePage,
        reply: oneshot::Sender<Status>,
    },
    /// The counts and the route part of this node's `BGPNodeStatus`.
    NodeStatus {
        reply: oneshot::Sender<(Status, crate::report::node_status::NodeRoutes)>,
    },
    /// Why this node does or does not advertise `vip`.
    Explain {
        vip: IpAddr,
        reply: oneshot::Sender<Explanation>,
    },
    /// `holdfast drain` (`on`) or `undrain`.
    Drain {
        on: bool,
        reply: oneshot::Sender<Result<DrainStatus, String>>,
    },
}

impl Request {
    /// Nobody waits for the answer any more (the client gave up): the
    /// loop need not build it.
    pub fn abandoned(&self) -> bool {
        match self {
            Request::Status { reply, .. } => reply.is_closed(),
            Request::Explain { reply, .. } => reply.is_closed(),
            Request::NodeStatus { reply } => reply.is_closed(),
            // A drain changes state: it is carried out whoever waits.
            Request::Drain { .. } => false,
        }
    }
}

/// The API's handle on the daemon.
pub struct View {
    requests: mpsc::Sender<Request>,
    /// The runtime routes' source, which answers their requests itself.
    runtime: Option<mpsc::Sender<crate::source::runtime::Command>>,
    published: watch::Receiver<Published>,
    wait: Duration,
}

impl View {
    /// A view and the receiving end of its requests, for the main loop.
    pub fn new(published: watch::Receiver<Published>) -> (View, mpsc::Receiver<Request>) {
        let (requests, rx) = mpsc::channel(REQUEST_QUEUE);
        (
            View {
                requests,
                runtime: None,
                published,
                wait: ANSWER_WAIT,
            },
            rx,
        )
    }

    /// The same, with the runtime routes' source answering theirs.
    pub fn with_runtime(mut self, runtime: mpsc::Sender<crate::source::runtime::Command>) -> View {
        self.runtime = Some(runtime);
        self
    }

    /// The same, waiting at most `wait` for an answer (tests).
    #[cfg(test)]
    pub fn waiting(mut self, wait: Duration) -> View {
        self.wait = wait;
        self
    }

    /// Sends the request `make` builds and waits for its answer, at most
    /// [`ANSWER_WAIT`] in all.
    fn ask<T: Send + 'static>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Request + Send + 'static,
    ) -> Answer<T> {
        let requests = self.requests.clone();
        let wait = self.wait;
        Box::pin(async move {
            let stopping =
                || Unavailable("holdfast is stopping: its main loop no longer answers".to_string());
            let (tx, rx) = oneshot::channel();
            let asked = async {
                requests.send(make(tx)).await.map_err(|_| stopping())?;
                rx.await.map_err(|_| stopping())
            };
            match tokio::time::timeout(wait, asked).await {
                Ok(answer) => answer,
                Err(_) => Err(Unavailable(format!(
                    "holdfast did not answer within {:.1}s: its main loop is busy (a large change being applied?); try again",
                    wait.as_secs_f64()
                ))),
            }
        })
    }

    /// The counts and the route part, for the node status writer.
    pub fn node_status(&self) -> Answer<(Status, crate::report::node_status::NodeRoutes)> {
        self.ask(|reply| Request::NodeStatus { reply })
    }
}

impl crate::api::StateView for View {
    fn status(&self) -> Answer<Status> {
        self.status_page(RoutePage::ALL)
    }
    fn status_page(&self, page: RoutePage) -> Answer<Status> {
        self.ask(move |reply| Request::Status { page, reply })
    }
    fn explain(&self, vip: IpAddr) -> Answer<Explanation> {
        self.ask(move |reply| Request::Explain { vip, reply })
    }
    fn drain(&self, on: bool) -> Answer<Result<DrainStatus, String>> {
        self.ask(move |reply| Request::Drain { on, reply })
    }
    fn runtime_routes(
        &self,
        change: Option<crate::report::status::RuntimeChange>,
    ) -> Answer<Result<Vec<crate::report::status::RuntimeRoute>, String>> {
        let runtime = self.runtime.clone();
        let wait = self.wait;
        Box::pin(async move {
            let stopping = || {
                Unavailable("holdfast is stopping: its runtime routes no longer answer".to_string())
            };
            let runtime = runtime.ok_or_else(stopping)?;
            let (reply, rx) = oneshot::channel();
            let asked = async {
                runtime
                    .send(crate::source::runtime::Command { change, reply })
                    .await
                    .map_err(|_| stopping())?;
                rx.await.map_err(|_| stopping())
            };
            tokio::time::timeout(wait, asked).await.unwrap_or_else(|_| {
                Err(Unavailable(format!(
                    "the runtime routes did not answer within {:.1}s (the state directory slow to write?); try again",
                    wait.as_secs_f64()
                )))
            })
        })
    }
    fn ready(&self) -> Result<(), String> {
        self.readiness().map(|_| ())
    }
    fn readiness(&self) -> Result<Option<String>, String> {
        match self.published.borrow().readiness() {
            Readiness::Ready(note) => Ok(note),
            Readiness::NotReady(why) => Err(why),
        }
    }
    fn api_token(&self) -> Option<Vec<u8>> {
        self.published.borrow().api_token()
    }
}
