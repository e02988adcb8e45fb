//! How long the state part of a live hand-off takes with many routes: two
//! peers' Adj-RIBs-Out (100k routes each by default) packed, framed,
//! sent with descriptors over a Unix socket, read, decoded and rebuilt
//! into tables on the other side — what the sessions' pause would add to
//! the draining of their sockets. Prints p50 and p99 over the runs.
//!
//! `cargo run --release --example handoff_state [ROUTES] [RUNS]`
//!
//! This is the state transfer alone: no session is paused or resumed (the
//! daemon does not transfer sessions yet).

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdfast::handoff::{self, Message, Transfer, wire};
use holdfast::model::RouteAttrs;
use holdfast::model::sorted::SortedMap;
use ipnet::IpNet;

type Table = SortedMap<IpNet, Arc<RouteAttrs>>;

/// `n` host routes in 198.18.0.0/15 with four sets of attributes, in runs
/// as the daemon's tables hold them.
fn table(n: u32) -> Table {
    let sets: Vec<Arc<RouteAttrs>> = (0..4)
        .map(|i| {
            Arc::new(RouteAttrs {
                communities: vec![65001 << 16 | i],
                med: Some(i * 10),
                ..Default::default()
            })
        })
        .collect();
    let base = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0));
    (0..n)
        .map(|i| {
            let addr = std::net::Ipv4Addr::from(base + i);
            (
                IpNet::V4(ipnet::Ipv4Net::new(addr, 32).unwrap()),
                sets[(i / 1000 % 4) as usize].clone(),
            )
        })
        .collect()
}

fn session(peer: &str, t: &Table) -> wire::SessionState {
    wire::SessionState {
        peer: peer.into(),
        peer_open: vec![0xff; 29],
        local_open: vec![0xff; 45],
        unparsed: vec![],
        hold_remaining: 7000,
        keepalive_remaining: 1000,
        adj_rib_out: handoff::rib_out(t),
        end_of_rib_sent: true,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let routes: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(30);
    let tables = [table(routes), table(routes)];
    let file = tempfile_fd();
    let mut times = Vec::with_capacity(runs);
    let mut size = 0;
    for _ in 0..runs {
        let (old, new) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let reader = std::thread::spawn(move || {
            let (m, fds) = handoff::read_frame(&new, wire::VERSION).expect("a frame");
            let Message::Transfer(t) = m else {
                panic!("not a transfer")
            };
            let rebuilt: Vec<Table> = t
                .sessions
                .into_iter()
                .map(|s| handoff::rib_table(s.adj_rib_out).unwrap())
                .collect();
            (rebuilt.iter().map(|t| t.len()).sum::<usize>(), fds.len())
        });
        let transfer = Message::Transfer(Transfer {
            build: handoff::build(),
            fds: vec![
                wire::FdRole::Lock,
                wire::FdRole::LocalApi,
                wire::FdRole::BgpListener,
                wire::FdRole::Session("tor-a".into()),
                wire::FdRole::Session("tor-b".into()),
            ],
            sessions: vec![session("tor-a", &tables[0]), session("tor-b", &tables[1])],
            bfd: vec![],
        });
        size = wire::encode(&transfer, wire::VERSION).unwrap().len();
        let fds = [file.as_fd(); 5];
        handoff::write_frame(&old, &transfer, &fds, wire::VERSION).unwrap();
        let (n, nfds) = reader.join().unwrap();
        times.push(start.elapsed());
        assert_eq!(n, 2 * routes as usize);
        assert_eq!(nfds, 5);
    }
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p).ceil() as usize).clamp(1, times.len()) - 1];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "state transfer, 2 peers x {routes} routes, {runs} runs, frame {:.1} MiB: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        size as f64 / (1024.0 * 1024.0),
        ms(pct(0.50)),
        ms(pct(0.99)),
        ms(*times.last().unwrap())
    );
}

fn tempfile_fd() -> std::fs::File {
    std::fs::File::open("/dev/null").unwrap()
}
