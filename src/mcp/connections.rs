//! Who may hold a connection to a loopback port. Anyone on the machine can connect, so nobody
//! without the token may take a place a client with it needs:
//!
//! - A connection that has not presented the token yet *waits*: it has [`Limits::handshake`]
//!   from its accept to get a request through the guard, or it is closed. Waiting places are
//!   counted per local account (the uid owning the client's socket, see [`owner`]): one account
//!   has at most [`Limits::waiting_per_account`] of them and all together
//!   [`Limits::waiting`], so another account's reconnect loop fills only its own share.
//! - A request that passed the guard *admits* its connection ([`Connection::admit`]): it then
//!   holds one of the port's [`Limits::connections`] slots, which waiting connections never
//!   take, and stays as long as its client likes, between messages. A client that stops in the
//!   middle of a WebSocket frame (or of a fragmented message) or of an HTTP request (its head, or
//!   a body shorter than announced) for [`Limits::stall`] is closed, as it holds a reader of the
//!   server that waits for bytes that never come; so is one that trickles a request or frame, a
//!   byte now and then, for longer than [`Limits::message`].
//!
//! Refusals are logged through `refusals` (a line per kind per minute). Checking the token is
//! `guard`'s business, not this module's.

mod owner;
mod requests;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use super::guard::Refusal;
use super::refusals;
use requests::RequestScan;

/// The environment variable tests set to shorten the limits (`connections=8,handshake_ms=300,
/// waiting_per_account=4,waiting=16,stall_ms=300,message_ms=1000`); read once. It can only
/// tighten them.
const LIMITS_VAR: &str = "AGENTLS_TEST_MCP_LIMITS";

/// How many connections a port holds, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Admitted connections (a request presented the token) open at once on one port.
    pub connections: usize,
    /// Connections of one local account waiting to present the token, on one port.
    pub waiting_per_account: usize,
    /// Connections of all accounts waiting to present the token, on one port.
    pub waiting: usize,
    /// From accepting a connection until a request of it must have passed the guard.
    pub handshake: Duration,
    /// How long a client may go without a byte in the middle of a WebSocket frame or message,
    /// or of an HTTP request.
    pub stall: Duration,
    /// How long one request or frame may take from its first byte to its last, however
    /// steadily its bytes come (loopback carries the largest message in well under a second).
    pub message: Duration,
}

impl Limits {
    /// What a port allows: room for many agents. A real client sends its first request as
    /// soon as it runs again after connecting, but an agent starting up on a busy machine may
    /// not run again for a second or more (a Gemini CLI cut at 500 ms asked in its terminal
    /// instead of the editor); an account's waiting share, not this deadline, keeps other
    /// accounts out.
    pub const DEFAULT: Self = Self {
        connections: 64,
        waiting_per_account: 8,
        waiting: 256,
        handshake: Duration::from_secs(10),
        stall: Duration::from_secs(10),
        message: Duration::from_secs(60),
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
        fn fewer(limit: &mut usize, n: u64) {
            *limit = (*limit).min(n.max(1) as usize);
        }
        fn sooner(limit: &mut Duration, ms: u64) {
            *limit = (*limit).min(Duration::from_millis(ms));
        }
        for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
            let parsed = part
                .split_once('=')
                .and_then(|(name, value)| Some((name.trim(), value.trim().parse::<u64>().ok()?)));
            match parsed {
                Some(("connections", n)) => fewer(&mut self.connections, n),
                Some(("waiting_per_account", n)) => fewer(&mut self.waiting_per_account, n),
                Some(("waiting", n)) => fewer(&mut self.waiting, n),
                Some(("handshake_ms", ms)) => sooner(&mut self.handshake, ms),
                Some(("stall_ms", ms)) => sooner(&mut self.stall, ms),
                Some(("message_ms", ms)) => sooner(&mut self.message, ms),
                _ => tracing::warn!("{LIMITS_VAR}: ignored {part:?}"),
            }
        }
        self
    }
}

/// The local account a connection came from: the uid owning the client's socket, `None` where
/// the kernel does not say.
type Account = Option<u32>;

/// The connections of a port waiting to present the token, by account.
#[derive(Debug, Default)]
struct Waiting {
    by_account: HashMap<Account, usize>,
    total: usize,
}

/// Why a new connection was closed at once.
#[derive(Debug, Clone, Copy, thiserror::Error)]
enum NoPlace {
    #[error("{count} connections of account {} are already waiting to present the token", account.map_or("unknown".to_owned(), |uid| uid.to_string()))]
    Account { account: Account, count: usize },
    #[error("{0} connections are already waiting to present the token")]
    All(usize),
}

impl NoPlace {
    fn kind(&self) -> &'static str {
        match self {
            Self::Account { .. } => "refused a connection (its account's share is taken)",
            Self::All(_) => "refused a connection (every waiting place is taken)",
        }
    }
}

/// A connection's place among those waiting, given back when dropped.
#[derive(Debug)]
struct WaitingPlace {
    waiting: Arc<Mutex<Waiting>>,
    account: Account,
}

impl WaitingPlace {
    fn take(
        waiting: &Arc<Mutex<Waiting>>,
        account: Account,
        limits: &Limits,
    ) -> Result<Self, NoPlace> {
        let mut all = waiting.lock().unwrap_or_else(|e| e.into_inner());
        let count = all.by_account.get(&account).copied().unwrap_or(0);
        if count >= limits.waiting_per_account {
            return Err(NoPlace::Account { account, count });
        }
        if all.total >= limits.waiting {
            return Err(NoPlace::All(all.total));
        }
        *all.by_account.entry(account).or_default() += 1;
        all.total += 1;
        Ok(Self {
            waiting: Arc::clone(waiting),
            account,
        })
    }
}

impl Drop for WaitingPlace {
    fn drop(&mut self) {
        let mut all = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        all.total -= 1;
        if let Some(count) = all.by_account.get_mut(&self.account) {
            *count -= 1;
            if *count == 0 {
                all.by_account.remove(&self.account);
            }
        }
    }
}

/// Where a connection stands.
#[derive(Debug)]
enum Phase {
    /// It has not presented the token: it holds a waiting place and is timed.
    Waiting { _place: WaitingPlace },
    /// A request of it passed the guard: it holds one of the port's slots.
    Admitted { _slot: OwnedSemaphorePermit },
    /// It is closed and holds nothing.
    Closed,
}

#[derive(Debug)]
struct Admission {
    slots: Arc<Semaphore>,
    capacity: usize,
    phase: Mutex<Phase>,
}

/// One accepted connection, as request handlers see it (`ConnectInfo<Connection>`).
#[derive(Debug, Clone)]
pub struct Connection(Arc<Admission>);

impl Connection {
    /// A request of this connection passed the guard: it takes one of the port's slots (giving
    /// back its waiting place) and is no longer timed. Refused with [`Refusal::Full`] when every
    /// slot is taken (it then goes on waiting, and is closed at its deadline).
    pub fn admit(&self) -> Result<(), Refusal> {
        let mut phase = self.0.phase.lock().unwrap_or_else(|e| e.into_inner());
        match &*phase {
            Phase::Waiting { .. } => match Arc::clone(&self.0.slots).try_acquire_owned() {
                Ok(slot) => {
                    *phase = Phase::Admitted { _slot: slot };
                    Ok(())
                }
                Err(_) => Err(Refusal::Full(self.0.capacity)),
            },
            Phase::Admitted { .. } => Ok(()),
            Phase::Closed => Err(Refusal::Full(self.0.capacity)),
        }
    }

    fn is_admitted(&self) -> bool {
        matches!(
            *self.0.phase.lock().unwrap_or_else(|e| e.into_inner()),
            Phase::Admitted { .. }
        )
    }

    /// Gives back whatever place it holds.
    fn close(&self) {
        *self.0.phase.lock().unwrap_or_else(|e| e.into_inner()) = Phase::Closed;
    }
}

impl Connected<IncomingStream<'_, LimitedListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, LimitedListener>) -> Self {
        stream.io().connection.clone()
    }
}

/// What a port speaks once a request passed the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 requests, each on its own ([`Limits::stall`] applies).
    Http,
    /// One HTTP upgrade request, then WebSocket frames ([`Limits::stall`] applies).
    WebSocket,
}

/// A loopback listener that applies [`Limits`] to what it accepts.
#[derive(Debug)]
pub struct LimitedListener {
    socket: TcpListener,
    port: u16,
    limits: Limits,
    protocol: Protocol,
    slots: Arc<Semaphore>,
    waiting: Arc<Mutex<Waiting>>,
}

impl LimitedListener {
    /// Accepts from `socket` (bound on `port`, speaking `protocol`) within `limits`.
    pub fn new(socket: TcpListener, port: u16, limits: Limits, protocol: Protocol) -> Self {
        Self {
            socket,
            port,
            limits,
            protocol,
            slots: Arc::new(Semaphore::new(limits.connections)),
            waiting: Arc::default(),
        }
    }
}

impl Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (LimitedStream, SocketAddr) {
        let server = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            let (stream, peer) = Listener::accept(&mut self.socket).await;
            let account = owner::uid(peer, server);
            match WaitingPlace::take(&self.waiting, account, &self.limits) {
                Ok(place) => {
                    let admission = Admission {
                        slots: Arc::clone(&self.slots),
                        capacity: self.limits.connections,
                        phase: Mutex::new(Phase::Waiting { _place: place }),
                    };
                    let connection = Connection(Arc::new(admission));
                    let stream = LimitedStream::new(stream, connection, self.limits, self.protocol);
                    return (stream, peer);
                }
                Err(no_place) => refusals::refused(no_place.kind(), self.port, no_place),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

/// An accepted socket holding its place, closed when its handshake deadline passes before a
/// request of it was admitted. Dropping it gives its place back before the socket closes: a
/// client that saw the close may connect again at once and find it free.
#[derive(Debug)]
pub struct LimitedStream {
    stream: TcpStream,
    connection: Connection,
    port: u16,
    /// The moment it is closed unless admitted; `None` once it has been.
    deadline: Option<Pin<Box<Sleep>>>,
    handshake: Duration,
    /// Where the client is in its requests or frames.
    scan: Scan,
    stall: Duration,
    message: Duration,
    /// When the request or frame now coming began; `None` between them.
    begun: Option<Instant>,
    /// The moment a client in the middle of a request or frame is closed (it stopped, or took
    /// too long over it); `None` between them.
    stalled_by: Option<Pin<Box<Sleep>>>,
}

impl LimitedStream {
    fn new(stream: TcpStream, connection: Connection, limits: Limits, protocol: Protocol) -> Self {
        let port = stream.local_addr().map_or(0, |a| a.port());
        Self {
            stream,
            connection,
            port,
            deadline: Some(Box::pin(tokio::time::sleep(limits.handshake))),
            handshake: limits.handshake,
            scan: match protocol {
                Protocol::Http => Scan::Requests(RequestScan::default()),
                Protocol::WebSocket => Scan::Frames(FrameScan::default()),
            },
            stall: limits.stall,
            message: limits.message,
            begun: None,
            stalled_by: None,
        }
    }

    /// `bytes` arrived: a client in the middle of a request or frame has [`Limits::stall`]
    /// from now for the next byte, and [`Limits::message`] from its first byte for the whole of
    /// it; one between them has all the time it likes.
    fn scan(&mut self, bytes: &[u8]) {
        let in_the_middle = match &mut self.scan {
            Scan::Requests(requests) => {
                requests.feed(bytes);
                requests.in_the_middle()
            }
            Scan::Frames(frames) => {
                frames.feed(bytes);
                frames.in_the_middle()
            }
        };
        if !in_the_middle {
            self.begun = None;
            self.stalled_by = None;
            return;
        }
        let now = Instant::now();
        let begun = *self.begun.get_or_insert(now);
        let by = (now + self.stall).min(begun + self.message);
        match self.stalled_by.as_mut() {
            Some(sleep) => sleep.as_mut().reset(by),
            None => self.stalled_by = Some(Box::pin(tokio::time::sleep_until(by))),
        }
    }

    /// Whether a client stopped in the middle of a frame for too long (registering for the
    /// moment when it has not yet).
    fn stalled(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(by) = self.stalled_by.as_mut() else {
            return false;
        };
        if by.as_mut().poll(cx).is_pending() {
            return false;
        }
        let (connection, unit) = match self.scan {
            Scan::Requests(_) => ("an HTTP", "request"),
            Scan::Frames(_) => ("a WebSocket", "frame"),
        };
        match self.begun {
            Some(begun) if begun.elapsed() >= self.message => tracing::warn!(
                "closed {connection} connection: a {unit} still incomplete {:?} after its first \
                 byte",
                self.message
            ),
            _ => tracing::warn!(
                "closed {connection} connection: no byte for {:?} in the middle of a {unit}",
                self.stall
            ),
        }
        true
    }

    /// Whether its time to be admitted is up (registering for the deadline when it is not).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.deadline.is_some() && self.connection.is_admitted() {
            self.deadline = None;
        }
        let Some(deadline) = self.deadline.as_mut() else {
            return false;
        };
        if deadline.as_mut().poll(cx).is_pending() {
            return false;
        }
        refusals::refused(
            "closed a connection (no request with the token in time)",
            self.port,
            format_args!("not admitted within {:?} of connecting", self.handshake),
        );
        self.connection.close();
        true
    }
}

impl Drop for LimitedStream {
    fn drop(&mut self) {
        self.connection.close();
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
            Poll::Pending if this.stalled(cx) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped in the middle of a request or frame",
            ))),
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.scan(&buf.filled()[before..]);
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

/// How far a client got in what it sends, by what its port speaks.
#[derive(Debug)]
enum Scan {
    Requests(RequestScan),
    Frames(FrameScan),
}

/// Follows a WebSocket client's bytes: its HTTP upgrade request (up to the blank line), then
/// frame headers and payload lengths (RFC 6455 §5.2), enough to know whether it stopped in the
/// middle of a frame or of a fragmented message. Nothing is decoded or checked here (the
/// WebSocket library does that); a client that breaks the framing is closed by it.
#[derive(Debug, Default)]
struct FrameScan {
    /// How much of the request's closing `\r\n\r\n` was seen; 4 once the frames began.
    request_end: usize,
    /// The header of the frame being read, and how many of its bytes arrived.
    header: [u8; 14],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: u64,
    /// A data frame without FIN arrived: the message goes on in the next frame.
    message_open: bool,
}

impl FrameScan {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.request_end < 4 {
                let byte = bytes[0];
                bytes = &bytes[1..];
                self.request_end = match (self.request_end, byte) {
                    (0 | 2, b'\r') => self.request_end + 1,
                    (1 | 3, b'\n') => self.request_end + 1,
                    (_, b'\r') => 1,
                    _ => 0,
                };
                continue;
            }
            if self.payload_left > 0 {
                let taken = (bytes.len() as u64).min(self.payload_left);
                self.payload_left -= taken;
                bytes = &bytes[taken as usize..];
                continue;
            }
            self.header[self.header_len] = bytes[0];
            self.header_len += 1;
            bytes = &bytes[1..];
            if let Some(payload) = self.header_complete() {
                let (fin, opcode) = (self.header[0] & 0x80 != 0, self.header[0] & 0x0F);
                if opcode < 8 {
                    self.message_open = !fin;
                }
                self.header_len = 0;
                self.payload_left = payload;
            }
        }
    }

    /// The payload length once the header so far is whole.
    fn header_complete(&self) -> Option<u64> {
        let h = &self.header[..self.header_len];
        if h.len() < 2 {
            return None;
        }
        let masked = h[1] & 0x80 != 0;
        let (extended, short) = match h[1] & 0x7F {
            126 => (2, None),
            127 => (8, None),
            n => (0, Some(u64::from(n))),
        };
        let needed = 2 + extended + if masked { 4 } else { 0 };
        if h.len() < needed {
            return None;
        }
        Some(short.unwrap_or_else(|| {
            h[2..2 + extended]
                .iter()
                .fold(0u64, |n, b| (n << 8) | u64::from(*b))
        }))
    }

    /// Whether the client is in the middle of a frame (or of a fragmented message).
    fn in_the_middle(&self) -> bool {
        self.request_end == 4 && (self.header_len > 0 || self.payload_left > 0 || self.message_open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_followed_across_reads() {
        let mut scan = FrameScan::default();
        scan.feed(b"GET / HTTP/1.1\r\nHost: x\r\n");
        assert!(!scan.in_the_middle());
        scan.feed(b"\r\n");
        assert!(
            !scan.in_the_middle(),
            "between the request and the first frame"
        );
        // A masked text frame of 5 bytes, header and payload split across reads.
        let frame = [0x81, 0x85, 1, 2, 3, 4, b'h', b'e', b'l', b'l', b'o'];
        scan.feed(&frame[..1]);
        assert!(scan.in_the_middle());
        scan.feed(&frame[1..8]);
        assert!(scan.in_the_middle());
        scan.feed(&frame[8..]);
        assert!(!scan.in_the_middle());
        // A 300-byte frame (16-bit length), only its header and part of its payload.
        let mut long = vec![0x82, 0xFE, 0x01, 0x2C, 0, 0, 0, 0];
        long.extend(std::iter::repeat_n(b'x', 299));
        scan.feed(&long);
        assert!(scan.in_the_middle());
        scan.feed(b"x");
        assert!(!scan.in_the_middle());
        // A fragmented message: open until its FIN frame, a ping in between changes nothing.
        scan.feed(&[0x01, 0x81, 0, 0, 0, 0, b'a']);
        assert!(scan.in_the_middle());
        scan.feed(&[0x89, 0x80, 0, 0, 0, 0]);
        assert!(scan.in_the_middle());
        scan.feed(&[0x80, 0x81, 0, 0, 0, 0, b'b']);
        assert!(!scan.in_the_middle());
        // Two whole frames in one read.
        scan.feed(&[0x81, 0x80, 0, 0, 0, 0, 0x81, 0x81, 0, 0, 0, 0, b'z']);
        assert!(!scan.in_the_middle());
    }

    #[test]
    fn the_environment_can_only_tighten_the_limits() {
        let tight = Limits::DEFAULT
            .tightened("connections=8, waiting_per_account=2,handshake_ms=300,message_ms=2000");
        assert_eq!(
            tight,
            Limits {
                connections: 8,
                waiting_per_account: 2,
                waiting: Limits::DEFAULT.waiting,
                handshake: Duration::from_millis(300),
                stall: Limits::DEFAULT.stall,
                message: Duration::from_secs(2),
            }
        );
        let loose = Limits::DEFAULT.tightened("connections=100000,handshake_ms=999999,bogus=1,x");
        assert_eq!(loose, Limits::DEFAULT);
        assert_eq!(Limits::DEFAULT.tightened("connections=0").connections, 1);
    }
}
