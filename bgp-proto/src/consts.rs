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
    pub const OPEN: u8 = 1;
    pub const UPDATE: u8 = 2;
    pub const NOTIFICATION: u8 = 3;
    pub const KEEPALIVE: u8 = 4;
    pub const ROUTE_REFRESH: u8 = 5;
}

/// Optional parameter types in OPEN (RFC 4271 §4.2, RFC 5492, RFC 9072).
pub mod opt_param {
    /// Deprecated authentication parameter (RFC 5492 §… obsoleted by RFC 4271).
    pub const AUTHENTICATION: u8 = 1;
    pub const CAPABILITIES: u8 = 2;
    /// RFC 9072 §2: "Non-Ext OP Type" value announcing the extended format.
    pub const EXTENDED_LENGTH: u8 = 255;
}

/// Capability codes (IANA "Capability Codes").
pub mod cap {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const EXTENDED_NEXT_HOP: u8 = 5;
    pub const EXTENDED_MESSAGE: u8 = 6;
    pub const ROLE: u8 = 9;
    pub const GRACEFUL_RESTART: u8 = 64;
    pub const FOUR_OCTET_AS: u8 = 65;
    pub const ADD_PATH: u8 = 69;
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
    pub const LONG_LIVED_GR: u8 = 71;
    pub const FQDN: u8 = 73;
}

/// Path attribute type codes (IANA "BGP Path Attributes").
pub mod attr {
    pub const ORIGIN: u8 = 1;
    pub const AS_PATH: u8 = 2;
    pub const NEXT_HOP: u8 = 3;
    pub const MULTI_EXIT_DISC: u8 = 4;
    pub const LOCAL_PREF: u8 = 5;
    pub const ATOMIC_AGGREGATE: u8 = 6;
    pub const AGGREGATOR: u8 = 7;
    pub const COMMUNITIES: u8 = 8;
    pub const ORIGINATOR_ID: u8 = 9;
    pub const CLUSTER_LIST: u8 = 10;
    pub const MP_REACH_NLRI: u8 = 14;
    pub const MP_UNREACH_NLRI: u8 = 15;
    pub const EXTENDED_COMMUNITIES: u8 = 16;
    pub const AS4_PATH: u8 = 17;
    pub const AS4_AGGREGATOR: u8 = 18;
    pub const IPV6_EXTENDED_COMMUNITIES: u8 = 25;
    pub const LARGE_COMMUNITY: u8 = 32;
    pub const OTC: u8 = 35;
}

/// Path attribute flag bits (RFC 4271 §4.3).
pub mod attr_flags {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// NOTIFICATION error codes and subcodes (RFC 4271 §4.5 and IANA "BGP Error
/// (Notification) Codes" / "BGP Error Subcodes").
pub mod notify {
    pub const MESSAGE_HEADER_ERROR: u8 = 1;
    pub const OPEN_MESSAGE_ERROR: u8 = 2;
    pub const UPDATE_MESSAGE_ERROR: u8 = 3;
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    pub const FSM_ERROR: u8 = 5;
    pub const CEASE: u8 = 6;
    pub const ROUTE_REFRESH_MESSAGE_ERROR: u8 = 7;
    pub const SEND_HOLD_TIMER_EXPIRED: u8 = 8;

    /// Subcodes of Message Header Error.
    pub mod header {
        pub const CONNECTION_NOT_SYNCHRONIZED: u8 = 1;
        pub const BAD_MESSAGE_LENGTH: u8 = 2;
        pub const BAD_MESSAGE_TYPE: u8 = 3;
    }
    /// Subcodes of OPEN Message Error.
    pub mod open {
        pub const UNSPECIFIC: u8 = 0;
        pub const UNSUPPORTED_VERSION_NUMBER: u8 = 1;
        pub const BAD_PEER_AS: u8 = 2;
        pub const BAD_BGP_IDENTIFIER: u8 = 3;
        pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
        pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
        pub const UNSUPPORTED_CAPABILITY: u8 = 7;
        pub const ROLE_MISMATCH: u8 = 11;
    }
    /// Subcodes of UPDATE Message Error.
    pub mod update {
        pub const UNSPECIFIC: u8 = 0;
        pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
        pub const UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE: u8 = 2;
        pub const MISSING_WELL_KNOWN_ATTRIBUTE: u8 = 3;
        pub const ATTRIBUTE_FLAGS_ERROR: u8 = 4;
        pub const ATTRIBUTE_LENGTH_ERROR: u8 = 5;
        pub const INVALID_ORIGIN_ATTRIBUTE: u8 = 6;
        pub const INVALID_NEXT_HOP_ATTRIBUTE: u8 = 8;
        pub const OPTIONAL_ATTRIBUTE_ERROR: u8 = 9;
        pub const INVALID_NETWORK_FIELD: u8 = 10;
        pub const MALFORMED_AS_PATH: u8 = 11;
    }
    /// Subcodes of Finite State Machine Error (RFC 6608).
    pub mod fsm {
        pub const UNSPECIFIED: u8 = 0;
        pub const UNEXPECTED_MESSAGE_IN_OPENSENT: u8 = 1;
        pub const UNEXPECTED_MESSAGE_IN_OPENCONFIRM: u8 = 2;
        pub const UNEXPECTED_MESSAGE_IN_ESTABLISHED: u8 = 3;
    }
    /// Subcodes of Cease (RFC 4486, RFC 8538).
    pub mod cease {
        pub const MAXIMUM_PREFIXES_REACHED: u8 = 1;
        pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
        pub const PEER_DECONFIGURED: u8 = 3;
        pub const ADMINISTRATIVE_RESET: u8 = 4;
        pub const CONNECTION_REJECTED: u8 = 5;
        pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
        pub const CONNECTION_COLLISION_RESOLUTION: u8 = 7;
        pub const OUT_OF_RESOURCES: u8 = 8;
        pub const HARD_RESET: u8 = 9;
        pub const BFD_DOWN: u8 = 10;
    }
    /// Subcodes of ROUTE-REFRESH Message Error (RFC 7313 §5).
    pub mod route_refresh {
        pub const INVALID_MESSAGE_LENGTH: u8 = 1;
    }
}
