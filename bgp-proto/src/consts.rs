//! Protocol numbers, named as the RFCs and IANA registries name them.

/// RFC 4271 §4.1: the marker is 16 octets of all ones.
pub const MARKER: [u8; 16] = [0xff; 16];
/// RFC 4271 §4.1: marker (16) + length (2) + type (1).
pub const HEADER_LEN: usize = 19;
/// RFC 4271 §4.1: the largest message without the extended message capability.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// RFC 8654 §4: the largest message once extended messages are negotiated.
pub const MAX_EXTENDED_MESSAGE_LEN: usize = 65535;

/// BGP version 4 (RFC 4271 §4.2).
pub const BGP_VERSION: u8 = 4;
/// RFC 6793 §9: the 2-octet placeholder for a 4-octet AS number.
pub const AS_TRANS: u16 = 23456;

/// Message types (RFC 4271 §4.1, RFC 2918 §3).
pub mod msg_type {
    /// 1 — OPEN (RFC 4271 §4.2).
    pub const OPEN: u8 = 1;
    /// 2 — UPDATE (RFC 4271 §4.3).
    pub const UPDATE: u8 = 2;
    /// 3 — NOTIFICATION (RFC 4271 §4.5).
    pub const NOTIFICATION: u8 = 3;
    /// 4 — KEEPALIVE (RFC 4271 §4.4).
    pub const KEEPALIVE: u8 = 4;
    /// 5 — ROUTE-REFRESH (RFC 2918 §3).
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Optional parameter types in OPEN (RFC 4271 §4.2, RFC 5492, RFC 9072).
pub mod opt_param {
    /// Authentication Information (RFC 1771 §4.2), deprecated by RFC 4271
    /// Appendix A.
    pub const AUTHENTICATION: u8 = 1;
    /// Capabilities (RFC 5492 §4): the parameter that carries capability TLVs.
    pub const CAPABILITIES: u8 = 2;
    /// RFC 9072 §2: "Non-Ext OP Type" value announcing the extended format.
    pub const EXTENDED_LENGTH: u8 = 255;
}

/// Capability codes (IANA "Capability Codes").
pub mod cap {
    /// 1 — Multiprotocol Extensions for BGP-4 (RFC 4760 §8).
    pub const MULTIPROTOCOL: u8 = 1;
    /// 2 — Route Refresh Capability for BGP-4 (RFC 2918 §2).
    pub const ROUTE_REFRESH: u8 = 2;
    /// 5 — Extended Next Hop Encoding (RFC 8950 §4).
    pub const EXTENDED_NEXT_HOP: u8 = 5;
    /// 6 — BGP Extended Message (RFC 8654 §3).
    pub const EXTENDED_MESSAGE: u8 = 6;
    /// 9 — BGP Role (RFC 9234 §4.1).
    pub const ROLE: u8 = 9;
    /// 64 — Graceful Restart Capability (RFC 4724 §3).
    pub const GRACEFUL_RESTART: u8 = 64;
    /// 65 — Support for 4-octet AS number capability (RFC 6793 §3).
    pub const FOUR_OCTET_AS: u8 = 65;
    /// 69 — ADD-PATH Capability (RFC 7911 §4).
    pub const ADD_PATH: u8 = 69;
    /// 70 — Enhanced Route Refresh Capability (RFC 7313 §3.1).
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
    /// 71 — Long-Lived Graceful Restart Capability (RFC 9494 §3.1).
    pub const LONG_LIVED_GR: u8 = 71;
    /// 73 — FQDN Capability (draft-walton-bgp-hostname-capability).
    pub const FQDN: u8 = 73;
}

/// Path attribute type codes (IANA "BGP Path Attributes").
pub mod attr {
    /// 1 — ORIGIN, well-known mandatory (RFC 4271 §5.1.1).
    pub const ORIGIN: u8 = 1;
    /// 2 — AS_PATH, well-known mandatory (RFC 4271 §5.1.2).
    pub const AS_PATH: u8 = 2;
    /// 3 — NEXT_HOP, well-known mandatory for IPv4 NLRI (RFC 4271 §5.1.3).
    pub const NEXT_HOP: u8 = 3;
    /// 4 — MULTI_EXIT_DISC, optional non-transitive (RFC 4271 §5.1.4).
    pub const MULTI_EXIT_DISC: u8 = 4;
    /// 5 — LOCAL_PREF, well-known, internal peers only (RFC 4271 §5.1.5).
    pub const LOCAL_PREF: u8 = 5;
    /// 6 — ATOMIC_AGGREGATE, well-known discretionary (RFC 4271 §5.1.6).
    pub const ATOMIC_AGGREGATE: u8 = 6;
    /// 7 — AGGREGATOR, optional transitive (RFC 4271 §5.1.7).
    pub const AGGREGATOR: u8 = 7;
    /// 8 — COMMUNITIES, optional transitive (RFC 1997).
    pub const COMMUNITIES: u8 = 8;
    /// 9 — ORIGINATOR_ID, set by a route reflector (RFC 4456 §8).
    pub const ORIGINATOR_ID: u8 = 9;
    /// 10 — CLUSTER_LIST, route reflection path (RFC 4456 §8).
    pub const CLUSTER_LIST: u8 = 10;
    /// 14 — MP_REACH_NLRI, multiprotocol reachable NLRI (RFC 4760 §3).
    pub const MP_REACH_NLRI: u8 = 14;
    /// 15 — MP_UNREACH_NLRI, multiprotocol unreachable NLRI (RFC 4760 §4).
    pub const MP_UNREACH_NLRI: u8 = 15;
    /// 16 — EXTENDED COMMUNITIES (RFC 4360 §2).
    pub const EXTENDED_COMMUNITIES: u8 = 16;
    /// 17 — AS4_PATH, the 4-octet AS path beside a 2-octet AS_PATH (RFC 6793 §3).
    pub const AS4_PATH: u8 = 17;
    /// 18 — AS4_AGGREGATOR, the 4-octet aggregator AS (RFC 6793 §3).
    pub const AS4_AGGREGATOR: u8 = 18;
    /// 25 — IPv6 Address Specific Extended Community (RFC 5701 §2).
    pub const IPV6_EXTENDED_COMMUNITIES: u8 = 25;
    /// 32 — LARGE_COMMUNITY (RFC 8092 §3).
    pub const LARGE_COMMUNITY: u8 = 32;
    /// 35 — Only to Customer (OTC), route leak prevention (RFC 9234 §5).
    pub const OTC: u8 = 35;
}

/// Path attribute flag bits (RFC 4271 §4.3).
pub mod attr_flags {
    /// Bit 0, Optional: set for optional attributes, clear for well-known.
    pub const OPTIONAL: u8 = 0x80;
    /// Bit 1, Transitive: set for optional transitive and for all well-known
    /// attributes.
    pub const TRANSITIVE: u8 = 0x40;
    /// Bit 2, Partial: an optional transitive attribute that a router on the
    /// path passed on without recognising it.
    pub const PARTIAL: u8 = 0x20;
    /// Bit 3, Extended Length: the Attribute Length field is two octets, not one.
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// NOTIFICATION error codes and subcodes (RFC 4271 §4.5 and IANA "BGP Error
/// (Notification) Codes" / "BGP Error Subcodes").
pub mod notify {
    /// 1 — Message Header Error (RFC 4271 §6.1).
    pub const MESSAGE_HEADER_ERROR: u8 = 1;
    /// 2 — OPEN Message Error (RFC 4271 §6.2).
    pub const OPEN_MESSAGE_ERROR: u8 = 2;
    /// 3 — UPDATE Message Error (RFC 4271 §6.3).
    pub const UPDATE_MESSAGE_ERROR: u8 = 3;
    /// 4 — Hold Timer Expired (RFC 4271 §6.5).
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    /// 5 — Finite State Machine Error (RFC 4271 §6.6).
    pub const FSM_ERROR: u8 = 5;
    /// 6 — Cease (RFC 4271 §6.7).
    pub const CEASE: u8 = 6;
    /// 7 — ROUTE-REFRESH Message Error (RFC 7313 §5).
    pub const ROUTE_REFRESH_MESSAGE_ERROR: u8 = 7;
    /// 8 — Send Hold Timer Expired (RFC 9687).
    pub const SEND_HOLD_TIMER_EXPIRED: u8 = 8;

    /// Subcodes of Message Header Error (RFC 4271 §6.1).
    pub mod header {
        /// 1 — Connection Not Synchronized: the marker is not all ones.
        pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
        /// 2 — Bad Message Length; the data is the erroneous Length field.
        pub const BAD_MESSAGE_LENGTH: u8 = 2;
        /// 3 — Bad Message Type; the data is the erroneous Type field.
        pub const BAD_MESSAGE_TYPE: u8 = 3;
    }
    /// Subcodes of OPEN Message Error (RFC 4271 §6.2 unless noted).
    pub mod open {
        /// 0 — Unspecific: no more specific subcode applies (RFC 4271 §4.5).
        pub const UNSPECIFIC: u8 = 0;
        /// 1 — Unsupported Version Number; the data is the largest locally
        /// supported version below the one the peer bid (2 octets).
        pub const UNSUPPORTED_VERSION_NUMBER: u8 = 1;
        /// 2 — Bad Peer AS.
        pub const BAD_PEER_AS: u8 = 2;
        /// 3 — Bad BGP Identifier.
        pub const BAD_BGP_IDENTIFIER: u8 = 3;
        /// 4 — Unsupported Optional Parameter.
        pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
        /// 6 — Unacceptable Hold Time (5, Authentication Failure, is deprecated).
        pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
        /// 7 — Unsupported Capability (RFC 5492 §5).
        pub const UNSUPPORTED_CAPABILITY: u8 = 7;
        /// 11 — Role Mismatch (RFC 9234 §4.2).
        pub const ROLE_MISMATCH: u8 = 11;
    }
    /// Subcodes of UPDATE Message Error (RFC 4271 §6.3).
    pub mod update {
        /// 0 — Unspecific: no more specific subcode applies (RFC 4271 §4.5).
        pub const UNSPECIFIC: u8 = 0;
        /// 1 — Malformed Attribute List.
        pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
        /// 2 — Unrecognized Well-known Attribute.
        pub const UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: u8 = 2;
        /// 3 — Missing Well-known Attribute; the data is the missing type code.
        pub const MISSING_WELL_KNOWN_ATTRIBUTE: u8 = 3;
        /// 4 — Attribute Flags Error.
        pub const ATTRIBUTE_FLAGS_ERROR: u8 = 4;
        /// 5 — Attribute Length Error.
        pub const ATTRIBUTE_LENGTH_ERROR: u8 = 5;
        /// 6 — Invalid ORIGIN Attribute.
        pub const INVALID_ORIGIN_ATTRIBUTE: u8 = 6;
        /// 8 — Invalid NEXT_HOP Attribute (7, AS Routing Loop, is deprecated).
        pub const INVALID_NEXT_HOP_ATTRIBUTE: u8 = 8;
        /// 9 — Optional Attribute Error.
        pub const OPTIONAL_ATTRIBUTE_ERROR: u8 = 9;
        /// 10 — Invalid Network Field: a malformed NLRI prefix.
        pub const INVALID_NETWORK_FIELD: u8 = 10;
        /// 11 — Malformed AS_PATH.
        pub const MALFORMED_AS_PATH: u8 = 11;
    }
    /// Subcodes of Finite State Machine Error (RFC 6608 §3).
    pub mod fsm {
        /// 0 — Unspecified Error.
        pub const UNSPECIFIED: u8 = 0;
        /// 1 — Receive Unexpected Message in OpenSent State.
        pub const UNEXPECTED_MESSAGE_IN_OPENSENT: u8 = 1;
        /// 2 — Receive Unexpected Message in OpenConfirm State.
        pub const UNEXPECTED_MESSAGE_IN_OPENCONFIRM: u8 = 2;
        /// 3 — Receive Unexpected Message in Established State.
        pub const UNEXPECTED_MESSAGE_IN_ESTABLISHED: u8 = 3;
    }
    /// Subcodes of Cease (RFC 4486, RFC 8538, RFC 9384).
    pub mod cease {
        /// 1 — Maximum Number of Prefixes Reached (RFC 4486).
        pub const MAXIMUM_PREFIXES_REACHED: u8 = 1;
        /// 2 — Administrative Shutdown (RFC 4486), with an optional
        /// message (RFC 9003 §2).
        pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
        /// 3 — Peer De-configured (RFC 4486).
        pub const PEER_DECONFIGURED: u8 = 3;
        /// 4 — Administrative Reset (RFC 4486), with an optional
        /// message (RFC 9003 §2).
        pub const ADMINISTRATIVE_RESET: u8 = 4;
        /// 5 — Connection Rejected (RFC 4486).
        pub const CONNECTION_REJECTED: u8 = 5;
        /// 6 — Other Configuration Change (RFC 4486).
        pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
        /// 7 — Connection Collision Resolution (RFC 4486).
        pub const CONNECTION_COLLISION_RESOLUTION: u8 = 7;
        /// 8 — Out of Resources (RFC 4486).
        pub const OUT_OF_RESOURCES: u8 = 8;
        /// 9 — Hard Reset: graceful restart state is not kept (RFC 8538 §3).
        pub const HARD_RESET: u8 = 9;
        /// 10 — BFD Down (RFC 9384).
        pub const BFD_DOWN: u8 = 10;
    }
    /// Subcodes of ROUTE-REFRESH Message Error (RFC 7313 §5).
    pub mod route_refresh {
        /// 1 — Invalid Message Length; the data is the whole message (RFC 7313 §5).
        pub const INVALID_MESSAGE_LENGTH: u8 = 1;
    }
}
