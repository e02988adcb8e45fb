//! `holdfast route announce|withdraw|list`: the runtime routes, through
//! the daemon's API (`POST /v1/routes/announce`, `/withdraw`, `GET
//! /v1/routes`) on its Unix socket by default, or over TCP with the token,
//! as `holdfast drain`. Exit 0 when the daemon took it; a refusal or an
//! unreachable daemon is an `Err` (exit 2).

use std::io::{self, Write};

use super::args::RouteAction;
use super::http;
use crate::report::status::RuntimeRoute;

pub fn run(action: RouteAction, mut out: impl Write) -> io::Result<i32> {
    let (target, method, path, json) = match action {
        RouteAction::Announce {
            prefix,
            advertisement,
            communities,
            large_communities,
            local_pref,
            med,
            as_path_prepend,
            at,
        } => {
            let mut query = vec![("prefix", prefix)];
            query.extend(advertisement.map(|a| ("advertisement", a)));
            query.extend(communities.into_iter().map(|c| ("community", c)));
            query.extend(
                large_communities
                    .into_iter()
                    .map(|c| ("large_community", c)),
            );
            query.extend(local_pref.map(|v| ("local_pref", v.to_string())));
            query.extend(med.map(|v| ("med", v.to_string())));
            query.extend(as_path_prepend.map(|v| ("as_path_prepend", v.to_string())));
            (
                at.target()?,
                "POST",
                format!("/v1/routes/announce?{}", encode(&query)),
                false,
            )
        }
        RouteAction::Withdraw { prefix, at } => (
            at.target()?,
            "POST",
            format!("/v1/routes/withdraw?{}", encode(&[("prefix", prefix)])),
            false,
        ),
        RouteAction::List { json, at } => (at.target()?, "GET", "/v1/routes".to_string(), json),
    };
    let resp = http::call(&target, method, &path)?;
    if resp.status != 200 {
        return Err(io::Error::other(format!(
            "holdfast at {target} answered {}: {}",
            resp.status,
            resp.error_message()
        )));
    }
    if json {
        out.write_all(&resp.body)?;
        writeln!(out)?;
        return Ok(0);
    }
    let routes: Vec<RuntimeRoute> = serde_json::from_slice(&resp.body).map_err(|e| {
        io::Error::other(format!(
            "holdfast at {target} sent an answer this holdfast cannot read ({e}); is it another version?"
        ))
    })?;
    if routes.is_empty() {
        writeln!(out, "no runtime routes")?;
    }
    for r in &routes {
        writeln!(out, "{}", words(r))?;
    }
    Ok(0)
}

/// One route in a line: `198.51.100.0/24 under public, communities 65000:1`.
pub fn words(r: &RuntimeRoute) -> String {
    let mut parts = vec![format!(
        "{} under {}",
        r.prefix,
        r.advertisement
            .as_deref()
            .unwrap_or("the first advertisement")
    )];
    if !r.communities.is_empty() {
        parts.push(format!("communities {}", r.communities.join(" ")));
    }
    if !r.large_communities.is_empty() {
        parts.push(format!(
            "large communities {}",
            r.large_communities.join(" ")
        ));
    }
    if let Some(v) = r.local_pref {
        parts.push(format!("local-pref {v}"));
    }
    if let Some(v) = r.med {
        parts.push(format!("med {v}"));
    }
    if let Some(v) = r.as_path_prepend {
        parts.push(format!("as-path-prepend {v}"));
    }
    parts.join(", ")
}

/// `key=value&…`, each value percent-encoded (RFC 3986 §2.1) but for the
/// unreserved characters and `:` and `/`, which a query may carry as
/// they are.
fn encode(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            let mut enc = String::with_capacity(v.len());
            for b in v.bytes() {
                if b.is_ascii_alphanumeric() || b"-._~:/".contains(&b) {
                    enc.push(b as char);
                } else {
                    enc.push_str(&format!("%{b:02X}"));
                }
            }
            format!("{k}={enc}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_encoded_and_a_route_reads_as_one_line() {
        assert_eq!(
            encode(&[
                ("prefix", "2001:db8::/64".into()),
                ("community", "a b&c".into())
            ]),
            "prefix=2001:db8::/64&community=a%20b%26c"
        );
        let r = RuntimeRoute {
            prefix: "198.51.100.0/24".into(),
            advertisement: Some("public".into()),
            communities: vec!["65000:1".into()],
            med: Some(5),
            ..RuntimeRoute::default()
        };
        assert_eq!(
            words(&r),
            "198.51.100.0/24 under public, communities 65000:1, med 5"
        );
    }
}
