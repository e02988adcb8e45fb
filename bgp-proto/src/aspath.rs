//! AS_PATH and AS4_PATH (RFC 4271 §4.3, §5.1.2; RFC 6793 §3; RFC 5065 §3).
//!
//! ```text
//! +-----------------+-----------------+--------------------------------+
//! | Segment type (1)| Segment len (1) | AS numbers (len × 2 or 4 octets)|
//! +-----------------+-----------------+--------------------------------+
//! ```

use std::fmt;

use crate::wire;

/// Path segment types (RFC 4271 §4.3, RFC 5065 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentType {
    /// AS_SET: unordered ASes a route in the UPDATE has traversed.
    Set = 1,
    /// AS_SEQUENCE: ordered ASes a route in the UPDATE has traversed.
    Sequence = 2,
    /// AS_CONFED_SEQUENCE: ordered member ASes of the local confederation
    /// (RFC 5065 §3).
    ConfedSequence = 3,
    /// AS_CONFED_SET: unordered member ASes of the local confederation
    /// (RFC 5065 §3).
    ConfedSet = 4,
}

impl SegmentType {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => SegmentType::Set,
            2 => SegmentType::Sequence,
            3 => SegmentType::ConfedSequence,
            4 => SegmentType::ConfedSet,
            _ => return None,
        })
    }

    /// A confederation segment (RFC 5065 §3), which never leaves the
    /// confederation.
    pub fn is_confed(self) -> bool {
        matches!(self, SegmentType::ConfedSequence | SegmentType::ConfedSet)
    }
}

/// One path segment (RFC 4271 §4.3 (b)): its type and AS numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The path segment type.
    pub kind: SegmentType,
    /// The AS numbers, in order; more than 255 are written as several
    /// segments.
    pub asns: Vec<u32>,
}

/// An AS_PATH or AS4_PATH value: a sequence of path segments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AsPath {
    /// The path segments, in order; an empty path is valid (a route
    /// originated inside the AS).
    pub segments: Vec<Segment>,
}

/// Why an AS_PATH is malformed (RFC 7606 §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsPathError {
    /// "an unrecognized segment type is encountered"
    UnknownSegmentType,
    /// "the Path Segment Length field of the last segment encountered would
    /// cause the Attribute Length to be exceeded"
    Overrun,
    /// "after the last successfully parsed segment there is only a single
    /// octet remaining"
    Underrun,
    /// "It has a Path Segment Length field of zero."
    ZeroLengthSegment,
}

impl AsPathError {
    /// The error in words, for the log.
    pub fn reason(self) -> &'static str {
        match self {
            AsPathError::UnknownSegmentType => "unrecognized AS_PATH segment type",
            AsPathError::Overrun => "AS_PATH segment runs past the attribute",
            AsPathError::Underrun => "AS_PATH ends with a partial segment header",
            AsPathError::ZeroLengthSegment => "AS_PATH segment of length zero",
        }
    }
}

impl AsPath {
    /// One AS_SEQUENCE of `asns`, or the empty path when there are none.
    /// To an external peer we send our own AS alone (RFC 4271 §5.1.2 (b)).
    pub fn sequence(asns: Vec<u32>) -> Self {
        if asns.is_empty() {
            return AsPath::default();
        }
        AsPath {
            segments: vec![Segment {
                kind: SegmentType::Sequence,
                asns,
            }],
        }
    }

    /// Decodes an attribute value with 2- or 4-octet AS numbers; the errors
    /// are those RFC 7606 §7.2 calls malformed.
    pub fn decode(mut input: &[u8], four_octet: bool) -> Result<AsPath, AsPathError> {
        let width = if four_octet { 4 } else { 2 };
        let mut segments = Vec::new();
        while !input.is_empty() {
            if input.len() < 2 {
                return Err(AsPathError::Underrun);
            }
            let kind = SegmentType::from_u8(input[0]).ok_or(AsPathError::UnknownSegmentType)?;
            let count = usize::from(input[1]);
            if count == 0 {
                return Err(AsPathError::ZeroLengthSegment);
            }
            let (rest, body) =
                wire::take(count * width)(&input[2..]).map_err(|_| AsPathError::Overrun)?;
            let asns = if four_octet {
                body.chunks_exact(4)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            } else {
                body.chunks_exact(2)
                    .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                    .collect()
            };
            segments.push(Segment { kind, asns });
            input = rest;
        }
        Ok(AsPath { segments })
    }

    /// Encodes with 2- or 4-octet AS numbers. A segment of more than 255
    /// AS numbers is split into several (RFC 4271 §5.1.2 note on overflow);
    /// in 2-octet form an AS above 65535 becomes AS_TRANS (RFC 6793 §4.2.2).
    pub fn encode(&self, four_octet: bool, out: &mut Vec<u8>) {
        for seg in &self.segments {
            for chunk in seg.asns.chunks(255) {
                out.push(seg.kind as u8);
                out.push(chunk.len() as u8);
                for &asn in chunk {
                    if four_octet {
                        out.extend_from_slice(&asn.to_be_bytes());
                    } else {
                        let two = u16::try_from(asn).unwrap_or(crate::consts::AS_TRANS);
                        out.extend_from_slice(&two.to_be_bytes());
                    }
                }
            }
        }
    }

    /// RFC 4271 §9.1.2.2 (a): a set counts as one, confederation segments
    /// count as nothing (RFC 5065 §5.3).
    pub fn path_len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s.kind {
                SegmentType::Sequence => s.asns.len(),
                SegmentType::Set => 1,
                _ => 0,
            })
            .sum()
    }

    /// Every AS number of every segment, in order.
    pub fn asns(&self) -> impl Iterator<Item = u32> + '_ {
        self.segments.iter().flat_map(|s| s.asns.iter().copied())
    }

    /// The leftmost AS of the first AS_SEQUENCE, which RFC 4271 §6.3 lets
    /// a speaker compare with the peer's AS.
    pub fn first_as(&self) -> Option<u32> {
        match self.segments.first() {
            Some(s) if s.kind == SegmentType::Sequence => s.asns.first().copied(),
            _ => None,
        }
    }

    /// Some AS number does not fit in two octets (RFC 6793 §4.2.2: it then
    /// needs AS4_PATH beside a 2-octet AS_PATH).
    pub fn needs_four_octets(&self) -> bool {
        self.asns().any(|a| a > u32::from(u16::MAX))
    }
}

impl fmt::Display for AsPath {
    /// FRR-style: `65001 65002 {65003,65004} (65005)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for seg in &self.segments {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            let list = |sep: &str| {
                seg.asns
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(sep)
            };
            match seg.kind {
                SegmentType::Sequence => write!(f, "{}", list(" "))?,
                SegmentType::Set => write!(f, "{{{}}}", list(","))?,
                SegmentType::ConfedSequence => write!(f, "({})", list(" "))?,
                SegmentType::ConfedSet => write!(f, "[{}]", list(","))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_and_four_octet_forms() {
        let p = AsPath {
            segments: vec![
                Segment {
                    kind: SegmentType::Sequence,
                    asns: vec![65001, 65002],
                },
                Segment {
                    kind: SegmentType::Set,
                    asns: vec![3, 4],
                },
            ],
        };
        let two = [2, 2, 0xfd, 0xe9, 0xfd, 0xea, 1, 2, 0, 3, 0, 4];
        let mut out = Vec::new();
        p.encode(false, &mut out);
        assert_eq!(out, two);
        assert_eq!(AsPath::decode(&two, false).unwrap(), p);
        let four = [
            2, 2, 0, 0, 0xfd, 0xe9, 0, 0, 0xfd, 0xea, 1, 2, 0, 0, 0, 3, 0, 0, 0, 4,
        ];
        let mut out = Vec::new();
        p.encode(true, &mut out);
        assert_eq!(out, four);
        assert_eq!(AsPath::decode(&four, true).unwrap(), p);
        assert_eq!(p.to_string(), "65001 65002 {3,4}");
        assert_eq!(p.path_len(), 3);
    }

    #[test]
    fn every_segment_type() {
        let bytes = [3, 1, 0, 1, 4, 1, 0, 2, 1, 1, 0, 3, 2, 1, 0, 4];
        let p = AsPath::decode(&bytes, false).unwrap();
        assert_eq!(p.to_string(), "(1) [2] {3} 4");
        assert_eq!(p.path_len(), 2);
    }

    #[test]
    fn long_sequences_split_at_255() {
        let p = AsPath::sequence((1..=300).collect());
        let mut out = Vec::new();
        p.encode(true, &mut out);
        assert_eq!(out.len(), 2 + 255 * 4 + 2 + 45 * 4);
        let back = AsPath::decode(&out, true).unwrap();
        assert_eq!(
            back.asns().collect::<Vec<_>>(),
            (1..=300).collect::<Vec<_>>()
        );
    }

    #[test]
    fn malformed_paths() {
        assert_eq!(
            AsPath::decode(&[5, 1, 0, 1], false),
            Err(AsPathError::UnknownSegmentType)
        );
        assert_eq!(
            AsPath::decode(&[2, 2, 0, 1], false),
            Err(AsPathError::Overrun)
        );
        assert_eq!(
            AsPath::decode(&[2, 1, 0, 1, 2], false),
            Err(AsPathError::Underrun)
        );
        assert_eq!(
            AsPath::decode(&[2, 0], false),
            Err(AsPathError::ZeroLengthSegment)
        );
        // A 4-octet path read as 2-octet is still well-formed or not by
        // its own lengths; a 2-octet one read as 4-octet overruns.
        assert_eq!(
            AsPath::decode(&[2, 2, 0, 1, 0, 2], true),
            Err(AsPathError::Overrun)
        );
    }
}
