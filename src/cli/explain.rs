//! `holdfast explain VIP [--api ADDR] [--json]`: why this node does or
//! does not advertise VIP, from the daemon's `/v1/explain/{vip}`. Exit 0
//! when it is advertised, 1 when it is not, 2 on errors.

use std::io::{self, Write};

use super::http;
use super::table::{Align, table};
use crate::api::parse_vip;
use crate::report::status::Explanation;

/// `json`: the API's JSON as it came (the exit code still says whether the
/// VIP is advertised).
pub fn run(api: &http::Target, vip: &str, json: bool, mut out: impl Write) -> io::Result<i32> {
    // Checked here too, so a typo is reported without a daemon.
    let ip = parse_vip(vip).map_err(io::Error::other)?;
    let resp = http::call(api, "GET", &format!("/v1/explain/{ip}"))?;
    if resp.status != 200 {
        return Err(io::Error::other(format!(
            "holdfast at {api} answered {}: {}",
            resp.status,
            resp.error_message()
        )));
    }
    let explanation: Explanation = serde_json::from_slice(&resp.body).map_err(|e| {
        io::Error::other(format!(
            "holdfast at {api} sent an explanation this holdfast cannot read ({e}); \
             is it another version?"
        ))
    })?;
    if json {
        out.write_all(&resp.body)?;
        if !resp.body.ends_with(b"\n") {
            out.write_all(b"\n")?;
        }
    } else {
        out.write_all(render_explanation(&explanation).as_bytes())?;
    }
    Ok(if explanation.advertised { 0 } else { 1 })
}

/// The explanation in plain words: the summary, every reason, one line per
/// peer.
pub fn render_explanation(e: &Explanation) -> String {
    let mut out = String::new();
    if e.summary.is_empty() {
        let verdict = if e.advertised {
            "is advertised"
        } else {
            "is not advertised"
        };
        out.push_str(&format!("{} {verdict}.\n", e.vip));
    } else {
        out.push_str(e.summary.trim_end());
        out.push('\n');
    }
    if !e.reasons.is_empty() {
        out.push_str("\nBecause:\n");
        for r in &e.reasons {
            // A reason of several lines keeps its lines under its bullet.
            let mut lines = r.lines();
            out.push_str(&format!("  - {}\n", lines.next().unwrap_or("")));
            for more in lines {
                out.push_str(&format!("    {more}\n"));
            }
        }
    }
    out.push_str("\nPeers:\n");
    if e.peers.is_empty() {
        out.push_str("  none configured\n");
        return out;
    }
    let rows: Vec<Vec<String>> = e
        .peers
        .iter()
        .map(|p| {
            let verdict = if p.advertised {
                "advertised"
            } else {
                "not advertised"
            };
            vec![
                format!("  {}", p.peer),
                verdict.into(),
                reason_beside(verdict, &p.why),
            ]
        })
        .collect();
    // The table's header row is not wanted here: drop its first line
    // (and the padding a row with an empty last cell would keep).
    let t = table(
        &[("", Align::Left), ("", Align::Left), ("", Align::Left)],
        &rows,
    );
    for line in t.lines().skip(1) {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A peer's reason on one line, without the verdict its column already
/// shows: the daemon words a reason as "not advertised: the session is
/// Active", and "advertised" alone when there is nothing more to say.
fn reason_beside(verdict: &str, why: &str) -> String {
    let why = why.trim();
    let why = match why.strip_prefix(verdict) {
        Some(rest) if rest.is_empty() => rest,
        Some(rest) if rest.starts_with(':') => rest[1..].trim_start(),
        _ => why,
    };
    why.replace('\n', "; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::status::PeerExplanation;

    #[test]
    fn renders_summary_reasons_and_peers() {
        let e = Explanation {
            vip: "198.51.100.10".into(),
            advertised: true,
            summary: "198.51.100.10 is advertised to tor1 but not to tor2.".into(),
            reasons: vec![
                "the VIP file lists it (service demo/web)".into(),
                "advertisement \"public\" covers it:\ncommunities 65001:100".into(),
            ],
            peers: vec![
                PeerExplanation {
                    peer: "tor1".into(),
                    advertised: true,
                    why: "in its Adj-RIB-Out since 10:00:00".into(),
                },
                PeerExplanation {
                    peer: "tor2-long-name".into(),
                    advertised: false,
                    why: "the session is Active".into(),
                },
            ],
        };
        assert_eq!(
            render_explanation(&e),
            "198.51.100.10 is advertised to tor1 but not to tor2.\n\
             \n\
             Because:\n\
             \x20 - the VIP file lists it (service demo/web)\n\
             \x20 - advertisement \"public\" covers it:\n\
             \x20   communities 65001:100\n\
             \n\
             Peers:\n\
             \x20 tor1            advertised      in its Adj-RIB-Out since 10:00:00\n\
             \x20 tor2-long-name  not advertised  the session is Active\n"
        );
    }

    #[test]
    fn the_verdict_is_not_repeated_in_the_reason() {
        let peer = |name: &str, advertised: bool, why: &str| PeerExplanation {
            peer: name.into(),
            advertised,
            why: why.into(),
        };
        let e = Explanation {
            vip: "198.51.100.20".into(),
            advertised: true,
            summary: "198.51.100.20 is advertised to tor1.".into(),
            reasons: vec![],
            peers: vec![
                peer("tor1", true, "advertised"),
                peer(
                    "tor2",
                    false,
                    "not advertised: the session is Active, not Established",
                ),
                peer("tor3", false, "not advertised"),
            ],
        };
        assert_eq!(
            render_explanation(&e),
            "198.51.100.20 is advertised to tor1.\n\
             \n\
             Peers:\n\
             \x20 tor1  advertised\n\
             \x20 tor2  not advertised  the session is Active, not Established\n\
             \x20 tor3  not advertised\n"
        );
    }

    #[test]
    fn an_empty_explanation_still_says_something() {
        let e = Explanation {
            vip: "2001:db8::10".into(),
            ..Default::default()
        };
        assert_eq!(
            render_explanation(&e),
            "2001:db8::10 is not advertised.\n\nPeers:\n  none configured\n"
        );
    }
}
