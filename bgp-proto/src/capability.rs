//! Capabilities advertisement (RFC 5492) and the capabilities holdfast
//! knows. Each is one TLV inside an optional parameter of type 2:
//!
//! ```text
//! +------------------------------+
//! | Capability Code (1 octet)    |
//! +------------------------------+
//! | Capability Length (1 octet)  |
//! +------------------------------+
//! | Capability Value (variable)  |
//! +------------------------------+
//! ```
//!
//! A known capability whose value has the right length but uses a reserved
//! field (a non-zero reserved octet, say) is kept as `Unknown` with its
//! bytes, so that re-encoding is byte-identical; one whose length is wrong
//! for its code is an error: RFC 4271 §6.2, "If one of the Optional
//! Parameters in the OPEN message is recognized, but is malformed, then the
//! Error Subcode MUST be set to 0 (Unspecific)".

use crate::consts::cap;
use crate::context::{Afi, Family, Safi};
use crate::error::Error;
use crate::wire;

/// ADD-PATH Send/Receive field (RFC 7911 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddPathMode {
    /// 1: able to receive multiple paths from the peer.
    Receive = 1,
    /// 2: able to send multiple paths to the peer.
    Send = 2,
    /// 3: both.
    Both = 3,
}

impl AddPathMode {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(AddPathMode::Receive),
            2 => Some(AddPathMode::Send),
            3 => Some(AddPathMode::Both),
            _ => None,
        }
    }
    /// The sender of the capability can send multiple paths (2 or 3).
    pub fn can_send(self) -> bool {
        matches!(self, AddPathMode::Send | AddPathMode::Both)
    }
    /// The sender of the capability can receive multiple paths (1 or 3).
    pub fn can_receive(self) -> bool {
        matches!(self, AddPathMode::Receive | AddPathMode::Both)
    }
}

/// One family of the graceful restart capability (RFC 4724 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GrFamily {
    /// The AFI/SAFI whose routes are kept across a restart.
    pub family: Family,
    /// The "Flags for Address Family" octet; bit 0x80 is F (forwarding
    /// state preserved). Kept whole: the other bits are reserved.
    pub flags: u8,
}

impl GrFamily {
    /// The Forwarding State (F) bit: the forwarding state for this family was
    /// preserved during the previous restart.
    pub const FORWARDING: u8 = 0x80;
    /// The F bit is set.
    pub fn forwarding_preserved(&self) -> bool {
        self.flags & Self::FORWARDING != 0
    }
}

/// Graceful restart capability (RFC 4724 §3, RFC 8538 §2).
///
/// ```text
/// +--------------------------------------------------+
/// | Restart Flags (4 bits) | Restart Time in s (12)  |
/// +--------------------------------------------------+
/// | AFI (2) | SAFI (1) | Flags for Address Family (1)| ...
/// +--------------------------------------------------+
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GracefulRestart {
    /// The 4 Restart Flags bits (high nibble of the first octet): 0x8 is R
    /// (restarting), 0x4 is N (RFC 8538 notification support).
    pub flags: u8,
    /// Restart Time: the seconds the speaker expects to take to re-establish
    /// the session after a restart (12 bits).
    pub restart_time: u16,
    /// The families with graceful restart, and their F bits.
    pub families: Vec<GrFamily>,
}

impl GracefulRestart {
    /// The Restart State (R) bit (RFC 4724 §3): the speaker has restarted,
    /// and the peer must not wait for its End-of-RIB before sending routes.
    pub const RESTART_STATE: u8 = 0x8;
    /// The N bit (RFC 8538 §2): the speaker keeps routes across a
    /// NOTIFICATION, except Cease/Hard Reset.
    pub const NOTIFICATION: u8 = 0x4;
    /// RFC 4724 §3: the restart time is a 12-bit field.
    pub const MAX_RESTART_TIME: u16 = 0x0fff;

    /// The R bit is set.
    pub fn restart_state(&self) -> bool {
        self.flags & Self::RESTART_STATE != 0
    }
    /// The N bit is set.
    pub fn notification(&self) -> bool {
        self.flags & Self::NOTIFICATION != 0
    }
}

/// One family of the long-lived graceful restart capability
/// (RFC 9494 §3): AFI, SAFI, flags (0x80 = F), 24-bit stale time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LlgrFamily {
    /// The AFI/SAFI whose stale routes may be kept for long.
    pub family: Family,
    /// The "Flags for Address Family" octet, kept whole: 0x80 is F (state
    /// preserved), the other bits are reserved.
    pub flags: u8,
    /// Long-Lived Stale Time: seconds, 24 bits.
    pub stale_time: u32,
}

/// One tuple of the extended next hop capability (RFC 8950 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtendedNextHop {
    /// NLRI AFI: the family of the routes.
    pub nlri_afi: u16,
    /// NLRI SAFI (two octets here, unlike elsewhere).
    pub nlri_safi: u16,
    /// Nexthop AFI: the family the next hop may be from.
    pub next_hop_afi: u16,
}

impl ExtendedNextHop {
    /// IPv4 unicast routes with an IPv6 next hop: the tuple RFC 8950 §3
    /// describes (NLRI AFI 1, NLRI SAFI 1, Nexthop AFI 2), the one BGP
    /// unnumbered peering needs.
    pub const IPV4_UNICAST_OVER_IPV6: ExtendedNextHop = ExtendedNextHop {
        nlri_afi: 1,
        nlri_safi: 1,
        next_hop_afi: 2,
    };
}

/// One capability (RFC 5492 §4), named after IANA "Capability Codes".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// 1 — Multiprotocol Extensions (RFC 4760 §8).
    Multiprotocol(Family),
    /// 2 — Route Refresh (RFC 2918).
    RouteRefresh,
    /// 5 — Extended Next Hop Encoding (RFC 8950).
    ExtendedNextHop(Vec<ExtendedNextHop>),
    /// 6 — Extended Message (RFC 8654).
    ExtendedMessage,
    /// 9 — BGP Role (RFC 9234).
    Role(u8),
    /// 64 — Graceful Restart (RFC 4724, RFC 8538).
    GracefulRestart(GracefulRestart),
    /// 65 — Support for 4-octet AS number (RFC 6793).
    FourOctetAs(u32),
    /// 69 — ADD-PATH (RFC 7911).
    AddPath(Vec<(Family, AddPathMode)>),
    /// 70 — Enhanced Route Refresh (RFC 7313).
    EnhancedRouteRefresh,
    /// 71 — Long-Lived Graceful Restart (RFC 9494).
    LongLivedGracefulRestart(Vec<LlgrFamily>),
    /// 73 — FQDN (draft-walton-bgp-hostname-capability): octet strings,
    /// usually ASCII.
    Fqdn {
        /// The speaker's host name (at most 255 octets on the wire).
        hostname: Vec<u8>,
        /// Its domain name (at most 255 octets on the wire).
        domain: Vec<u8>,
    },
    /// Any other capability, or a known one with reserved bits set: kept
    /// as bytes.
    Unknown {
        /// The Capability Code.
        code: u8,
        /// The Capability Value, as received.
        value: Vec<u8>,
    },
}

fn malformed(reason: &'static str, code: u8, value: &[u8]) -> Error {
    let mut data = Vec::with_capacity(value.len() + 2);
    data.push(code);
    data.push(value.len() as u8);
    data.extend_from_slice(value);
    Error::MalformedOpen { reason, data }
}

impl Capability {
    /// The Capability Code.
    pub fn code(&self) -> u8 {
        match self {
            Capability::Multiprotocol(_) => cap::MULTIPROTOCOL,
            Capability::RouteRefresh => cap::ROUTE_REFRESH,
            Capability::ExtendedNextHop(_) => cap::EXTENDED_NEXT_HOP,
            Capability::ExtendedMessage => cap::EXTENDED_MESSAGE,
            Capability::Role(_) => cap::ROLE,
            Capability::GracefulRestart(_) => cap::GRACEFUL_RESTART,
            Capability::FourOctetAs(_) => cap::FOUR_OCTET_AS,
            Capability::AddPath(_) => cap::ADD_PATH,
            Capability::EnhancedRouteRefresh => cap::ENHANCED_ROUTE_REFRESH,
            Capability::LongLivedGracefulRestart(_) => cap::LONG_LIVED_GR,
            Capability::Fqdn { .. } => cap::FQDN,
            Capability::Unknown { code, .. } => *code,
        }
    }

    /// Decodes one capability value. `code` and `value` come from the TLV.
    pub fn decode(code: u8, value: &[u8]) -> Result<Capability, Error> {
        let unknown = || Capability::Unknown {
            code,
            value: value.to_vec(),
        };
        let exact = |n: usize, what: &'static str| {
            if value.len() == n {
                Ok(())
            } else {
                Err(malformed(what, code, value))
            }
        };
        let multiple = |n: usize, min: usize, what: &'static str| {
            if value.len() >= min && (value.len() - min).is_multiple_of(n) {
                Ok(())
            } else {
                Err(malformed(what, code, value))
            }
        };
        Ok(match code {
            cap::MULTIPROTOCOL => {
                // RFC 4760 §8: AFI (2), Reserved (1), SAFI (1).
                exact(4, "multiprotocol capability must be 4 octets")?;
                if value[2] != 0 {
                    return Ok(unknown());
                }
                let afi = u16::from_be_bytes([value[0], value[1]]);
                Capability::Multiprotocol(Family::new(Afi(afi), Safi(value[3])))
            }
            cap::ROUTE_REFRESH => {
                exact(0, "route refresh capability must be empty")?;
                Capability::RouteRefresh
            }
            cap::EXTENDED_MESSAGE => {
                exact(0, "extended message capability must be empty")?;
                Capability::ExtendedMessage
            }
            cap::ENHANCED_ROUTE_REFRESH => {
                exact(0, "enhanced route refresh capability must be empty")?;
                Capability::EnhancedRouteRefresh
            }
            cap::ROLE => {
                // RFC 9234 §4.1: length 1.
                exact(1, "BGP role capability must be 1 octet")?;
                Capability::Role(value[0])
            }
            cap::FOUR_OCTET_AS => {
                exact(4, "4-octet AS capability must be 4 octets")?;
                Capability::FourOctetAs(u32::from_be_bytes([
                    value[0], value[1], value[2], value[3],
                ]))
            }
            cap::EXTENDED_NEXT_HOP => {
                multiple(
                    6,
                    0,
                    "extended next hop capability must be a multiple of 6 octets",
                )?;
                Capability::ExtendedNextHop(
                    value
                        .chunks_exact(6)
                        .map(|c| ExtendedNextHop {
                            nlri_afi: u16::from_be_bytes([c[0], c[1]]),
                            nlri_safi: u16::from_be_bytes([c[2], c[3]]),
                            next_hop_afi: u16::from_be_bytes([c[4], c[5]]),
                        })
                        .collect(),
                )
            }
            cap::GRACEFUL_RESTART => {
                // RFC 4724 §3: 2 octets, then 4 per family.
                multiple(4, 2, "graceful restart capability must be 2 + 4n octets")?;
                let head = u16::from_be_bytes([value[0], value[1]]);
                Capability::GracefulRestart(GracefulRestart {
                    flags: (head >> 12) as u8,
                    restart_time: head & GracefulRestart::MAX_RESTART_TIME,
                    families: value[2..]
                        .chunks_exact(4)
                        .map(|c| GrFamily {
                            family: Family::new(Afi(u16::from_be_bytes([c[0], c[1]])), Safi(c[2])),
                            flags: c[3],
                        })
                        .collect(),
                })
            }
            cap::ADD_PATH => {
                // RFC 7911 §4: AFI (2), SAFI (1), Send/Receive (1), repeated.
                multiple(4, 0, "ADD-PATH capability must be a multiple of 4 octets")?;
                let mut list = Vec::with_capacity(value.len() / 4);
                for c in value.chunks_exact(4) {
                    let Some(mode) = AddPathMode::from_u8(c[3]) else {
                        return Ok(unknown());
                    };
                    list.push((
                        Family::new(Afi(u16::from_be_bytes([c[0], c[1]])), Safi(c[2])),
                        mode,
                    ));
                }
                Capability::AddPath(list)
            }
            cap::LONG_LIVED_GR => {
                // RFC 9494 §3: AFI (2), SAFI (1), Flags (1), Stale Time (3).
                multiple(
                    7,
                    0,
                    "long-lived graceful restart capability must be a multiple of 7 octets",
                )?;
                Capability::LongLivedGracefulRestart(
                    value
                        .chunks_exact(7)
                        .map(|c| LlgrFamily {
                            family: Family::new(Afi(u16::from_be_bytes([c[0], c[1]])), Safi(c[2])),
                            flags: c[3],
                            stale_time: u32::from_be_bytes([0, c[4], c[5], c[6]]),
                        })
                        .collect(),
                )
            }
            cap::FQDN => {
                // Hostname Length (1), Hostname, Domain Name Length (1),
                // Domain Name — and nothing after it.
                let parse = |i| -> wire::Res<'_, (Vec<u8>, Vec<u8>)> {
                    let (i, hl) = wire::u8(i)?;
                    let (i, host) = wire::take(usize::from(hl))(i)?;
                    let (i, dl) = wire::u8(i)?;
                    let (i, dom) = wire::take(usize::from(dl))(i)?;
                    Ok((i, (host.to_vec(), dom.to_vec())))
                };
                match parse(value) {
                    Ok(([], (hostname, domain))) => Capability::Fqdn { hostname, domain },
                    _ => {
                        return Err(malformed(
                            "FQDN capability lengths are inconsistent",
                            code,
                            value,
                        ));
                    }
                }
            }
            _ => unknown(),
        })
    }

    /// Writes the TLV (code, length, value).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.code());
        let len_at = out.len();
        out.push(0);
        match self {
            Capability::Multiprotocol(f) => {
                out.extend_from_slice(&f.afi.0.to_be_bytes());
                out.push(0);
                out.push(f.safi.0);
            }
            Capability::RouteRefresh
            | Capability::ExtendedMessage
            | Capability::EnhancedRouteRefresh => {}
            Capability::Role(r) => out.push(*r),
            Capability::FourOctetAs(asn) => out.extend_from_slice(&asn.to_be_bytes()),
            Capability::ExtendedNextHop(list) => {
                for e in list {
                    out.extend_from_slice(&e.nlri_afi.to_be_bytes());
                    out.extend_from_slice(&e.nlri_safi.to_be_bytes());
                    out.extend_from_slice(&e.next_hop_afi.to_be_bytes());
                }
            }
            Capability::GracefulRestart(gr) => {
                let head = (u16::from(gr.flags & 0x0f) << 12)
                    | (gr.restart_time & GracefulRestart::MAX_RESTART_TIME);
                out.extend_from_slice(&head.to_be_bytes());
                for f in &gr.families {
                    out.extend_from_slice(&f.family.afi.0.to_be_bytes());
                    out.push(f.family.safi.0);
                    out.push(f.flags);
                }
            }
            Capability::AddPath(list) => {
                for (f, mode) in list {
                    out.extend_from_slice(&f.afi.0.to_be_bytes());
                    out.push(f.safi.0);
                    out.push(*mode as u8);
                }
            }
            Capability::LongLivedGracefulRestart(list) => {
                for f in list {
                    out.extend_from_slice(&f.family.afi.0.to_be_bytes());
                    out.push(f.family.safi.0);
                    out.push(f.flags);
                    out.extend_from_slice(&f.stale_time.to_be_bytes()[1..]);
                }
            }
            Capability::Fqdn { hostname, domain } => {
                let host = &hostname[..hostname.len().min(255)];
                let dom = &domain[..domain.len().min(255)];
                out.push(host.len() as u8);
                out.extend_from_slice(host);
                out.push(dom.len() as u8);
                out.extend_from_slice(dom);
            }
            Capability::Unknown { value, .. } => out.extend_from_slice(value),
        }
        // A capability value is at most 255 octets (1-octet length, also in
        // RFC 9072's extended format); our own never come close.
        out[len_at] = u8::try_from(out.len() - len_at - 1).unwrap_or(u8::MAX);
    }

    /// The FQDN capability from strings, cut to 255 octets each.
    pub fn fqdn(hostname: &str, domain: &str) -> Capability {
        Capability::Fqdn {
            hostname: hostname.as_bytes()[..hostname.len().min(255)].to_vec(),
            domain: domain.as_bytes()[..domain.len().min(255)].to_vec(),
        }
    }
}

/// Decodes the capability TLVs inside one optional parameter of type 2.
pub fn decode_list(mut input: &[u8]) -> Result<Vec<Capability>, Error> {
    let mut caps = Vec::new();
    while !input.is_empty() {
        let parse = |i| -> wire::Res<'_, (u8, &[u8])> {
            let (i, code) = wire::u8(i)?;
            let (i, len) = wire::u8(i)?;
            let (i, value) = wire::take(usize::from(len))(i)?;
            Ok((i, (code, value)))
        };
        let (rest, (code, value)) = parse(input).map_err(|_| Error::MalformedOpen {
            reason: "capability runs past the end of its optional parameter",
            data: input.to_vec(),
        })?;
        caps.push(Capability::decode(code, value)?);
        input = rest;
    }
    Ok(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        crate::hex::decode(s).unwrap()
    }

    fn both_ways(bytes: &str, cap: Capability) {
        let bytes = hex(bytes);
        assert_eq!(decode_list(&bytes).unwrap(), vec![cap.clone()], "decode");
        let mut out = Vec::new();
        cap.encode(&mut out);
        assert_eq!(out, bytes, "encode");
    }

    #[test]
    fn vectors_for_every_known_capability() {
        both_ways(
            "0104 0001 0001",
            Capability::Multiprotocol(Family::IPV4_UNICAST),
        );
        both_ways(
            "0104 0002 0001",
            Capability::Multiprotocol(Family::IPV6_UNICAST),
        );
        both_ways("0200", Capability::RouteRefresh);
        both_ways(
            "0506 0001 0001 0002",
            Capability::ExtendedNextHop(vec![ExtendedNextHop {
                nlri_afi: 1,
                nlri_safi: 1,
                next_hop_afi: 2,
            }]),
        );
        both_ways("0600", Capability::ExtendedMessage);
        both_ways("0901 03", Capability::Role(3));
        both_ways(
            "400a c078 0001 0180 0002 0100",
            Capability::GracefulRestart(GracefulRestart {
                flags: 0xc,
                restart_time: 120,
                families: vec![
                    GrFamily {
                        family: Family::IPV4_UNICAST,
                        flags: 0x80,
                    },
                    GrFamily {
                        family: Family::IPV6_UNICAST,
                        flags: 0,
                    },
                ],
            }),
        );
        both_ways("4104 fa56ea01", Capability::FourOctetAs(4_200_000_001));
        both_ways(
            "4508 0001 0103 0002 0101",
            Capability::AddPath(vec![
                (Family::IPV4_UNICAST, AddPathMode::Both),
                (Family::IPV6_UNICAST, AddPathMode::Receive),
            ]),
        );
        both_ways("4600", Capability::EnhancedRouteRefresh);
        both_ways(
            "4707 0001 01 80 000e10",
            Capability::LongLivedGracefulRestart(vec![LlgrFamily {
                family: Family::IPV4_UNICAST,
                flags: 0x80,
                stale_time: 3600,
            }]),
        );
        both_ways("4908 06 6e6f64652d31 00", Capability::fqdn("node-1", ""));
        both_ways(
            "800a 0102030405060708090a",
            Capability::Unknown {
                code: 128,
                value: (1..=10).collect(),
            },
        );
    }

    #[test]
    fn reserved_bits_are_kept_as_bytes() {
        // Non-zero reserved octet in the multiprotocol capability.
        let bytes = hex("0104 0001 0701");
        let caps = decode_list(&bytes).unwrap();
        assert!(matches!(caps[0], Capability::Unknown { code: 1, .. }));
        let mut out = Vec::new();
        caps[0].encode(&mut out);
        assert_eq!(out, bytes);
    }

    fn assert_malformed(bytes: &str) {
        match decode_list(&hex(bytes)) {
            Err(e @ Error::MalformedOpen { .. }) => {
                assert_eq!(
                    (e.code(), e.subcode()),
                    (2, 0),
                    "RFC 4271 §6.2: OPEN / Unspecific"
                );
            }
            other => panic!("{bytes}: expected OPEN Message Error / Unspecific, got {other:?}"),
        }
    }

    #[test]
    fn wrong_lengths_are_open_message_error_unspecific() {
        assert_malformed("4001 00"); // GR shorter than 2
        assert_malformed("4004 0078 0001"); // GR 2 + 2
        assert_malformed("4706 0001 0180 0000"); // LLGR not 7n
        assert_malformed("4905 06 6e6f6465"); // FQDN hostname runs past
        assert_malformed("4909 03 616263 00 ff ff ff"); // FQDN trailing garbage
        assert_malformed("4908 03 616263 05 6162"); // FQDN domain runs past
        assert_malformed("0103 000100"); // MP 3 octets
        assert_malformed("0201 00"); // RR not empty
        assert_malformed("4102 0001"); // 4-octet AS 2 octets
        assert_malformed("4503 000101"); // ADD-PATH not 4n
        assert_malformed("0902 0001"); // role 2 octets
        assert_malformed("4110 fa56"); // TLV runs past the end
    }
}
