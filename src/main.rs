//! The `agentls` command line: serve LSP on stdio (the default), `doctor`, `agents`, `demo`,
//! `demo-agent`, `mcp-bridge`, or `guard`.

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
    /// List the agents agentls knows by name: which the config uses, which are on this machine,
    /// how to get the rest.
    Agents,
    /// Speak ACP on stdin/stdout as a small offline demo agent (the default agent when none is
    /// configured; see README for its prompt language).
    DemoAgent,
    /// Carry an agent's MCP stdio to agentls's editor tools at URL (the token comes in
    /// AGENTLS_MCP_TOKEN); agentls offers this to agents that take no HTTP MCP servers.
    McpBridge {
        /// The server, `http://127.0.0.1:<port>/mcp`.
        url: String,
    },
    /// Once stdin ends, remove the discovery files named on it and end every process carrying
    /// the run's MARK (started by the server, which holds the other end: they go even when the
    /// server is killed).
    #[command(hide = true)]
    Guard {
        /// The run's mark in the environment of the processes it started.
        mark: String,
    },
    /// Walk through agentls's main job with the demo agent, no editor needed: prompt, streamed
    /// answer, review, accept, file written.
    Demo {
        /// Where to put the demo file (default: a new temporary directory).
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    survive_file_size_limit();
    let cli = Cli::parse();
    // The demo agent's stderr is its host's log: keep it quiet unless asked.
    let filter_var = match cli.command {
        Some(Command::DemoAgent) => "AGENTLS_DEMO_LOG",
        Some(Command::McpBridge { .. }) => "AGENTLS_BRIDGE_LOG",
        _ => "AGENTLS_LOG",
    };
    if let Err(e) = init_logging(cli.log_file.as_deref(), filter_var) {
        eprintln!("agentls: {e:#}");
        return ExitCode::FAILURE;
    }
    match cli.command.unwrap_or(Command::Serve) {
        Command::Agents => {
            print!("{}", agentls::doctor::known_agents_report());
            ExitCode::SUCCESS
        }
        Command::Doctor => {
            let report = agentls::doctor::report();
            print!("{}", report.text);
            if report.troubles == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Serve => serve(),
        Command::DemoAgent => demo_agent(),
        Command::McpBridge { url } => mcp_bridge(&url),
        Command::Guard { mark } => {
            agentls::guard::run(&mark);
            ExitCode::SUCCESS
        }
        Command::Demo { dir } => {
            let mut stdout = std::io::stdout();
            match run_async("demo", agentls::walkthrough::run(dir, &mut stdout)) {
                Some(Ok(())) => ExitCode::SUCCESS,
                Some(Err(e)) => {
                    eprintln!("agentls demo: {e:#}");
                    ExitCode::FAILURE
                }
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// Under a file-size limit (`ulimit -f`), a write beyond it fails with EFBIG and is reported like
/// a full disk, instead of SIGXFSZ ending agentls (its pending reviews with it, and a temporary
/// file left half-written). A handler that does nothing, not SIG_IGN: handlers are reset at
/// `exec`, so agents and the commands they run keep the default.
fn survive_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: sigaction(2) with a zeroed (valid) action whose handler is async-signal-safe (it
    // does nothing).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// Runs `work` on a fresh runtime; tasks still waiting on an editor or an agent afterwards do
/// not keep the process alive. `None` when the runtime cannot start (already reported).
///
/// All tasks run on the thread that runs the runtime. The server's work is a chain of small
/// steps (a message in, the state task, a message out), and each hop to a parked worker on
/// another core is a wake-up that costs more than the step. Measured on 2 cores against a
/// worker per core: the permission round trip 1.2 → 1.0 ms of agentls's own, the CPU for a
/// streamed reply 1.5× → 1.1–1.2× a bare reader's, peak memory in a flood 42 → 31–38 MB.
/// Blocking work still goes to tokio's blocking threads. The other commands are as plain, and
/// with no multi-threaded scheduler in the binary it does not load libm (the scheduler's one
/// `pow` was its only use): 0.3 MB less mapped.
fn run_async<T>(what: &str, work: impl std::future::Future<Output = T>) -> Option<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentls {what}: cannot start the async runtime: {e}");
            return None;
        }
    };
    let result = runtime.block_on(work);
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    Some(result)
}

/// How long ending what agents left running may hold up the exit.
const DESCENDANTS_END_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

fn serve() -> ExitCode {
    agentls::memory::limit_arenas();
    // Before any thread: the discovery files this server writes, and every process it starts,
    // go even if it is killed.
    agentls::guard::start();
    // On a pipe, the server can tell when the editor has read its replies.
    #[cfg(unix)]
    let unread = agentls::lsp::pipe_unread(std::io::stdout());
    #[cfg(not(unix))]
    let unread = None;
    // Daemons agents detach are reparented to this process, and go when it does: the serving
    // process is the one whose life bounds everything agents start.
    let ending = run_async("serve", async {
        agentls::acp::orphans::adopt();
        #[cfg(unix)]
        let (input, output) = {
            use agentls::lsp::stdio;
            let input = stdio::input(std::io::stdin(), tokio::io::stdin());
            (input, stdio::output(std::io::stdout(), tokio::io::stdout()))
        };
        #[cfg(not(unix))]
        let (input, output) = (tokio::io::stdin(), tokio::io::stdout());
        let ending = agentls::lsp::serve(input, output, unread).await;
        agentls::acp::orphans::end_descendants(DESCENDANTS_END_LIMIT).await;
        ending
    });
    tracing::info!(?ending, "exiting");
    match ending {
        Some(agentls::lsp::Ending::Clean) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

fn demo_agent() -> ExitCode {
    let result = run_async(
        "demo-agent",
        agentls::demo_agent::run(tokio::io::stdin(), DirectStdout(std::io::stdout())),
    );
    match result {
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("agentls demo-agent: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::FAILURE,
    }
}

fn mcp_bridge(url: &str) -> ExitCode {
    let var = agentls::editor::tool_grants::BRIDGE_TOKEN_VAR;
    let Ok(token) = std::env::var(var) else {
        eprintln!("agentls mcp-bridge: no token in {var}");
        return ExitCode::FAILURE;
    };
    let bridged = run_async(
        "mcp-bridge",
        agentls::mcp::bridge::run(url, &token, tokio::io::stdin(), tokio::io::stdout()),
    );
    match bridged {
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(e)) => {
            eprintln!("agentls mcp-bridge: {e}");
            ExitCode::FAILURE
        }
        None => ExitCode::FAILURE,
    }
}

/// Logs go to stderr (never stdout: that is the protocol) and, if asked, to a file. `filter_var`
/// sets the filter of both; without it the file gets `info`, and so does stderr on a terminal.
/// On a pipe stderr gets `warn`: editors show every stderr line of a server as an error (Helix
/// and Neovim log it at ERROR level), so routine news would read as failures there.
fn init_logging(log_file: Option<&std::path::Path>, filter_var: &str) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    use tracing_subscriber::Layer as _;
    let filter = |default: &str| {
        EnvFilter::try_from_env(filter_var).unwrap_or_else(|_| EnvFilter::new(default))
    };
    let stderr_default = if std::io::stderr().is_terminal() {
        "info"
    } else {
        "warn"
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(filter(stderr_default));
    let file = match log_file {
        Some(path) => {
            let file = agentls::private_files::open_to_append(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::sync::Mutex::new(file))
                    .with_ansi(false)
                    .with_filter(filter("info")),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init()
        .context("cannot install the logger")
}

/// The process's stdout, written in place: a write blocks its thread only while the pipe to
/// agentls is full. tokio's `Stdout` hands every write to a blocking thread instead (three per
/// line here), which made a flood of 100,000 chunks take 20 s rather than well under one.
struct DirectStdout(std::io::Stdout);

impl tokio::io::AsyncWrite for DirectStdout {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(std::io::Write::write(&mut self.get_mut().0, buf))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(std::io::Write::flush(&mut self.get_mut().0))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}
