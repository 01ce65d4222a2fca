//! The host: agentls as a language server. LSP comes in and feeds the port (`editor/`); the
//! port's effects go out as LSP, gated on what the client advertised.

mod agent_commands;
mod capabilities;
mod chat_commands;
mod chat_completion;
mod chat_list;
mod command_table;
mod commands;
mod convert;
mod effects;
mod file_args;
pub mod framing;
mod mcp_commands;
pub mod message_check;
mod outbox;
mod output;
mod prompt_context;
mod server;
mod session_tools;
#[cfg(unix)]
pub mod stdio;
mod transport;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_util::sync::PollSender;
use tower_lsp_server::{LspService, Server};

pub use capabilities::ClientFeatures;
use server::Backend;
pub use transport::UnreadProbe;
#[cfg(unix)]
pub use transport::pipe_unread;

/// How the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `shutdown` came before `exit` (or the end of input): exit code 0.
    Clean,
    /// The input ended or `exit` came without `shutdown`: exit code 1.
    Abrupt,
}

/// Frames waiting for the client before their writers wait.
const OUTPUT_QUEUE: usize = 16;

/// How long writing the chats' records may hold up the exit.
const CHATS_KEPT_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long stopping the agents may hold up the exit.
const AGENTS_STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Serves LSP on `input`/`output` until the client says `exit` or closes the input.
/// `output_unread` tells how many written bytes the client has not read yet, when the output
/// can tell ([`pipe_unread`] for a pipe): a reply is followed by nothing until it was read.
pub async fn serve(
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite,
    output_unread: Option<UnreadProbe>,
) -> Ending {
    let (editor, feed, effect_queue) = crate::editor::start();
    let feed_at_end = feed.clone();
    let session_tools = session_tools::SessionTools::install(&editor);
    let shutdown_requested = Arc::new(AtomicBool::new(false));
    let (ready, ready_rx) = watch::channel(None);
    let layers = server::initial_layers();
    let flag = Arc::clone(&shutdown_requested);
    let mcp = Arc::new(mcp_commands::McpSlot::default());
    let backend_mcp = Arc::clone(&mcp);
    let (agent_config, agent_config_rx) = watch::channel(crate::config::Config::default());
    let agents = crate::acp::Agents::new(editor.clone(), agent_config_rx);
    let agents_at_end = agents.clone();
    let pacing = transport::Pacing::default();
    let backend_pacing = pacing.clone();
    let (service, socket) = LspService::build(move |client| {
        tokio::spawn(effects::run(client, ready_rx, effect_queue));
        Backend {
            agents,
            agent_config,
            editor,
            feed,
            features: std::sync::OnceLock::new(),
            ready,
            config: std::sync::Mutex::new(layers),
            shutdown_requested: flag,
            mcp: backend_mcp,
            pacing: backend_pacing,
            new_conversations: std::sync::Mutex::default(),
        }
    })
    .custom_method("agentls/didChangeSelection", Backend::did_change_selection)
    .custom_method(
        "agentls/didChangeDiagnostics",
        Backend::did_change_diagnostics,
    )
    .finish();
    tracing::debug!(
        pipe = output_unread.is_some(),
        "after a reply, output waits until a client that needs it has read it (on a pipe) or a moment"
    );
    // One queue of whole frames to the client: tower-lsp's, and the input filter's answers to
    // messages it kept from tower-lsp (whose reader would stop at the first bad one).
    let (frames, queued) = tokio::sync::mpsc::channel(OUTPUT_QUEUE);
    let input = framing::Filtered::new(input, PollSender::new(frames.clone()));
    let server_output = transport::FrameSink::new(PollSender::new(frames));
    let output = transport::ReplyGap::new(Box::pin(output), output_unread, pacing);
    let serving = async {
        tokio::join!(
            Server::new(input, server_output, socket).serve(service),
            outbox::write_frames(queued, output),
        );
    };
    let terminated = tokio::select! {
        () = serving => false,
        () = mcp_commands::termination_requested() => true,
    };
    // Terminal agents must not find a lockfile of a server that is gone.
    mcp.stop();
    drop(session_tools);
    // However it ended, no agent (nor a command it runs) outlives us: after `shutdown` this finds
    // nothing left; after a crash of the editor or SIGTERM it stops them now.
    if tokio::time::timeout(AGENTS_STOP_LIMIT, agents_at_end.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("agents were still stopping when agentls exited");
    }
    // What the agents said that no chat document has got yet is kept in the chats' records.
    if tokio::time::timeout(CHATS_KEPT_LIMIT, feed_at_end.keep_chats())
        .await
        .is_err()
    {
        tracing::warn!("the chats' records were still being written when agentls exited");
    }
    if shutdown_requested.load(Ordering::SeqCst) && !terminated {
        Ending::Clean
    } else {
        Ending::Abrupt
    }
}
