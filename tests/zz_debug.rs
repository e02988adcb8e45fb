#[test]
fn debug_crash() {
    holdfast::session::selfcheck::session(&std::fs::read("/tmp/crash/c3").unwrap());
}
