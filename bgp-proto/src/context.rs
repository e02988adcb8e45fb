//! Address families and the small context that decoding and encoding take:
//! what the session negotiated (RFC 6793 4-octet AS, RFC 7911 ADD-PATH,
//! RFC 8654 extended messages).

use std::fmt;

use crate::consts::{MAX_EXTENDED_MESSAGE_LEN, MAX_MESSAGE_LEN};

/// Address Family Identifier (IANA "Address Family Numbers").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Afi(pub u16);

impl Afi {
    pub const IPV4: Afi = Afi(1);
    pub const IPV6: Afi = Afi(2);
}

/// Subsequent Address Family Identifier (IANA "SAFI Values").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Safi(pub u8);

impl Safi {
    pub const UNICAST: Safi = Safi(1);
    pub const MULTICAST: Safi = Safi(2);
}

/// An AFI/SAFI pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Family {
    pub afi: Afi,
    pub safi: Safi,
}

impl Family {
    pub const IPV4_UNICAST: Family = Family::new(Afi::IPV4, Safi::UNICAST);
    pub const IPV6_UNICAST: Family = Family::new(Afi::IPV6, Safi::UNICAST);
    pub const IPV4_MULTICAST: Family = Family::new(Afi::IPV4, Safi::MULTICAST);
    pub const IPV6_MULTICAST: Family = Family::new(Afi::IPV6, Safi::MULTICAST);

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
    pub const EMPTY: FamilySet = FamilySet(0);

    pub fn insert(&mut self, family: Family) {
        if let Some(bit) = family.bit() {
            self.0 |= bit;
        }
    }

    pub fn contains(self, family: Family) -> bool {
        family.bit().is_some_and(|bit| self.0 & bit != 0)
    }

    pub fn with(mut self, family: Family) -> Self {
        self.insert(family);
        self
    }

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
    pub fn two_octet_as() -> Self {
        Context {
            four_octet_as: false,
            ..Context::default()
        }
    }

    pub fn with_add_path(mut self, family: Family) -> Self {
        self.add_path.insert(family);
        self
    }

    pub fn with_extended_messages(mut self) -> Self {
        self.max_message_len = MAX_EXTENDED_MESSAGE_LEN;
        self
    }

    pub fn as_width(&self) -> usize {
        if self.four_octet_as { 4 } else { 2 }
    }
}
