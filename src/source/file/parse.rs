//! The VIP file read by `[source] kind = "file"`.
//!
//! ```toml
//! [[vip]]
//! address = "198.51.100.10"   # advertised as /32 (or /128 for IPv6)
//! service = "demo/web"        # optional, shown by status and explain
//! advertisement = "public"    # optional; default: the first [[advertisement]]
//! ```
//!
//! An IPv4-mapped address (`::ffff:198.51.100.10`) is the IPv4 VIP
//! (crate::model::net): a generator that writes dual-stack socket addresses gets
//! its /32, and the two spellings of one VIP are a duplicate.
//!
//! An entry whose advertisement (named, or the default) has `vip_ranges`
//! that do not hold its address is an error, as an unknown advertisement
//! is: the file is not used.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use toml::de::DeTable;

use crate::config::advertisement::DEFAULT_ADVERTISEMENT;
use crate::config::diagnostic::Diagnostics;
use crate::config::schema::{DefaultValue, Key, Range, Section};
use crate::config::syntax_errors;
use crate::config::tree::{self, Table};
use crate::config::vip_range::format_ranges;
use crate::config::{Diagnostic, VipFileAdvertisement};

/// Why `ip` may not be advertised under `advertisement` (`defaulted`: the
/// entry named none, so it is the first).
fn outside_ranges(ip: IpAddr, advertisement: &VipFileAdvertisement, defaulted: bool) -> String {
    format!(
        "VIP {ip} is not in the vip_ranges {} of advertisement \"{}\"{}",
        format_ranges(advertisement.vip_ranges.as_deref().unwrap_or_default()),
        advertisement.name,
        if defaulted {
            " (the default: the entry names no advertisement)"
        } else {
            ""
        }
    )
}

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
    /// The `[[tenant]]` it belongs to, if the entry names one.
    pub tenant: Option<String>,
}

/// The keys of the VIP file's top level.
pub(crate) const FILE_KEYS: &[Key] = &[Key {
    name: "vip",
    kind: "array of tables",
    default: DefaultValue::Text("`[]`"),
    range: Range::Any,
    meaning: "One `[[vip]]` table per VIP.",
}];

/// The keys of one `[[vip]]`.
pub(crate) const VIP_KEYS: &[Key] = &[
    Key {
        name: "address",
        kind: "IP address",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "The VIP; unique in the file; not unspecified, loopback or multicast. An IPv4-mapped address (`::ffff:198.51.100.10`) is the IPv4 VIP (and a duplicate of `198.51.100.10`).",
    },
    Key {
        name: "service",
        kind: "string",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "Free text naming the Service, for status and explain.",
    },
    Key {
        name: "advertisement",
        kind: "string",
        default: DefaultValue::Text("the first `[[advertisement]]` (or `\"default\"`)"),
        range: Range::Any,
        meaning: "Which advertisement's peers and attributes apply; must name one the config defines.",
    },
    Key {
        name: "tenant",
        kind: "string",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "The `[[tenant]]` this VIP belongs to: it reaches only the tenant's peers. A name the config does not define reaches no peer (`explain` says so).",
    },
];

/// The reference's section for a `[[vip]]`.
pub(crate) const VIP_SECTION: Section = Section {
    title: "The VIP file: `[[vip]]`",
    intro: "With `[source] kind = \"file\"`, the VIPs come from the TOML file `source.path` names: one `[[vip]]` table per VIP. An empty file, or one without `[[vip]]`, is a valid empty set; unknown keys are errors.",
    keys: VIP_KEYS,
};

/// Parses and checks a VIP file. `advertisements` are the config's
/// advertisements in order (see `Config::vip_file_advertisements`); the
/// first is the default. An empty file is an empty set.
pub fn parse_vip_file(
    path: &Path,
    text: &str,
    advertisements: &[VipFileAdvertisement],
) -> Result<Vec<VipEntry>, Vec<Diagnostic>> {
    parse_vip_file_into(
        path,
        text,
        advertisements,
        |address, service, advertisement, tenant| VipEntry {
            address,
            service: service.map(str::to_string),
            advertisement: advertisement.to_string(),
            tenant: tenant.map(str::to_string),
        },
    )
}

/// [`parse_vip_file`], each entry made by `make` from its address, Service
/// and advertisement as it is read: the caller's own record, without a
/// [`VipEntry`] (and its two strings) per entry in between. A file of 100k
/// VIPs held that list, its strings and the caller's records at once.
pub fn parse_vip_file_into<T>(
    path: &Path,
    text: &str,
    advertisements: &[VipFileAdvertisement],
    mut make: impl FnMut(IpAddr, Option<&str>, &str, Option<&str>) -> T,
) -> Result<Vec<T>, Vec<Diagnostic>> {
    if let Some(entries) = plain::parse(text, advertisements, &mut make) {
        return Ok(entries);
    }
    Ok(parse_toml(path, text, advertisements)?
        .into_iter()
        .map(|e| {
            make(
                e.address,
                e.service.as_deref(),
                &e.advertisement,
                e.tenant.as_deref(),
            )
        })
        .collect())
}

/// Whether a VIP can be advertised as a host route: not unspecified,
/// multicast or loopback (both parsers apply this one rule).
fn routable_unicast(ip: IpAddr) -> bool {
    !(ip.is_unspecified() || ip.is_multicast() || ip.is_loopback())
}

/// [`parse_vip_file`] through the TOML parser, which keeps the span of
/// every key and value for diagnostics: a table of a kilobyte per
/// `[[vip]]`.
fn parse_toml(
    path: &Path,
    text: &str,
    advertisements: &[VipFileAdvertisement],
) -> Result<Vec<VipEntry>, Vec<Diagnostic>> {
    let mut d = Diagnostics::new(path, text);
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        syntax_errors(&errors, &mut d);
        return Err(d.into_sorted());
    }
    let root = Table::root(root.get_ref());
    root.reject_unknown_keys(FILE_KEYS, &mut d);

    let first = advertisements.first();
    let default_advertisement = first.map_or(DEFAULT_ADVERTISEMENT, |a| a.name.as_str());
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
            table.reject_unknown_keys(VIP_KEYS, &mut d);
            let address = table.required("address", &mut d).and_then(|v| {
                let ip = crate::model::net::unmap(tree::ip_address(v, "address", &mut d)?);
                if !routable_unicast(ip) {
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
            let tenant = match table.get("tenant") {
                None => Some(None),
                Some(v) => tree::string(v, "tenant", &mut d).and_then(|t| {
                    if let Some(why) = crate::config::name_problem(t) {
                        d.error(&v.span(), format!("tenant name \"{t}\" {why}"));
                        return None;
                    }
                    Some(Some(t.to_string()))
                }),
            };
            let advertisement = match table.get("advertisement") {
                None => Some(default_advertisement.to_string()),
                Some(v) => tree::string(v, "advertisement", &mut d).and_then(|name| {
                    if advertisements.iter().any(|a| a.name == name) {
                        return Some(name.to_string());
                    }
                    let known: Vec<&str> = advertisements.iter().map(|a| a.name.as_str()).collect();
                    let hint = match tree::did_you_mean(name, &known) {
                        Some(s) => format!(" (did you mean \"{s}\"?)"),
                        None if known.is_empty() => String::new(),
                        None => format!("; the config defines {}", tree::quoted_list(&known)),
                    };
                    d.error(&v.span(), format!("unknown advertisement \"{name}\"{hint}"));
                    None
                }),
            };
            if let (Some(address), Some(service), Some(advertisement), Some(tenant)) =
                (address, service, advertisement, tenant)
            {
                let named = table.get("advertisement").is_some();
                if let Some(a) = advertisements.iter().find(|a| a.name == advertisement)
                    && !a.allows(address)
                {
                    let at = table.get("address").map_or(table.span(), |v| v.span());
                    d.error(&at, outside_ranges(address, a, !named));
                    continue;
                }
                entries.push(VipEntry {
                    address,
                    service,
                    advertisement,
                    tenant,
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

/// The fast path for VIP files as people and tools write them: only
/// `[[vip]]` headers, `key = "string"` lines, comments and blank lines,
/// every entry valid.
///
/// The TOML parser keeps a B-tree table of about a kilobyte per `[[vip]]`
/// with the span of every key and value, which diagnostics need: 190 MB at
/// its peak for a file of 100k VIPs, which the allocator then keeps. A
/// valid file needs no diagnostics, so this reads it line by line into the
/// entries directly. It answers `None` at the first thing it does not
/// fully understand (any other TOML syntax: escapes, literal or multi-line
/// strings, dotted or quoted keys, inline tables; a control character) and
/// at anything invalid (a missing address, an unknown key or
/// advertisement, a duplicate, an address that is not a routable unicast
/// address): the TOML parser then reads the file and reports exactly as
/// before. So it changes how fast a file is read, never what it means.
mod plain {
    use super::{DEFAULT_ADVERTISEMENT, VipFileAdvertisement};
    use std::collections::HashSet;
    use std::net::IpAddr;

    #[derive(Default)]
    struct Partial<'t> {
        address: Option<&'t str>,
        service: Option<&'t str>,
        advertisement: Option<&'t str>,
        tenant: Option<&'t str>,
    }

    /// The addresses read so far, to refuse a duplicate. A file in address
    /// order (generated ones are) needs only the last: an address above it
    /// is new. A file out of order is read again with a set of them all
    /// (hashing 100k addresses was a sixth of the load's parse, and keeping
    /// a list of them in case one came out of order was 1.7 MB).
    enum Seen {
        /// Every address so far was above the one before; the last.
        Ordered(Option<IpAddr>),
        /// Every address so far.
        Set(HashSet<IpAddr>),
    }

    /// Whether an address is new (noted), a duplicate, or out of the
    /// order an [`Seen::Ordered`] reading relies on.
    enum Novelty {
        New,
        Duplicate,
        OutOfOrder,
    }

    impl Seen {
        fn note(&mut self, address: IpAddr) -> Novelty {
            match self {
                Seen::Set(set) => {
                    if set.insert(address) {
                        Novelty::New
                    } else {
                        Novelty::Duplicate
                    }
                }
                Seen::Ordered(last) if last.is_none_or(|last| last < address) => {
                    *last = Some(address);
                    Novelty::New
                }
                Seen::Ordered(_) => Novelty::OutOfOrder,
            }
        }
    }

    /// `a.b.c.d` in the strict form std's parser accepts (four decimal
    /// octets up to 255, no leading zero but in `0`), read directly: std's
    /// general parser was an eighth of this parser's time with 100k VIPs.
    /// `None` for anything else, which std's parser then judges.
    fn dotted_quad(bytes: &[u8]) -> Option<std::net::Ipv4Addr> {
        let mut octets = [0u8; 4];
        let mut i = 0;
        for (n, octet) in octets.iter_mut().enumerate() {
            if n > 0 {
                if bytes.get(i) != Some(&b'.') {
                    return None;
                }
                i += 1;
            }
            let start = i;
            let mut value = 0u16;
            while let Some(d) = bytes.get(i).filter(|d| d.is_ascii_digit() && i - start < 3) {
                value = value * 10 + u16::from(d - b'0');
                i += 1;
            }
            let digits = i - start;
            if digits == 0 || (digits > 1 && bytes[start] == b'0') {
                return None;
            }
            *octet = u8::try_from(value).ok()?;
        }
        (i == bytes.len()).then(|| octets.into())
    }

    /// TOML's blanks: space and tab.
    fn blank(b: u8) -> bool {
        b == b' ' || b == b'\t'
    }

    fn trim_blanks_start(s: &str) -> &str {
        let n = s.bytes().take_while(|&b| blank(b)).count();
        &s[n..]
    }

    fn trim_blanks_end(s: &str) -> &str {
        let n = s.bytes().rev().take_while(|&b| blank(b)).count();
        &s[..s.len() - n]
    }

    /// A basic string `"…"` without escapes, then nothing but blanks and
    /// an optional comment.
    fn string_value(rest: &str) -> Option<&str> {
        let rest = rest.strip_prefix('"')?;
        // Up to the closing quote; an escape leaves the file to the TOML
        // parser.
        let end = rest
            .bytes()
            .position(|b| b == b'"' || b == b'\\')
            .filter(|&i| rest.as_bytes()[i] == b'"')?;
        let (value, after) = (&rest[..end], trim_blanks_start(&rest[end + 1..]));
        (after.is_empty() || after.starts_with('#')).then_some(value)
    }

    /// Whether `line` (without its `\n`, or its `\r\n`) holds a control
    /// character TOML allows in no such file: any but tab. Counted over
    /// the whole line rather than stopping at the first, so that the loop
    /// has no branch and is vectorised.
    fn has_control(line: &[u8]) -> bool {
        line.iter().fold(false, |bad, &b| {
            bad | ((b < 0x20) & (b != b'\t')) | (b == 0x7f)
        })
    }

    /// Each line of `text`, without its `\n` or `\r\n`, to `each`. `None`
    /// — the TOML parser judges the file — at a control character TOML
    /// allows in no such file (any but tab, and a carriage return that
    /// does not end a line), or when `each` gives up. The ends of lines
    /// are found with `memchr` and each line is checked in one branch-free
    /// pass: a loop over the bytes that looked at each one in turn was
    /// half of this reader's time with 100k VIPs.
    fn each_line<'t>(text: &'t str, mut each: impl FnMut(&'t str) -> Option<()>) -> Option<()> {
        let bytes = text.as_bytes();
        let mut start = 0;
        loop {
            let newline = memchr::memchr(b'\n', &bytes[start..]).map(|i| start + i);
            let end = newline.unwrap_or(bytes.len());
            let line = &bytes[start..end];
            let body = line.strip_suffix(b"\r").unwrap_or(line);
            if has_control(body) {
                return None;
            }
            each(&text[start..start + body.len()])?;
            match newline {
                Some(newline) => start = newline + 1,
                None => return Some(()),
            }
        }
    }

    /// How an entry begins in the shape generators write.
    const PLAIN_HEAD: &[u8] = b"[[vip]]\naddress = \"";

    /// The entry at the start of `bytes` when it has exactly the shape
    /// generators write — `[[vip]]`, then `address = "a.b.c.d"`, each line
    /// ended by `\n`, and then the next `[[vip]]` or the end of the file —
    /// and its length. `None` for any other shape (a blank, a comment, a
    /// Service or advertisement key, CRLF, IPv6, an address std would not
    /// read), which the line reader then reads: this changes how fast such
    /// an entry is read, never what it means.
    fn plain_entry(bytes: &[u8]) -> Option<(std::net::Ipv4Addr, usize)> {
        let rest = bytes.strip_prefix(PLAIN_HEAD)?;
        // "255.255.255.255" is fifteen characters.
        let close = rest.iter().take(16).position(|&b| b == b'"')?;
        let address = dotted_quad(&rest[..close])?;
        let after = rest[close..].strip_prefix(b"\"\n")?;
        // A line after it that is not a header could be one of its keys;
        // a line that begins with `[[vip]]` ends it or sends the file to
        // the TOML parser.
        (after.is_empty() || after.starts_with(b"[[vip]]"))
            .then_some((address, bytes.len() - after.len()))
    }

    pub(super) fn parse<T>(
        text: &str,
        advertisements: &[VipFileAdvertisement],
        make: &mut impl FnMut(IpAddr, Option<&str>, &str, Option<&str>) -> T,
    ) -> Option<Vec<T>> {
        match read(text, advertisements, make, Seen::Ordered(None)) {
            Err(Stop::OutOfOrder) => {
                read(text, advertisements, make, Seen::Set(HashSet::new())).ok()
            }
            read => read.ok(),
        }
    }

    /// Why a reading of the fast path stops.
    enum Stop {
        /// An address below the one before, in an [`Seen::Ordered`]
        /// reading: read again with a set.
        OutOfOrder,
        /// Anything else: the TOML parser judges the file.
        Toml,
    }

    /// One reading of `text`: the entries, or why it stopped.
    fn read<T>(
        text: &str,
        advertisements: &[VipFileAdvertisement],
        make: &mut impl FnMut(IpAddr, Option<&str>, &str, Option<&str>) -> T,
        mut seen: Seen,
    ) -> Result<Vec<T>, Stop> {
        let first = advertisements.first();
        // One entry per `[[vip]]` at most: the list is allocated once
        // (growing to 10k entries by doubling mapped, copied and unmapped
        // six lists on the way to the first UPDATE).
        let headers = memchr::memmem::find_iter(text.as_bytes(), b"[[vip]]").count();
        let mut entries = Vec::with_capacity(headers);
        // An entry read, kept; or why the reading stops: the address is
        // not a routable unicast address, not in the advertisement's
        // vip_ranges or not new (the TOML parser then reports it), or out
        // of order (read again with a set).
        let mut accept = |address: IpAddr,
                          service: Option<&str>,
                          advertisement: Option<&VipFileAdvertisement>,
                          tenant: Option<&str>| {
            if !super::routable_unicast(address)
                || tenant.is_some_and(|t| crate::config::name_problem(t).is_some())
                || advertisement.is_some_and(|a| !a.allows(address))
            {
                return Err(Stop::Toml);
            }
            let advertisement = advertisement.map_or(DEFAULT_ADVERTISEMENT, |a| a.name.as_str());
            match seen.note(address) {
                Novelty::New => {}
                Novelty::Duplicate => return Err(Stop::Toml),
                Novelty::OutOfOrder => return Err(Stop::OutOfOrder),
            }
            entries.push(make(address, service, advertisement, tenant));
            Ok(())
        };
        // Entries of the generators' shape, a whole entry at a time (the
        // line reader took about 90 ns an entry, on the way to the first
        // UPDATE); the line reader goes on from the first entry of another
        // shape.
        let mut plain_end = 0;
        while let Some((v4, len)) = plain_entry(&text.as_bytes()[plain_end..]) {
            accept(IpAddr::V4(v4), None, first, None)?;
            plain_end += len;
        }
        let text = &text[plain_end..];
        let mut current: Option<Partial> = None;
        let mut finish = |p: Partial| -> Result<(), Stop> {
            let text = p.address.ok_or(Stop::Toml)?;
            let address = match dotted_quad(text.as_bytes()) {
                Some(v4) => IpAddr::V4(v4),
                None => crate::model::net::unmap(text.parse().map_err(|_| Stop::Toml)?),
            };
            let advertisement = match p.advertisement {
                None => first,
                Some(name) => Some(
                    advertisements
                        .iter()
                        .find(|a| a.name == name)
                        .ok_or(Stop::Toml)?,
                ),
            };
            accept(address, p.service, advertisement, p.tenant)
        };
        // Why the line reader stopped, when it was at an entry it finished.
        let mut refused = Stop::Toml;
        let done = each_line(text, |line| {
            let line = trim_blanks_end(trim_blanks_start(line));
            if line.is_empty() || line.starts_with('#') {
                return Some(());
            }
            if let Some(rest) = line.strip_prefix("[[vip]]") {
                let rest = trim_blanks_start(rest);
                if !(rest.is_empty() || rest.starts_with('#')) {
                    return None;
                }
                if let Some(p) = current.take() {
                    finish(p).map_err(|stop| refused = stop).ok()?;
                }
                current = Some(Partial::default());
                return Some(());
            }
            let eq = line.bytes().position(|b| b == b'=')?;
            let key = trim_blanks_end(&line[..eq]);
            let value = string_value(trim_blanks_start(&line[eq + 1..]))?;
            // Keys outside any [[vip]] are unknown keys of the root.
            let p = current.as_mut()?;
            let slot = match key {
                "address" => &mut p.address,
                "service" => &mut p.service,
                "advertisement" => &mut p.advertisement,
                "tenant" => &mut p.tenant,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None; // a key defined twice
            }
            Some(())
        });
        match done {
            None => Err(refused),
            Some(()) => current.take().map_or(Ok(()), &mut finish).map(|()| entries),
        }
    }

    #[cfg(test)]
    mod tests {
        use std::path::Path;

        /// The direct reading of `a.b.c.d` never disagrees with std's
        /// parser: it answers only what std accepts, and the same address.
        #[test]
        fn dotted_quads_read_as_std_reads_them() {
            let mut texts: Vec<String> = [
                "0.0.0.0",
                "255.255.255.255",
                "256.0.0.1",
                "1.2.3",
                "1.2.3.4.5",
                "01.2.3.4",
                "1.2.3.04",
                "1..3.4",
                ".1.2.3",
                "1.2.3.",
                "1.2.3.4 ",
                "+1.2.3.4",
                "1.2.3.4a",
                "1000.1.1.1",
                "10.0.0.1",
                "::ffff:1.2.3.4",
                "",
                "1.2.3.-4",
                "192.0.2.255",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            // Every octet text of up to three characters from these, in
            // each position.
            let alphabet = [
                "", "0", "1", "9", "00", "01", "10", "25", "255", "256", "299", "999", "0000", "x",
            ];
            for a in alphabet {
                for pos in 0..4 {
                    let mut parts = ["7", "8", "9", "10"];
                    parts[pos] = a;
                    texts.push(parts.join("."));
                }
            }
            for text in &texts {
                let std = text.parse::<std::net::Ipv4Addr>().ok();
                match super::dotted_quad(text.as_bytes()) {
                    Some(ours) => assert_eq!(Some(ours), std, "{text:?}"),
                    None => assert_eq!(std, None, "{text:?}: std reads it, we did not"),
                }
            }
        }

        /// "internal" has `vip_ranges` that hold most addresses the tests
        /// use, but not 198.51.100.11 or above.
        fn names() -> Vec<super::VipFileAdvertisement> {
            let ranges = ["198.51.100.0-198.51.100.10", "2001:db8::/32"]
                .iter()
                .map(|r| crate::config::parse_vip_range(r).expect("range"))
                .collect();
            vec![
                super::VipFileAdvertisement::named("public"),
                super::VipFileAdvertisement {
                    name: "internal".to_string(),
                    vip_ranges: Some(ranges),
                },
            ]
        }

        /// The list of entries is allocated once, at one entry per
        /// `[[vip]]`.
        #[test]
        fn the_entries_are_allocated_once() {
            let text: String = (1..=1000u32)
                .map(|i| format!("[[vip]]\naddress = \"10.0.{}.{}\"\n", i / 256, i % 256))
                .collect();
            let entries = super::parse(&text, &names(), &mut |address, _, _, _| address)
                .expect("the fast path reads it");
            assert_eq!(entries.len(), 1000);
            assert_eq!(entries.capacity(), 1000);
        }

        /// Whenever the fast path answers, the TOML parser gives the same
        /// entries; where it does not, the TOML parser decides.
        fn agree(text: &str) -> bool {
            let fast = super::parse(
                text,
                &names(),
                &mut |address, service, advertisement, tenant| super::super::VipEntry {
                    address,
                    service: service.map(str::to_string),
                    advertisement: advertisement.to_string(),
                    tenant: tenant.map(str::to_string),
                },
            );
            let full = super::super::parse_toml(Path::new("vips.toml"), text, &names());
            if let Some(fast) = &fast {
                assert_eq!(Ok(fast.clone()), full, "{text:?}");
            }
            fast.is_some()
        }

        /// One `[[vip]]` entry of a random VIP file: mostly what the fast
        /// path reads (few addresses, so duplicates are common; unknown
        /// advertisements; blanks, comments, CRLF), now and then a line of
        /// syntax it leaves to the TOML parser.
        fn entry() -> impl proptest::strategy::Strategy<Value = String> {
            use proptest::prelude::*;
            let address = prop_oneof![
                8 => (0u8..12).prop_map(|i| format!("198.51.100.{i}")),
                1 => Just("2001:db8::1".to_string()),
                1 => Just("127.0.0.1".to_string()),
                1 => Just("no address".to_string()),
            ];
            let service = proptest::option::of(prop_oneof![Just("web"), Just("a # b"), Just("")]);
            let advertisement =
                proptest::option::of(prop_oneof![Just("public"), Just("internal"), Just("nope")]);
            let tenant = proptest::option::of(prop_oneof![Just("acme"), Just("bad name")]);
            let noise = prop_oneof![
                12 => Just(""),
                2 => Just("\n"),
                2 => Just("  # a comment\n"),
                2 => Just("\r\n"),
                1 => Just("address = '198.51.100.7'\n"),
                1 => Just("other = \"x\"\n"),
            ];
            (
                address,
                service,
                advertisement,
                tenant,
                noise,
                any::<bool>(),
            )
                .prop_map(
                    |(address, service, advertisement, tenant, noise, service_first)| {
                        let mut keys = vec![format!("address = \"{address}\"\n")];
                        if let Some(s) = service {
                            keys.push(format!("service=\"{s}\" # why\n"));
                        }
                        if service_first {
                            keys.reverse();
                        }
                        if let Some(a) = advertisement {
                            keys.push(format!("\tadvertisement = \"{a}\"\n"));
                        }
                        if let Some(t) = tenant {
                            keys.push(format!("tenant = \"{t}\"\n"));
                        }
                        format!("[[vip]]\n{noise}{}", keys.concat())
                    },
                )
        }

        proptest::proptest! {
            /// On random files, whatever the fast path answers is what the
            /// TOML parser answers.
            #[test]
            fn on_random_files_the_fast_path_means_what_the_toml_parser_does(
                files in proptest::collection::vec(
                    proptest::collection::vec(entry(), 0..8), 16)
            ) {
                for f in &files {
                    agree(&f.concat());
                }
            }
        }

        #[test]
        fn plain_files_take_the_fast_path_and_mean_the_same() {
            for text in [
                "",
                "# nothing\n\n",
                "[[vip]]\naddress = \"198.51.100.10\"\n",
                "[[vip]]\naddress=\"198.51.100.10\"\nservice = \"demo/web\"\nadvertisement = \"internal\"\n",
                "  [[vip]]  # first\n\taddress = \"2001:db8::10\" # v6\r\n[[vip]]\r\naddress = \"198.51.100.11\"\r\nservice = \"\"",
                "[[vip]]\nservice = \"a # not a comment\"\naddress = \"198.51.100.12\"\n",
                "[[vip]]\naddress = \"198.51.100.13\"\nservice = \"ns/ünïcode\"\n",
                // Out of address order: read again, with a set.
                "[[vip]]\naddress = \"198.51.100.20\"\n[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"198.51.100.30\"\n",
                // The same, found by the line reader.
                "[[vip]]\naddress = \"198.51.100.20\"\nservice = \"a\"\n[[vip]]\naddress = \"198.51.100.10\"\nservice = \"b\"\n[[vip]]\naddress = \"198.51.100.30\"\nservice = \"c\"\n",
            ] {
                assert!(agree(text), "should take the fast path: {text:?}");
            }
        }

        #[test]
        fn anything_else_is_left_to_the_toml_parser() {
            for text in [
                // An address outside its advertisement's vip_ranges.
                "[[vip]]\naddress = \"198.51.100.11\"\nadvertisement = \"internal\"\n",
                // Other TOML syntax.
                "[[vip]]\naddress = '198.51.100.10'\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"a\\\"b\"\n",
                "[[vip]]\naddress = \"\"\"198.51.100.10\"\"\"\n",
                "[[ vip ]]\naddress = \"198.51.100.10\"\n",
                "vip = [{ address = \"198.51.100.10\" }]\n",
                "[[vip]]\n\"address\" = \"198.51.100.10\"\n",
                "[[vip]]\naddress = \"198.51.100.10\" trailing\n",
                "[[vip]]\naddress = \"198.51.100.10\"\rservice = \"x\"\n",
                // A carriage return that does not end its line, wherever.
                "[[vip]]\naddress = \"198.51.100.10\" # a\rb\n",
                "# a\rb\n[[vip]]\naddress = \"198.51.100.10\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"a\rb\"\n",
                "[[vip]]\r\r\naddress = \"198.51.100.10\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"a\u{1}b\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"a\u{7f}b\"\n",
                "[[vip]]\naddress = \"198.51.100.10\" # a\u{7f}\n",
                "[vip]\naddress = \"198.51.100.10\"\n",
                // Invalid entries: the TOML path reports them.
                "address = \"198.51.100.10\"\n",
                "[[vip]]\nservice = \"x\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\naddress = \"198.51.100.11\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"198.51.100.10\"\n",
                // A duplicate once the order broke, and one after it.
                "[[vip]]\naddress = \"198.51.100.20\"\n[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"198.51.100.20\"\n",
                "[[vip]]\naddress = \"198.51.100.20\"\n[[vip]]\naddress = \"198.51.100.10\"\n[[vip]]\naddress = \"198.51.100.30\"\n[[vip]]\naddress = \"198.51.100.10\"\n",
                "[[vip]]\naddress = \"198.51.100.0/24\"\n",
                "[[vip]]\naddress = \"127.0.0.1\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nadvertisement = \"publik\"\n",
                "[[vip]]\naddress = \"198.51.100.10\"\nport = \"80\"\n",
            ] {
                assert!(!agree(text), "should be left to the TOML parser: {text:?}");
            }
        }

        /// Entries of the generators' shape are read whole, and the line
        /// reader goes on where one is followed by a key of its own, or
        /// has another shape: a `service` line after a plain entry belongs
        /// to it, and nothing is left to the TOML parser.
        #[test]
        fn plain_entries_hand_over_to_the_line_reader_mid_file() {
            let text = concat!(
                "[[vip]]\naddress = \"198.51.100.1\"\n",
                "[[vip]]\naddress = \"198.51.100.2\"\nservice = \"ns/two\"\n",
                "[[vip]]\naddress = \"198.51.100.3\"\n",
                "[[vip]]\r\naddress = \"198.51.100.4\"\r\n",
                "[[vip]]\naddress = \"198.51.100.5\"\n",
                "[[vip]]\naddress = \"198.51.100.6\"",
            );
            let entries =
                super::parse(text, &names(), &mut |address, service, advertisement, _| {
                    (
                        address.to_string(),
                        service.map(str::to_string),
                        advertisement.to_string(),
                    )
                })
                .expect("the fast path reads it");
            let services: Vec<_> = entries
                .iter()
                .map(|(a, s, _)| (a.as_str(), s.as_deref()))
                .collect();
            assert_eq!(
                services,
                [
                    ("198.51.100.1", None),
                    ("198.51.100.2", Some("ns/two")),
                    ("198.51.100.3", None),
                    ("198.51.100.4", None),
                    ("198.51.100.5", None),
                    ("198.51.100.6", None),
                ]
            );
            assert!(entries.iter().all(|(_, _, a)| a == "public"));
            assert!(agree(text));
        }

        #[test]
        fn a_large_file_is_read_by_the_fast_path() {
            let text: String = (0..10_000u32)
                .map(|i| format!("[[vip]]\naddress = \"198.18.{}.{}\"\n", i / 256, i % 256))
                .collect();
            assert!(agree(&text));
        }
    }
}

/// Reads and checks the VIP file of a `kind = "file"` source against the
/// config's advertisements.
pub fn load_vip_file(
    path: &Path,
    advertisements: &[VipFileAdvertisement],
) -> Result<Vec<VipEntry>, Vec<Diagnostic>> {
    let text = crate::config::read_text(path, "VIP file", crate::config::MAX_VIP_FILE_LEN)?;
    parse_vip_file(path, &text, advertisements)
}
