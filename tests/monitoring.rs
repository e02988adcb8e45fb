//! Monitoring, end to end: the real daemon's metrics-only listener
//! (`speaker.metrics`), a real scrape checked by `promtool check metrics`,
//! the cluster-wide PrometheusRule (deploy/cluster/monitoring) rendered by
//! the real `kubectl kustomize`, checked by `promtool check rules`,
//! against the alerts in the docs (docs/src/observability/alerts.md), and by `promtool test rules` with its unit
//! tests (alerts.test.yaml: every alert firing and not firing). Loopback
//! only; no root. promtool comes from Debian's `prometheus` package
//! (scripts/test.sh installs it): a missing promtool or kubectl fails
//! these tests.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Advertisement, Config, Holdfast, Peer, free_port};
/// Generous: a debug binary on a shared two-core machine.
const DEADLINE: Duration = Duration::from_secs(30);
/// The PrometheusRule, applied once per cluster, and promtool's unit tests
/// of it.
const RULE: &str = "deploy/cluster/monitoring/prometheusrule.yaml";
const RULE_TESTS: &str = "deploy/cluster/monitoring/alerts.test.yaml";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// promtool with `args`, in `dir`; a missing promtool fails the test,
/// saying where it comes from.
fn promtool(dir: &Path, args: &[&str]) -> (Output, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): the alert tests need it; install Debian's \
                 `prometheus` package (scripts/test.sh does), which brings /usr/bin/promtool"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

/// The PrometheusRule's spec as a Prometheus rule file, written to `dir`
/// as holdfast.rules.yaml (the name alerts.test.yaml loads).
fn write_rule_file(dir: &Path) -> String {
    let rule = std::fs::read_to_string(root().join(RULE)).expect("the PrometheusRule");
    let file = rule_file_of(&rule);
    assert!(file.starts_with("groups:\n"), "{file}");
    std::fs::write(dir.join("holdfast.rules.yaml"), &file).unwrap();
    file
}

/// (status code, body) of `GET path`, or an error while the daemon starts.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

fn wait_get(addr: SocketAddr, path: &str, want: u16) -> String {
    let start = Instant::now();
    loop {
        match get(addr, path) {
            Ok((code, body)) if code == want => return body,
            other => assert!(
                start.elapsed() < DEADLINE,
                "GET {path} on {addr}: want {want}, last {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The daemon with the file source, its API and metrics listener on
/// loopback, and one peer on a loopback port nobody listens on: the
/// daemon (its API at `api`) and the metrics listener's address.
fn start() -> (Holdfast<'static>, SocketAddr) {
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = Config::new()
        .speaker(65001, "192.0.2.2")
        .hostname("n1")
        .metrics(metrics)
        .peer(
            Peer::new("tor1", "127.0.0.1", 65000)
                .port(free_port())
                .connect_retry("1s"),
        )
        .file_source()
        .advertisement(Advertisement::new("public"));
    let mut d = Holdfast::local_unstarted(&config, "[[vip]]\naddress = \"198.51.100.10\"\n");
    d.log_filter = None;
    d.run(&[]);
    (d, metrics)
}

#[test]
fn the_metrics_listener_serves_metrics_and_health_only() {
    let (d, metrics) = start();
    let scrape = wait_get(metrics, "/metrics", 200);
    assert!(
        scrape.contains("\nholdfast_peer_established{peer=\"tor1\""),
        "{scrape}"
    );
    assert!(
        scrape.contains("\nprocess_resident_memory_bytes "),
        "{scrape}"
    );
    assert_eq!(wait_get(metrics, "/healthz", 200), "ok\n");
    // Its peer never comes up: ready once readiness stops waiting for it.
    let ready = wait_get(metrics, "/readyz", 200);
    assert!(ready.starts_with("ready"), "{ready}");
    for path in [
        "/v1/status",
        "/v1/explain/198.51.100.10",
        "/v1/drain",
        "/v1/undrain",
    ] {
        let (code, body) = get(metrics, path).expect("answers");
        assert_eq!(code, 404, "{path} on the metrics listener: {body}");
    }
    // The api listener still has everything.
    let status = wait_get(d.api, "/v1/status", 200);
    assert!(status.contains("\"node\": \"n1\""), "{status}");
    wait_get(d.api, "/metrics", 200);
}

#[test]
fn a_real_scrape_passes_promtool_check_metrics() {
    let (_d, metrics) = start();
    // Once the VIP is in, every kind of family has a sample.
    let start = Instant::now();
    let scrape = loop {
        let s = wait_get(metrics, "/metrics", 200);
        if s.contains("\nholdfast_routes_advertised 1\n") {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "the VIP never advertised:\n{s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; scripts/test.sh installs it)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "promtool check metrics: exit {:?} {text:?}",
        out.status.code()
    );
    assert!(
        out.status.success(),
        "promtool check metrics: {text}\n{scrape}"
    );
    assert!(text.trim().is_empty(), "promtool found problems: {text}");
}

/// The rule groups of the PrometheusRule: its `spec`, one level less
/// indented, which is a Prometheus rule file.
fn rule_file_of(prometheus_rule: &str) -> String {
    let mut lines = prometheus_rule.lines().skip_while(|l| *l != "spec:");
    assert_eq!(lines.next(), Some("spec:"), "the PrometheusRule has a spec");
    let mut out = String::new();
    for l in lines {
        if !l.is_empty() && !l.starts_with("  ") {
            break;
        }
        out.push_str(l.strip_prefix("  ").unwrap_or(l));
        out.push('\n');
    }
    out
}

/// (alert, expr, for) of each rule in a YAML list of rules.
fn alerts(yaml: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for l in yaml.lines().map(str::trim) {
        if let Some(name) = l.strip_prefix("- alert: ") {
            out.push((name.to_string(), String::new(), String::new()));
        } else if let (Some(e), Some(last)) = (l.strip_prefix("expr: "), out.last_mut()) {
            last.1 = e.to_string();
        } else if let (Some(f), Some(last)) = (l.strip_prefix("for: "), out.last_mut()) {
            last.2 = f.to_string();
        }
    }
    out
}

/// The docs page that shows the alerts (the first YAML block).
const ALERTS_PAGE: &str = "docs/src/observability/alerts.md";

#[test]
fn the_prometheus_rule_passes_promtool_and_holds_the_documented_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_rule_file(dir.path());
    let (out, text) = promtool(dir.path(), &["check", "rules", "holdfast.rules.yaml"]);
    println!("promtool check rules:\n{text}");
    assert!(out.status.success(), "promtool check rules: {text}\n{file}");

    let page = std::fs::read_to_string(root().join(ALERTS_PAGE)).unwrap();
    let section = page
        .split("```yaml")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .unwrap_or_else(|| panic!("{ALERTS_PAGE} has an alerts block"));
    let documented = alerts(section);
    assert!(documented.len() >= 3, "{documented:?}");
    let shipped = alerts(&file);
    assert!(
        text.contains(&format!("SUCCESS: {} rules found", shipped.len())),
        "{text}"
    );
    assert_eq!(
        documented, shipped,
        "{ALERTS_PAGE}'s alerts and the PrometheusRule's"
    );
    for needed in [
        "HoldfastDown",
        "HoldfastNotAvailable",
        "HoldfastCrashLooping",
    ] {
        assert!(
            shipped.iter().any(|(name, _, _)| name == needed),
            "no {needed} alert"
        );
    }
}

/// `promtool test rules` on alerts.test.yaml, next to the rule file it
/// loads, and every shipped alert tested both ways: expected to fire, and
/// expected not to (promtool itself would take a test of an alert that
/// does not exist, expecting nothing, as passed).
#[test]
fn promtool_unit_tests_cover_every_alert_firing_and_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_rule_file(dir.path());
    let tests = std::fs::read_to_string(root().join(RULE_TESTS)).expect("the alert tests");
    std::fs::write(dir.path().join("alerts.test.yaml"), &tests).unwrap();
    let (out, text) = promtool(dir.path(), &["test", "rules", "alerts.test.yaml"]);
    println!("promtool test rules:\n{text}");
    assert!(
        out.status.success() && text.contains("SUCCESS"),
        "promtool test rules {RULE_TESTS}: {text}"
    );

    let doc: serde_json::Value = {
        let mut docs = yaml_serde::Deserializer::from_str(&tests);
        let first = docs.next().expect("a YAML document");
        serde::Deserialize::deserialize(first).expect("alerts.test.yaml is YAML")
    };
    assert_eq!(
        doc["rule_files"],
        serde_json::json!(["holdfast.rules.yaml"]),
        "{RULE_TESTS} loads the PrometheusRule's rules"
    );
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for case in doc["tests"].as_array().expect("tests") {
        for t in case["alert_rule_test"].as_array().into_iter().flatten() {
            let name = t["alertname"].as_str().expect("an alertname").to_string();
            let expected = t["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected > 0 {
                firing.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    let shipped: BTreeSet<String> = alerts(&file).into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(
        firing, shipped,
        "the alerts tested firing, and the shipped ones"
    );
    assert_eq!(
        quiet, shipped,
        "the alerts tested not firing, and the shipped ones"
    );
}

/// The alerts are applied once per cluster: `kubectl kustomize
/// deploy/cluster/monitoring` renders the PrometheusRule promtool checks,
/// as written, and no rack's overlay renders one (it would fire every
/// alert once per rack).
#[test]
fn the_rule_checked_is_the_one_applied_once_per_cluster() {
    let kustomize = |dir: &Path| {
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .expect("kubectl runs (kubectl 1.32 is installed on these machines)");
        assert!(
            out.status.success(),
            "kubectl kustomize {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        yaml_serde::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
            .collect::<Vec<serde_json::Value>>()
    };
    let rendered = kustomize(&root().join("deploy/cluster/monitoring"));
    let [rule] = rendered.as_slice() else {
        panic!("deploy/cluster/monitoring: one object: {rendered:?}")
    };
    let written: serde_json::Value = serde::Deserialize::deserialize(
        yaml_serde::Deserializer::from_str(&std::fs::read_to_string(root().join(RULE)).unwrap()),
    )
    .expect("the PrometheusRule is YAML");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert_eq!(rule["spec"], written["spec"], "rendered as written");

    let mut overlays = 0;
    for entry in std::fs::read_dir(root().join("deploy/overlays")).unwrap() {
        let dir = entry.unwrap().path();
        for o in kustomize(&dir) {
            assert_ne!(o["kind"], "PrometheusRule", "{}", dir.display());
        }
        overlays += 1;
    }
    assert!(overlays >= 4, "{overlays} overlays");
}
