//! Shared helpers for the corpus tests: where the corpora live.

use std::path::PathBuf;

/// `corpora/` at the repository root. A missing corpus fails the
/// test loudly: it is part of the checkout the project is built in.
pub fn corpora() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpora");
    assert!(
        dir.is_dir(),
        "the BGP corpora are missing: expected them at {} (corpora/ in the repository)",
        dir.display()
    );
    dir
}
