//! ROUTE-REFRESH (RFC 2918 §3) with the RFC 7313 §3.2 Message Subtype.
//!
//! ```text
//! +-------------------------+-----------------+---------------+
//! | AFI (2)                 | Message Subtype | SAFI (1)      |
//! +-------------------------+-----------------+---------------+
//! ```

use crate::context::{Afi, Family, Safi};
use crate::error::Error;

/// A ROUTE-REFRESH message: a request to re-advertise one family's routes,
/// or the BoRR/EoRR markers around such a re-advertisement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteRefresh {
    /// The AFI/SAFI concerned.
    pub family: Family,
    /// 0 = normal route refresh, 1 = BoRR, 2 = EoRR (RFC 7313 §3.2). Other
    /// values are kept: "MUST ignore the received ROUTE-REFRESH message".
    pub subtype: u8,
    /// Anything after the 4 fixed octets of a subtype-0 message (ORF
    /// entries, RFC 5291): kept as bytes.
    pub trailing: Vec<u8>,
}

impl RouteRefresh {
    /// Subtype 0: a normal route refresh request (RFC 2918).
    pub const NORMAL: u8 = 0;
    /// Subtype 1: Beginning of Route Refresh (RFC 7313 §3.2).
    pub const BORR: u8 = 1;
    /// Subtype 2: End of Route Refresh (RFC 7313 §3.2).
    pub const EORR: u8 = 2;

    /// The ROUTE-REFRESH of `family` with `subtype`, without trailing data.
    pub fn new(family: Family, subtype: u8) -> Self {
        RouteRefresh {
            family,
            subtype,
            trailing: Vec::new(),
        }
    }

    pub(crate) fn decode(body: &[u8], whole: &[u8]) -> Result<Self, Error> {
        if body.len() < 4 {
            // Below the fixed size: RFC 4271 §6.1 "Bad Message Length".
            return Err(Error::BadMessageLength {
                length: whole.len() as u16,
            });
        }
        let subtype = body[2];
        // RFC 7313 §5: "If the length, excluding the fixed-size message
        // header, of the received ROUTE-REFRESH message with Message Subtype
        // 1 and 2 is not 4, then the BGP speaker MUST send a NOTIFICATION
        // message with the Error Code of 'ROUTE-REFRESH Message Error' and
        // the subcode of 'Invalid Message Length'."
        if matches!(subtype, Self::BORR | Self::EORR) && body.len() != 4 {
            return Err(Error::RouteRefreshInvalidLength {
                message: whole.to_vec(),
            });
        }
        Ok(RouteRefresh {
            family: Family::new(Afi(u16::from_be_bytes([body[0], body[1]])), Safi(body[3])),
            subtype,
            trailing: body[4..].to_vec(),
        })
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.family.afi.0.to_be_bytes());
        out.push(self.subtype);
        out.push(self.family.safi.0);
        out.extend_from_slice(&self.trailing);
    }
}
