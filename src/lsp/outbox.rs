//! The frames on their way to the client, and the one task that writes them.
//!
//! A reply goes ahead of the stream updates (`agentls/sessionUpdate`) queued since the last other
//! frame: a plugin that takes an agent's stream gets it in frames of up to 64 KB, and a
//! keystroke's code action must not wait in line while the client parses a megabyte of text it
//! will show later anyway. Nothing else moves: notifications and server requests keep their
//! order among themselves and around the stream, replies keep theirs, and a frame being written
//! is finished first. So a plugin may see a reply before stream updates agentls queued before
//! it, never a stream update out of order.
//!
//! The writer keeps taking frames from the queue while the client is slow to read, up to
//! [`MAX_HELD_BYTES`]; beyond that the queue fills and its writers wait.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::pin;
use std::task::{Poll, ready};

use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use super::transport::{HEADER_END, Kind, MAX_HEADER, find, kind};
use crate::editor::PluginEvent;

/// Frames held in the outbox before the writer stops taking more from the queue.
const MAX_HELD_BYTES: usize = 1 << 20;

/// Frames in the order they are to be written.
#[derive(Debug)]
pub struct Outbox {
    frames: VecDeque<Frame>,
    bytes: usize,
    /// How a stream update's body begins, as tower-lsp writes it.
    stream_start: Vec<u8>,
    /// How every request and notification tower-lsp writes begins (a reply does not): those
    /// are not read again to tell a reply.
    request_start: &'static [u8],
}

#[derive(Debug)]
struct Frame {
    bytes: Vec<u8>,
    stream: bool,
}

impl Default for Outbox {
    fn default() -> Self {
        let method = format!("agentls/{}", PluginEvent::SessionUpdate.name());
        Self {
            frames: VecDeque::new(),
            bytes: 0,
            stream_start: format!(r#"{{"jsonrpc":"2.0","method":"{method}","#).into_bytes(),
            request_start: br#"{"jsonrpc":"2.0","method":"#,
        }
    }
}

impl Outbox {
    /// Queues a whole frame (header and body): a reply ahead of the stream updates at the end.
    pub fn push(&mut self, bytes: Vec<u8>) {
        let body = find(&bytes[..bytes.len().min(MAX_HEADER)], HEADER_END)
            .map_or(&bytes[..], |at| &bytes[at + HEADER_END.len()..]);
        let stream = body.starts_with(&self.stream_start);
        let reply = !body.starts_with(self.request_start) && kind(body) == Kind::Reply;
        let at = if reply {
            self.frames
                .iter()
                .rposition(|frame| !frame.stream)
                .map_or(0, |last_other| last_other + 1)
        } else {
            self.frames.len()
        };
        self.bytes += bytes.len();
        self.frames.insert(at, Frame { bytes, stream });
    }

    /// The next frame to write.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        let frame = self.frames.pop_front()?;
        self.bytes -= frame.bytes.len();
        Some(frame.bytes)
    }

    /// Whether it holds enough that the writer should take no more for now.
    fn is_full(&self) -> bool {
        self.bytes >= MAX_HELD_BYTES
    }
}

/// Writes the queued frames to `output` in the outbox's order, flushing whenever nothing is left
/// to write; ends once every sender is gone and all was written, or when the output fails.
pub async fn write_frames(mut queue: mpsc::Receiver<Vec<u8>>, output: impl AsyncWrite) {
    let mut output = pin!(output);
    let mut outbox = Outbox::default();
    // The frame being written and how much of it is out.
    let mut writing: Option<(Vec<u8>, usize)> = None;
    let mut queue_open = true;
    let mut unflushed = false;
    let written = poll_fn(|cx| -> Poll<std::io::Result<()>> {
        loop {
            while queue_open && !outbox.is_full() {
                match queue.poll_recv(cx) {
                    Poll::Ready(Some(frame)) => outbox.push(frame),
                    Poll::Ready(None) => queue_open = false,
                    Poll::Pending => break,
                }
            }
            if writing.is_none() {
                writing = outbox.pop().map(|frame| (frame, 0));
            }
            let Some((frame, done)) = writing.as_mut() else {
                if unflushed {
                    // Cleared only once done: a flush that waits must be polled again.
                    ready!(output.as_mut().poll_flush(cx))?;
                    unflushed = false;
                    continue;
                }
                return if queue_open {
                    Poll::Pending
                } else {
                    Poll::Ready(Ok(()))
                };
            };
            match ready!(output.as_mut().poll_write(cx, &frame[*done..]))? {
                0 => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                n => *done += n,
            }
            unflushed = true;
            if *done == frame.len() {
                writing = None;
            }
        }
    })
    .await;
    if let Err(e) = written {
        tracing::warn!("cannot write to the client: {e}");
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::Context;

    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        crate::lsp::framing::frame(body.as_bytes())
    }

    fn update(text: &str) -> Vec<u8> {
        frame(&format!(
            r#"{{"jsonrpc":"2.0","method":"agentls/sessionUpdate","params":{{"text":"{text}"}}}}"#
        ))
    }

    fn reply(id: u32) -> Vec<u8> {
        frame(&format!(r#"{{"jsonrpc":"2.0","result":null,"id":{id}}}"#))
    }

    const NOTE: &str = r#"{"jsonrpc":"2.0","method":"window/logMessage","params":{}}"#;
    const REQUEST: &str = r#"{"jsonrpc":"2.0","method":"workspace/applyEdit","params":{},"id":0}"#;

    fn drain(outbox: &mut Outbox) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| outbox.pop()).collect()
    }

    #[test]
    fn a_reply_goes_ahead_of_the_stream_updates_at_the_end() {
        let mut outbox = Outbox::default();
        for frame in [update("a"), frame(NOTE), update("b"), update("c"), reply(1)] {
            outbox.push(frame);
        }
        outbox.push(reply(2));
        outbox.push(update("d"));
        assert_eq!(
            drain(&mut outbox),
            [
                update("a"),
                frame(NOTE),
                reply(1),
                reply(2),
                update("b"),
                update("c"),
                update("d")
            ]
        );
        assert_eq!(outbox.bytes, 0);
    }

    #[test]
    fn nothing_but_a_reply_moves() {
        let mut outbox = Outbox::default();
        let frames = [update("a"), frame(REQUEST), update("b"), frame(NOTE)];
        for frame in frames.clone() {
            outbox.push(frame);
        }
        assert_eq!(drain(&mut outbox), frames);
        // A reply with nothing but stream updates before it goes first.
        outbox.push(update("a"));
        outbox.push(reply(3));
        assert_eq!(drain(&mut outbox), [reply(3), update("a")]);
    }

    /// The stream is told by how tower-lsp writes a notification.
    #[test]
    fn tower_lsp_notifications_are_told_apart() {
        let method = format!("agentls/{}", PluginEvent::SessionUpdate.name());
        let written = |method: String| {
            let request = tower_lsp_server::jsonrpc::Request::build(method)
                .params(serde_json::json!({"update": {}}))
                .finish();
            frame(&serde_json::to_string(&request).unwrap())
        };
        let mut outbox = Outbox::default();
        outbox.push(written(method));
        outbox.push(written("agentls/reviewChanged".into()));
        assert_eq!(
            outbox.frames.iter().map(|f| f.stream).collect::<Vec<_>>(),
            [true, false]
        );
    }

    /// Takes writes of a few bytes each, as many in all as its `budget` allows, then waits.
    #[derive(Clone, Default)]
    struct Slow {
        written: Arc<Mutex<Vec<u8>>>,
        budget: Arc<Mutex<usize>>,
        /// How many flushes wait before one goes through, and how much was flushed.
        waiting_flushes: Arc<Mutex<usize>>,
        flushed: Arc<Mutex<usize>>,
    }

    impl Slow {
        fn with_budget(bytes: usize) -> Self {
            let slow = Self::default();
            *slow.budget.lock().unwrap() = bytes;
            slow
        }

        fn text(&self) -> String {
            String::from_utf8(self.written.lock().unwrap().clone()).unwrap()
        }
    }

    impl AsyncWrite for Slow {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let mut budget = self.budget.lock().unwrap();
            let n = buf.len().min(7).min(*budget);
            if n == 0 {
                // Polled again until the test raises the budget.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            *budget -= n;
            self.written.lock().unwrap().extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            let mut waiting = self.waiting_flushes.lock().unwrap();
            if *waiting > 0 {
                *waiting -= 1;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            *self.flushed.lock().unwrap() = self.written.lock().unwrap().len();
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// A flush that has to wait (a full pipe behind a buffer) is polled again until it is done:
    /// else a reply could stay in the buffer while the client waits for it.
    #[tokio::test]
    async fn a_flush_that_waits_is_finished() {
        let output = Slow::with_budget(usize::MAX);
        *output.waiting_flushes.lock().unwrap() = 3;
        let (tx, rx) = mpsc::channel(4);
        tx.send(reply(1)).await.unwrap();
        drop(tx);
        write_frames(rx, output.clone()).await;
        assert_eq!(*output.flushed.lock().unwrap(), reply(1).len());
    }

    /// While the client does not read, a reply queued behind stream updates overtakes them, but
    /// not the frame half written.
    #[tokio::test]
    async fn a_reply_overtakes_updates_held_for_a_slow_client() {
        let output = Slow::with_budget(20);
        let (tx, rx) = mpsc::channel(16);
        tx.send(update("first")).await.unwrap();
        let writer = tokio::spawn(write_frames(rx, output.clone()));
        while output.written.lock().unwrap().len() < 20 {
            tokio::task::yield_now().await;
        }
        for frame in [update("b"), update("c"), reply(7)] {
            tx.send(frame).await.unwrap();
        }
        // The writer takes them all in while the client reads nothing more.
        while tx.capacity() < 16 {
            tokio::task::yield_now().await;
        }
        *output.budget.lock().unwrap() = usize::MAX;
        drop(tx);
        writer.await.unwrap();
        let expected = [update("first"), reply(7), update("b"), update("c")].concat();
        assert_eq!(output.text(), String::from_utf8(expected).unwrap());
    }

    #[tokio::test]
    async fn frames_are_written_whole_and_the_writer_ends_with_the_senders() {
        let output = Slow::with_budget(usize::MAX);
        let (tx, rx) = mpsc::channel(4);
        tx.send(frame(NOTE)).await.unwrap();
        tx.send(frame(REQUEST)).await.unwrap();
        drop(tx);
        write_frames(rx, output.clone()).await;
        let expected = [frame(NOTE), frame(REQUEST)].concat();
        assert_eq!(output.text(), String::from_utf8(expected).unwrap());
    }
}
