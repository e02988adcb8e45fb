//! Test support: run a test inside a fresh network namespace, and small
//! blocking socket helpers with deadlines.
//!
//! Sockets belong to the network namespace of the process that creates them,
//! and entering one (`setns`) would need unsafe code in the tests. Instead a
//! test re-runs itself: the parent creates the namespace (testlab) and runs
//! this same test binary inside it with `ip netns exec … --exact NAME`; the
//! child sees [`CHILD_ENV`] and runs the test body. The parent fails unless
//! the child ran exactly that test and it passed.

#![allow(dead_code)] // Each test file uses a different part of this module.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::time::{Duration, Instant};

use socket2::{Domain, SockAddr, Socket, Type};
use testlab::Netns;

/// `netns_test! { fn name() { … } }`: a `#[test]` whose body runs in a
/// fresh network namespace ([`in_netns`]).
#[macro_export]
macro_rules! netns_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            common::in_netns(stringify!($name), || $body);
        }
    };
}

/// Set in the child process; its value is the parent's network namespace
/// (`/proc/self/ns/net` link), which the child must not be in.
const CHILD_ENV: &str = "HOLDFAST_SOCKOPT_TEST_NETNS_PARENT";

/// Addresses on `lo` of each test namespace (documentation ranges).
pub const SERVER_V4: &str = "192.0.2.1";
pub const CLIENT_V4: &str = "192.0.2.2";
pub const OTHER_CLIENT_V4: &str = "192.0.2.3";
pub const SERVER_V6: &str = "2001:db8::1";
pub const CLIENT_V6: &str = "2001:db8::2";
pub const OTHER_CLIENT_V6: &str = "2001:db8::3";

/// How long a connection attempt that must fail is given. The kernel drops
/// the SYNs silently, so the attempt can only time out.
pub const NO_CONNECT_WITHIN: Duration = Duration::from_secs(3);
/// Bound for what must succeed (a handshake on loopback takes microseconds).
pub const GENEROUS: Duration = Duration::from_secs(10);

/// Runs `body` inside a fresh network namespace with the addresses above on
/// `lo`. `name` is the test's name (as `cargo test` lists it).
pub fn in_netns(name: &str, body: impl FnOnce()) {
    in_netns_with(name, &[], body);
}

/// As [`in_netns`], with the child started through `wrapper` (e.g.
/// `setpriv …` to run it unprivileged) inside the namespace.
pub fn in_netns_with(name: &str, wrapper: &[&str], body: impl FnOnce()) {
    if let Ok(parent_netns) = std::env::var(CHILD_ENV) {
        assert_ne!(
            own_netns(),
            parent_netns,
            "the child of {name} is still in its parent's network namespace"
        );
        body();
        return;
    }
    let ns = Netns::new("sockopt");
    for addr in [
        SERVER_V4,
        CLIENT_V4,
        OTHER_CLIENT_V4,
        SERVER_V6,
        CLIENT_V6,
        OTHER_CLIENT_V6,
    ] {
        let len = if addr.contains(':') { 128 } else { 32 };
        ns.add_address("lo", &format!("{addr}/{len}"));
    }
    let exe = std::env::current_exe().expect("path of the running test binary");
    let exe = exe.to_str().expect("test binary path is UTF-8");
    let mut argv: Vec<&str> = wrapper.to_vec();
    argv.extend([exe, name, "--exact", "--nocapture", "--test-threads=1"]);
    let output = ns
        .command(&argv)
        .env(CHILD_ENV, own_netns())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {argv:?} in {}: {e}", ns.name()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by `cargo test` when this test fails.
    println!(
        "--- child in {}: {argv:?}\n{stdout}\n--- stderr\n{stderr}",
        ns.name()
    );
    assert!(
        output.status.success(),
        "{name} failed inside netns {} ({})",
        ns.name(),
        output.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child run in netns {} did not run exactly the test {name}",
        ns.name()
    );
}

fn own_netns() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .expect("reading /proc/self/ns/net")
        .display()
        .to_string()
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

fn domain_of(addr: IpAddr) -> Domain {
    match addr {
        IpAddr::V4(_) => Domain::IPV4,
        IpAddr::V6(_) => Domain::IPV6,
    }
}

/// A TCP socket bound to `addr` port 0 (not yet listening), so options can
/// be set before `listen()`.
pub fn tcp_socket(domain: Domain) -> Socket {
    Socket::new(domain, Type::STREAM, None).expect("creating a TCP socket")
}

/// A listening socket on `addr` (any free port).
pub fn listener_on(addr: IpAddr) -> Socket {
    listener(tcp_socket(domain_of(addr)), addr)
}

/// Binds `sock` to `addr` port 0 and listens.
pub fn listener(sock: Socket, addr: IpAddr) -> Socket {
    sock.bind(&SocketAddr::new(addr, 0).into())
        .unwrap_or_else(|e| panic!("binding a listener to {addr}: {e}"));
    sock.listen(16).expect("listen");
    sock.set_nonblocking(true).expect("nonblocking listener");
    sock
}

/// A dual-stack IPv6 listener on `[::]` (IPv4 peers arrive IPv4-mapped).
pub fn dual_stack_listener() -> Socket {
    let sock = tcp_socket(Domain::IPV6);
    sock.set_only_v6(false).expect("clearing IPV6_V6ONLY");
    listener(sock, ip("::"))
}

/// The port a listener got.
pub fn port_of(listener: &Socket) -> u16 {
    listener
        .local_addr()
        .expect("listener address")
        .as_socket()
        .expect("an inet listener")
        .port()
}

/// A client socket bound to `source`, not yet connected.
pub fn client_from(source: IpAddr) -> Socket {
    let sock = tcp_socket(domain_of(source));
    bind_client(&sock, source);
    sock
}

pub fn bind_client(sock: &Socket, source: IpAddr) {
    sock.bind(&SocketAddr::new(source, 0).into())
        .unwrap_or_else(|e| panic!("binding a client to {source}: {e}"));
}

/// Connects with a deadline.
pub fn connect(client: &Socket, to: SocketAddr, within: Duration) -> std::io::Result<()> {
    client.connect_timeout(&SockAddr::from(to), within)
}

/// Connects and panics unless the handshake completes.
pub fn connect_ok(client: &Socket, to: SocketAddr) {
    connect(client, to, GENEROUS).unwrap_or_else(|e| panic!("connecting to {to}: {e}"));
}

/// Connects and panics unless the attempt times out (SYNs dropped).
pub fn connect_times_out(client: &Socket, to: SocketAddr) {
    match connect(client, to, NO_CONNECT_WITHIN) {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
        Ok(()) => panic!("connection to {to} completed; it must not"),
        Err(e) => panic!("connection to {to} failed with {e} instead of timing out"),
    }
}

/// Accepts one connection, polling until `GENEROUS` has passed.
pub fn accept(listener: &Socket) -> (Socket, SocketAddr) {
    let deadline = Instant::now() + GENEROUS;
    loop {
        match listener.accept() {
            Ok((sock, from)) => {
                sock.set_nonblocking(false)
                    .expect("blocking accepted socket");
                let from = from.as_socket().expect("an inet peer");
                return (sock, from);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "nothing to accept within {GENEROUS:?}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Nothing is waiting to be accepted.
pub fn assert_nothing_to_accept(listener: &Socket) {
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, from)) => panic!("a connection from {from:?} was accepted; it must not"),
        Err(e) => panic!("accept: {e}"),
    }
}

/// Data flows both ways over an established connection.
pub fn exchange(client: &mut Socket, server: &mut Socket) {
    for sock in [&*client, &*server] {
        sock.set_read_timeout(Some(GENEROUS)).expect("read timeout");
    }
    client.write_all(b"OPEN").expect("client write");
    let mut buf = [0u8; 4];
    server.read_exact(&mut buf).expect("server read");
    assert_eq!(&buf, b"OPEN");
    server.write_all(b"KEEP").expect("server write");
    client.read_exact(&mut buf).expect("client read");
    assert_eq!(&buf, b"KEEP");
}

/// A `TcpExt` counter of `/proc/net/netstat` (this namespace's).
pub fn tcp_ext(counter: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").expect("reading /proc/net/netstat");
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (
        lines.next().expect("TcpExt names"),
        lines.next().expect("TcpExt values"),
    );
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == counter)
        .map(|(_, value)| value.parse().expect("a number"))
        .unwrap_or_else(|| panic!("no counter TcpExt {counter} in /proc/net/netstat"))
}
