//! Sources: where the desired set of VIPs comes from (ARCHITECTURE.md, the first
//! layer of the flow).
//!
//! A source runs as one task and publishes whole [`SourceSnapshot`]s: every
//! snapshot is the complete set as the source sees it now, never a delta,
//! and a source never publishes a snapshot equal to its previous one. A
//! source that cannot see its input (a broken file, an unreachable API
//! server) publishes its last known set with `healthy: false` and the
//! problem in `error`, so the stability layer keeps every route.

pub mod file;
pub mod interface;
pub mod kubernetes;
pub mod merge;
pub mod runtime;

use std::future::Future;

use tokio::sync::{mpsc, watch};

use crate::model::SourceSnapshot;

/// Where a source publishes its snapshots.
///
/// The daemon hands sources a [`watch::Sender`] (consumers want the latest
/// set, not the history); tests use an [`mpsc::UnboundedSender`] to see
/// every snapshot a source published, in order.
pub trait SnapshotSink: Send {
    /// Publishes one snapshot; `false` when nobody receives any more, which
    /// ends the source.
    fn publish(&mut self, snapshot: SourceSnapshot) -> bool;

    /// Completes once nobody receives any more.
    fn closed(&self) -> impl Future<Output = ()> + Send;
}

impl SnapshotSink for watch::Sender<SourceSnapshot> {
    fn publish(&mut self, snapshot: SourceSnapshot) -> bool {
        self.send(snapshot).is_ok()
    }

    fn closed(&self) -> impl Future<Output = ()> + Send {
        watch::Sender::closed(self)
    }
}

impl SnapshotSink for mpsc::UnboundedSender<SourceSnapshot> {
    fn publish(&mut self, snapshot: SourceSnapshot) -> bool {
        self.send(snapshot).is_ok()
    }

    fn closed(&self) -> impl Future<Output = ()> + Send {
        mpsc::UnboundedSender::closed(self)
    }
}
