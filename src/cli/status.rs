//! `holdfast status [--api ADDR] [--json]`: the peers and routes of a
//! running daemon, from its `/v1/status`. The peer table reads like FRR's
//! `show bgp summary`, with the state in place of the prefix count for a
//! session that is not Established.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::http;
use super::table::{Align, table, time_left, up_down};
use crate::report::status::{PeerStatus, ProbeStatus, RouteStatus, Status};

/// Fetches and prints; `json`: the API's JSON as it came. Exit code 0; a
/// daemon that cannot be reached or answers nonsense is an `Err` (exit 2).
pub fn run(api: &http::Target, json: bool, mut out: impl Write) -> io::Result<i32> {
    let resp = http::call(api, "GET", "/v1/status")?;
    if resp.status != 200 {
        return Err(io::Error::other(format!(
            "holdfast at {api} answered {}: {}",
            resp.status,
            resp.error_message()
        )));
    }
    if json {
        out.write_all(&resp.body)?;
        return Ok(0);
    }
    let status: Status = serde_json::from_slice(&resp.body).map_err(|e| {
        io::Error::other(format!(
            "holdfast at {api} sent a status this holdfast cannot read ({e}); \
             is it another version? `holdfast status --json` shows it as sent"
        ))
    })?;
    out.write_all(render_status(&status).as_bytes())?;
    Ok(0)
}

/// The whole `holdfast status` text.
pub fn render_status(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "holdfast {} on node {}, up {}",
        or_dash(&s.version),
        or_dash(&s.node),
        up_down(s.uptime_seconds)
    );
    let _ = writeln!(
        out,
        "BGP router identifier {}, local AS number {}",
        or_dash(&s.router_id),
        s.asn
    );
    if !s.config_path.is_empty() {
        let _ = writeln!(out, "config {}", s.config_path);
    }
    for o in &s.node_overrides {
        let _ = writeln!(out, "node override {o}");
    }
    if let Some(d) = &s.drain {
        let _ = writeln!(out, "{}", super::drain::drain_words(d));
    }
    if let Some(h) = &s.handoff {
        let _ = writeln!(out, "{}", handoff_words(h));
    }
    if let Some(e) = &s.config_error {
        let _ = writeln!(out, "config reload FAILED, running the previous config:");
        for line in e.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let src = &s.source;
    let health = if src.healthy {
        "healthy"
    } else {
        "UNHEALTHY (the last known VIPs stand)"
    };
    let synced = if src.synced {
        "synced"
    } else {
        "not synced yet"
    };
    let _ = writeln!(
        out,
        "source {}: {health}, {synced}, {} VIP{}",
        or_dash(&src.kind),
        src.vips,
        plural(src.vips as u64)
    );
    if let Some(e) = &src.error {
        let _ = writeln!(out, "source error: {}", one_line(e));
    }
    let c = &s.counters;
    let _ = writeln!(
        out,
        "routes advertised: {}, held down: {}",
        c.routes_advertised, c.routes_held_down
    );
    let _ = writeln!(
        out,
        "withdrawals absorbed by hold-down: {}",
        c.withdrawals_absorbed
    );
    let _ = writeln!(
        out,
        "absences absorbed by damping: {}, damping suppressions: {}",
        c.absences_absorbed_by_damping, c.damping_suppressions
    );
    let _ = writeln!(
        out,
        "route advertisements: {}, withdrawals: {}",
        c.advertisements, c.withdrawals
    );
    if c.withdrawals_deferred > 0 {
        let _ = writeln!(
            out,
            "mass-withdrawal guard: {} withdrawal{} deferred (stability.max_withdraw_fraction)",
            c.withdrawals_deferred,
            plural(c.withdrawals_deferred)
        );
    }
    out.push('\n');
    out.push_str(&render_peers(&s.peers));
    out.push('\n');
    out.push_str(&render_routes(&s.routes));
    // The API lists a page of routes at a time.
    if let (Some(total), Some(more)) = (s.routes_total, s.routes_truncated)
        && more > 0
    {
        let next = s.routes_offset.unwrap_or(0) + s.routes.len();
        let _ = writeln!(
            out,
            "… and {more} more route{} ({} of {total} shown); the API lists them page by page: /v1/status?offset={next}",
            plural(more as u64),
            s.routes.len()
        );
    }
    if !s.probes.is_empty() {
        out.push('\n');
        out.push_str(&render_probes(&s.probes));
        if let Some(more) = s.probes_not_listed {
            let _ = writeln!(
                out,
                "… and {more} more probe{} that do not pass",
                plural(more as u64)
            );
        }
    }
    out
}

/// The probes that do not pass: VIP, target, state and last error.
pub fn render_probes(probes: &[ProbeStatus]) -> String {
    let rows: Vec<Vec<String>> = probes
        .iter()
        .map(|p| {
            let state = match p.state.as_str() {
                "failing" => format!("failing, {} in a row", p.consecutive_failures),
                "not-passed-yet" => "not passed yet".to_string(),
                other => or_dash(other).to_string(),
            };
            vec![
                p.vip.clone(),
                p.target.clone(),
                state,
                p.last_error
                    .as_deref()
                    .map_or_else(|| "-".to_string(), one_line),
            ]
        })
        .collect();
    table(
        &[
            ("Probed VIP", Align::Left),
            ("Probe", Align::Left),
            ("State", Align::Left),
            ("Last error", Align::Left),
        ],
        &rows,
    )
}

/// The `show bgp summary` part.
pub fn render_peers(peers: &[PeerStatus]) -> String {
    if peers.is_empty() {
        return "No BGP peers configured.\n".into();
    }
    let rows: Vec<Vec<String>> = peers
        .iter()
        .map(|p| {
            let established = p.state == "Established";
            let up_down_cell = if established {
                up_down(p.uptime_seconds.unwrap_or(p.state_seconds))
            } else {
                p.down_seconds.map_or_else(|| "never".into(), up_down)
            };
            let state_cell = if established {
                p.prefixes_advertised_ipv4
                    .saturating_add(p.prefixes_advertised_ipv6)
                    .to_string()
            } else {
                or_dash(&p.state).to_string()
            };
            vec![
                p.name.clone(),
                p.address
                    .clone()
                    .unwrap_or_else(|| p.configured_address.clone()),
                // A flexible AS shows what the OPEN gave, and that it was
                // learned.
                match (p.configured_asn.as_str(), p.peer_asn) {
                    (how @ ("external" | "internal"), Some(asn)) => format!("{asn} ({how})"),
                    (how @ ("external" | "internal"), None) => format!("? ({how})"),
                    _ => p.asn.to_string(),
                },
                p.messages_received.to_string(),
                p.messages_sent.to_string(),
                up_down_cell,
                state_cell,
            ]
        })
        .collect();
    let mut out = table(
        &[
            ("Neighbor", Align::Left),
            ("Address", Align::Left),
            ("AS", Align::Right),
            ("MsgRcvd", Align::Right),
            ("MsgSent", Align::Right),
            ("Up/Down", Align::Right),
            ("State/PfxSnt", Align::Right),
        ],
        &rows,
    );
    let up = peers.iter().filter(|p| p.state == "Established").count();
    let _ = writeln!(
        out,
        "\nTotal number of neighbors {}, established {up}",
        peers.len()
    );
    for p in peers {
        if p.state != "Established"
            && let Some(e) = &p.last_error
        {
            let _ = writeln!(out, "{}: last error: {}", p.name, one_line(e));
        }
        if let Some(bfd) = &p.bfd
            && bfd.state != "Up"
        {
            let diag = bfd
                .last_diagnostic
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            let _ = writeln!(out, "{}: BFD {}{diag}", p.name, bfd.state);
        }
    }
    out
}

/// The route table: each prefix and where it stands.
pub fn render_routes(routes: &[RouteStatus]) -> String {
    if routes.is_empty() {
        return "No routes.\n".into();
    }
    let rows: Vec<Vec<String>> = routes
        .iter()
        .map(|r| {
            vec![
                r.prefix.clone(),
                route_state(r),
                r.service.clone().unwrap_or_else(|| "-".into()),
                if r.peers.is_empty() {
                    "-".into()
                } else {
                    r.peers.join(",")
                },
            ]
        })
        .collect();
    table(
        &[
            ("Route", Align::Left),
            ("State", Align::Left),
            ("Service", Align::Left),
            ("Peers", Align::Left),
        ],
        &rows,
    )
}

/// One route's state in words: "held down, withdraws in 12s".
pub fn route_state(r: &RouteStatus) -> String {
    let base = route_timer_state(r);
    match &r.steering {
        Some(s) => format!("{base} ({s})"),
        None => base,
    }
}

fn route_timer_state(r: &RouteStatus) -> String {
    let left = r.seconds_left.map(time_left);
    let absence = r.absence.as_deref().map(|a| a.replace('-', " "));
    match r.state.as_str() {
        "advertised" => "advertised".into(),
        "pending" => match left {
            Some(t) => format!("pending, advertises in {t}"),
            None => "pending".into(),
        },
        // No timer: the source is unhealthy, and an unhealthy source never
        // causes a withdrawal.
        "held-down" => match left {
            Some(t) => format!("held down, withdraws in {t}"),
            None => "held down, no withdrawal while the source is unhealthy".into(),
        },
        "damped" => {
            let fom = r
                .figure_of_merit
                .map(|f| format!(", figure of merit {f:.0}"))
                .unwrap_or_default();
            let until = left
                .map(|t| format!(", withdraws in about {t}"))
                .unwrap_or_default();
            format!("damped{fom}{until}")
        }
        "deferred" => {
            let why = absence.map(|a| format!(" ({a})")).unwrap_or_default();
            format!("deferred{why}: the mass-withdrawal guard paces its withdrawal")
        }
        "draining" => {
            let why = absence.map(|a| format!(" ({a})")).unwrap_or_default();
            match left {
                Some(t) => format!("draining{why}, withdraws in {t}"),
                None => format!("draining{why}"),
            }
        }
        other => {
            let why = absence.map(|a| format!(" ({a})")).unwrap_or_default();
            format!("{}{why}", or_dash(other))
        }
    }
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Multi-line errors on one line of a table or header.
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;

/// The line of `holdfast status` on the hand-off this daemon received.
fn handoff_words(h: &crate::report::status::HandoffStatus) -> String {
    let mut line = format!(
        "took over from the previous holdfast at start ({})",
        h.result
    );
    if let Some(ms) = h.pause_milliseconds {
        let _ = write!(line, ", sessions paused {ms} ms");
    }
    if let Some(why) = &h.reason {
        let _ = write!(line, ": {why}");
    }
    line
}
