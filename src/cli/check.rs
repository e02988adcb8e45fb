//! `holdfast check --config PATH`: every problem as `PATH:LINE:COL:
//! message`, exit 1; every warning as `PATH:LINE:COL: warning: message`,
//! exit 0 (1 with `--deny-warnings`); or nothing, exit 0. Both go to
//! standard output, in file order. For a file source, the VIP file is
//! checked too, since a daemon started with a broken one would keep
//! nothing.
//!
//! `--config -` reads the config from standard input; its diagnostics
//! name it `<stdin>`, and relative paths in it (`password_file`, the VIP
//! file) are taken from the current directory.
//!
//! `--skip-password-files` checks a config away from the node it is meant
//! for (a laptop, CI, a GitOps repository) where the keys its
//! `password_file`s and `bfd.key_file`s name are not present: each path is
//! still checked for form, the file is not read.

use std::io::{Read, Write};
use std::path::Path;

use crate::config::{self, Diagnostic, Severity};

/// The name a config read from standard input has in diagnostics.
pub const STDIN_NAME: &str = "<stdin>";

/// What `check` is asked to do.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Do not read the `password_file`s.
    pub skip_password_files: bool,
    /// Exit 1 on warnings too.
    pub deny_warnings: bool,
}

/// Checks the config at `path` (`-`: read from `stdin`), printing to `out`;
/// the exit code.
pub fn run(
    path: &Path,
    opts: Options,
    stdin: impl Read,
    mut out: impl Write,
) -> std::io::Result<i32> {
    let loaded = if path == Path::new("-") {
        let name = Path::new(STDIN_NAME);
        read_stdin(stdin).and_then(|text| {
            if opts.skip_password_files {
                config::parse(name, &text)
            } else {
                config::parse_reading_passwords(name, &text)
            }
        })
    } else if opts.skip_password_files {
        config::read_text(path, "config file", config::MAX_CONFIG_LEN)
            .and_then(|text| config::parse(path, &text))
    } else {
        config::load(path)
    };
    let config = match loaded {
        Ok(c) => c,
        Err(diags) => {
            writeln!(out, "{}", config::list_diagnostics(&diags))?;
            return Ok(1);
        }
    };
    if let Some(vips) = config.file_source()
        && let Err(diags) =
            crate::source::file::load_vip_file(vips, &config.vip_file_advertisements())
    {
        let mut all = config.warnings.clone();
        all.extend(diags);
        writeln!(out, "{}", config::list_diagnostics(&all))?;
        return Ok(1);
    }
    if !config.warnings.is_empty() {
        writeln!(out, "{}", config::list_diagnostics(&config.warnings))?;
        if opts.deny_warnings {
            return Ok(1);
        }
    }
    Ok(0)
}

/// Standard input, with the config file's limits: at most
/// [`config::MAX_CONFIG_LEN`] bytes of UTF-8.
fn read_stdin(stdin: impl Read) -> Result<String, Vec<Diagnostic>> {
    let failure = |message: String| {
        vec![Diagnostic {
            path: STDIN_NAME.into(),
            line: 1,
            col: 1,
            message,
            severity: Severity::Error,
        }]
    };
    let limit = config::MAX_CONFIG_LEN;
    let mut bytes = Vec::new();
    stdin
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failure(format!("cannot read the config from standard input: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(failure(format!(
            "the config on standard input is larger than {limit} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|err| {
        failure(format!(
            "the config is not valid UTF-8 (TOML must be UTF-8): invalid byte at offset {}",
            err.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &[u8], opts: Options) -> (i32, String) {
        let mut out = Vec::new();
        let code = run(Path::new("-"), opts, text, &mut out).expect("check runs");
        (code, String::from_utf8(out).expect("UTF-8 output"))
    }

    const VALID: &str = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n[[peer]]\nname = \"tor\"\naddress = \"192.0.2.1\"\nasn = 65000\n\n[source]\nkind = \"kubernetes\"\n";

    #[test]
    fn reads_the_config_from_standard_input() {
        assert_eq!(
            check(VALID.as_bytes(), Options::default()),
            (0, String::new())
        );
        let bad = VALID.replace("asn = 65000", "asn = 0");
        let (code, out) = check(bad.as_bytes(), Options::default());
        assert_eq!(code, 1);
        assert_eq!(out, "<stdin>:8:7: asn must be in 1..=4294967295, got 0\n");
    }

    #[test]
    fn warnings_exit_zero_unless_denied() {
        let text = VALID.replace(
            "asn = 65000",
            "asn = 65000\nhold_time = \"9s\"\nkeepalive = \"9s\"",
        );
        let (code, out) = check(text.as_bytes(), Options::default());
        assert_eq!(code, 0, "{out}");
        assert!(
            out.starts_with("<stdin>:10:13: warning: keepalive (9s) equals hold_time (9s)"),
            "{out}"
        );
        let deny = Options {
            deny_warnings: true,
            ..Options::default()
        };
        assert_eq!(check(text.as_bytes(), deny), (1, out));
    }

    #[test]
    fn standard_input_has_the_config_file_limits() {
        let huge = vec![b'#'; usize::try_from(config::MAX_CONFIG_LEN).unwrap() + 1];
        let (code, out) = check(&huge, Options::default());
        assert_eq!(code, 1);
        assert!(
            out.starts_with("<stdin>:1:1: the config on standard input is larger than"),
            "{out}"
        );
        let (code, out) = check(b"[speaker]\xff", Options::default());
        assert_eq!(code, 1);
        assert!(out.contains("not valid UTF-8"), "{out}");
    }
}
