//! `holdfast check --config PATH`: every problem as `PATH:LINE:COL:
//! message`, exit 1; or exit 0. For a file source, the VIP file is checked
//! too, since a daemon started with a broken one would keep nothing.

use std::io::Write;
use std::path::Path;

use crate::config::{self, Source};

pub fn run(path: &Path, mut out: impl Write) -> std::io::Result<i32> {
    let config = match config::load(path) {
        Ok(c) => c,
        Err(diags) => {
            for d in diags {
                writeln!(out, "{d}")?;
            }
            return Ok(1);
        }
    };
    if let Source::File { path: vips } = &config.source
        && let Err(diags) = config::load_vip_file(vips, &config.advertisement_names())
    {
        for d in diags {
            writeln!(out, "{d}")?;
        }
        return Ok(1);
    }
    Ok(0)
}
