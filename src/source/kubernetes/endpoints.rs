//! Which Services have a ready endpoint on this node, for traffic policy
//! `Local`.
//!
//! An endpoint counts when its EndpointSlice belongs to the Service (label
//! `kubernetes.io/service-name`, same namespace), its `nodeName` is this
//! node, `conditions.ready` is true (or unset: the API says consumers should
//! read an unknown state as ready) and `conditions.terminating` is not true.
//!
//! `serving` is not read. `ready` is already false for a terminating
//! endpoint, so `serving` only adds information about endpoints we exclude
//! anyway: a pod that is shutting down but still answers. Excluding it is
//! the point: the route should go when the last local pod starts to
//! terminate, so the routers move new flows elsewhere while that pod
//! finishes the ones it has. While the withdrawal propagates, kube-proxy
//! (and Cilium) still send traffic arriving here to serving-but-terminating
//! local endpoints when no ready one is left. Losing the last one is
//! `Absence::NoLocalEndpoint` (policy): withdrawn after
//! `local_endpoint_delay`, not held down, since from then on this node's
//! datapath drops the Service's traffic.

use std::collections::HashMap;
use std::sync::Arc;

use super::records::SliceRecord;
use super::service::ServiceKey;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Services with at least one ready, non-terminating endpoint on the node,
/// and how many.
#[derive(Debug, Default)]
pub(crate) struct LocalEndpoints {
    /// Ready local endpoints per Service and address family. A dual-stack
    /// Service has one slice per family naming the same pods: the count is
    /// the larger family's, not the sum.
    counts: HashMap<ServiceKey, HashMap<String, u32>>,
}

impl LocalEndpoints {
    /// From the records of this node's slices (records::SliceRecord holds
    /// only the endpoints on this node).
    pub(crate) fn index(slices: &[Arc<SliceRecord>]) -> LocalEndpoints {
        let mut counts: HashMap<ServiceKey, HashMap<String, u32>> = HashMap::new();
        for slice in slices {
            let local_ready = slice
                .local
                .iter()
                .filter(|e| e.ready.unwrap_or(true) && !e.terminating.unwrap_or(false))
                .count();
            if local_ready > 0 {
                let n = u32::try_from(local_ready).unwrap_or(u32::MAX);
                let family = counts
                    .entry(slice.service.clone())
                    .or_default()
                    .entry(slice.address_type.clone())
                    .or_default();
                *family = family.saturating_add(n);
            }
        }
        LocalEndpoints { counts }
    }

    pub(crate) fn has(&self, service: &ServiceKey) -> bool {
        self.counts.contains_key(service)
    }

    /// Ready, non-terminating endpoints of `service` on this node.
    pub(crate) fn count(&self, service: &ServiceKey) -> u32 {
        self.counts
            .get(service)
            .and_then(|f| f.values().max().copied())
            .unwrap_or(0)
    }
}
