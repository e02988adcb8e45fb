//! Address families and the small context that decoding and encoding take:
//! what the session negotiated (RFC 6793 4-octet AS, RFC 7911 ADD-PATH,
//! RFC 8654 extended messages).

use std::fmt;

use crate::consts::{MAX_EXTENDED_MESSAGE_LEN, MAX_MESSAGE_LEN};

/// Address Family Identifier (IANA "Address Family Numbers").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Afi(pub u16);

impl Afi {
    /// 1 — IP (IP version 4).
    pub const IPV4: Afi = Afi(1);
    /// 2 — IP6 (IP version 6).
    pub const IPV6: Afi = Afi(2);
}

/// Subsequent Address Family Identifier (IANA "SAFI Values").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Safi(pub u8);

impl Safi {
    /// 1 — NLRI used for unicast forwarding (RFC 4760 §6).
    pub const UNICAST: Safi = Safi(1);
    /// 2 — NLRI used for multicast forwarding (RFC 4760 §6).
    pub const MULTICAST: Safi = Safi(2);
}

/// An AFI/SAFI pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Family {
    /// The Address Family Identifier.
    pub afi: Afi,
    /// The Subsequent Address Family Identifier.
    pub safi: Safi,
}

impl Family {
    /// IPv4 unicast: the family of plain RFC 4271 NLRI.
    pub const IPV4_UNICAST: Family = Family::new(Afi::IPV4, Safi::UNICAST);
    /// IPv6 unicast (RFC 2545, in MP_REACH_NLRI).
    pub const IPV6_UNICAST: Family = Family::new(Afi::IPV6, Safi::UNICAST);
    /// IPv4 multicast.
    pub const IPV4_MULTICAST: Family = Family::new(Afi::IPV4, Safi::MULTICAST);
    /// IPv6 multicast.
    pub const IPV6_MULTICAST: Family = Family::new(Afi::IPV6, Safi::MULTICAST);

    /// The family `afi`/`safi`.
    pub const fn new(afi: Afi, safi: Safi) -> Self {
        Family { afi, safi }
    }

    /// Families whose NLRI are plain prefixes (RFC 4271 §4.3, RFC 4760 §5):
    /// these are parsed; every other family's NLRI is kept as opaque bytes.
    pub fn has_prefix_nlri(self) -> bool {
        matches!(self.afi, Afi::IPV4 | Afi::IPV6)
            && matches!(self.safi, Safi::UNICAST | Safi::MULTICAST)
    }

    /// The address length in bits for prefix families.
    pub fn max_prefix_len(self) -> Option<u8> {
        match self.afi {
            Afi::IPV4 => Some(32),
            Afi::IPV6 => Some(128),
            _ => None,
        }
    }

    /// The holdfast/FRR-style name: `ipv4-unicast`.
    pub fn name(self) -> String {
        let afi = match self.afi {
            Afi::IPV4 => "ipv4".to_string(),
            Afi::IPV6 => "ipv6".to_string(),
            Afi(n) => format!("afi{n}"),
        };
        let safi = match self.safi.0 {
            1 => "unicast".to_string(),
            2 => "multicast".to_string(),
            4 => "labeled-unicast".to_string(),
            128 => "mpls-vpn".to_string(),
            133 => "flowspec".to_string(),
            n => format!("safi{n}"),
        };
        format!("{afi}-{safi}")
    }

    fn bit(self) -> Option<u8> {
        match (self.afi, self.safi) {
            (Afi::IPV4, Safi::UNICAST) => Some(1),
            (Afi::IPV6, Safi::UNICAST) => Some(2),
            (Afi::IPV4, Safi::MULTICAST) => Some(4),
            (Afi::IPV6, Safi::MULTICAST) => Some(8),
            _ => None,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A set of the prefix families (IPv4/IPv6 unicast/multicast), as a bit set
/// so that `Context` stays `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FamilySet(u8);

impl FamilySet {
    /// No family.
    pub const EMPTY: FamilySet = FamilySet(0);

    /// Adds `family`; a family outside the four prefix families is ignored.
    pub fn insert(&mut self, family: Family) {
        if let Some(bit) = family.bit() {
            self.0 |= bit;
        }
    }

    /// Whether `family` is in the set (never, for a non-prefix family).
    pub fn contains(self, family: Family) -> bool {
        family.bit().is_some_and(|bit| self.0 & bit != 0)
    }

    /// The set with `family` added, as [`FamilySet::insert`] does.
    pub fn with(mut self, family: Family) -> Self {
        self.insert(family);
        self
    }

    /// Whether the set holds no family.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<Family> for FamilySet {
    fn from_iter<I: IntoIterator<Item = Family>>(iter: I) -> Self {
        let mut set = FamilySet::EMPTY;
        for f in iter {
            set.insert(f);
        }
        set
    }
}

/// What the session negotiated, as far as the wire format depends on it.
/// The same context decodes what we receive and encodes what we send; the
/// session builds one for each direction (ADD-PATH is per direction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// RFC 6793: AS numbers in AS_PATH and AGGREGATOR are 4 octets.
    pub four_octet_as: bool,
    /// RFC 7911: NLRI of these families carry a 4-octet Path Identifier.
    pub add_path: FamilySet,
    /// RFC 4271 §4.1 / RFC 8654: 4096, or 65535 with extended messages.
    pub max_message_len: usize,
    /// Whether the peer is external (eBGP). `None` when unknown (offline
    /// decoding): the rules of RFC 7606 that depend on it are then skipped.
    pub external: Option<bool>,
}

impl Default for Context {
    /// The context of a modern session before anything else is known:
    /// 4-octet AS (every current implementation negotiates it), no ADD-PATH,
    /// 4096-octet messages.
    fn default() -> Self {
        Context {
            four_octet_as: true,
            add_path: FamilySet::EMPTY,
            max_message_len: MAX_MESSAGE_LEN,
            external: None,
        }
    }
}

impl Context {
    /// The default context, but for a peer without the 4-octet AS capability:
    /// AS numbers are two octets on the wire (RFC 6793 §4.2).
    pub fn two_octet_as() -> Self {
        Context {
            four_octet_as: false,
            ..Context::default()
        }
    }

    /// The context with ADD-PATH for `family`: its NLRI carry a Path
    /// Identifier (RFC 7911 §3).
    pub fn with_add_path(mut self, family: Family) -> Self {
        self.add_path.insert(family);
        self
    }

    /// The context with extended messages: up to 65535 octets (RFC 8654 §4).
    pub fn with_extended_messages(mut self) -> Self {
        self.max_message_len = MAX_EXTENDED_MESSAGE_LEN;
        self
    }

    /// The width of an AS number on the wire, in octets: 4 or 2.
    pub fn as_width(&self) -> usize {
        if self.four_octet_as { 4 } else { 2 }
    }
}
