//! Reaching a server of the test process (in the root network namespace)
//! from inside a lab namespace, without giving the root namespace any lab
//! address: `127.0.0.1:PORT` in the namespace is served by a small Python
//! forwarder that relays each connection over a Unix socket (Unix sockets
//! are not network-namespaced) to a thread of the test process, which
//! relays it to the target. Used for the Kubernetes API stand-in, which
//! runs in the test process while holdfast runs in the node namespace.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::thread;

use crate::dir::LabDir;
use crate::netns::Netns;
use crate::process::NsProcess;
use crate::require::require_tools;

const FORWARDER: &str = r#"
import os, socket, sys, threading
port, path = int(sys.argv[1]), sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(128)
print("listening", flush=True)
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    u = socket.socket(socket.AF_UNIX)
    try:
        u.connect(path)
    except OSError:
        c.close()
        return
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// A running bridge; dropping it stops both ends.
pub struct Bridge {
    _forwarder: NsProcess,
    _dir: LabDir,
    pub port: u16,
}

fn relay(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 65536];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// Serves `127.0.0.1:port` inside `ns` by relaying to `target` (an
/// address the test process can reach).
pub fn tcp_into_netns(ns: &Netns, port: u16, target: SocketAddr) -> Bridge {
    require_tools(&["python3"]);
    let dir = LabDir::new("bridge");
    let path: PathBuf = dir.join("relay.sock");
    let listener = UnixListener::bind(&path)
        .unwrap_or_else(|e| panic!("bridge socket {}: {e}", path.display()));
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(unix) = conn else { return };
            thread::spawn(move || {
                let Ok(tcp) = TcpStream::connect(target) else {
                    return;
                };
                let (Ok(unix2), Ok(tcp2)) = (unix.try_clone(), tcp.try_clone()) else {
                    return;
                };
                let up = thread::spawn(move || {
                    relay(&unix, &tcp);
                    let _ = tcp.shutdown(Shutdown::Write);
                });
                relay(&tcp2, &unix2);
                let _ = unix2.shutdown(Shutdown::Write);
                let _ = up.join();
            });
        }
    });
    let script = dir.write("forward.py", FORWARDER);
    let log = dir.join("forward.log");
    let forwarder = NsProcess::start_logged(
        ns,
        "bridge",
        &[
            "python3",
            &script.display().to_string(),
            &port.to_string(),
            &path.display().to_string(),
        ],
        &[],
        &log,
    );
    crate::wait::wait_until(
        std::time::Duration::from_secs(10),
        "the bridge to listen",
        || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains("listening"))
                .map(|_| ())
        },
    );
    Bridge {
        _forwarder: forwarder,
        _dir: dir,
        port,
    }
}
