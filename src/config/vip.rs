//! The VIP file read by `[source] kind = "file"`.
//!
//! ```toml
//! [[vip]]
//! address = "198.51.100.10"   # advertised as /32 (or /128 for IPv6)
//! service = "demo/web"        # optional, shown by status and explain
//! advertisement = "public"    # optional; default: the first [[advertisement]]
//! ```

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use toml::de::DeTable;

use super::Diagnostic;
use super::advertisement::DEFAULT_ADVERTISEMENT;
use super::diagnostic::Diagnostics;
use super::syntax_errors;
use super::tree::{self, Table};

/// One `[[vip]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipEntry {
    /// The address, advertised as a /32 or /128 host route.
    pub address: IpAddr,
    /// The Service it belongs to ("namespace/name"), for status and
    /// explain; free text.
    pub service: Option<String>,
    /// The `[[advertisement]]` it is advertised under (resolved: the first
    /// advertisement when the entry names none).
    pub advertisement: String,
}

/// Parses and checks a VIP file. `advertisement_names` are the config's
/// advertisements in order (see `Config::advertisement_names`); the first
/// is the default. An empty file is an empty set.
pub fn parse_vip_file(
    path: &Path,
    text: &str,
    advertisement_names: &[String],
) -> Result<Vec<VipEntry>, Vec<Diagnostic>> {
    let mut d = Diagnostics::new(path, text);
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        syntax_errors(&errors, &mut d);
        return Err(d.into_sorted());
    }
    let root = Table::root(root.get_ref());
    root.reject_unknown_keys(&["vip"], &mut d);

    let default_advertisement = advertisement_names
        .first()
        .map_or(DEFAULT_ADVERTISEMENT, String::as_str);
    let mut entries: Vec<VipEntry> = Vec::new();
    // Address → where it was first listed (byte offset). A map, not a
    // list searched per entry: that search made a 100k-VIP file cost
    // 5·10⁹ comparisons (9 s) before anything was advertised.
    let mut seen: HashMap<IpAddr, usize> = HashMap::new();
    if let Some(list) = root.get("vip") {
        // `vip = []` is as valid as no [[vip]] at all.
        let items = tree::array_of_tables(list, "vip", &mut d).unwrap_or_default();
        for item in items {
            let Some(table) =
                Table::from_value(item, "each [[vip]]", "[[vip]]".to_string(), &mut d)
            else {
                continue;
            };
            table.reject_unknown_keys(&["address", "service", "advertisement"], &mut d);
            let address = table.required("address", &mut d).and_then(|v| {
                let ip = tree::ip_address(v, "address", &mut d)?;
                if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
                    d.error(
                        &v.span(),
                        format!("VIP {ip} is not a routable unicast address"),
                    );
                    return None;
                }
                if let Some(&first) = seen.get(&ip) {
                    let first = d.line_of(first);
                    d.error(
                        &v.span(),
                        format!("duplicate VIP {ip} (first listed on line {first})"),
                    );
                    return None;
                }
                seen.insert(ip, v.span().start);
                Some(ip)
            });
            let service = match table.get("service") {
                None => Some(None),
                Some(v) => tree::string(v, "service", &mut d).map(|s| Some(s.to_string())),
            };
            let advertisement = match table.get("advertisement") {
                None => Some(default_advertisement.to_string()),
                Some(v) => tree::string(v, "advertisement", &mut d).and_then(|name| {
                    if advertisement_names.iter().any(|n| n == name) {
                        return Some(name.to_string());
                    }
                    let known: Vec<&str> = advertisement_names.iter().map(String::as_str).collect();
                    let hint = match tree::did_you_mean(name, &known) {
                        Some(s) => format!(" (did you mean \"{s}\"?)"),
                        None if known.is_empty() => String::new(),
                        None => format!("; the config defines {}", tree::quoted_list(&known)),
                    };
                    d.error(&v.span(), format!("unknown advertisement \"{name}\"{hint}"));
                    None
                }),
            };
            if let (Some(address), Some(service), Some(advertisement)) =
                (address, service, advertisement)
            {
                entries.push(VipEntry {
                    address,
                    service,
                    advertisement,
                });
            }
        }
    }
    if d.is_empty() {
        Ok(entries)
    } else {
        Err(d.into_sorted())
    }
}
