//! `holdfast check --config PATH`: every problem as `PATH:LINE:COL:
//! message`, exit 1; or exit 0. For a file source, the VIP file is checked
//! too, since a daemon started with a broken one would keep nothing.
//!
//! `--skip-password-files` checks a config away from the node it is meant
//! for (a laptop, CI, a GitOps repository) where the keys its
//! `password_file`s and `bfd.key_file`s name are not present: each path is
//! still checked for form, the file is not read.

use std::io::Write;
use std::path::Path;

use crate::config::{self, Source};

pub fn run(path: &Path, skip_password_files: bool, mut out: impl Write) -> std::io::Result<i32> {
    let loaded = if skip_password_files {
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
    if let Source::File { path: vips } = &config.source
        && let Err(diags) = config::load_vip_file(vips, &config.advertisement_names())
    {
        writeln!(out, "{}", config::list_diagnostics(&diags))?;
        return Ok(1);
    }
    Ok(0)
}
