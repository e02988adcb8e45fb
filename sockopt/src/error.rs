//! What went wrong, with what was being done and the errno.

use std::fmt;
use std::io;
use std::net::IpAddr;

use crate::md5::MD5_MAX_KEY_LEN;

/// An option could not be set. Input errors are found before any system
/// call; [`Error::Os`] carries the kernel's errno.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An empty TCP MD5 key: the kernel would read it as "delete the key"
    /// (use [`clear_md5_key`](crate::clear_md5_key) for that).
    EmptyMd5Key { peer: IpAddr },
    /// A TCP MD5 key longer than the kernel accepts
    /// ([`MD5_MAX_KEY_LEN`], `TCP_MD5SIG_MAXKEYLEN`).
    Md5KeyTooLong { peer: IpAddr, len: usize },
    /// A key for an IPv6 peer on an IPv4 socket: such a socket can never
    /// talk to that peer.
    PeerFamilyMismatch { peer: IpAddr },
    /// The descriptor is a socket, but neither IPv4 nor IPv6 (e.g. a Unix
    /// socket); `domain` is its `SO_DOMAIN`.
    NotAnInetSocket { doing: String, domain: i32 },
    /// A system call failed.
    Os { doing: String, source: io::Error },
}

impl Error {
    /// The errno of a failed system call, if that is what happened.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn os(doing: impl Into<String>, source: io::Error) -> Error {
        Error::Os {
            doing: doing.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EmptyMd5Key { peer } => write!(
                f,
                "TCP MD5 key for peer {peer} is empty: a key is 1 to {MD5_MAX_KEY_LEN} bytes"
            ),
            Error::Md5KeyTooLong { peer, len } => write!(
                f,
                "TCP MD5 key for peer {peer} is {len} bytes: the kernel accepts at most \
                 {MD5_MAX_KEY_LEN} (TCP_MD5SIG_MAXKEYLEN)"
            ),
            Error::PeerFamilyMismatch { peer } => write!(
                f,
                "setting TCP_MD5SIG for peer {peer}: the socket is IPv4 and the peer is IPv6"
            ),
            Error::NotAnInetSocket { doing, domain } => write!(
                f,
                "{doing}: not an IPv4 or IPv6 socket (address family {domain})"
            ),
            Error::Os { doing, source } => write!(f, "{doing}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// For callers that deal in `io::Error`: the kind is the errno's (or
/// `InvalidInput` for input errors); this error is its payload.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Os { source, .. } => source.kind(),
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, e)
    }
}
