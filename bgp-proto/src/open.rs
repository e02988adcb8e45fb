//! OPEN (RFC 4271 §4.2), with the RFC 9072 extended optional parameters
//! format.
//!
//! ```text
//! +-----------------+---------------------+----------------+
//! | Version (1)     | My Autonomous System (2)             |
//! +-----------------+---------------------+----------------+
//! | Hold Time (2)   | BGP Identifier (4)                   |
//! +-----------------+--------------------------------------+
//! | Opt Parm Len (1)| Optional Parameters (variable)       |
//! +-----------------+--------------------------------------+
//!
//! RFC 9072 §2 extended format: Opt Parm Len is ignored once the next
//! octet ("Non-Ext OP Type") is 255; then a 2-octet Extended Opt. Parm.
//! Length follows, and each parameter's length is 2 octets too.
//! ```

use std::net::Ipv4Addr;

use crate::capability::{self, AddPathMode, Capability, ExtendedNextHop, GracefulRestart};
use crate::consts::{AS_TRANS, BGP_VERSION, opt_param};
use crate::context::Family;
use crate::error::Error;
use crate::wire;

/// One optional parameter of OPEN (RFC 4271 §4.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OptParam {
    /// Type 2: one or more capabilities (RFC 5492 §4). Speakers differ in
    /// whether they put each capability in its own parameter; both are kept.
    Capabilities(Vec<Capability>),
    /// Any other type — answered with 2/4 Unsupported Optional Parameter by
    /// the session, kept here as bytes.
    Unknown {
        /// The Parameter Type.
        param_type: u8,
        /// The Parameter Value, as received.
        value: Vec<u8>,
    },
}

/// An OPEN message (RFC 4271 §4.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Open {
    /// The protocol version; 4 (anything else is refused with 2/1 while
    /// decoding).
    pub version: u8,
    /// The 2-octet My Autonomous System field (AS_TRANS for a 4-octet AS).
    pub my_as: u16,
    /// The proposed Hold Time in seconds: 0 (no KEEPALIVEs) or at least 3;
    /// the session uses the smaller of the two proposals (RFC 4271 §4.2).
    pub hold_time: u16,
    /// The BGP Identifier: the sender's router ID (RFC 4271 §4.2, RFC 6286).
    pub bgp_id: Ipv4Addr,
    /// The optional parameters, in the order received.
    pub params: Vec<OptParam>,
    /// `Some(non_ext_op_len)` when the RFC 9072 extended format was used:
    /// the value of the ignored "Non-Ext OP Len" octet, kept for lossless
    /// re-encoding (it SHOULD be 255).
    pub extended_params: Option<u8>,
}

fn malformed(reason: &'static str, data: &[u8]) -> Error {
    Error::MalformedOpen {
        reason,
        data: data.to_vec(),
    }
}

impl Open {
    /// Our own OPEN: a 4-octet AS goes into the capability and AS_TRANS
    /// into My Autonomous System (RFC 6793 §3). Capabilities share one
    /// parameter; the extended format is used only when they exceed 255
    /// octets (RFC 9072 §2: "SHOULD be used without alteration" otherwise).
    pub fn new(asn: u32, hold_time: u16, bgp_id: Ipv4Addr, mut caps: Vec<Capability>) -> Self {
        let my_as = u16::try_from(asn).unwrap_or(AS_TRANS);
        if !caps.iter().any(|c| matches!(c, Capability::FourOctetAs(_))) {
            caps.push(Capability::FourOctetAs(asn));
        }
        let mut len = 0;
        for c in &caps {
            let mut v = Vec::new();
            c.encode(&mut v);
            len += v.len();
        }
        Open {
            version: BGP_VERSION,
            my_as,
            hold_time,
            bgp_id,
            params: vec![OptParam::Capabilities(caps)],
            extended_params: if len > 253 { Some(255) } else { None },
        }
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Open, Error> {
        let fixed = |i| -> wire::Res<'_, (u8, u16, u16, Ipv4Addr, u8)> {
            let (i, version) = wire::u8(i)?;
            let (i, my_as) = wire::u16(i)?;
            let (i, hold) = wire::u16(i)?;
            let (i, id) = wire::ipv4(i)?;
            let (i, opt_len) = wire::u8(i)?;
            Ok((i, (version, my_as, hold, id, opt_len)))
        };
        let (rest, (version, my_as, hold_time, bgp_id, opt_len)) =
            fixed(body).map_err(|_| Error::BadMessageLength {
                length: (body.len() + crate::consts::HEADER_LEN) as u16,
            })?;
        let mut open = Open {
            version,
            my_as,
            hold_time,
            bgp_id,
            params: Vec::new(),
            extended_params: None,
        };
        // RFC 4271 §6.2 checks the version before anything else: a speaker
        // of another version may lay out the rest differently.
        if version != BGP_VERSION {
            return Err(Error::UnsupportedVersionNumber { version });
        }
        if opt_len == 0 {
            if !rest.is_empty() {
                return Err(malformed(
                    "data after an OPEN without optional parameters",
                    rest,
                ));
            }
            return Ok(open);
        }
        // RFC 9072 §2: "a value of 255 for this field is the indication
        // that the extended format is in use".
        if rest.first() == Some(&opt_param::EXTENDED_LENGTH) {
            let (params, ext_len) = wire::u16(&rest[1..])
                .map_err(|_| malformed("RFC 9072 extended length is truncated", rest))?;
            if usize::from(ext_len) != params.len() {
                return Err(malformed(
                    "RFC 9072 extended optional parameters length does not match the message",
                    rest,
                ));
            }
            open.extended_params = Some(opt_len);
            open.params = decode_params(params, true)?;
        } else {
            if usize::from(opt_len) != rest.len() {
                return Err(malformed(
                    "optional parameters length does not match the message",
                    rest,
                ));
            }
            open.params = decode_params(rest, false)?;
        }
        Ok(open)
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.version);
        out.extend_from_slice(&self.my_as.to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.bgp_id.octets());
        let mut params = Vec::new();
        let extended = self.extended_params.is_some();
        for p in &self.params {
            let (ty, value) = match p {
                OptParam::Capabilities(caps) => {
                    let mut v = Vec::new();
                    for c in caps {
                        c.encode(&mut v);
                    }
                    (opt_param::CAPABILITIES, v)
                }
                OptParam::Unknown { param_type, value } => (*param_type, value.clone()),
            };
            params.push(ty);
            if extended {
                params.extend_from_slice(&(value.len() as u16).to_be_bytes());
            } else {
                params.push(value.len() as u8);
            }
            params.extend_from_slice(&value);
        }
        match self.extended_params {
            Some(non_ext_len) => {
                out.push(non_ext_len);
                out.push(opt_param::EXTENDED_LENGTH);
                out.extend_from_slice(&(params.len() as u16).to_be_bytes());
            }
            None => out.push(params.len() as u8),
        }
        out.extend_from_slice(&params);
    }

    /// Every capability of every Capabilities parameter, in order.
    pub fn capabilities(&self) -> impl Iterator<Item = &Capability> {
        self.params.iter().flat_map(|p| match p {
            OptParam::Capabilities(c) => c.as_slice(),
            OptParam::Unknown { .. } => &[],
        })
    }

    /// The speaker's AS: from the 4-octet AS capability when present
    /// (RFC 6793 §4.1), else My Autonomous System.
    pub fn asn(&self) -> u32 {
        self.four_octet_as().unwrap_or(u32::from(self.my_as))
    }

    /// The AS of the 4-octet AS capability (RFC 6793 §3), if sent.
    pub fn four_octet_as(&self) -> Option<u32> {
        self.capabilities().find_map(|c| match c {
            Capability::FourOctetAs(a) => Some(*a),
            _ => None,
        })
    }

    /// The families of the Multiprotocol capabilities (RFC 4760 §8).
    pub fn multiprotocol(&self) -> Vec<Family> {
        self.capabilities()
            .filter_map(|c| match c {
                Capability::Multiprotocol(f) => Some(*f),
                _ => None,
            })
            .collect()
    }

    /// The Graceful Restart capability (RFC 4724 §3), if sent.
    pub fn graceful_restart(&self) -> Option<&GracefulRestart> {
        self.capabilities().find_map(|c| match c {
            Capability::GracefulRestart(gr) => Some(gr),
            _ => None,
        })
    }

    /// The ADD-PATH Send/Receive mode for `family` (RFC 7911 §4), if sent.
    pub fn add_path(&self, family: Family) -> Option<AddPathMode> {
        self.capabilities().find_map(|c| match c {
            Capability::AddPath(list) => list.iter().find(|(f, _)| *f == family).map(|(_, m)| *m),
            _ => None,
        })
    }

    /// Whether a capability with Capability Code `code` was sent.
    pub fn has(&self, code: u8) -> bool {
        self.capabilities().any(|c| c.code() == code)
    }

    /// The peer accepts routes of `tuple`'s NLRI AFI/SAFI with a next hop
    /// of its Nexthop AFI: its Extended Next Hop Encoding capability lists
    /// the tuple (RFC 8950 §4: one capability may carry several tuples,
    /// and a speaker may send more than one capability).
    pub fn extended_next_hop(&self, tuple: ExtendedNextHop) -> bool {
        self.capabilities().any(|c| match c {
            Capability::ExtendedNextHop(list) => list.contains(&tuple),
            _ => false,
        })
    }

    /// The host name of the FQDN capability, if sent (invalid UTF-8 replaced).
    pub fn hostname(&self) -> Option<String> {
        self.capabilities().find_map(|c| match c {
            Capability::Fqdn { hostname, .. } => {
                Some(String::from_utf8_lossy(hostname).into_owned())
            }
            _ => None,
        })
    }
}

fn decode_params(mut input: &[u8], extended: bool) -> Result<Vec<OptParam>, Error> {
    let mut params = Vec::new();
    while !input.is_empty() {
        let parse = |i| -> wire::Res<'_, (u8, &[u8])> {
            let (i, ty) = wire::u8(i)?;
            let (i, len) = if extended {
                wire::u16(i)?
            } else {
                let (i, l) = wire::u8(i)?;
                (i, u16::from(l))
            };
            let (i, value) = wire::take(usize::from(len))(i)?;
            Ok((i, (ty, value)))
        };
        let (rest, (ty, value)) =
            parse(input).map_err(|_| malformed("OPEN ends inside an optional parameter", input))?;
        params.push(match ty {
            opt_param::CAPABILITIES => OptParam::Capabilities(capability::decode_list(value)?),
            _ => OptParam::Unknown {
                param_type: ty,
                value: value.to_vec(),
            },
        });
        input = rest;
    }
    Ok(params)
}
