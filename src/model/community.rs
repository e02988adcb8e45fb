//! BGP communities as operators write them, in the config and in Service
//! annotations: standard (RFC 1997) "ASN:N" or a well-known name, large
//! (RFC 8092) "A:B:C", and extended (RFC 4360, RFC 5668) route-target /
//! route-origin "rt:ASN:N" / "ro:ASN:N".

use crate::suggest::did_you_mean;

/// Well-known standard communities, by the names operators use.
pub const WELL_KNOWN_COMMUNITIES: [(&str, u32); 5] = {
    use bgp_proto::community::well_known::*;
    [
        // RFC 1997 §"Well-known Communities".
        ("no-export", NO_EXPORT),
        ("no-advertise", NO_ADVERTISE),
        ("no-export-subconfed", NO_EXPORT_SUBCONFED),
        // RFC 7999 §5.
        ("blackhole", BLACKHOLE),
        // RFC 8326 §5.
        ("graceful-shutdown", GRACEFUL_SHUTDOWN),
    ]
};

/// Parses "ASN:N" (each 0..=65535) or a well-known name into the 32-bit
/// community value (ASN in the high 16 bits, RFC 1997).
pub fn parse_community(text: &str) -> Result<u32, String> {
    if let Some((_, value)) = WELL_KNOWN_COMMUNITIES
        .iter()
        .find(|(name, _)| *name == text)
    {
        return Ok(*value);
    }
    let names: Vec<&str> = WELL_KNOWN_COMMUNITIES
        .iter()
        .map(|(name, _)| *name)
        .collect();
    if text.starts_with(|c: char| c.is_ascii_alphabetic())
        && let Some(name) = did_you_mean(text, &names)
    {
        return Err(format!(
            "community \"{text}\" is not valid; did you mean \"{name}\"?"
        ));
    }
    let expected = "expected \"ASN:N\" with both parts in 0..=65535, or one of \"no-export\", \"no-advertise\", \"no-export-subconfed\", \"blackhole\", \"graceful-shutdown\"";
    let parts: Vec<&str> = text.split(':').collect();
    let [high, low] = parts.as_slice() else {
        return Err(format!("community \"{text}\" is not valid; {expected}"));
    };
    match (high.parse::<u16>(), low.parse::<u16>()) {
        (Ok(high), Ok(low)) => Ok(u32::from(high) << 16 | u32::from(low)),
        _ => Err(format!("community \"{text}\" is not valid; {expected}")),
    }
}

/// Formats a community the way the config writes it: its well-known name,
/// else "ASN:N".
pub fn format_community(community: u32) -> String {
    match WELL_KNOWN_COMMUNITIES
        .iter()
        .find(|(_, value)| *value == community)
    {
        Some((name, _)) => (*name).to_string(),
        None => format!("{}:{}", community >> 16, community & 0xFFFF),
    }
}

/// Parses "A:B:C", each part 0..=4294967295 (RFC 8092 §3).
pub fn parse_large_community(text: &str) -> Result<(u32, u32, u32), String> {
    let parts: Vec<&str> = text.split(':').collect();
    if let [a, b, c] = parts.as_slice()
        && let (Ok(a), Ok(b), Ok(c)) = (a.parse(), b.parse(), c.parse())
    {
        return Ok((a, b, c));
    }
    Err(format!(
        "large community \"{text}\" is not valid; expected \"GLOBAL:LOCAL1:LOCAL2\" with each part in 0..=4294967295"
    ))
}

/// Which transitive AS-specific extended community sub-type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendedCommunityKind {
    /// Route Target, sub-type 0x02 (RFC 4360 §4).
    RouteTarget,
    /// Route Origin, sub-type 0x03 (RFC 4360 §5).
    RouteOrigin,
}

/// A route-target or route-origin extended community, in the AS-specific
/// form that fits its ASN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendedCommunity {
    /// Two-Octet AS Specific, type 0x00 (RFC 4360 §3.1): 2-octet ASN
    /// global administrator, 4-octet local administrator.
    TwoOctetAs {
        /// Route target or route origin.
        kind: ExtendedCommunityKind,
        /// Global Administrator: the ASN.
        global: u16,
        /// Local Administrator.
        local: u32,
    },
    /// Four-Octet AS Specific, type 0x02 (RFC 5668 §2): 4-octet ASN global
    /// administrator, 2-octet local administrator.
    FourOctetAs {
        /// Route target or route origin.
        kind: ExtendedCommunityKind,
        /// Global Administrator: the ASN.
        global: u32,
        /// Local Administrator.
        local: u16,
    },
}

/// As the config writes it: "rt:ASN:N" or "ro:ASN:N".
impl std::fmt::Display for ExtendedCommunity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, asn, local) = self.parts();
        let kind = match kind {
            ExtendedCommunityKind::RouteTarget => "rt",
            ExtendedCommunityKind::RouteOrigin => "ro",
        };
        write!(f, "{kind}:{asn}:{local}")
    }
}

impl ExtendedCommunity {
    /// The kind, the ASN and the local value, whichever form carries them.
    fn parts(&self) -> (ExtendedCommunityKind, u32, u32) {
        match *self {
            ExtendedCommunity::TwoOctetAs {
                kind,
                global,
                local,
            } => (kind, u32::from(global), local),
            ExtendedCommunity::FourOctetAs {
                kind,
                global,
                local,
            } => (kind, global, u32::from(local)),
        }
    }

    /// The 8 octets carried in the EXTENDED_COMMUNITIES attribute (built
    /// by the codec's constructors, which pick the same AS-specific form).
    pub fn to_bytes(&self) -> [u8; 8] {
        let (kind, asn, local) = self.parts();
        match kind {
            ExtendedCommunityKind::RouteTarget => {
                bgp_proto::ExtCommunity::route_target(asn, local).0
            }
            ExtendedCommunityKind::RouteOrigin => {
                bgp_proto::ExtCommunity::route_origin(asn, local).0
            }
        }
    }
}

/// Parses "rt:ASN:N" or "ro:ASN:N". An ASN below 65536 gives the
/// two-octet-AS form (N up to 4294967295), a larger ASN the four-octet-AS
/// form (N up to 65535).
pub fn parse_extended_community(text: &str) -> Result<ExtendedCommunity, String> {
    let expected = "expected \"rt:ASN:N\" (route target) or \"ro:ASN:N\" (route origin)";
    let parts: Vec<&str> = text.split(':').collect();
    let [kind, asn, local] = parts.as_slice() else {
        return Err(format!(
            "extended community \"{text}\" is not valid; {expected}"
        ));
    };
    let kind = match *kind {
        "rt" => ExtendedCommunityKind::RouteTarget,
        "ro" => ExtendedCommunityKind::RouteOrigin,
        _ => {
            return Err(format!(
                "extended community \"{text}\" is not valid; {expected}"
            ));
        }
    };
    let (Ok(asn), Ok(local)) = (asn.parse::<u32>(), local.parse::<u32>()) else {
        return Err(format!(
            "extended community \"{text}\" is not valid; {expected}, ASN and N being numbers"
        ));
    };
    match u16::try_from(asn) {
        Ok(global) => Ok(ExtendedCommunity::TwoOctetAs {
            kind,
            global,
            local,
        }),
        Err(_) => match u16::try_from(local) {
            Ok(local) => Ok(ExtendedCommunity::FourOctetAs {
                kind,
                global: asn,
                local,
            }),
            Err(_) => Err(format!(
                "extended community \"{text}\": with a 4-octet ASN the local part must be in 0..=65535 (RFC 5668), got {local}"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_communities() {
        assert_eq!(parse_community("65001:100"), Ok(0xFDE9_0064));
        assert_eq!(parse_community("0:0"), Ok(0));
        assert_eq!(parse_community("no-export"), Ok(0xFFFF_FF01));
        assert_eq!(parse_community("graceful-shutdown"), Ok(0xFFFF_0000));
        assert_eq!(parse_community("blackhole"), Ok(0xFFFF_029A));
        assert_eq!(
            parse_community("no_export"),
            Err("community \"no_export\" is not valid; did you mean \"no-export\"?".to_string())
        );
        assert_eq!(format_community(0xFDE9_0064), "65001:100");
        assert_eq!(format_community(0xFFFF_FF01), "no-export");
        for bad in [
            "65536:1",
            "1:65536",
            "1",
            "1:2:3",
            "a:b",
            "-1:2",
            "no_export",
            "",
        ] {
            assert!(parse_community(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn large_communities() {
        assert_eq!(parse_large_community("65001:1:100"), Ok((65001, 1, 100)));
        assert_eq!(
            parse_large_community("4294967295:0:4294967295"),
            Ok((u32::MAX, 0, u32::MAX))
        );
        for bad in ["1:2", "1:2:3:4", "4294967296:0:0", "a:b:c"] {
            assert!(parse_large_community(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn extended_communities_pick_the_form_by_asn() {
        let rt = parse_extended_community("rt:65001:100").expect("valid");
        assert_eq!(rt.to_bytes(), [0x00, 0x02, 0xFD, 0xE9, 0, 0, 0, 100]);
        let ro = parse_extended_community("ro:4200000000:7").expect("valid");
        assert_eq!(ro.to_bytes(), [0x02, 0x03, 0xFA, 0x56, 0xEA, 0x00, 0, 7]);
        assert!(parse_extended_community("rt:4200000000:65536").is_err());
        assert!(parse_extended_community("xx:1:2").is_err());
        assert!(parse_extended_community("rt:1").is_err());
    }
}
