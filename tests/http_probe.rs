//! HTTP(S) probes (`probe = { url = "https://127.0.0.1:6443/readyz",
//! ca_file = ... }`): a VIP follows an HTTPS `/readyz` on its node, as a
//! control-plane VIP follows its node's API server. The servers are
//! python3's http.server with certificates of CAs the test makes with the
//! openssl CLI; FRR is the router.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use testlab::{Lab, LabDir, NsProcess, Signal, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
/// The control-plane VIP: with an HTTP probe it need not be local.
const VIP: &str = "198.51.100.10";
const VIP_PREFIX: &str = "198.51.100.10/32";
/// More VIPs probing the silent server.
const SILENT_TOO: [&str; 2] = ["198.51.100.11", "198.51.100.12"];
/// A second VIP, probing another server.
const VIP2: &str = "198.51.100.20";
const VIP2_PREFIX: &str = "198.51.100.20/32";

/// An HTTPS server on 127.0.0.1: `/readyz` answers with the status code in
/// the status file (200 when it is empty), anything else 404.
const HTTPS_SERVER: &str = r#"
import http.server, ssl, sys
port, cert, key, status_file = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = 404
        if self.path == "/readyz":
            code = int(open(status_file).read().strip() or "200")
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
class S(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    def get_request(self):
        sock, addr = self.socket.accept()
        sock.settimeout(2)
        return ctx.wrap_socket(sock, server_side=True), addr
    def handle_error(self, request, client_address):
        print("handshake or request failed:", sys.exc_info()[1], flush=True)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s = S(("127.0.0.1", port), H)
print("serving", flush=True)
s.serve_forever()
"#;

/// A server that accepts connections and never says a word.
const SILENT_SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
"#;

/// Runs openssl in `dir`; panics with its output if it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA of its own: `NAME.crt` and `NAME.key` in `dir`; the certificate's
/// path.
fn make_ca(dir: &Path, name: &str) -> PathBuf {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    dir.join(format!("{name}.crt"))
}

/// A server certificate for `san` ("IP:127.0.0.1") signed by CA `ca`:
/// (certificate, key).
fn make_server_cert(dir: &Path, ca: &str, name: &str, san: &str) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join(format!("{name}.ext")),
        format!(
            "subjectAltName={san}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
    (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    )
}

/// The test's PKI: CA `cluster` and a server certificate of it for
/// 127.0.0.1; CA `other` and one of it for 127.0.0.1 too.
struct Pki {
    dir: LabDir,
    ca: PathBuf,
    server: (PathBuf, PathBuf),
    foreign: (PathBuf, PathBuf),
}

fn pki() -> Pki {
    let dir = LabDir::new("pki");
    let ca = make_ca(dir.path(), "cluster");
    let server = make_server_cert(dir.path(), "cluster", "apiserver", "IP:127.0.0.1");
    make_ca(dir.path(), "other");
    let foreign = make_server_cert(dir.path(), "other", "impostor", "IP:127.0.0.1");
    Pki {
        dir,
        ca,
        server,
        foreign,
    }
}

/// The HTTPS server on 127.0.0.1:`port` in `ns` with `cert`, answering
/// `/readyz` with the code in `status`; returns once it serves.
fn https_server(
    ns: &testlab::Netns,
    port: u16,
    cert: &(PathBuf, PathBuf),
    status: &Path,
) -> NsProcess {
    let (crt, key) = (cert.0.display().to_string(), cert.1.display().to_string());
    let p = NsProcess::start(
        ns,
        "https",
        &[
            "python3",
            "-c",
            HTTPS_SERVER,
            &port.to_string(),
            &crt,
            &key,
            &status.display().to_string(),
        ],
    );
    wait_until(LONG, "the HTTPS server listening", || {
        matches!(
            ns.tcp_probe("127.0.0.1".parse().unwrap(), port, Duration::from_secs(1)),
            testlab::TcpProbe::Connected
        )
        .then_some(())
    });
    p
}

/// A VIP file of (address, advertisement).
fn vip_file(entries: &[(&str, &str)]) -> String {
    entries
        .iter()
        .map(|(a, ad)| format!("[[vip]]\naddress = \"{a}\"\nadvertisement = \"{ad}\"\n\n"))
        .collect()
}

/// The status's entry for the probe of `vip`, while it does not pass.
fn probe_status(node: &Holdfast<'_>, vip: &str) -> Option<serde_json::Value> {
    node.status()["probes"]
        .as_array()?
        .iter()
        .find(|p| p["vip"] == vip)
        .cloned()
}

/// A control-plane VIP follows an HTTPS `/readyz` verified against the
/// cluster's CA: in FRR's table while it answers 200, withdrawn after it
/// answers 503 for `fail_after` probes, back after `recover_after`; a
/// server whose certificate is of another CA fails the probe with a
/// verify error that status and explain show.
#[test]
fn a_vip_follows_an_https_readyz_verified_against_its_ca_file() {
    testlab::require_root();
    testlab::require_tools(&["python3", "openssl"]);
    let pki = pki();
    let status = pki.dir.write("status", "200");
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}/readyz");
    let lab = Lab::pair();
    let frr = Tor::new().on(&lab);
    let mut server = https_server(&lab.node, port, &pki.server, &status);
    let api = Advertisement::new("apiserver").probe(
        Probe::http(&url)
            .ca_file(pki.ca.as_path())
            .interval("500ms")
            .timeout("300ms")
            .fail_after(3)
            .recover_after(2),
    );
    let node = Holdfast::start(
        &lab.node,
        &probe_node(&[api]),
        &vip_file(&[(VIP, "apiserver")]),
    );
    frr.wait_established(NODE.parse().unwrap(), LONG);

    // 200: advertised after the first probe.
    frr.wait_prefix(VIP_PREFIX, Duration::from_secs(10));
    let (code, text) = node.explain(VIP);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!("its HTTP probe of {url} passes")),
        "{text}"
    );
    assert_eq!(
        probe_status(&node, VIP),
        None,
        "a passing probe is not listed"
    );

    // 503: withdrawn after fail_after (3) failed probes, without the
    // hold-down.
    std::fs::write(&status, "503").unwrap();
    let failing = Instant::now();
    frr.wait_no_prefix(VIP_PREFIX, Duration::from_secs(10));
    let took = failing.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took <= Duration::from_secs(4),
        "withdrawn {took:?} after /readyz went 503"
    );
    let (code, text) = node.explain(VIP);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "its HTTP probe of {url} failed 3 times in a row (HTTP 503 Service Unavailable)"
        )) && text.contains("without the hold-down"),
        "{text}"
    );
    let p = probe_status(&node, VIP).expect("the failing probe in the status");
    assert_eq!(p["target"], url.as_str(), "{p}");
    assert_eq!(p["state"], "failing", "{p}");
    assert_eq!(p["last_error"], "HTTP 503 Service Unavailable", "{p}");
    assert!(
        node.status_text().contains("HTTP 503 Service Unavailable"),
        "{}",
        node.status_text()
    );

    // 200 again: back after recover_after (2) good probes.
    std::fs::write(&status, "200").unwrap();
    let passing = Instant::now();
    frr.wait_prefix(VIP_PREFIX, Duration::from_secs(10));
    let took = passing.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took <= Duration::from_secs(4),
        "back {took:?} after /readyz went 200"
    );

    // The server stops: withdrawn, its connects refused.
    server.kill(Signal::Kill);
    frr.wait_no_prefix(VIP_PREFIX, Duration::from_secs(10));
    let (_, text) = node.explain(VIP);
    assert!(
        text.contains(&format!("(connect to 127.0.0.1:{port}: refused)")),
        "{text}"
    );

    // An impostor on the same port, with a certificate of another CA: it
    // answers 200, but the probe fails the handshake and the VIP stays
    // away.
    let _impostor = https_server(&lab.node, port, &pki.foreign, &status);
    let verify = format!(
        "TLS: certificate verify failed: unknown issuer: the server's chain does not lead to a CA of ca_file {}",
        pki.ca.display()
    );
    wait_until(LONG, "the verify error in the status", || {
        probe_status(&node, VIP).filter(|p| p["last_error"] == verify.as_str())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        frr.prefix(VIP_PREFIX).is_none(),
        "advertised while an impostor answers"
    );
    let (code, text) = node.explain(VIP);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("({verify})")), "{text}");
    assert!(
        node.status_text().contains(&verify),
        "{}",
        node.status_text()
    );
}

/// A server that accepts and never answers fails its probe when the
/// timeout is up, each time, and the probe of another VIP goes on at its
/// own pace meanwhile, however many probes hang (three VIPs probe the
/// silent server). The other's server is verified against the
/// system's roots (`SSL_CERT_FILE` names the cluster CA as the roots), as
/// a probe without `ca_file` is.
#[test]
fn a_silent_server_fails_within_the_timeout_and_delays_no_other_probe() {
    testlab::require_root();
    testlab::require_tools(&["python3", "openssl"]);
    let pki = pki();
    let status = pki.dir.write("status", "200");
    let (silent_port, good_port) = (free_port(), free_port());
    let lab = Lab::pair();
    let frr = Tor::new().on(&lab);
    let _silent = NsProcess::start(
        &lab.node,
        "silent",
        &["python3", "-c", SILENT_SERVER, &silent_port.to_string()],
    );
    let _good = https_server(&lab.node, good_port, &pki.server, &status);
    let probe = |url: String| {
        Probe::http(&url)
            .interval("500ms")
            .timeout("400ms")
            .fail_after(2)
            .recover_after(1)
    };
    let slow =
        Advertisement::new("slow").probe(probe(format!("http://127.0.0.1:{silent_port}/readyz")));
    let good =
        Advertisement::new("good").probe(probe(format!("https://127.0.0.1:{good_port}/readyz")));
    let ca = pki.ca.display().to_string();
    let node = Holdfast::start_env(
        &lab.node,
        &probe_node(&[slow, good]),
        &vip_file(&[
            (VIP, "slow"),
            (SILENT_TOO[0], "slow"),
            (SILENT_TOO[1], "slow"),
            (VIP2, "good"),
        ]),
        &[],
        &[("SSL_CERT_FILE", &ca)],
    );
    frr.wait_established(NODE.parse().unwrap(), LONG);
    frr.wait_prefix(VIP2_PREFIX, Duration::from_secs(10));

    // The silent one: failed by its timeout, again and again.
    let p = wait_until(LONG, "the silent server's probe failing twice", || {
        probe_status(&node, VIP).filter(|p| p["consecutive_failures"].as_u64() >= Some(2))
    });
    assert_eq!(
        p["last_error"], "timed out after 400ms waiting for the status line",
        "{p}"
    );
    assert_eq!(p["state"], "not-passed-yet", "{p}");
    let (code, text) = node.explain(VIP);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("has not succeeded yet (timed out after 400ms waiting for the status line)"),
        "{text}"
    );
    // A failure every interval: each probe ends with its timeout, not
    // later.
    let before = p["consecutive_failures"].as_u64().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let after = probe_status(&node, VIP).unwrap()["consecutive_failures"]
        .as_u64()
        .unwrap();
    assert!(
        after - before >= 5,
        "{} failures in 3 s at a 500 ms interval",
        after - before
    );

    // The other VIP is probed at its own pace meanwhile, whatever the
    // three hung probes: withdrawn after fail_after (2) probes of 503, a
    // failure every interval, back after one probe of 200.
    std::fs::write(&status, "503").unwrap();
    let failing = Instant::now();
    frr.wait_no_prefix(VIP2_PREFIX, Duration::from_secs(10));
    let took = failing.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took <= Duration::from_millis(2500),
        "withdrawn {took:?} after /readyz went 503"
    );
    let failures = |vip: &str| {
        probe_status(&node, vip).expect("listed")["consecutive_failures"]
            .as_u64()
            .unwrap()
    };
    let before = failures(VIP2);
    std::thread::sleep(Duration::from_secs(3));
    let after = failures(VIP2);
    assert!(
        after - before >= 5,
        "{} failures of {VIP2} in 3 s at a 500 ms interval",
        after - before
    );
    assert_eq!(
        probe_status(&node, VIP2).unwrap()["last_error"],
        "HTTP 503 Service Unavailable"
    );
    std::fs::write(&status, "200").unwrap();
    let passing = Instant::now();
    frr.wait_prefix(VIP2_PREFIX, Duration::from_secs(10));
    assert!(
        passing.elapsed() <= Duration::from_secs(2),
        "back {:?} after /readyz went 200",
        passing.elapsed()
    );
    assert!(frr.prefix(VIP_PREFIX).is_none());
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The HTTPS server on 127.0.0.1:`port` of the test's own namespace
/// (loopback only), once it accepts connections.
fn local_https_server(port: u16, cert: &(PathBuf, PathBuf), status: &Path) -> Child {
    let child = Command::new("python3")
        .arg("-c")
        .arg(HTTPS_SERVER)
        .arg(port.to_string())
        .arg(&cert.0)
        .arg(&cert.1)
        .arg(status)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 starts");
    let child = Child(child);
    wait_until(LONG, "the HTTPS server listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| ())
    });
    child
}

/// One probe of `url` by the library's HTTP prober, within 2 s.
async fn probe(url: String, ca: Option<&Path>) -> Result<(), String> {
    holdfast::probe::http::HttpProbe::new(
        holdfast::config::HttpUrl::parse(&url).unwrap(),
        ca.map(Path::to_path_buf),
    )
    .probe(Duration::from_secs(2))
    .await
}

/// What the HTTP probe of the library makes of servers whose certificates
/// do or do not verify: the chain must lead to `ca_file`, and the
/// certificate must name the URL's host (an IP host as an IP address SAN,
/// a DNS name as a DNS SAN). No root: the servers are on this namespace's
/// loopback.
#[tokio::test]
async fn https_probes_verify_the_chain_and_the_name() {
    testlab::require_tools(&["python3", "openssl"]);
    let pki = pki();
    let dir = pki.dir.path();
    let wrong_ip = make_server_cert(dir, "cluster", "wrong-ip", "IP:127.0.0.2");
    let by_name = make_server_cert(dir, "cluster", "by-name", "DNS:localhost");
    let status = pki.dir.write("status", "200");
    let ca = Some(pki.ca.as_path());
    let shown = pki.ca.display();

    let port = free_port();
    let good = local_https_server(port, &pki.server, &status);
    let url = format!("https://127.0.0.1:{port}/readyz");
    assert_eq!(probe(url.clone(), ca).await, Ok(()));
    std::fs::write(&status, "503").unwrap();
    assert_eq!(
        probe(url.clone(), ca).await,
        Err("HTTP 503 Service Unavailable".to_string())
    );
    std::fs::write(&status, "200").unwrap();
    // The same server, verified against another CA, and against the
    // system's roots, which do not hold the test's CA.
    let other = dir.join("other.crt");
    assert_eq!(
        probe(url.clone(), Some(&other)).await,
        Err(format!(
            "TLS: certificate verify failed: unknown issuer: the server's chain does not lead to a CA of ca_file {}",
            other.display()
        ))
    );
    // The CA file is read before every probe: one prober, its file
    // rewritten from the other CA to the cluster's, passes from the next
    // probe on (a rotated bundle needs no reload).
    let rotated = dir.join("rotated.crt");
    std::fs::copy(&other, &rotated).unwrap();
    let mut prober = holdfast::probe::http::HttpProbe::new(
        holdfast::config::HttpUrl::parse(&url).unwrap(),
        Some(rotated.clone()),
    );
    let said = prober.probe(Duration::from_secs(2)).await.unwrap_err();
    assert!(said.contains("unknown issuer"), "{said}");
    std::fs::copy(&pki.ca, &rotated).unwrap();
    assert_eq!(prober.probe(Duration::from_secs(2)).await, Ok(()));
    let system = probe(url.clone(), None).await.unwrap_err();
    assert!(
        system.starts_with("TLS: certificate verify failed: unknown issuer: the server's chain does not lead to a CA of the system's roots")
            || system.starts_with("TLS: no system root certificates found"),
        "{system}"
    );
    drop(good);

    // Another CA's server certificate for the right address.
    let port = free_port();
    let _impostor = local_https_server(port, &pki.foreign, &status);
    assert_eq!(
        probe(format!("https://127.0.0.1:{port}/readyz"), ca).await,
        Err(format!(
            "TLS: certificate verify failed: unknown issuer: the server's chain does not lead to a CA of ca_file {shown}"
        ))
    );

    // The right CA, but a certificate for another address.
    let port = free_port();
    let _wrong = local_https_server(port, &wrong_ip, &status);
    let said = probe(format!("https://127.0.0.1:{port}/readyz"), ca)
        .await
        .unwrap_err();
    assert!(
        said.starts_with(
            "TLS: certificate verify failed: certificate not valid for name \"127.0.0.1\""
        ) && said.contains("127.0.0.2"),
        "{said}"
    );

    // A DNS name: looked up, sent as SNI, matched against the DNS SANs.
    let port = free_port();
    let _named = local_https_server(port, &by_name, &status);
    assert_eq!(
        probe(format!("https://localhost:{port}/readyz"), ca).await,
        Ok(())
    );
    let said = probe(format!("https://127.0.0.1:{port}/readyz"), ca)
        .await
        .unwrap_err();
    assert!(
        said.starts_with("TLS: certificate verify failed: certificate not valid for name"),
        "{said}"
    );
}

/// `check` and `run` refuse a probe with both `port` and `url`, or
/// neither, alike: `PATH:LINE:COL: message`.
#[test]
fn check_and_run_refuse_a_probe_without_exactly_one_target_alike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("vips.toml"), "").unwrap();
    let path = dir.path().join("holdfast.toml");
    let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\
         [[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
         [source]\nkind = \"file\"\npath = \"vips.toml\"\n\
         [[advertisement]]\nname = \"both\"\n\
         probe = { port = 6443, url = \"https://127.0.0.1:6443/readyz\" }\n\
         [[advertisement]]\nname = \"neither\"\n\
         probe = { interval = \"5s\" }\n";
    std::fs::write(&path, text).unwrap();
    let want = format!(
        "{p}:13:30: probe has both port and url; give one: port for a TCP connect to the VIP, url for an HTTP(S) GET\n\
         {p}:16:9: probe needs port (a TCP connect to the VIP) or url (an HTTP(S) GET, e.g. url = \"https://127.0.0.1:6443/readyz\")",
        p = path.display()
    );
    let config = path.display().to_string();
    let (status, out, err, _) = run_within(&["check", "--config", &config], LONG);
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert_eq!(out.trim_end(), want);
    let state = dir.path().join("state").display().to_string();
    let (status, out, err, _) =
        run_within(&["run", "--config", &config, "--state-dir", &state], LONG);
    assert!(!status.success(), "{out}{err}");
    assert!(err.contains(&want), "run said:\n{out}{err}");
}

/// `check` reads a probe's `ca_file` and says what is wrong with it, as a
/// warning (the daemon runs with it: the probe fails with the same reason
/// until the file is fixed); `--skip-password-files` reads none.
#[test]
fn check_warns_about_a_ca_file_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("vips.toml"), "").unwrap();
    std::fs::write(
        dir.path().join("ca.crt"),
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let path = dir.path().join("holdfast.toml");
    let config = Config::node(65001, NODE)
        .peer(Peer::new("tor1", TOR, 65000))
        .advertisement(
            Advertisement::new("missing")
                .probe(Probe::http("https://127.0.0.1:6443/readyz").ca_file("missing.crt")),
        )
        .advertisement(
            Advertisement::new("not-a-ca")
                .probe(Probe::http("https://127.0.0.1:6443/readyz").ca_file("ca.crt")),
        )
        .to_toml()
        .replace("VIPS", "vips.toml");
    std::fs::write(&path, &config).unwrap();
    let config_path = path.display().to_string();
    let (status, out, err, _) = run_within(&["check", "--config", &config_path], LONG);
    assert_eq!(status.code(), Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let file = |name: &str| dir.path().join(name).display().to_string();
    assert!(
        lines[0].starts_with(&format!("{}:", path.display()))
            && lines[0].contains(&format!(
                ": warning: cannot read ca_file {}: No such file or directory (os error 2); its probe fails",
                file("missing.crt")
            )),
        "{out}"
    );
    assert!(
        lines[1].contains(&format!(
            ": warning: ca_file {} holds no certificate (no -----BEGIN CERTIFICATE----- block)",
            file("ca.crt")
        )),
        "{out}"
    );
    let (status, out, _, _) = run_within(
        &["check", "--deny-warnings", "--config", &config_path],
        LONG,
    );
    assert_eq!(status.code(), Some(1), "{out}");
    let (status, out, _, _) = run_within(
        &["check", "--skip-password-files", "--config", &config_path],
        LONG,
    );
    assert_eq!((status.code(), out.trim()), (Some(0), ""), "{out}");
}
