//! BFD Control packets (RFC 5880 §4.1).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Vers |  Diag   |Sta|P|F|C|A|D|M|  Detect Mult  |    Length     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       My Discriminator                        |
//! |                      Your Discriminator                       |
//! |                    Desired Min TX Interval                    |
//! |                   Required Min RX Interval                    |
//! |                 Required Min Echo RX Interval                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Auth Type  |   Auth Len    |    Auth Key ID  |  ...        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The Authentication Section follows when the A bit is set (§4.2–4.4):
//! a Simple Password, or a sequence number and an MD5 or SHA1 digest.

use std::fmt;

/// RFC 5880 §4.1: "Vers: The version number of the protocol ... 1".
pub const VERSION: u8 = 1;
/// The mandatory section, without authentication.
pub const LEN: usize = 24;
/// The longest packet holdfast sends or reads: the mandatory section and
/// a Keyed SHA1 section (RFC 5880 §4.4: 28 octets).
pub const MAX_LEN: usize = LEN + SHA1_SECTION_LEN;
/// RFC 5880 §4.3: "Auth Len: ... (24 for Keyed MD5 ...)".
const MD5_SECTION_LEN: usize = 24;
/// RFC 5880 §4.4: "Auth Len: ... (28 for Keyed SHA1 ...)".
const SHA1_SECTION_LEN: usize = 28;
/// RFC 5880 §4.2: the Simple Password is 1 to 16 bytes.
pub const MAX_PASSWORD_LEN: usize = 16;
/// Where the digest starts in a packet: the mandatory section, then Auth
/// Type, Auth Len, Auth Key ID, Reserved and the Sequence Number
/// (RFC 5880 §4.3, §4.4).
pub const DIGEST_OFFSET: usize = LEN + 8;

/// Session states (RFC 5880 §4.1 "Sta").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    AdminDown = 0,
    Down = 1,
    Init = 2,
    Up = 3,
}

impl State {
    fn from_bits(b: u8) -> State {
        match b & 3 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::AdminDown => "AdminDown",
            State::Down => "Down",
            State::Init => "Init",
            State::Up => "Up",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Diagnostic codes (RFC 5880 §4.1 "Diag").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Diag {
    None = 0,
    ControlDetectionTimeExpired = 1,
    EchoFunctionFailed = 2,
    NeighborSignaledSessionDown = 3,
    ForwardingPlaneReset = 4,
    PathDown = 5,
    ConcatenatedPathDown = 6,
    AdministrativelyDown = 7,
    ReverseConcatenatedPathDown = 8,
}

impl Diag {
    pub fn from_bits(b: u8) -> Diag {
        match b & 0x1f {
            1 => Diag::ControlDetectionTimeExpired,
            2 => Diag::EchoFunctionFailed,
            3 => Diag::NeighborSignaledSessionDown,
            4 => Diag::ForwardingPlaneReset,
            5 => Diag::PathDown,
            6 => Diag::ConcatenatedPathDown,
            7 => Diag::AdministrativelyDown,
            8 => Diag::ReverseConcatenatedPathDown,
            _ => Diag::None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Diag::None => "No Diagnostic",
            Diag::ControlDetectionTimeExpired => "Control Detection Time Expired",
            Diag::EchoFunctionFailed => "Echo Function Failed",
            Diag::NeighborSignaledSessionDown => "Neighbor Signaled Session Down",
            Diag::ForwardingPlaneReset => "Forwarding Plane Reset",
            Diag::PathDown => "Path Down",
            Diag::ConcatenatedPathDown => "Concatenated Path Down",
            Diag::AdministrativelyDown => "Administratively Down",
            Diag::ReverseConcatenatedPathDown => "Reverse Concatenated Path Down",
        }
    }
}

/// Authentication types (RFC 5880 §4.1 "Auth Type"; 0 is reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthType {
    SimplePassword = 1,
    KeyedMd5 = 2,
    MeticulousKeyedMd5 = 3,
    KeyedSha1 = 4,
    MeticulousKeyedSha1 = 5,
}

impl AuthType {
    pub const ALL: [AuthType; 5] = [
        AuthType::SimplePassword,
        AuthType::KeyedMd5,
        AuthType::MeticulousKeyedMd5,
        AuthType::KeyedSha1,
        AuthType::MeticulousKeyedSha1,
    ];

    fn from_code(code: u8) -> Option<AuthType> {
        AuthType::ALL.into_iter().find(|t| *t as u8 == code)
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthType::SimplePassword => "simple-password",
            AuthType::KeyedMd5 => "keyed-md5",
            AuthType::MeticulousKeyedMd5 => "meticulous-keyed-md5",
            AuthType::KeyedSha1 => "keyed-sha1",
            AuthType::MeticulousKeyedSha1 => "meticulous-keyed-sha1",
        }
    }

    /// The Meticulous variants: the sequence number grows with every
    /// packet and the receiver accepts only a larger one (§6.7.3, §6.7.4).
    pub fn meticulous(self) -> bool {
        matches!(
            self,
            AuthType::MeticulousKeyedMd5 | AuthType::MeticulousKeyedSha1
        )
    }

    /// Octets of the digest: 16 for MD5 (§4.3), 20 for SHA1 (§4.4); none
    /// for the Simple Password.
    pub fn digest_len(self) -> Option<usize> {
        match self {
            AuthType::SimplePassword => None,
            AuthType::KeyedMd5 | AuthType::MeticulousKeyedMd5 => Some(16),
            AuthType::KeyedSha1 | AuthType::MeticulousKeyedSha1 => Some(20),
        }
    }

    /// The longest key: the password (§4.2: 1 to 16 bytes), or the key the
    /// digest field carries while it is computed, "padded to 16 bytes with
    /// zeros" (MD5, §6.7.3) or "padded to 20 bytes" (SHA1, §6.7.4).
    pub fn max_key_len(self) -> usize {
        self.digest_len().unwrap_or(MAX_PASSWORD_LEN)
    }
}

/// An Authentication Section (RFC 5880 §4.2–4.4), as carried: `value` is
/// the password (Simple Password) or the digest (Keyed MD5, Keyed SHA1).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Auth {
    pub auth_type: AuthType,
    pub key_id: u8,
    /// The Sequence Number; 0 for the Simple Password, which has none.
    pub sequence: u32,
    value: [u8; 20],
    value_len: u8,
}

impl Auth {
    /// A section of `auth_type` carrying `value` (at most 20 bytes:
    /// callers pass a checked key or a digest).
    pub fn new(auth_type: AuthType, key_id: u8, sequence: u32, value: &[u8]) -> Auth {
        let len = auth_type.digest_len().unwrap_or(value.len()).min(20);
        let mut v = [0u8; 20];
        let n = value.len().min(len);
        v[..n].copy_from_slice(&value[..n]);
        Auth {
            auth_type,
            key_id,
            sequence: if auth_type == AuthType::SimplePassword {
                0
            } else {
                sequence
            },
            value: v,
            value_len: len as u8,
        }
    }

    /// The password or the digest.
    pub fn value(&self) -> &[u8] {
        &self.value[..usize::from(self.value_len)]
    }

    /// Auth Len: 3 + the password (§4.2), 24 (§4.3) or 28 (§4.4).
    fn section_len(&self) -> usize {
        match self.auth_type {
            AuthType::SimplePassword => 3 + usize::from(self.value_len),
            _ => 8 + usize::from(self.value_len),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A Simple Password is a secret: never in a log.
        let mut d = f.debug_struct("Auth");
        d.field("auth_type", &self.auth_type)
            .field("key_id", &self.key_id)
            .field("sequence", &self.sequence);
        if self.auth_type != AuthType::SimplePassword {
            d.field("digest", &self.value());
        }
        d.finish()
    }
}

/// An encoded packet: at most [`MAX_LEN`] octets, no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Wire {
    buf: [u8; MAX_LEN],
    len: u8,
}

impl Wire {
    /// The first [`MAX_LEN`] octets of `b` (a longer datagram is cut here;
    /// decoding it refuses what does not fit).
    pub fn from_bytes(b: &[u8]) -> Wire {
        let mut buf = [0u8; MAX_LEN];
        let n = b.len().min(MAX_LEN);
        buf[..n].copy_from_slice(&b[..n]);
        Wire { buf, len: n as u8 }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Wire(<{} octets>)", self.len)
    }
}

/// A packet as received: decoded, and its octets as they came (a digest
/// is checked over those, RFC 5880 §6.7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub packet: Packet,
    pub wire: Wire,
}

impl Received {
    /// [`Packet::decode`], keeping the octets of the packet (its Length).
    pub fn decode(b: &[u8]) -> Result<Received, Discard> {
        let packet = Packet::decode(b)?;
        Ok(Received {
            packet,
            wire: Wire::from_bytes(&b[..usize::from(b[3])]),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub diag: Diag,
    pub state: State,
    pub poll: bool,
    pub final_: bool,
    /// C: forwarding is independent of the control plane.
    pub control_plane_independent: bool,
    pub demand: bool,
    pub detect_mult: u8,
    pub my_discriminator: u32,
    pub your_discriminator: u32,
    /// Microseconds.
    pub desired_min_tx: u32,
    pub required_min_rx: u32,
    pub required_min_echo_rx: u32,
    /// The Authentication Section; present means the A bit is set.
    pub auth: Option<Auth>,
}

#[cfg(test)]
impl Packet {
    /// The first packet of a peer with no session yet (tests): Down, Your
    /// Discriminator 0 (RFC 5880 §6.8.6), `interval_us` for both rates,
    /// Detect Mult 3, no authentication.
    pub(crate) fn first_from(my_discriminator: u32, interval_us: u32) -> Packet {
        Packet {
            diag: Diag::None,
            state: State::Down,
            poll: false,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator,
            your_discriminator: 0,
            desired_min_tx: interval_us,
            required_min_rx: interval_us,
            required_min_echo_rx: 0,
            auth: None,
        }
    }
}

/// Why a received packet is discarded (RFC 5880 §6.8.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    Truncated,
    Version(u8),
    Length(u8),
    DetectMultZero,
    Multipoint,
    MyDiscriminatorZero,
    /// The Auth Type is 0 (reserved) or unknown.
    AuthType(u8),
    /// The Auth Len does not fit the Length field or the Auth Type.
    AuthLength(u8),
}

impl fmt::Display for Discard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Discard::Truncated => write!(f, "shorter than 24 octets"),
            Discard::Version(v) => write!(f, "version {v}"),
            Discard::Length(l) => write!(f, "length field {l} inconsistent"),
            Discard::DetectMultZero => write!(f, "Detect Mult 0"),
            Discard::Multipoint => write!(f, "M bit set"),
            Discard::MyDiscriminatorZero => write!(f, "My Discriminator 0"),
            Discard::AuthType(t) => write!(f, "unknown Auth Type {t}"),
            Discard::AuthLength(l) => write!(f, "Auth Len {l} inconsistent"),
        }
    }
}

impl Packet {
    pub fn encode(&self) -> Wire {
        let mut b = [0u8; MAX_LEN];
        let len = LEN + self.auth.as_ref().map_or(0, Auth::section_len);
        b[0] = (VERSION << 5) | (self.diag as u8 & 0x1f);
        b[1] = ((self.state as u8) << 6)
            | (u8::from(self.poll) << 5)
            | (u8::from(self.final_) << 4)
            | (u8::from(self.control_plane_independent) << 3)
            | (u8::from(self.auth.is_some()) << 2)
            | (u8::from(self.demand) << 1);
        b[2] = self.detect_mult;
        b[3] = len as u8;
        b[4..8].copy_from_slice(&self.my_discriminator.to_be_bytes());
        b[8..12].copy_from_slice(&self.your_discriminator.to_be_bytes());
        b[12..16].copy_from_slice(&self.desired_min_tx.to_be_bytes());
        b[16..20].copy_from_slice(&self.required_min_rx.to_be_bytes());
        b[20..24].copy_from_slice(&self.required_min_echo_rx.to_be_bytes());
        if let Some(a) = &self.auth {
            b[LEN] = a.auth_type as u8;
            b[LEN + 1] = a.section_len() as u8;
            b[LEN + 2] = a.key_id;
            if a.auth_type == AuthType::SimplePassword {
                // §4.2: the password follows the Key ID.
                b[LEN + 3..len].copy_from_slice(a.value());
            } else {
                // §4.3/§4.4: Reserved (0), Sequence Number, digest.
                b[LEN + 4..DIGEST_OFFSET].copy_from_slice(&a.sequence.to_be_bytes());
                b[DIGEST_OFFSET..len].copy_from_slice(a.value());
            }
        }
        Wire {
            buf: b,
            len: len as u8,
        }
    }

    /// The §6.8.6 checks that need no session.
    pub fn decode(b: &[u8]) -> Result<Packet, Discard> {
        if b.len() < LEN {
            return Err(Discard::Truncated);
        }
        let version = b[0] >> 5;
        if version != VERSION {
            return Err(Discard::Version(version));
        }
        let auth = b[1] & 0x04 != 0;
        let length = b[3];
        // "If the Length field is less than the minimum correct value (24
        // if the A bit is clear, or 26 if the A bit is set), the packet
        // MUST be discarded." "If the Length field is greater than the
        // payload of the encapsulating protocol, the packet MUST be
        // discarded."
        if usize::from(length) < if auth { 26 } else { LEN } || usize::from(length) > b.len() {
            return Err(Discard::Length(length));
        }
        if b[2] == 0 {
            return Err(Discard::DetectMultZero);
        }
        if b[1] & 0x01 != 0 {
            return Err(Discard::Multipoint);
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let my = u32_at(4);
        if my == 0 {
            return Err(Discard::MyDiscriminatorZero);
        }
        let auth = if auth {
            Some(decode_auth(&b[LEN..usize::from(length)])?)
        } else {
            None
        };
        Ok(Packet {
            diag: Diag::from_bits(b[0]),
            state: State::from_bits(b[1] >> 6),
            poll: b[1] & 0x20 != 0,
            final_: b[1] & 0x10 != 0,
            control_plane_independent: b[1] & 0x08 != 0,
            demand: b[1] & 0x02 != 0,
            detect_mult: b[2],
            my_discriminator: my,
            your_discriminator: u32_at(8),
            desired_min_tx: u32_at(12),
            required_min_rx: u32_at(16),
            required_min_echo_rx: u32_at(20),
            auth,
        })
    }
}

/// The Authentication Section: `s` is what the Length field gives it (at
/// least 2 octets, the Length check made sure).
fn decode_auth(s: &[u8]) -> Result<Auth, Discard> {
    let auth_type = AuthType::from_code(s[0]).ok_or(Discard::AuthType(s[0]))?;
    let auth_len = s[1];
    let n = usize::from(auth_len);
    // The section is the rest of the packet (its Length covers it), and
    // its Auth Len is the one of its type: §4.2 "the length of the password
    // in bytes plus 3" (a password of 1 to 16 bytes), §4.3 "24", §4.4 "28".
    let fits = match auth_type {
        AuthType::SimplePassword => (4..=3 + MAX_PASSWORD_LEN).contains(&n),
        AuthType::KeyedMd5 | AuthType::MeticulousKeyedMd5 => n == MD5_SECTION_LEN,
        AuthType::KeyedSha1 | AuthType::MeticulousKeyedSha1 => n == SHA1_SECTION_LEN,
    };
    if !fits || n != s.len() {
        return Err(Discard::AuthLength(auth_len));
    }
    let key_id = s[2];
    Ok(match auth_type {
        AuthType::SimplePassword => Auth::new(auth_type, key_id, 0, &s[3..n]),
        _ => Auth::new(
            auth_type,
            key_id,
            u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
            &s[8..n],
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Packet {
        Packet {
            diag: Diag::ControlDetectionTimeExpired,
            state: State::Up,
            poll: true,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator: 0x1234_5678,
            your_discriminator: 7,
            desired_min_tx: 100_000,
            required_min_rx: 300_000,
            required_min_echo_rx: 0,
            auth: None,
        }
    }

    fn bytes(p: &Packet) -> Vec<u8> {
        p.encode().as_bytes().to_vec()
    }

    #[test]
    fn both_ways() {
        let b = bytes(&sample());
        assert_eq!(&b[..4], &[0x21, 0xe0, 3, 24]);
        assert_eq!(b.len(), 24);
        assert_eq!(Packet::decode(&b), Ok(sample()));
    }

    #[test]
    fn reception_checks() {
        let good = bytes(&sample());
        let with = |i: usize, v: u8| {
            let mut b = good.clone();
            b[i] = v;
            b
        };
        assert_eq!(Packet::decode(&good[..23]), Err(Discard::Truncated));
        assert_eq!(Packet::decode(&with(0, 0x41)), Err(Discard::Version(2)));
        assert_eq!(Packet::decode(&with(3, 23)), Err(Discard::Length(23)));
        assert_eq!(Packet::decode(&with(3, 40)), Err(Discard::Length(40)));
        assert_eq!(Packet::decode(&with(2, 0)), Err(Discard::DetectMultZero));
        assert_eq!(Packet::decode(&with(1, 0xe1)), Err(Discard::Multipoint));
        // The A bit with a Length of 24: no room for a section (§6.8.6: at
        // least 26 with the A bit).
        assert_eq!(Packet::decode(&with(1, 0xe4)), Err(Discard::Length(24)));
        let mut zero = good.clone();
        zero[4..8].fill(0);
        assert_eq!(Packet::decode(&zero), Err(Discard::MyDiscriminatorZero));
    }

    /// The mandatory section of [`sample`] with the A bit set.
    fn head(len: u8) -> Vec<u8> {
        let mut b = bytes(&sample());
        b[1] |= 0x04;
        b[3] = len;
        b
    }

    #[test]
    fn keyed_sha1_section_both_ways() {
        let digest: Vec<u8> = (1..=20).collect();
        let p = Packet {
            auth: Some(Auth::new(
                AuthType::MeticulousKeyedSha1,
                9,
                0x0102_0304,
                &digest,
            )),
            ..sample()
        };
        let mut want = head(52);
        // §4.4: Type 5, Len 28, Key ID 9, Reserved 0, Sequence, Hash.
        want.extend_from_slice(&[5, 28, 9, 0, 1, 2, 3, 4]);
        want.extend_from_slice(&digest);
        assert_eq!(bytes(&p), want);
        assert_eq!(Packet::decode(&want), Ok(p));
        let keyed = Packet {
            auth: Some(Auth::new(AuthType::KeyedSha1, 9, 0x0102_0304, &digest)),
            ..sample()
        };
        want[24] = 4;
        assert_eq!(Packet::decode(&want), Ok(keyed));
        assert_eq!(bytes(&keyed), want);
    }

    #[test]
    fn keyed_md5_section_both_ways() {
        let digest = [0xab; 16];
        let p = Packet {
            auth: Some(Auth::new(AuthType::KeyedMd5, 1, u32::MAX, &digest)),
            ..sample()
        };
        let mut want = head(48);
        // §4.3: Type 2, Len 24, Key ID 1, Reserved 0, Sequence, Digest.
        want.extend_from_slice(&[2, 24, 1, 0, 0xff, 0xff, 0xff, 0xff]);
        want.extend_from_slice(&digest);
        assert_eq!(bytes(&p), want);
        assert_eq!(Packet::decode(&want), Ok(p));
        want[24] = 3;
        assert_eq!(
            Packet::decode(&want).map(|p| p.auth.map(|a| a.auth_type)),
            Ok(Some(AuthType::MeticulousKeyedMd5))
        );
    }

    #[test]
    fn simple_password_section_both_ways() {
        let p = Packet {
            auth: Some(Auth::new(AuthType::SimplePassword, 2, 77, b"s3cret")),
            ..sample()
        };
        let mut want = head(33);
        // §4.2: Type 1, Len 3 + 6, Key ID 2, the password; no sequence.
        want.extend_from_slice(&[1, 9, 2]);
        want.extend_from_slice(b"s3cret");
        assert_eq!(bytes(&p), want);
        let back = Packet::decode(&want).expect("decodes");
        assert_eq!(back, p);
        assert_eq!(back.auth.map(|a| a.sequence), Some(0));
        assert_eq!(back.auth.as_ref().map(Auth::value), Some(&b"s3cret"[..]));
        // The password never shows in a log.
        assert!(!format!("{back:?}").contains("s3cret"), "{back:?}");
    }

    #[test]
    fn malformed_sections_are_discarded() {
        let sha1 = |len: u8, auth_len: u8, rest: usize| {
            let mut b = head(len);
            b.extend_from_slice(&[4, auth_len, 1, 0]);
            b.extend(std::iter::repeat_n(0u8, rest));
            b
        };
        assert!(Packet::decode(&sha1(52, 28, 24)).is_ok());
        // Auth Len of the wrong size for its type.
        assert_eq!(
            Packet::decode(&sha1(52, 24, 24)),
            Err(Discard::AuthLength(24))
        );
        // Length covering less than the section.
        assert_eq!(
            Packet::decode(&sha1(48, 28, 24)),
            Err(Discard::AuthLength(28))
        );
        // Length beyond the datagram.
        assert_eq!(Packet::decode(&sha1(52, 28, 20)), Err(Discard::Length(52)));
        // A section of one octet (Length 25 with the A bit).
        assert_eq!(
            Packet::decode(&head(25)[..]).err(),
            Some(Discard::Length(25))
        );
        let mut md5 = head(48);
        md5.extend_from_slice(&[2, 28, 1, 0]);
        md5.extend_from_slice(&[0; 20]);
        assert_eq!(Packet::decode(&md5[..48]), Err(Discard::AuthLength(28)));
        // Simple Password: 1 to 16 bytes, Auth Len = password + 3.
        let password = |len: u8, auth_len: u8| {
            let mut b = head(len);
            b.extend_from_slice(&[1, auth_len, 1]);
            b.extend(std::iter::repeat_n(b'p', usize::from(len) - 27));
            b
        };
        assert!(Packet::decode(&password(28, 4)).is_ok());
        assert!(Packet::decode(&password(43, 19)).is_ok());
        assert_eq!(
            Packet::decode(&password(27, 3)),
            Err(Discard::AuthLength(3))
        );
        assert_eq!(
            Packet::decode(&password(44, 20)),
            Err(Discard::AuthLength(20))
        );
        assert_eq!(
            Packet::decode(&password(30, 4)),
            Err(Discard::AuthLength(4))
        );
        // Auth Type 0 is reserved; 6 and up unknown.
        let mut zero = sha1(52, 28, 24);
        zero[24] = 0;
        assert_eq!(Packet::decode(&zero), Err(Discard::AuthType(0)));
        zero[24] = 6;
        assert_eq!(Packet::decode(&zero), Err(Discard::AuthType(6)));
    }
}
