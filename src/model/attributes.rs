//! Per-Service path attributes, one row each in [`TABLE`]: the annotation
//! a Service asks with and how its value parses, the `[[advertisement]]`
//! key of the same attribute, how the Service's value meets the
//! advertisement's, how `explain` shows it, and where it goes in the
//! attributes a peer is sent ([`RouteAttrs`]).
//!
//! Adding an attribute is a variant of [`ServiceAttribute`], a field of
//! [`ServiceAttributes`] for the Service's value and a row; a path
//! attribute holdfast does not send yet is also a field of [`RouteAttrs`]
//! with its rule across advertisements ([`RouteAttrs::merge`]) and its
//! encoding (`speaker::EncodeParams::path_attributes`). Everything else —
//! which annotations a Service record keeps, `allow_service_attributes`,
//! refusals, `explain`, the per-peer merge — walks the table.
//!
//! Pure, and shared vocabulary: the config reads `allow_service_attributes`
//! with it, the policy the annotations, the speaker turns its rows into
//! what each peer gets.

use super::community::{format_community, parse_community, parse_large_community};

/// Longest prepend a Service may ask for: a longer path only ever loses,
/// and a long one makes the route look broken to operators and some
/// routers' limits.
pub const MAX_PREPEND: u8 = 10;

/// A path attribute a Service's value sets: a row of [`TABLE`], in its
/// order. The annotated ones are what `allow_service_attributes` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceAttribute {
    /// `holdfast.dev/communities`: added to the advertisement's.
    Communities,
    /// `holdfast.dev/large-communities`: added to the advertisement's.
    LargeCommunities,
    /// `holdfast.dev/local-pref`: replaces the advertisement's.
    LocalPref,
    /// `holdfast.dev/med`: replaces the advertisement's.
    Med,
    /// `holdfast.dev/as-path-prepend`: our AS this many more times.
    AsPathPrepend,
    /// The Service's ready local endpoints, counted by holdfast (no
    /// annotation): the link-bandwidth community of an advertisement with
    /// `link_bandwidth`.
    LinkBandwidth,
}

impl ServiceAttribute {
    /// Its row.
    pub fn row(self) -> &'static Row {
        &TABLE[self as usize]
    }

    /// The name in `allow_service_attributes` ("local-pref").
    pub fn as_str(&self) -> &'static str {
        self.row().name
    }

    /// The Service annotation ("holdfast.dev/local-pref"), when a Service
    /// asks for it with one.
    pub fn annotation(&self) -> Option<&'static str> {
        self.row().annotation.as_ref().map(|a| a.name)
    }

    /// The attributes a Service asks for with an annotation, with it, in
    /// the order the config and the docs list them.
    pub fn annotated() -> impl Iterator<Item = (ServiceAttribute, &'static Annotation)> {
        TABLE
            .iter()
            .filter_map(|row| Some((row.attribute, row.annotation.as_ref()?)))
    }
}

/// Path attributes a Service asks for (its annotations, [`TABLE`]) and
/// the facts about it that change its route's attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceAttributes {
    /// Added to the advertisement's COMMUNITIES (RFC 1997).
    pub communities: Vec<u32>,
    /// Added to the advertisement's LARGE_COMMUNITY (RFC 8092).
    pub large_communities: Vec<(u32, u32, u32)>,
    /// Replaces the advertisement's LOCAL_PREF (iBGP only).
    pub local_pref: Option<u32>,
    /// Replaces the advertisement's MULTI_EXIT_DISC.
    pub med: Option<u32>,
    /// Our AS this many more times in the AS_PATH (eBGP only).
    pub as_path_prepend: Option<u8>,
    /// This node's share of the Service's traffic, in units of the
    /// link-bandwidth extended community (ready local endpoints for eTP
    /// Local, 1 for eTP Cluster); set only when an advertisement of the VIP
    /// has `link_bandwidth = "per-endpoint"`, and rate-limited
    /// (link_bandwidth::Settle).
    pub endpoints: Option<u32>,
    /// The VIP's probe fails with `on_failure = "degrade"` (or its disable
    /// file exists): each advertisement applies its `degraded` attributes.
    pub degraded: bool,
}

impl ServiceAttributes {
    pub fn is_empty(&self) -> bool {
        *self == ServiceAttributes::default()
    }
}

/// The path attributes a peer gets for a route: what its advertisements
/// add, with the Service's values where they allow them. Encoded per
/// session by `speaker::EncodeParams::path_attributes`.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct RouteAttrs {
    pub communities: Vec<u32>,
    pub large_communities: Vec<(u32, u32, u32)>,
    pub extended_communities: Vec<[u8; 8]>,
    /// Sent to iBGP peers only (RFC 4271 §5.1.5).
    pub local_pref: Option<u32>,
    /// We originate the route, so the MED we set is ours to send; one
    /// learned from a neighbouring AS would not be passed on (RFC 4271
    /// §5.1.4), and holdfast learns none.
    pub med: Option<u32>,
    /// Our AS this many extra times in the AS_PATH towards eBGP peers.
    pub as_path_prepend: u8,
    /// Endpoints behind this route, sent as the link-bandwidth extended
    /// community (src/model/link_bandwidth.rs); its global administrator is our AS,
    /// known only per session.
    pub link_bandwidth: Option<u32>,
}

impl RouteAttrs {
    /// Adds what one more advertisement for the same peer gives the route
    /// (`one`): communities add up, the highest LOCAL_PREF, the lowest MED,
    /// the longest prepend and the largest endpoint count win.
    pub fn merge(&mut self, one: RouteAttrs) {
        self.communities.extend(one.communities);
        self.large_communities.extend(one.large_communities);
        self.extended_communities.extend(one.extended_communities);
        self.local_pref = self.local_pref.max(one.local_pref);
        self.med = match (self.med, one.med) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        self.as_path_prepend = self.as_path_prepend.max(one.as_path_prepend);
        self.link_bandwidth = self.link_bandwidth.max(one.link_bandwidth);
    }

    /// Sorted and without duplicates, so that equal sets compare equal.
    pub fn canonical(mut self) -> Self {
        self.communities.sort_unstable();
        self.communities.dedup();
        self.large_communities.sort_unstable();
        self.large_communities.dedup();
        self.extended_communities.sort_unstable();
        self.extended_communities.dedup();
        self
    }
}

/// What one advertisement gives a route: its own attributes (`own`, from
/// its keys) with the Service's values of the attributes it `allows`, each
/// as its row says (Service over advertisement).
pub fn with_service(
    mut own: RouteAttrs,
    service: Option<&ServiceAttributes>,
    allows: impl Fn(ServiceAttribute) -> bool,
) -> RouteAttrs {
    if let Some(service) = service {
        for row in TABLE.iter().filter(|row| allows(row.attribute)) {
            (row.apply)(service, &mut own);
        }
    }
    own
}

/// The Service's values in words, for `explain` ("communities 65001:200,
/// med 10"), in the table's order.
pub fn describe(a: &ServiceAttributes) -> String {
    ServiceAttribute::annotated()
        .filter_map(|(_, annotation)| (annotation.show)(a))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One per-Service path attribute.
pub struct Row {
    /// Which attribute; its place in [`TABLE`].
    pub attribute: ServiceAttribute,
    /// Its name in `allow_service_attributes` and in refusals.
    pub name: &'static str,
    /// The annotation a Service asks for it with, if any.
    pub annotation: Option<Annotation>,
    /// The `[[advertisement]]` key of the same attribute, if any: the
    /// value every route of the advertisement carries, which the
    /// Service's adds to or replaces; for a counted attribute, the key
    /// that turns it on.
    pub key: Option<AdvertisementKey>,
    /// Service over advertisement: puts the Service's value into what one
    /// advertisement that allows it gives the route (its own attributes).
    /// The field it writes is the path attribute it becomes.
    pub apply: fn(&ServiceAttributes, &mut RouteAttrs),
    /// Forgets the Service's value: a refused annotation leaves the route
    /// the advertisement's.
    pub clear: fn(&mut ServiceAttributes),
}

/// A Service annotation asking for a path attribute.
pub struct Annotation {
    /// "holdfast.dev/local-pref".
    pub name: &'static str,
    /// A value it accepts, as the docs show it.
    pub example: &'static str,
    /// Reads the annotation's value into the Service's attributes, or says
    /// why it cannot (what the refusal quotes).
    pub parse: fn(&str, &mut ServiceAttributes) -> Result<(), String>,
    /// The Service's value in words for `explain`; `None` when it has none.
    pub show: fn(&ServiceAttributes) -> Option<String>,
}

/// An `[[advertisement]]` key of a per-Service attribute.
pub struct AdvertisementKey {
    /// "local_pref".
    pub name: &'static str,
    /// A value it accepts, in TOML.
    pub example: &'static str,
}

/// Every per-Service path attribute, in the order of [`ServiceAttribute`]
/// (the order `allow_service_attributes`, refusals and `explain` list
/// them).
pub static TABLE: [Row; 6] = [
    // COMMUNITIES (RFC 1997), to every peer.
    Row {
        attribute: ServiceAttribute::Communities,
        name: "communities",
        annotation: Some(Annotation {
            name: "holdfast.dev/communities",
            example: "65001:200,no-export",
            parse: |text, s| {
                s.communities = list(text, parse_community)?;
                Ok(())
            },
            show: |s| {
                (!s.communities.is_empty()).then(|| {
                    let c: Vec<String> =
                        s.communities.iter().map(|c| format_community(*c)).collect();
                    format!("communities {}", c.join(","))
                })
            },
        }),
        key: Some(AdvertisementKey {
            name: "communities",
            example: r#"["65001:100"]"#,
        }),
        apply: |s, a| a.communities.extend(s.communities.iter().copied()),
        clear: |s| s.communities.clear(),
    },
    // LARGE_COMMUNITY (RFC 8092), to every peer.
    Row {
        attribute: ServiceAttribute::LargeCommunities,
        name: "large-communities",
        annotation: Some(Annotation {
            name: "holdfast.dev/large-communities",
            example: "65001:1:2",
            parse: |text, s| {
                s.large_communities = list(text, parse_large_community)?;
                Ok(())
            },
            show: |s| {
                (!s.large_communities.is_empty()).then(|| {
                    let c: Vec<String> = s
                        .large_communities
                        .iter()
                        .map(|(x, y, z)| format!("{x}:{y}:{z}"))
                        .collect();
                    format!("large communities {}", c.join(","))
                })
            },
        }),
        key: Some(AdvertisementKey {
            name: "large_communities",
            example: r#"["65001:1:100"]"#,
        }),
        apply: |s, a| {
            a.large_communities
                .extend(s.large_communities.iter().copied())
        },
        clear: |s| s.large_communities.clear(),
    },
    // LOCAL_PREF, to iBGP peers only (RFC 4271 §5.1.5).
    Row {
        attribute: ServiceAttribute::LocalPref,
        name: "local-pref",
        annotation: Some(Annotation {
            name: "holdfast.dev/local-pref",
            example: "250",
            parse: |text, s| {
                s.local_pref = Some(
                    number(text, u64::from(u32::MAX))
                        .ok_or("expected a number in 0..=4294967295")?,
                );
                Ok(())
            },
            show: |s| {
                s.local_pref
                    .map(|lp| format!("local-pref {lp} (iBGP peers)"))
            },
        }),
        key: Some(AdvertisementKey {
            name: "local_pref",
            example: "200",
        }),
        apply: |s, a| a.local_pref = s.local_pref.or(a.local_pref),
        clear: |s| s.local_pref = None,
    },
    // MULTI_EXIT_DISC (RFC 4271 §5.1.4), to every peer.
    Row {
        attribute: ServiceAttribute::Med,
        name: "med",
        annotation: Some(Annotation {
            name: "holdfast.dev/med",
            example: "10",
            parse: |text, s| {
                s.med = Some(
                    number(text, u64::from(u32::MAX))
                        .ok_or("expected a number in 0..=4294967295")?,
                );
                Ok(())
            },
            show: |s| s.med.map(|med| format!("med {med}")),
        }),
        key: Some(AdvertisementKey {
            name: "med",
            example: "50",
        }),
        apply: |s, a| a.med = s.med.or(a.med),
        clear: |s| s.med = None,
    },
    // Our AS more times in the AS_PATH, towards eBGP peers only (RFC 4271
    // §5.1.2, §9.1.2). The advertisement has no prepend of its own (its
    // `degraded` one is added by the speaker to a degraded route).
    Row {
        attribute: ServiceAttribute::AsPathPrepend,
        name: "as-path-prepend",
        annotation: Some(Annotation {
            name: "holdfast.dev/as-path-prepend",
            example: "10",
            parse: |text, s| {
                s.as_path_prepend = Some(
                    number(text, u64::from(MAX_PREPEND))
                        .ok_or_else(|| format!("expected a count in 0..={MAX_PREPEND}"))?,
                );
                Ok(())
            },
            show: |s| {
                s.as_path_prepend
                    .map(|n| format!("as-path-prepend {n} (eBGP peers)"))
            },
        }),
        key: None,
        apply: |s, a| {
            a.as_path_prepend = a
                .as_path_prepend
                .saturating_add(s.as_path_prepend.unwrap_or(0))
        },
        clear: |s| s.as_path_prepend = None,
    },
    // The link-bandwidth extended community (draft-ietf-idr-link-bandwidth
    // §3), to every peer: the endpoint count holdfast keeps for the
    // Service (src/model/link_bandwidth.rs), under an advertisement with
    // `link_bandwidth`.
    Row {
        attribute: ServiceAttribute::LinkBandwidth,
        name: "link-bandwidth",
        annotation: None,
        key: Some(AdvertisementKey {
            name: "link_bandwidth",
            example: r#""per-endpoint""#,
        }),
        apply: |s, a| a.link_bandwidth = s.endpoints.or(a.link_bandwidth),
        clear: |s| s.endpoints = None,
    },
];

// Each row sits at its attribute's place: `ServiceAttribute::row` indexes.
const _: () = {
    let mut i = 0;
    while i < TABLE.len() {
        assert!(TABLE[i].attribute as usize == i, "TABLE is out of order");
        i += 1;
    }
};

/// One number written as a string (`"200"`), at most `max`.
fn number<T: std::str::FromStr>(text: &str, max: u64) -> Option<T> {
    let t = text.trim();
    let n: u64 = t.parse().ok()?;
    (n <= max).then(|| t.parse().ok()).flatten()
}

/// A comma-separated list, every element parsed, sorted and without
/// duplicates; an empty list is an error (the annotation says something is
/// wanted and names nothing).
fn list<T: Ord>(text: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            continue;
        }
        out.push(parse(item)?);
    }
    if out.is_empty() {
        return Err("the list is empty".to_string());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
#[path = "attributes_tests.rs"]
mod tests;
