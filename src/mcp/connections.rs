//! Who may hold a connection to a loopback port: at most [`Limits::connections`] at once (more
//! are closed at once, with a log line), and a connection none of whose requests has passed the
//! guard yet is closed when it goes [`Limits::idle`] without a byte either way or has not passed
//! it within [`Limits::handshake`]. Without this anyone on the machine could hold a thousand
//! silent sockets, no token needed, until agentls runs out of file descriptors. A connection
//! whose request passed the guard ([`Connection::authenticated`]) stays as long as its client
//! likes. Checking the token is `guard`'s business, not this module's.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The environment variable tests set to shorten the limits (`connections=8,handshake_ms=1000,
/// idle_ms=300`); read once. It can only tighten them.
const LIMITS_VAR: &str = "AGENTLS_TEST_MCP_LIMITS";

/// How long and how many connections may wait for their first request to pass the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once on one port, authenticated or not.
    pub connections: usize,
    /// From accepting a connection until a request of it must have passed the guard.
    pub handshake: Duration,
    /// How long a connection that has not passed the guard may go without a byte either way.
    pub idle: Duration,
}

impl Limits {
    /// What a port allows: room for many agents, seconds for a real client's first request.
    pub const DEFAULT: Self = Self {
        connections: 64,
        handshake: Duration::from_secs(10),
        idle: Duration::from_secs(5),
    };

    /// The limits in force: [`Limits::DEFAULT`], tightened by `AGENTLS_TEST_MCP_LIMITS`.
    pub fn configured() -> Self {
        static CONFIGURED: OnceLock<Limits> = OnceLock::new();
        *CONFIGURED.get_or_init(|| match std::env::var(LIMITS_VAR) {
            Ok(spec) => Self::DEFAULT.tightened(&spec),
            Err(_) => Self::DEFAULT,
        })
    }

    /// These limits, with every `name=value` of `spec` that is tighter applied.
    fn tightened(mut self, spec: &str) -> Self {
        for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
            let parsed = part
                .split_once('=')
                .and_then(|(name, value)| Some((name.trim(), value.trim().parse::<u64>().ok()?)));
            match parsed {
                Some(("connections", n)) => {
                    self.connections = self.connections.min(n.max(1) as usize)
                }
                Some(("handshake_ms", ms)) => {
                    self.handshake = self.handshake.min(Duration::from_millis(ms))
                }
                Some(("idle_ms", ms)) => self.idle = self.idle.min(Duration::from_millis(ms)),
                _ => tracing::warn!("{LIMITS_VAR}: ignored {part:?}"),
            }
        }
        self
    }
}

/// One accepted connection, as request handlers see it (`ConnectInfo<Connection>`).
#[derive(Debug, Clone, Default)]
pub struct Connection(Arc<AtomicBool>);

impl Connection {
    /// A request of this connection passed the guard: it is no longer timed.
    pub fn authenticated(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_authenticated(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Connected<IncomingStream<'_, LimitedListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, LimitedListener>) -> Self {
        stream.io().connection.clone()
    }
}

/// A loopback listener that applies [`Limits`] to what it accepts.
#[derive(Debug)]
pub struct LimitedListener {
    socket: TcpListener,
    port: u16,
    limits: Limits,
    slots: Arc<Semaphore>,
}

impl LimitedListener {
    /// Accepts from `socket` (bound on `port`) within `limits`.
    pub fn new(socket: TcpListener, port: u16, limits: Limits) -> Self {
        Self {
            socket,
            port,
            limits,
            slots: Arc::new(Semaphore::new(limits.connections)),
        }
    }
}

impl Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LimitedStream, SocketAddr) {
        loop {
            let (stream, peer) = Listener::accept(&mut self.socket).await;
            match Arc::clone(&self.slots).try_acquire_owned() {
                Ok(slot) => return (LimitedStream::new(stream, slot, self.limits), peer),
                Err(_) => tracing::warn!(
                    port = self.port,
                    "refused a connection: {} are open already (the most a port takes)",
                    self.limits.connections
                ),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

/// An accepted socket holding its slot, closed when its deadline passes before it authenticated.
#[derive(Debug)]
pub struct LimitedStream {
    stream: TcpStream,
    connection: Connection,
    _slot: OwnedSemaphorePermit,
    idle: Duration,
    handshake_by: Instant,
    /// The next moment it is closed unless it authenticated; `None` once it has.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl LimitedStream {
    fn new(stream: TcpStream, slot: OwnedSemaphorePermit, limits: Limits) -> Self {
        let now = Instant::now();
        let handshake_by = now + limits.handshake;
        Self {
            stream,
            connection: Connection::default(),
            _slot: slot,
            idle: limits.idle,
            handshake_by,
            deadline: Some(Box::pin(tokio::time::sleep_until(
                handshake_by.min(now + limits.idle),
            ))),
        }
    }

    /// Whether its time is up (registering for the deadline when it is not).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.connection.is_authenticated() {
            self.deadline = None;
        }
        let Some(deadline) = self.deadline.as_mut() else {
            return false;
        };
        if deadline.as_mut().poll(cx).is_pending() {
            return false;
        }
        let why = if Instant::now() >= self.handshake_by {
            "no request with the token in time"
        } else {
            "idle before presenting the token"
        };
        tracing::debug!("closed a connection: {why}");
        true
    }

    /// Bytes moved: an unauthenticated connection's idle time starts again.
    fn active(&mut self) {
        if let Some(deadline) = self.deadline.as_mut() {
            let next = self.handshake_by.min(Instant::now() + self.idle);
            deadline.as_mut().reset(next);
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "connection closed before presenting the token",
    )
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        // What arrived counts before the clock does: a busy server is no reason to drop a client.
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.active();
                Poll::Ready(Ok(()))
            }
            read => read,
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write(cx, data) {
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(timed_out())),
            Poll::Ready(Ok(n)) if n > 0 => {
                this.active();
                Poll::Ready(Ok(n))
            }
            written => written,
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_can_only_tighten_the_limits() {
        let tight = Limits::DEFAULT.tightened("connections=8, idle_ms=300,handshake_ms=1000");
        assert_eq!(
            tight,
            Limits {
                connections: 8,
                handshake: Duration::from_secs(1),
                idle: Duration::from_millis(300),
            }
        );
        let loose = Limits::DEFAULT.tightened("connections=100000,idle_ms=999999,bogus=1,x");
        assert_eq!(loose, Limits::DEFAULT);
        assert_eq!(Limits::DEFAULT.tightened("connections=0").connections, 1);
    }
}
