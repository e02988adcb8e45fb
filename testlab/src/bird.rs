//! BIRD 2 (Debian `bird2`) inside a namespace, in the foreground (`-f`),
//! with its control socket in a private directory. birdc reaches it through
//! that unix socket, which needs no `ip netns exec`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::dir::LabDir;
use crate::netns::Netns;
use crate::process::NsProcess;
use crate::require::{require_root, require_tools};
use crate::wait::wait_for;

const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A running BIRD. Dropping it kills it (and prints its log if the test is
/// panicking).
#[derive(Debug)]
pub struct Bird {
    process: NsProcess,
    dir: LabDir,
}

impl Bird {
    /// Starts BIRD with `conf` (a complete bird.conf; `log stderr all;` is
    /// prepended so its log lands in `bird.log`). Panics with BIRD's message
    /// if it rejects the config.
    ///
    /// Remember `protocol device {}`: without it BIRD knows no interfaces
    /// and direct BGP sessions stay down.
    pub fn start(ns: &Netns, conf: &str) -> Bird {
        require_root();
        require_tools(&["bird", "birdc"]);
        let dir = LabDir::new("bird");
        let conf_path = dir.write("bird.conf", &format!("log stderr all;\n{conf}"));
        let ctl = dir.join("bird.ctl");
        let pid = dir.join("bird.pid");
        let argv = [
            "bird",
            "-f",
            "-c",
            &conf_path.to_string_lossy(),
            "-s",
            &ctl.to_string_lossy(),
            "-P",
            &pid.to_string_lossy(),
        ]
        .map(|s| s.to_owned());
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let process = NsProcess::start_logged(ns, "bird", &argv, &[], &dir.join("bird.log"));
        let mut bird = Bird { process, dir };
        wait_for(START_TIMEOUT, "BIRD to open its control socket", || {
            bird.process.assert_running("starting (config error?)");
            bird.try_birdc("show status").map(drop)
        });
        bird
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    /// The BIRD process (to signal it).
    pub fn process(&mut self) -> &mut NsProcess {
        &mut self.process
    }

    fn try_birdc(&self, command: &str) -> Result<String, String> {
        let output = Command::new("birdc")
            .arg("-s")
            .arg(self.dir.join("bird.ctl"))
            .args(command.split_whitespace())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run birdc: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(format!(
                "birdc {command:?} failed ({}):\n{stdout}{stderr}",
                output.status
            ))
        }
    }

    /// Runs a birdc command and returns its output without the
    /// "BIRD x.y ready." banner. Panics (with BIRD's log) if birdc fails.
    pub fn birdc(&self, command: &str) -> String {
        let out = self
            .try_birdc(command)
            .unwrap_or_else(|e| panic!("{e}\nBIRD log:\n{}", self.process.log_tail(80)));
        out.lines()
            .filter(|line| !line.starts_with("BIRD "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The state of a protocol: for BGP the "BGP state:" of
    /// `show protocols all NAME` (`Established`, `Active`, `Connect`, `Idle`,
    /// …), for others the State column (`up`, `down`, `start`).
    pub fn protocol_state(&self, name: &str) -> String {
        let out = self.birdc(&format!("show protocols all {name}"));
        if let Some(state) = out
            .lines()
            .find_map(|line| line.trim().strip_prefix("BGP state:"))
        {
            return state.trim().to_owned();
        }
        out.lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .and_then(|line| line.split_whitespace().nth(3))
            .unwrap_or_else(|| panic!("BIRD has no protocol {name}:\n{out}"))
            .to_owned()
    }

    /// Waits until BGP protocol `name` is Established.
    pub fn wait_established(&self, name: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("BIRD protocol {name} to be Established"),
            || {
                let state = self.protocol_state(name);
                if state == "Established" {
                    Ok(())
                } else {
                    Err(state)
                }
            },
        );
    }

    /// `show route PREFIX all` for an exact prefix; `None` when BIRD has no
    /// such route. Communities print as `(65001,100)`, large communities as
    /// `(65001, 1, 100)`.
    pub fn route(&self, prefix: &str) -> Option<String> {
        assert!(
            prefix.contains('/'),
            "Bird::route needs PREFIX/LEN, got {prefix:?}"
        );
        let command = format!("show route {prefix} all");
        match self.try_birdc(&command) {
            Ok(out) => out
                .lines()
                .any(|line| line.starts_with(prefix))
                .then_some(out),
            // birdc exits 1 on any error reply, including this one.
            Err(e) if e.contains("Network not found") => None,
            Err(e) => panic!("{e}\nBIRD log:\n{}", self.process.log_tail(80)),
        }
    }

    /// Waits until BIRD has a route for `prefix` and returns it.
    pub fn wait_route(&self, prefix: &str, timeout: Duration) -> String {
        wait_for(
            timeout,
            &format!("BIRD to have a route for {prefix}"),
            || self.route(prefix).ok_or_else(|| "no route".to_owned()),
        )
    }

    /// Waits until BIRD has no route for `prefix`.
    pub fn wait_no_route(&self, prefix: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("BIRD to drop its route for {prefix}"),
            || match self.route(prefix) {
                None => Ok(()),
                Some(route) => Err(route),
            },
        );
    }
}
