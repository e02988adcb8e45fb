//! BFD authentication (RFC 5880 §6.7), sans IO: a packet signed for
//! sending, a received one checked against the key. The sequence-number
//! rules need the session's state and live in `session`.
//!
//! Keyed MD5 and Keyed SHA1 (§6.7.3, §6.7.4) compute the digest over the
//! whole packet with the key, zero-padded to the digest's length, in the
//! digest's place; the receiver puts its key there and compares.

use std::fmt;

use super::packet::{Auth, AuthType, DIGEST_OFFSET, MAX_LEN, Packet, Received};

/// bfd.AuthType with its key: the key ID and the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    pub auth_type: AuthType,
    /// Auth Key ID: which key of the sender's this is (§4.1).
    pub key_id: u8,
    secret: Vec<u8>,
}

impl Key {
    /// A key of 1 to [`AuthType::max_key_len`] bytes; else why not.
    pub fn new(auth_type: AuthType, key_id: u8, secret: &[u8]) -> Result<Key, String> {
        let max = auth_type.max_key_len();
        if secret.is_empty() || secret.len() > max {
            return Err(format!(
                "holds a key of {} bytes; a {} key is 1 to {max} bytes (RFC 5880 §{})",
                secret.len(),
                auth_type.as_str(),
                match auth_type {
                    AuthType::SimplePassword => "4.2",
                    AuthType::KeyedMd5 | AuthType::MeticulousKeyedMd5 => "6.7.3",
                    AuthType::KeyedSha1 | AuthType::MeticulousKeyedSha1 => "6.7.4",
                }
            ));
        }
        Ok(Key {
            auth_type,
            key_id,
            secret: secret.to_vec(),
        })
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Key({}, id {}, <{} bytes>)",
            self.auth_type.as_str(),
            self.key_id,
            self.secret.len()
        )
    }
}

/// Why a received packet failed authentication; each is counted apart
/// (`holdfast_peer_bfd_discarded_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejected {
    /// §6.8.6: "If the A bit is clear and authentication is in use
    /// (bfd.AuthType is nonzero), the packet MUST be discarded."
    Unauthenticated,
    /// §6.8.6: "If the A bit is set and no authentication is in use
    /// (bfd.AuthType is zero), the packet MUST be discarded."
    UnexpectedAuth,
    /// Another Auth Type, or a Key ID that is not ours (§6.7.2–6.7.4: "If
    /// the Auth Key ID field does not match the ID of a configured
    /// authentication key, the received packet MUST be discarded").
    WrongKey,
    /// The digest (or the Simple Password) does not match.
    BadDigest,
    /// The Sequence Number is outside the window (§6.7.3, §6.7.4).
    BadSequence,
}

impl Rejected {
    pub const ALL: [Rejected; 5] = [
        Rejected::Unauthenticated,
        Rejected::UnexpectedAuth,
        Rejected::WrongKey,
        Rejected::BadDigest,
        Rejected::BadSequence,
    ];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejected::Unauthenticated => "unauthenticated",
            Rejected::UnexpectedAuth => "unexpected-auth",
            Rejected::WrongKey => "wrong-key",
            Rejected::BadDigest => "bad-digest",
            Rejected::BadSequence => "bad-sequence",
        }
    }
}

/// The digest of `bytes` (a packet holding the key in its digest field).
fn digest(auth_type: AuthType, bytes: &[u8]) -> [u8; 20] {
    let mut out = [0u8; 20];
    match auth_type {
        AuthType::KeyedMd5 | AuthType::MeticulousKeyedMd5 => {
            use md5::Digest;
            out[..16].copy_from_slice(&md5::Md5::digest(bytes));
        }
        AuthType::KeyedSha1 | AuthType::MeticulousKeyedSha1 => {
            // SHA1 as RFC 5880 §6.7.4 defines it; ring names it for legacy use.
            let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, bytes);
            out.copy_from_slice(d.as_ref());
        }
        AuthType::SimplePassword => {}
    }
    out
}

/// Equal without an early exit: the time taken says nothing of where a
/// forged digest first differs.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `p` with its Authentication Section (§6.7.2–6.7.4, transmission): the
/// Key ID, the password or `sequence` and the digest.
pub fn sign(p: Packet, key: &Key, sequence: u32) -> Packet {
    let t = key.auth_type;
    let with_key = Packet {
        auth: Some(Auth::new(t, key.key_id, sequence, &key.secret)),
        ..p
    };
    let Some(len) = t.digest_len() else {
        // §6.7.2: the password itself travels.
        return with_key;
    };
    // §6.7.3/§6.7.4: "The Auth Key/Digest field MUST be set to the value
    // of bfd.AuthKey padded to 16 [20] bytes with zeros", the digest is
    // computed over the whole packet, and it replaces the key.
    let d = digest(t, with_key.encode().as_bytes());
    Packet {
        auth: Some(Auth::new(t, key.key_id, sequence, &d[..len])),
        ..p
    }
}

/// Checks a received packet's section against `key` (§6.7.2–6.7.4,
/// reception): its type, Key ID and password or digest. The sequence
/// number is the session's to judge.
pub fn verify(r: &Received, key: &Key) -> Result<(), Rejected> {
    let Some(auth) = &r.packet.auth else {
        return Err(Rejected::Unauthenticated);
    };
    if auth.auth_type != key.auth_type || auth.key_id != key.key_id {
        return Err(Rejected::WrongKey);
    }
    let Some(len) = key.auth_type.digest_len() else {
        // §6.7.2: "If the Password field does not match the password
        // ... the packet MUST be discarded."
        return if same(auth.value(), &key.secret) {
            Ok(())
        } else {
            Err(Rejected::BadDigest)
        };
    };
    let bytes = r.wire.as_bytes();
    let end = DIGEST_OFFSET + len;
    if bytes.len() != end || end > MAX_LEN {
        // Decoding made sure of this; never index past it.
        return Err(Rejected::BadDigest);
    }
    // §6.7.3/§6.7.4: "Replace the contents of the Auth Key/Digest field
    // with the authentication key selected by the received Auth Key ID
    // field", padded with zeros, and compare the digest of the packet.
    let mut copy = [0u8; MAX_LEN];
    copy[..end].copy_from_slice(bytes);
    copy[DIGEST_OFFSET..end].fill(0);
    copy[DIGEST_OFFSET..DIGEST_OFFSET + key.secret.len()].copy_from_slice(&key.secret);
    let d = digest(key.auth_type, &copy[..end]);
    if same(&d[..len], auth.value()) {
        Ok(())
    } else {
        Err(Rejected::BadDigest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfd::packet::{Diag, State};

    fn packet() -> Packet {
        Packet {
            diag: Diag::None,
            state: State::Up,
            poll: false,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discriminator: 0x0102_0304,
            your_discriminator: 0x0a0b_0c0d,
            desired_min_tx: 100_000,
            required_min_rx: 100_000,
            required_min_echo_rx: 0,
            auth: None,
        }
    }

    fn received(p: &Packet) -> Received {
        Received::decode(p.encode().as_bytes()).expect("decodes")
    }

    fn key(t: AuthType, secret: &[u8]) -> Key {
        Key::new(t, 1, secret).expect("key")
    }

    #[test]
    fn the_hashes_are_md5_and_sha1() {
        // RFC 1321 A.5 and FIPS 180 (RFC 3174 §7.3) test vectors.
        assert_eq!(
            digest(AuthType::KeyedMd5, b"abc")[..16],
            [
                0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0, 0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1,
                0x7f, 0x72
            ]
        );
        assert_eq!(
            digest(AuthType::MeticulousKeyedSha1, b"abc"),
            [
                0xa9, 0x99, 0x3e, 0x36, 0x47, 0x06, 0x81, 0x6a, 0xba, 0x3e, 0x25, 0x71, 0x78, 0x50,
                0xc2, 0x6c, 0x9c, 0xd0, 0xd8, 0x9d
            ]
        );
    }

    #[test]
    fn signed_packets_verify_and_any_change_fails() {
        for t in AuthType::ALL {
            let k = key(t, b"secret");
            let signed = sign(packet(), &k, 42);
            let r = received(&signed);
            assert_eq!(verify(&r, &k), Ok(()), "{t:?}");
            let a = signed.auth.expect("signed");
            assert_eq!(a.auth_type, t);
            // The key itself never travels in a digest's place.
            if t != AuthType::SimplePassword {
                assert_eq!(a.sequence, 42);
                assert!(!a.value().starts_with(b"secret"), "{t:?}");
            }
            // Another secret, another key ID, another type: refused.
            assert_eq!(
                verify(&r, &key(t, b"secreT")),
                Err(Rejected::BadDigest),
                "{t:?}"
            );
            assert_eq!(
                verify(&r, &Key::new(t, 2, b"secret").unwrap()),
                Err(Rejected::WrongKey)
            );
            let other = AuthType::ALL.into_iter().find(|o| *o != t).unwrap();
            assert_eq!(verify(&r, &key(other, b"secret")), Err(Rejected::WrongKey));
            // Any field changed after signing: refused.
            if t != AuthType::SimplePassword {
                let forged = Packet {
                    state: State::Down,
                    ..signed
                };
                assert_eq!(
                    verify(&received(&forged), &k),
                    Err(Rejected::BadDigest),
                    "{t:?}"
                );
                let replayed_seq = Packet {
                    auth: Some(Auth::new(t, 1, 43, a.value())),
                    ..signed
                };
                assert_eq!(
                    verify(&received(&replayed_seq), &k),
                    Err(Rejected::BadDigest)
                );
            }
        }
    }

    #[test]
    fn unauthenticated_packets_fail() {
        let k = key(AuthType::KeyedSha1, b"secret");
        assert_eq!(
            verify(&received(&packet()), &k),
            Err(Rejected::Unauthenticated)
        );
    }

    #[test]
    fn a_known_keyed_sha1_packet() {
        // Computed independently (python3 hashlib) over this packet with
        // "secret" zero-padded in the hash's place.
        let k = key(AuthType::KeyedSha1, b"secret");
        let signed = sign(packet(), &k, 7);
        let hex: String = signed
            .auth
            .unwrap()
            .value()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, KNOWN_SHA1);
    }

    const KNOWN_SHA1: &str = "13260480d87b77830b0a7c16afc7877639422759";

    #[test]
    fn key_lengths() {
        assert!(Key::new(AuthType::KeyedSha1, 1, &[b'k'; 20]).is_ok());
        assert_eq!(
            Key::new(AuthType::KeyedSha1, 1, &[b'k'; 21]).unwrap_err(),
            "holds a key of 21 bytes; a keyed-sha1 key is 1 to 20 bytes (RFC 5880 §6.7.4)"
        );
        assert!(Key::new(AuthType::KeyedMd5, 1, &[b'k'; 17]).is_err());
        assert!(Key::new(AuthType::SimplePassword, 1, &[b'k'; 16]).is_ok());
        assert!(Key::new(AuthType::SimplePassword, 1, b"").is_err());
        assert!(!format!("{:?}", key(AuthType::KeyedMd5, b"hidden")).contains("hidden"));
    }
}
