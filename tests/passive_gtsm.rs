//! The passive side (`speaker.listen`) against FRR two routed hops away:
//! the TTL of what holdfast sends (`ebgp_multihop`) and GTSM (`ttl_security`,
//! RFC 5082) apply to accepted connections as they do to the ones holdfast
//! opens, and GTSM is checked by the listening socket on the handshake
//! itself (RFC 5082 §3), so a SYN from too far away never becomes a
//! connection. holdfast's peers are passive: FRR always connects.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use testlab::Netns;

const VIP: &str = "198.51.100.90";
const VIP_PREFIX: &str = "198.51.100.90/32";
/// How long a session that must not come up is watched: several of FRR's
/// 1 s connect retries and more than our 9 s hold time's worth of chances.
const NEVER: Duration = Duration::from_secs(12);

/// The node's `TcpExt: TCPMinTTLDrop` counter: segments the kernel dropped
/// for arriving below a socket's minimum TTL. A missing counter fails.
fn min_ttl_drops(ns: &Netns) -> u64 {
    tcp_ext(ns, "TCPMinTTLDrop")
}

struct Outcome {
    log: String,
    min_ttl_drops: u64,
}

/// FRR (with `frr_extra` for our neighbor, `NODE` standing for our
/// address) connects to holdfast's passive peer "tor" (`tor` adds to it;
/// `other_peers` are more peers); the session must come up and carry the
/// VIP, or never come up for `NEVER`.
fn case(
    frr_extra: &str,
    tor: impl FnOnce(Peer) -> Peer,
    other_peers: &[Peer],
    establishes: bool,
) -> Outcome {
    let node_addr = testlab::lab::routed::NODE_V4.to_string();
    let router_addr = testlab::lab::routed::ROUTER_V4.to_string();
    let (lab, frr) = Tor::new()
        .routed()
        .lines(&frr_extra.replace("NODE", &node_addr))
        .start();
    let conf = Config::node(65001, &node_addr)
        .listen("0.0.0.0:179")
        .peer(tor(Peer::new("tor", &router_addr, 65000)
            .passive()
            .hold_time("9s")
            .keepalive("3s")
            .families(&["ipv4-unicast"])));
    let conf = other_peers
        .iter()
        .cloned()
        .fold(conf, Config::peer)
        .stability(Stability::new())
        .advertisement(Advertisement::new("public"));
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&[VIP]));
    let neighbor: IpAddr = node_addr.parse().unwrap();
    if establishes {
        frr.wait_established(neighbor, LONG);
        let route = frr.wait_prefix(VIP_PREFIX, LONG);
        assert_eq!(
            route["paths"][0]["nexthops"][0]["ip"],
            node_addr.as_str(),
            "{route}"
        );
        let n = frr.neighbor(neighbor);
        // FRR connected to our listener.
        assert_eq!(n["portForeign"], 179, "{n}");
        testlab::wait_until(LONG, "holdfast's session to be Established", || {
            (node.peer_state("tor") == "Established").then_some(())
        });
    } else {
        let start = Instant::now();
        while start.elapsed() < NEVER {
            let frr_state = frr.state(neighbor);
            let ours = node.peer_state("tor");
            assert!(
                frr_state != "Established" && ours != "Established",
                "the session came up (FRR {frr_state}, holdfast {ours}):\n{}",
                node.log()
            );
            assert!(frr.prefix(VIP_PREFIX).is_none(), "FRR got the VIP");
            std::thread::sleep(Duration::from_millis(500));
        }
        // FRR kept trying all along.
        let n = frr.neighbor(neighbor);
        assert_ne!(n["bgpState"], "Idle (Admin)", "{n}");
    }
    Outcome {
        log: node.log(),
        min_ttl_drops: min_ttl_drops(&lab.node),
    }
}

#[test]
fn passive_side_ttl_and_gtsm_two_hops_away() {
    testlab::require_root();
    std::thread::scope(|s| {
        // GTSM on both sides, 2 hops: FRR's SYN arrives with TTL 254, which
        // the listener's minimum (254) admits; our SYN-ACK and everything
        // after go out with TTL 255, which FRR's minimum (254) needs.
        let gtsm_2 = s.spawn(|| {
            case(
                " neighbor NODE ttl-security hops 2\n",
                |p| p.ebgp_multihop(2).ttl_security(),
                &[],
                true,
            )
        });
        // GTSM for a direct neighbour (minimum TTL 255) but FRR is 2 hops
        // away: its SYNs (TTL 254) are dropped by the listening socket, no
        // connection is ever accepted.
        let gtsm_1 = s.spawn(|| {
            case(
                " neighbor NODE ttl-security hops 2\n",
                |p| p.ttl_security(),
                &[],
                false,
            )
        });
        // The same, with a second peer without GTSM on the listener: the
        // listener cannot check (that peer's router may send TTL 1), so the
        // kernel completes the handshake, but holdfast holds the SYN's TTL
        // against the peer's own minimum and closes the connection unread.
        let gtsm_1_shared = s.spawn(|| {
            case(
                " neighbor NODE ttl-security hops 2\n",
                |p| p.ttl_security(),
                &[Peer::new("other", "192.0.2.77", 65002).passive()],
                false,
            )
        });
        // ebgp_multihop on the passive side: with 2 the SYN-ACK reaches FRR
        // 2 hops away; with 1 it dies at the hop in between.
        let multihop_2 = s.spawn(|| {
            case(
                " neighbor NODE ebgp-multihop 2\n",
                |p| p.ebgp_multihop(2),
                &[],
                true,
            )
        });
        let multihop_1 = s.spawn(|| case(" neighbor NODE ebgp-multihop 2\n", |p| p, &[], false));

        let gtsm_2 = gtsm_2.join().expect("GTSM, 2 hops");
        assert!(
            gtsm_2.log.contains("connection from 192.0.2.130"),
            "{}",
            gtsm_2.log
        );

        let gtsm_1 = gtsm_1.join().expect("GTSM for 1 hop, FRR 2 hops away");
        assert!(
            !gtsm_1.log.contains("connection from"),
            "a connection was accepted: {}",
            gtsm_1.log
        );
        assert!(
            gtsm_1.min_ttl_drops > 0,
            "the kernel dropped no SYN for its TTL"
        );
        assert!(!gtsm_1.log.contains("GTSM: the SYN"), "{}", gtsm_1.log);

        let shared = gtsm_1_shared
            .join()
            .expect("GTSM for 1 hop, FRR 2 hops away, listener shared");
        assert!(
            shared.log.contains("connection from 192.0.2.130:")
                && shared
                    .log
                    .contains("refused: GTSM: the SYN arrived with TTL 254, below the minimum 255"),
            "{}",
            shared.log
        );

        multihop_2.join().expect("ebgp_multihop = 2");
        let multihop_1 = multihop_1.join().expect("ebgp_multihop = 1");
        assert!(
            !multihop_1.log.contains("Established"),
            "{}",
            multihop_1.log
        );
    });
}
