//! The address family of a socket, as the kernel knows it.

use std::os::fd::BorrowedFd;

use socket2::{Domain, SockRef};

use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Ipv4,
    Ipv6,
}

/// Reads `SO_DOMAIN`. `doing` names the operation for the error message.
pub(crate) fn family_of(fd: BorrowedFd<'_>, doing: &dyn Fn() -> String) -> Result<Family, Error> {
    let domain = SockRef::from(&fd).domain().map_err(|e| {
        Error::os(
            format!("{} (reading the socket's address family)", doing()),
            e,
        )
    })?;
    if domain == Domain::IPV4 {
        Ok(Family::Ipv4)
    } else if domain == Domain::IPV6 {
        Ok(Family::Ipv6)
    } else {
        Err(Error::NotAnInetSocket {
            doing: doing(),
            domain: domain.into(),
        })
    }
}
