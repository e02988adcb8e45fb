//! The release scripts/release.sh writes to `dist/` (scripts/test.sh runs
//! it first): the sums, the two static binaries (the arm64 one under
//! qemu-user), the OCI archive against the Dockerfile, the SBOM, and the
//! amd64 image run with podman exactly as the shipped DaemonSets run it
//! (arguments, user, capabilities, privilege escalation, seccomp, read-only
//! root, config and state mounts), peering with FRR in a namespace. The
//! unnumbered overlay's run is in tests/unnumbered.rs.

mod common;
#[allow(dead_code)] // shared with tests/deploy_manifests.rs
mod deploy;
#[allow(dead_code)]
mod image;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::*;
use image::{Image, cap_bits, cap_set, container, daemon_set, dist, proc_status, root, text};
use serde_json::Value;
use testlab::{Frr, Lab};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const TRIPLES: [(&str, &str); 2] = [
    ("x86_64-unknown-linux-musl", "amd64"),
    ("aarch64-unknown-linux-musl", "arm64"),
];

fn binary(triple: &str) -> std::path::PathBuf {
    dist().join(format!("holdfast-{VERSION}-{triple}"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `holdfast version --json` of a release binary (the arm64 one under
/// qemu-user).
fn version_of(triple: &str) -> Value {
    let bin = binary(triple);
    let mut cmd = if triple.starts_with("aarch64") {
        testlab::require_tools(&["qemu-aarch64-static"]);
        let mut c = Command::new("qemu-aarch64-static");
        c.arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    serde_json::from_str(&run(cmd.args(["version", "--json"]))).expect("version --json")
}

/// The commit the binaries must name: HEAD of this checkout.
fn head() -> String {
    run(Command::new("git").args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"]))
        .trim()
        .to_owned()
}

#[test]
fn the_sums_cover_every_artefact_and_match() {
    let dir = dist();
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).expect("SHA256SUMS");
    let listed: BTreeSet<&str> = sums
        .lines()
        .map(|l| l.split_whitespace().nth(1).expect("SUM  NAME"))
        .collect();
    let want: BTreeSet<String> = TRIPLES
        .iter()
        .map(|(t, _)| format!("holdfast-{VERSION}-{t}"))
        .chain([
            format!("holdfast-{VERSION}-oci.tar"),
            format!("holdfast-{VERSION}.cdx.json"),
        ])
        .collect();
    assert_eq!(
        listed,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "{sums}"
    );
    run(Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dir));
}

#[test]
fn both_binaries_are_static_pies_that_name_their_commit_and_target() {
    let commit = head();
    for (triple, _) in TRIPLES {
        let bin = binary(triple);
        let file = run(Command::new("file").arg(&bin));
        assert!(file.contains("static-pie linked"), "{file}");
        let v = version_of(triple);
        assert_eq!(v["version"], VERSION, "{v}");
        assert_eq!(v["target"], triple, "{v}");
        assert_eq!(v["profile"], "release", "{v}");
        let c = v["commit"].as_str().unwrap_or_default();
        assert!(
            c == commit || c == format!("{commit}-dirty"),
            "{v} vs HEAD {commit}"
        );
        assert!(
            v["build_date"].as_str().unwrap_or_default().ends_with('Z'),
            "{v}"
        );
    }
}

/// The Dockerfile's final stage: its USER, ENTRYPOINT, CMD and LABELs (with
/// `${ARG}` left as written), and the capabilities its build stage sets.
struct Dockerfile {
    user: String,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    labels: BTreeMap<String, String>,
    setcap: String,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    // Continuation lines joined.
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let setcap = lines
        .iter()
        .find_map(|l| l.split("setcap ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .expect("the build stage sets file capabilities")
        .to_owned();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a FROM");
    assert_eq!(
        lines[last_from].trim(),
        "FROM scratch",
        "the image is FROM scratch"
    );
    let stage = &lines[last_from..];
    let instr = |name: &str| {
        stage
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in the final stage"))
            .trim()
            .to_owned()
    };
    let json_array =
        |s: String| -> Vec<String> { serde_json::from_str(&s).expect("an exec-form JSON array") };
    let mut labels = BTreeMap::new();
    for l in stage.iter().filter_map(|l| l.strip_prefix("LABEL ")) {
        let mut rest = l.trim();
        while let Some((key, after)) = rest.split_once("=\"") {
            let (value, tail) = after.split_once('"').expect("a closing quote");
            labels.insert(key.trim().to_owned(), value.to_owned());
            rest = tail.trim();
        }
    }
    Dockerfile {
        user: instr("USER"),
        entrypoint: json_array(instr("ENTRYPOINT")),
        cmd: json_array(instr("CMD")),
        labels,
        setcap,
    }
}

/// `setcap`'s `a,b+p` as getcap prints it (`a,b=p`, names sorted).
fn caps_text(setcap: &str) -> String {
    let (names, flags) = setcap.split_once('+').expect("NAMES+FLAGS");
    let mut names: Vec<&str> = names.split(',').collect();
    names.sort();
    format!("{}={flags}", names.join(","))
}

fn json_file(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_archive_holds_the_dockerfile_s_image_for_amd64_and_arm64() {
    testlab::require_tools(&["tar", "getcap"]);
    let docker = dockerfile();
    let layout = tempfile::tempdir().unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(image::archive())
        .arg("-C")
        .arg(layout.path()));
    let blob = |digest: &Value| {
        let d = digest.as_str().expect("a digest");
        let (alg, hex) = d.split_once(':').expect("ALG:HEX");
        layout.path().join("blobs").join(alg).join(hex)
    };
    let index = json_file(&layout.path().join("index.json"));
    let top = &index["manifests"][0];
    assert_eq!(
        top["annotations"]["org.opencontainers.image.ref.name"], VERSION,
        "{index}"
    );
    assert_eq!(
        top["mediaType"], "application/vnd.oci.image.index.v1+json",
        "one multi-architecture index: {index}"
    );
    let list = json_file(&blob(&top["digest"]));
    let mut arches = BTreeSet::new();
    let commit = version_of(TRIPLES[0].0)["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    for m in list["manifests"].as_array().expect("manifests") {
        let arch = m["platform"]["architecture"].as_str().unwrap().to_owned();
        assert_eq!(m["platform"]["os"], "linux", "{m}");
        let triple = TRIPLES
            .iter()
            .find(|(_, a)| *a == arch)
            .unwrap_or_else(|| panic!("unexpected architecture {arch}"))
            .0;
        let manifest = json_file(&blob(&m["digest"]));
        let config = json_file(&blob(&manifest["config"]["digest"]));
        assert_eq!(config["architecture"], arch.as_str(), "{config}");
        let c = &config["config"];
        assert_eq!(c["User"], docker.user.as_str(), "{c}");
        assert_eq!(c["Entrypoint"], serde_json::json!(docker.entrypoint), "{c}");
        assert_eq!(c["Cmd"], serde_json::json!(docker.cmd), "{c}");
        // The same label keys; the Dockerfile's fixed values as they are,
        // its build arguments as the release fills them.
        let labels = c["Labels"].as_object().expect("labels");
        assert_eq!(
            labels.keys().cloned().collect::<BTreeSet<_>>(),
            docker.labels.keys().cloned().collect::<BTreeSet<_>>(),
            "{c}"
        );
        for (k, v) in &docker.labels {
            if !v.starts_with("${") {
                assert_eq!(labels[k], v.as_str(), "{k}");
            }
        }
        assert_eq!(labels["org.opencontainers.image.version"], VERSION);
        assert_eq!(labels["org.opencontainers.image.revision"], commit.as_str());
        assert_eq!(
            labels["org.opencontainers.image.created"],
            config["created"]
        );
        // One layer: the binary, with the Dockerfile's file capabilities.
        let layers = manifest["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), 1, "{manifest}");
        let fs = tempfile::tempdir().unwrap();
        let listing = run(Command::new("tar")
            .args(["--xattrs", "--xattrs-include=*", "-xzvf"])
            .arg(blob(&layers[0]["digest"]))
            .arg("-C")
            .arg(fs.path()));
        let files: Vec<&str> = listing.lines().filter(|l| !l.ends_with('/')).collect();
        assert_eq!(files, ["usr/local/bin/holdfast"], "{listing}");
        let bin = fs.path().join("usr/local/bin/holdfast");
        assert_eq!(
            std::fs::read(&bin).unwrap(),
            std::fs::read(binary(triple)).unwrap(),
            "{arch}: the image's binary is the release's"
        );
        let getcap = run(Command::new("getcap").arg(&bin));
        // `PATH CAPS`: the set read back from the image's layer.
        let caps = getcap.split_whitespace().nth(1).unwrap_or_default();
        assert_eq!(
            caps,
            caps_text(&docker.setcap),
            "{arch}: {getcap} vs the Dockerfile's {}",
            docker.setcap
        );
        arches.insert(arch);
    }
    assert_eq!(arches, BTreeSet::from(["amd64".into(), "arm64".into()]));
}

#[test]
fn the_sbom_lists_what_the_binary_links_and_nothing_it_does_not() {
    let bom = json_file(&dist().join(format!("holdfast-{VERSION}.cdx.json")));
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["metadata"]["component"]["name"], "holdfast");
    assert_eq!(bom["metadata"]["component"]["version"], VERSION);
    let names: BTreeSet<&str> = bom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for linked in [
        "tokio",
        "ring",
        "rustls",
        "kube-client",
        "bgp-proto",
        "holdfast-sockopt",
    ] {
        assert!(names.contains(linked), "{linked} is linked but not listed");
    }
    // Build-time only (proc-macros, build scripts' crates) or tests only.
    for not in [
        "serde_derive",
        "tokio-macros",
        "proptest",
        "testlab",
        "kube-standin",
        "yaml_serde",
        "cc",
    ] {
        assert!(
            !names.contains(not),
            "{not} is not in the binary but is listed"
        );
    }
    // Every crate from crates.io carries its package's SHA-256 (Cargo.lock).
    for c in bom["components"].as_array().unwrap() {
        let local = c["properties"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "holdfast:workspace-crate"));
        assert!(local || c["hashes"][0]["alg"] == "SHA-256", "{c}");
    }
}

/// FRR in the router's namespace and holdfast's image in the node's, run
/// as the DaemonSet of an overlay runs it.
struct Run<'a> {
    frr: Frr,
    holdfast: Holdfast<'a>,
}

/// holdfast peering with the router; with `listen`, listening on port
/// 179 for its passive peer.
fn peer_conf(lab: &Lab, listen: bool) -> String {
    let mut tor = Peer::new("tor", lab.router_v4, 65000)
        .hold_time("9s")
        .connect_retry("1s");
    let mut conf = Config::new().speaker(65001, &lab.node_v4.to_string());
    if listen {
        tor = tor.passive();
        conf = conf.listen("0.0.0.0:179");
    }
    conf.peer(tor).file_source().to_toml()
}

/// FRR on the router; with `connect`, it connects to the node's port 179
/// (holdfast only listens).
fn frr_for(lab: &Lab, connect: bool) -> Frr {
    let mut tor = Tor::new();
    if connect {
        tor = tor.lines(&format!(" neighbor {} port 179\n", lab.node_v4));
    }
    tor.on(lab)
}

fn run_overlay<'a>(lab: &'a Lab, image: &Image, overlay: &str, listen: bool) -> Run<'a> {
    let ds = daemon_set(overlay);
    let frr = frr_for(lab, listen);
    let node_ip = lab.node_v4.to_string();
    let holdfast = image::start(
        &lab.node,
        image,
        &ds,
        &peer_conf(lab, listen),
        &vips(&["198.51.100.10"]),
        &[("NODE_NAME", "node-1"), ("NODE_IP", &node_ip)],
    );
    Run { frr, holdfast }
}

impl Run<'_> {
    fn assert_serving(&self) {
        let route = self.frr.wait_prefix("198.51.100.10/32", LONG);
        assert_eq!(route["paths"][0]["valid"], true, "{route}");
        let (code, body) = self.holdfast.http_get("/readyz");
        assert_eq!(code, 200, "/readyz: {body}\n{}", self.holdfast.log());
    }

    fn pid(&self) -> u32 {
        self.holdfast.container.as_ref().expect("a container").pid()
    }
}

/// The process as the DaemonSet's security context says: its user, no
/// effective capability in the main thread, the bounding set exactly
/// what the container adds, no_new_privs as allowPrivilegeEscalation
/// says, a seccomp filter, a read-only root.
fn assert_locked_down(pid: u32, overlay: &str) {
    let ds = daemon_set(overlay);
    let sc = container(&ds).security_context.clone().unwrap();
    let added = sc
        .capabilities
        .as_ref()
        .and_then(|c| c.add.clone())
        .unwrap_or_default();
    let uid = proc_status(pid, "Uid");
    assert!(
        uid.split_whitespace().all(|u| u == "65532"),
        "{overlay}: Uid {uid}"
    );
    assert_eq!(
        cap_set(pid, "CapBnd"),
        cap_bits(&added),
        "{overlay}: bounding set"
    );
    assert_eq!(
        cap_set(pid, "CapEff"),
        0,
        "{overlay}: the main thread's effective set"
    );
    assert_eq!(cap_set(pid, "CapAmb"), 0, "{overlay}: ambient set");
    let nnp = if sc.allow_privilege_escalation == Some(true) {
        "0"
    } else {
        "1"
    };
    assert_eq!(proc_status(pid, "NoNewPrivs"), nnp, "{overlay}");
    assert_eq!(
        proc_status(pid, "Seccomp"),
        "2",
        "{overlay}: a seccomp filter"
    );
    let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root_mount = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .expect("the root mount");
    let opts = root_mount.split_whitespace().nth(5).unwrap();
    assert!(
        opts.split(',').any(|o| o == "ro"),
        "{overlay}: root mounted {opts}"
    );
}

#[test]
fn the_image_runs_as_the_base_daemonset_runs_it_and_peers_with_frr() {
    let image = Image::load("amd64");
    let lab = Lab::pair();
    let overlay = "deploy/overlays/rack-a";
    let r = run_overlay(&lab, &image, overlay, false);
    r.assert_serving();
    assert_locked_down(r.pid(), overlay);
    // The image's own idea of itself.
    assert_eq!(
        image.inspect("{{.Config.User}}"),
        "65532:65532",
        "the image's user"
    );
}

#[test]
fn listening_on_179_as_the_listen_179_overlay_grants_it() {
    let image = Image::load("amd64");
    let lab = Lab::pair();
    let overlay = "deploy/overlays/listen-179";
    let r = run_overlay(&lab, &image, overlay, true);
    r.assert_serving();
    // The router connected to the node's port 179.
    let n = r
        .frr
        .json(&format!("show bgp neighbors {} json", lab.node_v4));
    let n = &n[lab.node_v4.to_string()];
    assert_eq!(n["portForeign"], 179, "{n}");
    assert_locked_down(r.pid(), overlay);
    drop(r);

    // The base's grants (no capability) cannot bind 179: the daemon
    // stops, saying what it lacks and which overlay grants it.
    let out = image::run_to_exit(
        &lab.node,
        &image,
        &daemon_set("deploy/overlays/rack-a"),
        &peer_conf(&lab, true),
        &vips(&["198.51.100.10"]),
        &[("NODE_NAME", "node-1"), ("NODE_IP", "192.0.2.2")],
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("CAP_NET_BIND_SERVICE") && said.contains("listen-179"),
        "{said}"
    );
}
