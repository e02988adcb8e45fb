//! Link settings of the `holdfast` binary's release build.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link/hot-text.ld");
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
