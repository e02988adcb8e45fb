//! One test per validation rule: each feeds a small config to `parse` and
//! checks the exact diagnostics (line:col: message) or the parsed values.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
// The VIP file is parsed by the file source; its tests here share this
// file's config builders.
use crate::source::file::{VipEntry, parse_vip_file};

/// Lines 1–4: a valid [speaker] and [source].
const HEAD: &str = "[speaker]\nasn = 65001\n[source]\nkind = \"kubernetes\"\n";

/// HEAD plus one valid peer (lines 5–8); `extra` starts on line 9.
fn with_peer(extra: &str) -> String {
    format!("{HEAD}[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n{extra}")
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The diagnostics for `text` as "LINE:COL: message".
fn problems(text: &str) -> Vec<String> {
    match parse(Path::new("t.toml"), text) {
        Ok(config) => panic!("expected problems, got a valid config: {config:#?}"),
        Err(diags) => diags
            .iter()
            .map(|d| {
                assert_eq!(d.path, Path::new("t.toml"));
                format!("{}:{}: {}", d.line, d.col, d.message)
            })
            .collect(),
    }
}

/// The diagnostics `load` gives for the file at `path`, as
/// "LINE:COL: message"; panics if the file loads.
fn load_problems(path: &Path) -> Vec<String> {
    match load(path) {
        Ok(_) => panic!("expected problems loading {}", path.display()),
        Err(diags) => diags
            .iter()
            .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
            .collect(),
    }
}

fn valid(text: &str) -> Config {
    match parse(Path::new("/etc/holdfast/t.toml"), text) {
        Ok(config) => config,
        Err(diags) => {
            let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
            panic!("expected a valid config, got:\n{}", lines.join("\n"))
        }
    }
}

#[test]
fn minimal_config_gets_documented_defaults() {
    let config = valid(&with_peer(""));
    assert_eq!(config.path, PathBuf::from("/etc/holdfast/t.toml"));
    assert_eq!(
        config.speaker,
        Speaker {
            asn: 65001,
            router_id: RouterId::Auto,
            api: SocketAddr::from(([127, 0, 0, 1], 9179)),
            api_token: None,
            metrics: None,
            listen: None,
            hostname: None,
            node_selector: None,
            drain_on_cordon: true,
            drain_taints: Vec::new(),
            graceful_shutdown_wait: secs(15),
        }
    );
    assert_eq!(
        config.peers,
        vec![Peer {
            name: "tor1".to_string(),
            address: PeerAddress::Ip(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))),
            asn: PeerAsn::Exact(65000),
            local_asn: None,
            port: 179,
            password: None,
            hold_time: secs(90),
            keepalive: secs(30),
            connect_retry: secs(30),
            ebgp_multihop: 1,
            ttl_security: false,
            source_address: None,
            families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
            passive: false,
            min_route_advertisement_interval: Duration::ZERO,
            graceful_restart: GracefulRestart {
                enabled: true,
                restart_time: secs(120),
                notification: true,
                forwarding_state: true,
                long_lived_stale_time: None,
            },
            bfd: None,
            export: Default::default(),
        }]
    );
    assert_eq!(
        config.sources[0].kind,
        Source::Kubernetes(KubernetesSource {
            namespaces: vec![],
            load_balancer_classes: vec!["holdfast.dev/bgp".to_string()],
            require_class: false,
        })
    );
    assert_eq!(
        config.stability,
        Stability {
            withdraw_hold_down: secs(30),
            advertise_delay: Duration::ZERO,
            delete_delay: Duration::ZERO,
            local_endpoint_delay: Duration::ZERO,
            damping: None,
            graceful_shutdown_wait: Duration::ZERO,
            guard: crate::stability::GuardParams::default(),
        }
    );
    assert_eq!(
        config.advertisements,
        vec![Advertisement::implicit_default()]
    );
    assert_eq!(config.advertisement_names(), vec!["default".to_string()]);
    assert!(config.advertisements[0].applies_to_peer("tor1"));
}

/// Every key of the schema, with non-default values.
const FULL: &str = r#"
[speaker]
asn = 4200000001
router_id = "192.0.2.11"
api = "[::1]:9180"
listen = "0.0.0.0:1179"
hostname = "node-1"
node_selector = { match_labels = { rack = "a" }, match_expressions = [{ key = "k", operator = "In", values = ["x"] }] }
drain_on_cordon = false

[[peer]]
name = "tor1"
address = "2001:db8::1"
asn = 65000
port = 1179
password_file = "md5/tor1"
hold_time = "9s"
keepalive = "3s"
connect_retry = "5s"
ebgp_multihop = 2
ttl_security = true
source_address = "2001:db8::11"
families = ["ipv6-unicast"]
passive = true
min_route_advertisement_interval = "1s"
graceful_restart = { enabled = false, restart_time = "4095s", notification = false, forwarding_state = false }
bfd = { min_rx = "100ms", min_tx = "200ms", multiplier = 5, multihop = true, authentication = "meticulous-keyed-sha1", key_id = 7, key_file = "keys/bfd-tor1" }

[[peer]]
name = "tor2"
address = "default-gateway"
family = "ipv6"
asn = 4200000001

[source]
kind = "file"
path = "vips.toml"

[stability]
withdraw_hold_down = "1m30s"
advertise_delay = "500ms"
delete_delay = "5s"
local_endpoint_delay = "2s"
max_withdraw_fraction = 0.25
withdraw_rate = "30/m"
[stability.damping]
half_life = "10m"
penalty = 500
suppress_threshold = 3000
reuse_threshold = 1000
max_suppress = "1h"

[[advertisement]]
name = "public"
addresses = ["ClusterIP"]
service_selector = { match_labels = { bgp = "on" } }
namespace_selector = { match_expressions = [{ key = "team", operator = "Exists" }] }
peers = ["tor1"]
communities = ["65001:100", "no-export"]
large_communities = ["65001:1:100"]
extended_communities = ["rt:65001:100", "ro:4200000001:7"]
local_pref = 200
med = 10
probe = { port = 443, interval = "5s", timeout = "2s", fail_after = 4, recover_after = 1 }

[[advertisement]]
name = "private"
"#;

#[test]
fn full_schema_parses_to_the_values_written() {
    let config = valid(FULL);
    let s = &config.speaker;
    assert_eq!(s.asn, 4_200_000_001);
    assert_eq!(s.router_id, RouterId::Fixed(Ipv4Addr::new(192, 0, 2, 11)));
    assert_eq!(s.api, "[::1]:9180".parse::<SocketAddr>().expect("addr"));
    assert_eq!(s.listen, Some(SocketAddr::from(([0, 0, 0, 0], 1179))));
    assert_eq!(s.hostname.as_deref(), Some("node-1"));
    assert!(!s.drain_on_cordon);
    let selector = s.node_selector.as_ref().expect("node_selector");
    let labels: BTreeMap<String, String> = [("rack", "a"), ("k", "x")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(selector.matches(&labels));
    assert_eq!(
        selector.match_expressions,
        vec![LabelSelectorRequirement {
            key: "k".to_string(),
            operator: SelectorOperator::In,
            values: vec!["x".to_string()],
        }]
    );

    let tor1 = config.peer("tor1").expect("tor1");
    assert_eq!(
        tor1.address,
        PeerAddress::Ip("2001:db8::1".parse().expect("ip"))
    );
    assert_eq!(tor1.port, 1179);
    assert_eq!(
        tor1.password,
        Some(PeerPassword {
            file: PathBuf::from("/etc/holdfast/md5/tor1"),
            key: None,
        })
    );
    assert_eq!((tor1.hold_time, tor1.keepalive), (secs(9), secs(3)));
    assert_eq!(tor1.connect_retry, secs(5));
    assert_eq!(tor1.ebgp_multihop, 2);
    assert!(tor1.ttl_security);
    assert_eq!(
        tor1.source_address,
        Some("2001:db8::11".parse().expect("ip"))
    );
    assert_eq!(tor1.families, vec![Family::Ipv6Unicast]);
    assert!(tor1.passive);
    assert_eq!(tor1.min_route_advertisement_interval, secs(1));
    assert_eq!(
        tor1.graceful_restart,
        GracefulRestart {
            enabled: false,
            restart_time: secs(4095),
            notification: false,
            forwarding_state: false,
            long_lived_stale_time: None,
        }
    );
    assert_eq!(
        tor1.bfd,
        Some(Bfd {
            min_rx: Duration::from_millis(100),
            min_tx: Duration::from_millis(200),
            multiplier: 5,
            multihop: true,
            authentication: BfdAuthentication::Key {
                auth_type: crate::bfd::packet::AuthType::MeticulousKeyedSha1,
                key_id: 7,
                file: PathBuf::from("/etc/holdfast/keys/bfd-tor1"),
                key: None,
            },
        })
    );
    let tor2 = config.peer("tor2").expect("tor2");
    assert_eq!(
        tor2.address,
        PeerAddress::DefaultGateway(AddressFamily::Ipv6)
    );
    assert!(tor2.is_ibgp(config.speaker.asn));
    assert!(!tor1.is_ibgp(config.speaker.asn));

    assert_eq!(
        config.sources[0].kind,
        Source::File {
            path: PathBuf::from("/etc/holdfast/vips.toml")
        }
    );
    assert_eq!(
        config.stability,
        Stability {
            withdraw_hold_down: secs(90),
            advertise_delay: Duration::from_millis(500),
            delete_delay: secs(5),
            local_endpoint_delay: secs(2),
            damping: Some(Damping {
                half_life: secs(600),
                penalty: 500,
                suppress_threshold: 3000,
                reuse_threshold: 1000,
                max_suppress: secs(3600),
            }),
            graceful_shutdown_wait: Duration::ZERO,
            guard: crate::stability::GuardParams {
                max_withdraw_fraction: 0.25,
                withdraw_interval: secs(2),
            },
        }
    );

    let public = config.advertisement("public").expect("public");
    assert_eq!(public.addresses, vec![AddressKind::ClusterIp]);
    assert_eq!(public.peers, Some(vec!["tor1".to_string()]));
    assert!(public.applies_to_peer("tor1"));
    assert!(!public.applies_to_peer("tor2"));
    assert_eq!(public.communities, vec![65001 << 16 | 100, 0xFFFF_FF01]);
    assert_eq!(public.large_communities, vec![(65001, 1, 100)]);
    assert_eq!(
        public.extended_communities,
        vec![
            ExtendedCommunity::TwoOctetAs {
                kind: ExtendedCommunityKind::RouteTarget,
                global: 65001,
                local: 100,
            },
            ExtendedCommunity::FourOctetAs {
                kind: ExtendedCommunityKind::RouteOrigin,
                global: 4_200_000_001,
                local: 7,
            },
        ]
    );
    assert_eq!((public.local_pref, public.med), (Some(200), Some(10)));
    assert_eq!(
        public.probe,
        Some(Probe {
            target: ProbeTarget::Tcp { port: 443 },
            interval: secs(5),
            timeout: secs(2),
            fail_after: 4,
            recover_after: 1,
            on_failure: OnFailure::Withdraw,
            disable_file: None,
        })
    );
    assert!(public.namespace_selector.is_some());
    let private = config.advertisement("private").expect("private");
    assert_eq!(private.addresses, DEFAULT_ADDRESSES.to_vec());
    assert_eq!(private.peers, None);
    assert_eq!(
        config.advertisement_names(),
        vec!["public".to_string(), "private".to_string()]
    );
}

#[test]
fn syntax_errors_are_all_reported_with_positions() {
    let text = "[speaker]\nasn = \nname = \"x\n";
    assert_eq!(
        problems(text),
        vec![
            "2:7: TOML syntax error: string values must be quoted, expected literal string",
            "3:10: TOML syntax error: invalid basic string, expected `\"`",
        ]
    );
}

#[test]
fn duplicate_keys_are_syntax_errors() {
    let text = with_peer("asn = 65002\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:1: TOML syntax error: duplicate key \"asn\" (a key may appear only once per table)"
        ]
    );
}

#[test]
fn unknown_keys_are_reported_at_the_key_with_a_suggestion() {
    let text = with_peer("hold_tme = \"9s\"\ncolour = \"blue\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:1: unknown key \"hold_tme\" in [[peer]] (did you mean \"hold_time\"?)",
            "10:1: unknown key \"colour\" in [[peer]]; expected one of \"name\", \"address\", \
             \"interface\", \"family\", \"asn\", \"local_asn\", \"port\", \"password_file\", \"hold_time\", \"keepalive\", \
             \"connect_retry\", \"ebgp_multihop\", \"ttl_security\", \"source_address\", \
             \"families\", \"passive\", \"min_route_advertisement_interval\", \
             \"graceful_restart\", \"bfd\", \"export\" or \"export_default\"",
        ]
    );
}

#[test]
fn unknown_top_level_table() {
    let text = format!("{}[peers]\nx = 1\n", with_peer(""));
    assert_eq!(
        problems(&text),
        vec!["9:2: unknown key \"peers\" at the top level (did you mean \"peer\"?)"]
    );
}

#[test]
fn missing_required_keys_are_reported_at_the_table_header() {
    let text = "[speaker]\nrouter_id = \"auto\"\n[source]\nkind = \"file\"\n[[peer]]\nport = 179\n";
    assert_eq!(
        problems(text),
        vec![
            "1:1: missing required key \"asn\" in [speaker]",
            "3:1: missing required key \"path\" in [source]",
            "5:1: missing required key \"name\" in [[peer]]",
            "5:1: missing required key \"address\" in [[peer]]",
            "5:1: missing required key \"asn\" in [[peer]]",
        ]
    );
}

#[test]
fn missing_sections() {
    assert_eq!(
        problems(""),
        vec![
            "1:1: missing required table [speaker] (with at least asn)",
            "1:1: missing [[peer]]: at least one peer is required",
            "1:1: missing required table [source] (kind = \"kubernetes\" or kind = \"file\")",
        ]
    );
}

#[test]
fn peer_written_as_a_single_table() {
    let text = format!("{HEAD}[peer]\nname = \"tor1\"\n");
    assert_eq!(
        problems(&text),
        vec!["5:1: [peer] must be an array of tables: write [[peer]], one per entry"]
    );
}

#[test]
fn type_errors_name_the_expected_type() {
    let text = with_peer("port = 1.5\npassive = \"yes\"\nfamilies = \"ipv4-unicast\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:8: port must be an integer, got a float",
            "10:11: passive must be true or false, got a string",
            "11:12: families must be an array, got a string",
        ]
    );
}

#[test]
fn asn_range() {
    let text = "[speaker]\nasn = 0\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 4294967296\n";
    assert_eq!(
        problems(text),
        vec![
            "2:7: asn must be in 1..=4294967295, got 0",
            "8:7: asn must be in 1..=4294967295, got 4294967296",
        ]
    );
    let text = with_peer("").replace("asn = 65001", "asn = \"65001\"");
    assert_eq!(
        problems(&text),
        vec!["2:7: asn must be an integer, got a string"]
    );
}

#[test]
fn durations_need_units() {
    let text = with_peer("hold_time = 9\nkeepalive = \"3\"\nconnect_retry = \"5 s\"\n");
    assert_eq!(
        problems(&text),
        vec![
            // hold_time takes whole seconds only: no "9ms".
            "9:13: hold_time must be a string with a unit, e.g. \"9s\" or \"9m\"; a bare number has no unit",
            "10:13: keepalive: \"3\" has no unit; add one, e.g. \"3s\" or \"3ms\"",
            "11:17: connect_retry: \"5 s\" has a number without a unit; expected a number with a unit (ms, s, m, h), e.g. \"9s\" or \"1m30s\"",
        ]
    );
}

/// The examples of "e.g. \"A\" or \"B\"" in a message.
fn examples_in(message: &str) -> Vec<String> {
    let Some((_, tail)) = message.split_once("e.g. ") else {
        return Vec::new();
    };
    let tail = tail.split(';').next().unwrap_or_default();
    tail.split(" or ")
        .map(|e| e.trim().trim_matches('"').to_string())
        .collect()
}

#[test]
fn duration_hints_are_built_from_the_value_and_each_is_taken_back() {
    let stability = |key: &str| format!("{}[stability]\n{key} = {{V}}\n", with_peer(""));
    let damping = |key: &str| format!("{}[stability.damping]\n{key} = {{V}}\n", with_peer(""));
    // (config with {V} where the value goes, the value written, the
    // examples its message must give)
    let cases: Vec<(String, &str, &[&str])> = vec![
        (with_peer("hold_time = {V}\n"), "9", &["9s", "9m"]),
        (with_peer("hold_time = {V}\n"), "\"9\"", &["9s", "9m"]),
        (with_peer("hold_time = {V}\n"), "\"1\"", &["1m"]),
        (with_peer("hold_time = {V}\n"), "\"1.5m\"", &["90s"]),
        (with_peer("hold_time = {V}\n"), "\"9.5s\"", &["9s", "10s"]),
        (with_peer("hold_time = {V}\n"), "\"2.5s\"", &["3s"]),
        (with_peer("hold_time = {V}\n"), "\"30s1m\"", &["1m30s"]),
        (with_peer("hold_time = {V}\n"), "\"5 s\"", &["9s", "1m30s"]),
        (with_peer("keepalive = {V}\n"), "\"2.5s\"", &["2500ms"]),
        (
            with_peer("hold_time = \"9s\"\nkeepalive = {V}\n"),
            "\"9.5s\"",
            &["9s"],
        ),
        (
            with_peer("hold_time = \"9s\"\nkeepalive = {V}\n"),
            "30",
            &["30ms"],
        ),
        (with_peer("connect_retry = {V}\n"), "\"0.5s\"", &["1s"]),
        (with_peer("connect_retry = {V}\n"), "\"1.5s\"", &["1500ms"]),
        (
            with_peer("graceful_restart = { restart_time = {V} }\n"),
            "120",
            &["120s"],
        ),
        (
            with_peer("graceful_restart = { restart_time = {V} }\n"),
            "\"9.5s\"",
            &["9s", "10s"],
        ),
        (
            with_peer("graceful_restart = { restart_time = {V} }\n"),
            "\"1.5m\"",
            &["90s"],
        ),
        (
            with_peer("graceful_restart = { restart_time = {V} }\n"),
            "\"5000000\"",
            &[],
        ),
        (
            with_peer("bfd = { min_rx = {V} }\n"),
            "\"0.3s\"",
            &["300ms"],
        ),
        (
            with_peer("bfd = { min_tx = {V} }\n"),
            "300",
            &["300s", "300ms"],
        ),
        (stability("withdraw_hold_down"), "\"1.5m\"", &["90s"]),
        (stability("withdraw_hold_down"), "30", &["30s", "30ms"]),
        // With the default max_suppress (60m), a half_life of 500ms puts
        // the damping ceiling at 750 × 2^7200: refused, by `run` too. A
        // short max_suppress makes the suggestion one the daemon runs.
        (
            format!(
                "{}[stability.damping]\nmax_suppress = \"1s\"\nhalf_life = {{V}}\n",
                with_peer("")
            ),
            "\"0.5s\"",
            &["500ms"],
        ),
        (damping("half_life"), "\"60s1m\"", &["2m"]),
    ];
    for (template, written, expected) in cases {
        let text = template.replace("{V}", written);
        let problems = problems(&text);
        let [message] = problems.as_slice() else {
            panic!("{written}: expected one problem, got {problems:?}");
        };
        let examples = examples_in(message);
        assert_eq!(examples, expected, "{written}: {message}");
        for example in examples {
            let fixed = template.replace("{V}", &format!("\"{example}\""));
            if let Err(diags) = parse(Path::new("t.toml"), &fixed) {
                let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
                panic!(
                    "{written}: the suggested \"{example}\" ({message}) is refused:\n{}",
                    lines.join("\n")
                );
            }
        }
    }
}

#[test]
fn hold_time_is_zero_or_at_least_three_seconds() {
    let text = with_peer("hold_time = \"2s\"\n");
    assert_eq!(
        problems(&text),
        vec!["9:13: hold_time must be 0s or at least 3s (RFC 4271 §4.2), got 2s"]
    );
    let text = with_peer("hold_time = \"3500ms\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:13: hold_time must be whole seconds (OPEN carries seconds, RFC 4271 §4.2), got 3s500ms"
        ]
    );
    let text = with_peer("hold_time = \"19h\"\n");
    assert_eq!(
        problems(&text),
        vec!["9:13: hold_time must be at most 65535s (16 bits in OPEN, RFC 4271 §4.2), got 19h"]
    );
    let config = valid(&with_peer("hold_time = \"0s\"\n"));
    assert_eq!(
        (config.peers[0].hold_time, config.peers[0].keepalive),
        (Duration::ZERO, Duration::ZERO)
    );
    let config = valid(&with_peer("hold_time = \"10s\"\n"));
    assert_eq!(config.peers[0].keepalive, secs(10) / 3);
}

#[test]
fn keepalive_must_not_exceed_hold_time() {
    let text = with_peer("hold_time = \"9s\"\nkeepalive = \"30s\"\n");
    assert_eq!(
        problems(&text),
        vec!["10:13: keepalive (30s) must not exceed hold_time (9s)"]
    );
    // Against the default hold time too.
    let text = with_peer("keepalive = \"2m\"\n");
    assert_eq!(
        problems(&text),
        vec!["9:13: keepalive (2m) must not exceed hold_time (1m30s)"]
    );
}

#[test]
fn keepalive_zero_only_with_hold_time_zero() {
    let text = with_peer("hold_time = \"0s\"\nkeepalive = \"3s\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "10:13: keepalive (3s) must be 0s when hold_time is 0s (RFC 4271 §4.4: no KEEPALIVEs without a hold time)"
        ]
    );
    let text = with_peer("hold_time = \"9s\"\nkeepalive = \"0s\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "10:13: keepalive 0s would let the router's hold timer (9s) expire; 0s is only allowed with hold_time 0s"
        ]
    );
}

#[test]
fn duplicate_peer_names_and_endpoints() {
    let text = format!(
        "{}[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n[[peer]]\nname = \"tor3\"\naddress = \"192.0.2.1\"\nport = 1179\nasn = 65000\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "10:8: duplicate peer name \"tor1\" (first used on line 6)",
            "11:11: another [[peer]] (line 7) already uses address 192.0.2.1 port 179",
        ]
    );
}

#[test]
fn interface_peers_are_unnumbered() {
    let config = valid(&format!(
        "{HEAD}[[peer]]\nname = \"tor\"\ninterface = \"eth1\"\nasn = 65000\n"
    ));
    let PeerAddress::Interface(name) = config.peers[0].address else {
        panic!("{:?}", config.peers[0].address)
    };
    assert_eq!(name.as_str(), "eth1");
    assert_eq!(config.peers[0].address.family(), AddressFamily::Ipv6);
    assert_eq!(config.peers[0].address.to_string(), "interface eth1");
    // Exactly one of address and interface.
    assert_eq!(
        problems(&with_peer("interface = \"eth1\"\n")),
        vec!["9:13: a peer has either address or interface (unnumbered), not both"]
    );
    assert_eq!(
        problems(&format!("{HEAD}[[peer]]\nname = \"tor\"\nasn = 65000\n")),
        vec!["5:1: missing required key \"address\" in [[peer]]"]
    );
    // Names the kernel would refuse (dev_valid_name), at the value.
    for (bad, why) in [
        ("", "is empty"),
        (
            "a-very-long-ifname",
            "is longer than 15 bytes (Linux IFNAMSIZ)",
        ),
        ("eth0:1", "must not contain '/', ':' or white space"),
        ("eth 1", "must not contain '/', ':' or white space"),
        ("..", "is not a valid interface name"),
    ] {
        assert_eq!(
            problems(&format!(
                "{HEAD}[[peer]]\nname = \"tor\"\ninterface = \"{bad}\"\nasn = 65000\n"
            )),
            vec![format!("7:13: interface name \"{bad}\" {why}")]
        );
    }
    // family belongs to default-gateway; an IPv4 source address cannot
    // reach a link-local peer.
    assert_eq!(
        problems(&format!(
            "{HEAD}[[peer]]\nname = \"tor\"\ninterface = \"eth1\"\nfamily = \"ipv4\"\nasn = 65000\n"
        )),
        vec![
            "8:10: family applies only to address = \"default-gateway\"; an interface peer is always reached over IPv6 link-local"
        ]
    );
}

#[test]
fn family_only_with_default_gateway() {
    let text = with_peer("family = \"ipv6\"\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:10: family applies only to address = \"default-gateway\"; an IP address already has a family"
        ]
    );
    let text = format!(
        "{HEAD}[[peer]]\nname = \"gw\"\naddress = \"default-gateway\"\nfamily = \"ipv5\"\nasn = 65000\n"
    );
    assert_eq!(
        problems(&text),
        vec!["8:10: unknown family \"ipv5\"; did you mean \"ipv4\"?"]
    );
    let config = valid(&format!(
        "{HEAD}[[peer]]\nname = \"gw\"\naddress = \"default-gateway\"\nasn = 65000\n"
    ));
    assert_eq!(
        config.peers[0].address,
        PeerAddress::DefaultGateway(AddressFamily::Ipv4)
    );
}

#[test]
fn unusable_peer_addresses() {
    let bad = |address: &str| {
        problems(&format!(
            "{HEAD}[[peer]]\nname = \"p\"\naddress = \"{address}\"\nasn = 65000\n"
        ))
    };
    assert_eq!(
        bad("fe80::1"),
        vec![
            "7:11: peer address fe80::1 is link-local and would need an interface; use address = \"default-gateway\" with family = \"ipv6\", or a global address"
        ]
    );
    assert_eq!(
        bad("224.0.0.5"),
        vec!["7:11: peer address 224.0.0.5 is not a unicast address"]
    );
    assert_eq!(
        bad("192.0.2.0/24"),
        vec![
            "7:11: address must be an IPv4 or IPv6 address or \"default-gateway\" (a single address, not a prefix), got \"192.0.2.0/24\""
        ]
    );
    assert_eq!(
        bad("192.0.2.1:179"),
        vec![
            "7:11: address must be an IPv4 or IPv6 address or \"default-gateway\" (put the port in port, not in the address), got \"192.0.2.1:179\""
        ]
    );
}

#[test]
fn families_are_checked() {
    let text = with_peer(
        "families = [\"ipv4-unicast\", \"l2vpn-evpn\", \"ipv6-unicst\", \"ipv4-unicast\"]\n",
    );
    assert_eq!(
        problems(&text),
        vec![
            "9:29: unsupported family \"l2vpn-evpn\"; supported: \"ipv4-unicast\" or \"ipv6-unicast\"",
            "9:43: unsupported family \"ipv6-unicst\"; did you mean \"ipv6-unicast\"?",
            "9:58: \"ipv4-unicast\" is listed twice in families",
        ]
    );
    let text = with_peer("families = [\"ipv4-unicast\", \"ipv4-unicast\"]\n");
    assert_eq!(
        problems(&text),
        vec!["9:29: \"ipv4-unicast\" is listed twice in families"]
    );
    let text = with_peer("families = []\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:12: families is empty; list at least one of \"ipv4-unicast\", \"ipv6-unicast\" (or remove the key for both)"
        ]
    );
}

#[test]
fn passive_needs_listen() {
    let text = with_peer("passive = true\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:11: passive = true needs listen in [speaker] (the address to accept the router's connection on)"
        ]
    );
    let text = "[speaker]\nasn = 65001\nlisten = \"[::]:179\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\npassive = true\nttl_security = true\n";
    let config = valid(text);
    assert!(config.peers[0].passive && config.peers[0].ttl_security);
}

#[test]
fn source_address_family_must_match() {
    let text = with_peer("source_address = \"2001:db8::11\"\n");
    assert_eq!(
        problems(&text),
        vec!["9:18: source_address 2001:db8::11 is IPv6 but the peer address 192.0.2.1 is IPv4"]
    );
}

#[test]
fn ttl_and_ports() {
    let text = with_peer("ebgp_multihop = 0\nport = 0\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:17: ebgp_multihop must be in 1..=255, got 0",
            "10:8: port must be in 1..=65535, got 0",
        ]
    );
    let config = valid(&with_peer("ebgp_multihop = 255\nttl_security = true\n"));
    assert_eq!(config.peers[0].ebgp_multihop, 255);
}

#[test]
fn connect_retry_minimum() {
    let text = with_peer("connect_retry = \"0s\"\n");
    assert_eq!(
        problems(&text),
        vec!["9:17: connect_retry must be at least 1s, got 0s"]
    );
}

#[test]
fn graceful_restart_time_fits_twelve_bits() {
    let text = with_peer("graceful_restart = { restart_time = \"4096s\", restart_tim = true }\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:37: restart_time must be whole seconds in 0s..=4095s (12 bits, RFC 4724 §3), got 1h8m16s",
            "9:46: unknown key \"restart_tim\" in [[peer]] graceful_restart (did you mean \"restart_time\"?)",
        ]
    );
}

#[test]
fn long_lived_stale_time() {
    let config = valid(&with_peer(
        "graceful_restart = { restart_time = \"5s\", long_lived_stale_time = \"1h\" }\n",
    ));
    assert_eq!(
        config.peers[0].graceful_restart.long_lived_stale_time,
        Some(secs(3600))
    );
    assert_eq!(
        valid(&with_peer("")).peers[0]
            .graceful_restart
            .long_lived_stale_time,
        None
    );
    // 24 bits of seconds (RFC 9494 §3), and never without GR (§4.2).
    assert_eq!(
        problems(&with_peer(
            "graceful_restart = { long_lived_stale_time = \"16777216s\" }\n"
        )),
        vec![
            "9:46: long_lived_stale_time must be whole seconds in 1s..=16777215s (24 bits, RFC 9494 §3), got 4660h20m16s"
        ]
    );
    assert_eq!(
        problems(&with_peer(
            "graceful_restart = { enabled = false, long_lived_stale_time = \"60s\" }\n"
        )),
        vec![
            "9:63: long_lived_stale_time needs graceful restart: RFC 9494 §4.2 sends the long-lived capability only beside the Graceful Restart one (enabled = false here)"
        ]
    );
}

#[test]
fn source_resync() {
    let head = |resync: &str| {
        format!(
            "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"file\"\npath = \"v.toml\"\n{resync}"
        )
    };
    assert_eq!(valid(&head("")).resync, secs(300));
    assert_eq!(valid(&head("resync = \"0s\"\n")).resync, Duration::ZERO);
    assert_eq!(valid(&head("resync = \"30s\"\n")).resync, secs(30));
    assert_eq!(
        problems(&head("resync = \"100ms\"\n")),
        vec!["11:10: resync must be \"0s\" (off) or at least 1s, got 100ms"]
    );
}

#[test]
fn bfd_parameters() {
    let config = valid(&with_peer("bfd = {}\n"));
    assert_eq!(config.peers[0].bfd, Some(Bfd::default()));
    let config = valid(&with_peer("bfd = { enabled = false, multiplier = 9 }\n"));
    assert_eq!(config.peers[0].bfd, None);
    let text = with_peer("bfd = { multiplier = 0, min_rx = \"0ms\" }\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:22: multiplier must be in 1..=255, got 0",
            "9:34: min_rx must be more than 0s and at most 4294s (32 bits of microseconds, RFC 5880 §4.1), got 0s",
        ]
    );
}

#[test]
fn multihop_bfd_needs_authentication_or_says_none() {
    // No authentication on a multihop session: refused, at `multihop`.
    let text = with_peer("bfd = { multihop = true }\n");
    assert_eq!(
        problems(&text),
        vec![
            "9:20: multihop BFD without authentication: multihop BFD (RFC 5883) has no TTL check, so anyone who reaches UDP 4784 can forge its packets and take the BGP session down or hold it up; set authentication = \"meticulous-keyed-sha1\" and key_file (RFC 5880 §6.7), or state authentication = \"none\" to run it unauthenticated"
        ]
    );
    // Stated: accepted, unauthenticated.
    let config = valid(&with_peer(
        "bfd = { multihop = true, authentication = \"none\" }\n",
    ));
    let bfd = config.peers[0].bfd.clone().expect("bfd");
    assert!(bfd.multihop);
    assert_eq!(bfd.authentication, BfdAuthentication::None);
    // Single-hop needs none (RFC 5881 §5's TTL check), and may have one.
    let config = valid(&with_peer("bfd = {}\n"));
    assert_eq!(
        config.peers[0].bfd.as_ref().map(|b| &b.authentication),
        Some(&BfdAuthentication::None)
    );
    let config = valid(&with_peer(
        "bfd = { authentication = \"keyed-md5\", key_file = \"/run/k\" }\n",
    ));
    assert_eq!(
        config.peers[0].bfd.as_ref().map(|b| &b.authentication),
        Some(&BfdAuthentication::Key {
            auth_type: crate::bfd::packet::AuthType::KeyedMd5,
            key_id: 1,
            file: PathBuf::from("/run/k"),
            key: None,
        })
    );
}

#[test]
fn bfd_authentication_problems() {
    let cases = [
        (
            "bfd = { authentication = \"keyed-sha\" }\n",
            "9:26: unknown BFD authentication \"keyed-sha\"; did you mean \"keyed-sha1\"?",
        ),
        (
            "bfd = { authentication = \"keyed-sha1\" }\n",
            "9:26: authentication = \"keyed-sha1\" needs key_file, the file holding the key (1 to 20 bytes)",
        ),
        (
            "bfd = { key_file = \"k\" }\n",
            "9:20: key_file needs authentication set to a keyed type (\"simple-password\", \"keyed-md5\", \"meticulous-keyed-md5\", \"keyed-sha1\" or \"meticulous-keyed-sha1\")",
        ),
        (
            "bfd = { authentication = \"none\", key_id = 2 }\n",
            "9:43: key_id needs authentication set to a keyed type (\"simple-password\", \"keyed-md5\", \"meticulous-keyed-md5\", \"keyed-sha1\" or \"meticulous-keyed-sha1\")",
        ),
        (
            "bfd = { authentication = \"keyed-sha1\", key_file = \"k\", key_id = 256 }\n",
            "9:65: key_id must be in 0..=255, got 256",
        ),
        (
            "bfd = { authentication = \"keyed-sha1\", key_file = \"\" }\n",
            "9:51: key_file is empty; give the path of the file holding the key",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(problems(&with_peer(extra)), vec![want], "{extra}");
    }
}

#[test]
fn load_reads_bfd_key_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("rack.toml");
    std::fs::write(dir.path().join("good"), "sha1-key\n").expect("write key");
    std::fs::write(dir.path().join("long"), "k".repeat(17)).expect("write key");
    let peer = |name: &str, addr: &str, how: &str, file: &str| {
        format!(
            "[[peer]]\nname = \"{name}\"\naddress = \"{addr}\"\nasn = 65000\n\
             bfd = {{ multihop = true, authentication = \"{how}\", key_file = \"{file}\" }}\n"
        )
    };
    let text = format!(
        "{HEAD}{}{}{}",
        peer("a", "192.0.2.1", "keyed-sha1", "good"),
        peer("b", "192.0.2.2", "keyed-md5", "long"),
        peer("c", "192.0.2.3", "keyed-sha1", "missing"),
    );
    std::fs::write(&config_path, &text).expect("write config");
    let problems = load_problems(&config_path);
    let file = |name: &str| dir.path().join(name).display().to_string();
    assert_eq!(
        problems,
        vec![
            format!(
                "14:67: key_file {} holds a key of 17 bytes; a keyed-md5 key is 1 to 16 bytes (RFC 5880 §6.7.3)",
                file("long")
            ),
            format!(
                "19:68: key_file {}: cannot read file: No such file or directory (os error 2)",
                file("missing")
            ),
        ]
    );
    let text = format!("{HEAD}{}", peer("a", "192.0.2.1", "keyed-sha1", "good"));
    std::fs::write(&config_path, &text).expect("write config");
    let before = load(&config_path).expect("valid config");
    let key = |c: &Config| {
        c.peers[0]
            .bfd
            .as_ref()
            .and_then(|b| b.authentication.key().cloned())
    };
    assert_eq!(
        key(&before),
        Some(BfdKey::new(crate::bfd::packet::AuthType::KeyedSha1, 1, b"sha1-key").unwrap())
    );
    // A changed key makes the peer compare unequal: reload restarts it.
    std::fs::write(dir.path().join("good"), "other\n").expect("write key");
    let after = load(&config_path).expect("valid config");
    assert_ne!(key(&before), key(&after));
    assert_ne!(before.peers[0], after.peers[0]);
}

#[test]
fn password_files_resolve_relative_to_the_config() {
    let text = with_peer("password_file = \"secrets/tor1\"\n");
    let config = valid(&text);
    assert_eq!(
        config.peers[0].password,
        Some(PeerPassword {
            file: PathBuf::from("/etc/holdfast/secrets/tor1"),
            key: None
        })
    );
    let text = with_peer("password_file = \"/run/keys/tor1\"\n");
    let config = valid(&text);
    assert_eq!(
        config.peers[0].password.as_ref().map(|p| p.file.clone()),
        Some(PathBuf::from("/run/keys/tor1"))
    );
}

#[test]
fn load_reads_password_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("rack.toml");
    std::fs::write(dir.path().join("good"), "s3cret\n").expect("write key");
    std::fs::write(dir.path().join("long"), "k".repeat(81)).expect("write key");
    std::fs::write(dir.path().join("empty"), "\n").expect("write key");
    let text = format!(
        "{}password_file = \"good\"\n[[peer]]\nname = \"b\"\naddress = \"192.0.2.2\"\nasn = 65000\npassword_file = \"long\"\n\
         [[peer]]\nname = \"c\"\naddress = \"192.0.2.3\"\nasn = 65000\npassword_file = \"empty\"\n\
         [[peer]]\nname = \"d\"\naddress = \"192.0.2.4\"\nasn = 65000\npassword_file = \"missing\"\n",
        with_peer("")
    );
    std::fs::write(&config_path, &text).expect("write config");
    let problems = load_problems(&config_path);
    let file = |name: &str| dir.path().join(name).display().to_string();
    assert_eq!(
        problems,
        vec![
            format!(
                "14:17: password_file {} holds a key of 81 bytes; TCP MD5 keys are at most 80 bytes (TCP_MD5SIG_MAXKEYLEN)",
                file("long")
            ),
            format!(
                "19:17: password_file {} is empty; a TCP MD5 key needs 1 to 80 bytes",
                file("empty")
            ),
            format!(
                "24:17: cannot read password_file {}: No such file or directory (os error 2)",
                file("missing")
            ),
        ]
    );

    // Only the good one: the key is read, and a changed key makes the peer
    // compare unequal (the daemon restarts just that session on reload).
    let text = with_peer("password_file = \"good\"\n");
    std::fs::write(&config_path, &text).expect("write config");
    let before = load(&config_path).expect("valid config");
    assert_eq!(before.peers[0].md5_key(), Some(&b"s3cret"[..]));
    std::fs::write(dir.path().join("good"), "n3w\n").expect("write key");
    let after = load(&config_path).expect("valid config");
    assert_eq!(after.peers[0].md5_key(), Some(&b"n3w"[..]));
    assert_ne!(before.peers[0], after.peers[0]);
    assert_eq!(before.speaker, after.speaker);
}

/// `speaker.api_token_file`: resolved against the config's directory,
/// read by `load` (not by `parse`), and its problems are diagnostics at
/// the value.
#[test]
fn load_reads_the_api_token_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("rack.toml");
    let with_token = |file: &str| {
        with_peer("").replacen(
            "asn = 65001\n",
            &format!("asn = 65001\napi_token_file = \"{file}\"\n"),
            1,
        )
    };
    let parsed = valid(&with_token("secrets/api"));
    assert_eq!(
        parsed.speaker.api_token,
        Some(ApiToken {
            file: PathBuf::from("/etc/holdfast/secrets/api"),
            token: None
        })
    );
    let token_problems = |file: &str| -> Vec<String> {
        std::fs::write(&config_path, with_token(file)).expect("write config");
        load_problems(&config_path)
    };
    std::fs::write(dir.path().join("short"), "abc\n").expect("write token");
    let file = |name: &str| dir.path().join(name).display().to_string();
    assert_eq!(
        token_problems("short"),
        vec![format!(
            "3:18: api_token_file {} holds a token of 3 characters; it must be at least 16 (e.g. from `openssl rand -base64 32`)",
            file("short")
        )]
    );
    assert_eq!(
        token_problems("missing"),
        vec![format!(
            "3:18: api_token_file {} cannot be read: No such file or directory (os error 2)",
            file("missing")
        )]
    );
    assert_eq!(
        problems(&with_peer("").replacen(
            "asn = 65001\n",
            "asn = 65001\napi_token_file = \"\"\n",
            1
        )),
        vec!["3:18: api_token_file is empty; give the path of the file holding the token"]
    );
    // A good one is read; a changed token is a changed config (a reload
    // applies it).
    std::fs::write(dir.path().join("good"), "c2VjcmV0LXRva2VuLTE2Yg==\n").expect("write token");
    std::fs::write(&config_path, with_token("good")).expect("write config");
    let before = load(&config_path).expect("valid config");
    let token = |c: &Config| {
        c.speaker
            .api_token
            .as_ref()
            .and_then(|t| t.token.as_ref())
            .map(|t| t.as_bytes().to_vec())
    };
    assert_eq!(token(&before), Some(b"c2VjcmV0LXRva2VuLTE2Yg==".to_vec()));
    std::fs::write(dir.path().join("good"), "bmV3LXNlY3JldC10b2tlbi0xNg\n").expect("write token");
    let after = load(&config_path).expect("valid config");
    assert_eq!(token(&after), Some(b"bmV3LXNlY3JldC10b2tlbi0xNg".to_vec()));
    assert_ne!(before.speaker, after.speaker);
}

#[test]
fn load_reports_an_unreadable_config_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("absent.toml");
    let diags = load(&path).expect_err("missing file");
    assert_eq!(
        diags.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![format!(
            "{}:1:1: cannot read file: No such file or directory (os error 2)",
            path.display()
        )]
    );
}

#[test]
fn speaker_values() {
    let text = "[speaker]\nasn = 65001\nrouter_id = \"0.0.0.0\"\napi = \"localhost\"\nlisten = \"0.0.0.0\"\nhostname = \"Node_1\"\ndrain_on_cordon = 1\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        problems(text),
        vec![
            "3:13: router_id must not be 0.0.0.0 (RFC 6286 §2.1)",
            "4:7: api must be an address and port such as \"127.0.0.1:9179\" or \"[::1]:9179\", got \"localhost\"",
            "5:10: listen must be an address and port such as \"127.0.0.1:9179\" or \"[::1]:9179\", got \"0.0.0.0\"",
            "6:12: hostname \"Node_1\" is not a DNS name: \"Node_1\" must be lower-case letters, digits and '-', not beginning or ending with '-'",
            "7:19: drain_on_cordon must be true or false, got an integer",
        ]
    );
    let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.300\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        problems(text),
        vec!["3:13: router_id must be \"auto\" or an IPv4 address, got \"192.0.2.300\""]
    );
}

#[test]
fn source_kinds_and_their_keys() {
    let text = "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"file\"\npath = \"vips.toml\"\nnamespaces = [\"a\"]\n";
    assert_eq!(
        problems(text),
        vec!["10:1: namespaces applies only to kind = \"kubernetes\""]
    );
    let text = "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"kubernetes\"\npath = \"vips.toml\"\nnamespaces = [\"Team-A\", \"b\", \"b\"]\nload_balancer_classes = []\nrequire_class = true\n";
    assert_eq!(
        problems(text),
        vec![
            "9:1: path applies only to kind = \"file\"; the kubernetes source reads Services from the API server",
            "10:15: namespace \"Team-A\" must be lower-case letters, digits and '-', not beginning or ending with '-'",
            "10:30: \"b\" is listed twice in namespaces",
            "11:25: load_balancer_classes is empty while require_class = true, so no Service would ever be selected",
        ]
    );
    let text = "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"kubernetes\"\nnamespaces = [\"b\", \"b\"]\n";
    assert_eq!(
        problems(text),
        vec!["9:20: \"b\" is listed twice in namespaces"]
    );
    let text = "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"Kubernetes\"\n";
    assert_eq!(
        problems(text),
        vec!["8:8: unknown source kind \"Kubernetes\"; did you mean \"kubernetes\"?"]
    );
    let config = valid(
        "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"kubernetes\"\nnamespaces = [\"web\"]\nload_balancer_classes = [\"example.com/lb\"]\nrequire_class = true\n",
    );
    assert_eq!(
        config.sources[0].kind,
        Source::Kubernetes(KubernetesSource {
            namespaces: vec!["web".to_string()],
            load_balancer_classes: vec!["example.com/lb".to_string()],
            require_class: true,
        })
    );
}

/// The stability layer's own judgement, at load time and at the value:
/// what `check` accepts, `run` and a reload accept too.
#[test]
fn stability_values_the_stability_layer_refuses_are_refused_where_written() {
    let at = |stability: &str| problems(&format!("{}[stability]\n{stability}", with_peer("")));
    assert_eq!(
        at("withdraw_hold_down = \"8761h\"\n"),
        vec![
            "10:22: stability.withdraw_hold_down = 31539600s is longer than the maximum of 31536000s"
        ]
    );
    assert_eq!(
        at("delete_delay = \"8761h\"\n"),
        vec!["10:16: stability.delete_delay = 31539600s is longer than the maximum of 31536000s"]
    );
    let damping = at("[stability.damping]\nhalf_life = \"1ms\"\nmax_suppress = \"1000h\"\n");
    assert_eq!(damping.len(), 1, "{damping:?}");
    assert!(
        damping[0].starts_with("12:16: stability.damping: the figure of merit is capped at"),
        "{damping:?}"
    );
    // At the maximum itself: accepted.
    valid(&format!(
        "{}[stability]\nwithdraw_hold_down = \"8760h\"\n",
        with_peer("")
    ));
}

#[test]
fn stability_and_damping() {
    let config = valid(&format!("{}[stability.damping]\n", with_peer("")));
    assert_eq!(config.stability.damping, Some(Damping::default()));
    let config = valid(&format!(
        "{}[stability.damping]\nenabled = false\n",
        with_peer("")
    ));
    assert_eq!(config.stability.damping, None);
    let text = format!(
        "{}[stability]\nwithdraw_hold_down = 30\n[stability.damping]\nreuse_threshold = 2000\nhalf_life = \"0s\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "10:22: withdraw_hold_down must be a string with a unit, e.g. \"30s\" or \"30ms\"; a bare number has no unit",
            "12:19: reuse_threshold (2000) must be less than suppress_threshold (2000)",
            "13:13: half_life must be more than 0s",
        ]
    );
    let text = format!(
        "{}[stability.damping]\nhalf_life = \"1h\"\nmax_suppress = \"30m\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:16: damping could never engage: the penalty ceiling reuse_threshold × 2^(max_suppress/half_life) = 1061 does not exceed suppress_threshold (2000) (RFC 2439 §4.2); raise max_suppress (30m) or lower half_life (1h)"
        ]
    );
}

#[test]
fn graceful_shutdown_wait_is_a_bounded_duration() {
    let config = valid(&with_peer("").replace(
        "asn = 65001\n",
        "asn = 65001\ngraceful_shutdown_wait = \"0s\"\n",
    ));
    assert_eq!(config.speaker.graceful_shutdown_wait, Duration::ZERO);
    let text = with_peer("").replace(
        "asn = 65001\n",
        "asn = 65001\ngraceful_shutdown_wait = \"2h\"\n",
    );
    assert_eq!(
        problems(&text),
        vec!["3:26: graceful_shutdown_wait must be at most 1h (\"0s\" skips the wait)"]
    );
}

#[test]
fn mass_withdrawal_guard_keys() {
    let config = valid(&with_peer(""));
    assert_eq!(config.stability.guard.max_withdraw_fraction, 0.5);
    assert_eq!(
        config.stability.guard.withdraw_interval,
        Duration::from_millis(100)
    );
    for (rate, per_second) in [
        ("\"10/s\"", 10.0),
        ("\"30/m\"", 0.5),
        ("\"30/min\"", 0.5),
        ("\"360/h\"", 0.1),
        ("4", 4.0),
        ("2.5", 2.5),
    ] {
        let config = valid(&format!(
            "{}[stability]\nmax_withdraw_fraction = 1\nwithdraw_rate = {rate}\n",
            with_peer("")
        ));
        assert_eq!(
            config.stability.guard.withdraw_interval,
            Duration::from_secs_f64(1.0 / per_second),
            "{rate}"
        );
        assert_eq!(config.stability.guard.max_withdraw_fraction, 1.0);
    }
    let text = format!(
        "{}[stability]\nmax_withdraw_fraction = 0\nwithdraw_rate = \"0/s\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "10:25: max_withdraw_fraction must be more than 0 and at most 1 (1 turns the guard off), got 0",
            "11:17: withdraw_rate must be more than 0: at least one withdrawal an hour (\"1/h\") and at most 1000000 a second",
        ]
    );
    let text = format!(
        "{}[stability]\nmax_withdraw_fraction = 1.5\nwithdraw_rate = \"10 per second\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "10:25: max_withdraw_fraction must be more than 0 and at most 1 (1 turns the guard off), got 1.5",
            "11:17: withdraw_rate must be withdrawals per unit of time, such as \"10/s\", \"30/m\" or \"100/h\", got \"10 per second\"",
        ]
    );
    let text = format!(
        "{}[stability]\nmax_withdraw_fraction = \"half\"\nwithdraw_rate = true\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "10:25: max_withdraw_fraction must be a number such as 0.5, more than 0 and at most 1",
            "11:17: withdraw_rate must be a string such as \"10/s\" or a number (per second)",
        ]
    );
}

#[test]
fn advertisement_peers_must_exist() {
    let text = format!(
        "{}[[advertisement]]\nname = \"public\"\npeers = [\"tor1\", \"tor2\", \"spine9\"]\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:18: unknown peer \"tor2\": no [[peer]] has that name (did you mean \"tor1\"?)",
            "11:26: unknown peer \"spine9\": no [[peer]] has that name; expected \"tor1\"",
        ]
    );
    let text = format!(
        "{}[[advertisement]]\nname = \"public\"\npeers = []\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:9: peers is empty, so these routes would go nowhere; remove the key to use all peers"
        ]
    );
}

#[test]
fn vip_ranges_take_prefixes_and_inclusive_ranges_of_either_family() {
    let text = format!(
        "{}[[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.0/24\", \"2001:db8:1::/64\", \"198.51.100.10-198.51.100.20\", \"2001:db8:2::10 - 2001:db8:2::2f\", \"192.0.2.7/32\"]\n[[advertisement]]\nname = \"all\"\n",
        with_peer("")
    );
    let config = valid(&text);
    let public = config.advertisement("public").expect("public");
    let shown: Vec<String> = public
        .vip_ranges
        .as_ref()
        .expect("ranges")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "203.0.113.0/24",
            "2001:db8:1::/64",
            "198.51.100.10-198.51.100.20",
            "2001:db8:2::10-2001:db8:2::2f",
            "192.0.2.7/32"
        ]
    );
    let ip = |t: &str| t.parse::<IpAddr>().expect("address");
    for inside in [
        "203.0.113.0",
        "203.0.113.255",
        "2001:db8:1::abcd",
        "198.51.100.10",
        "198.51.100.20",
        "2001:db8:2::2f",
        "192.0.2.7",
    ] {
        assert!(public.allows_address(ip(inside)), "{inside}");
    }
    for outside in [
        "203.0.114.0",
        "198.51.100.9",
        "198.51.100.21",
        "2001:db8:2::30",
        "2001:db8:2::f",
        "192.0.2.8",
        "10.96.200.1",
    ] {
        assert!(!public.allows_address(ip(outside)), "{outside}");
    }
    // Absent: no restriction.
    let all = config.advertisement("all").expect("all");
    assert_eq!(all.vip_ranges, None);
    assert!(all.allows_address(ip("10.96.200.1")));
    assert_eq!(Advertisement::implicit_default().vip_ranges, None);
}

#[test]
fn vip_ranges_entries_are_checked_where_they_are_written() {
    let text = format!(
        "{}[[advertisement]]\nname = \"public\"\nvip_ranges = [\n  \"203.0.113.5/24\",\n  \"2001:db8::1/64\",\n  \"198.51.100.20-198.51.100.10\",\n  \"192.0.2.1-2001:db8::1\",\n  \"192.0.2.1\",\n  \"10.0.0.0/33\",\n  \"10.0.0.300/24\",\n  \"::ffff:10.0.0.0/104\",\n  7,\n]\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "12:3: vip range \"203.0.113.5/24\" has host bits set; the prefix is \"203.0.113.0/24\" (or write \"203.0.113.5/32\" for the one address)",
            "13:3: vip range \"2001:db8::1/64\" has host bits set; the prefix is \"2001:db8::/64\" (or write \"2001:db8::1/128\" for the one address)",
            "14:3: vip range \"198.51.100.20-198.51.100.10\" ends before it starts; write \"198.51.100.10-198.51.100.20\"",
            "15:3: vip range \"192.0.2.1-2001:db8::1\" mixes IPv4 and IPv6; both ends must be of one family",
            "16:3: vip range \"192.0.2.1\" is neither a prefix such as \"192.0.2.0/24\" nor a range such as \"192.0.2.10-192.0.2.20\" (for one address, write \"192.0.2.1/32\")",
            "17:3: vip range \"10.0.0.0/33\": prefix length \"33\" is not a number from 0 to 32",
            "18:3: vip range \"10.0.0.300/24\": address \"10.0.0.300\" is not an IPv4 or IPv6 address; write a prefix such as \"192.0.2.0/24\" or a range such as \"192.0.2.10-192.0.2.20\"",
            "19:3: vip range \"::ffff:10.0.0.0/104\": ::ffff:10.0.0.0 is an IPv4-mapped IPv6 address, which no VIP is (an IPv4 VIP is its IPv4 address); write \"10.0.0.0\"",
            "20:3: each of vip_ranges must be a string, got an integer",
        ]
    );
    // Empty, not an array, and a repeat (the same addresses however
    // written), reported at the repeat.
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nvip_ranges = []\n[[advertisement]]\nname = \"b\"\nvip_ranges = \"192.0.2.0/24\"\n[[advertisement]]\nname = \"c\"\nvip_ranges = [\"192.0.2.0/24\", \"198.51.100.0/24\", \"192.0.2.0-192.0.2.255\"]\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:14: vip_ranges is empty, so no address would be advertised; remove the key to allow every address",
            "14:14: vip_ranges must be an array, got a string",
            "17:50: vip range \"192.0.2.0/24\" is listed twice in vip_ranges",
        ]
    );
}

#[test]
fn duplicate_advertisement_names() {
    let text = format!(
        "{}[[advertisement]]\nname = \"public\"\n[[advertisement]]\nname = \"public\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec!["12:8: duplicate advertisement name \"public\" (first used on line 10)"]
    );
    let text = format!("{}[[advertisement]]\nname = \"has space\"\n", with_peer(""));
    assert_eq!(
        problems(&text),
        vec![
            "10:8: advertisement name \"has space\" must be 1 to 64 letters, digits, '-', '_' or '.'"
        ]
    );
}

#[test]
fn communities_are_checked() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\ncommunities = [\"65536:1\", \"no-export\", \"no-export\"]\nlarge_communities = [\"1:2\"]\nextended_communities = [\"rt:4200000000:70000\"]\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:16: community \"65536:1\" is not valid; expected \"ASN:N\" with both parts in 0..=65535, or one of \"no-export\", \"no-advertise\", \"no-export-subconfed\", \"blackhole\", \"graceful-shutdown\"",
            "11:40: community no-export is listed twice in communities",
            "12:22: large community \"1:2\" is not valid; expected \"GLOBAL:LOCAL1:LOCAL2\" with each part in 0..=4294967295",
            "13:25: extended community \"rt:4200000000:70000\": with a 4-octet ASN the local part must be in 0..=65535 (RFC 5668), got 70000",
        ]
    );
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\ncommunities = [\"no-export\", \"65535:65281\"]\n",
        with_peer("")
    );
    // "65535:65281" is no-export written as numbers: the same community.
    assert_eq!(
        problems(&text),
        vec!["11:29: community no-export is listed twice in communities"]
    );
}

#[test]
fn advertisement_values() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\naddresses = [\"LoadBalancerIp\"]\nlocal_pref = -1\nmed = 4294967296\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:14: unknown address kind \"LoadBalancerIp\"; did you mean \"LoadBalancerIP\"?",
            "12:14: local_pref must be in 0..=4294967295, got -1",
            "13:7: med must be in 0..=4294967295, got 4294967296",
        ]
    );
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\naddresses = []\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:13: addresses is empty; list at least one of \"LoadBalancerIP\", \"ExternalIP\", \"ClusterIP\", \"PodCIDR\""
        ]
    );
}

#[test]
fn service_attributes_aggregation_pod_cidr_and_interface() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nallow_service_attributes = [\"med\", \"local-pref\"]\naggregation_length = 24\naggregation_length_v6 = 64\naddresses = [\"PodCIDR\", \"ExternalIP\"]\n\
         [[advertisement]]\nname = \"lo\"\ninterface = \"lo\"\n",
        with_peer("")
    );
    let config = valid(&text);
    let a = config.advertisement("a").expect("a");
    assert_eq!(
        a.allow_service_attributes,
        vec![
            crate::config::ServiceAttribute::Med,
            crate::config::ServiceAttribute::LocalPref
        ]
    );
    assert_eq!(
        (a.aggregation_length, a.aggregation_length_v6),
        (Some(24), Some(64))
    );
    assert!(a.pod_cidr);
    assert_eq!(a.addresses, vec![AddressKind::ExternalIp]);
    let lo = config.advertisement("lo").expect("lo");
    assert_eq!(lo.interface.as_deref(), Some("lo"));
    assert!(
        lo.addresses.is_empty(),
        "an interface advertisement announces the interface alone"
    );
    assert!(!lo.pod_cidr);
    // Defaults: nothing allowed, no aggregation.
    let d = Advertisement::implicit_default();
    assert!(d.allow_service_attributes.is_empty() && d.aggregation_length.is_none());

    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nallow_service_attributes = [\"localpref\", \"med\", \"med\"]\naggregation_length = 33\naggregation_length_v6 = 0\ninterface = \"much-too-long-name\"\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:29: unknown Service attribute \"localpref\"; did you mean \"local-pref\"?",
            "11:49: \"med\" is listed twice in allow_service_attributes",
            "12:22: aggregation_length must be in 1..=32, got 33",
            "13:25: aggregation_length_v6 must be in 1..=128, got 0",
            "14:13: interface \"much-too-long-name\" is not an interface name (1 to 15 characters, no '/' or spaces)",
        ]
    );
}

#[test]
fn probe_timeout_below_interval() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nprobe = {{ port = 443, interval = \"1s\", timeout = \"1s\" }}\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec!["11:50: timeout (1s) must be less than interval (1s), so probes do not overlap"]
    );
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nprobe = {{ interval = \"5s\", fail_after = 0 }}\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:9: probe needs port (a TCP connect to the VIP) or url (an HTTP(S) GET, e.g. url = \"https://127.0.0.1:6443/readyz\")",
            "11:41: fail_after must be in 1..=4294967295, got 0",
        ]
    );
    let config = valid(&format!(
        "{}[[advertisement]]\nname = \"a\"\nprobe = {{ port = 80 }}\n",
        with_peer("")
    ));
    assert_eq!(
        config.advertisements[0].probe,
        Some(Probe {
            target: ProbeTarget::Tcp { port: 80 },
            interval: secs(2),
            timeout: secs(1),
            fail_after: 3,
            recover_after: 2,
            on_failure: OnFailure::Withdraw,
            disable_file: None,
        })
    );
}

#[test]
fn steering_keys_parse_and_are_checked() {
    let config = valid(&format!(
        "{}[[advertisement]]\nname = \"a\"\nlink_bandwidth = \"per-endpoint\"\n\
         degraded = {{ med = 500, as_path_prepend = 3, communities = [\"65001:666\"] }}\n\
         probe = {{ port = 80, on_failure = \"degrade\", disable_file = \"/run/holdfast/down\" }}\n",
        with_peer("")
    ));
    let a = &config.advertisements[0];
    assert_eq!(a.link_bandwidth, Some(LinkBandwidth::PerEndpoint));
    assert_eq!(
        a.degraded,
        Some(Degraded {
            med: Some(500),
            as_path_prepend: 3,
            communities: vec![65001 << 16 | 666],
        })
    );
    let probe = a.probe.as_ref().unwrap();
    assert_eq!(probe.on_failure, OnFailure::Degrade);
    assert_eq!(
        probe.disable_file.as_deref(),
        Some(Path::new("/run/holdfast/down"))
    );

    let bad = |ad: &str| {
        problems(&format!(
            "{}[[advertisement]]\nname = \"a\"\n{ad}\n",
            with_peer("")
        ))
    };
    assert_eq!(
        bad("link_bandwidth = \"per-pod\""),
        ["11:18: unknown link_bandwidth \"per-pod\"; expected \"per-endpoint\""]
    );
    assert_eq!(
        bad("probe = { port = 80, on_failure = \"degrade\" }"),
        [
            "11:9: probe.on_failure is \"degrade\" but the advertisement has no degraded = { ... } attributes to degrade to"
        ]
    );
    assert_eq!(
        bad("degraded = {}"),
        ["11:12: degraded is empty; give at least one of med, as_path_prepend, communities"]
    );
    assert_eq!(
        bad("degraded = { as_path_prepend = 11, metric = 1 }"),
        [
            "11:32: degraded.as_path_prepend must be in 0..=10, got 11",
            "11:36: unknown key \"metric\" in [[advertisement]] degraded; expected one of \"med\", \"as_path_prepend\" or \"communities\"",
        ]
    );
    assert_eq!(
        bad("probe = { port = 80, disable_file = \"down\" }"),
        ["11:37: disable_file \"down\" must be an absolute path"]
    );
}

#[test]
fn http_probes_take_a_url_and_an_optional_ca_file() {
    let config = valid(&format!(
        "{}[[advertisement]]\nname = \"api\"\n\
         probe = {{ url = \"https://127.0.0.1:6443/readyz\", ca_file = \"pki/ca.crt\", interval = \"1s\", timeout = \"500ms\", fail_after = 3, recover_after = 2 }}\n\
         [[advertisement]]\nname = \"web\"\nprobe = {{ url = \"http://[::1]/healthz\" }}\n",
        with_peer("")
    ));
    let api = config.advertisements[0].probe.as_ref().unwrap();
    let ProbeTarget::Http { url, ca_file } = &api.target else {
        panic!("{api:?}")
    };
    assert_eq!(url.as_str(), "https://127.0.0.1:6443/readyz");
    assert!(url.https);
    assert_eq!(url.host, UrlHost::Ip("127.0.0.1".parse().unwrap()));
    assert_eq!((url.port, url.target.as_str()), (6443, "/readyz"));
    // Relative to the config file's directory, like password_file.
    assert_eq!(
        ca_file.as_deref(),
        Some(Path::new("/etc/holdfast/pki/ca.crt"))
    );
    assert_eq!(
        (api.interval, api.timeout, api.fail_after, api.recover_after),
        (secs(1), Duration::from_millis(500), 3, 2)
    );
    assert_eq!(
        api.target.describe(),
        "HTTP probe of https://127.0.0.1:6443/readyz"
    );
    assert_eq!(api.target.to_string(), "https://127.0.0.1:6443/readyz");
    let web = config.advertisements[1].probe.as_ref().unwrap();
    let ProbeTarget::Http { url, ca_file } = &web.target else {
        panic!("{web:?}")
    };
    assert_eq!((url.https, url.port, ca_file), (false, 80, &None));
}

#[test]
fn a_probe_has_port_or_url_and_ca_file_goes_with_https() {
    let bad = |probe: &str| {
        problems(&format!(
            "{}[[advertisement]]\nname = \"a\"\nprobe = {probe}\n",
            with_peer("")
        ))
    };
    assert_eq!(
        bad("{ port = 443, url = \"https://127.0.0.1/\" }"),
        [
            "11:29: probe has both port and url; give one: port for a TCP connect to the VIP, url for an HTTP(S) GET"
        ]
    );
    assert_eq!(
        bad("{ fail_after = 2 }"),
        [
            "11:9: probe needs port (a TCP connect to the VIP) or url (an HTTP(S) GET, e.g. url = \"https://127.0.0.1:6443/readyz\")"
        ]
    );
    assert_eq!(
        bad("{ url = \"http://127.0.0.1:8080/readyz\", ca_file = \"/etc/ca.crt\" }"),
        [
            "11:59: ca_file is for https:// urls; url \"http://127.0.0.1:8080/readyz\" is plain HTTP, which has no certificate to verify"
        ]
    );
    assert_eq!(
        bad("{ port = 443, ca_file = \"/etc/ca.crt\" }"),
        ["11:33: ca_file is for a probe with an https:// url; a port probe only connects"]
    );
    assert_eq!(
        bad("{ url = \"https://127.0.0.1/\", ca_file = \"\" }"),
        [
            "11:49: ca_file is empty; give the path of a PEM file of CA certificates, or remove the key to use the system's roots"
        ]
    );
    assert_eq!(
        bad("{ url = \"tcp://127.0.0.1:6443\" }"),
        [
            "11:17: url \"tcp://127.0.0.1:6443\" has scheme \"tcp\"; a probe url is http:// or https://"
        ]
    );
    assert_eq!(
        bad("{ url = 6443 }"),
        ["11:17: url must be a string, got an integer"]
    );
    // The URL and the other keys are each checked.
    assert_eq!(
        bad("{ url = \"https://[::1/\", timeout = \"0s\" }"),
        [
            "11:17: url \"https://[::1/\" has an IPv6 address without its closing ']'",
            "11:44: timeout must be more than 0s",
        ]
    );
}

/// A CA file that cannot be used is a warning where the config is read
/// with its files (`holdfast check`, `run`): the probe reads it again
/// before each request and fails with the same reason meanwhile.
#[test]
fn an_unusable_ca_file_is_a_warning_when_files_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("node.toml");
    std::fs::write(dir.path().join("empty.crt"), "").unwrap();
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nprobe = {{ url = \"https://127.0.0.1:6443/readyz\", ca_file = \"missing.crt\" }}\n\
         [[advertisement]]\nname = \"b\"\nprobe = {{ url = \"https://127.0.0.1:6443/readyz\", ca_file = \"empty.crt\" }}\n",
        with_peer("")
    );
    std::fs::write(&config_path, &text).unwrap();
    let config = load(&config_path).expect("still a valid config");
    let file = |name: &str| dir.path().join(name).display().to_string();
    let said: Vec<String> = config
        .warnings
        .iter()
        .map(|d| {
            assert!(d.is_warning(), "{d}");
            format!("{}:{}: {}", d.line, d.col, d.message)
        })
        .collect();
    assert_eq!(
        said,
        [
            format!(
                "11:60: cannot read ca_file {}: No such file or directory (os error 2); its probe fails with this reason until the file is fixed (it is read again before every probe)",
                file("missing.crt")
            ),
            format!(
                "14:60: ca_file {} holds no certificate (no -----BEGIN CERTIFICATE----- block); its probe fails with this reason until the file is fixed (it is read again before every probe)",
                file("empty.crt")
            ),
        ]
    );
    // Without the files (`check --skip-password-files`), nothing is read.
    assert!(valid(&text).warnings.is_empty());
}

#[test]
fn duplicates_are_named_as_the_config_writes_them() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\naddresses = [\"ClusterIP\", \"LoadBalancerIP\", \"ClusterIP\"]\nextended_communities = [\"rt:65001:100\", \"ro:4200000001:7\", \"rt:65001:100\"]\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:45: \"ClusterIP\" is listed twice in addresses",
            "12:60: extended community \"rt:65001:100\" is listed twice in extended_communities",
        ]
    );
}

#[test]
fn selectors_are_checked() {
    let text = format!(
        "{}[[advertisement]]\nname = \"a\"\nservice_selector = {{ match_expressions = [{{ key = \"tier\", operator = \"In\" }}, {{ key = \"x\", operator = \"Exists\", values = [\"y\"] }}, {{ key = \"z\", operator = \"Equals\", values = [\"y\"] }}] }}\nnamespace_selector = {{ match_labels = {{ \"-bad\" = \"ok\", team = \"not ok\" }}, labels = {{}} }}\n",
        with_peer("")
    );
    assert_eq!(
        problems(&text),
        vec![
            "11:43: operator \"In\" needs a non-empty values list",
            "11:121: operator \"Exists\" takes no values; remove values",
            "11:154: unknown operator \"Equals\"; expected \"In\", \"NotIn\", \"Exists\" or \"DoesNotExist\"",
            "12:41: label key \"-bad\" is invalid: its name \"-bad\" must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit",
            "12:63: label value \"not ok\" is invalid: it must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit",
            "12:75: unknown key \"labels\" in [[advertisement]] namespace_selector (did you mean \"match_labels\"?)",
        ]
    );
}

#[test]
fn every_problem_is_reported_in_file_order() {
    let text = r#"[speaker]
asn = 0
router_id = "auto"

[[peer]]
name = "tor1"
address = "192.0.2.1"
asn = 65000
hold_time = "9s"
keepalive = "30s"

[[peer]]
name = "tor1"
address = "192.0.2.2"
asn = 65000
families = ["ipv4-multicast"]

[source]
kind = "kubernetes"

[stability]
withdraw_hold_down = "30"

[[advertisement]]
name = "public"
peers = ["tor9"]
"#;
    assert_eq!(
        problems(text),
        vec![
            "2:7: asn must be in 1..=4294967295, got 0",
            "10:13: keepalive (30s) must not exceed hold_time (9s)",
            "13:8: duplicate peer name \"tor1\" (first used on line 6)",
            "16:13: unsupported family \"ipv4-multicast\"; did you mean \"ipv4-unicast\"?",
            "22:22: withdraw_hold_down: \"30\" has no unit; add one, e.g. \"30s\" or \"30ms\"",
            "26:10: unknown peer \"tor9\": no [[peer]] has that name (did you mean \"tor1\"?)",
        ]
    );
}

#[test]
fn diagnostics_display_as_path_line_col_message() {
    let text = with_peer("").replace("asn = 65001", "asn = 0");
    let diags = parse(Path::new("config/rack-a.toml"), &text).expect_err("invalid");
    assert_eq!(diags.len(), 1);
    assert_eq!(
        diags[0].to_string(),
        "config/rack-a.toml:2:7: asn must be in 1..=4294967295, got 0"
    );
}

const VIP_NAMES: [&str; 2] = ["public", "private"];

fn vip_names() -> Vec<VipFileAdvertisement> {
    VIP_NAMES
        .iter()
        .map(|n| VipFileAdvertisement::named(n))
        .collect()
}

#[test]
fn vip_file_parses_with_default_advertisement() {
    let text = "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"demo/web\"\n\n[[vip]]\naddress = \"2001:db8:100::10\"\nadvertisement = \"private\"\n";
    let vips = parse_vip_file(Path::new("vips.toml"), text, &vip_names()).expect("valid");
    assert_eq!(
        vips,
        vec![
            VipEntry {
                address: "198.51.100.10".parse().expect("ip"),
                service: Some("demo/web".to_string()),
                advertisement: "public".to_string(),
                tenant: None,
            },
            VipEntry {
                address: "2001:db8:100::10".parse().expect("ip"),
                service: None,
                advertisement: "private".to_string(),
                tenant: None,
            },
        ]
    );
}

#[test]
fn empty_vip_file_is_an_empty_set() {
    for text in ["", "# nothing yet\n", "vip = []\n"] {
        assert_eq!(
            parse_vip_file(Path::new("vips.toml"), text, &vip_names()),
            Ok(vec![])
        );
    }
}

#[test]
fn a_vip_outside_its_advertisements_vip_ranges_is_an_error_at_its_address() {
    let config = valid(&format!(
        "{}[[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.0/24\"]\n[[advertisement]]\nname = \"internal\"\nvip_ranges = [\"10.96.200.10-10.96.200.20\"]\n[[advertisement]]\nname = \"any\"\n",
        with_peer("")
    ));
    let advertisements = config.vip_file_advertisements();
    let good = "[[vip]]\naddress = \"203.0.113.7\"\n[[vip]]\naddress = \"10.96.200.20\"\nadvertisement = \"internal\"\n[[vip]]\naddress = \"192.0.2.99\"\nadvertisement = \"any\"\n";
    let vips = parse_vip_file(Path::new("vips.toml"), good, &advertisements).expect("valid");
    let got: Vec<(String, &str)> = vips
        .iter()
        .map(|v| (v.address.to_string(), v.advertisement.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("203.0.113.7".to_string(), "public"),
            ("10.96.200.20".to_string(), "internal"),
            ("192.0.2.99".to_string(), "any"),
        ]
    );
    // Each parser (the fast path hands these to the TOML parser).
    let bad = "[[vip]]\naddress = \"10.96.200.5\"\n[[vip]]\naddress = \"10.96.200.21\"\nadvertisement = \"internal\"\n[[vip]]\nadvertisement = \"public\"\naddress = \"2001:db8::1\"\n";
    let diags = parse_vip_file(Path::new("vips.toml"), bad, &advertisements).expect_err("invalid");
    let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        vec![
            "vips.toml:2:11: VIP 10.96.200.5 is not in the vip_ranges [\"203.0.113.0/24\"] of advertisement \"public\" (the default: the entry names no advertisement)",
            "vips.toml:4:11: VIP 10.96.200.21 is not in the vip_ranges [\"10.96.200.10-10.96.200.20\"] of advertisement \"internal\"",
            "vips.toml:8:11: VIP 2001:db8::1 is not in the vip_ranges [\"203.0.113.0/24\"] of advertisement \"public\"",
        ]
    );
    let plain = "[[vip]]\naddress = \"203.0.113.7\"\n[[vip]]\naddress = \"203.0.114.1\"\n";
    let diags =
        parse_vip_file(Path::new("vips.toml"), plain, &advertisements).expect_err("invalid");
    assert_eq!(
        diags[0].to_string(),
        "vips.toml:4:11: VIP 203.0.114.1 is not in the vip_ranges [\"203.0.113.0/24\"] of advertisement \"public\" (the default: the entry names no advertisement)"
    );
}

#[test]
fn vip_file_problems() {
    let text = "[[vip]]\naddress = \"198.51.100.10\"\nadvertisement = \"publc\"\n[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"198.51.100.0/24\"\nport = 80\n[[vip]]\nservice = \"x\"\n";
    let diags = parse_vip_file(Path::new("vips.toml"), text, &vip_names()).expect_err("invalid");
    let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        vec![
            "vips.toml:3:17: unknown advertisement \"publc\" (did you mean \"public\"?)",
            "vips.toml:5:11: duplicate VIP 198.51.100.10 (first listed on line 2)",
            "vips.toml:7:11: address must be an IPv4 or IPv6 address (a single address, not a prefix), got \"198.51.100.0/24\"",
            "vips.toml:8:1: unknown key \"port\" in [[vip]]; expected one of \"address\", \"service\", \"advertisement\" or \"tenant\"",
            "vips.toml:9:1: missing required key \"address\" in [[vip]]",
        ]
    );
    let diags = parse_vip_file(
        Path::new("vips.toml"),
        "[vip]\naddress = \"198.51.100.1\"\n",
        &vip_names(),
    )
    .expect_err("invalid");
    assert_eq!(
        diags[0].to_string(),
        "vips.toml:1:1: [vip] must be an array of tables: write [[vip]], one per entry"
    );
    let diags =
        parse_vip_file(Path::new("vips.toml"), "[[vip]\n", &vip_names()).expect_err("invalid");
    assert_eq!(diags.len(), 1);
    assert!(
        diags[0].message.starts_with("TOML syntax error: "),
        "{}",
        diags[0]
    );
}

/// Truncating, deleting or replacing any single character of a full config
/// must give either a config or diagnostics with sane positions: never a
/// panic, never an empty error list.
#[test]
fn mangled_input_never_panics() {
    let lines = FULL.lines().count() + 1;
    let check = |text: &str| match parse(Path::new("t.toml"), text) {
        Ok(_) => {}
        Err(diags) => {
            assert!(!diags.is_empty(), "empty error list for {text:?}");
            for d in diags {
                assert!(
                    d.line >= 1 && d.line <= lines && d.col >= 1,
                    "{d} for {text:?}"
                );
            }
        }
    };
    let boundaries: Vec<usize> = FULL.char_indices().map(|(i, _)| i).collect();
    for &i in &boundaries {
        check(&FULL[..i]);
        let next = FULL[i..].chars().next().map_or(i, |c| i + c.len_utf8());
        let (before, after) = (&FULL[..i], &FULL[next..]);
        check(&format!("{before}{after}"));
        for replacement in ['"', '\n', 'é'] {
            check(&format!("{before}{replacement}{after}"));
        }
    }
}

/// The configuration reference (docs/src/reference/config.md) is generated
/// from `schema::sections()`: every table the parser checks its keys
/// against is one of them, and each key says what it is.
#[test]
fn the_schema_documents_every_table_the_parser_reads() {
    let tables: &[(&str, &[super::schema::Key])] = &[
        ("top level", super::TOP_LEVEL_KEYS),
        ("speaker", super::speaker::KEYS),
        ("peer", super::peer::KEYS),
        ("graceful_restart", super::peer::GRACEFUL_RESTART_KEYS),
        ("bfd", super::peer::BFD_KEYS),
        ("source", super::source::KEYS),
        ("stability", super::stability::STABILITY_KEYS),
        ("damping", super::stability::DAMPING_KEYS),
        ("advertisement", super::advertisement::KEYS),
        ("probe", super::advertisement::PROBE_KEYS),
        ("degraded", super::advertisement::DEGRADED_KEYS),
        ("node_override", super::node_override::KEYS),
        ("node_override peer", super::node_override::PEER_KEYS),
        ("selector", super::selector::SELECTOR_KEYS),
        ("match_expressions", super::selector::REQUIREMENT_KEYS),
        ("vip", crate::source::file::parse::VIP_KEYS),
        ("bmp", super::bmp::BMP_KEYS),
    ];
    let sections = crate::docs::all_sections();
    for (name, keys) in tables {
        assert!(
            sections.iter().any(|s| {
                let names = |keys: &[super::schema::Key]| -> Vec<&str> {
                    keys.iter().map(|k| k.name).collect()
                };
                names(s.keys) == names(keys)
            }),
            "the {name} keys are not a section of the configuration reference"
        );
    }
    let page = super::schema::reference(&crate::docs::all_sections());
    for section in &sections {
        let mut seen = std::collections::HashSet::new();
        for key in section.keys {
            assert!(
                seen.insert(key.name),
                "{}: {} twice",
                section.title,
                key.name
            );
            assert!(
                !key.meaning.trim().is_empty() && !key.kind.is_empty(),
                "{}: {} says nothing",
                section.title,
                key.name
            );
            assert!(
                page.contains(&format!("| `{}` |", key.name)),
                "{}",
                key.name
            );
        }
    }
}

/// Defaults shown in the reference are the ones the parser applies: a
/// config that writes every defaulted key with the page's value parses to
/// the same config as one that leaves them out.
#[test]
fn the_reference_defaults_are_the_parsers() {
    use super::schema::DefaultValue;
    let value = |keys: &[super::schema::Key], name: &str| {
        let key = keys.iter().find(|k| k.name == name).unwrap();
        match &key.default {
            DefaultValue::Value(f) => f(),
            other => panic!("{name}: {other:?}"),
        }
    };
    let base = "[speaker]\nasn = 65001\n[source]\nkind = \"kubernetes\"\n";
    let peer = "[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    let implicit = valid(&format!("{base}{peer}"));
    let mut explicit = base.to_string();
    for k in super::speaker::KEYS {
        if let DefaultValue::Value(_) = k.default {
            explicit = explicit.replacen(
                "[source]",
                &format!(
                    "{} = {}\n[source]",
                    k.name,
                    value(super::speaker::KEYS, k.name)
                ),
                1,
            );
        }
    }
    explicit.push_str(peer);
    for k in super::peer::KEYS {
        if let DefaultValue::Value(_) = k.default {
            explicit.push_str(&format!(
                "{} = {}\n",
                k.name,
                value(super::peer::KEYS, k.name)
            ));
        }
    }
    let mut gr = Vec::new();
    for k in super::peer::GRACEFUL_RESTART_KEYS {
        if let DefaultValue::Value(_) = k.default {
            gr.push(format!(
                "{} = {}",
                k.name,
                value(super::peer::GRACEFUL_RESTART_KEYS, k.name)
            ));
        }
    }
    explicit.push_str(&format!("graceful_restart = {{ {} }}\n", gr.join(", ")));
    explicit.push_str("[stability]\n");
    for k in super::stability::STABILITY_KEYS {
        if let DefaultValue::Value(_) = k.default {
            explicit.push_str(&format!(
                "{} = {}\n",
                k.name,
                value(super::stability::STABILITY_KEYS, k.name)
            ));
        }
    }
    let explicit = valid(&explicit);
    assert_eq!(explicit.speaker, implicit.speaker);
    assert_eq!(explicit.peers, implicit.peers);
    assert_eq!(explicit.stability, implicit.stability);
}

#[test]
fn metrics_is_a_second_listener_on_another_socket() {
    let text = "[speaker]\nasn = 65001\nmetrics = \"0.0.0.0:9180\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        valid(text).speaker.metrics,
        Some(SocketAddr::from(([0, 0, 0, 0], 9180)))
    );
    let same = "[speaker]\nasn = 65001\napi = \"127.0.0.1:9179\"\nmetrics = \"127.0.0.1:9179\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        problems(same),
        [
            "4:11: metrics must differ from api (127.0.0.1:9179): api already serves /metrics; leave metrics out, or give it another port"
        ]
    );
    let bad = "[speaker]\nasn = 65001\nmetrics = \"9180\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        problems(bad),
        [
            "3:11: metrics must be an address and port such as \"127.0.0.1:9179\" or \"[::1]:9179\", got \"9180\""
        ]
    );
}

#[test]
fn an_ipv4_mapped_vip_is_the_ipv4_vip_and_a_duplicate_of_it() {
    // The fast path and the TOML parser (a literal string is left to the
    // latter) read it the same way.
    for text in [
        "[[vip]]\naddress = \"::ffff:198.51.100.10\"\n",
        "[[vip]]\naddress = '::ffff:198.51.100.10'\n",
    ] {
        let vips = parse_vip_file(Path::new("vips.toml"), text, &vip_names()).expect("valid");
        assert_eq!(
            vips.iter().map(|v| v.address).collect::<Vec<_>>(),
            vec![IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10))],
            "{text:?}"
        );
    }
    let text =
        "[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"::ffff:198.51.100.10\"\n";
    let diags = parse_vip_file(Path::new("vips.toml"), text, &vip_names()).expect_err("duplicate");
    assert_eq!(
        diags.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec!["vips.toml:4:11: duplicate VIP 198.51.100.10 (first listed on line 2)"]
    );
}

#[test]
fn as_trans_is_neither_our_asn_nor_a_peers() {
    let text = "[speaker]\nasn = 23456\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 23456\n";
    let why = "must not be 23456: that is AS_TRANS, the placeholder for a 4-octet AS number in 2-octet fields (RFC 6793 §9), not an AS";
    assert_eq!(
        problems(text),
        vec![format!("2:7: asn {why}"), format!("8:7: asn {why}")]
    );
    // Its neighbours are ordinary AS numbers.
    for asn in [23455, 23457] {
        let ok = format!(
            "[speaker]\nasn = {asn}\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = {asn}\n"
        );
        assert!(parse(Path::new("t.toml"), &ok).is_ok(), "{asn}");
    }
}

#[test]
fn ipv4_mapped_addresses_are_refused_in_the_config_naming_the_ipv4_form() {
    let text = with_peer(
        "source_address = \"::ffff:192.0.2.11\"\n[[peer]]\nname = \"tor2\"\naddress = \"::ffff:192.0.2.2\"\nasn = 65000\n",
    );
    assert_eq!(
        problems(&text),
        vec![
            "9:18: source_address ::ffff:192.0.2.11 is an IPv4-mapped IPv6 address; write the IPv4 address \"192.0.2.11\"",
            "12:11: peer address ::ffff:192.0.2.2 is an IPv4-mapped IPv6 address; write the IPv4 address \"192.0.2.2\"",
        ]
    );
    let text = "[speaker]\nasn = 65001\nlisten = \"[::ffff:0.0.0.0]:179\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    assert_eq!(
        problems(text),
        vec![
            "3:10: listen [::ffff:0.0.0.0]:179 is an IPv4-mapped IPv6 address; write the IPv4 address and port \"0.0.0.0:179\""
        ]
    );
    // Other IPv6 addresses are as they were.
    let ok = with_peer(
        "[[peer]]\nname = \"tor2\"\naddress = \"2001:db8::2\"\nasn = 65000\nsource_address = \"2001:db8::11\"\n",
    );
    assert!(parse(Path::new("t.toml"), &ok).is_ok());
}

// ---- flexible peer ASNs and local_asn ----

#[test]
fn peer_asn_may_be_external_or_internal_and_local_asn_is_per_peer() {
    let c = valid(&format!(
        "{HEAD}[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = \"external\"\nlocal_asn = 65100\n\
         [[peer]]\nname = \"b\"\naddress = \"192.0.2.3\"\nasn = \"internal\"\n\
         [[peer]]\nname = \"c\"\naddress = \"192.0.2.4\"\nasn = 65100\nlocal_asn = 65100\n"
    ));
    let (a, b, cc) = (&c.peers[0], &c.peers[1], &c.peers[2]);
    assert_eq!((a.asn, a.local_asn), (PeerAsn::External, Some(65100)));
    assert_eq!((b.asn, b.local_asn), (PeerAsn::Internal, None));
    // The AS presented decides iBGP: c is internal in 65100, not 65001.
    assert_eq!(a.local_as(65001), 65100);
    assert_eq!(b.local_as(65001), 65001);
    assert!(!a.is_ibgp(65001));
    assert!(b.is_ibgp(65001));
    assert!(cc.is_ibgp(65001));
    assert_eq!(a.asn.to_string(), "external");
}

#[test]
fn peer_asn_words_and_local_asn_are_checked() {
    assert_eq!(
        problems(&format!(
            "{HEAD}[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = \"ebgp\"\nlocal_asn = 23456\n"
        )),
        vec![
            "8:7: asn must be an AS number, \"external\" or \"internal\", got \"ebgp\"",
            "9:13: local_asn must not be 23456: that is AS_TRANS, the placeholder for a 4-octet AS number in 2-octet fields (RFC 6793 §9), not an AS",
        ]
    );
}

// ---- [[node_override]] ----

/// Two peers (lines 5–8 and 9–12), overrides from line 13.
fn with_two_peers(extra: &str) -> String {
    with_peer(&format!(
        "[[peer]]\nname = \"tor2\"\naddress = \"2001:db8::1\"\nasn = 65000\n{extra}"
    ))
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn overrides_resolve_by_name_and_by_label() {
    let c = valid(&with_two_peers(
        "[[node_override]]\nnames = [\"node-7\"]\nasn = 65007\nrouter_id = \"192.0.2.77\"\n\
         [node_override.peer.tor1]\nsource_address = \"192.0.2.7\"\n\
         [[node_override]]\nnode_selector = { match_labels = { rack = \"b\" } }\n\
         [node_override.peer.tor1]\naddress = \"192.0.2.129\"\n\
         [node_override.peer.tor2]\naddress = \"2001:db8:b::1\"\n",
    ));
    assert_eq!(c.node_overrides.len(), 2);
    assert!(c.applied_overrides.is_empty());

    // Another node without labels: the file's values.
    let other = resolve(&c, "node-1", None);
    assert_eq!(other.speaker.asn, 65001);
    assert_eq!(other.speaker.router_id, RouterId::Auto);
    assert!(other.applied_overrides.is_empty());
    assert_eq!(other.peers, c.peers);

    // node-7 by name, without labels.
    let n7 = resolve(&c, "node-7", None);
    assert_eq!(n7.speaker.asn, 65007);
    assert_eq!(
        n7.speaker.router_id,
        RouterId::Fixed(Ipv4Addr::new(192, 0, 2, 77))
    );
    assert_eq!(
        n7.peers[0].source_address,
        Some("192.0.2.7".parse().unwrap())
    );
    assert_eq!(n7.peers[0].address, c.peers[0].address);
    assert_eq!(
        n7.applied_overrides
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "[[node_override]] at /etc/holdfast/t.toml:14:9 (by names): asn, router_id, peer.tor1.source_address"
        ]
    );

    // rack=b by label: only once the labels are known.
    assert_eq!(resolve(&c, "node-2", None).peers, c.peers);
    let b = resolve(&c, "node-2", Some(&labels(&[("rack", "b")])));
    assert_eq!(b.speaker.asn, 65001);
    assert_eq!(
        b.peers[0].address,
        PeerAddress::Ip("192.0.2.129".parse().unwrap())
    );
    assert_eq!(
        b.peers[1].address,
        PeerAddress::Ip("2001:db8:b::1".parse().unwrap())
    );
    assert_eq!(b.applied_overrides.len(), 1);
    assert_eq!(b.applied_overrides[0].matched_by, "node_selector");
    assert_eq!(
        b.applied_overrides[0].fields,
        vec!["peer.tor1.address", "peer.tor2.address"]
    );
    // A label change moves the node back.
    let a = resolve(&c, "node-2", Some(&labels(&[("rack", "a")])));
    assert_eq!(a.peers, c.peers);
    // node-7 in rack b gets both (they set different fields).
    let both = resolve(&c, "node-7", Some(&labels(&[("rack", "b")])));
    assert_eq!(both.applied_overrides.len(), 2);
    assert_eq!(both.speaker.asn, 65007);
    assert_eq!(
        both.peers[0].address,
        PeerAddress::Ip("192.0.2.129".parse().unwrap())
    );
    assert_eq!(
        both.peers[0].source_address,
        Some("192.0.2.7".parse().unwrap())
    );
    // Resolving is pure: the same inputs, the same config.
    assert_eq!(both, resolve(&c, "node-7", Some(&labels(&[("rack", "b")]))));
}

#[test]
fn overlapping_names_are_an_error_at_both_positions() {
    assert_eq!(
        problems(&with_two_peers(
            "[[node_override]]\nnames = [\"n1\", \"n2\"]\nasn = 65002\n\
             [[node_override]]\nnames = [\"n3\", \"n2\"]\nasn = 65003\nrouter_id = \"192.0.2.9\"\n"
        )),
        vec![
            "17:9: this [[node_override]] and the one at t.toml:14:9 can match the same node (both name node \"n2\") and both set asn; at most one override may set a key of a node: name the node in only one of them"
        ]
    );
}

#[test]
fn overrides_of_different_fields_or_nodes_may_coexist() {
    valid(&with_two_peers(
        "[[node_override]]\nnames = [\"n1\"]\nasn = 65002\n\
         [[node_override]]\nnames = [\"n1\"]\nrouter_id = \"192.0.2.9\"\n\
         [[node_override]]\nnames = [\"n2\"]\nasn = 65003\n\
         [[node_override]]\nnode_selector = { match_labels = { rack = \"a\" } }\n[node_override.peer.tor1]\naddress = \"192.0.2.65\"\n\
         [[node_override]]\nnode_selector = { match_labels = { rack = \"b\" } }\n[node_override.peer.tor1]\naddress = \"192.0.2.129\"\n\
         [[node_override]]\nnode_selector = { match_expressions = [{ key = \"rack\", operator = \"DoesNotExist\" }] }\n[node_override.peer.tor1]\naddress = \"192.0.2.193\"\n\
         [[node_override]]\nnode_selector = { match_expressions = [{ key = \"rack\", operator = \"NotIn\", values = [\"c\"] }] }\n[node_override.peer.tor2]\naddress = \"2001:db8:2::1\"\n\
         [[node_override]]\nnode_selector = { match_labels = { rack = \"c\" } }\n[node_override.peer.tor2]\naddress = \"2001:db8:3::1\"\n",
    ));
}

#[test]
fn selectors_that_can_match_one_node_overlap() {
    let p = problems(&with_two_peers(
        "[[node_override]]\nnode_selector = { match_labels = { rack = \"a\" } }\nasn = 65002\n\
         [[node_override]]\nnode_selector = { match_labels = { role = \"edge\" } }\nasn = 65003\n\
         [[node_override]]\nnames = [\"n9\"]\nasn = 65004\n\
         [[node_override]]\nnode_selector = { match_expressions = [{ key = \"rack\", operator = \"In\", values = [\"a\", \"b\"] }] }\n[node_override.peer.tor1]\naddress = \"192.0.2.65\"\n\
         [[node_override]]\nnode_selector = { match_expressions = [{ key = \"rack\", operator = \"NotIn\", values = [\"a\"] }] }\n[node_override.peer.tor1]\naddress = \"192.0.2.66\"\n",
    ));
    let short: Vec<String> = p
        .iter()
        .map(|l| {
            l.split(" and both set")
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        short,
        vec![
            "17:17: this [[node_override]] and the one at t.toml:14:17 can match the same node (a node can carry labels both selectors match)",
            "20:9: this [[node_override]] and the one at t.toml:14:17 can match the same node (node \"n9\" may carry labels the node_selector matches)",
            "20:9: this [[node_override]] and the one at t.toml:17:17 can match the same node (node \"n9\" may carry labels the node_selector matches)",
            "27:17: this [[node_override]] and the one at t.toml:23:17 can match the same node (a node can carry labels both selectors match)",
        ]
    );
}

#[test]
fn override_mistakes_are_reported_where_they_are() {
    assert_eq!(
        problems(&with_two_peers(
            "[[node_override]]\nnames = [\"n1\"]\n[node_override.peer.tor3]\naddress = \"192.0.2.5\"\n\
             [[node_override]]\nasn = 65002\n\
             [[node_override]]\nnames = [\"n2\"]\nnode_selector = { match_labels = { a = \"b\" } }\nasn = 65002\n\
             [[node_override]]\nnames = []\nasn = 65003\n\
             [[node_override]]\nnames = [\"n4\"]\n\
             [[node_override]]\nnames = [\"n5\"]\n[node_override.peer.tor2]\nsource_address = \"192.0.2.2\"\n\
             [[node_override]]\nnames = [\"n6\"]\nrouter_id = \"0.0.0.0\"\nport = 180\n"
        )),
        vec![
            "15:21: node_override names peer \"tor3\", which no [[peer]] defines (did you mean \"tor1\"?)",
            "17:1: [[node_override]] needs names = [...] or node_selector = { match_labels = {...} } to say which nodes it is for",
            "21:17: a [[node_override]] has either names or node_selector, not both",
            "24:9: names is empty: list the nodes this override is for",
            "27:9: this [[node_override]] sets nothing: give asn, router_id or [node_override.peer.NAME] address / source_address",
            "31:18: with this override peer \"tor2\" would have a IPv4 source_address (192.0.2.2) and an IPv6 address",
            "34:13: router_id must not be 0.0.0.0 (RFC 6286 §2.1)",
            "35:1: unknown key \"port\" in [[node_override]]; expected one of \"names\", \"node_selector\", \"asn\", \"router_id\" or \"peer\"",
        ]
    );
}

// ---------------------------------------------------------------------
// Warnings: valid configs that are very likely not what was meant.

/// The warnings of a valid config as "LINE:COL: message".
fn warnings(text: &str) -> Vec<String> {
    let config = valid(text);
    for w in &config.warnings {
        assert!(w.is_warning(), "{w}");
    }
    config
        .warnings
        .iter()
        .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
        .collect()
}

/// Asserts exactly one warning, at `at` ("LINE:COL"), starting with
/// `starts`.
fn one_warning(text: &str, at: &str, starts: &str) {
    let found = warnings(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    let expected = format!("{at}: {starts}");
    assert!(
        found[0].starts_with(&expected),
        "{found:#?}\nwant {expected}…"
    );
}

fn no_warning(text: &str) {
    assert_eq!(warnings(text), Vec::<String>::new());
}

#[test]
fn a_warning_is_displayed_as_such_and_does_not_make_configs_differ() {
    let text = with_peer("hold_time = \"9s\"\nkeepalive = \"9s\"\n");
    let config = valid(&text);
    assert_eq!(
        config.warnings[0].to_string(),
        "/etc/holdfast/t.toml:10:13: warning: keepalive (9s) equals hold_time (9s): the router's hold timer runs out just as the next KEEPALIVE is due, so one late or lost KEEPALIVE resets the session; RFC 4271 §10 suggests keepalive = hold_time / 3 (3s)"
    );
    assert_eq!(config.warnings[0].severity, Severity::Warning);
    // The same config a line further down: other positions, equal configs
    // (a reload of it changes nothing).
    let moved = valid(&format!("# a comment\n{text}"));
    assert_ne!(moved.warnings, config.warnings);
    assert_eq!(moved, config);
    // A config with an error reports the error only.
    let broken = with_peer("hold_time = \"9s\"\nkeepalive = \"9s\"\nport = 0\n");
    assert_eq!(
        problems(&broken),
        ["11:8: port must be in 1..=65535, got 0"]
    );
}

#[test]
fn warns_when_keepalive_leaves_no_margin_before_the_hold_time() {
    one_warning(
        &with_peer("hold_time = \"9s\"\nkeepalive = \"9s\"\n"),
        "10:13",
        "keepalive (9s) equals hold_time (9s)",
    );
    one_warning(
        &with_peer("hold_time = \"9s\"\nkeepalive = \"5s\"\n"),
        "10:13",
        "keepalive (5s) is half of hold_time (9s) or more",
    );
    one_warning(
        &with_peer("hold_time = \"10s\"\nkeepalive = \"5s\"\n"),
        "10:13",
        "keepalive (5s) is half of hold_time (10s) or more",
    );
    no_warning(&with_peer("hold_time = \"9s\"\nkeepalive = \"4s\"\n"));
    no_warning(&with_peer("hold_time = \"9s\"\n"));
}

#[test]
fn warns_when_hold_time_zero_leaves_a_dead_router_unnoticed() {
    one_warning(
        &with_peer("hold_time = \"0s\"\nkeepalive = \"0s\"\n"),
        "9:13",
        "hold_time 0s turns off KEEPALIVEs and the hold timer (RFC 4271 §4.4): without BFD",
    );
    no_warning(&with_peer(
        "hold_time = \"0s\"\nkeepalive = \"0s\"\nbfd = { min_rx = \"300ms\", min_tx = \"300ms\" }\n",
    ));
}

#[test]
fn warns_when_gtsm_admits_far_away_packets() {
    one_warning(
        &with_peer("ttl_security = true\nebgp_multihop = 255\n"),
        "10:17",
        "ttl_security with ebgp_multihop 255 checks nothing",
    );
    one_warning(
        &with_peer("ttl_security = true\nebgp_multihop = 17\n"),
        "10:17",
        "ttl_security with ebgp_multihop 17 accepts packets with a TTL of at least 239, from anywhere within 16 hops",
    );
    no_warning(&with_peer("ttl_security = true\nebgp_multihop = 16\n"));
    // Without GTSM a long multihop is just a multihop session.
    no_warning(&with_peer("ebgp_multihop = 255\n"));
}

#[test]
fn warns_about_bfd_faster_than_a_user_space_thread_keeps_or_slower_than_bgp() {
    one_warning(
        &with_peer("bfd = { min_rx = \"1ms\", min_tx = \"1ms\", multiplier = 1 }\n"),
        "9:7",
        "BFD detection time multiplier × interval = 1 × 1ms = 1ms is below 150ms",
    );
    one_warning(
        &with_peer("bfd = { min_rx = \"300ms\", min_tx = \"40ms\", multiplier = 3 }\n"),
        "9:7",
        "BFD detection time multiplier × interval = 3 × 40ms = 120ms is below 150ms",
    );
    no_warning(&with_peer(
        "bfd = { min_rx = \"50ms\", min_tx = \"50ms\", multiplier = 3 }\n",
    ));
    one_warning(
        &with_peer("bfd = { min_rx = \"300ms\", min_tx = \"300ms\", multiplier = 1 }\n"),
        "9:58",
        "BFD multiplier 1: a single lost BFD packet declares the router down",
    );
    one_warning(
        &with_peer(
            "hold_time = \"3s\"\nkeepalive = \"1s\"\nbfd = { min_rx = \"1s\", min_tx = \"1s\", multiplier = 3 }\n",
        ),
        "11:7",
        "BFD detects a dead router after 3s at the earliest, no sooner than hold_time (3s)",
    );
}

#[test]
fn warns_when_graceful_restart_has_no_restart_time() {
    one_warning(
        &with_peer("graceful_restart = { restart_time = \"0s\" }\n"),
        "9:37",
        "restart_time 0s with graceful restart enabled",
    );
    no_warning(&with_peer(
        "graceful_restart = { enabled = false, restart_time = \"0s\" }\n",
    ));
}

#[test]
fn warns_about_an_api_others_can_read_or_the_probes_cannot_reach() {
    let speaker = |api: &str, kind: &str| {
        format!(
            "[speaker]\nasn = 65001\napi = \"{api}\"\n[source]\nkind = \"{kind}\"\npath = \"v.toml\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n"
        )
        .replace("kind = \"kubernetes\"\npath = \"v.toml\"\n", "kind = \"kubernetes\"\n")
    };
    // Reachable by the probes, but by everyone else too.
    one_warning(
        &speaker("0.0.0.0:9179", "kubernetes"),
        "3:7",
        "api 0.0.0.0:9179 is not a loopback address: anyone who can reach it reads /v1/status",
    );
    one_warning(
        &speaker("[::]:9179", "kubernetes"),
        "3:7",
        "api [::]:9179 is not a loopback address",
    );
    // Private, but not where the DaemonSet's probes ask.
    one_warning(
        &speaker("127.0.0.1:9180", "kubernetes"),
        "3:7",
        "api 127.0.0.1:9180 is not where the shipped DaemonSet's probes ask (http://127.0.0.1:9179/healthz",
    );
    one_warning(
        &speaker("[::1]:9179", "kubernetes"),
        "3:7",
        "api [::1]:9179 is not where the shipped DaemonSet's probes ask",
    );
    // Both.
    assert_eq!(warnings(&speaker("192.0.2.2:9179", "kubernetes")).len(), 2);
    // The file source is not run by the shipped DaemonSet.
    no_warning(&speaker("127.0.0.1:9180", "file"));
    no_warning(&speaker("127.0.0.1:9179", "kubernetes"));
}

#[test]
fn warns_when_a_shutdown_outlasts_the_daemonsets_grace_period() {
    let text = "[speaker]\nasn = 65001\ngraceful_shutdown_wait = \"41s\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    one_warning(
        text,
        "3:26",
        "a shutdown can take graceful_shutdown_wait (41s) + 3s per peer × 1 + 2s = 46s, longer than",
    );
    no_warning(&text.replace("41s", "40s"));
    assert!(
        warnings(&text.replace(
            "kind = \"kubernetes\"",
            "kind = \"file\"\npath = \"v.toml\""
        ))
        .is_empty()
    );
    // Ten peers at the default 15 s: 15 + 30 + 2 > 45, blamed on [speaker].
    let mut many = HEAD.to_string();
    for n in 0..10 {
        many.push_str(&format!(
            "[[peer]]\nname = \"p{n}\"\naddress = \"192.0.2.{}\"\nasn = 65000\n",
            n + 1
        ));
    }
    one_warning(
        &many,
        "1:1",
        "a shutdown can take graceful_shutdown_wait (15s) + 3s per peer × 10 + 2s = 47s",
    );
}

#[test]
fn warns_that_hostname_is_not_used_where_node_name_is_set() {
    one_warning(
        "[speaker]\nasn = 65001\nhostname = \"n1\"\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n",
        "3:12",
        "hostname \"n1\" is not used where $NODE_NAME is set",
    );
    no_warning(
        "[speaker]\nasn = 65001\nhostname = \"n1\"\n[source]\nkind = \"file\"\npath = \"v.toml\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n",
    );
}

#[test]
fn warns_about_selectors_the_file_source_cannot_apply() {
    let file = "[speaker]\nasn = 65001\nnode_selector = { match_labels = { rack = \"a\" } }\n[source]\nkind = \"file\"\npath = \"v.toml\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n";
    one_warning(
        file,
        "3:17",
        "node_selector has no effect with the file source",
    );
    let base = file.replace("node_selector = { match_labels = { rack = \"a\" } }\n", "");
    one_warning(
        &format!(
            "{base}[[advertisement]]\nname = \"a\"\nservice_selector = {{ match_labels = {{ app = \"x\" }} }}\n"
        ),
        "12:20",
        "service_selector has no effect with the file source",
    );
    one_warning(
        &format!(
            "{base}[[advertisement]]\nname = \"a\"\nnamespace_selector = {{ match_labels = {{ team = \"x\" }} }}\n"
        ),
        "12:22",
        "namespace_selector has no effect with the file source",
    );
    one_warning(
        &format!(
            "{base}[[node_override]]\nnode_selector = {{ match_labels = {{ rack = \"b\" }} }}\nasn = 65002\n"
        ),
        "11:17",
        "this node_override selects nodes by label, which the file source does not know",
    );
    no_warning(&format!(
        "{base}[[node_override]]\nnames = [\"n1\"]\nasn = 65002\n"
    ));
}

#[test]
fn warns_about_a_namespace_selector_the_shipped_rbac_cannot_serve() {
    one_warning(
        &with_peer(
            "[[advertisement]]\nname = \"a\"\nnamespace_selector = { match_labels = { team = \"a\" } }\n",
        ),
        "11:22",
        "namespace_selector reads the namespace label \"team\", so holdfast must list and watch Namespaces: the shipped ClusterRole (deploy/cluster/rbac.yaml) does not grant that",
    );
    one_warning(
        &with_peer(
            "[[advertisement]]\nname = \"a\"\nnamespace_selector = { match_expressions = [{ key = \"team\", operator = \"Exists\" }] }\n",
        ),
        "11:22",
        "namespace_selector reads the namespace label \"team\"",
    );
    no_warning(&with_peer(
        "[[advertisement]]\nname = \"a\"\nnamespace_selector = { match_labels = { \"kubernetes.io/metadata.name\" = \"prod\" } }\n",
    ));
}

#[test]
fn warns_about_a_namespace_selector_outside_the_watched_namespaces() {
    let text = "[speaker]\nasn = 65001\n[source]\nkind = \"kubernetes\"\nnamespaces = [\"prod\", \"edge\"]\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n[[advertisement]]\nname = \"a\"\nnamespace_selector = { match_expressions = [{ key = \"kubernetes.io/metadata.name\", operator = \"In\", values = [\"dev\"] }] }\n";
    one_warning(
        text,
        "12:22",
        "namespace_selector matches none of the namespaces source.namespaces watches (\"prod\", \"edge\"): this advertisement never selects a Service",
    );
    no_warning(&text.replace("[\"dev\"]", "[\"dev\", \"edge\"]"));
    no_warning(&text.replace("namespaces = [\"prod\", \"edge\"]\n", ""));
}

#[test]
fn warns_about_local_pref_towards_ebgp_peers_only() {
    let two = "[[peer]]\nname = \"rr\"\naddress = \"192.0.2.9\"\nasn = 65001\n";
    one_warning(
        &with_peer("[[advertisement]]\nname = \"a\"\nlocal_pref = 200\n"),
        "11:14",
        "local_pref 200 is never sent: every peer these routes go to (\"tor1\") is eBGP, and LOCAL_PREF goes to iBGP peers only (RFC 4271 §5.1.5)",
    );
    // An iBGP peer among those reached: it is sent there.
    no_warning(&with_peer(&format!(
        "{two}[[advertisement]]\nname = \"a\"\nlocal_pref = 200\n"
    )));
    // ...but not if the advertisement goes to the eBGP peer only.
    one_warning(
        &with_peer(&format!(
            "{two}[[advertisement]]\nname = \"a\"\npeers = [\"tor1\"]\nlocal_pref = 200\n"
        )),
        "16:14",
        "local_pref 200 is never sent",
    );
    // "internal" and local_asn count.
    no_warning(&with_peer(
        "[[peer]]\nname = \"x\"\naddress = \"192.0.2.8\"\nasn = \"internal\"\n[[advertisement]]\nname = \"a\"\nlocal_pref = 200\n",
    ));
    // A node whose override makes the session iBGP gets it.
    no_warning(&with_peer(
        "[[advertisement]]\nname = \"a\"\nlocal_pref = 200\n[[node_override]]\nnames = [\"n1\"]\nasn = 65000\n",
    ));
    one_warning(
        &with_peer(
            "[[advertisement]]\nname = \"a\"\nallow_service_attributes = [\"local-pref\"]\n",
        ),
        "11:28",
        "allow_service_attributes lists \"local-pref\", but every peer these routes go to (\"tor1\") is eBGP",
    );
}

#[test]
fn warns_about_a_degraded_prepend_towards_ibgp_peers_only() {
    let ibgp = "[speaker]\nasn = 65001\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"rr\"\naddress = \"192.0.2.1\"\nasn = 65001\n[[advertisement]]\nname = \"a\"\nprobe = { port = 80, on_failure = \"degrade\" }\ndegraded = { as_path_prepend = 3 }\n";
    one_warning(
        ibgp,
        "12:12",
        "degraded sets only as_path_prepend, which holdfast adds towards eBGP peers only",
    );
    no_warning(&ibgp.replace("as_path_prepend = 3", "as_path_prepend = 3, med = 500"));
    no_warning(&ibgp.replace("asn = 65001\n[[adv", "asn = 65000\n[[adv"));
}

#[test]
fn warns_about_aggregates_that_cover_far_more_than_vips() {
    one_warning(
        &with_peer("[[advertisement]]\nname = \"a\"\naggregation_length = 8\n"),
        "11:22",
        "aggregation_length 8 announces an IPv4 /8 for each VIP, shorter than /16",
    );
    one_warning(
        &with_peer("[[advertisement]]\nname = \"a\"\naggregation_length_v6 = 32\n"),
        "11:25",
        "aggregation_length_v6 32 announces an IPv6 /32 for each VIP, shorter than /48",
    );
    no_warning(&with_peer(
        "[[advertisement]]\nname = \"a\"\naggregation_length = 16\naggregation_length_v6 = 48\n",
    ));
}

#[test]
fn warns_about_durations_past_their_sane_range() {
    // (where, the line to add, the warning's start), each just past its
    // threshold; at the threshold itself nothing is said.
    let cases: &[(&str, &str, &str, &str)] = &[
        ("stability", "withdraw_hold_down", "8760h", "1h"),
        ("stability", "advertise_delay", "11m", "10m"),
        ("stability", "delete_delay", "61m", "1h"),
        ("stability", "local_endpoint_delay", "301s", "5m"),
        ("peer", "hold_time", "601s", "10m"),
        ("peer", "connect_retry", "11m", "10m"),
        ("peer", "min_route_advertisement_interval", "301s", "5m"),
        ("source", "resync", "25h", "24h"),
    ];
    for (section, key, over, limit) in cases {
        let line = format!("{key} = \"{over}\"\n");
        let text = match *section {
            "stability" => with_peer(&format!("[stability]\n{line}")),
            "peer" => with_peer(&line),
            _ => with_peer("").replace(
                "kind = \"kubernetes\"\n",
                &format!("kind = \"kubernetes\"\n{line}"),
            ),
        };
        let found = warnings(&text);
        assert_eq!(found.len(), 1, "{key}: {found:#?}");
        assert!(
            found[0].contains(&format!(
                "{key} {} is longer than {limit}: ",
                format_duration(parse_duration(over).unwrap())
            )),
            "{found:#?}"
        );
        no_warning(&text.replace(over, limit));
    }
    one_warning(
        &with_peer("[stability.damping]\nhalf_life = \"3h\"\nmax_suppress = \"6h\"\n"),
        "10:13",
        "half_life 3h is longer than 2h",
    );
    assert_eq!(
        warnings(&with_peer(
            "[stability.damping]\nhalf_life = \"1h\"\nmax_suppress = \"7h\"\n"
        ))
        .len(),
        1
    );
    one_warning(
        &with_peer("[[advertisement]]\nname = \"a\"\nprobe = { port = 80, interval = \"2m\" }\n"),
        "11:33",
        "interval 2m is longer than 1m",
    );
    // With BFD a long hold time is fine: BFD notices a dead router.
    no_warning(&with_peer(
        "hold_time = \"1h\"\nbfd = { min_rx = \"300ms\", min_tx = \"300ms\" }\n",
    ));
}

#[test]
fn node_name_comes_from_node_name_then_hostname_then_the_kernel() {
    let name = |h, e, k| node_name(h, e, k);
    let n = name(Some("cfg"), Some("env"), Some("kernel"));
    assert_eq!((n.name.as_str(), n.from), ("env", NodeNameFrom::Env));
    assert_eq!(n.ignored_hostname.as_deref(), Some("cfg"));
    // The same name twice ignores nothing.
    assert_eq!(name(Some("env"), Some("env"), None).ignored_hostname, None);
    let n = name(Some("cfg"), None, Some("kernel"));
    assert_eq!((n.name.as_str(), n.from), ("cfg", NodeNameFrom::Hostname));
    let n = name(Some("cfg"), Some("  "), Some("kernel"));
    assert_eq!((n.name.as_str(), n.from), ("cfg", NodeNameFrom::Hostname));
    let n = name(None, Some(""), Some("kernel\n"));
    assert_eq!((n.name.as_str(), n.from), ("kernel", NodeNameFrom::Kernel));
    let n = name(None, None, Some("\n"));
    assert_eq!(
        (n.name.as_str(), n.from),
        ("holdfast", NodeNameFrom::Fallback)
    );
}

#[test]
fn api_metrics_and_listen_cannot_share_a_port_on_overlapping_addresses() {
    let speaker = |lines: &str| {
        format!(
            "[speaker]\nasn = 65001\n{lines}[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n"
        )
    };
    assert_eq!(
        problems(&speaker("metrics = \"0.0.0.0:9179\"\n")),
        [
            "3:11: metrics 0.0.0.0:9179 and api 127.0.0.1:9179 cannot both be bound: same port, and one address covers the other (a wildcard takes the port on every address of its family, and [::] on IPv4 too); give metrics another port"
        ]
    );
    assert_eq!(
        problems(&speaker("listen = \"[::]:9179\"\n")),
        [
            "3:10: listen [::]:9179 and api 127.0.0.1:9179 cannot both be bound: same port, and one address covers the other (a wildcard takes the port on every address of its family, and [::] on IPv4 too); give listen another port"
        ]
    );
    assert_eq!(
        problems(&speaker(
            "api = \"127.0.0.1:9179\"\nmetrics = \"0.0.0.0:9180\"\nlisten = \"192.0.2.2:9180\"\n"
        )),
        [
            "5:10: listen 192.0.2.2:9180 and metrics 0.0.0.0:9180 cannot both be bound: same port, and one address covers the other (a wildcard takes the port on every address of its family, and [::] on IPv4 too); give listen another port"
        ]
    );
    // Other ports, another family than an IPv4 wildcard, or two different
    // addresses: each binds.
    valid(&speaker(
        "metrics = \"0.0.0.0:9180\"\nlisten = \"0.0.0.0:179\"\n",
    ));
    valid(&speaker(
        "api = \"0.0.0.0:9179\"\nmetrics = \"[::1]:9179\"\n",
    ));
    valid(&speaker("metrics = \"127.0.0.2:9179\"\n"));
}

#[test]
fn warns_about_one_source_address_for_every_node_of_a_rack() {
    one_warning(
        &with_peer("source_address = \"192.0.2.11\"\n"),
        "9:18",
        "source_address 192.0.2.11 is one address for every node reading this file",
    );
    // Per node, in an override: meant.
    no_warning(&with_peer(
        "[[node_override]]\nnames = [\"n1\"]\n[node_override.peer.tor1]\nsource_address = \"192.0.2.11\"\n",
    ));
    // The file source's config is the node's own.
    no_warning(
        "[speaker]\nasn = 65001\n[source]\nkind = \"file\"\npath = \"v.toml\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\nsource_address = \"192.0.2.11\"\n",
    );
}

const ONE_PEER: &str =
    "[speaker]\nasn = 65001\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n";

#[test]
fn several_sources_each_named_at_most_one_of_each_kind() {
    let config = valid(&format!(
        "{ONE_PEER}[[source]]\nname = \"apiserver\"\nkind = \"file\"\npath = \"/etc/holdfast/apiserver.toml\"\nresync = \"1m\"\n[[source]]\nkind = \"kubernetes\"\nresync = \"0s\"\n"
    ));
    let names: Vec<&str> = config.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["apiserver", "kubernetes"]);
    assert_eq!(
        config.file_source(),
        Some(Path::new("/etc/holdfast/apiserver.toml"))
    );
    assert!(config.kubernetes_source().is_some());
    // The shortest resync other than off serves both.
    assert_eq!(config.resync, Duration::from_secs(60));
    assert_eq!(config.source_name(crate::model::SourceId(1)), "kubernetes");

    assert_eq!(
        problems(&format!(
            "{ONE_PEER}[[source]]\nkind = \"file\"\npath = \"a.toml\"\n[[source]]\nkind = \"file\"\npath = \"b.toml\"\n"
        )),
        vec![
            "11:8: a second kind = \"file\" source in [[source]] #2: at most one source of each kind (the first is \"file\")"
        ]
    );
    assert_eq!(
        problems(&format!(
            "{ONE_PEER}[[source]]\nname = \"x\"\nkind = \"file\"\npath = \"a.toml\"\n[[source]]\nname = \"x\"\nkind = \"kubernetes\"\n"
        )),
        vec!["12:8: source name \"x\" is used twice: each source needs its own"]
    );
    assert_eq!(
        problems(&format!(
            "{ONE_PEER}[[source]]\nname = \"No\"\nkind = \"kubernetes\"\n"
        )),
        vec![
            "8:8: source name \"No\" must be lower-case letters, digits and '-', not beginning or ending with '-'"
        ]
    );
    assert_eq!(
        problems(&format!("source = []\n{ONE_PEER}")),
        vec!["1:10: source is empty: at least one [[source]] is required"]
    );
}

#[test]
fn bmp_stations_with_their_defaults() {
    let c = valid(&with_peer(
        "[[bmp]]\naddress = \"127.0.0.1\"\n[[bmp]]\nname = \"collector\"\naddress = \"2001:db8::9\"\nport = 11019\nstats_interval = \"0s\"\nqueue_limit = 65536\n",
    ));
    assert_eq!(
        c.bmp,
        vec![
            BmpStation {
                name: "127.0.0.1:1790".into(),
                address: "127.0.0.1".parse().unwrap(),
                port: DEFAULT_BMP_PORT,
                stats_interval: DEFAULT_STATS_INTERVAL,
                queue_limit: DEFAULT_QUEUE_LIMIT,
            },
            BmpStation {
                name: "collector".into(),
                address: "2001:db8::9".parse().unwrap(),
                port: 11019,
                stats_interval: Duration::ZERO,
                queue_limit: 65536,
            },
        ]
    );
    assert!(valid(&with_peer("")).bmp.is_empty());
}

#[test]
fn bmp_problems_are_reported_where_they_are() {
    assert_eq!(
        problems(&with_peer(
            "[[bmp]]\nadress = \"127.0.0.1\"\n[[bmp]]\naddress = \"127.0.0.1\"\nqueue_limit = 10\n"
        )),
        vec![
            "9:1: missing required key \"address\" in [[bmp]]".to_string(),
            "10:1: unknown key \"adress\" in [[bmp]] (did you mean \"address\"?)".to_string(),
            "13:15: queue_limit must be in 65536..=1073741824, got 10".to_string(),
        ]
    );
    assert_eq!(
        problems(&with_peer(
            "[[bmp]]\naddress = \"127.0.0.1\"\n[[bmp]]\naddress = \"127.0.0.1\"\nport = 1790\n"
        )),
        vec![
            "11:1: [[bmp]] name \"127.0.0.1:1790\" is used twice: station names are unique"
                .to_string()
        ]
    );
}

const EXPORT_BASE: &str = "[speaker]\nasn = 65001\n[source]\nkind = \"file\"\npath = \"v.toml\"\n[[advertisement]]\nname = \"public\"\n[[tenant]]\nname = \"acme\"\nnamespaces = [\"a\"]\npeers = [\"tor\"]\n[[peer]]\nname = \"tor\"\naddress = \"192.0.2.1\"\nasn = 65000\n";

fn export_problems(rules: &str) -> Vec<String> {
    let text = format!("{EXPORT_BASE}{rules}");
    match parse(Path::new("c.toml"), &text) {
        Ok(c) => c.warnings.iter().map(ToString::to_string).collect(),
        Err(d) => d.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn export_rules_are_checked_at_their_line_and_column() {
    // Lines 16.. are the rules.
    assert_eq!(
        export_problems(
            "[[peer.export]]\nprefixes = [\"198.51.100.0/24 ge 30 le 28\", \"198.51.100.0/24 le 33\"]\nadvertisements = [\"publik\"]\ntenants = [\"acme\", \"initech\"]\nsources = [\"fil\"]\nset_add_communities = [\"65000:1\"]\nset_remove_communities = [\"65000:1\"]\n"
        ),
        vec![
            "c.toml:17:13: \"198.51.100.0/24 ge 30 le 28\": ge 30 is greater than le 28: the range is empty",
            "c.toml:17:44: \"198.51.100.0/24 le 33\": le 33 is longer than an IPv4 prefix can be (32)",
            "c.toml:18:19: export rule of peer \"tor\" names advertisement \"publik\", which the config does not define (did you mean \"public\"?)",
            "c.toml:19:20: export rule of peer \"tor\" names tenant \"initech\", which the config does not define; known: \"acme\"",
            "c.toml:20:12: export rule of peer \"tor\" names source \"fil\", which the config does not define (did you mean \"file\"?)",
            "c.toml:22:27: community 65000:1 is both added and removed by this rule: a contradiction; keep one",
        ]
    );
}

#[test]
fn export_rules_that_are_never_tried_and_local_pref_on_ebgp_are_warned_about() {
    assert_eq!(
        export_problems(
            "[[peer.export]]\nprefixes = [\"198.51.100.0/24 le 32\"]\naction = \"reject\"\n[[peer.export]]\nname = \"narrow\"\nprefixes = [\"198.51.100.128/25 le 32\"]\nnamespaces = [\"a\"]\nset_local_pref = 10\naction = \"accept\"\n[[peer.export]]\naction = \"accept\"\n[[peer.export]]\nset_med = 1\n"
        ),
        vec![
            "c.toml:19:1: warning: export rule 2 (\"narrow\") is never tried: rule 1 before it matches every route this one does and ends with action \"reject\"",
            "c.toml:23:18: warning: set_local_pref on peer \"tor\", an eBGP peer: LOCAL_PREF is sent to iBGP peers only (RFC 4271 §5.1.5), so this has no effect",
            "c.toml:27:1: warning: export rule 4 is never tried: rule 3 before it matches every route and ends with action \"accept\"",
        ]
    );
}

#[test]
fn tenants_are_checked() {
    let text = format!(
        "{EXPORT_BASE}[[tenant]]\nname = \"acme\"\nnamespaces = [\"a\"]\npeers = [\"tr\"]\n"
    );
    let d: Vec<String> = parse(Path::new("c.toml"), &text)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        d,
        vec![
            "c.toml:17:8: duplicate tenant name \"acme\"",
            "c.toml:18:15: namespace \"a\" already belongs to tenant \"acme\": a namespace belongs to at most one tenant",
            "c.toml:19:10: tenant peer \"tr\" is not a [[peer]] name (did you mean \"tor\"?)",
        ]
    );
}
