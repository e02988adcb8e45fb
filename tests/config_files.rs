//! The config files shipped in `config/` and the bad-config fixtures under
//! `tests/fixtures/`, checked through the public API exactly as
//! `holdfast check` would report them.
//!
//! Paths are relative to the package root, which is where cargo runs
//! integration tests; the `.expected` files hold the very lines `holdfast
//! check --config tests/fixtures/bad-config/NAME.toml` prints from there.

use std::path::{Path, PathBuf};

use holdfast::config;

fn in_package_root() {
    assert!(
        Path::new("tests/fixtures/bad-config").is_dir() && Path::new("config").is_dir(),
        "these tests expect to run from the package root (as `cargo test` does); cwd is {:?}",
        std::env::current_dir()
    );
}

fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_config_checks_cleanly() {
    in_package_root();
    let configs = files_with_extension(Path::new("config"), "toml");
    let names: Vec<String> = configs
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for required in ["lab.toml", "rack-a.toml", "rack-b.toml"] {
        assert!(
            names.iter().any(|n| n == required),
            "config/{required} is missing"
        );
    }
    for path in &configs {
        let config = config::load(path).unwrap_or_else(|diags| {
            let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
            panic!(
                "{} does not check cleanly:\n{}",
                path.display(),
                lines.join("\n")
            )
        });
        // Nor with a warning: the examples are what operators copy.
        let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings.is_empty(),
            "{} has warnings:\n{}",
            path.display(),
            warnings.join("\n")
        );
        // A file source's VIP file must exist and fit the advertisements.
        if let Some(vips) = config.file_source() {
            let entries =
                holdfast::source::file::load_vip_file(vips, &config.vip_file_advertisements())
                    .unwrap_or_else(|diags| {
                        let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
                        panic!(
                            "{} is not a valid VIP file:\n{}",
                            vips.display(),
                            lines.join("\n")
                        )
                    });
            assert!(!entries.is_empty(), "{} lists no VIP", vips.display());
        }
    }
}

#[test]
fn rack_a_reads_its_example_password() {
    in_package_root();
    let config = config::load(Path::new("config/rack-a.toml")).expect("rack-a checks");
    for peer in &config.peers {
        assert_eq!(
            peer.md5_key(),
            Some(&b"example-only-not-a-secret"[..]),
            "{}",
            peer.name
        );
    }
}

/// Compares `load`'s diagnostics for a fixture with its `.expected` file.
fn check_fixture(name: &str) {
    in_package_root();
    let path = PathBuf::from(format!("tests/fixtures/bad-config/{name}.toml"));
    let expected_path = path.with_extension("expected");
    let actual: Vec<String> = match config::load(&path) {
        Ok(config) => panic!("{} was accepted: {config:#?}", path.display()),
        Err(diags) => diags.iter().map(ToString::to_string).collect(),
    };
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|err| {
        panic!(
            "cannot read {}: {err}\nactual output:\n{}",
            expected_path.display(),
            actual.join("\n")
        )
    });
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(
        actual,
        expected,
        "{} differs from {}",
        path.display(),
        expected_path.display()
    );
}

macro_rules! fixtures {
    ($($test:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_fixture($name);
            }
        )*
        const FIXTURES: &[&str] = &[$($name),*];
    };
}

fixtures! {
    fixture_syntax => "syntax",
    fixture_unknown_keys => "unknown-keys",
    fixture_missing_required => "missing-required",
    fixture_types => "types",
    fixture_timers => "timers",
    fixture_peers => "peers",
    fixture_password => "password",
    fixture_source => "source",
    fixture_source_kind => "source-kind",
    fixture_advertisements => "advertisements",
    fixture_damping => "damping",
    fixture_hints => "hints",
    fixture_addresses => "addresses",
    fixture_node_overrides => "node-overrides",
    fixture_unnumbered => "unnumbered",
    fixture_bfd_auth => "bfd-auth",
    fixture_http_probes => "http-probes",
    fixture_export_policy => "export-policy",
}

#[test]
fn every_fixture_has_a_test() {
    in_package_root();
    for path in files_with_extension(Path::new("tests/fixtures/bad-config"), "toml") {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        assert!(
            FIXTURES.contains(&stem.as_str()),
            "{} has no test: add it to fixtures! in {}",
            path.display(),
            file!()
        );
    }
}

#[test]
fn bad_vip_file_fixture() {
    in_package_root();
    let config = config::load(Path::new("config/lab.toml")).expect("lab checks");
    let path = Path::new("tests/fixtures/bad-vips/lab-vips.toml");
    let actual: Vec<String> =
        match holdfast::source::file::load_vip_file(path, &config.vip_file_advertisements()) {
            Ok(entries) => panic!("{} was accepted: {entries:?}", path.display()),
            Err(diags) => diags.iter().map(ToString::to_string).collect(),
        };
    let expected_path = path.with_extension("expected");
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|err| {
        panic!(
            "cannot read {}: {err}\nactual output:\n{}",
            expected_path.display(),
            actual.join("\n")
        )
    });
    assert_eq!(actual, expected.lines().collect::<Vec<_>>());
}
