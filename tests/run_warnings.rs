//! `holdfast run` logs the config's warnings (the lines `holdfast check`
//! prints) at start and again on every reload it applies, and runs the
//! config as written: a warning never stops the daemon. Loopback only
//! ([`Holdfast::local`]): no root, nothing leaves the machine.

mod common;

use common::{Holdfast, LONG, loopback_config};
use testlab::Signal;

const VIPS: &str = "[[vip]]\naddress = \"198.51.100.10\"\n";

#[test]
fn run_logs_the_warnings_at_start_and_on_reload() {
    // The peer's timers are lines 12 and 13 of the config.
    let config = loopback_config().with_peer("tor1", |p| p.hold_time("9s").keepalive("9s"));
    let d = Holdfast::local(&config, VIPS);
    let config = d.config.display().to_string();
    let at_start = format!(
        "config: {config}:13:13: warning: keepalive (9s) equals hold_time (9s): the router's hold timer runs out"
    );
    d.wait_for("the warning logged at start", LONG, || {
        d.log().contains(&at_start)
    });
    // It runs: healthy, and the config as written.
    assert_eq!(d.get("/healthz").expect("/healthz").status, 200);
    let status = d.status_typed();
    assert_eq!(status.peers.len(), 1, "{:?}", status.peers);

    // A reload with another warning logs that one, once applied.
    let text = std::fs::read_to_string(&d.config).expect("config");
    std::fs::write(
        &d.config,
        text.replace("keepalive = \"9s\"", "keepalive = \"5s\""),
    )
    .expect("rewrite config");
    d.signal(Signal::Hup);
    let on_reload = format!(
        "config: {config}:13:13: warning: keepalive (5s) is half of hold_time (9s) or more"
    );
    d.wait_for("the new warning logged on reload", LONG, || {
        d.log().contains(&on_reload)
    });
    let log = d.log();
    let reloaded = log.find("config reloaded").expect("the reload is logged");
    assert!(
        log[reloaded..].contains(&on_reload),
        "the warning comes with the applied reload:\n{log}"
    );
    assert_eq!(d.get("/healthz").expect("/healthz").status, 200);
}
