//! The floor: the least work any BGP speaker can do to put N /32s into a
//! router. It builds every UPDATE before it connects (packed full, one
//! set of path attributes), then opens the session and writes them, with
//! End-of-RIB, in one `write_all`; afterwards it only answers KEEPALIVEs.
//! No RIB, no policy, no file to read: what is left of the time to load is
//! the router's and the kernel's. The harness starts it like the other
//! speakers (the clock runs from the process start), and the "× floor"
//! column of BENCHMARKS.md divides by its time.
//!
//!   holdfast-floor LOCAL_IP PEER_IP LOCAL_AS N [EXTRA_IP...]
//!
//! Routes: N in 198.18.0.0/15 counted up (as `speakers::bulk_addr`), then
//! each EXTRA_IP; next hop LOCAL_IP, AS_PATH LOCAL_AS, ORIGIN IGP.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// RFC 4271 §4.1: the largest message without RFC 8654.
const MAX_MESSAGE: usize = 4096;
/// RFC 8654 §3: the largest with the Extended Message capability on both
/// sides (FRR has it, and holdfast uses it).
const MAX_EXTENDED: usize = 65535;
const HOLD_TIME: u16 = 9;

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    // RFC 4271 §4.1: marker of all ones, length, type.
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(kind);
    m.extend_from_slice(body);
    m
}

fn open(local_as: u32, id: Ipv4Addr) -> Vec<u8> {
    // RFC 4271 §4.2, with the capabilities (RFC 5492): multiprotocol IPv4
    // unicast (RFC 4760), four-octet AS numbers (RFC 6793) and extended
    // messages (RFC 8654).
    let mut caps = vec![1, 4, 0, 1, 0, 1, 6, 0, 65, 4];
    caps.extend_from_slice(&local_as.to_be_bytes());
    let my_as = u16::try_from(local_as).unwrap_or(23456);
    let mut b = vec![4];
    b.extend_from_slice(&my_as.to_be_bytes());
    b.extend_from_slice(&HOLD_TIME.to_be_bytes());
    b.extend_from_slice(&id.octets());
    b.push(caps.len() as u8 + 2);
    b.push(2);
    b.push(caps.len() as u8);
    b.extend_from_slice(&caps);
    message(1, &b)
}

/// Every UPDATE for `routes`, packed as full as RFC 4271 §4.3 allows.
fn updates(routes: &[Ipv4Addr], local_as: u32, next_hop: Ipv4Addr, max: usize) -> Vec<u8> {
    // ORIGIN IGP; AS_PATH one AS_SEQUENCE of one four-octet AS; NEXT_HOP.
    let mut attrs = vec![0x40, 1, 1, 0, 0x40, 2, 6, 2, 1];
    attrs.extend_from_slice(&local_as.to_be_bytes());
    attrs.extend_from_slice(&[0x40, 3, 4]);
    attrs.extend_from_slice(&next_hop.octets());
    let per_message = (max - 19 - 4 - attrs.len()) / 5;
    let mut out = Vec::with_capacity(routes.len() * 5 + routes.len() / per_message * 64 + 64);
    for chunk in routes.chunks(per_message) {
        let mut b = vec![0, 0];
        b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        b.extend_from_slice(&attrs);
        for r in chunk {
            b.push(32);
            b.extend_from_slice(&r.octets());
        }
        out.extend_from_slice(&message(2, &b));
    }
    // RFC 4724 §2: End-of-RIB for IPv4 unicast is an empty UPDATE.
    out.extend_from_slice(&message(2, &[0, 0, 0, 0]));
    out
}

/// Whether an OPEN's body (RFC 4271 §4.2) carries the Extended Message
/// capability (RFC 8654 §3, code 6) among its capabilities (RFC 5492 §4).
fn has_extended_message(open: &[u8]) -> bool {
    let Some(params) = open.get(10..10 + usize::from(*open.get(9).unwrap_or(&0))) else {
        return false;
    };
    let mut i = 0;
    while i + 2 <= params.len() {
        let (kind, len) = (params[i], usize::from(params[i + 1]));
        let value = params.get(i + 2..i + 2 + len).unwrap_or(&[]);
        if kind == 2 {
            let mut j = 0;
            while j + 2 <= value.len() {
                if value[j] == 6 {
                    return true;
                }
                j += 2 + usize::from(value[j + 1]);
            }
        }
        i += 2 + len;
    }
    false
}

fn read_message(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 19];
    s.read_exact(&mut h)?;
    let len = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let mut body = vec![0; len.saturating_sub(19)];
    s.read_exact(&mut body)?;
    Ok((h[18], body))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: holdfast-floor LOCAL_IP PEER_IP LOCAL_AS N [EXTRA_IP...]");
        std::process::exit(2);
    }
    let local: Ipv4Addr = args[0].parse().expect("LOCAL_IP");
    let peer: Ipv4Addr = args[1].parse().expect("PEER_IP");
    let local_as: u32 = args[2].parse().expect("LOCAL_AS");
    let n: u32 = args[3].parse().expect("N");
    let mut routes: Vec<Ipv4Addr> = (0..n)
        .map(|i| Ipv4Addr::from([198, 18 + (i >> 16) as u8, (i >> 8) as u8, i as u8]))
        .collect();
    routes.extend(
        args[4..]
            .iter()
            .map(|a| a.parse::<Ipv4Addr>().expect("EXTRA_IP")),
    );
    // Both packings built before connecting; the peer's OPEN picks one.
    let bulk = updates(&routes, local_as, local, MAX_MESSAGE);
    let bulk_extended = updates(&routes, local_as, local, MAX_EXTENDED);
    let hello = open(local_as, local);
    let keepalive = message(4, &[]);

    loop {
        let mut s = match TcpStream::connect_timeout(
            &SocketAddr::from((peer, 179)),
            Duration::from_secs(2),
        ) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("connect {peer}: {e}");
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        let _ = s.set_nodelay(true);
        let session = (|| -> std::io::Result<()> {
            s.write_all(&hello)?;
            let mut extended = false;
            // RFC 4271 §8.2.2: OPEN, then its KEEPALIVE confirms it.
            loop {
                match read_message(&mut s)? {
                    (1, b) => {
                        extended = has_extended_message(&b);
                        s.write_all(&keepalive)?;
                    }
                    (4, _) => break,
                    (3, b) => return Err(std::io::Error::other(format!("NOTIFICATION {b:?}"))),
                    _ => {}
                }
            }
            let bulk = if extended { &bulk_extended } else { &bulk };
            eprintln!("Established with {peer}: writing {} octets", bulk.len());
            s.write_all(bulk)?;
            // Hold time 9 s: a KEEPALIVE every 3 s, and the router's read.
            s.set_read_timeout(Some(Duration::from_secs(3)))?;
            loop {
                match read_message(&mut s) {
                    Ok((3, b)) => return Err(std::io::Error::other(format!("NOTIFICATION {b:?}"))),
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e),
                }
                s.write_all(&keepalive)?;
            }
        })();
        if let Err(e) = session {
            eprintln!("session with {peer}: {e}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
