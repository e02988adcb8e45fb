//! Build settings of the `holdfast` binary: the link of the release build,
//! and what `holdfast version` reports about the build (src/build_info.rs).

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link/hot-text.ld");
    build_info();
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if !(release && linux) {
        return;
    }
    // The functions that run in normal operation, packed together at the
    // start of the code (scripts/hot-text.sh says why and regenerates it):
    // the kernel keeps code resident 64 KiB at a time.
    let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = Path::new(&dir).join("link/hot-text.ld");
    println!(
        "cargo:rustc-link-arg-bin=holdfast=-Wl,-T,{}",
        script.display()
    );
}

/// The commit, the build date and the compiler, as `HOLDFAST_*`
/// environment variables of the crate's compilation.
///
/// The commit is `git rev-parse HEAD` of the checkout, with `-dirty` when a
/// tracked file that goes into the binary differs from it; `$HOLDFAST_COMMIT`
/// takes its place where there is no repository (a source tarball, a
/// container build context without `.git`), else `unknown`. The date is
/// `$SOURCE_DATE_EPOCH` (reproducible-builds.org) when set, else the
/// commit's time: never the clock, so two builds of one commit are
/// identical.
fn build_info() {
    println!("cargo:rerun-if-env-changed=HOLDFAST_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    // What goes into the binary: a change there (or a new commit: HEAD and
    // the refs; not the index, which every `git add` rewrites and which
    // changes nothing `git status` compares against HEAD) runs this again.
    const INPUTS: [&str; 7] = [
        "src",
        "bgp-proto",
        "sockopt",
        "link",
        "build.rs",
        "Cargo.toml",
        "Cargo.lock",
    ];
    let commit = match env::var("HOLDFAST_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => match git(&["rev-parse", "HEAD"]) {
            Some(head) => {
                for input in INPUTS {
                    println!("cargo:rerun-if-changed={input}");
                }
                for name in ["HEAD", "packed-refs"] {
                    if let Some(p) = git(&["rev-parse", "--git-path", name]) {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
                if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
                    && let Some(p) = git(&["rev-parse", "--git-path", &r])
                {
                    println!("cargo:rerun-if-changed={p}");
                }
                let mut args = vec!["status", "--porcelain", "--untracked-files=no", "--"];
                args.extend(INPUTS);
                match git(&args) {
                    Some(changes) if changes.is_empty() => head,
                    _ => format!("{head}-dirty"),
                }
            }
            None => "unknown".into(),
        },
    };
    let epoch = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| git(&["log", "-1", "--format=%ct"]))
        .and_then(|s| s.trim().parse::<i64>().ok());
    let date = epoch.map_or_else(|| "unknown".into(), rfc3339);
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("cargo:rustc-env=HOLDFAST_COMMIT={commit}");
    println!("cargo:rustc-env=HOLDFAST_BUILD_DATE={date}");
    println!(
        "cargo:rustc-env=HOLDFAST_TARGET={}",
        env::var("TARGET").unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=HOLDFAST_PROFILE={}",
        env::var("PROFILE").unwrap_or_default()
    );
    println!("cargo:rustc-env=HOLDFAST_RUSTC={rustc}");
}

/// Seconds since the epoch as an RFC 3339 UTC time (civil date from day
/// count: H. Hinnant's algorithm).
fn rfc3339(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}
