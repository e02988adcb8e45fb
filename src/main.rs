//! The `holdfast` command: the daemon and its tools.

use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use holdfast::cli;
use holdfast::cli::args::{Cli, Command};
use holdfast::report::logging::Format;

/// `holdfast completions SHELL`.
fn version(json: bool, out: &mut impl io::Write) -> io::Result<i32> {
    if json {
        let text = serde_json::to_string(&holdfast::build_info::get()).map_err(io::Error::other)?;
        writeln!(out, "{text}")?;
    } else {
        out.write_all(holdfast::build_info::text().as_bytes())?;
    }
    Ok(0)
}

fn completions(shell: clap_complete::Shell, out: &mut impl io::Write) -> io::Result<i32> {
    clap_complete::generate(shell, &mut Cli::command(), "holdfast", out);
    Ok(0)
}

/// `holdfast man [--dir DIR]`.
fn man(dir: Option<PathBuf>, out: &mut impl io::Write) -> io::Result<i32> {
    let cmd = Cli::command();
    match dir {
        None => clap_mangen::Man::new(cmd).render(out)?,
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            clap_mangen::generate_to(cmd, &dir)?;
        }
    }
    Ok(0)
}

/// Logs go to stderr, one line per event (text, or a JSON object with
/// `--log-format json`); `--log` or `$HOLDFAST_LOG` (EnvFilter syntax)
/// choose what, `info` by default.
fn init_logging(filter: Option<String>, format: Format) {
    let filter = filter
        .or_else(|| std::env::var("HOLDFAST_LOG").ok())
        .unwrap_or_else(|| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("holdfast: log filter {filter:?}: {e}; using \"info\"");
        tracing_subscriber::EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    match format {
        Format::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&io::stderr()))
            .init(),
        // Fields at the top level next to `timestamp`, `level`, `target`
        // and `message`, so that log pipelines index them as they are.
        Format::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

fn run_daemon(
    opts: holdfast::daemon::Options,
    log: Option<String>,
    format: Format,
) -> io::Result<i32> {
    init_logging(log, format);
    // One thread: a per-node daemon should cost the node as little as
    // possible, and nothing here needs more.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(holdfast::daemon::run(opts));
    // A read of a file system that hangs keeps its blocking thread for as
    // long as it hangs (the daemon gave up waiting for it): the exit does
    // not wait for it either.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => Ok(0),
        Err(e) => {
            // Config problems are `PATH:LINE:COL: message` lines already,
            // as `holdfast check` prints them.
            eprintln!("{e}");
            Ok(1)
        }
    }
}

fn main() -> ExitCode {
    // Before anything is allocated: glibc's moving mmap threshold would keep
    // a bulk load's transient buffers resident (holdfast_sockopt::malloc).
    holdfast_sockopt::malloc::fix_mmap_threshold();
    holdfast_sockopt::malloc::single_arena();
    // `--version` prints what `holdfast version` does; `-V` one line. clap
    // writes the program's name first, so the text goes without it.
    let text = holdfast::build_info::text();
    let long_version: &'static str = Box::leak(
        text.strip_prefix("holdfast ")
            .unwrap_or(&text)
            .to_owned()
            .into_boxed_str(),
    );
    let cli = match Cli::command()
        .long_version(long_version)
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Run {
            config,
            withdraw_on_exit,
            state_dir,
            log,
            log_format,
        } => run_daemon(
            holdfast::daemon::Options {
                config,
                withdraw_on_exit,
                state_dir,
            },
            log,
            log_format.parse().unwrap_or_default(),
        ),
        Command::Check {
            config,
            skip_password_files,
            deny_warnings,
        } => cli::check::run(
            &config,
            cli::check::Options {
                skip_password_files,
                deny_warnings,
            },
            io::stdin().lock(),
            io::stdout().lock(),
        ),
        Command::Decode {
            two_octet_as,
            add_path,
            extended_message,
            verify,
        } => {
            let mut context = if two_octet_as {
                bgp_proto::Context::two_octet_as()
            } else {
                bgp_proto::Context::default()
            };
            for f in add_path {
                context = context.with_add_path(if f == "ipv6-unicast" {
                    bgp_proto::Family::IPV6_UNICAST
                } else {
                    bgp_proto::Family::IPV4_UNICAST
                });
            }
            if extended_message {
                context = context.with_extended_messages();
            }
            let opts = cli::decode::Options { context, verify };
            cli::decode::run(
                io::stdin().lock(),
                BufWriter::new(io::stdout().lock()),
                io::stderr().lock(),
                opts,
            )
        }
        Command::Version { json } => version(json, &mut io::stdout().lock()),
        Command::Status { at, json } => cli::status::run(&at.target(), json, io::stdout().lock()),
        Command::Explain { vip, at, json } => {
            cli::explain::run(&at.target(), &vip, json, io::stdout().lock())
        }
        Command::Completions { shell } => completions(shell, &mut io::stdout().lock()),
        Command::Man { dir } => man(dir, &mut io::stdout().lock()),
        Command::Drain { at } => at
            .target()
            .and_then(|t| cli::drain::run(&t, true, io::stdout().lock())),
        Command::Undrain { at } => at
            .target()
            .and_then(|t| cli::drain::run(&t, false, io::stdout().lock())),
        Command::Route { action } => cli::route::run(action, io::stdout().lock()),
        Command::Cluster { action } => match action {
            cli::args::ClusterAction::Status { kubeconfig, json } => {
                cli::cluster::status(kubeconfig.as_deref(), json, io::stdout().lock())
            }
            cli::args::ClusterAction::Explain {
                vip,
                kubeconfig,
                json,
            } => cli::cluster::explain_command(
                kubeconfig.as_deref(),
                &vip,
                json,
                io::stdout().lock(),
            ),
        },
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("holdfast: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command and every option says what it is for: `--help`, the
    /// man page and the completions all show it.
    #[test]
    fn every_command_and_option_has_help() {
        let root = Cli::command();
        root.clone().debug_assert();
        let mut missing = Vec::new();
        let mut walked = 0;
        let mut stack = vec![(String::from("holdfast"), root)];
        while let Some((path, cmd)) = stack.pop() {
            walked += 1;
            if path != "holdfast" && cmd.get_about().is_none() {
                missing.push(format!("{path}: the command has no about"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                // clap's own --help and --version carry their text.
                if id == "help" || id == "version" {
                    continue;
                }
                if arg
                    .get_help()
                    .is_none_or(|h| h.to_string().trim().is_empty())
                {
                    missing.push(format!("{path}: {id} has no help"));
                }
            }
            for sub in cmd.get_subcommands() {
                stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
            }
        }
        assert!(walked >= 8, "walked only {walked} commands");
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
