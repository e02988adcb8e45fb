//! `holdfast drain` and `holdfast undrain`: a planned withdrawal of this
//! node's routes through the daemon's API (`POST /v1/drain`,
//! `POST /v1/undrain`), on its Unix socket (`--state-dir DIR`, `--socket
//! PATH`) or over TCP with the token (`--api ADDR`, `--token-file PATH` or
//! `$HOLDFAST_API_TOKEN`). Exit 0 when the daemon took it; a refusal or an
//! unreachable daemon is an `Err` (exit 2).

use std::io::{self, Write};

use super::http;
use super::table::time_left;
use crate::report::status::DrainStatus;

/// The environment variable `holdfast drain --api` takes the token from
/// when `--token-file` is not given.
pub const TOKEN_ENV: &str = "HOLDFAST_API_TOKEN";

/// The token for `--api`: from `file` if given, else from `$HOLDFAST_API_TOKEN`
/// (`env`), else none; checked as the daemon checks `api_token_file`.
pub fn token(
    file: Option<&std::path::Path>,
    env: Option<std::ffi::OsString>,
) -> io::Result<Option<String>> {
    let token = match (file, env) {
        (Some(f), _) => crate::config::read_token_file(f)
            .map_err(|why| io::Error::other(format!("--token-file {} {why}", f.display())))?,
        (None, Some(v)) => crate::config::BearerToken::from_file_contents(v.as_encoded_bytes())
            .map_err(|why| io::Error::other(format!("${TOKEN_ENV} {why}")))?,
        (None, None) => return Ok(None),
    };
    // b64token characters only (RFC 6750 §2.1): ASCII.
    Ok(Some(String::from_utf8_lossy(token.as_bytes()).into_owned()))
}

pub fn run(api: &http::Target, on: bool, mut out: impl Write) -> io::Result<i32> {
    let path = if on { "/v1/drain" } else { "/v1/undrain" };
    let resp = http::call(api, "POST", path)?;
    if resp.status != 200 {
        return Err(io::Error::other(format!(
            "holdfast at {api} answered {}: {}",
            resp.status,
            resp.error_message()
        )));
    }
    let status: DrainStatus = serde_json::from_slice(&resp.body).map_err(|e| {
        io::Error::other(format!(
            "holdfast at {api} sent an answer this holdfast cannot read ({e}); is it another version?"
        ))
    })?;
    writeln!(out, "{}", drain_words(&status))?;
    Ok(0)
}

/// The drain in words, as `holdfast drain` and `holdfast status` say it.
pub fn drain_words(d: &DrainStatus) -> String {
    let exiting = if d.exiting {
        "; holdfast stops after that"
    } else {
        ""
    };
    match (d.state.as_str(), d.seconds_left) {
        ("draining", Some(left)) => format!(
            "draining: routes carry GRACEFUL_SHUTDOWN (65535:0), withdrawn in {}{exiting}",
            time_left(left)
        ),
        ("draining", None) => {
            format!("draining: routes carry GRACEFUL_SHUTDOWN (65535:0){exiting}")
        }
        ("drained", _) => {
            format!("drained: routes withdrawn (holdfast undrain brings them back){exiting}")
        }
        ("active", _) => "not draining: routes advertised normally".into(),
        (other, _) => format!("drain state {other}{exiting}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_in_words() {
        let d = |state: &str, left: Option<f64>, exiting: bool| DrainStatus {
            state: state.into(),
            seconds_left: left,
            exiting,
        };
        assert_eq!(
            drain_words(&d("draining", Some(11.2), false)),
            "draining: routes carry GRACEFUL_SHUTDOWN (65535:0), withdrawn in 12s"
        );
        assert_eq!(
            drain_words(&d("draining", Some(3.0), true)),
            "draining: routes carry GRACEFUL_SHUTDOWN (65535:0), withdrawn in 3s; holdfast stops after that"
        );
        assert_eq!(
            drain_words(&d("drained", None, false)),
            "drained: routes withdrawn (holdfast undrain brings them back)"
        );
        assert_eq!(
            drain_words(&d("active", None, false)),
            "not draining: routes advertised normally"
        );
    }
}
