//! The command tree of `holdfast`, as clap builds it: the binary parses
//! with it, and `holdfast man`, `holdfast completions` and the generated
//! CLI reference (docs/src/reference/cli.md) are made from it.

use std::io;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "holdfast",
    version = crate::build_info::VERSION_LINE,
    about = "A BGP speaker for Kubernetes nodes that keeps Service VIP routes steady"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
        /// and a lock that keeps it to one daemon: a second `run` with the
        /// same directory asks the running one to hand over (handoff.sock)
        /// and takes its place. Made owner-only if missing.
        #[arg(long, value_name = "DIR", default_value = crate::api::local::DEFAULT_STATE_DIR)]
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
    /// Runtime routes: node-local prefixes announced and withdrawn at run time, kept across restarts in the state directory.
    Route {
        #[command(subcommand)]
        action: RouteAction,
    },
    /// The whole cluster's view, from every node's BGPNodeStatus (also `kubectl holdfast cluster …` with the binary installed as kubectl-holdfast).
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
}

/// `holdfast cluster …`.
#[derive(clap::Subcommand)]
pub enum ClusterAction {
    /// A row per node: sessions up, routes advertised and withheld, drain, source, last change.
    Status {
        /// The kubeconfig to read the objects with (default: $KUBECONFIG, ~/.kube/config, or the pod's service account).
        #[arg(long, value_name = "PATH")]
        kubeconfig: Option<PathBuf>,
        /// Print the objects' statuses as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Which nodes announce VIP to which peers, which do not and why, its last change on each; exit 0 when some node announces it, 1 when none does.
    Explain {
        /// An IPv4 or IPv6 address (a /32 or /128 prefix is taken too).
        vip: String,
        /// The kubeconfig to read the objects with (default: $KUBECONFIG, ~/.kube/config, or the pod's service account).
        #[arg(long, value_name = "PATH")]
        kubeconfig: Option<PathBuf>,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `holdfast route …`.
#[derive(clap::Subcommand)]
pub enum RouteAction {
    /// Announce PREFIX (an address is its host route), under an advertisement, with the attributes it lets through (allow_service_attributes).
    Announce {
        /// `198.51.100.0/24`, `198.51.100.10`, `2001:db8::/64`.
        prefix: String,
        /// The [[advertisement]] it goes out under (default: the first).
        #[arg(long, value_name = "NAME")]
        advertisement: Option<String>,
        /// A community to add (`65000:100`, `no-export`); repeat for more.
        #[arg(long = "community", value_name = "C")]
        communities: Vec<String>,
        /// A large community to add (`65000:1:2`); repeat for more.
        #[arg(long = "large-community", value_name = "L")]
        large_communities: Vec<String>,
        /// LOCAL_PREF (iBGP only).
        #[arg(long, value_name = "N")]
        local_pref: Option<u32>,
        /// MULTI_EXIT_DISC.
        #[arg(long, value_name = "N")]
        med: Option<u32>,
        /// Our AS this many more times in the AS_PATH (eBGP only).
        #[arg(long, value_name = "N")]
        as_path_prepend: Option<u8>,
        #[command(flatten)]
        at: ChangeAt,
    },
    /// Withdraw the runtime route of PREFIX.
    Withdraw {
        /// The prefix as announced (`198.51.100.0/24`; an address is its host route).
        prefix: String,
        #[command(flatten)]
        at: ChangeAt,
    },
    /// List the runtime routes.
    List {
        /// Print the API's JSON as it is.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: ChangeAt,
    },
}

/// Where `status` and `explain` read: `speaker.api` over TCP by default,
/// or the daemon's Unix socket.
#[derive(clap::Args)]
pub struct ReadAt {
    /// The daemon's API address (`speaker.api`; default 127.0.0.1:9179).
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["socket", "state_dir"])]
    pub api: Option<String>,
    /// Ask on the daemon's Unix socket at PATH instead of TCP.
    #[arg(long, value_name = "PATH", conflicts_with = "state_dir")]
    pub socket: Option<PathBuf>,
    /// Ask on the Unix socket of the daemon run with this --state-dir (DIR/api.sock).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl ReadAt {
    pub fn target(self) -> super::http::Target {
        match (self.socket, self.state_dir) {
            (Some(socket), _) => super::http::Target::Socket(socket),
            (None, Some(dir)) => super::http::Target::Socket(crate::api::local::socket_path(&dir)),
            (None, None) => super::http::Target::Tcp {
                api: self.api.unwrap_or_else(|| super::http::DEFAULT_API.into()),
                token: None,
            },
        }
    }
}

/// Where `drain` and `undrain` go: the daemon's Unix socket by default
/// (/run/holdfast/api.sock), or TCP with the token.
#[derive(clap::Args)]
pub struct ChangeAt {
    /// The state directory of the daemon (its --state-dir; default /run/holdfast): the call goes to DIR/api.sock.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["socket", "api"])]
    pub state_dir: Option<PathBuf>,
    /// The daemon's Unix socket, when not in a state directory's usual place.
    #[arg(long, value_name = "PATH", conflicts_with = "api")]
    pub socket: Option<PathBuf>,
    /// Over TCP to the daemon's API address (`speaker.api`) instead of the socket: needs the token of speaker.api_token_file (--token-file, or $HOLDFAST_API_TOKEN).
    #[arg(long, value_name = "ADDR")]
    pub api: Option<String>,
    /// With --api: the file holding the token (else $HOLDFAST_API_TOKEN).
    #[arg(long, value_name = "PATH", requires = "api")]
    pub token_file: Option<PathBuf>,
}

impl ChangeAt {
    pub fn target(self) -> io::Result<super::http::Target> {
        Ok(match (self.api, self.socket, self.state_dir) {
            (Some(api), _, _) => super::http::Target::Tcp {
                api,
                token: super::drain::token(
                    self.token_file.as_deref(),
                    std::env::var_os(super::drain::TOKEN_ENV),
                )?,
            },
            (None, Some(socket), _) => super::http::Target::Socket(socket),
            (None, None, dir) => super::http::Target::Socket(crate::api::local::socket_path(
                &dir.unwrap_or_else(|| crate::api::local::DEFAULT_STATE_DIR.into()),
            )),
        })
    }
}

/// The whole command tree, as `holdfast` parses it.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}
