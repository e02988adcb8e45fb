//! Whether this node advertises anything at all.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use crate::config::Speaker;

/// The well-known label that keeps a node out of external load balancing
/// (any value; the cloud controllers and MetalLB honour it the same way).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Why this node advertises nothing, or `None` when it may advertise.
/// Every reason but the first is deliberate (an operator cordoned,
/// tainted, excluded or deselected the node), so routes go at once:
/// `Absence::Drained`. The Node missing from the API server is not (it
/// was deleted, or this is the wrong cluster): the policy takes its VIPs
/// as absent (`Absence::Vanished`), held down and then paced by the guard.
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

/// The taint an operator puts on a node that is down for good
/// (non-graceful node shutdown, Kubernetes 1.28): its pods are gone.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// What kubelet's graceful node shutdown writes into the Ready condition's
/// message while the machine shuts down (its shutdown manager's
/// `ShutdownStatus()` error, which the Ready setter reports as NotReady).
pub const SHUTTING_DOWN_MESSAGE: &str = "node is shutting down";

/// Whether this node is going away, as the API server shows it. Read by
/// the daemon at SIGTERM (keep the routes through graceful restart or
/// withdraw them, [`crate::daemon::drain::exit_plan`]) and while it runs
/// (a shutdown starts the drain at once).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `metadata.deletionTimestamp` is set: the Node object is being
    /// deleted (the machine is leaving the cluster).
    pub deleting: bool,
    /// kubelet's graceful node shutdown has begun: the Ready condition is
    /// not True and its message says "node is shutting down".
    pub shutting_down: bool,
    /// The `node.kubernetes.io/out-of-service` taint.
    pub out_of_service: bool,
    /// Why the policy lets this node advertise nothing (cordoned, a
    /// `drain_taints` taint, excluded, deselected), from the source's
    /// last evaluation: routes already on their way out, which an exit
    /// must not keep through graceful restart.
    pub drained: Option<String>,
}

impl NodeFacts {
    /// Why this node is going away, or `None`.
    pub fn going_away(&self) -> Option<&'static str> {
        if self.deleting {
            Some("the Node object is being deleted (deletionTimestamp)")
        } else if self.shutting_down {
            Some("kubelet reports the node shutting down (Ready=False: \"node is shutting down\")")
        } else if self.out_of_service {
            Some("the node has the taint node.kubernetes.io/out-of-service")
        } else {
            None
        }
    }
}

/// The facts of `node`.
pub fn node_facts(node: &Node) -> NodeFacts {
    let shutting_down = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| {
            c.type_ == "Ready"
                && c.status != "True"
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(SHUTTING_DOWN_MESSAGE))
        });
    let out_of_service = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == OUT_OF_SERVICE_TAINT);
    NodeFacts {
        deleting: node.metadata.deletion_timestamp.is_some(),
        shutting_down,
        out_of_service,
        drained: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn ready(status: &str, reason: &str, message: &str) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn a_ready_node_is_not_going_away() {
        let n = ready("True", "KubeletReady", "kubelet is posting ready status");
        assert_eq!(node_facts(&n), NodeFacts::default());
        assert_eq!(node_facts(&n).going_away(), None);
        assert_eq!(node_facts(&Node::default()), NodeFacts::default());
    }

    #[test]
    fn kubelet_graceful_shutdown_is_read_off_the_ready_condition() {
        // As kubelet writes it: its errors joined into the message.
        let n = ready(
            "False",
            "KubeletNotReady",
            "[container runtime status check may not have completed yet, node is shutting down]",
        );
        assert!(node_facts(&n).shutting_down);
        assert!(
            node_facts(&n)
                .going_away()
                .unwrap()
                .contains("shutting down")
        );
        // NotReady for another reason (network plugin, runtime): the node
        // may come back, nothing is going away.
        let n = ready(
            "False",
            "KubeletNotReady",
            "container runtime network not ready",
        );
        assert!(!node_facts(&n).shutting_down);
        // Ready again after a cancelled shutdown.
        let n = ready("True", "KubeletReady", "node is shutting down");
        assert!(!node_facts(&n).shutting_down);
    }

    #[test]
    fn deletion_and_the_out_of_service_taint() {
        let mut n = Node::default();
        n.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert!(node_facts(&n).deleting);
        let n = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![Taint {
                    key: OUT_OF_SERVICE_TAINT.into(),
                    effect: "NoExecute".into(),
                    value: Some("nodeshutdown".into()),
                    ..Taint::default()
                }]),
                ..NodeSpec::default()
            }),
            ..Node::default()
        };
        assert!(node_facts(&n).out_of_service);
        assert!(node_facts(&n).going_away().is_some());
    }
}
