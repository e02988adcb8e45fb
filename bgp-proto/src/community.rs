//! Communities: RFC 1997 (4 octets), RFC 4360 extended (8), RFC 5701 IPv6
//! address specific extended (20), RFC 8092 large (12).

use std::fmt;
use std::str::FromStr;

/// Well-known communities (RFC 1997 "Well-known Communities", RFC 3765,
/// RFC 7999, RFC 8326).
pub mod well_known {
    /// GRACEFUL_SHUTDOWN (RFC 8326): the path is about to be withdrawn by a
    /// planned shutdown; receivers lower its preference.
    pub const GRACEFUL_SHUTDOWN: u32 = 0xffff_0000;
    /// BLACKHOLE (RFC 7999): drop traffic to this prefix.
    pub const BLACKHOLE: u32 = 0xffff_029a;
    /// NO_EXPORT: not to be advertised outside the AS (or confederation).
    pub const NO_EXPORT: u32 = 0xffff_ff01;
    /// NO_ADVERTISE: not to be advertised to any other peer.
    pub const NO_ADVERTISE: u32 = 0xffff_ff02;
    /// NO_EXPORT_SUBCONFED: not to be advertised to external peers, members
    /// of other confederation ASes included.
    pub const NO_EXPORT_SUBCONFED: u32 = 0xffff_ff03;
    /// NOPEER (RFC 3765): not to be advertised to bilateral peers.
    pub const NOPEER: u32 = 0xffff_ff04;
}

/// A standard community, shown as `ASN:VALUE` or its well-known name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Community(pub u32);

impl Community {
    /// The well-known community's name in lower case (`no-export`), or
    /// `None` for any other value.
    pub fn name(self) -> Option<&'static str> {
        use well_known::*;
        Some(match self.0 {
            GRACEFUL_SHUTDOWN => "graceful-shutdown",
            BLACKHOLE => "blackhole",
            NO_EXPORT => "no-export",
            NO_ADVERTISE => "no-advertise",
            NO_EXPORT_SUBCONFED => "no-export-subconfed",
            NOPEER => "no-peer",
            _ => return None,
        })
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0 >> 16, self.0 & 0xffff)
    }
}

impl FromStr for Community {
    type Err = String;
    /// `"65001:100"` or a well-known name (`no-export`, `blackhole`, …).
    fn from_str(s: &str) -> Result<Self, String> {
        use well_known::*;
        let named = match s.to_ascii_lowercase().as_str() {
            "graceful-shutdown" | "graceful_shutdown" => Some(GRACEFUL_SHUTDOWN),
            "blackhole" => Some(BLACKHOLE),
            "no-export" | "no_export" => Some(NO_EXPORT),
            "no-advertise" | "no_advertise" => Some(NO_ADVERTISE),
            "no-export-subconfed" | "no_export_subconfed" | "local-as" => Some(NO_EXPORT_SUBCONFED),
            "no-peer" | "nopeer" => Some(NOPEER),
            _ => None,
        };
        if let Some(v) = named {
            return Ok(Community(v));
        }
        let (a, b) = s
            .split_once(':')
            .ok_or_else(|| format!("community {s:?} is not ASN:VALUE or a well-known name"))?;
        let a: u16 = a
            .parse()
            .map_err(|_| format!("community {s:?}: {a:?} is not a number in 0..=65535"))?;
        let b: u16 = b
            .parse()
            .map_err(|_| format!("community {s:?}: {b:?} is not a number in 0..=65535"))?;
        Ok(Community((u32::from(a) << 16) | u32::from(b)))
    }
}

/// A large community (RFC 8092 §3): Global Administrator, Local Data 1,
/// Local Data 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LargeCommunity {
    /// Global Administrator: the AS that defines the meaning of the local
    /// data.
    pub global: u32,
    /// Local Data Part 1: operator-defined.
    pub local1: u32,
    /// Local Data Part 2: operator-defined.
    pub local2: u32,
}

impl fmt::Display for LargeCommunity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.global, self.local1, self.local2)
    }
}

impl FromStr for LargeCommunity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let [g, l1, l2] = parts.as_slice() else {
            return Err(format!("large community {s:?} is not GLOBAL:LOCAL1:LOCAL2"));
        };
        let num = |p: &str| {
            p.parse::<u32>().map_err(|_| {
                format!("large community {s:?}: {p:?} is not a number in 0..=4294967295")
            })
        };
        Ok(LargeCommunity {
            global: num(g)?,
            local1: num(l1)?,
            local2: num(l2)?,
        })
    }
}

/// An extended community (RFC 4360 §2), kept as its 8 octets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtCommunity(pub [u8; 8]);

impl ExtCommunity {
    /// Route target, 2-octet AS specific (RFC 4360 §3.1, type 0x00 subtype
    /// 0x02) or 4-octet AS specific (RFC 5668, type 0x02 subtype 0x02).
    pub fn route_target(asn: u32, value: u32) -> Self {
        Self::as_specific(0x02, asn, value)
    }

    /// Route origin (subtype 0x03).
    pub fn route_origin(asn: u32, value: u32) -> Self {
        Self::as_specific(0x03, asn, value)
    }

    fn as_specific(subtype: u8, asn: u32, value: u32) -> Self {
        let mut b = [0u8; 8];
        if let Ok(two) = u16::try_from(asn) {
            b[0] = 0x00;
            b[1] = subtype;
            b[2..4].copy_from_slice(&two.to_be_bytes());
            b[4..8].copy_from_slice(&value.to_be_bytes());
        } else {
            b[0] = 0x02;
            b[1] = subtype;
            b[2..6].copy_from_slice(&asn.to_be_bytes());
            b[6..8].copy_from_slice(&(value as u16).to_be_bytes());
        }
        ExtCommunity(b)
    }

    /// The eight octets as one big-endian number (shown in hex when the
    /// type has no name).
    pub fn as_u64(&self) -> u64 {
        u64::from_be_bytes(self.0)
    }
}

impl fmt::Display for ExtCommunity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        let kind = match b[1] {
            0x02 => Some("rt"),
            0x03 => Some("ro"),
            _ => None,
        };
        match (b[0], kind) {
            (0x00, Some(k)) => write!(
                f,
                "{k}:{}:{}",
                u16::from_be_bytes([b[2], b[3]]),
                u32::from_be_bytes([b[4], b[5], b[6], b[7]])
            ),
            (0x02, Some(k)) => write!(
                f,
                "{k}:{}:{}",
                u32::from_be_bytes([b[2], b[3], b[4], b[5]]),
                u16::from_be_bytes([b[6], b[7]])
            ),
            (0x01, Some(k)) => write!(
                f,
                "{k}:{}:{}",
                std::net::Ipv4Addr::new(b[2], b[3], b[4], b[5]),
                u16::from_be_bytes([b[6], b[7]])
            ),
            _ => write!(f, "0x{:016x}", self.as_u64()),
        }
    }
}

impl FromStr for ExtCommunity {
    type Err = String;
    /// `rt:ASN:VALUE` or `ro:ASN:VALUE`.
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let [kind, asn, value] = parts.as_slice() else {
            return Err(format!(
                "extended community {s:?} is not rt:ASN:VALUE or ro:ASN:VALUE"
            ));
        };
        let asn: u32 = asn
            .parse()
            .map_err(|_| format!("extended community {s:?}: {asn:?} is not an AS number"))?;
        let value: u32 = value
            .parse()
            .map_err(|_| format!("extended community {s:?}: {value:?} is not a number"))?;
        if asn > u32::from(u16::MAX) && value > u32::from(u16::MAX) {
            return Err(format!(
                "extended community {s:?}: with a 4-octet AS the value must be at most 65535"
            ));
        }
        match *kind {
            "rt" => Ok(ExtCommunity::route_target(asn, value)),
            "ro" => Ok(ExtCommunity::route_origin(asn, value)),
            _ => Err(format!("extended community {s:?}: kind must be rt or ro")),
        }
    }
}

/// An IPv6 address specific extended community (RFC 5701 §2), kept as its
/// 20 octets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv6ExtCommunity(pub [u8; 20]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn community_text() {
        assert_eq!(
            "65001:100".parse::<Community>().unwrap(),
            Community(0xfde9_0064)
        );
        assert_eq!(
            "no-export".parse::<Community>().unwrap().0,
            well_known::NO_EXPORT
        );
        assert_eq!(Community(0xfde9_0064).to_string(), "65001:100");
        assert!("65536:1".parse::<Community>().is_err());
        assert!("1".parse::<Community>().is_err());
    }

    #[test]
    fn large_community_text() {
        let lc: LargeCommunity = "4294967295:1:100".parse().unwrap();
        assert_eq!(lc.global, u32::MAX);
        assert_eq!(lc.to_string(), "4294967295:1:100");
        assert!("1:2".parse::<LargeCommunity>().is_err());
    }

    #[test]
    fn ext_community_text() {
        let rt: ExtCommunity = "rt:65001:100".parse().unwrap();
        assert_eq!(rt.0, [0, 2, 0xfd, 0xe9, 0, 0, 0, 100]);
        assert_eq!(rt.to_string(), "rt:65001:100");
        let rt4: ExtCommunity = "rt:4200000001:7".parse().unwrap();
        assert_eq!(rt4.0[0], 0x02);
        assert_eq!(rt4.to_string(), "rt:4200000001:7");
        assert!("rt:4200000001:70000".parse::<ExtCommunity>().is_err());
    }
}
