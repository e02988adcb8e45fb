//! Fuzz target: see bgp_proto::selfcheck::framing for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bgp_proto::selfcheck::framing(data);
});
