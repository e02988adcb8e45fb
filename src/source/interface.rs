//! The node's interface addresses, for `[[advertisement]] interface`: a
//! thin driver between a source and the daemon. It polls `getifaddrs(3)`
//! and passes every snapshot of the source on with the global addresses of
//! each interface attached (`SourceSnapshot::interfaces`); which interface
//! is announced under which advertisement is decided by the policy step
//! (crate::routes), so a reload needs nothing from here.
//!
//! Polling, not netlink: an address change shows within
//! [`POLL_INTERVAL`], and a removed address is held down like any vanished
//! route, so a second of delay costs nothing. Polled only while an
//! advertisement announces an interface: a daemon without one is never
//! woken for them.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use holdfast_sockopt::InterfaceAddress;
use tokio::sync::watch;

use crate::model::SourceSnapshot;

/// How often the addresses are read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// True for an address a route may be announced for: not loopback,
/// link-local, multicast or unspecified.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => {
            !(a.is_loopback() || a.is_link_local() || a.is_multicast() || a.is_unspecified())
        }
        IpAddr::V6(a) => {
            !(a.is_loopback()
                || a.is_unicast_link_local()
                || a.is_multicast()
                || a.is_unspecified())
        }
    }
}

/// The global addresses of each interface, sorted.
pub fn global_addresses(list: &[InterfaceAddress]) -> BTreeMap<String, Vec<IpAddr>> {
    let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for a in list.iter().filter(|a| is_global(a.address)) {
        out.entry(a.interface.clone()).or_default().push(a.address);
    }
    for ips in out.values_mut() {
        ips.sort_unstable();
        ips.dedup();
    }
    out
}

fn read() -> BTreeMap<String, Vec<IpAddr>> {
    match holdfast_sockopt::interface_addresses() {
        Ok(list) => global_addresses(&list),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the interface addresses (getifaddrs)");
            BTreeMap::new()
        }
    }
}

/// Whether `config` has an advertisement that announces an interface's
/// addresses: only then are they read.
pub fn wanted(config: &crate::config::Config) -> bool {
    config.advertisements.iter().any(|a| a.interface.is_some())
}

/// Puts the driver between a source and the daemon: the source publishes
/// into the returned sender, the daemon keeps receiving from `outer`'s
/// receiver. The addresses are polled while `wanted` holds true (the
/// config has an `interface` advertisement, see [`wanted`]); else nothing
/// is armed and snapshots pass through as they are (with the interfaces
/// last read, which no advertisement reads). Runs on the current tokio
/// runtime until the source's sender is dropped or the daemon stops
/// receiving.
pub fn follow(
    outer: watch::Sender<SourceSnapshot>,
    mut wanted: watch::Receiver<bool>,
) -> watch::Sender<SourceSnapshot> {
    let (inner, mut rx) = watch::channel(SourceSnapshot::default());
    tokio::spawn(async move {
        let mut polling = *wanted.borrow_and_update();
        let mut interfaces = Arc::new(if polling { read() } else { BTreeMap::new() });
        // Nothing is passed on before the source's first snapshot: the
        // daemon must not take the interfaces alone for the source's view.
        let mut last: Option<SourceSnapshot> = None;
        let mut tick = polling.then(ticks);
        let mut wants = true;
        loop {
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    last = Some(rx.borrow_and_update().clone());
                }
                changed = wanted.changed(), if wants => {
                    if changed.is_err() {
                        // The daemon is gone, or keeps what it said.
                        wants = false;
                        continue;
                    }
                    let now = *wanted.borrow_and_update();
                    if now == polling {
                        continue;
                    }
                    polling = now;
                    // An advertisement now reads them: read at once, then
                    // poll. None does: stop polling.
                    tick = polling.then(ticks);
                    continue;
                }
                () = next_tick(&mut tick) => {
                    let now = read();
                    if now == *interfaces {
                        continue;
                    }
                    tracing::debug!(interfaces = now.len(), "interface addresses changed");
                    interfaces = Arc::new(now);
                }
                () = outer.closed() => return,
            }
            let Some(mut snapshot) = last.clone() else {
                continue;
            };
            snapshot.interfaces = Arc::clone(&interfaces);
            outer.send_if_modified(|current| {
                if *current == snapshot {
                    return false;
                }
                *current = snapshot;
                true
            });
        }
    });
    inner
}

/// A poll every [`POLL_INTERVAL`], the first at once.
fn ticks() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

async fn next_tick(tick: &mut Option<tokio::time::Interval>) {
    match tick {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(interface: &str, ip: &str) -> InterfaceAddress {
        InterfaceAddress {
            interface: interface.to_string(),
            address: ip.parse().expect("an address"),
            prefix_len: 24,
        }
    }

    #[test]
    fn only_global_addresses_count() {
        let list = [
            addr("lo", "127.0.0.1"),
            addr("lo", "::1"),
            addr("lo", "198.51.100.7"),
            addr("eth0", "fe80::1"),
            addr("eth0", "169.254.0.9"),
            addr("eth0", "2001:db8::9"),
            addr("eth0", "192.0.2.9"),
            addr("eth0", "192.0.2.9"),
        ];
        let got = global_addresses(&list);
        let ips = |v: &[&str]| -> Vec<IpAddr> { v.iter().map(|s| s.parse().unwrap()).collect() };
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got["lo"], ips(&["198.51.100.7"]));
        assert_eq!(got["eth0"], ips(&["192.0.2.9", "2001:db8::9"]));
    }
}
