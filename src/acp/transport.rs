//! Newline-delimited JSON-RPC over a pair of byte streams, for both sides of ACP. agentls reads
//! lines itself (instead of the SDK's `ByteStreams`) so that it can skip, loudly, what is not a
//! JSON message (stray prints on an agent's stdout), survive invalid UTF-8, and refuse lines
//! beyond [`MAX_LINE`] without holding them in memory.
//!
//! It also takes the hot path off the SDK: an agent streams its reply as one `session/update`
//! notification per token, and the SDK's dispatch costs about ten times a typed parse per
//! message (the line becomes a `Value`, is copied several times on its way to a typed handler,
//! through a chain of boxed handlers). With [`Direct`], each `session/update` is parsed once,
//! straight into its schema type, and handed over from the reader; every other line still goes
//! to the SDK. Order is kept: before an update is handed over, every line passed to the SDK
//! before it must have been dispatched, which the reader learns from a mark it sends through
//! the SDK behind them ([`DispatchMark`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::{JsonRpcMessage, JsonRpcNotification, Lines, UntypedMessage};
use futures::{Sink, Stream};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Notify;

/// The longest line accepted; longer ones are skipped (a 10 MB update is fine).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// What the reader did with a line that is not a message.
pub type OnSkipped = Arc<dyn Fn(SkippedLine) + Send + Sync>;

/// A line that was not passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkippedLine {
    /// Not JSON: the start of it.
    NotJson(String),
    /// Longer than [`MAX_LINE`]: how long it was.
    TooLong(usize),
}

/// Where `session/update` notifications go straight from the reader, once [`Dispatched::start`]
/// was called (until then, and for anything the typed parse refuses, they go to the SDK).
pub struct Direct {
    /// Takes each update, in the agent's order.
    pub apply: Box<dyn Fn(SessionNotification) + Send + Sync>,
    /// How far the SDK has dispatched what the reader passed to it.
    pub dispatched: Arc<Dispatched>,
}

/// How far the SDK's dispatch has come through the lines the reader passed to it, as told by
/// the [`DispatchMark`]s it dispatched; and whether updates may bypass it yet.
#[derive(Debug, Default)]
pub struct Dispatched {
    started: AtomicBool,
    mark: AtomicU64,
    moved: Notify,
}

impl Dispatched {
    /// Lets updates bypass the SDK from now on. Call it once the connection is initialized:
    /// before that, the SDK refuses notifications, marks included.
    pub fn start(&self) {
        self.started.store(true, Ordering::Release);
    }

    /// The SDK dispatched mark `mark` (and so every line before it).
    pub fn reached(&self, mark: u64) {
        self.mark.fetch_max(mark, Ordering::AcqRel);
        self.moved.notify_waiters();
    }

    fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Resolves once mark `mark` was dispatched.
    async fn until(&self, mark: u64) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            moved.as_mut().enable();
            if self.mark.load(Ordering::Acquire) >= mark {
                return;
            }
            moved.await;
        }
    }
}

/// The notification the reader sends through the SDK behind lines it passed on, to learn when
/// they were dispatched. Never sent to or received from an agent.
#[derive(Debug, Clone, Deserialize)]
pub struct DispatchMark {
    /// Counts the marks of one connection, from 1.
    pub mark: u64,
}

impl DispatchMark {
    /// Its JSON-RPC method.
    pub const METHOD: &str = "$/agentls/dispatched";

    fn line(mark: u64) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"mark":{mark}}}}}"#,
            Self::METHOD
        )
    }
}

impl JsonRpcMessage for DispatchMark {
    fn matches_method(method: &str) -> bool {
        method == Self::METHOD
    }

    fn method(&self) -> &str {
        Self::METHOD
    }

    fn to_untyped_message(&self) -> Result<UntypedMessage, agent_client_protocol::Error> {
        UntypedMessage::new(Self::METHOD, serde_json::json!({"mark": self.mark}))
    }

    fn parse_message(
        method: &str,
        params: &serde_json::Value,
    ) -> Result<Self, agent_client_protocol::Error> {
        if method != Self::METHOD {
            return Err(agent_client_protocol::Error::method_not_found());
        }
        Self::deserialize(params).map_err(|_| agent_client_protocol::Error::invalid_params())
    }
}

impl JsonRpcNotification for DispatchMark {}

/// The SDK transport over `outgoing` / `incoming`, telling `on_skipped` about every line it drops
/// and handing `session/update`s to `direct`, if given.
pub fn lines(
    outgoing: impl AsyncWrite + Unpin + Send + 'static,
    incoming: impl AsyncRead + Unpin + Send + 'static,
    on_skipped: OnSkipped,
    direct: Option<Direct>,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let sink = futures::sink::unfold(outgoing, |mut writer, line: String| async move {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        writer.write_all(&bytes).await?;
        writer.flush().await?;
        Ok::<_, std::io::Error>(writer)
    });
    Lines::new(sink, incoming_messages(incoming, on_skipped, direct))
}

/// How many lines the reader reads before it lets other tasks run. Measured with the
/// `acp_stream` bench (a keystroke's p95 round trip during a flood, and agentls's CPU per line):
/// every 128 (tokio's budget) 0.74-0.90 ms and 1.3 µs, every 16 0.58-0.71 ms and 1.5 µs, every 4
/// 0.53 ms and 1.9 µs.
const YIELD_EVERY: u32 = 16;

/// The reader's state between two lines given to the SDK.
struct Reader<R> {
    input: BufReader<R>,
    /// The current line's bytes (reused).
    line: Vec<u8>,
    on_skipped: OnSkipped,
    direct: Option<Direct>,
    /// Lines were passed to the SDK since the last mark.
    unmarked: bool,
    /// Lines read since the reader last let other tasks run.
    since_yield: u32,
    /// The last mark sent.
    mark: u64,
    /// An update waiting for the last mark to be dispatched.
    held: Option<SessionNotification>,
}

/// The JSON message lines of `incoming` for the SDK; everything else goes to `on_skipped`, and
/// `session/update`s to `direct`.
pub fn incoming_messages(
    incoming: impl AsyncRead + Unpin + Send + 'static,
    on_skipped: OnSkipped,
    direct: Option<Direct>,
) -> impl Stream<Item = std::io::Result<String>> + Send + 'static {
    let reader = Reader {
        input: BufReader::with_capacity(64 * 1024, incoming),
        line: Vec::new(),
        on_skipped,
        direct,
        unmarked: false,
        since_yield: 0,
        mark: 0,
        held: None,
    };
    Box::pin(futures::stream::unfold(reader, |mut reader| async move {
        let next = reader.next().await.transpose()?;
        Some((next, reader))
    }))
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// The next line for the SDK; `Ok(None)` at the end of input.
    async fn next(&mut self) -> std::io::Result<Option<String>> {
        loop {
            // A flood is read in one go while the pipe has data: every few lines, let the
            // thread run what waits behind it. `yield_now` resumes this task only after the
            // runtime has looked for I/O, so a keystroke waiting in stdin is read in between
            // (the coop budget would yield every 128 lines, and not always to the I/O).
            self.since_yield += 1;
            if self.since_yield == YIELD_EVERY {
                self.since_yield = 0;
                tokio::task::yield_now().await;
            }
            if let (Some(note), Some(direct)) = (self.held.take(), &self.direct) {
                direct.dispatched.until(self.mark).await;
                (direct.apply)(note);
            }
            let line = match read_message_line(&mut self.input, &mut self.line).await? {
                None => return Ok(None),
                Some(Err(skipped)) => {
                    (self.on_skipped)(skipped);
                    continue;
                }
                Some(Ok(line)) => line,
            };
            if let Some(direct) = self.direct.as_ref().filter(|d| d.dispatched.started()) {
                match classify(&line) {
                    Line::Update(note) if !self.unmarked => {
                        (direct.apply)(note);
                        continue;
                    }
                    Line::Update(note) => {
                        self.unmarked = false;
                        self.mark += 1;
                        self.held = Some(note);
                        return Ok(Some(DispatchMark::line(self.mark)));
                    }
                    Line::Mark => {
                        // Only agentls marks its lines: one from the agent would release
                        // updates before what precedes them is dispatched.
                        tracing::warn!("dropped a {} from the agent", DispatchMark::METHOD);
                        continue;
                    }
                    Line::Other => {}
                }
            }
            self.unmarked = true;
            return Ok(Some(line.into_owned()));
        }
    }
}

/// A message whose params are a `session/update`'s, parsed in one pass (most lines of a
/// streamed reply are such notifications).
#[derive(Deserialize)]
struct UpdateMessage<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(default, deserialize_with = "present")]
    id: bool,
    params: SessionNotification,
}

/// The method of a JSON-RPC message, for the lines that are not updates.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
}

/// `true` for a field that is there (even `null`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Ok(true)
}

/// What the reader does with a line.
#[allow(
    clippy::large_enum_variant,
    reason = "short-lived, and boxing would cost an allocation per update"
)]
enum Line {
    /// A well-formed `session/update` notification: handed over directly.
    Update(SessionNotification),
    /// A [`DispatchMark`] (from the agent: dropped).
    Mark,
    /// Anything else: for the SDK.
    Other,
}

/// Tells a `session/update` notification (parsed into its type) from the rest.
fn classify(line: &str) -> Line {
    if let Some(note) = super::text_chunks::parse(line) {
        return Line::Update(note);
    }
    if let Ok(message) = serde_json::from_str::<UpdateMessage>(line) {
        let notification = message.jsonrpc == "2.0" && !message.id;
        return match message.method.as_ref() {
            "session/update" if notification => Line::Update(message.params),
            DispatchMark::METHOD => Line::Mark,
            _ => Line::Other,
        };
    }
    match serde_json::from_str::<Envelope>(line) {
        Ok(envelope) if envelope.method.as_deref() == Some(DispatchMark::METHOD) => Line::Mark,
        _ => Line::Other,
    }
}

/// The next line that looks like a JSON message (`Ok(Some(Ok))`), a skipped line
/// (`Ok(Some(Err))`), or the end of input (`Ok(None)`). `buffer` holds the line's bytes.
async fn read_message_line<'b>(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    buffer: &'b mut Vec<u8>,
) -> std::io::Result<Option<Result<Cow<'b, str>, SkippedLine>>> {
    let range = loop {
        let Some(total) = read_capped(reader, buffer).await? else {
            return Ok(None);
        };
        if total > MAX_LINE {
            return Ok(Some(Err(SkippedLine::TooLong(total))));
        }
        let start = buffer.len() - buffer.trim_ascii_start().len();
        let end = buffer.trim_ascii_end().len();
        if start < end {
            break start..end;
        }
    };
    let text = String::from_utf8_lossy(&buffer[range]);
    if text.starts_with('{') {
        return Ok(Some(Ok(text)));
    }
    let preview: String = text.trim().chars().take(200).collect();
    Ok(Some(Err(SkippedLine::NotJson(preview))))
}

/// Reads one raw line (without its newline) into `line` and returns its full length; only the
/// first [`MAX_LINE`] bytes are kept. `None` at the end of input.
async fn read_capped(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    line.clear();
    // A buffer grown by a long line is not kept for the short ones after it.
    if line.capacity() > 1024 * 1024 {
        *line = Vec::new();
    }
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let newline = memchr_newline(available);
        let chunk = &available[..newline.unwrap_or(available.len())];
        total += chunk.len();
        if total <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            *line = Vec::new();
        }
        let consumed = newline.map_or(available.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some(total));
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, SessionUpdate};
    use futures::StreamExt as _;
    use serde_json::{Value, json};

    use super::*;

    fn update(text: &str) -> String {
        let chunk = ContentChunk::new(ContentBlock::from(text));
        let note = SessionNotification::new("s", SessionUpdate::AgentMessageChunk(chunk));
        json!({"jsonrpc": "2.0", "method": "session/update", "params": note}).to_string()
    }

    fn request(id: u64) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": {}})
            .to_string()
    }

    /// What reached agentls from `input`, in order: `applied X` for an update handed over
    /// directly, `sdk …` for a line the SDK dispatched. The SDK's stand-in reads ahead and
    /// dispatches each line a few scheduler turns later, as the SDK does (its reader feeds an
    /// unbounded queue).
    async fn through(input: &[String], start: bool) -> Vec<String> {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let dispatched = Arc::new(Dispatched::default());
        if start {
            dispatched.start();
        }
        let direct = Direct {
            apply: Box::new({
                let log = Arc::clone(&log);
                move |note| {
                    let SessionUpdate::AgentMessageChunk(chunk) = note.update else {
                        panic!("{note:?}")
                    };
                    let ContentBlock::Text(text) = chunk.content else {
                        panic!("{chunk:?}")
                    };
                    log.lock().unwrap().push(format!("applied {}", text.text));
                }
            }),
            dispatched: Arc::clone(&dispatched),
        };
        let input = std::io::Cursor::new(format!("{}\n", input.join("\n")).into_bytes());
        let mut stream = incoming_messages(input, Arc::new(|_| {}), Some(direct));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let reading = async move {
            while let Some(line) = stream.next().await {
                tx.send(line.unwrap()).unwrap();
            }
        };
        let dispatching = async {
            while let Some(line) = rx.recv().await {
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["method"] == DispatchMark::METHOD {
                    dispatched.reached(message["params"]["mark"].as_u64().unwrap());
                    continue;
                }
                let what = match message["params"]["update"]["content"]["text"].as_str() {
                    Some(text) => format!("sdk update {text}"),
                    None => format!("sdk {} {}", message["method"], message["id"]),
                };
                log.lock().unwrap().push(what);
            }
        };
        tokio::join!(reading, dispatching);
        log.lock().unwrap().clone()
    }

    /// Updates bypass the SDK, but never overtake a line the SDK has not dispatched yet: the
    /// agent's order is kept.
    #[tokio::test]
    async fn direct_updates_keep_their_place_among_the_sdks_lines() {
        let input = [
            update("a"),
            request(1),
            update("b"),
            update("c"),
            request(2),
            request(3),
            update("d"),
        ];
        assert_eq!(
            through(&input, true).await,
            [
                "applied a",
                r#"sdk "session/request_permission" 1"#,
                "applied b",
                "applied c",
                r#"sdk "session/request_permission" 2"#,
                r#"sdk "session/request_permission" 3"#,
                "applied d",
            ]
        );
    }

    /// Before the connection is initialized (the SDK would refuse a mark), and for what the
    /// typed parse refuses, updates take the SDK's way; a mark from the agent is dropped.
    #[tokio::test]
    async fn updates_go_to_the_sdk_until_started_and_when_not_well_formed() {
        let input = [update("a"), request(1), update("b")];
        assert_eq!(
            through(&input, false).await,
            [
                "sdk update a",
                r#"sdk "session/request_permission" 1"#,
                "sdk update b",
            ]
        );
        let malformed = json!({"jsonrpc": "2.0", "method": "session/update",
                               "params": {"update": {"sessionUpdate": "agent_message_chunk",
                                                     "content": {"type": "text", "text": "x"}}}});
        let with_id = update("y").replacen('{', r#"{"id":7,"#, 1);
        let forged = DispatchMark::line(99);
        let input = [malformed.to_string(), with_id, forged, update("z")];
        assert_eq!(
            through(&input, true).await,
            ["sdk update x", "sdk update y", "applied z"]
        );
    }

    async fn all_lines(input: &[u8]) -> Vec<Result<String, SkippedLine>> {
        let mut reader = BufReader::with_capacity(7, input);
        let mut buffer = Vec::new();
        let mut out = Vec::new();
        while let Some(line) = read_message_line(&mut reader, &mut buffer).await.unwrap() {
            out.push(line.map(Cow::into_owned));
        }
        out
    }

    #[tokio::test]
    async fn json_lines_pass_and_noise_is_skipped() {
        let input = b"{\"a\":1}\nhello world\n\n  {\"b\":2}  \r\n\xff\xfe not utf8\n{\"c\":3}";
        let lines = all_lines(input).await;
        assert_eq!(
            lines,
            vec![
                Ok("{\"a\":1}".into()),
                Err(SkippedLine::NotJson("hello world".into())),
                Ok("{\"b\":2}".into()),
                Err(SkippedLine::NotJson("\u{fffd}\u{fffd} not utf8".into())),
                Ok("{\"c\":3}".into()),
            ]
        );
    }

    #[tokio::test]
    async fn a_ten_megabyte_line_passes_whole() {
        let big = format!("{{\"x\":\"{}\"}}\n{{}}\n", "y".repeat(10 * 1024 * 1024));
        let lines = all_lines(big.as_bytes()).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].as_ref().unwrap().len(), 10 * 1024 * 1024 + 8);
    }
}
