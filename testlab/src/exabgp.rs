//! ExaBGP 4.2 (Debian `exabgp`) inside a namespace: a BGP peer that records
//! every message it receives as JSON and sends what a test tells it to,
//! including UPDATEs with deliberately malformed path attributes.
//!
//! The launcher adds an API process named `testlab` (a small Python helper,
//! `exabgp_api.py`) to the configuration. Neighbors opt in with
//! [`API_BLOCK`]. The helper appends each JSON message from ExaBGP to
//! `received.jsonl`, and forwards each line the test appends to `commands`
//! to ExaBGP as an API command; ExaBGP acknowledges each with `done` or
//! `error`, which [`ExaBgp::command`] waits for.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::dir::LabDir;
use crate::netns::Netns;
use crate::process::NsProcess;
use crate::require::{require_root, require_tools};
use crate::wait::wait_for;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const ACK_TIMEOUT: Duration = Duration::from_secs(10);
const PYTHON: &str = "/usr/bin/python3";
const API_HELPER: &str = include_str!("exabgp_api.py");

/// Put this inside each `neighbor … { }` block whose messages the test wants
/// to see: ExaBGP then reports state changes, every message it receives and
/// every message but KEEPALIVE it sends (`direction` `send`), each parsed
/// and, thanks to `consolidate`, in the same JSON object with its raw bytes
/// as hex (top-level `header` and `body`; see [`raw_message`]). Without `consolidate` the
/// raw and the parsed form arrive as two objects. Sent messages are only
/// reported for the types listed under `send`.
pub const API_BLOCK: &str = "\
    api {
        processes [ testlab ];
        neighbor-changes;
        receive { parsed; packets; consolidate; open; update; notification; keepalive; refresh; operational; }
        send { parsed; packets; consolidate; open; update; notification; refresh; operational; }
    }
";

/// A running ExaBGP. Dropping it kills it (and prints its log if the test
/// is panicking).
#[derive(Debug)]
pub struct ExaBgp {
    process: NsProcess,
    dir: LabDir,
    /// Serializes commands so each waits for its own acknowledgement.
    commands: Mutex<()>,
}

impl ExaBgp {
    /// Starts ExaBGP with `conf` (neighbor blocks; see [`API_BLOCK`]),
    /// listening for incoming sessions on port 179 of each `bind` address
    /// (empty: no listening, active sessions only).
    pub fn start(ns: &Netns, bind: &[IpAddr], conf: &str) -> ExaBgp {
        ExaBgp::start_with_env(ns, bind, conf, &[])
    }

    /// Like [`ExaBgp::start`] with extra `exabgp.*` environment settings,
    /// which win over the defaults set here (e.g.
    /// `("exabgp.log.level", "DEBUG")`).
    pub fn start_with_env(ns: &Netns, bind: &[IpAddr], conf: &str, env: &[(&str, &str)]) -> ExaBgp {
        require_root();
        require_tools(&["exabgp", PYTHON]);
        let dir = LabDir::new("exabgp");
        let helper = dir.write("exabgp_api.py", API_HELPER);
        let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let process_block = format!(
            "process testlab {{\n    run {PYTHON} {} {} {} {} {};\n    encoder json;\n}}\n",
            helper.display(),
            path("received.jsonl"),
            path("acks"),
            path("commands"),
            path("commands.offset"),
        );
        let conf_path = dir.write("exabgp.conf", &format!("{process_block}\n{conf}"));
        let bind_list = bind
            .iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        let mut vars: Vec<(&str, &str)> = vec![
            // As root, without dropping to user exabgp (which could not
            // write the lab directory).
            ("exabgp.daemon.user", "root"),
            ("exabgp.daemon.drop", "false"),
            ("exabgp.daemon.daemonize", "false"),
            ("exabgp.tcp.bind", &bind_list),
            // /etc/exabgp/exabgp.env turns on the CLI pipes, which live in
            // /run and would be shared by every ExaBGP on the host.
            ("exabgp.api.cli", "false"),
            ("exabgp.api.ack", "true"),
            ("exabgp.log.destination", "stdout"),
            ("exabgp.log.level", "INFO"),
            // Its log reaches the file as it is written, not when a buffer
            // fills (a SIGKILL would lose the buffer).
            ("PYTHONUNBUFFERED", "1"),
        ];
        vars.retain(|(key, _)| !env.iter().any(|(k, _)| k == key));
        vars.extend_from_slice(env);
        let conf_path = conf_path.to_string_lossy().into_owned();
        let argv = ["exabgp", conf_path.as_str()];
        let process = NsProcess::start_logged(ns, "exabgp", &argv, &vars, &dir.join("exabgp.log"));
        let mut exabgp = ExaBgp {
            process,
            dir,
            commands: Mutex::new(()),
        };
        // The helper creates received.jsonl when ExaBGP has started it.
        let received = exabgp.dir.join("received.jsonl");
        wait_for(START_TIMEOUT, "ExaBGP to start its API process", || {
            exabgp.process.assert_running("starting (config error?)");
            if received.exists() {
                Ok(())
            } else {
                Err("not yet".into())
            }
        });
        exabgp
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    pub fn process(&mut self) -> &mut NsProcess {
        &mut self.process
    }

    /// Sends one API command (`announce route …`, `neighbor 192.0.2.1
    /// teardown 2`, …) and waits for ExaBGP's acknowledgement: `Ok` for
    /// `done`, `Err` with the log tail for `error`. A `done` means ExaBGP
    /// accepted the command; the UPDATE goes out when the session is up.
    pub fn command(&self, command: &str) -> Result<(), String> {
        assert!(!command.contains('\n'), "one command per call: {command:?}");
        let _one_at_a_time = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.acks().len();
        let path = self.dir.join("commands");
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        writeln!(file, "{command}")
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        drop(file);
        let ack = wait_for(
            ACK_TIMEOUT,
            &format!("ExaBGP to acknowledge {command:?}"),
            || match self.acks().get(before) {
                Some(ack) => Ok(ack.clone()),
                None => Err("no acknowledgement".into()),
            },
        );
        if ack == "done" {
            Ok(())
        } else {
            Err(format!(
                "ExaBGP answered {ack:?} to {command:?}:\n{}",
                self.process.log_tail(20)
            ))
        }
    }

    fn acks(&self) -> Vec<String> {
        self.dir.read("acks").lines().map(str::to_owned).collect()
    }

    /// `announce route ROUTE` (e.g. `198.51.100.40/32 next-hop self
    /// community [65001:7]`); panics if ExaBGP rejects it.
    pub fn announce(&self, route: &str) {
        if let Err(e) = self.command(&format!("announce route {route}")) {
            panic!("{e}");
        }
    }

    /// `withdraw route ROUTE`; panics if ExaBGP rejects it.
    pub fn withdraw(&self, route: &str) {
        if let Err(e) = self.command(&format!("withdraw route {route}")) {
            panic!("{e}");
        }
    }

    /// Announces `prefix` with one path attribute given as raw bytes: type
    /// `code`, `flags` (0x40 transitive, 0x80 optional, 0x10 extended length
    /// is added by ExaBGP when the value exceeds 255 bytes), value `value`.
    /// ExaBGP puts it on the wire verbatim, so this is how a test sends a
    /// deliberately malformed UPDATE:
    ///
    /// - an attribute of a known type replaces the one ExaBGP would
    ///   generate: ORIGIN (1) with value 5, or with length 2; AS_PATH (2)
    ///   with a bad segment; any attribute with wrong flags;
    /// - an unknown or optional type is added as is (e.g. 0x99, flags 0xC0).
    ///
    /// What ExaBGP 4.2 cannot send: NEXT_HOP (3) this way (it is silently
    /// dropped — use `next-hop` in the route), message-level errors (bad
    /// marker, length or type), malformed NLRI. The malformed route stays in
    /// ExaBGP's Adj-RIB-Out and is re-sent after every reconnect until
    /// [`ExaBgp::withdraw`]n.
    pub fn announce_raw_attribute(
        &self,
        prefix: &str,
        next_hop: &str,
        code: u8,
        flags: u8,
        value: &[u8],
    ) {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let hex = if hex.is_empty() {
            "0x".to_owned()
        } else {
            format!("0x{hex}")
        };
        self.announce(&format!(
            "{prefix} next-hop {next_hop} attribute [0x{code:02x} 0x{flags:02x} {hex}]"
        ));
    }

    /// Every JSON message from ExaBGP so far, in order: BGP messages
    /// (`type` `open`, `update`, `notification`, `keepalive`, …;
    /// `neighbor.direction` `receive` or `send`; parsed under
    /// `neighbor.message` or `neighbor.open`/`.notification`; raw bytes in
    /// `header`/`body`) and session state changes (`type` `state`,
    /// `neighbor.state`).
    pub fn messages(&self) -> Vec<Value> {
        self.dir
            .read("received.jsonl")
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(parse_line)
            .collect()
    }

    /// The BGP messages ExaBGP received, in order.
    pub fn received(&self) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["neighbor"]["direction"].as_str() == Some("receive"))
            .collect()
    }

    /// The received messages of one `type` (`update`, `notification`, …).
    pub fn received_of_type(&self, kind: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|m| m["type"].as_str() == Some(kind))
            .collect()
    }

    /// The BGP messages ExaBGP sent (all but KEEPALIVEs).
    pub fn sent(&self) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|m| m["neighbor"]["direction"].as_str() == Some("send"))
            .collect()
    }

    /// Every prefix announced to ExaBGP so far, in arrival order (with
    /// repeats), from all families.
    pub fn announced_prefixes(&self) -> Vec<String> {
        self.received_of_type("update")
            .iter()
            .flat_map(|m| {
                let announce = &m["neighbor"]["message"]["update"]["announce"];
                // { "ipv4 unicast": { NEXTHOP: [ { "nlri": P }, … ] } }
                let families = announce.as_object().cloned().unwrap_or_default();
                families
                    .into_values()
                    .filter_map(|by_nexthop| by_nexthop.as_object().cloned())
                    .flat_map(|by_nexthop| by_nexthop.into_values())
                    .filter_map(|nlris| nlris.as_array().cloned())
                    .flatten()
                    .filter_map(|nlri| nlri["nlri"].as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every prefix withdrawn from ExaBGP so far, in arrival order.
    pub fn withdrawn_prefixes(&self) -> Vec<String> {
        self.received_of_type("update")
            .iter()
            .flat_map(|m| {
                let withdraw = &m["neighbor"]["message"]["update"]["withdraw"];
                // { "ipv4 unicast": [ { "nlri": P }, … ] }
                let families = withdraw.as_object().cloned().unwrap_or_default();
                families
                    .into_values()
                    .filter_map(|nlris| nlris.as_array().cloned())
                    .flatten()
                    .filter_map(|nlri| nlri["nlri"].as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits until a received message satisfies `matches` and returns it.
    pub fn wait_received(
        &self,
        timeout: Duration,
        what: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(timeout, &format!("ExaBGP to receive {what}"), || {
            let received = self.received();
            received
                .iter()
                .find(|m| matches(m))
                .cloned()
                .ok_or_else(|| format!("{} messages received, none matching", received.len()))
        })
    }

    /// Waits until `prefix` has been announced to ExaBGP.
    pub fn wait_announced(&self, prefix: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("ExaBGP to receive an announcement of {prefix}"),
            || {
                let announced = self.announced_prefixes();
                if announced.iter().any(|p| p == prefix) {
                    Ok(())
                } else {
                    Err(format!("{announced:?}"))
                }
            },
        );
    }

    /// The last state ExaBGP reported for the session with `peer`
    /// (`connected`, `up`, `down`), if any.
    pub fn neighbor_state(&self, peer: IpAddr) -> Option<String> {
        let peer = peer.to_string();
        self.messages()
            .iter()
            .rev()
            .filter(|m| m["type"].as_str() == Some("state"))
            .find(|m| m["neighbor"]["address"]["peer"].as_str() == Some(peer.as_str()))
            .and_then(|m| m["neighbor"]["state"].as_str().map(str::to_owned))
    }

    /// Waits until ExaBGP reports the session with `peer` up.
    pub fn wait_up(&self, peer: IpAddr, timeout: Duration) {
        wait_for(
            timeout,
            &format!("ExaBGP session with {peer} to be up"),
            || match self.neighbor_state(peer) {
                Some(state) if state == "up" => Ok(()),
                state => Err(format!("{state:?}")),
            },
        );
    }
}

/// Parses one line of ExaBGP's JSON output. ExaBGP 4.2 double-quotes some
/// strings of OPERATIONAL messages (`"name": ""RPCQ""`); such a line is
/// parsed again with `""` turned into `"`. A line that is still not JSON
/// becomes `{"type": "unparsed", "line": LINE}` rather than a panic, so one
/// bad line does not hide the others.
fn parse_line(line: &str) -> Value {
    serde_json::from_str(line)
        .or_else(|_| serde_json::from_str(&line.replace("\"\"", "\"")))
        .unwrap_or_else(|_| serde_json::json!({"type": "unparsed", "line": line}))
}

/// The complete wire bytes (marker included) of a message reported with
/// `packets; consolidate;`: its `header` and `body` hex strings decoded.
/// `None` when the message carries no raw bytes or they are not hex.
pub fn raw_message(message: &Value) -> Option<Vec<u8>> {
    let header = message["header"].as_str()?;
    let body = message["body"].as_str()?;
    let hex = format!("{}{}", header.strip_prefix("0x")?, body.strip_prefix("0x")?);
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn doubled_quotes_of_operational_messages_are_repaired() {
        let line =
            r#"{ "type": "operational", "body": "0x00", "operational": { "name": ""RPCQ"" } }"#;
        assert_eq!(parse_line(line)["operational"]["name"], "RPCQ");
        assert_eq!(parse_line("not json")["type"], "unparsed");
    }

    #[test]
    fn raw_message_joins_header_and_body() {
        let keepalive = json!({"header": "0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF001304", "body": "0x"});
        let mut expected = vec![0xff; 16];
        expected.extend([0x00, 0x13, 0x04]);
        assert_eq!(raw_message(&keepalive), Some(expected));
        assert_eq!(raw_message(&json!({"header": "0xFF", "body": "0x0"})), None);
        assert_eq!(raw_message(&json!({"type": "state"})), None);
    }
}
