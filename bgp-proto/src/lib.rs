//! bgp-proto: a lossless BGP-4 codec and a sans-IO RFC 4271 session FSM.
