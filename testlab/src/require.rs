//! Preconditions. A lab test that lacks root or a package fails with a message
//! that says how to fix it; it never skips.

use std::path::Path;

/// Panics unless the process runs as root (effective uid 0): namespaces,
/// veth pairs and the routers' privileged ports all need it.
pub fn require_root() {
    // /proc/self/status is the std-only way to read the effective uid.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .map(str::to_owned);
    if euid.as_deref() != Some("0") {
        panic!(
            "this test needs root (network namespaces, veth links, real routers): \
             run as root or via .ci/run (effective uid: {})",
            euid.as_deref().unwrap_or("unknown")
        );
    }
}

/// Panics unless every tool exists. A tool is an absolute path
/// (`/usr/lib/frr/bgpd`) or a command name looked up on `PATH` (`birdc`).
/// The message names the Debian package that provides it.
pub fn require_tools(tools: &[&str]) {
    let missing: Vec<String> = tools
        .iter()
        .filter(|tool| find_tool(tool).is_none())
        .map(|tool| format!("missing {tool}: apt-get install {}", package_of(tool)))
        .collect();
    if !missing.is_empty() {
        panic!(
            "this test needs tools that are not installed:\n  {}",
            missing.join("\n  ")
        );
    }
}

/// Where a tool lives, if it exists: the path itself when absolute, else the
/// first match on `PATH` (then /usr/sbin and /sbin, which a non-login root
/// shell may lack on `PATH`).
pub fn find_tool(tool: &str) -> Option<std::path::PathBuf> {
    let path = Path::new(tool);
    if path.is_absolute() {
        return path.is_file().then(|| path.to_path_buf());
    }
    let search = std::env::var("PATH").unwrap_or_default();
    search
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(tool))
        .find(|candidate| candidate.is_file())
}

fn package_of(tool: &str) -> &'static str {
    let name = tool.rsplit('/').next().unwrap_or(tool);
    match name {
        "bgpd" | "zebra" | "bfdd" | "vtysh" | "watchfrr" => "frr",
        "bird" | "birdc" => "bird2",
        "gobgpd" | "gobgp" => "gobgpd",
        "exabgp" | "exabgpcli" => "exabgp",
        "ip" | "tc" | "ss" => "iproute2",
        "sysctl" | "kill" => "procps",
        "python3" => "python3",
        "bash" => "bash",
        "timeout" => "coreutils",
        "mount" | "umount" => "mount",
        "jq" => "jq",
        _ => "(the package that provides it)",
    }
}
