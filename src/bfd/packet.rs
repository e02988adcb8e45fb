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
//! ```

use std::fmt;

/// RFC 5880 §4.1: "Vers: The version number of the protocol ... 1".
pub const VERSION: u8 = 1;
/// The mandatory section, without authentication.
pub const LEN: usize = 24;

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
    /// The A bit: we run no authentication, so such a packet is dropped.
    Authenticated,
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
            Discard::Authenticated => write!(f, "authentication present but not configured"),
        }
    }
}

impl Packet {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0] = (VERSION << 5) | (self.diag as u8 & 0x1f);
        b[1] = ((self.state as u8) << 6)
            | (u8::from(self.poll) << 5)
            | (u8::from(self.final_) << 4)
            | (u8::from(self.control_plane_independent) << 3)
            | (u8::from(self.demand) << 1);
        b[2] = self.detect_mult;
        b[3] = LEN as u8;
        b[4..8].copy_from_slice(&self.my_discriminator.to_be_bytes());
        b[8..12].copy_from_slice(&self.your_discriminator.to_be_bytes());
        b[12..16].copy_from_slice(&self.desired_min_tx.to_be_bytes());
        b[16..20].copy_from_slice(&self.required_min_rx.to_be_bytes());
        b[20..24].copy_from_slice(&self.required_min_echo_rx.to_be_bytes());
        b
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
        if auth {
            return Err(Discard::Authenticated);
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
        })
    }
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
        }
    }

    #[test]
    fn both_ways() {
        let b = sample().encode();
        assert_eq!(&b[..4], &[0x21, 0xe0, 3, 24]);
        assert_eq!(Packet::decode(&b), Ok(sample()));
    }

    #[test]
    fn reception_checks() {
        let good = sample().encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            b
        };
        assert_eq!(Packet::decode(&good[..23]), Err(Discard::Truncated));
        assert_eq!(Packet::decode(&with(0, 0x41)), Err(Discard::Version(2)));
        assert_eq!(Packet::decode(&with(3, 23)), Err(Discard::Length(23)));
        assert_eq!(Packet::decode(&with(3, 40)), Err(Discard::Length(40)));
        assert_eq!(Packet::decode(&with(2, 0)), Err(Discard::DetectMultZero));
        assert_eq!(Packet::decode(&with(1, 0xe1)), Err(Discard::Multipoint));
        assert_eq!(Packet::decode(&with(1, 0xe4)), Err(Discard::Length(24)));
        let mut zero = good;
        zero[4..8].fill(0);
        assert_eq!(Packet::decode(&zero), Err(Discard::MyDiscriminatorZero));
    }
}
