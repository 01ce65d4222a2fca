//! The client side of one ACP connection: every request and notification an agent may send,
//! routed to its handler. Handlers run on the SDK's dispatch loop, so anything that waits (the
//! editor, the disk, a human) is spawned and answered later through its `Responder`. Session
//! updates mostly come straight from the reader (`transport::Direct`); the handler here takes
//! those that come before the connection is initialized.

use std::future::Future;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, ReadTextFileRequest, ReleaseTerminalRequest,
    RequestPermissionRequest, SessionNotification, TerminalOutputRequest,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, Client, ConnectTo, Error, JsonRpcResponse, UntypedMessage, on_receive_notification,
    on_receive_request,
};
use tokio::sync::oneshot;

use super::link::AgentLink;
use super::transport::DispatchMark;
use super::{fs, permission, terminal, updates};

/// A connection being driven by its own task.
#[derive(Debug)]
pub struct Connection {
    /// The handle for sending to the agent.
    pub cx: ConnectionTo<Agent>,
    /// Ends the connection (closing the agent's stdin) when sent or dropped.
    pub stop: oneshot::Sender<()>,
}

/// Connects to an agent over `transport`, serving its requests with `link`. Resolves once the
/// connection is up, or `None` if it ended before that.
pub async fn connect(
    link: Arc<AgentLink>,
    transport: impl ConnectTo<Client> + 'static,
) -> Option<Connection> {
    let (cx_tx, cx_rx) = oneshot::channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let builder = Client
        .v1()
        .name("agentls")
        .on_receive_notification(
            {
                let dispatched = Arc::clone(&link.dispatched);
                async move |mark: DispatchMark, _cx: ConnectionTo<Agent>| {
                    dispatched.reached(mark.mark);
                    Ok(())
                }
            },
            on_receive_notification!(),
        )
        .on_receive_notification(
            {
                let link = Arc::clone(&link);
                async move |note: SessionNotification, _cx: ConnectionTo<Agent>| {
                    updates::apply(&link, note);
                    Ok(())
                }
            },
            on_receive_notification!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: ReadTextFileRequest, responder, cx: ConnectionTo<Agent>| {
                    let link = Arc::clone(&link);
                    answer_later(&cx, responder, async move { fs::read(&link, request).await })
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: WriteTextFileRequest, responder, cx: ConnectionTo<Agent>| {
                    let link = Arc::clone(&link);
                    answer_later(&cx, responder, async move { fs::write(&link, request).await })
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: RequestPermissionRequest,
                            responder,
                            cx: ConnectionTo<Agent>| {
                    permission::handle(&link, request, responder, &cx)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: CreateTerminalRequest,
                            responder,
                            cx: ConnectionTo<Agent>| {
                    let link = Arc::clone(&link);
                    answer_later(&cx, responder, async move {
                        terminal::create(&link, request).await
                    })
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: TerminalOutputRequest, responder: Responder<_>, _cx| {
                    responder.respond_with_result(terminal::output(&link, request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: WaitForTerminalExitRequest,
                            responder,
                            cx: ConnectionTo<Agent>| {
                    let link = Arc::clone(&link);
                    answer_later(&cx, responder, async move {
                        terminal::wait_for_exit(&link, request).await
                    })
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: KillTerminalRequest, responder: Responder<_>, _cx| {
                    responder.respond_with_result(terminal::kill(&link, request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let link = Arc::clone(&link);
                async move |request: ReleaseTerminalRequest, responder: Responder<_>, _cx| {
                    responder.respond_with_result(terminal::release(&link, request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            {
                let agent = link.agent.clone();
                async move |note: UntypedMessage, _cx: ConnectionTo<Agent>| {
                    if !note.method.starts_with("$/") {
                        tracing::debug!(agent = %agent, method = %note.method, "notification ignored");
                    }
                    Ok(())
                }
            },
            on_receive_notification!(),
        );
    tokio::spawn(
        builder.connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let _ = cx_tx.send(cx.clone());
            tokio::select! {
                _ = stop_rx => {}
                _ = cx.incoming_closed() => {}
            }
            Ok(())
        }),
    );
    let cx = cx_rx.await.ok()?;
    Some(Connection { cx, stop })
}

/// Runs `work` off the dispatch loop and answers with its result.
fn answer_later<T: JsonRpcResponse + Send + 'static>(
    cx: &ConnectionTo<Agent>,
    responder: Responder<T>,
    work: impl Future<Output = Result<T, Error>> + Send + 'static,
) -> Result<(), Error> {
    cx.spawn(async move {
        if let Err(e) = responder.respond_with_result(work.await) {
            tracing::debug!("answer not delivered: {e}");
        }
        Ok(())
    })
}
