//! Reading the files an operator names: the config, the VIP file and the
//! `password_file`s.
//!
//! Each must be a regular file under a size limit. Anything else is an
//! error naming the file, never a read that blocks: `std::fs::read` on a
//! FIFO waits for a writer (the whole daemon stopped with it, keepalives
//! included), and on `/dev/zero` it reads until memory runs out. So the
//! file is stat'ed before it is opened (a device or FIFO is never opened),
//! opened non-blocking (should a FIFO be swapped in between, the open
//! returns at once), the opened file is checked again, and at most the
//! limit plus one byte is read (a file that grows while read is refused
//! too).

use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::peer::MD5_KEY_MAX_LEN;

/// The largest config file read: a per-rack file is a few kilobytes.
pub const MAX_CONFIG_LEN: u64 = 1024 * 1024;

/// The largest `password_file` read: a TCP MD5 key of at most 80 octets
/// and its line break (CR LF at most).
pub const MAX_PASSWORD_FILE_LEN: u64 = MD5_KEY_MAX_LEN as u64 + 2;

/// The largest VIP file read. 400,000 VIPs with an `address` and a
/// `service` each (tests/hostile_api.rs) are 25.5 MB, 64 octets per VIP;
/// 64 MiB leaves room for an `advertisement` line per VIP, long IPv6
/// addresses and long service names.
pub const MAX_VIP_FILE_LEN: u64 = 64 * 1024 * 1024;

/// Why an operator file was not read.
#[derive(Debug)]
pub enum FileProblem {
    /// It could not be stat'ed, opened or read.
    Io(std::io::Error),
    /// It is not a regular file but this ("a FIFO (named pipe)").
    NotRegular(&'static str),
    /// It is larger than the limit: this many bytes, when known (a file
    /// that grew while being read is not measured further).
    TooLarge(Option<u64>),
}

impl FileProblem {
    /// The problem in words, for a diagnostic that already names the file
    /// (`PATH:1:1: …`); `what` is how the operator knows the file ("config
    /// file", "VIP file").
    pub fn describe(&self, what: &str, limit: u64) -> String {
        match self {
            FileProblem::Io(e) => format!("cannot read file: {e}"),
            FileProblem::NotRegular(kind) => format!(
                "not a regular file but {kind}; a {what} must be a regular file of at most {limit} bytes"
            ),
            FileProblem::TooLarge(len) => format!(
                "file is {}; a {what} may be at most {limit} bytes",
                size(*len)
            ),
        }
    }
}

fn size(len: Option<u64>) -> String {
    len.map_or_else(|| "larger than that".to_string(), |n| format!("{n} bytes"))
}

/// A key file's contents without the line breaks that end it (`\n`, `\r`,
/// any number of them): what an editor or `echo` leaves after the key.
pub fn without_line_breaks(contents: &[u8]) -> &[u8] {
    let mut end = contents.len();
    while end > 0 && matches!(contents[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &contents[..end]
}

/// Reads `path` if it is a regular file of at most `limit` bytes; else
/// says what it is instead. Never blocks on a FIFO or device, never reads
/// more than `limit` + 1 bytes.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, FileProblem> {
    let before = std::fs::metadata(path).map_err(FileProblem::Io)?;
    check(&before, limit)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(FileProblem::Io)?;
    // What was opened, which may not be what was stat'ed.
    let opened = file.metadata().map_err(FileProblem::Io)?;
    check(&opened, limit)?;
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(FileProblem::Io)?;
    if bytes.len() as u64 > limit {
        return Err(FileProblem::TooLarge(None));
    }
    Ok(bytes)
}

/// Whether a stat shows a file [`read_regular_file`] would read.
pub fn check(meta: &Metadata, limit: u64) -> Result<(), FileProblem> {
    if !meta.is_file() {
        return Err(FileProblem::NotRegular(kind(meta)));
    }
    if meta.len() > limit {
        return Err(FileProblem::TooLarge(Some(meta.len())));
    }
    Ok(())
}

/// What a file that is not a regular file is, for the message.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(path: &Path, limit: u64) -> String {
        read_regular_file(path, limit)
            .expect_err("not readable")
            .describe("VIP file", limit)
    }

    #[test]
    fn reads_a_small_regular_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        std::fs::write(&path, b"s3cret\n").expect("write");
        assert_eq!(
            read_regular_file(&path, 82).map_err(|e| e.describe("x", 82)),
            Ok(b"s3cret\n".to_vec())
        );
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", fifo.display());
        assert_eq!(
            describe(&fifo, 82),
            "not a regular file but a FIFO (named pipe); a VIP file must be a regular file of at most 82 bytes"
        );
        assert_eq!(
            describe(Path::new("/dev/zero"), 100),
            "not a regular file but a character device; a VIP file must be a regular file of at most 100 bytes"
        );
        assert_eq!(
            describe(dir.path(), 100),
            "not a regular file but a directory; a VIP file must be a regular file of at most 100 bytes"
        );
    }

    #[test]
    fn refuses_a_file_over_the_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("key");
        std::fs::write(&path, [b'k'; 83]).expect("write");
        assert_eq!(
            describe(&path, 82),
            "file is 83 bytes; a VIP file may be at most 82 bytes"
        );
        std::fs::write(&path, [b'k'; 82]).expect("write");
        assert!(read_regular_file(&path, 82).is_ok());
    }
}
