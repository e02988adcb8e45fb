//! BFD, RFC 5880 asynchronous mode over UDP: single-hop (RFC 5881, port
//! 3784, TTL 255 both ways) and multihop (RFC 5883, port 4784). The
//! protocol is a pure state machine (`session`); the driver owns sockets
//! and timers.

pub mod auth;
pub mod driver;
pub mod packet;
pub mod session;
