//! TCP-probe gating of VIPs: a VIP whose advertisement has a
//! `probe` is advertised only while a TCP connect from this node to
//! VIP:port succeeds — while the node's datapath really serves it. (ICMP is
//! no probe: with Cilium and kube-proxy a ping to a VIP loops by design.)
//!
//! A failing probe is a datapath fact, not a source flap: after
//! `fail_after` consecutive failures the VIP is withdrawn at once, without
//! the hold-down; after `recover_after` consecutive successes it returns.
//! A VIP is first advertised after its first successful probe.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::Probe;

/// Where a probed VIP stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No probe has succeeded yet: not advertised.
    Unknown,
    Passing,
    /// `fail_after` probes in a row failed: withdrawn.
    Failing,
}

/// Counts consecutive results; pure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracker {
    pub verdict: Verdict,
    successes: u32,
    failures: u32,
    pub last_error: Option<String>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            verdict: Verdict::Unknown,
            successes: 0,
            failures: 0,
            last_error: None,
        }
    }
}

impl Tracker {
    /// Records one probe; returns the new verdict when it changed.
    pub fn record(&mut self, probe: &Probe, result: Result<(), String>) -> Option<Verdict> {
        let before = self.verdict;
        match result {
            Ok(()) => {
                self.successes += 1;
                self.failures = 0;
                self.last_error = None;
                let needed = if self.verdict == Verdict::Unknown {
                    1
                } else {
                    probe.recover_after.max(1)
                };
                if self.verdict != Verdict::Passing && self.successes >= needed {
                    self.verdict = Verdict::Passing;
                }
            }
            Err(e) => {
                self.failures += 1;
                self.successes = 0;
                self.last_error = Some(e);
                if self.verdict == Verdict::Passing && self.failures >= probe.fail_after.max(1) {
                    self.verdict = Verdict::Failing;
                }
            }
        }
        (self.verdict != before).then_some(self.verdict)
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }
}

/// One probe result, for the daemon's main loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    pub vip: IpAddr,
    pub result: Result<(), String>,
}

/// Probes `vip` every `probe.interval` until the handle is dropped.
pub fn spawn(vip: IpAddr, probe: Probe, results: mpsc::UnboundedSender<ProbeResult>) -> ProbeTask {
    let task = tokio::spawn(async move {
        let addr = SocketAddr::new(vip, probe.port);
        let mut ticks = tokio::time::interval(probe.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let result =
                match tokio::time::timeout(probe.timeout, tokio::net::TcpStream::connect(addr))
                    .await
                {
                    Ok(Ok(_stream)) => Ok(()),
                    Ok(Err(e)) => Err(format!("connect to {addr}: {e}")),
                    Err(_) => Err(format!(
                        "connect to {addr}: no answer within {:?}",
                        probe.timeout
                    )),
                };
            if results.send(ProbeResult { vip, result }).is_err() {
                return;
            }
        }
    });
    ProbeTask(task)
}

/// A running prober; dropping it stops it.
pub struct ProbeTask(JoinHandle<()>);

impl Drop for ProbeTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The interval that covers `fail_after` probes: how long a broken
/// datapath stays advertised at most.
pub fn worst_case_detection(p: &Probe) -> Duration {
    p.interval * p.fail_after.max(1) + p.timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> Probe {
        Probe {
            port: 443,
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            fail_after: 3,
            recover_after: 2,
        }
    }

    #[test]
    fn first_success_then_fail_after_then_recover_after() {
        let p = probe();
        let mut t = Tracker::default();
        assert_eq!(
            t.record(&p, Err("refused".into())),
            None,
            "unknown stays unknown"
        );
        assert_eq!(t.record(&p, Ok(())), Some(Verdict::Passing));
        assert_eq!(t.record(&p, Err("refused".into())), None);
        assert_eq!(t.record(&p, Err("refused".into())), None);
        assert_eq!(t.record(&p, Ok(())), None, "a success resets the count");
        assert_eq!(t.record(&p, Err("refused".into())), None);
        assert_eq!(t.record(&p, Err("refused".into())), None);
        assert_eq!(t.record(&p, Err("refused".into())), Some(Verdict::Failing));
        assert_eq!(t.last_error.as_deref(), Some("refused"));
        assert_eq!(t.record(&p, Ok(())), None, "recover_after = 2");
        assert_eq!(t.record(&p, Ok(())), Some(Verdict::Passing));
        assert_eq!(worst_case_detection(&p), Duration::from_secs(7));
    }
}
