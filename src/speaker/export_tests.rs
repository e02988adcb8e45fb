//! The export policy and the tenant gate, as a pure function and through
//! the peers' tables (RFC 4271 §9.1.3).

use std::collections::BTreeSet;
use std::path::Path;

use ipnet::IpNet;

use super::*;
use crate::config::Config;
use crate::model::{Route, SourceId};

const BASE: &str = r#"
[speaker]
asn = 65001
[[peer]]
name = "tor-a"
address = "192.0.2.1"
asn = 65000
POLICY_A
[[peer]]
name = "tor-b"
address = "192.0.2.5"
asn = 65001
POLICY_B
[source]
kind = "file"
path = "vips.toml"
[[advertisement]]
name = "public"
communities = ["65001:100"]
[[tenant]]
name = "acme"
namespaces = ["acme-prod"]
peers = ["tor-a"]
[[tenant]]
name = "globex"
peers = ["tor-b"]
"#;

fn config(a: &str, b: &str) -> Config {
    let text = BASE.replace("POLICY_A", a).replace("POLICY_B", b);
    crate::config::parse(Path::new("t.toml"), &text).unwrap_or_else(|d| {
        panic!("{}", crate::config::list_diagnostics(&d));
    })
}

fn route(service: Option<&str>, tenant: Option<&str>) -> Route {
    let mut r = Route::new(
        std::sync::Arc::new(BTreeSet::from(["public".to_string()])),
        service.map(Into::into),
        None,
    );
    r.make_mut().tenant = tenant.map(Into::into);
    r
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn tables(
    c: &Config,
    routes: &[(IpNet, Route)],
) -> std::collections::BTreeMap<String, crate::speaker::PeerTable> {
    crate::speaker::peer_tables(c, routes.iter().map(|(p, r)| (p, r)))
}

#[test]
fn the_first_terminal_rule_decides_and_continue_rules_add_up() {
    let c = config(
        r#"
[[peer.export]]
name = "tag"
prefixes = ["198.51.100.0/24 le 32"]
set_add_communities = ["65000:1"]
set_remove_communities = ["65001:100"]
[[peer.export]]
name = "drop-small"
prefixes = ["198.51.100.128/25 le 32"]
action = "reject"
[[peer.export]]
prefixes = ["198.51.100.0/24 le 32"]
set_med = 50
set_prepend = 2
action = "accept"
[[peer.export]]
set_med = 99
"#,
        "",
    );
    let peer = c.peer("tor-a").unwrap();
    let r = route(None, None);
    let base = RouteAttrs {
        communities: vec![0xfde9_0064],
        ..Default::default()
    };
    let p = net("198.51.100.10/32");
    let v = apply(&peer.export, &Subject::new(&c, &p, &r), base.clone());
    assert_eq!(v.decision, Decision::Rule(2, ExportAction::Accept));
    assert_eq!(v.matched, vec![0, 2]);
    let a = v.attrs.unwrap();
    assert_eq!(a.communities, vec![0xfde8_0001], "added and removed");
    assert_eq!((a.med, a.as_path_prepend), (Some(50), 2));
    assert_eq!(
        describe(
            peer,
            &apply(&peer.export, &Subject::new(&c, &p, &r), base.clone())
        ),
        "export rule 1 (\"tag\") set add communities 65000:1, remove communities 65001:100; export rule 3 set med 50, prepend 2; export rule 3 accepts it"
    );
    // In the rejected half: the reject rule ends it, its sets unused.
    let p = net("198.51.100.200/32");
    let v = apply(&peer.export, &Subject::new(&c, &p, &r), base.clone());
    assert_eq!(v.decision, Decision::Rule(1, ExportAction::Reject));
    assert_eq!(v.attrs, None);
    assert!(describe(peer, &v).ends_with("export rule 2 (\"drop-small\") rejects it"));
    // Outside every prefix range: only the last, match-anything rule;
    // export_default accepts.
    let p = net("203.0.113.1/32");
    let v = apply(&peer.export, &Subject::new(&c, &p, &r), base.clone());
    assert_eq!(v.decision, Decision::Default(ExportAction::Accept));
    assert_eq!(v.attrs.unwrap().med, Some(99));
}

#[test]
fn export_default_reject_sends_only_what_a_rule_accepts() {
    let c = config(
        r#"export_default = "reject"
[[peer.export]]
namespaces = ["web"]
action = "accept"
"#,
        "",
    );
    let t = tables(
        &c,
        &[
            (net("198.51.100.1/32"), route(Some("web/a"), None)),
            (net("198.51.100.2/32"), route(Some("db/a"), None)),
            (net("198.51.100.3/32"), route(None, None)),
        ],
    );
    let a: Vec<_> = t["tor-a"].keys().copied().collect();
    assert_eq!(a, vec![net("198.51.100.1/32")]);
    assert_eq!(t["tor-b"].len(), 3, "tor-b has no policy");
}

#[test]
fn matches_on_advertisement_community_source_and_tenant() {
    let c = config(
        r#"
[[peer.export]]
advertisements = ["public"]
communities = ["65001:100"]
sources = ["file"]
set_local_pref = 300
action = "accept"
"#,
        r#"
[[peer.export]]
tenants = ["globex"]
set_add_large_communities = ["65001:7:7"]
set_local_pref = 250
"#,
    );
    let t = tables(
        &c,
        &[
            (net("198.51.100.1/32"), route(None, None)),
            (net("198.51.100.2/32"), route(None, Some("globex"))),
        ],
    );
    assert_eq!(t["tor-a"][&net("198.51.100.1/32")].local_pref, Some(300));
    let g = &t["tor-b"][&net("198.51.100.2/32")];
    assert_eq!(
        (g.local_pref, g.large_communities.clone()),
        (Some(250), vec![(65001, 7, 7)])
    );
    assert_eq!(t["tor-b"][&net("198.51.100.1/32")].local_pref, None);
    // Another source's route does not match `sources = ["file"]`.
    let other = route(None, None).from_source(SourceId(1));
    let p = net("198.51.100.9/32");
    let peer = c.peer("tor-a").unwrap();
    let v = apply(
        &peer.export,
        &Subject::new(&c, &p, &other),
        RouteAttrs::default(),
    );
    assert_eq!(v.decision, Decision::Default(ExportAction::Accept));
}

#[test]
fn a_tenants_routes_reach_only_its_peers() {
    let c = config("", "");
    let routes = [
        // acme by namespace, globex by the VIP file's tenant, one of none.
        (net("198.51.100.1/32"), route(Some("acme-prod/web"), None)),
        (net("198.51.100.2/32"), route(None, Some("globex"))),
        (net("198.51.100.3/32"), route(Some("other/web"), None)),
        // A tenant the config does not define reaches no peer.
        (net("198.51.100.4/32"), route(None, Some("nobody"))),
    ];
    let t = tables(&c, &routes);
    let keys = |p: &str| t[p].keys().copied().collect::<Vec<_>>();
    assert_eq!(
        keys("tor-a"),
        vec![net("198.51.100.1/32"), net("198.51.100.3/32")]
    );
    assert_eq!(
        keys("tor-b"),
        vec![net("198.51.100.2/32"), net("198.51.100.3/32")]
    );
    let v =
        crate::speaker::export_verdict(&c, c.peer("tor-b").unwrap(), &routes[0].0, &routes[0].1)
            .unwrap();
    assert_eq!(v.decision, Decision::Tenant("acme".into()));
    assert_eq!(
        describe(c.peer("tor-b").unwrap(), &v),
        "tenant \"acme\" may not reach this peer ([[tenant]] peers)"
    );
}

#[test]
fn no_policy_and_no_tenant_is_the_table_as_before() {
    let text = BASE.replace("POLICY_A", "").replace("POLICY_B", "");
    let no_tenants = text.split("[[tenant]]").next().unwrap();
    let plain = crate::config::parse(Path::new("t.toml"), no_tenants).unwrap();
    let routes = [(net("198.51.100.1/32"), route(None, None))];
    let t = tables(&plain, &routes);
    let peer = plain.peer("tor-a").unwrap();
    let v = crate::speaker::export_verdict(&plain, peer, &routes[0].0, &routes[0].1).unwrap();
    assert_eq!(v.decision, Decision::PassThrough);
    assert_eq!(Some(&*t["tor-a"][&routes[0].0]), v.attrs.as_ref());
    assert_eq!(describe(peer, &v), "");
}

/// Routes that share one allocation (a file's VIPs do) are judged by
/// prefix when a rule has prefix ranges, and once for all otherwise.
#[test]
fn routes_sharing_one_allocation_are_judged_by_prefix_when_rules_need_it() {
    let c = config(
        r#"
[[peer.export]]
prefixes = ["198.51.100.0/25 le 32"]
action = "reject"
"#,
        r#"
[[peer.export]]
advertisements = ["public"]
set_med = 5
"#,
    );
    let shared = route(None, None);
    let routes: Vec<(IpNet, Route)> = ["198.51.100.1/32", "198.51.100.2/32", "198.51.100.200/32"]
        .iter()
        .map(|p| (net(p), shared.clone()))
        .collect();
    let t = tables(&c, &routes);
    let a: Vec<_> = t["tor-a"].keys().copied().collect();
    assert_eq!(a, vec![net("198.51.100.200/32")]);
    assert_eq!(t["tor-b"].len(), 3);
    assert!(t["tor-b"].values().all(|a| a.med == Some(5)));
}
