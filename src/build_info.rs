//! What this binary is: its version, the commit and date it was built
//! from, its target and what it was built with (`holdfast version`, the
//! `holdfast_build_info` metric, the start-up log line). build.rs gathers
//! them; two builds of one commit report the same.

use serde::Serialize;

/// The release (Cargo.toml's `version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit built, `-dirty` when the binary's sources differed from
/// it, `unknown` outside a repository without `$HOLDFAST_COMMIT`.
pub const COMMIT: &str = env!("HOLDFAST_COMMIT");
/// `$SOURCE_DATE_EPOCH` or the commit's time, RFC 3339 UTC: reproducible.
pub const BUILD_DATE: &str = env!("HOLDFAST_BUILD_DATE");
/// The Rust target triple.
pub const TARGET: &str = env!("HOLDFAST_TARGET");
/// Cargo's profile: `release` for what is shipped.
pub const PROFILE: &str = env!("HOLDFAST_PROFILE");
/// `rustc --version` of the compiler that built it.
pub const RUSTC: &str = env!("HOLDFAST_RUSTC");

/// The one line of `holdfast -V`.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("HOLDFAST_COMMIT"),
    " ",
    env!("HOLDFAST_BUILD_DATE"),
    " ",
    env!("HOLDFAST_TARGET"),
    ")"
);

/// The C library and how it is linked.
pub fn libc() -> &'static str {
    match (
        cfg!(target_env = "musl"),
        cfg!(target_feature = "crt-static"),
    ) {
        (true, true) => "musl, linked in (static)",
        (true, false) => "musl, shared",
        (false, true) => "glibc, linked in (static)",
        (false, false) => "glibc, shared",
    }
}

/// The memory allocator: holdfast uses the C library's malloc (no
/// allocator crate), with glibc's tuned at start (holdfast_sockopt::malloc).
pub fn allocator() -> &'static str {
    if cfg!(target_env = "musl") {
        "the C library's malloc (musl's mallocng)"
    } else {
        "the C library's malloc (glibc: mmap threshold fixed at 128 KiB, one arena)"
    }
}

/// Cargo features compiled in: holdfast has none; every protocol feature
/// is always built and switched on by configuration.
pub const FEATURES: &[&str] = &[];

/// Everything above, for `holdfast version --json`.
#[derive(Serialize)]
pub struct BuildInfo {
    pub version: &'static str,
    pub commit: &'static str,
    pub build_date: &'static str,
    pub target: &'static str,
    pub profile: &'static str,
    pub rustc: &'static str,
    pub libc: &'static str,
    pub allocator: &'static str,
    pub features: &'static [&'static str],
}

pub fn get() -> BuildInfo {
    BuildInfo {
        version: VERSION,
        commit: COMMIT,
        build_date: BUILD_DATE,
        target: TARGET,
        profile: PROFILE,
        rustc: RUSTC,
        libc: libc(),
        allocator: allocator(),
        features: FEATURES,
    }
}

/// `holdfast version` and `holdfast --version`: one field a line.
pub fn text() -> String {
    let b = get();
    let features = if b.features.is_empty() {
        "none (every protocol feature is built in; configuration switches it on)".to_owned()
    } else {
        b.features.join(", ")
    };
    format!(
        "holdfast {}\n\
         commit:     {}\n\
         build date: {}\n\
         target:     {} ({} profile)\n\
         libc:       {}\n\
         allocator:  {}\n\
         features:   {}\n\
         compiler:   {}\n",
        b.version,
        b.commit,
        b.build_date,
        b.target,
        b.profile,
        b.libc,
        b.allocator,
        features,
        b.rustc
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_is_named_by_commit_date_and_target() {
        // Built from this repository: a commit, not `unknown`.
        let hex = COMMIT.trim_end_matches("-dirty");
        assert!(
            hex.len() == 40 && hex.bytes().all(|c| c.is_ascii_hexdigit()),
            "{COMMIT}"
        );
        assert!(
            BUILD_DATE.ends_with('Z') && BUILD_DATE.len() == 20,
            "{BUILD_DATE}"
        );
        assert!(TARGET.contains("linux"), "{TARGET}");
        let t = text();
        for field in [
            "commit:",
            "build date:",
            "target:",
            "allocator:",
            "features:",
        ] {
            assert!(t.contains(field), "{t}");
        }
        assert!(VERSION_LINE.starts_with(VERSION) && VERSION_LINE.contains(COMMIT));
    }
}
