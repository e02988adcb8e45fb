//! Fuzz target: one peer's session as the daemon runs it — holdfast's
//! sans-IO `PeerSession` (the FSM, the speaker, the R bit) — driven by a
//! script of inputs; see holdfast::session::selfcheck for the script and
//! the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    holdfast::session::selfcheck::session(data);
});
