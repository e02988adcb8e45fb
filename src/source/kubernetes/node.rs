//! Whether this node advertises anything at all.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use crate::config::Speaker;

/// The well-known label that keeps a node out of external load balancing
/// (any value; the cloud controllers and MetalLB honour it the same way).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Why this node advertises nothing, or `None` when it may advertise.
/// Every reason is deliberate (an operator cordoned, tainted, excluded or
/// deselected the node), so routes go at once: `Absence::Drained`.
pub(crate) fn node_problem(
    speaker: &Speaker,
    node_name: &str,
    node: Option<&Node>,
) -> Option<String> {
    let Some(node) = node else {
        return Some(format!(
            "node \"{node_name}\" does not exist in the API server (is NODE_NAME right?)"
        ));
    };
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if let Some(value) = labels.get(EXCLUDE_LABEL) {
        return Some(format!(
            "node \"{node_name}\" is excluded: it has the label {EXCLUDE_LABEL}=\"{value}\""
        ));
    }
    if let Some(selector) = &speaker.node_selector
        && let Some(miss) = selector.first_mismatch(labels)
    {
        return Some(format!(
            "node \"{node_name}\" does not match speaker.node_selector: {miss}"
        ));
    }
    let spec = node.spec.as_ref();
    if speaker.drain_on_cordon && spec.and_then(|s| s.unschedulable) == Some(true) {
        return Some(format!(
            "node \"{node_name}\" is cordoned (spec.unschedulable) and speaker.drain_on_cordon is true"
        ));
    }
    // Only the taints the operator named: the lifecycle controller's own
    // NoExecute taints (not-ready, unreachable) come and go without anyone
    // deciding anything, and the node may well still forward.
    let drain_taint = spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|t| speaker.drain_taints.contains(&t.key));
    if let Some(taint) = drain_taint {
        let value = taint
            .value
            .as_deref()
            .map(|v| format!("={v}"))
            .unwrap_or_default();
        return Some(format!(
            "node \"{node_name}\" has the taint {}{value}:{}, which speaker.drain_taints lists",
            taint.key, taint.effect
        ));
    }
    None
}
