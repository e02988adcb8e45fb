//! A TABLE_DUMP_V2 MRT file (RFC 6396 §4.3) holding N IPv4 /32 routes, for
//! `gobgp mrt inject global`, the fastest way into gobgpd's RIB.

/// PEER_INDEX_TABLE followed by one RIB_IPV4_UNICAST record per prefix,
/// each with one entry: ORIGIN IGP, an empty AS_PATH (gobgpd prepends its
/// own AS towards an eBGP peer) and NEXT_HOP `next_hop`.
///
/// Then `padding` more /32s from 198.19.248.0/21 (with NO_ADVERTISE, and
/// gobgpd's export policy rejects them too: it does not honour the
/// community), which gobgpd keeps but never sends: `gobgp mrt inject`
/// returns before gobgpd has taken the tail of the file in, and that tail
/// is lost (about a thousand routes of 100k here). Losing padding instead
/// makes the injection complete without a slow route-by-route repair.
pub fn table_dump(
    prefixes: &[[u8; 4]],
    padding: usize,
    next_hop: [u8; 4],
    peer_id: [u8; 4],
) -> Vec<u8> {
    const TABLE_DUMP_V2: u16 = 13;
    const PEER_INDEX_TABLE: u16 = 1;
    const RIB_IPV4_UNICAST: u16 = 2;
    let mut out = Vec::with_capacity(prefixes.len() * 40 + 64);
    let record = |out: &mut Vec<u8>, subtype: u16, body: &[u8]| {
        out.extend_from_slice(&0u32.to_be_bytes()); // timestamp
        out.extend_from_slice(&TABLE_DUMP_V2.to_be_bytes());
        out.extend_from_slice(&subtype.to_be_bytes());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
    };
    // Collector BGP ID, no view name, one peer: IPv4 address, 4-octet AS.
    let mut peers = Vec::new();
    peers.extend_from_slice(&peer_id);
    peers.extend_from_slice(&0u16.to_be_bytes());
    peers.extend_from_slice(&1u16.to_be_bytes());
    peers.push(0b10); // AS4, IPv4
    peers.extend_from_slice(&peer_id);
    peers.extend_from_slice(&next_hop);
    peers.extend_from_slice(&65001u32.to_be_bytes());
    record(&mut out, PEER_INDEX_TABLE, &peers);

    let attrs: Vec<u8> = [
        &[0x40, 1, 1, 0][..], // ORIGIN IGP
        &[0x40, 2, 0][..],    // AS_PATH, empty
        &[0x40, 3, 4][..],    // NEXT_HOP …
        &next_hop[..],        // … its address
    ]
    .concat();
    let padded: Vec<u8> = [&attrs[..], &[0xc0, 8, 4, 0xff, 0xff, 0xff, 0x02][..]].concat();
    let pads = (0..padding.min(2048)).map(|i| [198, 19, 248 + (i >> 8) as u8, i as u8]);
    let mut body = Vec::with_capacity(64);
    let all = prefixes
        .iter()
        .map(|p| (*p, &attrs))
        .chain(pads.map(|p| (p, &padded)));
    for (seq, (prefix, attrs)) in all.enumerate() {
        body.clear();
        body.extend_from_slice(&(seq as u32).to_be_bytes());
        body.push(32);
        body.extend_from_slice(&prefix);
        body.extend_from_slice(&1u16.to_be_bytes()); // entry count
        body.extend_from_slice(&0u16.to_be_bytes()); // peer index
        body.extend_from_slice(&0u32.to_be_bytes()); // originated time
        body.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        body.extend_from_slice(attrs);
        record(&mut out, RIB_IPV4_UNICAST, &body);
    }
    out
}
