//! GTSM (RFC 5082) between real sockets, over `lo` of a fresh network
//! namespace per test. Loopback does not decrement the TTL, so the client's
//! outgoing TTL is what the listener sees: TTL 254 stands for "one hop too
//! far".

mod common;

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU8;

use common::*;
use holdfast_sockopt::{saved_syn_ttl, set_min_ttl, set_save_syn, set_ttl, set_ttl_security};
use socket2::{Domain, Socket};

/// The counter the kernel bumps when IP_MINTTL / IPV6_MINHOPCOUNT drops a
/// segment.
const MIN_TTL_DROP: &str = "TCPMinTTLDrop";

/// Connects `client` to `to`: it must complete (and data flow) or the SYN
/// must be dropped by the minimum-TTL check.
fn attempt(listener: &Socket, mut client: Socket, to: SocketAddr, connects: bool) {
    if connects {
        connect_ok(&client, to);
        let (mut server, _) = accept(listener);
        exchange(&mut client, &mut server);
    } else {
        let before = tcp_ext(MIN_TTL_DROP);
        connect_times_out(&client, to);
        assert_nothing_to_accept(listener);
        let after = tcp_ext(MIN_TTL_DROP);
        assert!(
            after > before,
            "TcpExt {MIN_TTL_DROP} did not go up ({before} -> {after})"
        );
    }
}

/// A client from `source` sending with `ttl`.
fn client_with_ttl(source: IpAddr, ttl: u8) -> Socket {
    let sock = client_from(source);
    set_ttl(&sock, ttl).expect("setting the client's TTL");
    sock
}

/// Listener with minimum TTL 255: TTL 255 connects, 254 is dropped.
fn min_ttl_255(server: IpAddr, client: IpAddr) {
    let listener = listener_on(server);
    set_min_ttl(&listener, 255).expect("setting the minimum TTL");
    let to = SocketAddr::new(server, port_of(&listener));
    attempt(&listener, client_with_ttl(client, 255), to, true);
    attempt(&listener, client_with_ttl(client, 254), to, false);
    // The default TTL / hop limit (64) is far below.
    attempt(&listener, client_from(client), to, false);
}

netns_test! {
    fn ipv4_min_ttl_255_accepts_ttl_255_and_drops_254() {
        min_ttl_255(ip(SERVER_V4), ip(CLIENT_V4));
    }
}

netns_test! {
    fn ipv6_min_hop_count_255_accepts_255_and_drops_254() {
        min_ttl_255(ip(SERVER_V6), ip(CLIENT_V6));
    }
}

netns_test! {
    /// A dual-stack IPv6 listener checks IPv4 peers too: that takes
    /// IP_MINTTL on the IPv6 socket, which set_min_ttl sets beside
    /// IPV6_MINHOPCOUNT.
    fn dual_stack_listener_checks_ipv4_and_ipv6_peers() {
        let listener = dual_stack_listener();
        set_min_ttl(&listener, 255).unwrap();
        let port = port_of(&listener);
        let v4 = SocketAddr::new(ip(SERVER_V4), port);
        let v6 = SocketAddr::new(ip(SERVER_V6), port);
        attempt(&listener, client_with_ttl(ip(CLIENT_V4), 255), v4, true);
        attempt(&listener, client_with_ttl(ip(CLIENT_V4), 254), v4, false);
        attempt(&listener, client_with_ttl(ip(CLIENT_V6), 255), v6, true);
        attempt(&listener, client_with_ttl(ip(CLIENT_V6), 254), v6, false);
    }
}

netns_test! {
    /// An IPv6 client socket reaching an IPv4 server through an IPv4-mapped
    /// address sends IPv4 packets: their TTL is IP_TTL, not the hop limit.
    /// set_ttl sets both; the hop limit alone is not enough.
    fn ipv6_client_socket_to_an_ipv4_mapped_server_sends_the_ttl_it_was_given() {
        let listener = listener_on(ip(SERVER_V4));
        set_min_ttl(&listener, 255).unwrap();
        let to = SocketAddr::new(ip(&format!("::ffff:{SERVER_V4}")), port_of(&listener));
        let mapped_client = || {
            let sock = tcp_socket(Domain::IPV6);
            bind_client(&sock, ip(&format!("::ffff:{CLIENT_V4}")));
            sock
        };

        let hop_limit_only = mapped_client();
        hop_limit_only.set_unicast_hops_v6(255).unwrap();
        attempt(&listener, hop_limit_only, to, false);

        let with_255 = mapped_client();
        set_ttl(&with_255, 255).unwrap();
        attempt(&listener, with_255, to, true);

        let with_254 = mapped_client();
        set_ttl(&with_254, 254).unwrap();
        attempt(&listener, with_254, to, false);
    }
}

netns_test! {
    /// ttl-security hops 2: send with 255, accept 254 and up (RFC 5082 §3).
    fn ttl_security_hops_sets_both_ends_of_the_rule() {
        for (server, client) in [(SERVER_V4, CLIENT_V4), (SERVER_V6, CLIENT_V6)] {
            let listener = listener_on(ip(server));
            set_ttl_security(&listener, NonZeroU8::new(2).unwrap()).unwrap();
            let to = SocketAddr::new(ip(server), port_of(&listener));
            attempt(&listener, client_with_ttl(ip(client), 254), to, true);
            attempt(&listener, client_with_ttl(ip(client), 253), to, false);

            // Both ends with ttl-security hops 1: the client's own
            // set_ttl_security sends with 255, and the listener's SYN-ACK
            // (255, inherited from the listener) passes the client's check.
            let listener = listener_on(ip(server));
            set_ttl_security(&listener, NonZeroU8::MIN).unwrap();
            let to = SocketAddr::new(ip(server), port_of(&listener));
            let sock = client_from(ip(client));
            set_ttl_security(&sock, NonZeroU8::MIN).unwrap();
            attempt(&listener, sock, to, true);
        }
    }
}

netns_test! {
    /// The client's own minimum TTL applies to the SYN-ACK: a listener that
    /// answers with TTL 254 never completes the handshake.
    fn client_min_ttl_drops_a_syn_ack_from_too_far() {
        let listener = listener_on(ip(SERVER_V4));
        set_ttl(&listener, 254).unwrap();
        let to = SocketAddr::new(ip(SERVER_V4), port_of(&listener));
        let sock = client_with_ttl(ip(CLIENT_V4), 255);
        set_min_ttl(&sock, 255).unwrap();
        attempt(&listener, sock, to, false);
    }
}

netns_test! {
    /// set_min_ttl(0) turns the check off again.
    fn min_ttl_0_turns_the_check_off() {
        for (server, client) in [(SERVER_V4, CLIENT_V4), (SERVER_V6, CLIENT_V6)] {
            let listener = listener_on(ip(server));
            let to = SocketAddr::new(ip(server), port_of(&listener));
            set_min_ttl(&listener, 255).unwrap();
            attempt(&listener, client_from(ip(client)), to, false);
            set_min_ttl(&listener, 0).unwrap();
            attempt(&listener, client_from(ip(client)), to, true);
        }
    }
}

netns_test! {
    /// A listener with TCP_SAVE_SYN tells each accepted connection the TTL
    /// its SYN arrived with (loopback does not decrement it), once; an
    /// IPv4-mapped connection on a dual-stack listener gives the IPv4 TTL.
    /// Without TCP_SAVE_SYN there is nothing to tell.
    fn saved_syn_gives_the_ttl_the_syn_arrived_with() {
        let listener = dual_stack_listener();
        set_save_syn(&listener).expect("TCP_SAVE_SYN");
        let port = port_of(&listener);
        for (server, client, ttl) in [(SERVER_V4, CLIENT_V4, 254), (SERVER_V6, CLIENT_V6, 253)] {
            let sock = client_with_ttl(ip(client), ttl);
            connect_ok(&sock, SocketAddr::new(ip(server), port));
            let (accepted, _) = accept(&listener);
            assert_eq!(saved_syn_ttl(&accepted).expect("TCP_SAVED_SYN"), Some(ttl), "{client}");
            assert_eq!(saved_syn_ttl(&accepted).expect("TCP_SAVED_SYN"), None, "read once");
        }
        let plain = listener_on(ip(SERVER_V4));
        let sock = client_with_ttl(ip(CLIENT_V4), 254);
        connect_ok(&sock, SocketAddr::new(ip(SERVER_V4), port_of(&plain)));
        let (accepted, _) = accept(&plain);
        assert_eq!(saved_syn_ttl(&accepted).expect("TCP_SAVED_SYN"), None);
    }
}
