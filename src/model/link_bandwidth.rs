//! ECMP weighted by endpoints: the link-bandwidth extended community and
//! the limiter that keeps a scale-up burst to one UPDATE. Pure: counts and
//! instants in, counts out.
//!
//! With `[[advertisement]] link_bandwidth = "per-endpoint"` a route carries
//! the link-bandwidth extended community (draft-ietf-idr-link-bandwidth
//! §3) with a value of [`UNIT_BYTES_PER_SECOND`] per ready local endpoint
//! of its Service on this node (eTP Local), or one unit (eTP Cluster: every
//! node serves the whole Service). A router that weights ECMP by it (FRR:
//! `bgp bestpath bandwidth`) then spreads a Service's traffic over the nodes
//! in proportion to their endpoints, which is what eTP Local needs and
//! equal-cost multipath cannot do.
//!
//! A changed count is a changed attribute, announced by replacing the route
//! (one UPDATE, RFC 4271 §3.1: a new path implicitly replaces the old one,
//! never a withdrawal first). Pods of a Deployment become ready one by one
//! over seconds, so a changed count is published only once it has stood
//! still for [`SETTLE`], and at the latest [`MAX_WAIT`] after the first
//! unpublished change: a burst costs one UPDATE, a continuous drizzle one
//! UPDATE per `MAX_WAIT`. A VIP's first count is published at once: the
//! route is new, there is nothing to replace.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a changed count must hold before it is published.
pub const SETTLE: Duration = Duration::from_secs(2);
/// The longest a changed count waits while it keeps changing.
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// One endpoint's worth of link bandwidth: 1 Gbit/s, in bytes per second
/// as the community carries it. FRR converts the value to Mbit/s (integer)
/// before it weights, so a unit must be well above 1 Mbit/s; the exact
/// figure does not matter, only the ratios between nodes.
pub const UNIT_BYTES_PER_SECOND: f32 = 125_000_000.0;

/// The two-octet AS used as global administrator when ours needs four
/// octets (RFC 6793 §9: AS_TRANS).
const AS_TRANS: u16 = 23456;

/// The link-bandwidth extended community for `units` endpoints
/// (draft-ietf-idr-link-bandwidth §3): type 0x40 (two-octet AS specific,
/// non-transitive bit set, RFC 4360 §3.1), sub-type 0x04, the global
/// administrator our AS (AS_TRANS for a four-octet AS), the value the
/// bandwidth in bytes per second as an IEEE 754 single-precision float.
pub fn link_bandwidth_community(local_asn: u32, units: u32) -> [u8; 8] {
    let asn = u16::try_from(local_asn).unwrap_or(AS_TRANS);
    let bandwidth = (units as f32) * UNIT_BYTES_PER_SECOND;
    let mut out = [0u8; 8];
    out[0] = 0x40;
    out[1] = 0x04;
    out[2..4].copy_from_slice(&asn.to_be_bytes());
    out[4..8].copy_from_slice(&bandwidth.to_bits().to_be_bytes());
    out
}

/// A changed count not yet published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    count: u32,
    /// When the count last changed.
    changed: Instant,
    /// When the published count was first left behind.
    first: Instant,
}

impl Pending {
    fn due(&self) -> Instant {
        (self.changed + SETTLE).min(self.first + MAX_WAIT)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    published: u32,
    pending: Option<Pending>,
}

/// The published endpoint count of each VIP, and the changes waiting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settle {
    entries: BTreeMap<IpAddr, Entry>,
}

impl Settle {
    /// The limiter after seeing `counts` (every VIP that carries the
    /// community, with its current count) at `now`. VIPs not in `counts`
    /// are forgotten.
    pub fn step(&self, counts: &BTreeMap<IpAddr, u32>, now: Instant) -> Settle {
        let entries = counts
            .iter()
            .map(|(ip, &count)| {
                let mut e = match self.entries.get(ip) {
                    None => {
                        return (
                            *ip,
                            Entry {
                                published: count,
                                pending: None,
                            },
                        );
                    }
                    Some(e) => *e,
                };
                e.pending = if count == e.published {
                    None
                } else {
                    Some(match e.pending {
                        Some(p) if p.count == count => p,
                        Some(p) => Pending {
                            count,
                            changed: now,
                            first: p.first,
                        },
                        None => Pending {
                            count,
                            changed: now,
                            first: now,
                        },
                    })
                };
                if let Some(p) = e.pending
                    && now >= p.due()
                {
                    e.published = p.count;
                    e.pending = None;
                }
                (*ip, e)
            })
            .collect();
        Settle { entries }
    }

    /// The count `ip`'s route carries now.
    pub fn published(&self, ip: IpAddr) -> Option<u32> {
        self.entries.get(&ip).map(|e| e.published)
    }

    /// The count waiting to replace it, if any.
    pub fn pending(&self, ip: IpAddr) -> Option<u32> {
        self.entries.get(&ip)?.pending.map(|p| p.count)
    }

    /// When the next waiting count is due: the source evaluates again then.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| e.pending.map(|p| p.due()))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip() -> IpAddr {
        "198.51.100.10".parse().unwrap()
    }

    fn counts(n: u32) -> BTreeMap<IpAddr, u32> {
        BTreeMap::from([(ip(), n)])
    }

    #[test]
    fn the_community_is_type_0x40_subtype_4_with_a_float_in_bytes_per_second() {
        let c = link_bandwidth_community(65001, 3);
        assert_eq!(&c[..4], &[0x40, 0x04, 0xfd, 0xe9]);
        assert_eq!(
            f32::from_bits(u32::from_be_bytes([c[4], c[5], c[6], c[7]])),
            375e6
        );
        // Four-octet AS: AS_TRANS as global administrator.
        let c = link_bandwidth_community(4_200_000_000, 1);
        assert_eq!(&c[2..4], &23456u16.to_be_bytes());
        assert_eq!(
            f32::from_bits(u32::from_be_bytes([c[4], c[5], c[6], c[7]])),
            125e6
        );
    }

    #[test]
    fn a_first_count_is_published_at_once() {
        let t0 = Instant::now();
        let s = Settle::default().step(&counts(1), t0);
        assert_eq!(s.published(ip()), Some(1));
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn a_burst_is_published_once_when_it_settles() {
        let t0 = Instant::now();
        let s = Settle::default().step(&counts(1), t0);
        // Pods become ready one by one, 500 ms apart.
        let s = s.step(&counts(2), t0 + Duration::from_millis(500));
        assert_eq!(s.published(ip()), Some(1), "held while it may still move");
        assert_eq!(s.pending(ip()), Some(2));
        let s = s.step(&counts(3), t0 + Duration::from_millis(1000));
        assert_eq!(s.published(ip()), Some(1));
        assert_eq!(
            s.next_due(),
            Some(t0 + Duration::from_millis(1000) + SETTLE)
        );
        let s = s.step(&counts(3), t0 + Duration::from_millis(2999));
        assert_eq!(
            s.published(ip()),
            Some(1),
            "not yet SETTLE since the last change"
        );
        let s = s.step(&counts(3), t0 + Duration::from_millis(3000));
        assert_eq!(s.published(ip()), Some(3), "one change: 1 -> 3");
        assert_eq!(s.next_due(), None);
    }

    #[test]
    fn a_change_that_comes_back_publishes_nothing() {
        let t0 = Instant::now();
        let s = Settle::default().step(&counts(2), t0);
        let s = s.step(&counts(1), t0 + Duration::from_millis(100));
        let s = s.step(&counts(2), t0 + Duration::from_millis(200));
        assert_eq!(s.next_due(), None);
        let s = s.step(&counts(2), t0 + Duration::from_secs(30));
        assert_eq!(s.published(ip()), Some(2));
    }

    #[test]
    fn a_count_that_keeps_changing_is_published_after_max_wait() {
        let t0 = Instant::now();
        let mut s = Settle::default().step(&counts(1), t0);
        let mut published = Vec::new();
        // A new count every second for 25 s.
        for i in 1..=25u32 {
            s = s.step(&counts(1 + i), t0 + Duration::from_secs(u64::from(i)));
            published.push(s.published(ip()).unwrap());
        }
        published.dedup();
        // Changes first left behind at 1 s: published at 11 s (count 12),
        // then left behind at 12 s: published at 22 s (count 23).
        assert_eq!(published, [1, 12, 23]);
    }

    #[test]
    fn a_vip_gone_is_forgotten() {
        let t0 = Instant::now();
        let s = Settle::default().step(&counts(1), t0);
        let s = s.step(&BTreeMap::new(), t0 + Duration::from_secs(1));
        assert_eq!(s.published(ip()), None);
        let s = s.step(&counts(3), t0 + Duration::from_secs(2));
        assert_eq!(s.published(ip()), Some(3), "back: new, published at once");
    }
}
