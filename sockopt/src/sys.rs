//! The raw `setsockopt(2)` call: the only unsafe code in holdfast.
//!
//! Option values are restricted to a sealed set of plain-data types whose
//! every byte is initialised, so the kernel never reads uninitialised
//! memory and never reads past the value.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::md5::TcpMd5Sig;

mod sealed {
    pub trait Sealed {}
}

/// A value `setsockopt(2)` may read: `repr(C)` (or a primitive), no padding,
/// every byte initialised.
pub(crate) trait OptionValue: sealed::Sealed {}

impl sealed::Sealed for libc::c_int {}
impl OptionValue for libc::c_int {}

// TcpMd5Sig is repr(C) and its layout is checked at compile time (no
// padding: see the assertions next to its definition in md5.rs).
impl sealed::Sealed for TcpMd5Sig {}
impl OptionValue for TcpMd5Sig {}

/// `setsockopt(fd, level, name, value, sizeof value)`; the errno on failure.
pub(crate) fn setsockopt<T: OptionValue>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // Every OptionValue is a few hundred bytes at most.
    let len = libc::socklen_t::try_from(size_of::<T>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is open for the lifetime of the borrow (BorrowedFd's
    // contract). `value` is a live reference to `len` initialised bytes (the
    // OptionValue contract), and the kernel only reads `len` bytes from it
    // during the call; it keeps no pointer to it afterwards.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(value).cast::<libc::c_void>(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
