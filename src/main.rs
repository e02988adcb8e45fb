//! The `holdfast` command: the daemon and its tools.

use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use holdfast::cli;
use holdfast::logging::Format;

#[derive(Parser)]
#[command(
    name = "holdfast",
    version = holdfast::build_info::VERSION_LINE,
    about = "A BGP speaker for Kubernetes nodes that keeps Service VIP routes steady"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The daemon: keeps this node's VIPs advertised to its peers.
    Run {
        /// The rack's TOML config; reloaded on SIGHUP or when it changes.
        #[arg(long, value_name = "PATH")]
        config: PathBuf,
        /// On exit, withdraw every route and send Cease/Administrative
        /// Shutdown even when graceful restart is enabled.
        #[arg(long)]
        withdraw_on_exit: bool,
        /// This daemon's state directory: the API's Unix socket (api.sock:
        /// drain, undrain), the restart marker (graceful restart's R bit)
        /// and a lock that keeps it to one daemon. Made owner-only if
        /// missing.
        #[arg(long, value_name = "DIR", default_value = holdfast::api::local::DEFAULT_STATE_DIR)]
        state_dir: PathBuf,
        /// Log filter (tracing EnvFilter syntax); also $HOLDFAST_LOG.
        #[arg(long, value_name = "FILTER")]
        log: Option<String>,
        /// Log lines as plain text or as one JSON object per line.
        #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
        log_format: String,
    },
    /// Validate a configuration file: exit 0, or exit 1 with PATH:LINE:COL: message lines; warnings (PATH:LINE:COL: warning: message) exit 0 unless --deny-warnings.
    Check {
        /// The TOML config to check (and, for a file source, its VIP file);
        /// `-` reads it from standard input (named `<stdin>` in messages).
        #[arg(long, value_name = "PATH")]
        config: PathBuf,
        /// Do not read the files named by password_file and api_token_file
        /// (check them only for form): for checking a config where its keys
        /// are not present.
        #[arg(long)]
        skip_password_files: bool,
        /// Exit 1 when there are warnings, as for errors (for CI).
        #[arg(long)]
        deny_warnings: bool,
    },
    /// This build: version, commit, build date, target, C library, allocator and features (also --version).
    Version {
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Decode BGP messages given as hex, one per line, into JSON lines.
    Decode {
        /// AS numbers in AS_PATH and AGGREGATOR are 2 octets (no RFC 6793 capability).
        #[arg(long)]
        two_octet_as: bool,
        /// NLRI carry ADD-PATH path identifiers (RFC 7911), for these families.
        #[arg(long, value_name = "FAMILIES", value_delimiter = ',', value_parser = ["ipv4-unicast", "ipv6-unicast"])]
        add_path: Vec<String>,
        /// Accept messages up to 65535 octets (RFC 8654).
        #[arg(long)]
        extended_message: bool,
        /// Re-encode each message; exit 1 if one does not decode or re-encodes differently.
        #[arg(long)]
        verify: bool,
    },
    /// Peers and routes of a running daemon, from its HTTP API.
    Status {
        #[command(flatten)]
        at: ReadAt,
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
    },
    /// Why this node does or doesn't advertise VIP: exit 0 if it is advertised, 1 if not, 2 on errors.
    Explain {
        /// An IPv4 or IPv6 address (a /32 or /128 prefix is taken too).
        vip: String,
        #[command(flatten)]
        at: ReadAt,
        /// Print the API's JSON as it is (the exit code is the same).
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script to stdout.
    ///
    /// bash: `holdfast completions bash > /etc/bash_completion.d/holdfast`;
    /// zsh: into a directory of $fpath as `_holdfast`; fish: into
    /// ~/.config/fish/completions/holdfast.fish.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page holdfast(1) to stdout, or write it and one page
    /// per command (holdfast-run(1), ...) into a directory.
    ///
    /// `holdfast man | man -l -` reads it at once;
    /// `holdfast man --dir /usr/local/share/man/man1` installs them.
    Man {
        /// Write holdfast.1 and holdfast-COMMAND.1 into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Planned withdrawal of this node's routes: GRACEFUL_SHUTDOWN (RFC 8326) first, withdrawn after graceful_shutdown_wait.
    Drain {
        #[command(flatten)]
        at: ChangeAt,
    },
    /// End a drain: this node's routes are advertised normally again.
    Undrain {
        #[command(flatten)]
        at: ChangeAt,
    },
}

/// Where `status` and `explain` read: `speaker.api` over TCP by default,
/// or the daemon's Unix socket.
#[derive(clap::Args)]
struct ReadAt {
    /// The daemon's API address (`speaker.api`; default 127.0.0.1:9179).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["socket", "state_dir"])]
    api: Option<String>,
    /// Ask on the daemon's Unix socket at PATH instead of TCP.
    #[arg(long, value_name = "PATH", conflicts_with = "state_dir")]
    socket: Option<PathBuf>,
    /// Ask on the Unix socket of the daemon run with this --state-dir (DIR/api.sock).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl ReadAt {
    fn target(self) -> cli::http::Target {
        match (self.socket, self.state_dir) {
            (Some(socket), _) => cli::http::Target::Socket(socket),
            (None, Some(dir)) => cli::http::Target::Socket(holdfast::api::local::socket_path(&dir)),
            (None, None) => cli::http::Target::Tcp {
                api: self.api.unwrap_or_else(|| cli::http::DEFAULT_API.into()),
                token: None,
            },
        }
    }
}

/// Where `drain` and `undrain` go: the daemon's Unix socket by default
/// (/run/holdfast/api.sock), or TCP with the token.
#[derive(clap::Args)]
struct ChangeAt {
    /// The state directory of the daemon (its --state-dir; default /run/holdfast): the call goes to DIR/api.sock.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["socket", "api"])]
    state_dir: Option<PathBuf>,
    /// The daemon's Unix socket, when not in a state directory's usual place.
    #[arg(long, value_name = "PATH", conflicts_with = "api")]
    socket: Option<PathBuf>,
    /// Over TCP to the daemon's API address (`speaker.api`) instead of the socket: needs the token of speaker.api_token_file (--token-file, or $HOLDFAST_API_TOKEN).
    #[arg(long, value_name = "ADDR")]
    api: Option<String>,
    /// With --api: the file holding the token (else $HOLDFAST_API_TOKEN).
    #[arg(long, value_name = "PATH", requires = "api")]
    token_file: Option<PathBuf>,
}

impl ChangeAt {
    fn target(self) -> io::Result<cli::http::Target> {
        Ok(match (self.api, self.socket, self.state_dir) {
            (Some(api), _, _) => cli::http::Target::Tcp {
                api,
                token: cli::drain::token(
                    self.token_file.as_deref(),
                    std::env::var_os(cli::drain::TOKEN_ENV),
                )?,
            },
            (None, Some(socket), _) => cli::http::Target::Socket(socket),
            (None, None, dir) => cli::http::Target::Socket(holdfast::api::local::socket_path(
                &dir.unwrap_or_else(|| holdfast::api::local::DEFAULT_STATE_DIR.into()),
            )),
        })
    }
}

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
