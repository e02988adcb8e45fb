//! The API's Unix socket in the daemon's state directory
//! (`holdfast run --state-dir DIR`, `/run/holdfast` by default): the one
//! place the state-changing calls (drain, undrain) are served without a
//! token. Who may connect is decided by the file's mode: owner only
//! (0600), so the daemon's own user (a `kubectl exec` into its container
//! runs as that user) and root.
//!
//! A state directory belongs to one daemon at a time. [`claim`] takes a
//! lock on `DIR/lock` for the daemon's life (released by the kernel when
//! the process ends, however it ends), so a second `holdfast run` with the
//! same `--state-dir` is refused instead of taking the socket from a live
//! daemon; a socket left by a daemon that died is replaced.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory when `--state-dir` is not given.
pub const DEFAULT_STATE_DIR: &str = "/run/holdfast";
/// The socket's name in the state directory.
pub const SOCKET_NAME: &str = "api.sock";
/// The lock's name in the state directory.
pub const LOCK_NAME: &str = "lock";
/// The socket's mode: owner only.
pub const SOCKET_MODE: u32 = 0o600;

/// The socket of the state directory `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// The state directory, held: the lock, and the socket this daemon bound.
/// Dropped (the daemon stopping), the socket is removed if it is still
/// the one bound here, and the lock released.
#[derive(Debug)]
pub struct Claim {
    socket: PathBuf,
    /// The bound socket's (device, inode): another file at the path is
    /// not ours to remove.
    id: (u64, u64),
    _lock: File,
}

impl Claim {
    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.socket)
            && (m.dev(), m.ino()) == self.id
        {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Takes the state directory `dir` for this daemon and binds its socket.
/// `dir` is made (owner only) if missing. Refused, with the reason, when
/// another holdfast holds the directory or answers on its socket, or when
/// something that is not a socket sits at the socket's path.
pub fn claim(dir: &Path) -> Result<(std::os::unix::net::UnixListener, Claim), String> {
    let shown = dir.display();
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("state directory {shown}: cannot create it: {e}"))?;
    }
    let lock = lock(dir)?;
    let socket = socket_path(dir);
    let socket_shown = socket.display();
    match std::fs::symlink_metadata(&socket) {
        Ok(m) if m.file_type().is_socket() => {
            // The lock is ours, so no holdfast of this kind holds the
            // directory; still, a process answering here is not ours to
            // cut off.
            match try_connect(&socket) {
                Ok(()) => {
                    return Err(format!(
                        "{socket_shown}: another process answers on this socket; stop it, or give this holdfast another --state-dir"
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // Left by a daemon that stopped without removing it.
                    tracing::info!(socket = %socket_shown, "replacing the API socket left by a holdfast that stopped");
                    std::fs::remove_file(&socket).map_err(|e| {
                        format!("{socket_shown}: cannot remove the stale socket: {e}")
                    })?;
                }
                Err(e) => {
                    return Err(format!(
                        "{socket_shown}: a socket is there and cannot be tried ({e}); remove it if no holdfast uses it"
                    ));
                }
            }
        }
        Ok(_) => {
            return Err(format!(
                "{socket_shown}: exists and is not a socket; remove it (holdfast serves drain and undrain there)"
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{socket_shown}: {e}")),
    }
    let listener = bind_private(dir, &socket)?;
    let m = std::fs::symlink_metadata(&socket).map_err(|e| format!("{socket_shown}: {e}"))?;
    Ok((
        listener,
        Claim {
            socket,
            id: (m.dev(), m.ino()),
            _lock: lock,
        },
    ))
}

/// Connects to the socket without waiting: `Ok` when a process listens
/// (a full backlog, `WouldBlock`, counts as one), `ConnectionRefused` when
/// it is a socket nobody listens on.
fn try_connect(socket: &Path) -> io::Result<()> {
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    match s.connect(&socket2::SockAddr::unix(socket)?) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
        other => other,
    }
}

/// Locks `DIR/lock` (flock, exclusive, not waiting) and writes this
/// process's ID into it; refused with the holder's ID when another
/// process holds it.
fn lock(dir: &Path) -> Result<File, String> {
    let path = dir.join(LOCK_NAME);
    let shown = path.display();
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| format!("{shown}: cannot open the state directory's lock: {e}"))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = (&file).take(32).read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                String::new()
            } else {
                format!(" (pid {holder})")
            };
            return Err(format!(
                "state directory {}: another holdfast{who} is running with it (it holds {shown}); stop it, or give this one another --state-dir",
                dir.display()
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("{shown}: cannot lock the state directory: {e}"));
        }
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    if let Err(e) = written {
        tracing::debug!("{shown}: cannot write the process ID: {e}");
    }
    Ok(file)
}

/// Binds the socket at `socket` with mode [`SOCKET_MODE`] without it ever
/// being reachable with another: bound in a fresh owner-only directory,
/// its mode set, then renamed into place (the bound socket follows its
/// inode).
fn bind_private(dir: &Path, socket: &Path) -> Result<std::os::unix::net::UnixListener, String> {
    let shown = socket.display();
    let private = dir.join(format!(".{SOCKET_NAME}.{}", std::process::id()));
    // Left by a process of the same ID that died here (a container's PID 1
    // restarted): nobody else's.
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|e| format!("{}: cannot create: {e}", private.display()))?;
    let staged = private.join(SOCKET_NAME);
    let bound = std::os::unix::net::UnixListener::bind(&staged)
        .map_err(|e| format!("{shown}: cannot bind: {e}"))
        .and_then(|l| {
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(SOCKET_MODE))
                .map_err(|e| format!("{shown}: cannot set its mode: {e}"))?;
            std::fs::rename(&staged, socket).map_err(|e| format!("{shown}: cannot place: {e}"))?;
            l.set_nonblocking(true)
                .map_err(|e| format!("{shown}: {e}"))?;
            Ok(l)
        });
    let _ = std::fs::remove_dir_all(&private);
    bound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_owner_only_and_a_held_directory_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("state");
        let (_listener, held) = claim(&dir).unwrap();
        let m = std::fs::symlink_metadata(held.socket()).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o777, SOCKET_MODE);
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o777,
            0o700,
            "a state directory holdfast makes is owner-only"
        );
        // Nothing left of the private directory it was bound in.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            {
                let mut n = names.clone();
                n.sort();
                n
            },
            vec![SOCKET_NAME.to_string(), LOCK_NAME.to_string()]
        );
        // flock is per open file: a second claim in this process is
        // refused as another process's would be.
        let e = claim(&dir).unwrap_err();
        assert!(e.contains("another holdfast"), "{e}");
        assert!(e.contains(&format!("(pid {})", std::process::id())), "{e}");
        // Released with the claim: the socket goes, the next claim works.
        drop(held);
        assert!(!socket_path(&dir).exists());
        claim(&dir).unwrap();
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_foreign_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let socket = socket_path(dir.path());
        // A socket nobody listens on: bound, then its listener dropped.
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        let (listener, _held) = claim(dir.path()).unwrap();
        drop(std::os::unix::net::UnixStream::connect(&socket).expect("the new socket answers"));
        drop(listener);
        drop(_held);
        std::fs::write(&socket, "not a socket").unwrap();
        let e = claim(dir.path()).unwrap_err();
        assert!(e.contains("exists and is not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&socket).unwrap(), "not a socket");
    }

    #[test]
    fn a_socket_someone_answers_on_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let socket = socket_path(dir.path());
        let other = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let e = claim(dir.path()).unwrap_err();
        assert!(e.contains("another process answers"), "{e}");
        drop(std::os::unix::net::UnixStream::connect(&socket).expect("still theirs"));
        drop(other);
    }
}
