use std::path::Path;

use super::*;

/// [`super::desired`] as maps, after checking the contract of its routes:
/// in strictly ascending prefix order, one route per prefix, each one
/// `contains` answers for, as many as the size hint allows. `gate` is asked of every VIP of the snapshot;
/// those it passes are left out of the gates handed over, as the daemon
/// leaves out the VIPs no probe watches.
fn desired(
    config: &Config,
    snapshot: &SourceSnapshot,
    gate: impl Fn(IpAddr) -> Gate,
) -> (BTreeMap<IpNet, Route>, BTreeMap<IpNet, Absence>) {
    let gates: BTreeMap<IpAddr, Gate> = snapshot
        .vips
        .keys()
        .map(|ip| (*ip, gate(*ip)))
        .filter(|(_, g)| *g != Gate::Pass)
        .collect();
    let (present, absences) = super::desired(config, snapshot, &gates);
    let answers: Vec<bool> = snapshot
        .vips
        .keys()
        .map(|ip| present.contains(&IpNet::from(*ip)))
        .collect();
    let (least, most) = present.size_hint();
    let present: Vec<(IpNet, Route)> = present.collect();
    assert!(
        least <= present.len() && most.is_none_or(|most| present.len() <= most),
        "{} routes against a size hint of {least}..{most:?}",
        present.len()
    );
    for (ip, answer) in snapshot.vips.keys().zip(answers) {
        let host = IpNet::from(*ip);
        let held = present.iter().any(|(p, _)| *p == host);
        assert_eq!(answer, held, "contains({host}) says {answer}");
    }
    assert!(
        present.windows(2).all(|w| w[0].0 < w[1].0),
        "not in strictly ascending order: {:?}",
        present.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    (present.into_iter().collect(), absences)
}

fn config(ads: &str) -> Config {
    let text = format!(
        "[speaker]\nasn = 65001\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"kubernetes\"\n{ads}"
    );
    crate::config::parse(Path::new("t.toml"), &text).expect("test config")
}

const AGG: &str =
    "[[advertisement]]\nname = \"public\"\naggregation_length = 24\naggregation_length_v6 = 64\n";

fn vip(ip: &str, ads: &[&str], local: bool) -> (IpAddr, Vip) {
    let mut v = Vip::new(Arc::new(ads.iter().map(|s| s.to_string()).collect()));
    let facts = v.route.make_mut();
    facts.local_traffic = local;
    facts.service = Some(format!("demo/{ip}").into());
    (ip.parse().unwrap(), v)
}

fn snapshot(vips: Vec<(IpAddr, Vip)>) -> SourceSnapshot {
    SourceSnapshot {
        vips: Arc::new(vips.into_iter().collect()),
        healthy: true,
        synced: true,
        ..SourceSnapshot::default()
    }
}

fn keys(m: &BTreeMap<IpNet, Route>) -> Vec<String> {
    m.keys().map(ToString::to_string).collect()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

#[test]
fn cluster_vips_are_aggregated_and_local_ones_stay_host_routes() {
    let c = config(AGG);
    let snap = snapshot(vec![
        vip("198.51.100.10", &["public"], false),
        vip("198.51.100.11", &["public"], false),
        vip("198.51.100.12", &["public"], true),
        vip("203.0.113.5", &["public"], false),
        vip("2001:db8:1::5", &["public"], false),
        vip("2001:db8:1::6", &["public"], true),
    ]);
    let (present, absences) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(
        keys(&present),
        [
            "198.51.100.0/24",
            "198.51.100.12/32",
            "203.0.113.0/24",
            "2001:db8:1::/64",
            "2001:db8:1::6/128"
        ]
    );
    assert!(absences.is_empty());
    let agg = &present[&net("198.51.100.0/24")];
    assert_eq!(agg.service, None, "an aggregate covers several Services");
    assert_eq!(agg.attributes, None);
    assert_eq!(
        present[&net("198.51.100.12/32")].service.as_deref(),
        Some("demo/198.51.100.12")
    );

    // The aggregate stays while one VIP of it is present: the same route.
    let fewer = snapshot(vec![vip("198.51.100.11", &["public"], false)]);
    let (p2, _) = desired(&c, &fewer, |_| Gate::Pass);
    assert_eq!(p2[&net("198.51.100.0/24")], *agg);

    // explain names what the aggregate covers.
    let (prefix, lines) = explain(&c, &snap, "198.51.100.10".parse().unwrap());
    assert_eq!(prefix, net("198.51.100.0/24"));
    assert_eq!(
        lines,
        [
            "advertisement \"public\" announces it as the aggregate 198.51.100.0/24, which covers 198.51.100.10, 198.51.100.11"
        ]
    );
    let (prefix, lines) = explain(&c, &snap, "198.51.100.12".parse().unwrap());
    assert_eq!(prefix, net("198.51.100.12/32"));
    assert!(lines[0].contains("traffic policy is Local"), "{lines:?}");
}

#[test]
fn without_aggregation_every_vip_is_a_host_route() {
    let c = config("[[advertisement]]\nname = \"public\"\n");
    let snap = snapshot(vec![
        vip("198.51.100.10", &["public"], false),
        vip("198.51.100.11", &["public"], false),
    ]);
    let (present, _) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(keys(&present), ["198.51.100.10/32", "198.51.100.11/32"]);
}

#[test]
fn host_routes_without_probes_say_how_many_come() {
    // The stability layer allocates its table once, from the lower bound.
    let c = config("[[advertisement]]\nname = \"public\"\n");
    let snap = snapshot(
        (10..20)
            .map(|i| vip(&format!("198.51.100.{i}"), &["public"], false))
            .collect(),
    );
    let none = BTreeMap::new();
    let (mut present, _) = super::desired(&c, &snap, &none);
    assert_eq!(present.size_hint(), (10, Some(10)));
    present.next();
    assert_eq!(present.size_hint(), (9, Some(9)));
    // A gated VIP may not come: only the upper bound is known.
    let gated = BTreeMap::from([("198.51.100.15".parse().unwrap(), Gate::Fail)]);
    let (present, _) = super::desired(&c, &snap, &gated);
    assert_eq!(present.size_hint(), (0, Some(10)));
}

#[test]
fn a_vip_under_an_aggregating_and_a_plain_advertisement_gives_both_routes() {
    let c = config(&format!("{AGG}[[advertisement]]\nname = \"plain\"\n"));
    let snap = snapshot(vec![vip("198.51.100.10", &["plain", "public"], false)]);
    let (present, _) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(keys(&present), ["198.51.100.0/24", "198.51.100.10/32"]);
    let names =
        |p: &str| -> Vec<String> { present[&net(p)].advertisements.iter().cloned().collect() };
    assert_eq!(names("198.51.100.0/24"), ["public"]);
    assert_eq!(names("198.51.100.10/32"), ["plain"]);
}

#[test]
fn probes_gate_vips_before_aggregation() {
    let c = config(AGG);
    let snap = snapshot(vec![
        vip("198.51.100.10", &["public"], false),
        vip("198.51.100.11", &["public"], true),
    ]);
    let fail: IpAddr = "198.51.100.11".parse().unwrap();
    let (present, absences) = desired(
        &c,
        &snap,
        |ip| {
            if ip == fail { Gate::Fail } else { Gate::Pass }
        },
    );
    assert_eq!(keys(&present), ["198.51.100.0/24"]);
    assert_eq!(
        absences.get(&net("198.51.100.11/32")),
        Some(&Absence::ProbeFailed)
    );
}

#[test]
fn probes_gate_plain_host_routes() {
    // No aggregation: the routes are read from the snapshot as they are
    // taken, and the gates still apply.
    let c = config("[[advertisement]]\nname = \"public\"\n");
    let snap = snapshot(vec![
        vip("198.51.100.10", &["public"], false),
        vip("198.51.100.11", &["public"], false),
        vip("198.51.100.12", &["public"], false),
    ]);
    let (fail, unknown): (IpAddr, IpAddr) = (
        "198.51.100.11".parse().unwrap(),
        "198.51.100.12".parse().unwrap(),
    );
    let (present, absences) = desired(&c, &snap, |ip| match ip {
        ip if ip == fail => Gate::Fail,
        ip if ip == unknown => Gate::Unknown,
        _ => Gate::Pass,
    });
    assert_eq!(keys(&present), ["198.51.100.10/32"]);
    assert_eq!(
        absences,
        BTreeMap::from([(net("198.51.100.11/32"), Absence::ProbeFailed)]),
        "the failed VIP went for its probe; the one not yet probed, for no reason"
    );
}

#[test]
fn an_aggregate_goes_at_once_only_when_the_node_drained() {
    let c = config(AGG);
    let mut snap = snapshot(vec![]);
    snap.absences = BTreeMap::from([
        ("198.51.100.10".parse().unwrap(), Absence::Drained),
        ("198.51.100.11".parse().unwrap(), Absence::Drained),
        ("203.0.113.1".parse().unwrap(), Absence::Drained),
        ("203.0.113.2".parse().unwrap(), Absence::Deleted),
    ]);
    let (present, absences) = desired(&c, &snap, |_| Gate::Pass);
    assert!(present.is_empty());
    assert_eq!(
        absences.get(&net("198.51.100.0/24")),
        Some(&Absence::Drained)
    );
    // A Service deleted is not the aggregate deleted: held down.
    assert_eq!(
        absences.get(&net("203.0.113.0/24")),
        Some(&Absence::Vanished)
    );
    // While another VIP keeps it present, no absence at all.
    let mut snap = snapshot(vec![vip("198.51.100.12", &["public"], false)]);
    snap.absences = BTreeMap::from([("198.51.100.10".parse().unwrap(), Absence::Drained)]);
    let (_, absences) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(absences.get(&net("198.51.100.0/24")), None);
}

#[test]
fn pod_cidrs_and_interface_addresses_become_routes() {
    let c = config(
        "[[advertisement]]\nname = \"public\"\n\
         [[advertisement]]\nname = \"pods\"\naddresses = [\"PodCIDR\"]\n\
         [[advertisement]]\nname = \"loop\"\ninterface = \"lo\"\n",
    );
    let mut snap = snapshot(vec![vip("198.51.100.10", &["public"], false)]);
    let pods = net("10.244.1.0/24");
    snap.prefixes = BTreeMap::from([(pods, Vip::new(Arc::new(["pods".to_string()].into())))]);
    snap.interfaces = Arc::new(BTreeMap::from([
        (
            "lo".to_string(),
            vec![
                "198.51.100.10".parse().unwrap(),
                "203.0.113.9".parse().unwrap(),
            ],
        ),
        ("eth0".to_string(), vec!["192.0.2.2".parse().unwrap()]),
    ]));
    let (present, _) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(
        keys(&present),
        ["10.244.1.0/24", "198.51.100.10/32", "203.0.113.9/32"]
    );
    let names =
        |p: &str| -> Vec<String> { present[&net(p)].advertisements.iter().cloned().collect() };
    assert_eq!(names("10.244.1.0/24"), ["pods"]);
    // The VIP also on lo: one route under both advertisements, still the
    // Service's.
    assert_eq!(names("198.51.100.10/32"), ["loop", "public"]);
    assert_eq!(
        present[&net("198.51.100.10/32")].service.as_deref(),
        Some("demo/198.51.100.10")
    );
    assert_eq!(names("203.0.113.9/32"), ["loop"]);
    let (_, lines) = explain(&c, &snap, "203.0.113.9".parse().unwrap());
    assert_eq!(
        lines,
        ["interface lo has it: announced under advertisement \"loop\""]
    );
}

#[test]
fn an_interface_advertisement_announces_only_the_addresses_in_its_vip_ranges() {
    let c = config(
        "[[advertisement]]\nname = \"loop\"\ninterface = \"lo\"\nvip_ranges = [\"203.0.113.0/24\"]\n",
    );
    let mut snap = snapshot(vec![]);
    snap.interfaces = Arc::new(BTreeMap::from([(
        "lo".to_string(),
        vec![
            "198.51.100.10".parse().unwrap(),
            "203.0.113.9".parse().unwrap(),
        ],
    )]));
    let (present, _) = desired(&c, &snap, |_| Gate::Pass);
    assert_eq!(keys(&present), ["203.0.113.9/32"]);
    let (_, lines) = explain(&c, &snap, "198.51.100.10".parse().unwrap());
    assert_eq!(
        lines,
        [
            "interface lo has it, but it is not in the vip_ranges [\"203.0.113.0/24\"] of advertisement \"loop\": not announced under it"
        ]
    );
}

#[test]
fn a_degraded_vip_stays_present_marked_degraded() {
    let d = "[[advertisement]]\nname = \"public\"\ndegraded = { med = 900 }\n";
    let bad: IpAddr = "198.51.100.11".parse().unwrap();
    let gate = |ip| {
        if ip == bad {
            Gate::Degraded
        } else {
            Gate::Pass
        }
    };
    // Both paths of `desired`: plain host routes, and with aggregation.
    for ads in [d.to_string(), format!("{d}aggregation_length = 24\n")] {
        let c = config(&ads);
        let snap = snapshot(vec![
            vip("198.51.100.10", &["public"], true),
            vip("198.51.100.11", &["public"], true),
        ]);
        let (present, absences) = desired(&c, &snap, gate);
        assert_eq!(
            keys(&present),
            ["198.51.100.10/32", "198.51.100.11/32"],
            "{ads}"
        );
        assert!(absences.is_empty(), "never a withdrawal: {absences:?}");
        let flag = |p: &str| {
            present[&net(p)]
                .attributes
                .as_ref()
                .is_some_and(|a| a.degraded)
        };
        assert!(flag("198.51.100.11/32"), "{ads}");
        assert!(!flag("198.51.100.10/32"), "{ads}");
    }
}
