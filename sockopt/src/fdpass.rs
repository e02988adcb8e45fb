//! Passing open descriptors between processes over a Unix stream socket
//! (`SCM_RIGHTS`, unix(7)), and who is at the other end (`SO_PEERCRED`):
//! what a holdfast handing its sessions to the next one needs.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::sys;

/// The most descriptors one message may carry (Linux's `SCM_MAX_FD`).
pub const MAX_FDS: usize = 253;

/// Sends `data` with `fds` attached to its first octet. Returns how many
/// octets the socket took (possibly fewer than `data.len()`: the caller
/// writes the rest as plain data). More than [`MAX_FDS`] is refused.
pub fn send_with_fds(socket: impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} descriptors, at most {MAX_FDS} in one message",
                fds.len()
            ),
        ));
    }
    if data.is_empty() {
        // Descriptors ride on data: a stream socket drops them without.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "descriptors need at least one octet of data",
        ));
    }
    sys::sendmsg_fds(socket.as_fd(), data, fds)
}

/// What [`recv_with_fds`] read: `len` octets into the buffer and the
/// descriptors that came with them, each owned (closed when dropped).
#[derive(Debug)]
pub struct ReceivedFds {
    pub len: usize,
    pub fds: Vec<OwnedFd>,
}

/// Receives octets into `buf` and up to `max_fds` descriptors, blocking as
/// the socket does. More descriptors than `max_fds` (the kernel closes
/// those that do not fit) is an error, and the ones received are closed.
pub fn recv_with_fds(socket: impl AsFd, buf: &mut [u8], max_fds: usize) -> io::Result<ReceivedFds> {
    let r = sys::recvmsg_fds(socket.as_fd(), buf, max_fds.min(MAX_FDS))?;
    // The kernel fills the control buffer's rounded-up room (on 64-bit
    // Linux, room for one descriptor holds two) and flags the rest as cut
    // (MSG_CTRUNC): more than expected is an error either way.
    if r.truncated || r.fds.len() > max_fds {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more descriptors than the {max_fds} expected"),
        ));
    }
    Ok(ReceivedFds {
        len: r.len,
        fds: r.fds,
    })
}

/// The process at the other end of a Unix socket, as the kernel recorded
/// it when the connection was made (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// `SO_PEERCRED` of a connected Unix socket.
pub fn peer_credentials(socket: impl AsFd) -> io::Result<PeerCredentials> {
    // struct ucred: pid_t, uid_t, gid_t (three 32-bit integers).
    let mut buf = [0u8; 12];
    let n = sys::getsockopt_bytes(
        socket.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_PEERCRED,
        &mut buf,
    )?;
    if n != buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("SO_PEERCRED: {n} octets, expected 12"),
        ));
    }
    let word = |i: usize| [buf[i], buf[i + 1], buf[i + 2], buf[i + 3]];
    Ok(PeerCredentials {
        pid: i32::from_ne_bytes(word(0)),
        uid: u32::from_ne_bytes(word(4)),
        gid: u32::from_ne_bytes(word(8)),
    })
}

/// This process's effective user ID.
pub fn effective_uid() -> u32 {
    sys::geteuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::unix::net::UnixStream;

    /// An open file holding `text`, its name already removed (unique per
    /// call: the tests run in parallel).
    fn temp_file(text: &str) -> std::fs::File {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("holdfast-fdpass-{}-{n}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn descriptors_arrive_and_name_the_same_open_files() {
        let (a, b) = UnixStream::pair().unwrap();
        let one = temp_file("first");
        let two = temp_file("second!");
        let n = send_with_fds(&a, b"hello", &[one.as_fd(), two.as_fd()]).unwrap();
        assert_eq!(n, 5);
        let mut buf = [0u8; 16];
        let got = recv_with_fds(&b, &mut buf, 4).unwrap();
        assert_eq!(&buf[..got.len], b"hello");
        assert_eq!(got.fds.len(), 2);
        let mut texts = Vec::new();
        for fd in got.fds {
            let mut f = std::fs::File::from(fd);
            f.rewind().unwrap();
            let mut s = String::new();
            f.read_to_string(&mut s).unwrap();
            texts.push(s);
        }
        assert_eq!(texts, ["first", "second!"]);
    }

    #[test]
    fn more_descriptors_than_expected_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = temp_file("x");
        send_with_fds(&a, b"x", &[f.as_fd(), f.as_fd(), f.as_fd()]).unwrap();
        let mut buf = [0u8; 4];
        let e = recv_with_fds(&b, &mut buf, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }

    #[test]
    fn plain_data_and_limits() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"abc").unwrap();
        let mut buf = [0u8; 8];
        let got = recv_with_fds(&b, &mut buf, 2).unwrap();
        assert_eq!((got.len, got.fds.len()), (3, 0));
        let f = temp_file("y");
        let many: Vec<BorrowedFd<'_>> = (0..=MAX_FDS).map(|_| f.as_fd()).collect();
        assert!(send_with_fds(&a, b"z", &many).is_err());
        assert!(send_with_fds(&a, b"", &[f.as_fd()]).is_err());
    }

    #[test]
    fn the_peer_is_this_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = peer_credentials(&a).unwrap();
        assert_eq!(c.pid, std::process::id() as i32);
        assert_eq!(c.uid, effective_uid());
    }
}
