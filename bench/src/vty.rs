//! A direct client of bgpd's vty socket (`DIR/bgpd.vty`), the one vtysh
//! itself talks to: a command goes out NUL-terminated, the answer comes
//! back followed by three NUL octets and a status octet. Used where the
//! harness polls FRR in a tight loop (latency trials), because forking
//! vtysh for each poll costs milliseconds and would blur the figure.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

pub struct Vty {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Vty {
    pub fn connect(frr_dir: &Path) -> Vty {
        let path = frr_dir.join("bgpd.vty");
        let stream = UnixStream::connect(&path)
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", path.display()));
        Vty {
            stream,
            buf: Vec::with_capacity(64 * 1024),
        }
    }

    /// Runs one command and returns its output (without the trailer).
    pub fn command(&mut self, command: &str) -> String {
        let mut out = command.as_bytes().to_vec();
        out.push(0);
        self.stream.write_all(&out).expect("write to bgpd's vty");
        self.buf.clear();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let n = self.stream.read(&mut chunk).expect("read from bgpd's vty");
            assert!(n > 0, "bgpd closed its vty socket");
            self.buf.extend_from_slice(&chunk[..n]);
            let len = self.buf.len();
            if len >= 4 && self.buf[len - 4..len - 1] == [0, 0, 0] {
                let status = self.buf[len - 1];
                assert!(
                    status == 0,
                    "bgpd answered {command:?} with status {status}: {}",
                    String::from_utf8_lossy(&self.buf[..len - 4])
                );
                return String::from_utf8_lossy(&self.buf[..len - 4]).into_owned();
            }
        }
    }

    /// Whether bgpd has a route for exactly `prefix` (IPv4).
    pub fn has_prefix(&mut self, prefix: &str) -> bool {
        let out = self.command(&format!("show bgp ipv4 unicast {prefix} json"));
        out.contains("\"paths\"")
    }
}
