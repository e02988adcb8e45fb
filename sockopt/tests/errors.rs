//! Bad input and failing system calls give errors that say what was being
//! done and carry the errno. No traffic is sent, so these run in the test's
//! own namespace and need no root.

use std::fs::{File, OpenOptions};
use std::net::IpAddr;
use std::num::NonZeroU8;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixDatagram;

use holdfast_sockopt::{
    Error, MD5_MAX_KEY_LEN, clear_md5_key, set_md5_key, set_min_ttl, set_ttl, set_ttl_security,
};
use socket2::{Domain, Socket, Type};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn tcp(domain: Domain) -> Socket {
    Socket::new(domain, Type::STREAM, None).unwrap()
}

/// A descriptor on which any system call of this crate fails (`SO_DOMAIN`
/// on a file: ENOTSOCK). An input error returned for it proves that no
/// system call was made before the input was checked.
fn not_a_socket() -> File {
    File::open("/dev/null").unwrap()
}

#[test]
fn an_81_byte_key_is_rejected_before_any_syscall() {
    let key = [b'k'; MD5_MAX_KEY_LEN + 1];
    let err = set_md5_key(not_a_socket(), ip("192.0.2.1"), &key).unwrap_err();
    assert!(
        matches!(err, Error::Md5KeyTooLong { peer, len: 81 } if peer == ip("192.0.2.1")),
        "{err:?}"
    );
    assert_eq!(err.raw_os_error(), None);
    assert_eq!(
        err.to_string(),
        "TCP MD5 key for peer 192.0.2.1 is 81 bytes: the kernel accepts at most 80 \
         (TCP_MD5SIG_MAXKEYLEN)"
    );
    // On a real socket too, and the socket keeps no key for the peer: a
    // clear finds nothing (ENOENT).
    let sock = tcp(Domain::IPV4);
    let err = set_md5_key(&sock, ip("192.0.2.1"), &key).unwrap_err();
    assert!(matches!(err, Error::Md5KeyTooLong { .. }), "{err:?}");
    let err = clear_md5_key(&sock, ip("192.0.2.1")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
}

#[test]
fn an_empty_key_is_rejected_before_any_syscall() {
    let err = set_md5_key(not_a_socket(), ip("2001:db8::1"), b"").unwrap_err();
    assert!(
        matches!(err, Error::EmptyMd5Key { peer } if peer == ip("2001:db8::1")),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "TCP MD5 key for peer 2001:db8::1 is empty: a key is 1 to 80 bytes"
    );
}

#[test]
fn keys_of_1_to_80_bytes_are_accepted_and_can_be_cleared() {
    for (domain, peer) in [(Domain::IPV4, "192.0.2.1"), (Domain::IPV6, "2001:db8::1")] {
        let sock = tcp(domain);
        set_md5_key(&sock, ip(peer), b"k").unwrap();
        set_md5_key(&sock, ip(peer), &[0xff; MD5_MAX_KEY_LEN]).unwrap();
        clear_md5_key(&sock, ip(peer)).unwrap();
    }
}

#[test]
fn md5_on_a_udp_socket_is_enoprotoopt() {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
    let err = set_md5_key(&sock, ip("192.0.2.1"), b"secret").unwrap_err();
    assert!(matches!(err, Error::Os { .. }), "{err:?}");
    assert_eq!(err.raw_os_error(), Some(libc::ENOPROTOOPT));
    assert_eq!(
        err.to_string(),
        "setting TCP_MD5SIG for peer 192.0.2.1: Protocol not available (os error 92)"
    );
}

#[test]
fn a_file_is_enotsock() {
    let err = set_md5_key(not_a_socket(), ip("192.0.2.1"), b"secret").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTSOCK));
    assert_eq!(
        err.to_string(),
        "setting TCP_MD5SIG for peer 192.0.2.1 (reading the socket's address family): \
         Socket operation on non-socket (os error 88)"
    );
}

/// Safe code cannot hand over a closed descriptor (`AsFd` borrows an open
/// one). The nearest is an `O_PATH` descriptor, which the kernel refuses for
/// every socket call with EBADF, as it does a closed one.
#[test]
fn a_descriptor_the_kernel_calls_bad_is_ebadf() {
    let path_only = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open("/")
        .unwrap();
    let cases = [
        set_md5_key(&path_only, ip("192.0.2.1"), b"secret").unwrap_err(),
        clear_md5_key(&path_only, ip("192.0.2.1")).unwrap_err(),
        set_min_ttl(&path_only, 255).unwrap_err(),
        set_ttl(&path_only, 255).unwrap_err(),
    ];
    for err in &cases {
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
        assert!(
            err.to_string()
                .ends_with("Bad file descriptor (os error 9)"),
            "{err}"
        );
    }
    assert!(
        cases[0]
            .to_string()
            .starts_with("setting TCP_MD5SIG for peer 192.0.2.1")
    );
    assert!(
        cases[1]
            .to_string()
            .starts_with("clearing TCP_MD5SIG for peer 192.0.2.1")
    );
    assert!(
        cases[2]
            .to_string()
            .starts_with("setting the minimum TTL to 255")
    );
    assert!(cases[3].to_string().starts_with("setting the TTL to 255"));
}

#[test]
fn an_ipv6_peer_on_an_ipv4_socket_is_refused() {
    let sock = tcp(Domain::IPV4);
    let err = set_md5_key(&sock, ip("2001:db8::1"), b"secret").unwrap_err();
    assert!(matches!(err, Error::PeerFamilyMismatch { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "setting TCP_MD5SIG for peer 2001:db8::1: the socket is IPv4 and the peer is IPv6"
    );
    // An IPv4-mapped peer is an IPv4 peer.
    set_md5_key(&sock, ip("::ffff:192.0.2.1"), b"secret").unwrap();
    clear_md5_key(&sock, ip("192.0.2.1")).unwrap();
}

#[test]
fn a_unix_socket_is_not_an_inet_socket() {
    let (sock, _) = UnixDatagram::pair().unwrap();
    let cases = [
        set_md5_key(&sock, ip("192.0.2.1"), b"secret").unwrap_err(),
        set_min_ttl(&sock, 255).unwrap_err(),
        set_ttl(&sock, 255).unwrap_err(),
        set_ttl_security(&sock, NonZeroU8::MIN).unwrap_err(),
    ];
    for err in &cases {
        assert!(
            matches!(err, Error::NotAnInetSocket { domain, .. } if *domain == libc::AF_UNIX),
            "{err:?}"
        );
    }
    assert_eq!(
        cases[1].to_string(),
        "setting the minimum TTL to 255: not an IPv4 or IPv6 socket (address family 1)"
    );
}

#[test]
fn ttl_0_is_einval_from_the_kernel() {
    let err = set_ttl(tcp(Domain::IPV4), 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(
        err.to_string(),
        "setting IP_TTL to 0: Invalid argument (os error 22)"
    );
    let err = set_ttl(tcp(Domain::IPV6), 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(
        err.to_string(),
        "setting IP_TTL to 0: Invalid argument (os error 22)"
    );
}

#[test]
fn gtsm_options_are_accepted_on_both_families() {
    for domain in [Domain::IPV4, Domain::IPV6] {
        let sock = tcp(domain);
        for value in [0, 1, 254, 255] {
            set_min_ttl(&sock, value).unwrap();
        }
        for value in [1, 64, 255] {
            set_ttl(&sock, value).unwrap();
        }
        set_ttl_security(&sock, NonZeroU8::MAX).unwrap();
    }
}

#[test]
fn errors_convert_to_io_errors_keeping_kind_errno_and_message() {
    let sock = tcp(Domain::IPV4);
    let err: std::io::Error = clear_md5_key(&sock, ip("192.0.2.1")).unwrap_err().into();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(
        err.to_string(),
        "clearing TCP_MD5SIG for peer 192.0.2.1: No such file or directory (os error 2)"
    );
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<Error>())
        .expect("the crate's error inside");
    assert_eq!(inner.raw_os_error(), Some(libc::ENOENT));

    let err: std::io::Error = set_md5_key(&sock, ip("192.0.2.1"), b"").unwrap_err().into();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}
