//! BGP messages as seen on the wire: `tcpdump` on an interface of a lab
//! namespace writes a pcap file, and [`Capture::stop`] reads it back into
//! the BGP messages of each direction with the kernel's receive timestamp
//! (CLOCK_REALTIME, nanoseconds), so they compare with
//! `SystemTime::now()` taken by the harness.
//!
//! Each direction's TCP payload is put back in sequence order and cut into
//! messages by their header (RFC 4271 §4.1: 16-octet marker, 2-octet
//! length, 1-octet type), so a message split over segments or several
//! messages in one segment are each seen once.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use testlab::{LabDir, Netns, NsProcess, Signal};

/// RFC 4271 §4.1 message types.
pub const OPEN: u8 = 1;
pub const UPDATE: u8 = 2;
pub const NOTIFICATION: u8 = 3;
pub const KEEPALIVE: u8 = 4;

/// One BGP message on the wire.
#[derive(Clone, Debug)]
pub struct Message {
    /// Receive timestamp of the segment holding its first octet, in
    /// nanoseconds since the Unix epoch.
    pub ns: u64,
    pub src: Ipv4Addr,
    pub kind: u8,
    /// The whole message, header included.
    pub bytes: Vec<u8>,
}

impl Message {
    /// RFC 4724 §2: End-of-RIB for IPv4 unicast is an UPDATE with no
    /// withdrawn routes and no path attributes (23 octets).
    pub fn is_end_of_rib(&self) -> bool {
        self.kind == UPDATE && self.bytes.len() == 23
    }
}

/// A TCP segment's facts the timeline needs.
#[derive(Clone, Debug)]
pub struct Segment {
    pub ns: u64,
    pub src: Ipv4Addr,
    pub syn: bool,
    pub ack: bool,
}

pub struct Capture {
    process: NsProcess,
    file: PathBuf,
    _dir: LabDir,
}

/// Nanoseconds since the Unix epoch, the clock tcpdump stamps with.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos() as u64
}

impl Capture {
    /// Starts capturing BGP (TCP port 179) on `ifname` in `ns`, and returns
    /// once tcpdump says it is listening.
    pub fn start(ns: &Netns, ifname: &str) -> Capture {
        testlab::require_tools(&["tcpdump"]);
        let dir = LabDir::new("capture");
        let file = dir.join("bgp.pcap");
        let path = file.display().to_string();
        // -Z root: tcpdump would otherwise drop to its own user before
        // opening the file in a directory only root may write to.
        // --immediate-mode: without it libpcap hands packets over in blocks
        // and tcpdump, stopped, leaves the last block unwritten.
        let argv = [
            "tcpdump",
            "--immediate-mode",
            "-i",
            ifname,
            "-n",
            "-U",
            "-s",
            "0",
            "-Z",
            "root",
            "--time-stamp-precision=nano",
            "-w",
            &path,
            "tcp port 179",
        ];
        let mut process =
            NsProcess::start_logged(ns, "tcpdump", &argv, &[], &dir.join("tcpdump.log"));
        let t0 = Instant::now();
        while !process.log().contains("listening on") {
            process.assert_running("starting the capture");
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "tcpdump did not start listening: {}",
                process.log_tail(10)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Capture {
            process,
            file,
            _dir: dir,
        }
    }

    /// Stops tcpdump (it writes out what it holds on SIGINT) and returns
    /// the segments and the BGP messages it saw.
    pub fn stop(mut self) -> (Vec<Segment>, Vec<Message>) {
        self.process.kill(Signal::Int);
        self.process.wait_exit(Duration::from_secs(20));
        let log = self.process.log();
        assert!(
            log.lines()
                .any(|l| l.trim() == "0 packets dropped by kernel"),
            "tcpdump dropped packets: {log}"
        );
        let data =
            std::fs::read(&self.file).unwrap_or_else(|e| panic!("{}: {e}", self.file.display()));
        let (segments, messages) = parse_pcap(&data);
        if std::env::var_os("BENCH_CAPTURE_DEBUG").is_some() {
            eprintln!(
                "capture: {} octets, {} segments, {} messages; tcpdump: {log}",
                data.len(),
                segments.len(),
                messages.len()
            );
        }
        (segments, messages)
    }
}

/// One direction of a connection: where the next payload octet belongs,
/// the octets not yet cut into messages, and when each segment arrived.
#[derive(Default)]
struct Stream {
    next_seq: Option<u32>,
    buf: Vec<u8>,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// (stream offset of its first octet, timestamp) of the segments that
    /// hold `buf`, in order.
    starts: Vec<(u64, u64)>,
}

impl Stream {
    /// Appends a segment and returns the messages it completed, each with
    /// the timestamp of the segment that carried its first octet.
    fn push(&mut self, seq: u32, payload: &[u8], ns: u64) -> Vec<(u64, Vec<u8>)> {
        let payload = match self.next_seq {
            // The capture began mid-stream: start at a segment that opens
            // with a marker.
            None if payload.len() < 19 || payload[..16] != [0xff; 16] => return Vec::new(),
            None => payload,
            Some(next) => {
                let ahead = seq.wrapping_sub(next) as i32;
                assert!(
                    ahead <= 0,
                    "the capture lost {ahead} octets of a BGP stream (tcpdump dropped packets?)"
                );
                // A retransmission, or a segment overlapping what was seen.
                let seen = ahead.unsigned_abs() as usize;
                if seen >= payload.len() {
                    return Vec::new();
                }
                &payload[seen..]
            }
        };
        let seq = self.next_seq.unwrap_or(seq);
        self.next_seq = Some(seq.wrapping_add(payload.len() as u32));
        self.starts.push((self.base + self.buf.len() as u64, ns));
        self.buf.extend_from_slice(payload);
        let mut messages = Vec::new();
        while self.buf.len() >= 19 {
            assert!(
                self.buf[..16] == [0xff; 16],
                "a BGP message without its marker in the capture"
            );
            let len = usize::from(u16::from_be_bytes([self.buf[16], self.buf[17]]));
            assert!(len >= 19, "a BGP message of length {len} in the capture");
            if self.buf.len() < len {
                break;
            }
            let first = self
                .starts
                .iter()
                .rev()
                .find(|(off, _)| *off <= self.base)
                .map_or(ns, |(_, t)| *t);
            messages.push((first, self.buf[..len].to_vec()));
            self.buf.drain(..len);
            self.base += len as u64;
            // Keep the last segment that began at or before the new base
            // and all after it.
            let keep = self
                .starts
                .iter()
                .rposition(|(off, _)| *off <= self.base)
                .unwrap_or(0);
            self.starts.drain(..keep);
        }
        messages
    }
}

/// Segments and BGP messages (both directions, capture order) of a pcap
/// file of Ethernet frames carrying IPv4.
pub fn parse_pcap(data: &[u8]) -> (Vec<Segment>, Vec<Message>) {
    assert!(data.len() >= 24, "a pcap file without its header");
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    // tcpdump writes in the host's order (little-endian here); 0xa1b23c4d
    // is the nanosecond variant.
    let frac_ns = match magic {
        0xa1b2_3c4d => 1,
        0xa1b2_c3d4 => 1000,
        other => panic!("not a little-endian pcap file (magic {other:#x})"),
    };
    let linktype = u32::from_le_bytes(data[20..24].try_into().unwrap());
    assert_eq!(linktype, 1, "the capture is not Ethernet");
    let mut segments = Vec::new();
    let mut messages = Vec::new();
    let mut streams: BTreeMap<(Ipv4Addr, u16, Ipv4Addr, u16), Stream> = BTreeMap::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let h = |i: usize| u32::from_le_bytes(data[at + i..at + i + 4].try_into().unwrap());
        let ns = u64::from(h(0)) * 1_000_000_000 + u64::from(h(4)) * frac_ns;
        let incl = h(8) as usize;
        let frame = &data[at + 16..(at + 16 + incl).min(data.len())];
        at += 16 + incl;
        // Ethernet II, IPv4, TCP.
        if frame.len() < 14 + 20 || frame[12..14] != [0x08, 0x00] {
            continue;
        }
        let ip = &frame[14..];
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ip[9] != 6 || ip.len() < total || total < ihl + 20 {
            continue;
        }
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        let tcp = &ip[ihl..total];
        let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let off = usize::from(tcp[12] >> 4) * 4;
        let flags = tcp[13];
        let (syn, ack, rst) = (flags & 0x02 != 0, flags & 0x10 != 0, flags & 0x04 != 0);
        segments.push(Segment { ns, src, syn, ack });
        let key = (src, sport, dst, dport);
        if syn || rst {
            // A new connection (or the end of one) on these ports.
            streams.remove(&key);
            if syn {
                let s = streams.entry(key).or_default();
                s.next_seq = Some(seq.wrapping_add(1));
            }
            continue;
        }
        let payload = &tcp[off.min(tcp.len())..];
        if payload.is_empty() {
            continue;
        }
        for (t, bytes) in streams.entry(key).or_default().push(seq, payload, ns) {
            messages.push(Message {
                ns: t,
                src,
                kind: bytes[18],
                bytes,
            });
        }
    }
    (segments, messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![0xff; 16];
        m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        m.push(kind);
        m.extend_from_slice(body);
        m
    }

    /// An Ethernet frame with an IPv4/TCP segment from A:40000 to B:179.
    fn frame(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 20 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0, total.to_be_bytes()[0], total.to_be_bytes()[1]]);
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&A.octets());
        f.extend_from_slice(&B.octets());
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&179u16.to_be_bytes());
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f
    }

    /// A nanosecond pcap file of (seconds, nanoseconds, frame).
    fn pcap(frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        p.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0]);
        p.extend_from_slice(&1u32.to_le_bytes());
        for (s, ns, f) in frames {
            for v in [*s, *ns, f.len() as u32, f.len() as u32] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            p.extend_from_slice(f);
        }
        p
    }

    #[test]
    fn messages_are_cut_from_the_stream_and_stamped_by_their_first_octet() {
        let open = message(OPEN, &[4; 10]);
        let update = message(UPDATE, &[0; 40]);
        let ka = message(KEEPALIVE, &[]);
        let eor = message(UPDATE, &[0, 0, 0, 0]);
        // SYN (seq 999), then: the OPEN and half the UPDATE; the UPDATE's
        // rest with a KEEPALIVE; that segment again (a retransmission);
        // End-of-RIB.
        let mut s1 = open.clone();
        s1.extend_from_slice(&update[..30]);
        let mut s2 = update[30..].to_vec();
        s2.extend_from_slice(&ka);
        let seq1 = 1000;
        let seq2 = seq1 + s1.len() as u32;
        let seq3 = seq2 + s2.len() as u32;
        let file = pcap(&[
            (10, 0, frame(999, 0x02, &[])),
            (10, 100, frame(seq1, 0x18, &s1)),
            (10, 200, frame(seq2, 0x18, &s2)),
            (10, 300, frame(seq2, 0x18, &s2)),
            (11, 5, frame(seq3, 0x18, &eor)),
        ]);
        let (segments, messages) = parse_pcap(&file);
        assert_eq!(segments.len(), 5);
        assert!(segments[0].syn && !segments[0].ack);
        let got: Vec<(u64, u8, usize)> = messages
            .iter()
            .map(|m| (m.ns, m.kind, m.bytes.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (10_000_000_100, OPEN, open.len()),
                (10_000_000_100, UPDATE, update.len()),
                (10_000_000_200, KEEPALIVE, 19),
                (11_000_000_005, UPDATE, 23),
            ]
        );
        assert!(!messages[1].is_end_of_rib());
        assert!(messages[3].is_end_of_rib());
        assert_eq!(messages[1].bytes, update);
    }

    #[test]
    fn a_capture_begun_mid_stream_starts_at_the_first_marker() {
        let ka = message(KEEPALIVE, &[]);
        let tail = message(UPDATE, &[7; 30])[25..].to_vec();
        let file = pcap(&[
            (1, 0, frame(500, 0x18, &tail)),
            (4, 0, frame(500 + tail.len() as u32, 0x18, &ka)),
            (7, 0, frame(500 + tail.len() as u32 + 19, 0x18, &ka)),
        ]);
        let (_, messages) = parse_pcap(&file);
        let got: Vec<(u64, u8)> = messages.iter().map(|m| (m.ns, m.kind)).collect();
        assert_eq!(
            got,
            vec![(4_000_000_000, KEEPALIVE), (7_000_000_000, KEEPALIVE)]
        );
    }

    #[test]
    #[should_panic(expected = "the capture lost")]
    fn a_gap_in_the_stream_fails_loudly() {
        let ka = message(KEEPALIVE, &[]);
        let file = pcap(&[
            (1, 0, frame(99, 0x02, &[])),
            (2, 0, frame(100, 0x18, &ka)),
            (3, 0, frame(100 + 19 + 19, 0x18, &ka)),
        ]);
        parse_pcap(&file);
    }
}
