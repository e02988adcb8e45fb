//! The test kit's config builder (tests/common/config.rs) against the
//! daemon's own judge: every method, used together, writes a config that
//! `holdfast check` accepts with no error, so a key misspelt or a value of
//! the wrong type in the builder fails here first, by name. No root.

mod common;

use std::process::Command;

use common::*;

/// `holdfast check --skip-password-files` on `config` (its VIP file
/// beside it, empty): exit code and output.
fn check(config: &Config) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let vips = dir.path().join("vips.toml");
    std::fs::write(&vips, "").unwrap();
    let path = dir.path().join("holdfast.toml");
    let text = config
        .to_toml()
        .replace("VIPS", &vips.display().to_string());
    std::fs::write(&path, &text).unwrap();
    let out = Command::new(BIN)
        .args(["check", "--skip-password-files", "--config"])
        .arg(&path)
        .output()
        .expect("holdfast check runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        format!("{said}\n--- the config:\n{text}"),
    )
}

/// Each line `check` printed that is not a warning.
fn errors(said: &str) -> Vec<&str> {
    said.split("\n--- the config:")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains(": warning: "))
        .collect()
}

fn assert_accepted(config: &Config) {
    let (code, said) = check(config);
    assert_eq!(code, Some(0), "holdfast check refused it:\n{said}");
    assert!(errors(&said).is_empty(), "{said}");
}

/// The file source, and every key of `[speaker]`, `[[peer]]`,
/// `[stability]`, `[[advertisement]]` and `[[node_override]]` that works
/// with it.
#[test]
fn every_builder_method_with_the_file_source_makes_a_config_check_accepts() {
    let config = Config::node(65001, "192.0.2.2")
        .listen("0.0.0.0:179")
        .api("127.0.0.1:9179")
        .api_token_file("/etc/holdfast/api-token")
        .metrics("127.0.0.1:9180")
        .graceful_shutdown_wait("3s")
        .resync("5m")
        .peer(
            Peer::new("tor1", "192.0.2.1", 65000)
                .fast()
                .port(1179)
                .md5("/etc/holdfast/tor1.key")
                .ebgp_multihop(2)
                .ttl_security()
                .source_address("192.0.2.2")
                .families(&["ipv4-unicast", "ipv6-unicast"])
                .mrai("0s")
                .local_asn(65100)
                .graceful_restart(
                    GracefulRestart::new()
                        .enabled(true)
                        .restart_time("120s")
                        .long_lived_stale_time("60s"),
                )
                .bfd(
                    Bfd::new("100ms", "100ms", 3)
                        .multihop()
                        .authentication("keyed-sha1")
                        .key(1, "/etc/holdfast/bfd.key"),
                ),
        )
        .peer(Peer::new("tor2", "2001:db8::1", PeerAsn::External).passive())
        .peer(
            Peer::new("ibgp", "192.0.2.3", PeerAsn::Internal)
                .hold_time("0s")
                .keepalive("0s")
                .export_default("reject")
                .export(&[ExportRule::new()
                    .name("tenant-a")
                    .prefixes(&["198.51.100.0/24 le 32"])
                    .advertisements(&["public"])
                    .namespaces(&["a"])
                    .tenants(&["acme"])
                    .communities(&["65001:100"])
                    .sources(&["file"])
                    .set_add_communities(&["65000:1"])
                    .set_remove_communities(&["65001:100"])
                    .set_add_large_communities(&["65000:1:1"])
                    .set_local_pref(300)
                    .set_med(5)
                    .set_prepend(1)
                    .action("accept")]),
        )
        .peer(
            Peer::new("gw", "default-gateway", 65000)
                .family("ipv6")
                .hold_time("9s"),
        )
        .peer(Peer::on_interface("unnumbered", "eth1", 65000).connect_retry("1s"))
        .stability(
            Stability::new()
                .withdraw_hold_down("30s")
                .advertise_delay("1s")
                .max_withdraw_fraction(0.5)
                .withdraw_rate("1/h")
                .damping(
                    Damping::new()
                        .half_life("15m")
                        .penalty(1000)
                        .suppress_threshold(2000)
                        .reuse_threshold(750)
                        .max_suppress("1h"),
                ),
        )
        .tenant(Tenant::new("acme", &["ibgp"]).namespaces(&["a"]))
        .advertisement(
            Advertisement::public("65001:100")
                .large_communities(&["65001:1:100"])
                .local_pref(200)
                .med(10)
                .peers(&["tor1", "tor2"])
                .vip_ranges(&["198.51.100.0/24"])
                .probe(
                    Probe::tcp(80)
                        .interval("1s")
                        .timeout("500ms")
                        .fail_after(3)
                        .recover_after(2)
                        .on_failure("degrade")
                        .disable_file("/run/holdfast/disable"),
                )
                .degraded(Degraded::new().med(1000).communities(&["65001:666"])),
        )
        .advertisement(
            Advertisement::new("apiserver").probe(
                Probe::http("https://127.0.0.1:6443/readyz")
                    .ca_file("/etc/kubernetes/pki/ca.crt")
                    .interval("1s")
                    .timeout("500ms"),
            ),
        )
        .advertisement(Advertisement::new("loopback").interface("lo"))
        .node_override(
            NodeOverride::names(&["node-7"])
                .asn(65007)
                .router_id("192.0.2.207")
                .peer_addresses("tor1", "192.0.2.11", "192.0.2.12"),
        );
    assert_accepted(&config);
}

/// The Kubernetes source with its keys, selectors and what only it reads.
#[test]
fn every_builder_method_with_the_kubernetes_source_makes_a_config_check_accepts() {
    let config = Config::new()
        .asn(65001)
        .router_id("auto")
        .hostname("node-1")
        .node_selector(Selector::labels(&[("kubernetes.io/os", "linux")]))
        .drain_taints(&["example.com/maintenance"])
        .kubernetes_source()
        .namespaces(&["demo"])
        .and_file_source("apiserver")
        .peer(Peer::new("tor1", "192.0.2.1", 65000).fast())
        .stability(
            Stability::new()
                .withdraw_hold_down("3s")
                .local_endpoint_delay("4s"),
        )
        .advertisement(
            Advertisement::new("public")
                .addresses(&["LoadBalancerIP", "PodCIDR"])
                .service_selector(Selector::labels(&[("app", "web")]))
                .namespace_selector(Selector::labels(&[("kubernetes.io/metadata.name", "demo")]))
                .allow_service_attributes(&["communities", "med"])
                .aggregation_length(24)
                .aggregation_length_v6(64)
                .link_bandwidth("per-endpoint"),
        )
        .node_override(NodeOverride::selecting(Selector::labels(&[("rack", "b")])).asn(65002));
    assert_accepted(&config);
}

/// What the builder writes: tables in order, keys in the order set, a key
/// set twice written once with its last value, inline tables, quoted keys
/// where TOML needs them.
#[test]
fn the_builder_writes_what_it_was_given_in_order() {
    let config = Config::node(65001, "192.0.2.2")
        .peer(
            Peer::new("tor", "192.0.2.1", 65000)
                .fast()
                .hold_time("12s")
                .bfd(Bfd::new("100ms", "200ms", 3)),
        )
        .hold_down("2s")
        .advertisement(
            Advertisement::public("65001:100")
                .service_selector(Selector::labels(&[("app.kubernetes.io/name", "web")])),
        );
    assert_eq!(
        config.to_toml(),
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nhostname = \"node-1\"\n\n\
         [[peer]]\nname = \"tor\"\naddress = \"192.0.2.1\"\nasn = 65000\nhold_time = \"12s\"\n\
         keepalive = \"3s\"\nconnect_retry = \"1s\"\n\
         bfd = { min_rx = \"100ms\", min_tx = \"200ms\", multiplier = 3 }\n\n\
         [source]\nkind = \"file\"\npath = \"VIPS\"\n\n\
         [stability]\nwithdraw_hold_down = \"2s\"\n\n\
         [[advertisement]]\nname = \"public\"\ncommunities = [\"65001:100\"]\n\
         service_selector = { match_labels = { \"app.kubernetes.io/name\" = \"web\" } }\n\n"
    );
    assert_accepted(&config);
}

/// A test that says nothing gets nothing: no table it did not ask for.
#[test]
fn an_empty_builder_writes_nothing() {
    assert_eq!(Config::new().to_toml(), "");
    let (code, said) = check(&Config::new());
    assert_eq!(code, Some(1), "an empty config is refused: {said}");
}
