//! What keeps one client of the API from starving the others: connection
//! slots with a per-client share and a lane kept for health checks, and a
//! deadline on writing each response.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How a connection is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// Every endpoint, keep-alive.
    General,
    /// One request, `/healthz` or `/readyz` only; then closed.
    Health,
}

/// The connection slots: `general` in all, at most `per_client` of them
/// held by one client address, and `health` more for health checks once a
/// client has used its share or all are taken.
#[derive(Debug)]
pub(super) struct Slots {
    general: usize,
    per_client: usize,
    health: usize,
    state: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    general: usize,
    health: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// A slot taken; given back when dropped (the connection's task ends).
#[derive(Debug)]
pub(super) struct Slot {
    slots: Arc<Slots>,
    lane: Lane,
    client: IpAddr,
}

impl Slots {
    pub(super) fn new(general: usize, per_client: usize, health: usize) -> Arc<Slots> {
        Arc::new(Slots {
            general,
            per_client,
            health,
            state: Mutex::new(Held::default()),
        })
    }

    /// A slot for a connection from `client`: a general one while the
    /// client is within its share and one is free, else one of the health
    /// lane, else none (the connection is closed at once).
    pub(super) fn take(self: &Arc<Self>, client: IpAddr) -> Option<Slot> {
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.by_client.get(&client).copied().unwrap_or(0);
        let lane = if held.general < self.general && mine < self.per_client {
            held.general += 1;
            *held.by_client.entry(client).or_insert(0) += 1;
            Lane::General
        } else if held.health < self.health {
            held.health += 1;
            Lane::Health
        } else {
            return None;
        };
        Some(Slot {
            slots: self.clone(),
            lane,
            client,
        })
    }
}

impl Slot {
    pub(super) fn lane(&self) -> Lane {
        self.lane
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.state.lock().unwrap_or_else(|e| e.into_inner());
        match self.lane {
            Lane::General => {
                held.general -= 1;
                if let Some(n) = held.by_client.get_mut(&self.client) {
                    *n -= 1;
                    if *n == 0 {
                        held.by_client.remove(&self.client);
                    }
                }
            }
            Lane::Health => held.health -= 1,
        }
    }
}

/// A stream whose writes fail once they have been stalled for `timeout`:
/// from the first write the client does not take until everything written
/// is handed to the kernel (a flush that completes). A client that sends
/// requests and never reads the answers would otherwise hold its
/// connection, and the answers' memory, for ever.
pub(super) struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub(super) fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After a write or flush that could not proceed: pending until the
    /// deadline, then the error that ends the connection.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no answer for {timeout:?}; connection closed"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => this.stall(cx),
            // Progress, but the deadline stands until a flush completes: a
            // client reading a byte at a time must not hold the slot.
            ready => ready,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.stall(cx),
            ready => ready,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.stall(cx),
            Poll::Ready(result) => {
                // hyper flushes once an answer is written out.
                this.stalled = None;
                Poll::Ready(result)
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_shutdown(cx) {
            Poll::Pending => this.stall(cx),
            ready => ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test address")
    }

    #[test]
    fn a_client_gets_its_share_then_the_health_lane_then_nothing() {
        let slots = Slots::new(4, 2, 1);
        let a = ip("127.0.0.1");
        let b = ip("127.0.0.2");
        let a1 = slots.take(a).expect("slot");
        let a2 = slots.take(a).expect("slot");
        assert_eq!((a1.lane(), a2.lane()), (Lane::General, Lane::General));
        // Past its share: the health lane, then nothing.
        let a3 = slots.take(a).expect("health slot");
        assert_eq!(a3.lane(), Lane::Health);
        assert!(slots.take(a).is_none());
        // Another client still has its share.
        let b1 = slots.take(b).expect("slot");
        assert_eq!(b1.lane(), Lane::General);
        // Slots come back when connections end.
        drop(a3);
        assert_eq!(slots.take(a).map(|s| s.lane()), Some(Lane::Health));
        drop(a1);
        assert_eq!(slots.take(a).map(|s| s.lane()), Some(Lane::General));
    }

    #[tokio::test]
    async fn a_write_the_client_never_takes_fails_after_the_deadline() {
        use tokio::io::AsyncWriteExt;
        // A pipe whose reader never reads: the writer stalls once it is full.
        let (client, server) = tokio::io::duplex(64);
        let mut w = WriteDeadline::new(server, Duration::from_millis(200));
        let started = tokio::time::Instant::now();
        // Bounded here too: a deadline that never fires fails the test
        // instead of hanging it.
        let err = tokio::time::timeout(Duration::from_secs(5), w.write_all(&[0u8; 4096]))
            .await
            .expect("the deadline fires within 5s")
            .expect_err("the write must time out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(5),
            "{took:?}"
        );
        drop(client);
    }

    #[tokio::test]
    async fn a_client_that_reads_is_never_cut_off() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(64);
        let mut w = WriteDeadline::new(server, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            client.read_to_end(&mut all).await.map(|_| all.len())
        });
        // Five answers, each flushed, over more than the deadline in all.
        for _ in 0..5 {
            w.write_all(&[1u8; 1024]).await.expect("write");
            w.flush().await.expect("flush");
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        drop(w);
        assert_eq!(reader.await.expect("reader").expect("read"), 5 * 1024);
    }
}
