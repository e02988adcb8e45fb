//! The release image (scripts/release.sh's OCI archive in `dist/`) run with
//! podman the way a rendered DaemonSet runs it: the same arguments, user,
//! capabilities, privilege escalation, seccomp, read-only root and the
//! config and state mounts, in a test's network namespace.
//!
//! podman runs with runc, vfs storage private to the test and no default
//! ulimits (raising RLIMIT_NOFILE is refused on these machines); the image
//! is loaded from the archive with skopeo, never pulled.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use testlab::{LabDir, Netns};

use crate::common::Holdfast;

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// scripts/release.sh's output: `$HOLDFAST_DIST`, else `dist/`. Missing,
/// the test fails saying how to make it.
pub fn dist() -> PathBuf {
    let dir = std::env::var_os("HOLDFAST_DIST").map_or_else(|| root().join("dist"), PathBuf::from);
    assert!(
        dir.join("SHA256SUMS").is_file(),
        "{}: no release here (no SHA256SUMS): run scripts/release.sh first (scripts/test.sh does), \
         or set HOLDFAST_DIST to its output",
        dir.display()
    );
    dir
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn archive() -> PathBuf {
    dist().join(format!("holdfast-{VERSION}-oci.tar"))
}

/// The rendered DaemonSet of a kustomization (an overlay; a relative path
/// is under the repository).
pub fn daemon_set(dir: impl AsRef<Path>) -> DaemonSet {
    let path = root().join(dir.as_ref());
    let dir = &path.display().to_string();
    let text = crate::deploy::kustomize(&path).unwrap_or_else(|e| panic!("{e}"));
    let docs = crate::deploy::documents(&text, dir).unwrap_or_else(|e| panic!("{e}"));
    let mut sets: Vec<DaemonSet> = docs
        .iter()
        .filter(|d| d["kind"] == "DaemonSet")
        .map(|d| crate::deploy::typed(d, dir).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(sets.len(), 1, "{dir}: expected one DaemonSet");
    sets.remove(0)
}

pub fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec.template.spec.as_ref().expect("a pod template")
}

pub fn container(ds: &DaemonSet) -> &Container {
    let p = pod(ds);
    assert_eq!(p.containers.len(), 1, "one container");
    &p.containers[0]
}

/// The image loaded into a podman storage of the test's own.
pub struct Image {
    dir: LabDir,
    /// The image's name in that storage.
    pub name: String,
}

impl Image {
    /// Loads the `arch` image of the release's multi-architecture archive.
    pub fn load(arch: &str) -> Image {
        testlab::require_root();
        testlab::require_tools(&["podman", "skopeo", "runc"]);
        let archive = archive();
        let dir = LabDir::new("podman");
        std::fs::write(
            dir.join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n",
        )
        .expect("containers.conf");
        let image = Image {
            dir,
            name: format!("localhost/holdfast:{VERSION}-{arch}"),
        };
        let out = Command::new("skopeo")
            .args([
                "--override-arch",
                arch,
                "--override-os",
                "linux",
                "copy",
                "--quiet",
            ])
            .arg(format!("oci-archive:{}:{VERSION}", archive.display()))
            .arg(format!(
                "containers-storage:[vfs@{}+{}]{}",
                image.storage().display(),
                image.run_root().display(),
                image.name
            ))
            .env("CONTAINERS_CONF", image.dir.join("containers.conf"))
            .output()
            .expect("skopeo");
        assert!(out.status.success(), "skopeo copy: {}", text(&out));
        image
    }

    fn storage(&self) -> PathBuf {
        self.dir.join("storage")
    }

    fn run_root(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// `podman` with this storage, runc and no systemd.
    pub fn podman(&self) -> Vec<String> {
        [
            "podman",
            "--root",
            &self.storage().display().to_string(),
            "--runroot",
            &self.run_root().display().to_string(),
            "--storage-driver",
            "vfs",
            "--runtime",
            "runc",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "none",
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn command(&self) -> Command {
        let argv = self.podman();
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..])
            .env("CONTAINERS_CONF", self.dir.join("containers.conf"));
        c
    }

    /// `podman inspect --format F` of the image.
    pub fn inspect(&self, format: &str) -> String {
        let out = self
            .command()
            .args(["image", "inspect", "--format", format, &self.name])
            .output()
            .expect("podman");
        assert!(out.status.success(), "podman image inspect: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "{}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `podman run` flags that give a container what `ds`'s pod spec gives
/// its container, and the container's arguments. The config volume is
/// `config_dir` (read-only, where the DaemonSet mounts its ConfigMap); an
/// emptyDir is a tmpfs; environment from the downward API takes `env`'s
/// values (NODE_NAME, NODE_IP).
pub fn run_flags(
    ds: &DaemonSet,
    config_dir: &Path,
    env: &[(&str, &str)],
) -> (Vec<String>, Vec<String>) {
    let pod = pod(ds);
    let c = container(ds);
    let mut flags: Vec<String> = Vec::new();
    let mut add = |f: &[&str]| flags.extend(f.iter().map(|s| s.to_string()));
    assert_eq!(
        pod.host_network,
        Some(true),
        "the pod runs in the node's network"
    );
    let psc = pod.security_context.clone().unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let user = sc
        .run_as_user
        .or(psc.run_as_user)
        .expect("runAsUser is set");
    let group = sc
        .run_as_group
        .or(psc.run_as_group)
        .expect("runAsGroup is set");
    add(&["--user", &format!("{user}:{group}")]);
    let caps = sc.capabilities.clone().unwrap_or_default();
    for d in caps.drop.unwrap_or_default() {
        add(&["--cap-drop", &d]);
    }
    for a in caps.add.unwrap_or_default() {
        add(&["--cap-add", &a]);
    }
    // allowPrivilegeEscalation: false is the runtime's no_new_privs.
    if sc.allow_privilege_escalation != Some(true) {
        add(&["--security-opt", "no-new-privileges"]);
    }
    if sc.read_only_root_filesystem == Some(true) {
        add(&["--read-only"]);
    }
    let seccomp = sc
        .seccomp_profile
        .or(psc.seccomp_profile)
        .expect("a seccomp profile is set");
    match seccomp.type_.as_str() {
        // podman's default profile is the runtime's default.
        "RuntimeDefault" => {}
        "Localhost" => {
            let p = seccomp.localhost_profile.expect("localhostProfile");
            add(&[
                "--security-opt",
                &format!("seccomp={}", root().join("deploy").join(p).display()),
            ]);
        }
        other => panic!("seccomp profile {other}: not what the manifests promise"),
    }
    for m in c.volume_mounts.clone().unwrap_or_default() {
        let volume = pod
            .volumes
            .as_ref()
            .and_then(|v| v.iter().find(|v| v.name == m.name))
            .unwrap_or_else(|| panic!("volume {} is not in the pod", m.name));
        if volume.empty_dir.is_some() {
            add(&["--tmpfs", &format!("{}:rw,mode=1777", m.mount_path)]);
        } else if m.name == "config" {
            let ro = if m.read_only == Some(true) { ",ro" } else { "" };
            add(&[
                "--mount",
                &format!(
                    "type=bind,src={},dst={}{ro}",
                    config_dir.display(),
                    m.mount_path
                ),
            ]);
        } else {
            panic!("volume {} has no stand-in here", m.name);
        }
    }
    for e in c.env.clone().unwrap_or_default() {
        let value = match (&e.value, env.iter().find(|(k, _)| *k == e.name)) {
            (_, Some((_, v))) => v.to_string(),
            (Some(v), None) => v.clone(),
            (None, None) => panic!("env {} comes from the pod: give it a value", e.name),
        };
        add(&["--env", &format!("{}={value}", e.name)]);
    }
    let args = c.args.clone().unwrap_or_default();
    assert!(c.command.is_none(), "the image's entrypoint runs");
    (flags, args)
}

/// Where the DaemonSet mounts its config (the `config` volume).
pub fn config_mount(ds: &DaemonSet) -> String {
    container(ds)
        .volume_mounts
        .as_ref()
        .and_then(|m| m.iter().find(|m| m.name == "config"))
        .expect("a config mount")
        .mount_path
        .clone()
}

/// holdfast from `image`, started in `ns` as `ds` runs it, with `config`
/// (its `VIPS` the VIP file's path inside the container) and `vips`.
pub fn start<'a>(
    ns: &'a Netns,
    image: &Image,
    ds: &DaemonSet,
    config: &str,
    vips: &str,
    env: &[(&str, &str)],
) -> Holdfast<'a> {
    let (mut h, wrapper, args) = prepare(ns, image, ds, config, vips, env);
    h.start_argv(wrapper, args);
    h
}

/// The same, for a daemon that is expected to exit: run to its end (a
/// minute at most), its output.
pub fn run_to_exit(
    ns: &Netns,
    image: &Image,
    ds: &DaemonSet,
    config: &str,
    vips: &str,
    env: &[(&str, &str)],
) -> Output {
    let (h, wrapper, args) = prepare(ns, image, ds, config, vips, env);
    let mut argv = vec!["timeout".to_owned(), "60".to_owned()];
    argv.extend(wrapper);
    argv.extend(args);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    // podman joins the namespace itself (--network ns:…): run from here,
    // where /sys and the cgroup mounts are the host's.
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .env("CONTAINERS_CONF", image.dir.join("containers.conf"))
        .output()
        .expect("podman run");
    drop(h);
    out
}

/// The daemon's files written and made readable to the pod's user, and
/// the `podman run` command line and the container's arguments.
fn prepare<'a>(
    ns: &'a Netns,
    image: &Image,
    ds: &DaemonSet,
    config: &str,
    vips: &str,
    env: &[(&str, &str)],
) -> (Holdfast<'a>, Vec<String>, Vec<String>) {
    let inside = config_mount(ds);
    let config = config.replace("VIPS", &format!("{inside}/vips.toml"));
    let name = format!("holdfast-{}", ns.name());
    let mut h = Holdfast::unstarted(ns, &config, vips);
    // The ConfigMap's files are readable by the pod's user; the directory
    // is searchable.
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(h.dir.path()).expect("the holdfast directory") {
        let p = entry.expect("an entry").path();
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::set_permissions(h.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (flags, args) = run_flags(ds, h.dir.path(), env);
    let mut wrapper = image.podman();
    wrapper.extend(
        [
            "run",
            "--rm",
            "--name",
            &name,
            "--network",
            &format!("ns:/run/netns/{}", ns.name()),
            "--stop-timeout",
            "10",
        ]
        .map(String::from),
    );
    wrapper.extend(flags);
    wrapper.push(image.name.clone());
    h.env.push((
        "CONTAINERS_CONF".into(),
        image.dir.join("containers.conf").display().to_string(),
    ));
    h.container = Some(crate::common::Container {
        podman: image.podman(),
        conf: image.dir.join("containers.conf"),
        name,
    });
    (h, wrapper, args)
}

pub use testlab::process::{cap_set, proc_status};

/// The kernel's capability numbers (linux/capability.h) of the names
/// Kubernetes uses.
pub fn cap_bits(names: &[String]) -> u64 {
    names
        .iter()
        .map(|n| match n.as_str() {
            "NET_BIND_SERVICE" => testlab::process::CAP_NET_BIND_SERVICE,
            "NET_RAW" => testlab::process::CAP_NET_RAW,
            other => panic!("capability {other}: add its number here"),
        })
        .sum()
}
