//! `holdfast cluster status` and `holdfast cluster explain VIP` (also
//! `kubectl holdfast cluster …`, the binary installed as
//! `kubectl-holdfast`): the whole cluster's view, read from the
//! `BGPNodeStatus` objects every node's holdfast writes (and nothing else:
//! no node is contacted). The Kubernetes credentials are the caller's:
//! `--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config` or the pod's
//! service account.
//!
//! The reading of the objects ([`Cluster`]) is pure: the tests give it
//! objects, the command gives it the list the API server returned.

use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use serde::Serialize;

use super::table::{Align, table};
use crate::api::parse_vip;
use crate::report::node_status::{self, NodeStatusBody};

/// One node's object: its name and status (`None` when it has none yet,
/// or one this holdfast cannot read).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeObject {
    pub name: String,
    pub status: Option<NodeStatusBody>,
}

/// The answer of `cluster explain` for one node.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAnswer {
    pub node: String,
    /// The node announces the VIP (to at least one peer).
    pub announces: bool,
    /// The peers it announces it to, with their session state.
    pub peers: Vec<String>,
    /// Why it does not (or what else to know), one line each.
    pub why: Vec<String>,
    /// The VIP's last change on this node, when the node recorded one:
    /// `announced at …` / `withdrawn at …`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_change: Option<String>,
}

/// The whole answer of `cluster explain VIP`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExplanation {
    pub vip: String,
    pub announced_by: usize,
    pub nodes: Vec<NodeAnswer>,
}

/// Whether `entry` (`198.51.100.0/24`, `198.51.100.10-198.51.100.20`)
/// covers `ip`.
fn covers(entry: &str, ip: IpAddr) -> bool {
    if let Some((first, last)) = entry.split_once('-') {
        let (Ok(first), Ok(last)) = (first.parse::<IpAddr>(), last.parse::<IpAddr>()) else {
            return false;
        };
        return match (first, last, ip) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(x)) => (a..=b).contains(&x),
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(x)) => (a..=b).contains(&x),
            _ => false,
        };
    }
    entry.parse::<IpNet>().is_ok_and(|net| net.contains(&ip))
}

/// What node `o` does with `ip`, from its object alone.
pub fn explain_node(o: &NodeObject, ip: IpAddr) -> NodeAnswer {
    let mut answer = NodeAnswer {
        node: o.name.clone(),
        announces: false,
        peers: Vec::new(),
        why: Vec::new(),
        last_change: None,
    };
    let Some(s) = &o.status else {
        answer
            .why
            .push("no status written yet (holdfast not running there, or not yet synced)".into());
        return answer;
    };
    for group in &s.announced {
        if group.prefixes.iter().any(|p| covers(p, ip)) {
            answer.announces = true;
            answer.peers.extend(group.peers.iter().map(|name| {
                let state = s
                    .peers
                    .iter()
                    .find(|p| p.name == *name)
                    .map_or("?", |p| p.state.as_str());
                if state == "Established" {
                    name.clone()
                } else {
                    format!("{name} ({state})")
                }
            }));
        }
    }
    let withheld = s.withheld.iter().find(|w| covers(&w.prefix, ip));
    if let Some(w) = withheld {
        let reasons = if w.reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", w.reasons.join("; "))
        };
        answer.why.push(format!("{}{reasons}", w.state));
    }
    if !answer.announces && withheld.is_none() {
        if s.announced_not_listed > 0 || s.withheld_not_listed > 0 {
            answer.why.push(format!(
                "not in the node's lists, which are cut ({} announced and {} withheld prefixes not listed)",
                s.announced_not_listed, s.withheld_not_listed
            ));
        } else {
            answer
                .why
                .push("not in this node's set (its sources do not have it)".into());
        }
    }
    if let Some(drain) = &s.drain {
        answer.why.push(format!("node drain: {drain}"));
    }
    if s.source != "Healthy" {
        answer.why.push(format!("source: {}", s.source));
    }
    if !answer.announces && s.peers_established == 0 && s.peers_configured > 0 {
        answer.why.push(format!(
            "no session Established (of {})",
            s.peers_configured
        ));
    }
    answer.last_change = s
        .changes
        .iter()
        .find(|c| covers(&c.prefix, ip))
        .map(|c| format!("{} at {}", c.change, c.at));
    answer
}

/// `cluster explain VIP` over every node's object, in name order.
pub fn explain(objects: &[NodeObject], ip: IpAddr) -> ClusterExplanation {
    let mut nodes: Vec<NodeAnswer> = objects.iter().map(|o| explain_node(o, ip)).collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    ClusterExplanation {
        vip: ip.to_string(),
        announced_by: nodes.iter().filter(|n| n.announces).count(),
        nodes,
    }
}

/// The text of `cluster explain`.
pub fn explain_text(e: &ClusterExplanation) -> String {
    let mut out = format!(
        "{}: announced by {} of {} node{}\n",
        e.vip,
        e.announced_by,
        e.nodes.len(),
        if e.nodes.len() == 1 { "" } else { "s" }
    );
    let rows: Vec<Vec<String>> = e
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.node.clone(),
                if n.announces { "yes" } else { "no" }.into(),
                if n.peers.is_empty() {
                    "-".into()
                } else {
                    n.peers.join(",")
                },
                if n.why.is_empty() {
                    "-".into()
                } else {
                    n.why.join("; ")
                },
                n.last_change.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            ("NODE", Align::Left),
            ("ANNOUNCES", Align::Left),
            ("TO", Align::Left),
            ("WHY / NOTES", Align::Left),
            ("LAST CHANGE", Align::Left),
        ],
        &rows,
    ));
    out
}

/// How many prefixes the node announces to at least one peer: those its
/// object lists (a run counts each address) and those it only counts.
pub fn announced_count(s: &NodeStatusBody) -> u128 {
    let entry = |e: &String| -> u128 {
        let Some((first, last)) = e.split_once('-') else {
            return 1;
        };
        match (first.parse::<IpAddr>(), last.parse::<IpAddr>()) {
            (Ok(IpAddr::V4(a)), Ok(IpAddr::V4(b))) => {
                u128::from(u32::from(b).saturating_sub(u32::from(a))) + 1
            }
            (Ok(IpAddr::V6(a)), Ok(IpAddr::V6(b))) => u128::from(b)
                .saturating_sub(u128::from(a))
                .saturating_add(1),
            _ => 1,
        }
    };
    s.announced
        .iter()
        .flat_map(|a| &a.prefixes)
        .map(entry)
        .fold(u128::from(s.announced_not_listed), u128::saturating_add)
}

/// The text of `cluster status`: a row per node.
pub fn status_text(objects: &[NodeObject]) -> String {
    let mut sorted: Vec<&NodeObject> = objects.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let rows: Vec<Vec<String>> = sorted
        .iter()
        .map(|o| match &o.status {
            None => vec![
                o.name.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "no status".into(),
                "-".into(),
            ],
            Some(s) => {
                let withheld = s.withheld.len() as u64 + s.withheld_not_listed;
                let last = s
                    .changes
                    .first()
                    .map(|c| format!("{} {} at {}", c.prefix, c.change, c.at))
                    .unwrap_or_else(|| "-".into());
                vec![
                    o.name.clone(),
                    s.asn.to_string(),
                    format!("{}/{}", s.peers_established, s.peers_configured),
                    announced_count(s).to_string(),
                    withheld.to_string(),
                    s.drain.clone().unwrap_or_else(|| "-".into()),
                    s.source.clone(),
                    last,
                ]
            }
        })
        .collect();
    table(
        &[
            ("NODE", Align::Left),
            ("ASN", Align::Right),
            ("PEERS UP", Align::Right),
            ("ANNOUNCED", Align::Right),
            ("WITHHELD", Align::Right),
            ("DRAIN", Align::Left),
            ("SOURCE", Align::Left),
            ("LAST CHANGE", Align::Left),
        ],
        &rows,
    )
}

/// Reads every `BGPNodeStatus` with the caller's credentials.
fn read_objects(kubeconfig: Option<&Path>) -> io::Result<Vec<NodeObject>> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = match kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                io::Error::other(format!(
                    "no Kubernetes credentials ({e}); give --kubeconfig or set KUBECONFIG"
                ))
            })?,
        };
        let client = kube::Client::try_from(config).map_err(io::Error::other)?;
        let api: Api<DynamicObject> = Api::all_with(
            client,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(node_status::GROUP, node_status::VERSION, node_status::KIND),
                node_status::PLURAL,
            ),
        );
        let list = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            api.list(&ListParams::default()),
        )
        .await
        .map_err(|_| io::Error::other("the API server did not answer within 30s"))?
        .map_err(|e| {
            io::Error::other(format!(
                "listing {}.{}: {}",
                node_status::PLURAL,
                node_status::GROUP,
                crate::source::kubernetes::forbidden::describe(&e)
            ))
        })?;
        Ok(list
            .items
            .into_iter()
            .map(|o| NodeObject {
                name: o.metadata.name.unwrap_or_default(),
                status: o
                    .data
                    .get("status")
                    .and_then(|s| serde_json::from_value(s.clone()).ok()),
            })
            .collect())
    })
}

/// `holdfast cluster status`: exit 0.
pub fn status(kubeconfig: Option<&Path>, json: bool, mut out: impl Write) -> io::Result<i32> {
    let objects = read_objects(kubeconfig)?;
    if json {
        let value: Vec<serde_json::Value> = objects
            .iter()
            .map(|o| serde_json::json!({"node": o.name, "status": o.status}))
            .collect();
        serde_json::to_writer_pretty(&mut out, &value).map_err(io::Error::other)?;
        writeln!(out)?;
    } else {
        out.write_all(status_text(&objects).as_bytes())?;
    }
    Ok(0)
}

/// `holdfast cluster explain VIP`: exit 0 when some node announces it, 1
/// when none does.
pub fn explain_command(
    kubeconfig: Option<&Path>,
    vip: &str,
    json: bool,
    mut out: impl Write,
) -> io::Result<i32> {
    let ip = parse_vip(vip).map_err(io::Error::other)?;
    let e = explain(&read_objects(kubeconfig)?, ip);
    if json {
        serde_json::to_writer_pretty(&mut out, &e).map_err(io::Error::other)?;
        writeln!(out)?;
    } else {
        out.write_all(explain_text(&e).as_bytes())?;
    }
    Ok(if e.announced_by > 0 { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::node_status::{Announced, Change, NodePeer, Withheld};

    fn node(name: &str) -> NodeStatusBody {
        NodeStatusBody {
            asn: 65001,
            source: "Healthy".into(),
            peers_established: 1,
            peers_configured: 1,
            peers: vec![NodePeer {
                name: "tor1".into(),
                state: "Established".into(),
                ..NodePeer::default()
            }],
            announced: vec![Announced {
                peers: vec!["tor1".into()],
                prefixes: vec!["198.51.100.10-198.51.100.12".into(), "10.0.0.0/24".into()],
            }],
            changes: vec![Change {
                prefix: "198.51.100.11/32".into(),
                change: "announced".into(),
                at: "2026-12-01T10:00:00Z".into(),
            }],
            router_id: name.into(),
            ..NodeStatusBody::default()
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn runs_and_prefixes_cover_their_addresses_only() {
        assert!(covers("198.51.100.10-198.51.100.12", ip("198.51.100.11")));
        assert!(covers("198.51.100.10-198.51.100.12", ip("198.51.100.12")));
        assert!(!covers("198.51.100.10-198.51.100.12", ip("198.51.100.13")));
        assert!(covers("10.0.0.0/24", ip("10.0.0.7")));
        assert!(!covers("10.0.0.0/24", ip("10.0.1.7")));
        assert!(covers("2001:db8::1-2001:db8::9", ip("2001:db8::5")));
        assert!(!covers("2001:db8::1-2001:db8::9", ip("198.51.100.11")));
        assert!(!covers("garbage", ip("198.51.100.11")));
    }

    #[test]
    fn explain_says_who_announces_to_whom_and_why_the_others_do_not() {
        let one = NodeObject {
            name: "node-1".into(),
            status: Some(node("node-1")),
        };
        let mut drained = node("node-2");
        drained.announced.clear();
        drained.drain = Some("drained".into());
        drained.withheld = vec![Withheld {
            prefix: "198.51.100.11/32".into(),
            state: "draining".into(),
            reasons: vec!["drained".into()],
        }];
        let mut no_endpoint = node("node-3");
        no_endpoint.announced.clear();
        no_endpoint.withheld = vec![Withheld {
            prefix: "198.51.100.11/32".into(),
            state: "not-selected".into(),
            reasons: vec!["no ready endpoint on this node".into()],
        }];
        let objects = [
            NodeObject {
                name: "node-3".into(),
                status: Some(no_endpoint),
            },
            one,
            NodeObject {
                name: "node-2".into(),
                status: Some(drained),
            },
            NodeObject {
                name: "node-4".into(),
                status: None,
            },
        ];
        let e = explain(&objects, ip("198.51.100.11"));
        assert_eq!(e.announced_by, 1);
        let names: Vec<&str> = e.nodes.iter().map(|n| n.node.as_str()).collect();
        assert_eq!(names, ["node-1", "node-2", "node-3", "node-4"]);
        assert!(e.nodes[0].announces);
        assert_eq!(e.nodes[0].peers, ["tor1"]);
        assert_eq!(
            e.nodes[0].last_change.as_deref(),
            Some("announced at 2026-12-01T10:00:00Z")
        );
        assert!(!e.nodes[1].announces);
        assert_eq!(e.nodes[1].why, ["draining: drained", "node drain: drained"]);
        assert_eq!(
            e.nodes[2].why,
            ["not-selected: no ready endpoint on this node"]
        );
        assert!(e.nodes[3].why[0].starts_with("no status"));
        let text = explain_text(&e);
        assert!(
            text.starts_with("198.51.100.11: announced by 1 of 4 nodes\n"),
            "{text}"
        );
        // A VIP nobody has.
        let none = explain(&objects, ip("203.0.113.1"));
        assert_eq!(none.announced_by, 0);
        assert_eq!(
            none.nodes[0].why,
            ["not in this node's set (its sources do not have it)"]
        );
        // A session down is said beside the peer.
        let mut down = node("node-5");
        down.peers[0].state = "Active".into();
        down.peers_established = 0;
        let d = explain_node(
            &NodeObject {
                name: "node-5".into(),
                status: Some(down),
            },
            ip("10.0.0.1"),
        );
        assert_eq!(d.peers, ["tor1 (Active)"]);
    }

    #[test]
    fn the_announced_count_counts_each_address_of_a_run() {
        let mut s = node("node-1");
        assert_eq!(announced_count(&s), 4);
        s.announced_not_listed = 10;
        s.announced[0]
            .prefixes
            .push("2001:db8::1-2001:db8::10".into());
        assert_eq!(announced_count(&s), 30);
    }

    #[test]
    fn a_cut_list_is_said_rather_than_taken_as_absence() {
        let mut s = node("node-1");
        s.announced.clear();
        s.announced_not_listed = 5;
        let a = explain_node(
            &NodeObject {
                name: "node-1".into(),
                status: Some(s),
            },
            ip("203.0.113.1"),
        );
        assert!(!a.announces);
        assert!(a.why[0].contains("which are cut"), "{:?}", a.why);
    }
}
