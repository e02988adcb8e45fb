//! The kinds of object the stand-in serves: one row per resource, as the
//! API server's discovery documents describe them. Adding a resource is
//! adding a row.

/// One served resource: where it lives in the URL space and what it is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResourceType {
    /// API group; empty for the core ("legacy") group served under `/api`.
    pub group: &'static str,
    pub version: &'static str,
    /// The URL path segment, e.g. `endpointslices`.
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether the resource has a `/status` subresource. For these, writes to
    /// the main resource leave `.status` alone and writes to `/status` change
    /// only `.status`, as the real API server does.
    pub has_status: bool,
    /// Defined by a CustomResourceDefinition: served only while the CRD
    /// named `PLURAL.GROUP` exists in the store (created by the test, e.g.
    /// with `kubectl create -f` of the shipped YAML), and its
    /// `additionalPrinterColumns` shape `kubectl get`'s table.
    pub custom: bool,
}

impl ResourceType {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The name of the CustomResourceDefinition that defines a custom
    /// resource: `PLURAL.GROUP`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The `group/version` and `kind` of a typed object, e.g. `("v1", "Service")`.
    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && self.api_version() == api_version
    }
}

const fn row(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    has_status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced,
        has_status,
        custom: false,
    }
}

/// A resource defined by a CustomResourceDefinition (see
/// [`ResourceType::custom`]); it always has the status subresource here.
const fn custom(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced,
        has_status: true,
        custom: true,
    }
}

/// Every resource the stand-in serves.
pub(crate) const RESOURCES: &[ResourceType] = &[
    row("", "v1", "services", "Service", true, true),
    row("", "v1", "endpoints", "Endpoints", true, false),
    row("", "v1", "nodes", "Node", false, true),
    row("", "v1", "namespaces", "Namespace", false, true),
    row("", "v1", "pods", "Pod", true, true),
    row("", "v1", "configmaps", "ConfigMap", true, false),
    row("", "v1", "events", "Event", true, false),
    row(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        false,
    ),
    row("events.k8s.io", "v1", "events", "Event", true, false),
    row("coordination.k8s.io", "v1", "leases", "Lease", true, false),
    row(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        true,
    ),
    // holdfast's own (deploy/cluster/bgpnodestatus-crd.yaml).
    custom(
        "holdfast.dev",
        "v1alpha1",
        "bgpnodestatuses",
        "BGPNodeStatus",
        false,
    ),
];

/// Index into [`RESOURCES`].
pub(crate) type ResourceId = usize;

pub(crate) fn by_path(group: &str, version: &str, plural: &str) -> Option<ResourceId> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<ResourceId> {
    RESOURCES.iter().position(|r| r.is(api_version, kind))
}

/// The resources of one group/version, for discovery documents.
pub(crate) fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceType> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// The non-core groups with their version, in table order, each once.
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The CustomResourceDefinitions themselves.
pub(crate) fn crds() -> Option<ResourceId> {
    by_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
}

/// Both kinds of Event: `core/v1` and `events.k8s.io/v1`.
pub(crate) fn is_event(id: ResourceId) -> bool {
    RESOURCES.get(id).is_some_and(|r| r.kind == "Event")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_agree() {
        let svc = by_path("", "v1", "services").expect("services served");
        assert_eq!(by_kind("v1", "Service"), Some(svc));
        let slices = by_path("discovery.k8s.io", "v1", "endpointslices").expect("slices served");
        assert_eq!(
            by_kind("discovery.k8s.io/v1", "EndpointSlice"),
            Some(slices)
        );
        let core_ev = by_kind("v1", "Event").expect("core events");
        let new_ev = by_kind("events.k8s.io/v1", "Event").expect("events.k8s.io events");
        assert_ne!(core_ev, new_ev);
        assert!(is_event(core_ev) && is_event(new_ev) && !is_event(svc));
        assert_eq!(by_path("", "v1", "widgets"), None);
        assert_eq!(
            groups(),
            [
                ("discovery.k8s.io", "v1"),
                ("events.k8s.io", "v1"),
                ("coordination.k8s.io", "v1"),
                ("apiextensions.k8s.io", "v1"),
                ("holdfast.dev", "v1alpha1"),
            ]
        );
        let custom = by_path("holdfast.dev", "v1alpha1", "bgpnodestatuses").expect("custom");
        assert_eq!(RESOURCES[custom].crd_name(), "bgpnodestatuses.holdfast.dev");
    }
}
