//! Fuzz target: a whole session (the sans-IO FSM and the speaker's UPDATE
//! packing) driven by a script of steps; see bgp_proto::selfcheck::session
//! for the script and the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bgp_proto::selfcheck::session(data);
});
