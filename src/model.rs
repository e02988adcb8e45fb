//! What flows between the layers (DESIGN.md: source → policy → stability →
//! speaker → sessions).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::stability::Absence;

/// One VIP a source wants this node to advertise, with the facts policy
/// and `explain` need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vip {
    pub address: IpAddr,
    /// The `[[advertisement]]`s it is advertised under (at least one).
    pub advertisements: BTreeSet<String>,
    /// The Service ("namespace/name"), when known.
    pub service: Option<String>,
}

/// The full desired set of a source at one moment. Sources send whole
/// snapshots; the stability layer works out what changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceSnapshot {
    pub vips: BTreeMap<IpAddr, Vip>,
    /// VIPs that went away, when the source knows why (DESIGN.md:
    /// transient versus definitive). A VIP missing without a reason is
    /// taken as `Vanished` (held down).
    pub absences: BTreeMap<IpAddr, Absence>,
    /// An unhealthy source never causes a withdrawal: the last known set
    /// stands.
    pub healthy: bool,
    /// The source has delivered its first complete view (`/readyz`).
    pub synced: bool,
    /// The last problem, in words an operator can act on (a VIP file's
    /// `path:line:col: message`, an API server error).
    pub error: Option<String>,
    /// Why VIPs the source saw are not wanted here, for `explain`
    /// (Kubernetes: class mismatch, selector miss, no local endpoint…).
    pub excluded: BTreeMap<IpAddr, Vec<String>>,
}
