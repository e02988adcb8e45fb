//! The BMP encoder, byte for byte against RFC 7854's layouts, and read
//! back with the decoder.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::message::*;

fn header() -> PeerHeader {
    PeerHeader {
        peer_type: PEER_TYPE_GLOBAL,
        flags: flags::O | flags::L,
        distinguisher: 0,
        address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        asn: 65001,
        bgp_id: Ipv4Addr::new(192, 0, 2, 254),
        seconds: 0x5f00_0001,
        micros: 7,
    }
}

/// RFC 7854 §4.2: the 42 octets of the per-peer header, IPv4 address in
/// the last four octets of sixteen.
const PEER_HEADER_V4: [u8; 42] = [
    0,    // peer type: global
    0x50, // flags: L (0x40) and O (0x10), RFC 8671 §4
    0, 0, 0, 0, 0, 0, 0, 0, // distinguisher
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1, // address
    0, 0, 0xfd, 0xe9, // AS 65001
    192, 0, 2, 254, // BGP ID
    0x5f, 0, 0, 1, // seconds
    0, 0, 0, 7, // microseconds
];

#[test]
fn initiation_carries_sys_descr_and_sys_name_rfc7854_4_3() {
    let m = initiation("node-a", "holdfast 1.0");
    let mut want = vec![3, 0, 0, 0, 0, 4]; // RFC 7854 §4.1: version 3, type 4
    want.extend_from_slice(&[0, 1, 0, 12]); // §4.4 type 1 sysDescr
    want.extend_from_slice(b"holdfast 1.0");
    want.extend_from_slice(&[0, 2, 0, 6]); // §4.4 type 2 sysName
    want.extend_from_slice(b"node-a");
    let len = want.len() as u32;
    want[1..5].copy_from_slice(&len.to_be_bytes());
    assert_eq!(m, want);
    let (d, used) = decode(&m).unwrap();
    assert_eq!(used, m.len());
    assert_eq!(d.msg_type, msg_type::INITIATION);
    let t = tlvs(d.body).unwrap();
    assert_eq!(
        t,
        vec![(1u16, &b"holdfast 1.0"[..]), (2u16, &b"node-a"[..])]
    );
}

#[test]
fn termination_says_administratively_closed_rfc7854_4_5() {
    let m = termination("bye");
    let (d, _) = decode(&m).unwrap();
    assert_eq!(d.msg_type, msg_type::TERMINATION);
    assert_eq!(
        tlvs(d.body).unwrap(),
        vec![(0u16, &b"bye"[..]), (1u16, &[0u8, 0][..])]
    );
    assert_eq!(m.len(), 6 + 4 + 3 + 4 + 2);
}

#[test]
fn route_monitoring_is_per_peer_header_then_the_update_rfc7854_4_6() {
    let update = [0xffu8; 23];
    let m = route_monitoring(&header(), &update);
    let mut want = vec![3, 0, 0, 0, 6 + 42 + 23, 0];
    want.extend_from_slice(&PEER_HEADER_V4);
    want.extend_from_slice(&update);
    assert_eq!(m, want);
    let (d, _) = decode(&m).unwrap();
    assert_eq!(d.peer, Some(header()));
    assert_eq!(d.body, &update[..]);
}

#[test]
fn ipv6_peer_sets_v_and_fills_sixteen_octets_rfc7854_4_2() {
    let mut h = header();
    h.address = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let m = route_monitoring(&h, &[]);
    assert_eq!(m[7], 0x80 | 0x50);
    assert_eq!(&m[16..32], &h.address_octets()[..]);
    assert_eq!(decode(&m).unwrap().0.peer, Some(h));
}

impl PeerHeader {
    fn address_octets(&self) -> [u8; 16] {
        match self.address {
            IpAddr::V6(a) => a.octets(),
            IpAddr::V4(a) => a.to_ipv6_compatible().octets(),
        }
    }
}

#[test]
fn peer_up_has_local_address_ports_and_both_opens_rfc7854_4_10() {
    let sent = [1u8; 29];
    let received = [2u8; 33];
    let m = peer_up(
        &header(),
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        50000,
        179,
        &sent,
        &received,
    );
    let mut want = vec![3, 0, 0, 0, 0, 3];
    want.extend_from_slice(&PEER_HEADER_V4);
    want.extend_from_slice(&[0; 12]);
    want.extend_from_slice(&[192, 0, 2, 2]);
    want.extend_from_slice(&[0xc3, 0x50, 0, 179]);
    want.extend_from_slice(&sent);
    want.extend_from_slice(&received);
    let len = want.len() as u32;
    want[1..5].copy_from_slice(&len.to_be_bytes());
    assert_eq!(m, want);
    assert_eq!(len as usize, 6 + 42 + 20 + 29 + 33);
}

#[test]
fn peer_down_reasons_rfc7854_4_9() {
    let n = vec![0xff; 21];
    let cases = [
        (DownReason::LocalNotification(n.clone()), 1u8, n.clone()),
        (DownReason::LocalNoNotification(8), 2, vec![0, 8]),
        (DownReason::RemoteNotification(n.clone()), 3, n.clone()),
        (DownReason::RemoteNoData, 4, vec![]),
        (DownReason::Deconfigured, 5, vec![]),
    ];
    for (reason, code, data) in cases {
        let m = peer_down(&header(), &reason);
        let (d, used) = decode(&m).unwrap();
        assert_eq!(used, 6 + 42 + 1 + data.len());
        assert_eq!(d.msg_type, msg_type::PEER_DOWN);
        assert_eq!(d.body[0], code);
        assert_eq!(&d.body[1..], &data[..]);
    }
}

#[test]
fn stats_report_counts_adj_rib_out_rfc8671_5() {
    let m = stats_report(
        &header(),
        &[
            Stat::Gauge(stat_type::ADJ_RIB_OUT_POST, 100_000),
            Stat::PerFamily(stat_type::PER_AFI_SAFI_ADJ_RIB_OUT_POST, 1, 1, 99_999),
        ],
    );
    let mut want = vec![3, 0, 0, 0, 0, 1];
    want.extend_from_slice(&PEER_HEADER_V4);
    want.extend_from_slice(&[0, 0, 0, 2]); // RFC 7854 §4.8: Stats Count
    want.extend_from_slice(&[0, 15, 0, 8]);
    want.extend_from_slice(&100_000u64.to_be_bytes());
    want.extend_from_slice(&[0, 17, 0, 11, 0, 1, 1]);
    want.extend_from_slice(&99_999u64.to_be_bytes());
    let len = want.len() as u32;
    want[1..5].copy_from_slice(&len.to_be_bytes());
    assert_eq!(m, want);
}

#[test]
fn decoder_refuses_what_is_not_whole() {
    let m = route_monitoring(&header(), &[0; 19]);
    assert!(decode(&m[..m.len() - 1]).is_err());
    assert!(decode(&m[..5]).is_err());
    let mut v2 = m.clone();
    v2[0] = 2;
    assert!(decode(&v2).is_err());
}
