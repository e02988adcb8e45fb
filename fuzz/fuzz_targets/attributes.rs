//! Fuzz target: see bgp_proto::selfcheck::attributes for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bgp_proto::selfcheck::attributes(data);
});
