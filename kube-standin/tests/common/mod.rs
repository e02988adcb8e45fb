//! Shared helpers: a kube-rs client for a stand-in, watcher streams drained
//! into channels, and polling with a deadline.

#![allow(dead_code)] // each test binary uses a different subset

use futures::{Stream, StreamExt};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube_standin::{RequestRecord, StandIn};
use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Generous: these are real sockets on a shared two-core machine.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A stand-in plus a kube-rs client that reaches it through a kubeconfig
/// file, exactly as a holdfast child process would.
pub struct Cluster {
    pub standin: StandIn,
    pub client: kube::Client,
    _dir: tempfile::TempDir,
}

pub async fn cluster() -> Cluster {
    let standin = StandIn::start().expect("stand-in starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = standin.kubeconfig(dir.path()).expect("kubeconfig written");
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube config from kubeconfig");
    assert_eq!(
        config.cluster_url.to_string(),
        format!("{}/", standin.url())
    );
    let client = kube::Client::try_from(config).expect("kube client");
    Cluster {
        standin,
        client,
        _dir: dir,
    }
}

/// Items of a watcher stream, drained by a task into a channel.
pub struct Drained<T> {
    rx: mpsc::UnboundedReceiver<T>,
    task: tokio::task::JoinHandle<()>,
}

impl<T> Drop for Drained<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn drain<S, T>(stream: S) -> Drained<T>
where
    S: Stream<Item = T> + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    Drained { rx, task }
}

impl<T: std::fmt::Debug> Drained<T> {
    /// Waits for the first item that `pred` accepts, returning it and the
    /// items skipped before it.
    pub async fn until(&mut self, what: &str, mut pred: impl FnMut(&T) -> bool) -> (T, Vec<T>) {
        let deadline = Instant::now() + DEADLINE;
        let mut skipped = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(item)) if pred(&item) => return (item, skipped),
                Ok(Some(item)) => skipped.push(item),
                Ok(None) => panic!("stream ended while waiting for {what}; saw {skipped:#?}"),
                Err(_) => panic!("no {what} within {DEADLINE:?}; saw {skipped:#?}"),
            }
        }
    }

    /// Everything that arrives within `window` (to check that nothing does).
    pub async fn collect_for(&mut self, window: Duration) -> Vec<T> {
        let deadline = Instant::now() + window;
        let mut out = Vec::new();
        while let Ok(Some(item)) = tokio::time::timeout_at(deadline, self.rx.recv()).await {
            out.push(item);
        }
        out
    }
}

/// Polls `cond` until it holds, failing the test after [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    while !cond().await {
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Like [`eventually`] for a synchronous condition.
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    eventually(what, || std::future::ready(cond())).await;
}

/// The watch requests among `requests`.
pub fn watches(requests: &[RequestRecord]) -> Vec<&RequestRecord> {
    requests.iter().filter(|r| r.is_watch()).collect()
}

/// The list (non-watch GET on a collection) requests among `requests`.
pub fn lists<'a>(requests: &'a [RequestRecord], path: &str) -> Vec<&'a RequestRecord> {
    requests
        .iter()
        .filter(|r| r.method == "GET" && r.path == path && !r.is_watch())
        .collect()
}

/// Is this watcher error a 410 Gone sent as an ERROR watch event?
pub fn is_gone(err: &watcher::Error) -> bool {
    matches!(err, watcher::Error::WatchError(status) if status.code == 410)
}
