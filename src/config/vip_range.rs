//! `vip_ranges` of `[[advertisement]]`: the addresses an advertisement may
//! carry, written as MetalLB's IPAddressPool `addresses` are: a prefix
//! (`"192.0.2.0/24"`, `"2001:db8:1::/64"`) or an inclusive range of one
//! family (`"198.51.100.10-198.51.100.20"`).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// An inclusive range of addresses of one family, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VipRange {
    start: IpAddr,
    end: IpAddr,
}

impl VipRange {
    /// The range from `start` to `end`, both included; `None` when they are
    /// of different families or `start > end`.
    pub fn new(start: IpAddr, end: IpAddr) -> Option<VipRange> {
        (start.is_ipv4() == end.is_ipv4() && start <= end).then_some(VipRange { start, end })
    }

    /// Every address of `net`.
    pub fn of_net(net: IpNet) -> VipRange {
        VipRange {
            start: net.network(),
            end: net.broadcast(),
        }
    }

    /// The first address.
    pub fn start(&self) -> IpAddr {
        self.start
    }

    /// The last address.
    pub fn end(&self) -> IpAddr {
        self.end
    }

    /// True when `ip` is in the range (an address of the other family
    /// never is).
    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.start.is_ipv4() && self.start <= ip && ip <= self.end
    }

    /// True when every address of `net` is in the range.
    pub fn covers(&self, net: &IpNet) -> bool {
        self.contains(net.network()) && self.contains(net.broadcast())
    }

    /// True for an IPv4 range.
    pub fn is_ipv4(&self) -> bool {
        self.start.is_ipv4()
    }

    /// The prefix the range is exactly, when it is one.
    fn as_net(&self) -> Option<IpNet> {
        let max = if self.is_ipv4() { 32 } else { 128 };
        (0..=max).find_map(|len| {
            let net = IpNet::new(self.start, len).ok()?;
            (net.network() == self.start && net.broadcast() == self.end).then_some(net)
        })
    }
}

/// A prefix when the range is exactly one (`192.0.2.0/24`), else
/// `start-end`.
impl fmt::Display for VipRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_net() {
            Some(net) => write!(f, "{net}"),
            None => write!(f, "{}-{}", self.start, self.end),
        }
    }
}

/// True when `ip` is in one of `ranges`; no ranges (`None`) restrict
/// nothing.
pub fn in_ranges(ranges: Option<&[VipRange]>, ip: IpAddr) -> bool {
    ranges.is_none_or(|rs| rs.iter().any(|r| r.contains(ip)))
}

/// `["192.0.2.0/24", "198.51.100.10-198.51.100.20"]`, for messages.
pub fn format_ranges(ranges: &[VipRange]) -> String {
    let quoted: Vec<String> = ranges.iter().map(|r| format!("\"{r}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Reads one entry of `vip_ranges`; the error is the whole message.
pub fn parse_vip_range(text: &str) -> Result<VipRange, String> {
    let address = |part: &str, what: &str| -> Result<IpAddr, String> {
        let part = part.trim();
        let ip: IpAddr = part.parse().map_err(|_| {
            format!(
                "vip range \"{text}\": {what} \"{part}\" is not an IPv4 or IPv6 address; write a prefix such as \"192.0.2.0/24\" or a range such as \"192.0.2.10-192.0.2.20\""
            )
        })?;
        if let Some(v4) = crate::model::net::v4_mapped(ip) {
            return Err(format!(
                "vip range \"{text}\": {part} is an IPv4-mapped IPv6 address, which no VIP is (an IPv4 VIP is its IPv4 address); write \"{v4}\""
            ));
        }
        Ok(ip)
    };
    if let Some((start, end)) = text.split_once('-') {
        let (start, end) = (address(start, "start")?, address(end, "end")?);
        if start.is_ipv4() != end.is_ipv4() {
            return Err(format!(
                "vip range \"{text}\" mixes IPv4 and IPv6; both ends must be of one family"
            ));
        }
        return VipRange::new(start, end).ok_or_else(|| {
            format!("vip range \"{text}\" ends before it starts; write \"{end}-{start}\"")
        });
    }
    let Some((addr, len)) = text.split_once('/') else {
        return Err(format!(
            "vip range \"{text}\" is neither a prefix such as \"192.0.2.0/24\" nor a range such as \"192.0.2.10-192.0.2.20\" (for one address, write \"{}/{}\")",
            text.trim(),
            if text.contains(':') { 128 } else { 32 }
        ));
    };
    let ip = address(addr, "address")?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len: u8 = len
        .trim()
        .parse()
        .ok()
        .filter(|l| *l <= max)
        .ok_or_else(|| {
            format!(
                "vip range \"{text}\": prefix length \"{}\" is not a number from 0 to {max}",
                len.trim()
            )
        })?;
    let net = IpNet::new(ip, len).map_err(|e| format!("vip range \"{text}\": {e}"))?;
    let network = net.trunc();
    if network.addr() != ip {
        return Err(format!(
            "vip range \"{text}\" has host bits set; the prefix is \"{network}\" (or write \"{ip}/{max}\" for the one address)"
        ));
    }
    Ok(VipRange::of_net(network))
}

/// An `[[advertisement]]` as the VIP file sees it: the name an entry may
/// give, and the addresses it may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipFileAdvertisement {
    /// Its name.
    pub name: String,
    /// Its `vip_ranges`; `None`: any address.
    pub vip_ranges: Option<Vec<VipRange>>,
}

impl VipFileAdvertisement {
    /// An advertisement without `vip_ranges`.
    pub fn named(name: &str) -> Self {
        VipFileAdvertisement {
            name: name.to_string(),
            vip_ranges: None,
        }
    }

    /// True when `ip` may be advertised under it.
    pub fn allows(&self, ip: IpAddr) -> bool {
        in_ranges(self.vip_ranges.as_deref(), ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test address")
    }

    #[test]
    fn prefixes_and_ranges_contain_their_addresses_only() {
        let r = parse_vip_range("192.0.2.0/24").expect("valid");
        assert!(r.contains(ip("192.0.2.0")));
        assert!(r.contains(ip("192.0.2.255")));
        assert!(!r.contains(ip("192.0.3.0")));
        assert!(!r.contains(ip("192.0.1.255")));
        assert!(!r.contains(ip("::ffff:192.0.2.1")));
        assert_eq!(r.to_string(), "192.0.2.0/24");

        let r = parse_vip_range("198.51.100.10 - 198.51.100.20").expect("valid");
        assert!(r.contains(ip("198.51.100.10")));
        assert!(r.contains(ip("198.51.100.20")));
        assert!(!r.contains(ip("198.51.100.9")));
        assert!(!r.contains(ip("198.51.100.21")));
        assert_eq!(r.to_string(), "198.51.100.10-198.51.100.20");

        let r = parse_vip_range("2001:db8:1::/64").expect("valid");
        assert!(r.contains(ip("2001:db8:1::ffff")));
        assert!(!r.contains(ip("2001:db8:2::1")));
        assert!(!r.contains(ip("192.0.2.1")));

        // A range that is exactly a prefix is shown as one.
        let r = parse_vip_range("10.0.0.0-10.0.0.255").expect("valid");
        assert_eq!(r.to_string(), "10.0.0.0/24");
        assert_eq!(r, parse_vip_range("10.0.0.0/24").expect("valid"));
        let r = parse_vip_range("0.0.0.0/0").expect("valid");
        assert!(r.contains(ip("255.255.255.255")));
        let one = parse_vip_range("192.0.2.7/32").expect("valid");
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
    }

    #[test]
    fn a_prefix_is_covered_only_wholly() {
        let r = parse_vip_range("10.244.0.0/16").expect("valid");
        assert!(r.covers(&"10.244.3.0/24".parse().expect("net")));
        assert!(!r.covers(&"10.0.0.0/8".parse().expect("net")));
        let r = parse_vip_range("10.244.3.0-10.244.3.127").expect("valid");
        assert!(!r.covers(&"10.244.3.0/24".parse().expect("net")));
    }

    #[test]
    fn bad_entries_say_what_to_write() {
        let cases = [
            (
                "192.0.2.5/24",
                "has host bits set; the prefix is \"192.0.2.0/24\"",
            ),
            ("2001:db8::1/64", "the prefix is \"2001:db8::/64\""),
            (
                "192.0.2.0/33",
                "prefix length \"33\" is not a number from 0 to 32",
            ),
            ("192.0.2.0/x", "prefix length \"x\""),
            (
                "192.0.2.20-192.0.2.10",
                "ends before it starts; write \"192.0.2.10-192.0.2.20\"",
            ),
            ("192.0.2.1-2001:db8::1", "mixes IPv4 and IPv6"),
            ("192.0.2.1-", "end \"\" is not an IPv4 or IPv6 address"),
            ("192.0.2.300/24", "address \"192.0.2.300\" is not"),
            ("192.0.2.1", "(for one address, write \"192.0.2.1/32\")"),
            ("2001:db8::1", "write \"2001:db8::1/128\""),
            ("::ffff:192.0.2.0/120", "IPv4-mapped IPv6 address"),
            ("", "is neither a prefix"),
        ];
        for (text, want) in cases {
            let got = parse_vip_range(text).expect_err(text);
            assert!(got.contains(want), "{text}: {got}");
        }
    }
}
