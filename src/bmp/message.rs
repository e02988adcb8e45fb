//! BMP messages (RFC 7854, with RFC 8671's Adj-RIB-Out), encoded: pure
//! builders of whole messages, bytes out.

use std::net::{IpAddr, Ipv4Addr};

/// RFC 7854 §4.1: the version of the protocol.
pub const VERSION: u8 = 3;

/// RFC 7854 §4.1: the common header is six octets.
pub const COMMON_HEADER_LEN: usize = 6;

/// RFC 7854 §4.2: the per-peer header is 42 octets.
pub const PEER_HEADER_LEN: usize = 42;

/// RFC 7854 §4.1 message types.
pub mod msg_type {
    pub const ROUTE_MONITORING: u8 = 0;
    pub const STATISTICS_REPORT: u8 = 1;
    pub const PEER_DOWN: u8 = 2;
    pub const PEER_UP: u8 = 3;
    pub const INITIATION: u8 = 4;
    pub const TERMINATION: u8 = 5;
}

/// The name of a message type, as the metrics label it.
pub fn type_name(t: u8) -> &'static str {
    match t {
        msg_type::ROUTE_MONITORING => "route_monitoring",
        msg_type::STATISTICS_REPORT => "statistics_report",
        msg_type::PEER_DOWN => "peer_down",
        msg_type::PEER_UP => "peer_up",
        msg_type::INITIATION => "initiation",
        msg_type::TERMINATION => "termination",
        _ => "other",
    }
}

/// Per-peer header flags (RFC 7854 §4.2, RFC 8671 §4).
pub mod flags {
    /// V: the peer address is IPv6 (RFC 7854 §4.2).
    pub const V: u8 = 0x80;
    /// L: post-policy (RFC 7854 §4.2; for the Adj-RIB-Out, RFC 8671 §4:
    /// after the outbound policy).
    pub const L: u8 = 0x40;
    /// A: the AS_PATH is in the legacy 2-octet format (RFC 7854 §4.2).
    pub const A: u8 = 0x20;
    /// O: Adj-RIB-Out, not Adj-RIB-In (RFC 8671 §4).
    pub const O: u8 = 0x10;
}

/// RFC 7854 §4.2: a Global Instance Peer.
pub const PEER_TYPE_GLOBAL: u8 = 0;

/// RFC 7854 §4.4 Information TLV types (Initiation).
pub mod info_type {
    pub const STRING: u16 = 0;
    pub const SYS_DESCR: u16 = 1;
    pub const SYS_NAME: u16 = 2;
}

/// RFC 7854 §4.5 Termination: the reason TLV and the reason
/// "administratively closed".
pub const TERMINATION_TLV_REASON: u16 = 1;
pub const TERMINATION_ADMIN_CLOSE: u16 = 0;

/// RFC 8671 §5 statistics types (the post-policy Adj-RIB-Out).
pub mod stat_type {
    /// Number of routes in the post-policy Adj-RIB-Out (64-bit gauge).
    pub const ADJ_RIB_OUT_POST: u16 = 15;
    /// Number of routes in the per-AFI/SAFI post-policy Adj-RIB-Out
    /// (AFI, SAFI, 64-bit gauge).
    pub const PER_AFI_SAFI_ADJ_RIB_OUT_POST: u16 = 17;
}

/// The per-peer header (RFC 7854 §4.2): with the O flag, the peer the
/// PDU is sent to (RFC 8671 §4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerHeader {
    pub peer_type: u8,
    /// Without V, which [`PeerHeader::encode`] sets from `address`.
    pub flags: u8,
    pub distinguisher: u64,
    pub address: IpAddr,
    pub asn: u32,
    pub bgp_id: Ipv4Addr,
    /// Seconds and microseconds since the epoch; zero: not available.
    pub seconds: u32,
    pub micros: u32,
}

/// A 16-octet address field: IPv4 in the last four octets, the twelve
/// before zero (RFC 7854 §4.2, §4.10).
fn address16(a: IpAddr, out: &mut Vec<u8>) {
    match a {
        IpAddr::V4(v4) => {
            out.extend_from_slice(&[0; 12]);
            out.extend_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}

impl PeerHeader {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.peer_type);
        let v = if self.address.is_ipv6() { flags::V } else { 0 };
        out.push(self.flags | v);
        out.extend_from_slice(&self.distinguisher.to_be_bytes());
        address16(self.address, out);
        out.extend_from_slice(&self.asn.to_be_bytes());
        out.extend_from_slice(&self.bgp_id.octets());
        out.extend_from_slice(&self.seconds.to_be_bytes());
        out.extend_from_slice(&self.micros.to_be_bytes());
    }
}

/// A whole message: the common header (RFC 7854 §4.1: version, length of
/// the whole message, type) and `body`.
fn message(t: u8, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = vec![VERSION, 0, 0, 0, 0, t];
    body(&mut out);
    let len = out.len() as u32;
    out[1..5].copy_from_slice(&len.to_be_bytes());
    out
}

fn tlv(t: u16, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&t.to_be_bytes());
    // An information string longer than a TLV holds is cut.
    let value = &value[..value.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(value.len() as u16).to_be_bytes());
    out.extend_from_slice(value);
}

/// Initiation (RFC 7854 §4.3): sysDescr and sysName TLVs (§4.4; both are
/// required in an Initiation message).
pub fn initiation(sys_name: &str, sys_descr: &str) -> Vec<u8> {
    message(msg_type::INITIATION, |out| {
        tlv(info_type::SYS_DESCR, sys_descr.as_bytes(), out);
        tlv(info_type::SYS_NAME, sys_name.as_bytes(), out);
    })
}

/// Termination (RFC 7854 §4.5): reason "administratively closed" and a
/// string saying why.
pub fn termination(why: &str) -> Vec<u8> {
    message(msg_type::TERMINATION, |out| {
        tlv(info_type::STRING, why.as_bytes(), out);
        tlv(
            TERMINATION_TLV_REASON,
            &TERMINATION_ADMIN_CLOSE.to_be_bytes(),
            out,
        );
    })
}

/// Route Monitoring (RFC 7854 §4.6): the per-peer header and one whole
/// BGP UPDATE as it was sent.
pub fn route_monitoring(peer: &PeerHeader, update: &[u8]) -> Vec<u8> {
    message(msg_type::ROUTE_MONITORING, |out| {
        peer.encode(out);
        out.extend_from_slice(update);
    })
}

/// Peer Up (RFC 7854 §4.10): the session's local address and ports and
/// both OPEN messages, whole.
pub fn peer_up(
    peer: &PeerHeader,
    local: IpAddr,
    local_port: u16,
    remote_port: u16,
    sent_open: &[u8],
    received_open: &[u8],
) -> Vec<u8> {
    message(msg_type::PEER_UP, |out| {
        peer.encode(out);
        address16(local, out);
        out.extend_from_slice(&local_port.to_be_bytes());
        out.extend_from_slice(&remote_port.to_be_bytes());
        out.extend_from_slice(sent_open);
        out.extend_from_slice(received_open);
    })
}

/// Why a session went down (RFC 7854 §4.9 reason codes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DownReason {
    /// 1: we closed it with this NOTIFICATION (the whole BGP message).
    LocalNotification(Vec<u8>),
    /// 2: we closed it without a NOTIFICATION; the FSM event code (0:
    /// none relevant).
    LocalNoNotification(u16),
    /// 3: the peer closed it with this NOTIFICATION (the whole message).
    RemoteNotification(Vec<u8>),
    /// 4: the peer closed it without a NOTIFICATION.
    RemoteNoData,
    /// 5: the peer was removed from the configuration.
    Deconfigured,
}

impl DownReason {
    pub fn code(&self) -> u8 {
        match self {
            DownReason::LocalNotification(_) => 1,
            DownReason::LocalNoNotification(_) => 2,
            DownReason::RemoteNotification(_) => 3,
            DownReason::RemoteNoData => 4,
            DownReason::Deconfigured => 5,
        }
    }
}

/// Peer Down (RFC 7854 §4.9).
pub fn peer_down(peer: &PeerHeader, reason: &DownReason) -> Vec<u8> {
    message(msg_type::PEER_DOWN, |out| {
        peer.encode(out);
        out.push(reason.code());
        match reason {
            DownReason::LocalNotification(n) | DownReason::RemoteNotification(n) => {
                out.extend_from_slice(n)
            }
            DownReason::LocalNoNotification(event) => out.extend_from_slice(&event.to_be_bytes()),
            DownReason::RemoteNoData | DownReason::Deconfigured => {}
        }
    })
}

/// One statistic (RFC 7854 §4.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stat {
    /// A 64-bit gauge of this type.
    Gauge(u16, u64),
    /// A per-AFI/SAFI 64-bit gauge of this type: AFI (2 octets), SAFI (1)
    /// then the gauge.
    PerFamily(u16, u16, u8, u64),
}

/// Stats Report (RFC 7854 §4.8): the count of statistics, then each as
/// type, length, value.
pub fn stats_report(peer: &PeerHeader, stats: &[Stat]) -> Vec<u8> {
    message(msg_type::STATISTICS_REPORT, |out| {
        peer.encode(out);
        out.extend_from_slice(&(stats.len() as u32).to_be_bytes());
        for s in stats {
            match *s {
                Stat::Gauge(t, v) => {
                    out.extend_from_slice(&t.to_be_bytes());
                    out.extend_from_slice(&8u16.to_be_bytes());
                    out.extend_from_slice(&v.to_be_bytes());
                }
                Stat::PerFamily(t, afi, safi, v) => {
                    out.extend_from_slice(&t.to_be_bytes());
                    out.extend_from_slice(&11u16.to_be_bytes());
                    out.extend_from_slice(&afi.to_be_bytes());
                    out.push(safi);
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
        }
    })
}

/// The type of the BGP message `m` (RFC 4271 §4.1: the octet after the
/// marker and the length), if it is whole enough to say.
pub fn bgp_type(m: &[u8]) -> Option<u8> {
    m.get(18).copied()
}

/// A message read back: the tests' decoder, and the driver's check of
/// what it queues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub msg_type: u8,
    pub peer: Option<PeerHeader>,
    /// What follows the common header and the per-peer header.
    pub body: &'a [u8],
}

fn address_from16(b: &[u8], v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        IpAddr::from(a)
    } else {
        IpAddr::from([b[12], b[13], b[14], b[15]])
    }
}

/// Reads one message from the front of `buf`: it and the octets it took.
pub fn decode(buf: &[u8]) -> Result<(Decoded<'_>, usize), &'static str> {
    if buf.len() < COMMON_HEADER_LEN {
        return Err("short common header");
    }
    if buf[0] != VERSION {
        return Err("not version 3");
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len < COMMON_HEADER_LEN || buf.len() < len {
        return Err("bad length");
    }
    let t = buf[5];
    let rest = &buf[COMMON_HEADER_LEN..len];
    let has_peer = !matches!(t, msg_type::INITIATION | msg_type::TERMINATION);
    if !has_peer {
        return Ok((
            Decoded {
                msg_type: t,
                peer: None,
                body: rest,
            },
            len,
        ));
    }
    if rest.len() < PEER_HEADER_LEN {
        return Err("short per-peer header");
    }
    let h = &rest[..PEER_HEADER_LEN];
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let peer = PeerHeader {
        peer_type: h[0],
        flags: h[1] & !flags::V,
        distinguisher: u64::from_be_bytes(h[2..10].try_into().unwrap_or_default()),
        address: address_from16(&h[10..26], h[1] & flags::V != 0),
        asn: be32(26),
        bgp_id: Ipv4Addr::from(be32(30)),
        seconds: be32(34),
        micros: be32(38),
    };
    Ok((
        Decoded {
            msg_type: t,
            peer: Some(peer),
            body: &rest[PEER_HEADER_LEN..],
        },
        len,
    ))
}

/// The TLVs of an Initiation or Termination body (RFC 7854 §4.4).
pub fn tlvs(mut body: &[u8]) -> Result<Vec<(u16, &[u8])>, &'static str> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 4 {
            return Err("short TLV");
        }
        let t = u16::from_be_bytes([body[0], body[1]]);
        let l = u16::from_be_bytes([body[2], body[3]]) as usize;
        if body.len() < 4 + l {
            return Err("TLV overruns");
        }
        out.push((t, &body[4..4 + l]));
        body = &body[4 + l..];
    }
    Ok(out)
}
