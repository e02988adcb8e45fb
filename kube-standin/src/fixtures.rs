//! Builders for the objects holdfast's tests need most: LoadBalancer
//! Services, their EndpointSlices, and Nodes. Plain k8s-openapi values; pass
//! them to [`crate::StandIn::create`] and friends.

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, NodeSpec, NodeStatus, Service,
    ServicePort, ServiceSpec, ServiceStatus,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

/// A `type: LoadBalancer` Service on TCP port 80 whose
/// `status.loadBalancer.ingress` lists `ingress_ips` (none: not yet
/// assigned, or a VIP that has flapped away).
pub fn load_balancer_service(namespace: &str, name: &str, ingress_ips: &[&str]) -> Service {
    Service {
        metadata: meta(Some(namespace), name),
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_string()),
            external_traffic_policy: Some("Cluster".to_string()),
            ports: Some(vec![ServicePort {
                name: Some("http".to_string()),
                port: 80,
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(
                    ingress_ips
                        .iter()
                        .map(|ip| LoadBalancerIngress {
                            ip: Some((*ip).to_string()),
                            ip_mode: Some("VIP".to_string()),
                            ..LoadBalancerIngress::default()
                        })
                        .collect(),
                ),
            }),
            ..ServiceStatus::default()
        }),
    }
}

/// One endpoint of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceEndpoint {
    pub address: String,
    pub node_name: Option<String>,
    pub ready: bool,
}

impl SliceEndpoint {
    /// A ready endpoint at `address` on node `node_name`.
    pub fn ready(address: &str, node_name: &str) -> Self {
        SliceEndpoint {
            address: address.to_string(),
            node_name: Some(node_name.to_string()),
            ready: true,
        }
    }
}

/// An IPv4 EndpointSlice named `name` for Service `service`, port 80.
pub fn endpoint_slice(
    namespace: &str,
    service: &str,
    name: &str,
    endpoints: &[SliceEndpoint],
) -> EndpointSlice {
    let mut metadata = meta(Some(namespace), name);
    metadata.labels = Some(BTreeMap::from([(
        SERVICE_NAME_LABEL.to_string(),
        service.to_string(),
    )]));
    EndpointSlice {
        metadata,
        address_type: "IPv4".to_string(),
        endpoints: Some(
            endpoints
                .iter()
                .map(|e| Endpoint {
                    addresses: vec![e.address.clone()],
                    node_name: e.node_name.clone(),
                    conditions: Some(EndpointConditions {
                        ready: Some(e.ready),
                        serving: Some(e.ready),
                        terminating: Some(false),
                    }),
                    ..Endpoint::default()
                })
                .collect(),
        ),
        ports: Some(vec![EndpointPort {
            name: Some("http".to_string()),
            port: Some(80),
            protocol: Some("TCP".to_string()),
            ..EndpointPort::default()
        }]),
    }
}

/// A Node with an `InternalIP` address and the given labels.
pub fn node(name: &str, internal_ip: &str, labels: &[(&str, &str)]) -> Node {
    let mut metadata = meta(None, name);
    metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    );
    Node {
        metadata,
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".to_string(),
                    address: internal_ip.to_string(),
                },
                NodeAddress {
                    type_: "Hostname".to_string(),
                    address: name.to_string(),
                },
            ]),
            ..NodeStatus::default()
        }),
    }
}
