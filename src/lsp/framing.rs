//! The server's input, framed by agentls before tower-lsp sees it: a filter between the real
//! stdin and tower-lsp's `Server`. Whether a body is a valid message is `message_check.rs`'s.
//!
//! Why: tower-lsp 0.23's framed reader stops serving at its first decode error, so one bad frame
//! (a body that is not JSON-RPC, a `Content-Type` without `charset=utf-8`) used to end the
//! server. Here frames are read robustly (header names in any case, any `Content-Type`, `\n` or
//! `\r\n` line ends, absurd lengths refused and the stream resynced at the next header), each
//! body is checked, and only valid messages go on to tower-lsp, framed canonically
//! (`Content-Length` alone). A bad message's JSON-RPC error answer goes to the client through the
//! same output queue as tower-lsp's frames (`transport::FrameSink`), and serving goes on.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::PollSender;

use super::message_check::{self, Checked};

/// The largest body read; a header asking for more is refused (logged) and reading resyncs at
/// the next header.
pub const MAX_BODY: usize = 64 << 20;
/// A header line longer than this is no header: it is skipped as it comes, not kept.
const MAX_LINE: usize = 4096;
/// How much input is read at once.
const READ_CHUNK: usize = 64 << 10;
/// The header that frames a body, with its colon.
const CONTENT_LENGTH: &[u8] = b"content-length:";
/// How much of skipped input the log shows.
const PREVIEW: usize = 80;

/// Cuts a byte stream into frame bodies. Input that is not a frame is skipped and logged, and
/// reading resyncs at the next good header.
#[derive(Debug, Default)]
pub struct Framer {
    buffer: Vec<u8>,
    /// Where the unread input starts in `buffer`.
    start: usize,
    /// The length of the body being read, once its header is complete.
    body: Option<usize>,
    /// The header being read.
    header: Header,
    /// Bytes skipped since the last good header.
    skipped: usize,
}

/// A header block being read.
#[derive(Debug, Default)]
struct Header {
    /// Lines so far (0: between frames, where blank lines are nothing).
    lines: usize,
    length: Option<usize>,
    /// Why this frame cannot be read; it is skipped at the blank line.
    problem: Option<String>,
}

/// What one line of a header block is.
enum Line {
    Blank,
    /// `Content-Length`, readable or not; after `skipped` bytes that were no header.
    Length {
        length: Result<usize, String>,
        skipped: usize,
    },
    /// Another header (`Content-Type` in any form included): nothing to do.
    Other,
    /// Not a header line.
    Garbage,
}

impl Framer {
    /// Appends input.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(bytes);
    }

    /// The next whole body in the input so far.
    pub fn next_body(&mut self) -> Option<Vec<u8>> {
        loop {
            let rest = &self.buffer[self.start..];
            if let Some(length) = self.body {
                if rest.len() < length {
                    return None;
                }
                self.body = None;
                if self.start == 0 {
                    // The body fills the front of the buffer: it keeps the allocation, and
                    // only what came after it is copied (a big body is not copied again).
                    let after = self.buffer.split_off(length);
                    return Some(std::mem::replace(&mut self.buffer, after));
                }
                let body = rest[..length].to_vec();
                self.start += length;
                return Some(body);
            }
            let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
                if rest.len() > MAX_LINE {
                    // Only a line's last MAX_LINE bytes count (a header may be glued to the
                    // end of garbage); the rest is skipped as it comes.
                    let skip = rest.len() - MAX_LINE;
                    let shown = preview(rest);
                    self.skip(skip, shown);
                    self.start += skip;
                    self.header = Header::default();
                }
                return None;
            };
            let mut line_start = self.start;
            let mut length = newline;
            if length > MAX_LINE {
                // As above, whether the line came in one read or in many.
                let skip = length - MAX_LINE;
                let shown = preview(rest);
                self.skip(skip, shown);
                self.header = Header::default();
                line_start += skip;
                length = MAX_LINE;
            }
            self.start += newline + 1;
            let line = trim_cr(&self.buffer[line_start..line_start + length]);
            match classify(line) {
                Line::Blank => self.end_header(),
                Line::Other => self.header.lines += 1,
                // A header block is unbroken: what came before garbage belongs to no frame.
                Line::Garbage => {
                    let shown = preview(line);
                    self.skip(newline + 1, shown);
                    self.header = Header::default();
                }
                Line::Length { length, skipped } => {
                    if skipped > 0 {
                        let shown = preview(&line[..skipped]);
                        self.skip(skipped, shown);
                        self.header = Header::default();
                    }
                    self.header.lines += 1;
                    self.header_length(length);
                }
            }
            if self.body.is_some() && self.skipped > 0 {
                tracing::warn!(
                    bytes = self.skipped,
                    "input resynced at a frame after skipping what was not LSP"
                );
                self.skipped = 0;
            }
        }
    }

    /// Says what is left when the input ends.
    pub fn finish(&mut self) {
        let unread = self.buffer.len() - self.start;
        if self.body.is_some() || self.header.lines > 0 || unread > 0 || self.skipped > 0 {
            tracing::warn!(
                unread,
                skipped = self.skipped,
                "the input ended inside a frame"
            );
        }
    }

    fn header_length(&mut self, length: Result<usize, String>) {
        let header = &mut self.header;
        match length {
            Err(problem) => header.problem = Some(problem),
            Ok(length) if length > MAX_BODY => {
                header.problem = Some(format!(
                    "Content-Length {length} is over the {} MiB limit",
                    MAX_BODY >> 20
                ));
            }
            Ok(length) => match header.length {
                Some(earlier) if earlier != length => {
                    header.problem = Some(format!("two Content-Lengths, {earlier} and {length}"));
                }
                _ => header.length = Some(length),
            },
        }
    }

    fn end_header(&mut self) {
        let header = std::mem::take(&mut self.header);
        if header.lines == 0 {
            return;
        }
        match (header.problem, header.length) {
            (Some(problem), _) => {
                tracing::warn!("a frame from the client was skipped: {problem}");
            }
            (None, None) => {
                tracing::warn!(
                    "a frame from the client was skipped: its header has no Content-Length"
                );
            }
            (None, Some(length)) => {
                // Room for the whole body now: a 10 MB document read 64 KB at a time would
                // otherwise be copied again at each doubling of the buffer.
                self.buffer
                    .reserve(length.saturating_sub(self.buffer.len() - self.start));
                self.body = Some(length);
            }
        }
    }

    /// Skips `count` bytes that are no part of a frame, which start with `shown`; the first
    /// skipped since a good frame are shown in the log.
    fn skip(&mut self, count: usize, shown: String) {
        if self.skipped == 0 {
            tracing::warn!("skipping input that is not an LSP header: {shown:?}");
        }
        self.skipped += count;
    }
}

/// The start of `bytes`, for the log.
fn preview(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(PREVIEW)]).into_owned()
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// What a header line (without its line end) is.
fn classify(line: &[u8]) -> Line {
    if line.is_empty() {
        return Line::Blank;
    }
    let header = line.iter().position(|&b| b == b':').and_then(|colon| {
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        let token = !name.is_empty() && name.iter().all(|&b| is_token(b));
        token.then_some((name, value))
    });
    // Garbage may be glued to the front of the next header (a stray write without a line end).
    let name = CONTENT_LENGTH.strip_suffix(b":").unwrap_or(CONTENT_LENGTH);
    match header {
        Some((header, value)) => match header.len().checked_sub(name.len()) {
            Some(at) if header[at..].eq_ignore_ascii_case(name) => Line::Length {
                length: parse_length(value),
                skipped: at,
            },
            _ => Line::Other,
        },
        None => match find_ignoring_case(line, CONTENT_LENGTH) {
            Some(at) => Line::Length {
                length: parse_length(&line[at + CONTENT_LENGTH.len()..]),
                skipped: at,
            },
            None => Line::Garbage,
        },
    }
}

fn parse_length(value: &[u8]) -> Result<usize, String> {
    let value = String::from_utf8_lossy(value);
    let value = value.trim_matches([' ', '\t']);
    // Lengths too large for usize are absurd too.
    match value.parse::<u128>() {
        Ok(length) => Ok(usize::try_from(length).unwrap_or(usize::MAX)),
        Err(_) => Err(format!("Content-Length {value:?} is not a number")),
    }
}

/// A byte of an HTTP header name (RFC 9110 `tchar`).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn find_ignoring_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The header that frames a body of `length` bytes the way tower-lsp reads it.
fn header(length: usize) -> Vec<u8> {
    format!("Content-Length: {length}\r\n\r\n").into_bytes()
}

/// `body` framed the way tower-lsp reads it.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = header(body.len());
    framed.extend_from_slice(body);
    framed
}

/// The input tower-lsp reads: `input`'s valid messages, canonically framed. Error answers for
/// the bad ones go to `answers` (the client's output queue); a full queue holds up reading.
pub struct Filtered<R> {
    input: R,
    framer: Framer,
    chunk: Box<[u8]>,
    /// Framed messages for tower-lsp (each header, then its body, as they are: a body is not
    /// copied into one stream), and how much of the first it has read.
    ready: VecDeque<Vec<u8>>,
    taken: usize,
    /// Framed error answers not yet queued for the client.
    pending: VecDeque<Vec<u8>>,
    answers: PollSender<Vec<u8>>,
    /// Lone surrogates repaired so far.
    repaired: usize,
    ended: bool,
}

impl<R> Filtered<R> {
    /// Filters `input`; error answers are framed and sent to `answers`.
    pub fn new(input: R, answers: PollSender<Vec<u8>>) -> Self {
        Self {
            input,
            framer: Framer::default(),
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            ready: VecDeque::new(),
            taken: 0,
            pending: VecDeque::new(),
            answers,
            repaired: 0,
            ended: false,
        }
    }

    /// Checks the bodies the framer has, queueing messages and answers.
    fn take_bodies(&mut self) {
        while let Some(body) = self.framer.next_body() {
            let repaired = self.repaired;
            match message_check::check(body, &mut self.repaired) {
                Checked::Valid(message) => {
                    self.ready.push_back(header(message.len()));
                    self.ready.push_back(message);
                }
                Checked::Refused { answer, reason } => {
                    tracing::warn!(
                        code = answer["error"]["code"].as_i64(),
                        id = %answer["id"],
                        "a message from the client was refused: {reason}"
                    );
                    let answer = serde_json::to_vec(&answer).unwrap_or_default();
                    self.pending.push_back(frame(&answer));
                }
                Checked::Dropped(reason) => {
                    tracing::warn!("a message from the client was dropped: {reason}");
                }
            }
            if self.repaired > repaired {
                tracing::debug!(
                    total = self.repaired,
                    "lone surrogate escapes from the client were read as U+FFFD"
                );
            }
        }
    }

    /// Queues the pending answers; pending while the queue is full.
    fn poll_answers(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while !self.pending.is_empty() {
            match ready!(self.answers.poll_reserve(cx)) {
                Ok(()) => {
                    let answer = self.pending.pop_front().unwrap_or_default();
                    if self.answers.send_item(answer).is_err() {
                        self.pending.clear();
                    }
                }
                // The output is gone: nobody to answer.
                Err(_) => self.pending.clear(),
            }
        }
        Poll::Ready(())
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Filtered<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            let answers_held = this.poll_answers(cx).is_pending();
            if let Some(front) = this.ready.front() {
                let n = (front.len() - this.taken).min(buf.remaining());
                buf.put_slice(&front[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == front.len() {
                    this.ready.pop_front();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            // Reading on while the client takes no answers would queue them without bound.
            if answers_held {
                return Poll::Pending;
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.input).poll_read(cx, &mut chunk))?;
            let read = chunk.filled().len();
            if read == 0 {
                this.ended = true;
                this.framer.finish();
            } else {
                this.framer.push(&this.chunk[..read]);
                this.take_bodies();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};
    use tokio::io::AsyncReadExt as _;

    use super::*;

    const REQUEST: &[u8] =
        br#"{"jsonrpc":"2.0","id":1,"method":"workspace/executeCommand","params":{}}"#;
    const NOTE: &[u8] = br#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;

    /// The bodies `stream` holds, fed in pieces of `piece` bytes.
    fn bodies(stream: &[u8], piece: usize) -> Vec<Vec<u8>> {
        let mut framer = Framer::default();
        let mut out = Vec::new();
        for piece in stream.chunks(piece.max(1)) {
            framer.push(piece);
            while let Some(body) = framer.next_body() {
                out.push(body);
            }
        }
        framer.finish();
        out
    }

    fn with_header(header: &str, body: &[u8]) -> Vec<u8> {
        let mut framed = header.replace("{n}", &body.len().to_string()).into_bytes();
        framed.extend_from_slice(body);
        framed
    }

    #[test]
    fn headers_in_any_form_split_anywhere() {
        let headers = [
            "Content-Length: {n}\r\n\r\n",
            "content-length:{n}\r\n\r\n",
            "CONTENT-LENGTH: \t{n} \r\n\r\n",
            "Content-Type: application/vscode-jsonrpc\r\nContent-Length: {n}\r\n\r\n",
            "Content-Length: {n}\r\nContent-Type: application/vscode-jsonrpc; charset=UTF-8\r\n\r\n",
            "Content-Length: {n}\r\ncontent-type: application/vscode-jsonrpc; charset=utf8\r\n\r\n",
            "Content-Length: {n}\r\nContent-Type: text/plain; charset=latin1\r\nX-Other: 1\r\n\r\n",
            "Content-Length: {n}\n\n",
            "\r\n\r\nContent-Length: {n}\r\nContent-Length: {n}\r\n\r\n",
        ];
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for (i, header) in headers.iter().enumerate() {
            let body = if i % 2 == 0 { REQUEST } else { NOTE };
            stream.extend(with_header(header, body));
            expected.push(body.to_vec());
        }
        for piece in [1, 2, 3, 7, 64, stream.len()] {
            assert_eq!(bodies(&stream, piece), expected, "pieces of {piece}");
        }
    }

    #[test]
    fn bad_headers_are_skipped_and_reading_resyncs() {
        let good = frame(REQUEST);
        let cases: Vec<Vec<u8>> = vec![
            // Absurd lengths: refused unread; the body that follows is skipped as no header.
            [
                format!("Content-Length: {}\r\n\r\n{{\"a\":1}}", MAX_BODY + 1).as_bytes(),
                &good,
            ]
            .concat(),
            [
                b"Content-Length: 99999999999999999999999999\r\n\r\n".as_slice(),
                &good,
            ]
            .concat(),
            [b"Content-Length: lots\r\n\r\n".as_slice(), &good].concat(),
            [
                b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n".as_slice(),
                &good,
            ]
            .concat(),
            [b"Content-Type: x\r\n\r\n".as_slice(), &good].concat(),
            // Garbage lines, and garbage glued to the header's front.
            [b"hello there\r\nnot a header\n".as_slice(), &good].concat(),
            [b"\x00\xff garbage ".as_slice(), &good].concat(),
            [b"{\"jsonrpc\":\"2.0\"}".as_slice(), &good].concat(),
            // A line far longer than any header, with no line end for a while.
            [vec![b'x'; 3 * MAX_LINE].as_slice(), &good].concat(),
            [vec![b'x'; MAX_LINE].as_slice(), b"\r\n\r\n", &good].concat(),
        ];
        for stream in cases {
            let shown = String::from_utf8_lossy(&stream[..stream.len().min(50)]).into_owned();
            for piece in [1, 5, stream.len()] {
                assert_eq!(bodies(&stream, piece), vec![REQUEST.to_vec()], "{shown}");
            }
        }
    }

    #[test]
    fn the_buffer_stays_small_on_endless_garbage() {
        let mut framer = Framer::default();
        for _ in 0..1000 {
            framer.push(&[b'g'; 1000]);
            assert_eq!(framer.next_body(), None);
            assert!(framer.buffer.len() - framer.start <= MAX_LINE + 1000);
        }
    }

    /// A line longer than MAX_LINE is judged by its last MAX_LINE bytes whether it came in one
    /// read or in many (found by tests/fuzz.rs: a bad header early in a long line spoiled the
    /// good one at its end only when the line came whole).
    #[test]
    fn a_long_line_is_read_the_same_in_one_piece_or_many() {
        let mut stream = vec![b'x'; 1400];
        stream.extend_from_slice(b"Content-Length: ");
        stream.extend(vec![b'x'; 4500]);
        stream.extend(with_header("Content-Length: {n}\r\n\r\n", REQUEST));
        let whole = bodies(&stream, stream.len());
        assert_eq!(whole, vec![REQUEST.to_vec()]);
        for piece in [1, 7, 1000, 4096, 4097] {
            assert_eq!(bodies(&stream, piece), whole, "in pieces of {piece}");
        }
    }

    /// Through the filter: bad messages are answered on the answer queue, good ones reach
    /// tower-lsp canonically framed, and reading goes on to the end.
    #[tokio::test]
    async fn the_filter_passes_messages_and_queues_answers() {
        let mut input = Vec::new();
        input.extend(with_header("content-length: {n}\r\n\r\n", b"{\"jsonrpc\":"));
        input.extend(with_header(
            "Content-Type: application/vscode-jsonrpc\r\nContent-Length: {n}\r\n\r\n",
            NOTE,
        ));
        input.extend(frame(br#"{"jsonrpc":"1.0","id":"a","method":"x"}"#));
        input.extend(frame(
            br#"{"jsonrpc":"2.0","method":"m","params":{"t":"\ud83d"}}"#,
        ));
        input.extend(frame(REQUEST));
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let mut filtered = Filtered::new(input.as_slice(), PollSender::new(tx));
        let mut passed = Vec::new();
        filtered.read_to_end(&mut passed).await.unwrap();
        drop(filtered);
        let repaired = br#"{"jsonrpc":"2.0","method":"m","params":{"t":"\ufffd"}}"#;
        let repaired: Value = serde_json::from_slice(repaired).unwrap();
        let expected = [
            frame(NOTE),
            frame(&serde_json::to_vec(&repaired).unwrap()),
            frame(REQUEST),
        ]
        .concat();
        assert_eq!(passed, expected);
        let mut answers = Vec::new();
        while let Some(answer) = rx.recv().await {
            let body = bodies(&answer, answer.len()).pop().unwrap();
            let answer: Value = serde_json::from_slice(&body).unwrap();
            answers.push((answer["id"].clone(), answer["error"]["code"].clone()));
        }
        assert_eq!(
            answers,
            [(Value::Null, json!(-32700)), (json!("a"), json!(-32600))]
        );
    }

    /// Garbage that names no `Content-Length` (or names a broken one).
    fn garbage() -> impl Strategy<Value = Vec<u8>> {
        let fragment = prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..64),
            1 => Just(b"\r\n".to_vec()),
            1 => Just(b"\n".to_vec()),
            1 => Just(b": ".to_vec()),
            1 => Just(b"Content-Type: x".to_vec()),
            1 => Just(b"Content-Length: -1".to_vec()),
            1 => Just(b"Content-Length: 99999999999".to_vec()),
            1 => Just(b"{\"jsonrpc\":\"2.0\"".to_vec()),
        ];
        prop::collection::vec(fragment, 0..24).prop_map(|parts| parts.concat())
    }

    /// Whether the garbage, cut into lines, holds a header line with a length that could be
    /// read (it would frame what follows as its body).
    fn frames_something(garbage: &[u8]) -> bool {
        garbage.split(|&b| b == b'\n').any(|line| {
            matches!(
                classify(trim_cr(line)),
                Line::Length { length: Ok(n), .. } if n <= MAX_BODY
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Nothing panics, whatever the input and however it is split.
        #[test]
        fn random_input_never_panics(
            input in prop::collection::vec(any::<u8>(), 0..2048),
            piece in 1usize..300,
        ) {
            let delivered = bodies(&input, piece);
            for body in delivered {
                let _ = message_check::check(body, &mut 0);
            }
        }

        /// After garbage and a blank line, a valid message is still delivered.
        #[test]
        fn a_message_after_garbage_and_a_blank_line_is_delivered(
            garbage in garbage(),
            piece in 1usize..200,
        ) {
            prop_assume!(!frames_something(&garbage));
            let stream = [garbage.as_slice(), b"\r\n\r\n", &frame(REQUEST)].concat();
            let delivered = bodies(&stream, piece);
            prop_assert_eq!(delivered.last(), Some(&REQUEST.to_vec()));
            let checked = message_check::check(delivered.last().unwrap().clone(), &mut 0);
            prop_assert!(matches!(checked, Checked::Valid(_)));
        }
    }
}
