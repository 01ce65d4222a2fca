//! The server's output stream, arranged so that a reply reaches the client in a read of its own.
//!
//! Why: a client waiting synchronously for a reply may stop parsing at that reply. Emacs 28's
//! jsonrpc (eglot 1.9) parses a read chunk message by message and leaves its wait as soon as it
//! has the reply it wants; what followed the reply in the same chunk stays unparsed until more
//! bytes arrive. A `workspace/applyEdit` right behind `agentls.accept`'s reply then never gets an
//! answer, and diagnostics behind a command's reply show only when something else arrives.
//! Writing them in a separate `write` is not enough (seen: the reader still gets both in one
//! `read`, 10 runs in 10), nor is a 1 ms pause (3 in 10), as the client may still be busy with
//! earlier messages when the next one is written.
//!
//! So the output is cut into frames as it passes; a frame is written on its own, and after a
//! reply is flushed nothing more is written until the client has read it: on a pipe (how editors
//! run language servers) the kernel says how many written bytes are still unread; elsewhere a
//! fixed pause stands in. A client that reads continuously costs a millisecond after a reply,
//! and messages that do not follow a reply go out at once.
//!
//! Only a client that may need it is paced ([`Pacing`], decided at `initialize`, by what the
//! client says, never by its name): one that does not say who it is (eglot 1.9, Emacs 28's,
//! sends no `clientInfo`), and one that asks with `initializationOptions.paceReplies` (the Emacs
//! package does on a jsonrpc older than 1.0.24, which parses a whole read before it acts on any
//! message). Other clients read their input as a stream; their output is never held.
//!
//! tower-lsp is not the only writer: the input filter (`framing.rs`) answers bad messages
//! itself. Both go through one queue of whole frames ([`FrameSink`] cuts tower-lsp's output into
//! frames), and `outbox::write_frames` alone writes to the client, so no frame lands inside another.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use std::collections::VecDeque;

use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::io::AsyncWrite;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::PollSender;

/// How often the unread bytes are checked while output is held.
const POLL: Duration = Duration::from_millis(1);
/// The longest output is held for a client that does not read (it is busy, or it is not a
/// client that waits on replies): then it goes out anyway.
const MAX_HOLD: Duration = Duration::from_secs(1);
/// The pause after a reply when the unread bytes cannot be known.
const FIXED_HOLD: Duration = Duration::from_millis(20);

/// How many written bytes the client has not read yet, when the output can tell.
pub type UnreadProbe = Box<dyn Fn() -> Option<u64> + Send + Sync>;

/// Whether output after a reply waits for the client to read it; clones share it. On until the
/// client has said who it is.
#[derive(Debug, Clone)]
pub struct Pacing(Arc<AtomicBool>);

impl Default for Pacing {
    fn default() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }
}

impl Pacing {
    /// Paces the output only if the client may need it: it sent no `clientInfo`
    /// (`identified` false), or it asked (`asked`, its `paceReplies` initialization option).
    pub fn set_for(&self, identified: bool, asked: Option<bool>) {
        let needed = asked.unwrap_or(!identified);
        tracing::debug!(identified, ?asked, needed, "output paced after replies");
        self.0.store(needed, Ordering::Relaxed);
    }

    fn on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The probe for an output that is a pipe (`fd`, e.g. this process's stdout): the bytes
/// written to it that the reader has not taken yet. `None` for anything else.
#[cfg(unix)]
pub fn pipe_unread<Fd>(fd: Fd) -> Option<UnreadProbe>
where
    Fd: std::os::fd::AsFd + Send + Sync + 'static,
{
    let stat = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
        return None;
    }
    Some(Box::new(move || rustix::io::ioctl_fionread(&fd).ok()))
}

/// An [`AsyncWrite`] that writes one frame at a time and, after a reply, holds what follows
/// until the client has read the reply.
pub struct ReplyGap<W> {
    inner: W,
    unread: Option<UnreadProbe>,
    pacing: Pacing,
    frames: Frames,
    /// A reply was written but not flushed yet.
    reply_unflushed: bool,
    /// Output held since then, and the timer that wakes the writer to check again.
    hold: Option<(Instant, Pin<Box<Sleep>>)>,
}

impl<W> ReplyGap<W> {
    /// Wraps `inner`; `unread` tells how much of what was written the client has not read, and
    /// `pacing` whether to wait for that at all.
    pub fn new(inner: W, unread: Option<UnreadProbe>, pacing: Pacing) -> Self {
        Self {
            inner,
            unread,
            pacing,
            frames: Frames::default(),
            reply_unflushed: false,
            hold: None,
        }
    }
}

impl<W: AsyncWrite + Unpin> ReplyGap<W> {
    /// Flushes `inner`; when that flushes a reply, output is held from now on.
    fn flush_inner(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        if std::mem::take(&mut self.reply_unflushed) && self.pacing.on() {
            let now = Instant::now();
            self.hold = Some((now, Box::pin(tokio::time::sleep_until(now))));
        }
        Poll::Ready(Ok(()))
    }

    /// Ready once held output may go out.
    fn poll_hold(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while let Some((since, sleep)) = self.hold.as_mut() {
            let now = Instant::now();
            let unread = self.unread.as_ref().map(|probe| probe());
            let next_check = match unread {
                Some(Some(0)) => None,
                Some(Some(_)) => (now < *since + MAX_HOLD).then_some(now + POLL),
                Some(None) | None => (now < *since + FIXED_HOLD).then_some(*since + FIXED_HOLD),
            };
            match next_check {
                None => self.hold = None,
                Some(at) => {
                    sleep.as_mut().reset(at);
                    ready!(sleep.as_mut().poll(cx));
                }
            }
        }
        Poll::Ready(())
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ReplyGap<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.reply_unflushed {
            ready!(this.flush_inner(cx))?;
        }
        ready!(this.poll_hold(cx));
        let take = this.frames.rest_of_frame(buf);
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..take]))?;
        if this.frames.advance(&buf[..written], this.pacing.on()) == Some(Kind::Reply) {
            this.reply_unflushed = true;
        }
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().flush_inner(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.flush_inner(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// tower-lsp's output as whole frames on the client's output queue. A frame is queued once it
/// is complete; a full queue holds up the next write.
pub struct FrameSink {
    queue: PollSender<Vec<u8>>,
    /// The frame being written, and its whole length once its header is complete.
    partial: Vec<u8>,
    partial_len: Option<usize>,
    /// Complete frames not yet queued.
    complete: VecDeque<Vec<u8>>,
}

impl FrameSink {
    /// Queues frames on `queue`.
    pub fn new(queue: PollSender<Vec<u8>>) -> Self {
        Self {
            queue,
            partial: Vec::new(),
            partial_len: None,
            complete: VecDeque::new(),
        }
    }

    /// Moves the frames completed in `partial` to `complete`.
    fn cut(&mut self) {
        loop {
            let len = match self.partial_len {
                Some(len) => len,
                None => {
                    let head = &self.partial[..self.partial.len().min(MAX_HEADER)];
                    match find(head, HEADER_END) {
                        Some(at) => {
                            let header_end = at + HEADER_END.len();
                            header_end + content_length(&self.partial[..header_end])
                        }
                        // Not a header tower-lsp writes: pass it on as it is.
                        None if self.partial.len() >= MAX_HEADER => self.partial.len(),
                        None => return,
                    }
                }
            };
            if self.partial.len() < len {
                self.partial_len = Some(len);
                return;
            }
            let rest = self.partial.split_off(len);
            self.complete
                .push_back(std::mem::replace(&mut self.partial, rest));
            self.partial_len = None;
        }
    }

    /// Queues the complete frames; pending while the queue is full.
    fn poll_queue(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.complete.is_empty() {
            ready!(self.queue.poll_reserve(cx)).map_err(|_| output_closed())?;
            let frame = self.complete.pop_front().unwrap_or_default();
            self.queue.send_item(frame).map_err(|_| output_closed())?;
        }
        Poll::Ready(Ok(()))
    }
}

fn output_closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the client's output is closed",
    )
}

impl AsyncWrite for FrameSink {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_queue(cx))?;
        this.partial.extend_from_slice(buf);
        this.cut();
        // Queued now if there is room; else on the next write or flush.
        if let Poll::Ready(Err(e)) = this.poll_queue(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().poll_queue(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_queue(cx))?;
        this.queue.close();
        Poll::Ready(Ok(()))
    }
}

/// What a finished frame was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A reply to one of the client's requests.
    Reply,
    /// A request or notification, or something unreadable.
    Other,
}

/// Where the output stream is, frame-wise.
#[derive(Debug)]
enum Frames {
    /// In a header (its bytes so far).
    Header(Vec<u8>),
    /// In a body: bytes still to come, and the ones seen when its kind is wanted.
    Body {
        remaining: usize,
        body: Option<Vec<u8>>,
    },
}

impl Default for Frames {
    fn default() -> Self {
        Self::Header(Vec::new())
    }
}

/// Where a frame's header ends.
pub(super) const HEADER_END: &[u8] = b"\r\n\r\n";

impl Frames {
    /// How much of `buf` belongs to the current frame (all of it if the frame goes on).
    fn rest_of_frame(&self, buf: &[u8]) -> usize {
        match self {
            Self::Body { remaining, .. } => (*remaining).min(buf.len()),
            Self::Header(seen) => {
                let mut header = seen.clone();
                header.extend_from_slice(&buf[..buf.len().min(MAX_HEADER)]);
                match find(&header, HEADER_END) {
                    Some(at) => {
                        let header_end = at + HEADER_END.len();
                        let frame_end = header_end + content_length(&header[..header_end]);
                        (frame_end - seen.len()).min(buf.len())
                    }
                    None => buf.len(),
                }
            }
        }
    }

    /// Takes `bytes` (normally never past the end of the current frame); says what the last
    /// frame they complete was (a reply if any was). Only with `kinds` is a frame's body kept
    /// to tell a reply (an unpaced client's output, megabytes of it in an agent's stream, is
    /// neither copied nor read again); without, every frame is `Other`.
    fn advance(&mut self, mut bytes: &[u8], kinds: bool) -> Option<Kind> {
        let mut finished = None;
        while !bytes.is_empty() {
            match self {
                Self::Header(seen) => {
                    let before = seen.len();
                    seen.extend_from_slice(bytes);
                    let Some(at) = find(seen, HEADER_END) else {
                        break;
                    };
                    let header_end = at + HEADER_END.len();
                    let remaining = content_length(&seen[..header_end]);
                    bytes = &bytes[header_end - before..];
                    *self = Self::Body {
                        remaining,
                        body: kinds.then(|| Vec::with_capacity(remaining.min(1 << 20))),
                    };
                }
                Self::Body { remaining, body } => {
                    let n = (*remaining).min(bytes.len());
                    if let Some(body) = body {
                        body.extend_from_slice(&bytes[..n]);
                    }
                    *remaining -= n;
                    bytes = &bytes[n..];
                }
            }
            if let Self::Body { remaining: 0, body } = self {
                let kind = body.as_deref().map_or(Kind::Other, kind);
                if finished != Some(Kind::Reply) {
                    finished = Some(kind);
                }
                *self = Self::default();
            }
        }
        finished
    }
}

/// Longer than any header tower-lsp writes (`Content-Length: <n>\r\n\r\n`).
pub(super) const MAX_HEADER: usize = 256;

/// A reply has an `id` and no `method`.
pub(super) fn kind(body: &[u8]) -> Kind {
    #[derive(Deserialize)]
    struct Probe {
        method: Option<IgnoredAny>,
        id: Option<IgnoredAny>,
    }
    match serde_json::from_slice::<Probe>(body) {
        Ok(Probe {
            method: None,
            id: Some(_),
        }) => Kind::Reply,
        _ => Kind::Other,
    }
}

/// The `Content-Length` of a header (0 if missing: the frame is then the header alone).
fn content_length(header: &[u8]) -> usize {
    let header = String::from_utf8_lossy(header);
    header
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Where `needle` first occurs in `haystack`.
pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tokio::io::AsyncWriteExt as _;
    use tokio::sync::mpsc;

    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        crate::lsp::framing::frame(body.as_bytes())
    }

    /// Records each `write` it gets; `unread` bytes are "in the pipe" until the test drains them.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
        unread: Arc<AtomicU64>,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.writes.lock().unwrap().push(buf.to_vec());
            self.unread.fetch_add(buf.len() as u64, Ordering::SeqCst);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    const REPLY: &str = r#"{"jsonrpc":"2.0","result":null,"id":3}"#;
    const REQUEST: &str = r#"{"jsonrpc":"2.0","method":"workspace/applyEdit","params":{},"id":0}"#;
    const NOTE: &str = r#"{"jsonrpc":"2.0","method":"window/logMessage","params":{"message":"é"}}"#;

    #[test]
    fn frames_are_cut_and_replies_recognized() {
        let mut frames = Frames::default();
        let mut stream = frame(NOTE);
        stream.extend(frame(REPLY));
        let first = frames.rest_of_frame(&stream);
        assert_eq!(first, frame(NOTE).len());
        // In pieces, header split too.
        assert_eq!(frames.advance(&stream[..5], true), None);
        assert_eq!(frames.rest_of_frame(&stream[5..]), first - 5);
        assert_eq!(frames.advance(&stream[5..first], true), Some(Kind::Other));
        assert_eq!(frames.advance(&stream[first..], true), Some(Kind::Reply));
        assert_eq!(kind(REQUEST.as_bytes()), Kind::Other);
    }

    /// Unpaced, frames are still cut (one written at a time) but no body is kept to be read.
    #[test]
    fn frames_are_cut_without_their_kinds() {
        let mut frames = Frames::default();
        let mut stream = frame(REPLY);
        stream.extend(frame(NOTE));
        let first = frames.rest_of_frame(&stream);
        assert_eq!(first, frame(REPLY).len());
        assert_eq!(frames.advance(&stream[..first], false), Some(Kind::Other));
        assert!(matches!(frames, Frames::Header(ref seen) if seen.is_empty()));
        assert_eq!(frames.rest_of_frame(&stream[first..]), frame(NOTE).len());
        let header = frame(NOTE).len() - NOTE.len();
        frames.advance(&stream[first..first + header + 1], false);
        assert!(matches!(frames, Frames::Body { body: None, .. }));
    }

    /// tower-lsp's writes, however they are cut, reach the queue as whole frames (so whatever
    /// else is queued lands between frames).
    #[tokio::test]
    async fn the_sink_queues_whole_frames() {
        let (tx, mut rx) = mpsc::channel(1);
        let mut sink = FrameSink::new(PollSender::new(tx));
        let mut stream = frame(NOTE);
        stream.extend(frame(REPLY));
        stream.extend(frame(REQUEST));
        let writer = tokio::spawn(async move {
            for piece in stream.chunks(7) {
                sink.write_all(piece).await.unwrap();
            }
            sink.flush().await.unwrap();
            sink.shutdown().await.unwrap();
        });
        let mut frames = Vec::new();
        while let Some(frame) = rx.recv().await {
            frames.push(frame);
        }
        writer.await.unwrap();
        assert_eq!(frames, vec![frame(NOTE), frame(REPLY), frame(REQUEST)]);
    }

    /// A client that says nothing of itself, or asks, is paced; no name decides it.
    #[test]
    fn pacing_is_for_clients_that_may_need_it() {
        let paced = |identified, asked| {
            let pacing = Pacing::default();
            pacing.set_for(identified, asked);
            pacing.on()
        };
        assert!(paced(false, None), "a client that says nothing of itself");
        assert!(!paced(true, None), "a client that says who it is");
        assert!(paced(true, Some(true)), "a client that asks");
        assert!(
            !paced(false, Some(false)),
            "a client that says it needs none"
        );
    }

    /// A client that is not paced gets what follows a reply at once, read or not.
    #[tokio::test]
    async fn an_unpaced_client_gets_what_follows_a_reply_at_once() {
        let sink = Recorder::default();
        let unread = Arc::clone(&sink.unread);
        let probe: UnreadProbe = Box::new(move || Some(unread.load(Ordering::SeqCst)));
        let pacing = Pacing::default();
        pacing.set_for(true, None);
        let mut out = ReplyGap::new(sink.clone(), Some(probe), pacing);
        let mut burst = frame(REPLY);
        burst.extend(frame(REQUEST));
        out.write_all(&burst).await.unwrap();
        out.flush().await.unwrap();
        assert_eq!(
            *sink.writes.lock().unwrap(),
            vec![frame(REPLY), frame(REQUEST)]
        );
        assert!(sink.unread.load(Ordering::SeqCst) > 0, "nothing was read");
    }

    #[tokio::test]
    async fn what_follows_a_reply_waits_until_the_reply_was_read() {
        let sink = Recorder::default();
        let unread = Arc::clone(&sink.unread);
        let probe: UnreadProbe = Box::new(move || Some(unread.load(Ordering::SeqCst)));
        let mut out = ReplyGap::new(sink.clone(), Some(probe), Pacing::default());
        let mut burst = frame(NOTE);
        burst.extend(frame(REPLY));
        burst.extend(frame(REQUEST));
        let writer = tokio::spawn(async move {
            out.write_all(&burst).await.unwrap();
            out.flush().await.unwrap();
        });
        // The notification and the reply go out, one write each; the request waits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            *sink.writes.lock().unwrap(),
            vec![frame(NOTE), frame(REPLY)]
        );
        // The client reads: the request follows, on its own.
        sink.unread.store(0, Ordering::SeqCst);
        writer.await.unwrap();
        assert_eq!(sink.writes.lock().unwrap()[2], frame(REQUEST));
    }

    #[tokio::test]
    async fn a_client_that_never_reads_delays_output_at_most_max_hold() {
        let sink = Recorder::default();
        let unread = Arc::clone(&sink.unread);
        let probe: UnreadProbe = Box::new(move || Some(unread.load(Ordering::SeqCst)));
        let mut out = ReplyGap::new(sink.clone(), Some(probe), Pacing::default());
        let started = std::time::Instant::now();
        out.write_all(&frame(REPLY)).await.unwrap();
        out.write_all(&frame(NOTE)).await.unwrap();
        let held = started.elapsed();
        assert!(held >= MAX_HOLD && held < MAX_HOLD * 3, "{held:?}");
        assert_eq!(sink.writes.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn without_a_probe_a_fixed_pause_follows_a_reply_only() {
        let sink = Recorder::default();
        let mut out = ReplyGap::new(sink.clone(), None, Pacing::default());
        let started = std::time::Instant::now();
        out.write_all(&frame(NOTE)).await.unwrap();
        out.write_all(&frame(NOTE)).await.unwrap();
        assert!(started.elapsed() < FIXED_HOLD, "no reply, no pause");
        out.write_all(&frame(REPLY)).await.unwrap();
        out.write_all(&frame(NOTE)).await.unwrap();
        assert!(started.elapsed() >= FIXED_HOLD);
        assert_eq!(sink.writes.lock().unwrap().len(), 4);
    }
}
