//! Probe gating of VIPs: a VIP whose advertisement has a `probe` is
//! advertised only while its probe succeeds: a TCP connect from this node
//! to VIP:port — the node's datapath really serves it — or an HTTP(S) GET
//! of the probe's URL answering 2xx ([`http`]: a control-plane VIP follows
//! its node's API server's `/readyz`). (ICMP is no probe: with Cilium and
//! kube-proxy a ping to a VIP loops by design.)
//!
//! A failing probe is a datapath fact, not a source flap: after
//! `fail_after` consecutive failures the VIP is withdrawn at once, without
//! the hold-down; after `recover_after` consecutive successes it returns.
//! A VIP is first advertised after its first successful probe.
//!
//! With `on_failure = "degrade"` a failing VIP is not withdrawn but
//! re-announced with its advertisement's `degraded` attributes (a higher
//! MED, a longer AS path, communities), so routers prefer the other nodes
//! while this one still takes traffic if it is the last (ExaBGP
//! healthcheck's down state). While `disable_file` exists the probe counts
//! as failed at once, without waiting for `fail_after` (ExaBGP's
//! `--disable`: a maintenance switch); once it is gone the VIP needs
//! `recover_after` successes like any failed probe. [`health`] is the
//! decision; the driver only stats the file and connects (or GETs).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::{OnFailure, Probe, ProbeTarget};

pub mod http;

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
    /// The disable file existed at the last probe.
    pub disabled: bool,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            verdict: Verdict::Unknown,
            successes: 0,
            failures: 0,
            last_error: None,
            disabled: false,
        }
    }
}

/// What a probed VIP gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Not probed successfully yet: not advertised.
    Unknown,
    /// Advertised with its own attributes.
    Healthy,
    /// Advertised with its advertisement's `degraded` attributes.
    Degraded,
    /// Withdrawn at once.
    Withdrawn,
}

/// The fate of a VIP whose probe stands at `verdict`.
pub fn health(verdict: Verdict, on_failure: OnFailure) -> Health {
    match (verdict, on_failure) {
        (Verdict::Unknown, _) => Health::Unknown,
        (Verdict::Passing, _) => Health::Healthy,
        (Verdict::Failing, OnFailure::Withdraw) => Health::Withdrawn,
        (Verdict::Failing, OnFailure::Degrade) => Health::Degraded,
    }
}

impl Tracker {
    /// The gate of the routes step for this VIP.
    pub fn gate(&self, probe: &Probe) -> crate::model::Gate {
        use crate::model::Gate;
        match health(self.verdict, probe.on_failure) {
            Health::Unknown => Gate::Unknown,
            Health::Healthy => Gate::Pass,
            Health::Degraded => Gate::Degraded,
            Health::Withdrawn => Gate::Fail,
        }
    }

    /// Records one probe; returns the new verdict when it changed.
    pub fn record(&mut self, probe: &Probe, result: Result<(), String>) -> Option<Verdict> {
        self.observe(probe, Observation::Probed(result))
    }

    /// Records one round: the disable file's presence or a probe result.
    /// Returns the new verdict when it changed.
    pub fn observe(&mut self, probe: &Probe, observation: Observation) -> Option<Verdict> {
        let result = match observation {
            Observation::Disabled => {
                let before = self.verdict;
                self.disabled = true;
                self.successes = 0;
                self.failures = self.failures.saturating_add(1);
                self.last_error = Some(format!(
                    "disable file {} exists",
                    probe
                        .disable_file
                        .as_deref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ));
                // A maintenance switch acts at once, whatever the count.
                self.verdict = Verdict::Failing;
                return (self.verdict != before).then_some(self.verdict);
            }
            Observation::Probed(result) => result,
        };
        let was_disabled = std::mem::take(&mut self.disabled);
        if was_disabled {
            self.successes = 0;
        }
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

/// One round of a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The disable file exists: no connect was tried.
    Disabled,
    /// The connect's outcome.
    Probed(Result<(), String>),
}

/// One probe result, for the daemon's main loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    pub vip: IpAddr,
    pub result: Observation,
}

/// True when `path` exists. The stat runs on tokio's blocking pool (a hung
/// network filesystem must not stall the runtime thread) and is given
/// `bound`; a stat that errs or overruns counts as "no file": the switch
/// is for operators to turn on, not for a sick filesystem.
async fn disable_file_present(path: &std::path::Path, bound: Duration) -> bool {
    matches!(
        tokio::time::timeout(bound, tokio::fs::try_exists(path)).await,
        Ok(Ok(true))
    )
}

/// How one VIP is probed.
enum Prober {
    /// A TCP connect to this address.
    Tcp(SocketAddr),
    Http(http::HttpProbe),
}

impl Prober {
    fn new(vip: IpAddr, target: &ProbeTarget) -> Prober {
        match target {
            ProbeTarget::Tcp { port } => Prober::Tcp(SocketAddr::new(vip, *port)),
            ProbeTarget::Http { url, ca_file } => {
                Prober::Http(http::HttpProbe::new(url.clone(), ca_file.clone()))
            }
        }
    }

    /// One probe, within `timeout`.
    async fn probe(&mut self, timeout: Duration) -> Result<(), String> {
        match self {
            Prober::Tcp(addr) => {
                match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(*addr)).await {
                    Ok(Ok(_stream)) => Ok(()),
                    Ok(Err(e)) => Err(format!("connect to {addr}: {e}")),
                    Err(_) => Err(format!("connect to {addr}: no answer within {timeout:?}")),
                }
            }
            Prober::Http(h) => h.probe(timeout).await,
        }
    }
}

/// Probes `vip` every `probe.interval` until the handle is dropped.
pub fn spawn(vip: IpAddr, probe: Probe, results: mpsc::UnboundedSender<ProbeResult>) -> ProbeTask {
    let task = tokio::spawn(async move {
        let mut prober = Prober::new(vip, &probe.target);
        let mut ticks = tokio::time::interval(probe.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Some(path) = &probe.disable_file
                && disable_file_present(path, probe.timeout).await
            {
                let result = Observation::Disabled;
                if results.send(ProbeResult { vip, result }).is_err() {
                    return;
                }
                continue;
            }
            let result = Observation::Probed(prober.probe(probe.timeout).await);
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

/// What `explain` needs of a failing probe.
pub struct Failing<'a> {
    pub target: &'a ProbeTarget,
    pub failures: u32,
    pub fail_after: u32,
    pub error: Option<&'a str>,
    pub on_failure: OnFailure,
    pub disabled: Option<&'a std::path::Path>,
}

/// `explain`'s line for a failing probe.
pub fn explain_failing(p: Failing<'_>) -> String {
    let what = match p.on_failure {
        OnFailure::Withdraw => "withdrawn at once, without the hold-down",
        OnFailure::Degrade => {
            "announced with the advertisement's degraded attributes (on_failure = \"degrade\"), not withdrawn"
        }
    };
    match &p.disabled {
        Some(path) => format!(
            "its probe is disabled: the disable file {} exists (maintenance), so the VIP counts as failed: {what}; remove the file to restore it",
            path.display()
        ),
        None => format!(
            "its {} failed {} times in a row ({}): {what}{}",
            p.target.describe(),
            p.failures.max(p.fail_after),
            p.error.unwrap_or("no detail"),
            match p.target {
                ProbeTarget::Tcp { .. } => " — the datapath does not serve it",
                ProbeTarget::Http { .. } => "",
            }
        ),
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
            target: ProbeTarget::Tcp { port: 443 },
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(1),
            fail_after: 3,
            recover_after: 2,
            on_failure: OnFailure::Withdraw,
            disable_file: Some("/run/holdfast/maintenance".into()),
        }
    }

    #[test]
    fn health_follows_the_verdict_and_on_failure() {
        use OnFailure::*;
        assert_eq!(health(Verdict::Unknown, Degrade), Health::Unknown);
        assert_eq!(health(Verdict::Passing, Degrade), Health::Healthy);
        assert_eq!(health(Verdict::Passing, Withdraw), Health::Healthy);
        assert_eq!(health(Verdict::Failing, Withdraw), Health::Withdrawn);
        assert_eq!(health(Verdict::Failing, Degrade), Health::Degraded);
    }

    #[test]
    fn the_disable_file_fails_at_once_and_recovery_takes_recover_after() {
        let p = probe();
        let mut t = Tracker::default();
        assert_eq!(
            t.observe(&p, Observation::Probed(Ok(()))),
            Some(Verdict::Passing)
        );
        assert_eq!(
            t.observe(&p, Observation::Disabled),
            Some(Verdict::Failing),
            "no fail_after wait"
        );
        assert!(t.disabled);
        assert_eq!(
            t.last_error.as_deref(),
            Some("disable file /run/holdfast/maintenance exists")
        );
        assert_eq!(t.observe(&p, Observation::Disabled), None);
        assert_eq!(t.observe(&p, Observation::Probed(Ok(()))), None, "1 of 2");
        assert!(!t.disabled, "the file is gone");
        assert_eq!(
            t.observe(&p, Observation::Probed(Ok(()))),
            Some(Verdict::Passing)
        );
        // A VIP never probed is failed by the switch too: a degraded
        // route is announced, or nothing.
        let mut t = Tracker::default();
        assert_eq!(t.observe(&p, Observation::Disabled), Some(Verdict::Failing));
        assert_eq!(health(t.verdict, OnFailure::Degrade), Health::Degraded);
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
