//! What the watcher layer keeps of each Service and EndpointSlice: compact
//! records made at the watch boundary, holding only what the policy,
//! `explain`, the node status and Events read. The k8s-openapi objects a
//! watch delivers are dropped as soon as they are converted, so the memory
//! a large cluster costs is that of the records: on a node of a 50-node
//! cluster, an EndpointSlice whose endpoints are all elsewhere is not kept
//! at all, and of the others only this node's endpoints' conditions stay.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::endpoints::SERVICE_NAME_LABEL;
use super::service::{ADVERTISE_ANNOTATION, ServiceKey};
use crate::config::ServiceAttribute;

/// One `status.loadBalancer.ingress` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingress {
    pub ip: Option<String>,
    pub hostname: Option<String>,
}

/// What holdfast reads off a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    pub key: ServiceKey,
    /// `metadata.uid` (for Events' involvedObject).
    pub uid: Option<String>,
    /// `metadata.labels` (the advertisements' `service_selector`).
    pub labels: BTreeMap<String, String>,
    /// Only the annotations holdfast reads: the opt-out and the attribute
    /// annotations.
    pub annotations: BTreeMap<String, String>,
    /// `spec.type` as given (`None`: the API server's default, ClusterIP).
    pub type_: Option<String>,
    pub load_balancer_class: Option<String>,
    pub external_traffic_policy: Option<String>,
    pub internal_traffic_policy: Option<String>,
    pub ingress: Vec<Ingress>,
    /// `spec.externalIPs`.
    pub external_ips: Vec<String>,
    /// `spec.clusterIPs`.
    pub cluster_ips: Vec<String>,
    /// `spec.clusterIP` (older objects may carry only this).
    pub cluster_ip: Option<String>,
}

/// True for the annotations a [`ServiceRecord`] keeps.
pub(crate) fn read_annotation(name: &str) -> bool {
    name == ADVERTISE_ANNOTATION || ServiceAttribute::annotated().any(|(_, a)| a.name == name)
}

impl ServiceRecord {
    pub fn of(service: Service) -> ServiceRecord {
        let key = ServiceKey::of(&service);
        let meta = service.metadata;
        let spec = service.spec.unwrap_or_default();
        let ingress = exact(
            service
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|lb| lb.ingress)
                .unwrap_or_default()
                .into_iter()
                .map(|i| Ingress {
                    ip: i.ip,
                    hostname: i.hostname,
                })
                .collect(),
        );
        // A new map of the few kept: most Services keep none, and a map
        // emptied in place would still hold its node (room for eleven).
        let annotations: BTreeMap<String, String> = meta
            .annotations
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| read_annotation(k))
            .collect();
        ServiceRecord {
            key,
            uid: meta.uid,
            labels: meta.labels.unwrap_or_default(),
            annotations,
            type_: spec.type_,
            load_balancer_class: spec.load_balancer_class,
            external_traffic_policy: spec.external_traffic_policy,
            internal_traffic_policy: spec.internal_traffic_policy,
            ingress,
            external_ips: exact(spec.external_ips.unwrap_or_default()),
            cluster_ips: exact(spec.cluster_ips.unwrap_or_default()),
            cluster_ip: spec.cluster_ip,
        }
    }
}

/// `list` without spare room. A JSON decoder grows a list it reads to room
/// for four, and a list collected from a decoded one keeps that buffer
/// (std reuses it in place): the ingress entries, half the size of the
/// decoded ones, kept 384 octets for a Service's one address, 3.8 MB of
/// 10k Services.
fn exact<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

/// One endpoint's `conditions`, as given (`None`: unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointState {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

/// What holdfast keeps of an EndpointSlice: its Service, its address
/// family, and the conditions of the endpoints on this node, and nothing
/// of the endpoints on other nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRecord {
    /// The Service named by the `kubernetes.io/service-name` label, in the
    /// slice's namespace.
    pub service: ServiceKey,
    /// `addressType`: IPv4, IPv6 or FQDN.
    pub address_type: String,
    /// This node's endpoints.
    pub local: Vec<EndpointState>,
}

impl SliceRecord {
    /// The record of `slice` for node `node_name`; `None` when nothing of
    /// it matters to this node: no Service label, or no endpoint here.
    pub fn of(slice: EndpointSlice, node_name: &str) -> Option<SliceRecord> {
        let local: Vec<EndpointState> = slice
            .endpoints
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.node_name.as_deref() == Some(node_name))
            .map(|e| {
                let c = e.conditions.unwrap_or_default();
                EndpointState {
                    ready: c.ready,
                    serving: c.serving,
                    terminating: c.terminating,
                }
            })
            .collect();
        if local.is_empty() {
            return None;
        }
        let mut labels = slice.metadata.labels.unwrap_or_default();
        let name = labels.remove(SERVICE_NAME_LABEL)?;
        Some(SliceRecord {
            service: ServiceKey {
                namespace: slice
                    .metadata
                    .namespace
                    .unwrap_or_else(|| "default".to_string()),
                name,
            },
            address_type: slice.address_type,
            local,
        })
    }
}

#[cfg(test)]
mod tests {
    use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};

    use super::*;

    #[test]
    fn a_slice_record_holds_only_this_nodes_endpoints() {
        let slice = endpoint_slice(
            "shop",
            "web",
            "web-x1",
            &[
                SliceEndpoint::ready("10.0.0.1", "n2"),
                SliceEndpoint {
                    ready: false,
                    ..SliceEndpoint::ready("10.0.0.2", "n1")
                },
                SliceEndpoint::ready("10.0.0.3", "n3"),
                SliceEndpoint::ready("10.0.0.4", "n1"),
            ],
        );
        let record = SliceRecord::of(slice.clone(), "n1").expect("n1 has endpoints");
        assert_eq!(
            record,
            SliceRecord {
                service: ServiceKey {
                    namespace: "shop".into(),
                    name: "web".into()
                },
                address_type: "IPv4".into(),
                local: vec![
                    EndpointState {
                        ready: Some(false),
                        serving: Some(false),
                        terminating: Some(false)
                    },
                    EndpointState {
                        ready: Some(true),
                        serving: Some(true),
                        terminating: Some(false)
                    },
                ],
            }
        );
        // A node with no endpoint in the slice keeps nothing of it.
        assert_eq!(SliceRecord::of(slice, "n9"), None);
    }

    /// A Service as a watch delivers it, decoded from JSON: the record
    /// keeps its lists at their length, not at the room the decoder made.
    #[test]
    fn a_service_record_holds_no_spare_room() {
        // From text, as the watch reads it: the decoder does not know the
        // lengths of the lists before it has read them.
        let text = serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "uid": "u1"},
            "spec": {
                "type": "LoadBalancer",
                "clusterIP": "10.96.0.10",
                "clusterIPs": ["10.96.0.10"],
                "externalIPs": ["192.0.2.10"]
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}
        })
        .to_string();
        let svc: Service = serde_json::from_str(&text).expect("a Service");
        let record = ServiceRecord::of(svc);
        assert_eq!(record.ingress.len(), 1);
        assert_eq!(record.ingress.capacity(), 1);
        assert_eq!(record.cluster_ips, ["10.96.0.10"]);
        assert_eq!(record.cluster_ips.capacity(), 1);
        assert_eq!(record.external_ips, ["192.0.2.10"]);
        assert_eq!(record.external_ips.capacity(), 1);
    }

    #[test]
    fn a_service_record_keeps_only_the_annotations_read() {
        let mut svc = load_balancer_service("shop", "web", &["198.51.100.7"]);
        svc.metadata.annotations = Some(BTreeMap::from([
            (ADVERTISE_ANNOTATION.to_string(), "false".to_string()),
            ("holdfast.dev/med".to_string(), "20".to_string()),
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{}".to_string(),
            ),
        ]));
        let record = ServiceRecord::of(svc);
        assert_eq!(
            record.annotations.keys().collect::<Vec<_>>(),
            [ADVERTISE_ANNOTATION, "holdfast.dev/med"]
        );
        assert_eq!(
            record.ingress,
            [Ingress {
                ip: Some("198.51.100.7".into()),
                hostname: None
            }]
        );
    }
}
