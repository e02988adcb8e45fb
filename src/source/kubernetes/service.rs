//! What holdfast reads off a Service: its addresses of each kind, its type
//! and class, the opt-out annotation and its traffic policies.

use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;

use super::records::ServiceRecord;
use crate::config::AddressKind;

/// The annotation that takes a Service out of holdfast's hands.
pub const ADVERTISE_ANNOTATION: &str = "holdfast.dev/advertise";

/// A Service by namespace and name, the way `kubectl` writes it
/// ("namespace/name"). Ordered, so evaluations are deterministic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceKey {
    /// `metadata.namespace` ("default" when unset, as the API server does).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl ServiceKey {
    /// The key of a Service object.
    pub fn of(service: &Service) -> ServiceKey {
        ServiceKey {
            namespace: service
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".to_string()),
            name: service.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// Reads "namespace/name" (as in [`crate::model::Vip::service`]).
    pub fn parse(text: &str) -> Option<ServiceKey> {
        let (namespace, name) = text.split_once('/')?;
        (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then(|| ServiceKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The addresses of one kind a Service carries, and what could not be
/// read (hostname-only ingress entries, malformed addresses).
#[derive(Debug, Default)]
pub(crate) struct Addresses {
    pub ips: Vec<IpAddr>,
    pub warnings: Vec<String>,
}

/// `spec.type`; the API server defaults it to ClusterIP.
pub(crate) fn service_type(service: &ServiceRecord) -> &str {
    service.type_.as_deref().unwrap_or("ClusterIP")
}

/// `spec.loadBalancerClass`.
pub(crate) fn load_balancer_class(service: &ServiceRecord) -> Option<&str> {
    service.load_balancer_class.as_deref()
}

/// The value of the opt-out annotation when it says "false". Only that
/// exact value opts out: any other value (or none) leaves the Service to the
/// rules, so a typo cannot withdraw a route.
pub(crate) fn opted_out(service: &ServiceRecord) -> bool {
    service
        .annotations
        .get(ADVERTISE_ANNOTATION)
        .is_some_and(|v| v == "false")
}

/// True when the traffic policy that governs addresses of `kind` is
/// `Local`: `externalTrafficPolicy` for LoadBalancer and external IPs (the
/// "externally-facing" addresses in the API's words), `internalTrafficPolicy`
/// for cluster IPs.
pub(crate) fn local_traffic_policy(service: &ServiceRecord, kind: AddressKind) -> bool {
    let policy = match kind {
        AddressKind::LoadBalancerIp | AddressKind::ExternalIp => &service.external_traffic_policy,
        AddressKind::ClusterIp => &service.internal_traffic_policy,
    };
    policy.as_deref() == Some("Local")
}

/// The field a kind of address comes from, for messages.
pub(crate) fn field_of(kind: AddressKind) -> &'static str {
    match kind {
        AddressKind::LoadBalancerIp => "status.loadBalancer.ingress",
        AddressKind::ExternalIp => "spec.externalIPs",
        AddressKind::ClusterIp => "spec.clusterIPs",
    }
}

/// The name a kind has in the config's `addresses`.
pub(crate) fn kind_name(kind: AddressKind) -> &'static str {
    match kind {
        AddressKind::LoadBalancerIp => "LoadBalancerIP",
        AddressKind::ExternalIp => "ExternalIP",
        AddressKind::ClusterIp => "ClusterIP",
    }
}

/// The Service's addresses of `kind`, whatever its type (the caller
/// decides whether they count). Duplicates are kept once.
pub(crate) fn addresses(service: &ServiceRecord, kind: AddressKind) -> Addresses {
    let key = &service.key;
    let mut out = Addresses::default();
    let push = |text: &str, at: String, out: &mut Addresses| match text.parse::<IpAddr>() {
        Ok(ip) => {
            // An IPv4-mapped address is the IPv4 VIP (crate::model::net).
            let ip = crate::model::net::unmap(ip);
            if !out.ips.contains(&ip) {
                out.ips.push(ip);
            }
        }
        Err(_) => out.warnings.push(format!(
            "{key}: {at} is \"{text}\", not an IP address; skipped"
        )),
    };
    match kind {
        AddressKind::LoadBalancerIp => {
            for (i, entry) in service.ingress.iter().enumerate() {
                match (&entry.ip, &entry.hostname) {
                    (Some(ip), _) => push(ip, format!("{}[{i}].ip", field_of(kind)), &mut out),
                    (None, Some(hostname)) => out.warnings.push(format!(
                        "{key}: {}[{i}] has only the hostname \"{hostname}\"; a hostname cannot be advertised as a route, skipped",
                        field_of(kind)
                    )),
                    (None, None) => {}
                }
            }
        }
        AddressKind::ExternalIp => {
            for (i, ip) in service.external_ips.iter().enumerate() {
                push(ip, format!("{}[{i}]", field_of(kind)), &mut out);
            }
        }
        AddressKind::ClusterIp => {
            // clusterIPs[0] == clusterIP when both are set; older objects
            // may carry only clusterIP.
            let ips: Vec<&String> = match (&service.cluster_ips, &service.cluster_ip) {
                (ips, _) if !ips.is_empty() => ips.iter().collect(),
                (_, Some(ip)) => vec![ip],
                _ => Vec::new(),
            };
            for (i, ip) in ips.into_iter().enumerate() {
                // "None" marks a headless Service: it has no cluster IP.
                if ip.is_empty() || ip == "None" {
                    continue;
                }
                push(ip, format!("{}[{i}]", field_of(kind)), &mut out);
            }
        }
    }
    out
}
