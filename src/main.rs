//! The `agentls` command line: serve LSP on stdio (the default), or `doctor`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// A language server that brings coding agents into any editor that speaks LSP.
#[derive(Debug, Parser)]
#[command(name = "agentls", version, about)]
struct Cli {
    /// Also write logs to this file (level from AGENTLS_LOG, default `info`).
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// Serve on stdio (the default; accepted because some clients always pass it).
    #[arg(long, hide = true)]
    stdio: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the Language Server Protocol on stdin/stdout (what editors run).
    Serve,
    /// Print the config agentls loads, where from, and whether each agent can be started.
    Doctor,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_logging(cli.log_file.as_deref()) {
        eprintln!("agentls: {e:#}");
        return ExitCode::FAILURE;
    }
    match cli.command.unwrap_or(Command::Serve) {
        Command::Doctor => {
            print!("{}", agentls::doctor::report());
            ExitCode::SUCCESS
        }
        Command::Serve => serve(),
    }
}

fn serve() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentls: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // On a pipe, the server can tell when the editor has read its replies.
    #[cfg(unix)]
    let unread = agentls::lsp::pipe_unread(std::io::stdout());
    #[cfg(not(unix))]
    let unread = None;
    let ending = runtime.block_on(agentls::lsp::serve(
        tokio::io::stdin(),
        tokio::io::stdout(),
        unread,
    ));
    tracing::info!(?ending, "exiting");
    // Tasks still waiting on the editor or an agent must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match ending {
        agentls::lsp::Ending::Clean => ExitCode::SUCCESS,
        agentls::lsp::Ending::Abrupt => ExitCode::FAILURE,
    }
}

/// Logs go to stderr (never stdout: that is the protocol) and, if asked, to a file.
fn init_logging(log_file: Option<&std::path::Path>) -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_env("AGENTLS_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let file = match log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::sync::Mutex::new(file))
                    .with_ansi(false),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file)
        .try_init()
        .context("cannot install the logger")
}
