//! `[[bmp]]`: the BMP monitoring stations (RFC 7854) holdfast connects to
//! and reports its Adj-RIB-Out to (RFC 8671).

use std::net::IpAddr;
use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::schema::{DefaultValue, IntRange, Key, PORT, Range, Section, duration};
use super::tree::{self, Table};

/// The port a station listens on when `port` is left out (pmacct's
/// `bmp_daemon_port` default; RFC 7854 assigns none).
pub const DEFAULT_BMP_PORT: u16 = 1790;

/// `stats_interval` when left out.
pub const DEFAULT_STATS_INTERVAL: Duration = Duration::from_secs(60);

/// `queue_limit` when left out, in octets.
pub const DEFAULT_QUEUE_LIMIT: u64 = 16 << 20;

/// `queue_limit` bounds: 64 KiB to 1 GiB.
const QUEUE_LIMIT: IntRange = IntRange {
    min: 64 << 10,
    max: 1 << 30,
};

/// One `[[bmp]]` station.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmpStation {
    /// `name`, or `address:port` when left out: the `station` label.
    pub name: String,
    /// The station's address.
    pub address: IpAddr,
    /// The station's TCP port.
    pub port: u16,
    /// How often Stats Reports go out; zero: never.
    pub stats_interval: Duration,
    /// Octets that may wait for the station; beyond them the connection is
    /// dropped and made again with the whole state.
    pub queue_limit: u64,
}

pub(crate) const BMP_KEYS: &[Key] = &[
    Key {
        name: "address",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "The BMP station's IP address; holdfast connects to it over TCP (RFC 7854 §3.2), reconnecting with exponential back-off (1 s doubling to 60 s).",
    },
    Key {
        name: "port",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_BMP_PORT.to_string()),
        range: Range::Int(PORT),
        meaning: "The station's TCP port.",
    },
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Text("`address:port`"),
        range: Range::Any,
        meaning: "The station's name in logs and in the `station` label of the `holdfast_bmp_*` metrics; unique.",
    },
    Key {
        name: "stats_interval",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_STATS_INTERVAL)),
        range: Range::Any,
        meaning: "How often each established peer's Stats Report (RFC 7854 §4.8) goes out: the routes in its post-policy Adj-RIB-Out, in all and per family (RFC 8671 §5 types 15 and 17). `\"0s\"`: never.",
    },
    Key {
        name: "queue_limit",
        kind: "integer (octets)",
        default: DefaultValue::Value(|| DEFAULT_QUEUE_LIMIT.to_string()),
        range: Range::Int(QUEUE_LIMIT),
        meaning: "Octets of BMP messages that may wait for the station. A station that falls this far behind is disconnected (counted in `holdfast_bmp_dropped_total`) and, once reconnected, sent the whole state again; the BGP sessions never wait for it.",
    },
];

/// The reference's `[[bmp]]` table.
pub const SECTION: Section = Section {
    title: "`[[bmp]]` (optional)",
    intro: "BMP monitoring stations (RFC 7854), one `[[bmp]]` each. Each is sent an Initiation with this node's name, a Peer Up and Peer Down for every BGP session, the UPDATEs sent to each peer as Route Monitoring of its post-policy Adj-RIB-Out (RFC 8671), Stats Reports, and a Termination when the daemon exits.",
    keys: BMP_KEYS,
};

/// The `[[bmp]]` array.
pub(crate) fn parse_bmp(value: &tree::Value<'_>, d: &mut Diagnostics) -> Option<Vec<BmpStation>> {
    let items = tree::array_of_tables(value, "bmp", d)?;
    let mut out: Vec<BmpStation> = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        let Some(table) = Table::from_value(item, "each [[bmp]]", "[[bmp]]".to_string(), d) else {
            ok = false;
            continue;
        };
        match parse_one(&table, d) {
            Some(s) => {
                if out.iter().any(|o| o.name == s.name) {
                    d.error(
                        &table.span(),
                        format!(
                            "[[bmp]] name \"{}\" is used twice: station names are unique",
                            s.name
                        ),
                    );
                    ok = false;
                } else {
                    out.push(s);
                }
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn parse_one(table: &Table<'_, '_>, d: &mut Diagnostics) -> Option<BmpStation> {
    table.reject_unknown_keys(BMP_KEYS, d);
    let address = table
        .required("address", d)
        .and_then(|v| tree::ip_address(v, "address", d));
    let port = match table.get("port") {
        None => Some(DEFAULT_BMP_PORT),
        Some(v) => tree::integer_in::<u16>(v, "port", PORT, d),
    };
    let stats_interval = match table.get("stats_interval") {
        None => Some(DEFAULT_STATS_INTERVAL),
        Some(v) => tree::duration(v, "stats_interval", d),
    };
    let queue_limit = match table.get("queue_limit") {
        None => Some(DEFAULT_QUEUE_LIMIT),
        Some(v) => tree::integer_in::<u64>(v, "queue_limit", QUEUE_LIMIT, d),
    };
    let name = match table.get("name") {
        None => None,
        Some(v) => Some(tree::string(v, "name", d)?.to_string()),
    };
    let (address, port) = (address?, port?);
    let name = name.unwrap_or_else(|| std::net::SocketAddr::new(address, port).to_string());
    Some(BmpStation {
        name,
        address,
        port,
        stats_interval: stats_interval?,
        queue_limit: queue_limit?,
    })
}
