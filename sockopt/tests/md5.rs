//! TCP MD5 signatures (RFC 2385) between real sockets, over `lo` of a fresh
//! network namespace per test.
//!
//! A wrong, missing or unexpected key must stop the handshake: the kernel
//! drops the SYN without an answer (RFC 2385 §2.0), so the client's connect
//! times out, and the namespace's `TcpExt` counters say why it dropped it.

mod common;

use std::net::{IpAddr, SocketAddr};

use common::*;
use holdfast_sockopt::{Error, clear_md5_key, set_md5_key};
use socket2::{Domain, Socket};

const KEY_A: &[u8] = b"tor1-node7-secret";
const KEY_B: &[u8] = b"a different secret";

/// What one connection attempt must run into.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Handshake completes, data flows.
    Connects,
    /// SYN dropped; this `TcpExt` counter goes up by at least one.
    DroppedAs(&'static str),
}

/// A listener on `server` with `listener_key` for `client`; a client from
/// `client` with `client_key` for `server`, set before connect.
fn md5_case(
    server: IpAddr,
    client: IpAddr,
    listener_key: Option<&[u8]>,
    client_key: Option<&[u8]>,
    expect: Expect,
) {
    let listener = listener_on(server);
    if let Some(key) = listener_key {
        set_md5_key(&listener, client, key).expect("key on the listener");
    }
    let sock = client_from(client);
    if let Some(key) = client_key {
        set_md5_key(&sock, server, key).expect("key on the client");
    }
    attempt(
        &listener,
        sock,
        SocketAddr::new(server, port_of(&listener)),
        expect,
    );
}

fn attempt(listener: &Socket, mut client: Socket, to: SocketAddr, expect: Expect) {
    match expect {
        Expect::Connects => {
            connect_ok(&client, to);
            let (mut server, from) = accept(listener);
            // The two ends may see one address in two forms (IPv4 and
            // IPv4-mapped IPv6).
            let local = client.local_addr().unwrap().as_socket().unwrap();
            assert_eq!(
                (from.ip().to_canonical(), from.port()),
                (local.ip().to_canonical(), local.port())
            );
            exchange(&mut client, &mut server);
        }
        Expect::DroppedAs(counter) => {
            let before = tcp_ext(counter);
            connect_times_out(&client, to);
            assert_nothing_to_accept(listener);
            let after = tcp_ext(counter);
            assert!(
                after > before,
                "TcpExt {counter} did not go up ({before} -> {after}): the SYN was not \
                 dropped for an MD5 reason"
            );
        }
    }
}

netns_test! {
    fn ipv4_matching_keys_connect_and_data_flows() {
        md5_case(ip(SERVER_V4), ip(CLIENT_V4), Some(KEY_A), Some(KEY_A), Expect::Connects);
    }
}

netns_test! {
    fn ipv6_matching_keys_connect_and_data_flows() {
        md5_case(ip(SERVER_V6), ip(CLIENT_V6), Some(KEY_A), Some(KEY_A), Expect::Connects);
    }
}

netns_test! {
    fn ipv4_mismatching_keys_do_not_connect() {
        md5_case(
            ip(SERVER_V4),
            ip(CLIENT_V4),
            Some(KEY_A),
            Some(KEY_B),
            Expect::DroppedAs("TCPMD5Failure"),
        );
    }
}

netns_test! {
    fn ipv6_mismatching_keys_do_not_connect() {
        md5_case(
            ip(SERVER_V6),
            ip(CLIENT_V6),
            Some(KEY_A),
            Some(KEY_B),
            Expect::DroppedAs("TCPMD5Failure"),
        );
    }
}

netns_test! {
    fn ipv4_key_only_on_the_listener_does_not_connect() {
        md5_case(
            ip(SERVER_V4),
            ip(CLIENT_V4),
            Some(KEY_A),
            None,
            Expect::DroppedAs("TCPMD5NotFound"),
        );
    }
}

netns_test! {
    fn ipv6_key_only_on_the_listener_does_not_connect() {
        md5_case(
            ip(SERVER_V6),
            ip(CLIENT_V6),
            Some(KEY_A),
            None,
            Expect::DroppedAs("TCPMD5NotFound"),
        );
    }
}

netns_test! {
    fn ipv4_key_only_on_the_client_does_not_connect() {
        md5_case(
            ip(SERVER_V4),
            ip(CLIENT_V4),
            None,
            Some(KEY_A),
            Expect::DroppedAs("TCPMD5Unexpected"),
        );
    }
}

netns_test! {
    fn ipv6_key_only_on_the_client_does_not_connect() {
        md5_case(
            ip(SERVER_V6),
            ip(CLIENT_V6),
            None,
            Some(KEY_A),
            Expect::DroppedAs("TCPMD5Unexpected"),
        );
    }
}

netns_test! {
    fn longest_key_80_bytes_connects() {
        let key = [0xa5u8; 80];
        md5_case(ip(SERVER_V4), ip(CLIENT_V4), Some(&key), Some(&key), Expect::Connects);
    }
}

/// One listener, a different key per peer: each peer connects with its own
/// key, and a peer using the other peer's key is dropped.
fn two_peers_on_one_listener(server: IpAddr, peer_a: IpAddr, peer_b: IpAddr) {
    let listener = listener_on(server);
    set_md5_key(&listener, peer_a, KEY_A).expect("key for peer a");
    set_md5_key(&listener, peer_b, KEY_B).expect("key for peer b");
    let to = SocketAddr::new(server, port_of(&listener));

    let a = client_from(peer_a);
    set_md5_key(&a, server, KEY_A).unwrap();
    let b = client_from(peer_b);
    set_md5_key(&b, server, KEY_B).unwrap();
    // Both handshakes complete before either is accepted: the keys live on
    // the listener, side by side.
    connect_ok(&a, to);
    connect_ok(&b, to);
    let mut accepted = [accept(&listener), accept(&listener)];
    accepted.sort_by_key(|(_, from)| *from);
    let [(mut server_a, from_a), (mut server_b, from_b)] = accepted;
    assert_eq!((from_a.ip(), from_b.ip()), (peer_a, peer_b));
    let (mut a, mut b) = (a, b);
    exchange(&mut a, &mut server_a);
    exchange(&mut b, &mut server_b);

    let wrong = client_from(peer_a);
    set_md5_key(&wrong, server, KEY_B).unwrap();
    attempt(&listener, wrong, to, Expect::DroppedAs("TCPMD5Failure"));
}

netns_test! {
    fn ipv4_listener_with_keys_for_two_peers_accepts_both() {
        two_peers_on_one_listener(ip(SERVER_V4), ip(CLIENT_V4), ip(OTHER_CLIENT_V4));
    }
}

netns_test! {
    fn ipv6_listener_with_keys_for_two_peers_accepts_both() {
        two_peers_on_one_listener(ip(SERVER_V6), ip(CLIENT_V6), ip(OTHER_CLIENT_V6));
    }
}

netns_test! {
    fn a_key_for_one_peer_leaves_other_peers_unsigned() {
        let listener = listener_on(ip(SERVER_V4));
        set_md5_key(&listener, ip(CLIENT_V4), KEY_A).unwrap();
        let to = SocketAddr::new(ip(SERVER_V4), port_of(&listener));
        attempt(&listener, client_from(ip(OTHER_CLIENT_V4)), to, Expect::Connects);
    }
}

netns_test! {
    /// An IPv6 listener on [::] gets an IPv4 peer's key in IPv4-mapped form;
    /// the peer's IPv4 socket connects with the matching key only.
    fn dual_stack_listener_takes_keys_for_ipv4_peers() {
        let listener = dual_stack_listener();
        set_md5_key(&listener, ip(CLIENT_V4), KEY_A).expect("IPv4 peer on an IPv6 socket");
        let to = SocketAddr::new(ip(SERVER_V4), port_of(&listener));

        let good = client_from(ip(CLIENT_V4));
        set_md5_key(&good, ip(SERVER_V4), KEY_A).unwrap();
        connect_ok(&good, to);
        let (mut server, from) = accept(&listener);
        assert_eq!(from.ip(), ip(&format!("::ffff:{CLIENT_V4}")));
        let mut good = good;
        exchange(&mut good, &mut server);

        let bad = client_from(ip(CLIENT_V4));
        set_md5_key(&bad, ip(SERVER_V4), KEY_B).unwrap();
        attempt(&listener, bad, to, Expect::DroppedAs("TCPMD5Failure"));
    }
}

netns_test! {
    /// An IPv6 client socket talking to an IPv4 listener through an
    /// IPv4-mapped address; its key names the server in either form.
    fn ipv6_client_socket_to_an_ipv4_mapped_server() {
        let listener = listener_on(ip(SERVER_V4));
        set_md5_key(&listener, ip(CLIENT_V4), KEY_A).unwrap();
        let mapped_server = ip(&format!("::ffff:{SERVER_V4}"));
        let to = SocketAddr::new(mapped_server, port_of(&listener));
        for server_as_given in [ip(SERVER_V4), mapped_server] {
            let client = tcp_socket(Domain::IPV6);
            bind_client(&client, ip(&format!("::ffff:{CLIENT_V4}")));
            set_md5_key(&client, server_as_given, KEY_A).expect("key on an IPv6 client");
            attempt(&listener, client, to, Expect::Connects);
        }
        let client = tcp_socket(Domain::IPV6);
        bind_client(&client, ip(&format!("::ffff:{CLIENT_V4}")));
        set_md5_key(&client, ip(SERVER_V4), KEY_B).unwrap();
        attempt(&listener, client, to, Expect::DroppedAs("TCPMD5Failure"));
    }
}

netns_test! {
    /// After clear_md5_key the listener wants unsigned SYNs from that peer
    /// again; clearing a key that is not there is ENOENT.
    fn clearing_a_key_turns_signatures_off() {
        let listener = listener_on(ip(SERVER_V4));
        let to = SocketAddr::new(ip(SERVER_V4), port_of(&listener));
        set_md5_key(&listener, ip(CLIENT_V4), KEY_A).unwrap();
        attempt(&listener, client_from(ip(CLIENT_V4)), to, Expect::DroppedAs("TCPMD5NotFound"));

        clear_md5_key(&listener, ip(CLIENT_V4)).expect("clearing the key");
        attempt(&listener, client_from(ip(CLIENT_V4)), to, Expect::Connects);
        let signed = client_from(ip(CLIENT_V4));
        set_md5_key(&signed, ip(SERVER_V4), KEY_A).unwrap();
        attempt(&listener, signed, to, Expect::DroppedAs("TCPMD5Unexpected"));

        let err = clear_md5_key(&listener, ip(CLIENT_V4)).expect_err("no key left to clear");
        assert!(matches!(err, Error::Os { .. }), "{err:?}");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "clearing TCP_MD5SIG for peer {CLIENT_V4}: No such file or directory (os error 2)"
            )
        );
    }
}

netns_test! {
    /// Setting a key again replaces it.
    fn setting_a_key_again_replaces_it() {
        let listener = listener_on(ip(SERVER_V6));
        let to = SocketAddr::new(ip(SERVER_V6), port_of(&listener));
        set_md5_key(&listener, ip(CLIENT_V6), KEY_A).unwrap();
        set_md5_key(&listener, ip(CLIENT_V6), KEY_B).unwrap();
        let old = client_from(ip(CLIENT_V6));
        set_md5_key(&old, ip(SERVER_V6), KEY_A).unwrap();
        attempt(&listener, old, to, Expect::DroppedAs("TCPMD5Failure"));
        let new = client_from(ip(CLIENT_V6));
        set_md5_key(&new, ip(SERVER_V6), KEY_B).unwrap();
        attempt(&listener, new, to, Expect::Connects);
    }
}

/// `setsockopt(TCP_MD5SIG)` needs no capability: the whole MD5 exchange
/// runs as `nobody` with every capability dropped.
#[test]
fn unprivileged_process_sets_keys_and_connects() {
    testlab::require_tools(&["setpriv"]);
    in_netns_with(
        "unprivileged_process_sets_keys_and_connects",
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ],
        || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.split_whitespace().collect::<Vec<_>>())
                    .unwrap()
            };
            assert_eq!(field("Uid:")[1], "65534", "not running as nobody");
            assert_eq!(field("CapEff:")[0], "0000000000000000", "capabilities left");
            md5_case(
                ip(SERVER_V4),
                ip(CLIENT_V4),
                Some(KEY_A),
                Some(KEY_A),
                Expect::Connects,
            );
            md5_case(
                ip(SERVER_V6),
                ip(CLIENT_V6),
                Some(KEY_A),
                Some(KEY_B),
                Expect::DroppedAs("TCPMD5Failure"),
            );
        },
    );
}
