//! The raw `setsockopt(2)` and `getsockopt(2)` calls (and `getifaddrs(3)`):
//! the only unsafe code in holdfast.
//!
//! Option values are restricted to a sealed set of plain-data types whose
//! every byte is initialised, so the kernel never reads uninitialised
//! memory and never reads past the value; `getsockopt` only fills a byte
//! buffer, within its length.

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

/// `getsockopt(fd, level, name, buf, &len)` into a byte buffer: the number
/// of bytes the kernel wrote (at most `buf.len()`); the errno on failure.
pub(crate) fn getsockopt_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `fd` is open for the lifetime of the borrow (BorrowedFd's
    // contract). `buf` is a live, exclusive reference to `len` writable
    // bytes, and `len` a live socklen_t: the kernel writes at most `len`
    // bytes into `buf` and the length it wrote into `len`, and keeps no
    // pointer to either after the call. Any byte pattern is a valid u8.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc == 0 {
        // Never more than we offered; min() keeps the slice in bounds
        // whatever the kernel says.
        Ok((len as usize).min(buf.len()))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One entry of `getifaddrs(3)` with an IPv4 or IPv6 address.
#[derive(Debug)]
pub(crate) struct RawIfAddr {
    pub name: String,
    pub address: std::net::IpAddr,
    pub netmask: Option<std::net::IpAddr>,
}

/// Reads a `sockaddr` of family AF_INET or AF_INET6.
///
/// # Safety
/// `sa` is null or points to a `sockaddr` whose storage is at least as
/// large as its family's `sockaddr_in`/`sockaddr_in6`, as getifaddrs
/// guarantees for the entries it returns.
unsafe fn read_sockaddr(sa: *const libc::sockaddr) -> Option<std::net::IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: non-null and valid per this function's contract.
    let family = i32::from(unsafe { (*sa).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let sin = unsafe { &*sa.cast::<libc::sockaddr_in>() };
            Some(std::net::IpAddr::V4(std::net::Ipv4Addr::from(
                u32::from_be(sin.sin_addr.s_addr),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let sin6 = unsafe { &*sa.cast::<libc::sockaddr_in6>() };
            Some(std::net::IpAddr::V6(std::net::Ipv6Addr::from(
                sin6.sin6_addr.s6_addr,
            )))
        }
        _ => None,
    }
}

/// `getifaddrs(3)`: every IPv4 and IPv6 address of every interface.
pub(crate) fn getifaddrs() -> io::Result<Vec<RawIfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid place for getifaddrs to store the list.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is an entry of the list getifaddrs returned, which
        // stays allocated until freeifaddrs below.
        let ifa = unsafe { &*cur };
        // SAFETY: entries' addresses and masks are null or valid sockaddrs.
        let addr = unsafe { read_sockaddr(ifa.ifa_addr) };
        if let Some(address) = addr {
            // SAFETY: as above.
            let netmask = unsafe { read_sockaddr(ifa.ifa_netmask) };
            let name = if ifa.ifa_name.is_null() {
                String::new()
            } else {
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned()
            };
            out.push(RawIfAddr {
                name,
                address,
                netmask,
            });
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once; no
    // reference into the list outlives this point (names were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// What `recvmsg(2)` returned on an IPv6 datagram socket.
pub(crate) struct RawReceived {
    pub len: usize,
    pub source: std::net::SocketAddrV6,
    /// From the IPV6_HOPLIMIT control message (needs IPV6_RECVHOPLIMIT).
    pub hop_limit: Option<u8>,
}

/// `recvmsg(fd, {source, [buf], control}, 0)` on an IPv6 socket, with the
/// packet's hop limit read from its IPV6_HOPLIMIT control message.
pub(crate) fn recvmsg_hop_limit(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<RawReceived> {
    // u64s: the control buffer must be aligned like a cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: all-zero bytes are a valid sockaddr_in6 (plain integers).
    let mut source: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero bytes are a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = std::ptr::from_mut(&mut source).cast::<libc::c_void>();
    msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    // The field is a size_t in glibc and a socklen_t in musl.
    #[cfg(target_env = "musl")]
    {
        msg.msg_controllen = size_of_val(&control) as libc::socklen_t;
    }
    #[cfg(not(target_env = "musl"))]
    {
        msg.msg_controllen = size_of_val(&control);
    }
    // SAFETY: `fd` is open for the borrow; every pointer in `msg` points to
    // a live local (`source`, `iov` over `buf`, `control`) whose length is
    // the one given, and the kernel writes within those lengths only.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut hop_limit = None;
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/CMSG_NXTHDR walk
    // its control buffer within msg_controllen, and CMSG_DATA of an
    // IPV6_HOPLIMIT message points to one int inside that buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_HOPLIMIT {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                hop_limit = u8::try_from(v).ok();
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(RawReceived {
        len: n as usize,
        source: std::net::SocketAddrV6::new(
            std::net::Ipv6Addr::from(source.sin6_addr.s6_addr),
            u16::from_be(source.sin6_port),
            source.sin6_flowinfo,
            source.sin6_scope_id,
        ),
        hop_limit,
    })
}

/// glibc's `mallopt(param, value)` (the callers name the parameters).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn mallopt(param: libc::c_int, value: libc::c_int) {
    // SAFETY: mallopt takes two integers and touches only the allocator's
    // own settings; glibc documents it as callable at any time.
    unsafe { libc::mallopt(param, value) };
}

/// `timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)`.
pub(crate) fn timerfd_create() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: no pointers; the flags are valid for timerfd_create(2).
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Arms the timer once, `after` from now (relative, no interval); a zero
/// `after` disarms it.
pub(crate) fn timerfd_settime(fd: BorrowedFd<'_>, after: std::time::Duration) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            // `as _`: the field's own type (libc deprecates naming
            // `time_t` under musl, whose width it will change).
            tv_sec: after.as_secs().min(i64::MAX as u64) as _,
            tv_nsec: libc::c_long::from(after.subsec_nanos() as i32),
        },
    };
    // SAFETY: `spec` lives across the call; the old value is not asked for
    // (null is allowed).
    let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the expiration count (`WouldBlock` while it has not expired).
pub(crate) fn timerfd_read(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut count = [0u8; 8];
    // SAFETY: `count` is 8 writable bytes, what a timerfd read fills.
    let n = unsafe { libc::read(fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(count))
}

/// `struct __user_cap_header_struct` (linux/capability.h).
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`: one 32-bit word of each set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, as two `CapData` words.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `capget(2)` of the calling thread (pid 0): its three capability sets.
pub(crate) fn capget() -> io::Result<[CapData; 2]> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `header` is a live, initialised __user_cap_header_struct and
    // `data` two writable __user_cap_data_struct, what version 3 asks for;
    // the kernel writes within them only, during the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            std::ptr::from_mut(&mut header),
            data.as_mut_ptr(),
        )
    };
    if rc == 0 {
        Ok(data)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `capset(2)` of the calling thread: capabilities are per thread, so this
/// changes no other thread of the process.
pub(crate) fn capset(data: &[CapData; 2]) -> io::Result<()> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: as in `capget`; the kernel only reads `data`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            std::ptr::from_mut(&mut header),
            data.as_ptr(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The size of a control buffer for `n` descriptors in one SCM_RIGHTS
/// message, in u64s (a cmsghdr's alignment).
fn rights_space(n: usize) -> io::Result<usize> {
    let bytes = n
        .checked_mul(size_of::<libc::c_int>())
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: CMSG_SPACE is arithmetic on its argument only.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    Ok(space.div_ceil(size_of::<u64>()))
}

/// `sendmsg(fd, {[data], SCM_RIGHTS(fds)}, MSG_NOSIGNAL)` on a Unix stream
/// socket: the octets of `data` it took (the descriptors go with the first
/// of them; the caller writes the rest without descriptors).
pub(crate) fn sendmsg_fds(
    fd: BorrowedFd<'_>,
    data: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<usize> {
    let raw: Vec<libc::c_int> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let mut control = vec![
        0u64;
        if raw.is_empty() {
            0
        } else {
            rights_space(raw.len())?
        }
    ];
    let mut iov = libc::iovec {
        // sendmsg only reads through iov_base; the cast to *mut is what
        // the C type asks for.
        iov_base: data.as_ptr().cast_mut().cast::<libc::c_void>(),
        iov_len: data.len(),
    };
    // SAFETY: all-zero bytes are a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !raw.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
        let len = size_of_val(control.as_slice());
        // The field is a size_t in glibc and a socklen_t in musl.
        #[cfg(target_env = "musl")]
        {
            msg.msg_controllen = len as libc::socklen_t;
        }
        #[cfg(not(target_env = "musl"))]
        {
            msg.msg_controllen = len;
        }
        let payload = size_of_val(raw.as_slice());
        // SAFETY: `control` holds CMSG_SPACE(payload) bytes (rights_space),
        // aligned as a cmsghdr (u64s): CMSG_FIRSTHDR is non-null and the
        // header and CMSG_LEN(payload) bytes of data after it lie inside
        // the buffer. `raw` is `payload` bytes of c_ints; the copy does not
        // overlap (`raw` is its own allocation).
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
            std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(c), payload);
        }
    }
    // SAFETY: `fd` is open for the borrow; `msg` points to live locals
    // (`iov` over `data`, `control`) with the lengths given, which the
    // kernel only reads during the call. The descriptors in `raw` are
    // borrowed and open for the call: the kernel duplicates them.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// What `recvmsg_fds` read.
pub(crate) struct RawFds {
    pub len: usize,
    pub fds: Vec<std::os::fd::OwnedFd>,
    /// The kernel dropped descriptors that did not fit (MSG_CTRUNC): they
    /// are closed, and the message cannot be trusted.
    pub truncated: bool,
}

/// `recvmsg(fd, {[buf], control for max_fds}, MSG_CMSG_CLOEXEC)`: octets
/// and the descriptors of any SCM_RIGHTS message, each owned (closed when
/// dropped) from the moment it is read.
pub(crate) fn recvmsg_fds(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<RawFds> {
    use std::os::fd::FromRawFd;
    let mut control = vec![0u64; rights_space(max_fds.max(1))?];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero bytes are a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    let len = size_of_val(control.as_slice());
    #[cfg(target_env = "musl")]
    {
        msg.msg_controllen = len as libc::socklen_t;
    }
    #[cfg(not(target_env = "musl"))]
    {
        msg.msg_controllen = len;
    }
    // SAFETY: `fd` is open for the borrow; `msg` points to live locals
    // (`iov` over `buf`, `control`) and the kernel writes within their
    // lengths only. MSG_CMSG_CLOEXEC: no descriptor leaks into a child.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/CMSG_NXTHDR walk its
    // control buffer within msg_controllen. An SCM_RIGHTS message's data is
    // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors, each installed in
    // this process by the kernel and owned by nobody else: each becomes an
    // OwnedFd at once, so none is leaked whatever happens next.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for i in 0..bytes / size_of::<libc::c_int>() {
                    let raw = std::ptr::read_unaligned(data.add(i));
                    fds.push(std::os::fd::OwnedFd::from_raw_fd(raw));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(RawFds {
        len: n as usize,
        fds,
        truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

/// The effective user ID of this process.
pub(crate) fn geteuid() -> u32 {
    // SAFETY: no arguments; geteuid(2) cannot fail.
    unsafe { libc::geteuid() }
}
