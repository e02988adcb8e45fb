//! The `holdfast` command: the daemon and its tools.

use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use holdfast::cli;

#[derive(Parser)]
#[command(
    name = "holdfast",
    version,
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
        #[arg(long)]
        config: PathBuf,
        /// On exit, withdraw every route and send Cease/Administrative
        /// Shutdown even when graceful restart is enabled.
        #[arg(long)]
        withdraw_on_exit: bool,
        /// Where the restart marker is kept (graceful restart's R bit).
        #[arg(long, value_name = "DIR", default_value = "/run/holdfast")]
        state_dir: PathBuf,
        /// Log filter (tracing EnvFilter syntax); also $HOLDFAST_LOG.
        #[arg(long, value_name = "FILTER")]
        log: Option<String>,
    },
    /// Validate a configuration file: exit 0, or exit 1 with PATH:LINE:COL: message lines.
    Check {
        #[arg(long)]
        config: PathBuf,
        /// Do not read the files named by password_file (check them only for
        /// form): for checking a config where its MD5 keys are not present.
        #[arg(long)]
        skip_password_files: bool,
    },
    /// Decode BGP messages given as hex, one per line, into JSON lines.
    Decode {
        /// AS numbers in AS_PATH and AGGREGATOR are 2 octets (no RFC 6793 capability).
        #[arg(long)]
        two_octet_as: bool,
        /// NLRI carry ADD-PATH path identifiers (RFC 7911), for these families.
        #[arg(long, value_delimiter = ',', value_parser = ["ipv4-unicast", "ipv6-unicast"])]
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
        /// The daemon's API address (`speaker.api`).
        #[arg(long, value_name = "ADDR", default_value = cli::http::DEFAULT_API)]
        api: String,
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
    },
    /// Why this node does or doesn't advertise VIP: exit 0 if it is advertised, 1 if not, 2 on errors.
    Explain {
        /// An IPv4 or IPv6 address (a /32 or /128 prefix is taken too).
        vip: String,
        /// The daemon's API address (`speaker.api`).
        #[arg(long, value_name = "ADDR", default_value = cli::http::DEFAULT_API)]
        api: String,
    },
    /// Planned withdrawal of this node's routes: GRACEFUL_SHUTDOWN (RFC 8326) first, withdrawn after graceful_shutdown_wait.
    Drain {
        /// The daemon's API address (`speaker.api`).
        #[arg(long, value_name = "ADDR", default_value = cli::http::DEFAULT_API)]
        api: String,
    },
    /// End a drain: this node's routes are advertised normally again.
    Undrain {
        /// The daemon's API address (`speaker.api`).
        #[arg(long, value_name = "ADDR", default_value = cli::http::DEFAULT_API)]
        api: String,
    },
}

/// Logs go to stderr, one line per event; `--log` or `$HOLDFAST_LOG`
/// (EnvFilter syntax) choose what, `info` by default.
fn init_logging(filter: Option<String>) {
    let filter = filter
        .or_else(|| std::env::var("HOLDFAST_LOG").ok())
        .unwrap_or_else(|| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("holdfast: log filter {filter:?}: {e}; using \"info\"");
        tracing_subscriber::EnvFilter::new("info")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&io::stderr()))
        .init();
}

fn run_daemon(opts: holdfast::daemon::Options, log: Option<String>) -> io::Result<i32> {
    init_logging(log);
    // One thread: a per-node daemon should cost the node as little as
    // possible, and nothing here needs more.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match rt.block_on(holdfast::daemon::run(opts)) {
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
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            config,
            withdraw_on_exit,
            state_dir,
            log,
        } => run_daemon(
            holdfast::daemon::Options {
                config,
                withdraw_on_exit,
                state_dir,
            },
            log,
        ),
        Command::Check {
            config,
            skip_password_files,
        } => cli::check::run(&config, skip_password_files, io::stdout().lock()),
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
        Command::Status { api, json } => cli::status::run(&api, json, io::stdout().lock()),
        Command::Explain { vip, api } => cli::explain::run(&api, &vip, io::stdout().lock()),
        Command::Drain { api } => cli::drain::run(&api, true, io::stdout().lock()),
        Command::Undrain { api } => cli::drain::run(&api, false, io::stdout().lock()),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("holdfast: {e}");
            ExitCode::from(2)
        }
    }
}
