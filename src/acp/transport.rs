//! Newline-delimited JSON-RPC over a pair of byte streams, for both sides of ACP. agentls reads
//! lines itself (instead of the SDK's `ByteStreams`) so that it can skip, loudly, what is not a
//! JSON message (stray prints on an agent's stdout), survive invalid UTF-8, and refuse lines
//! beyond [`MAX_LINE`] without holding them in memory.

use std::sync::Arc;

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

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

/// The SDK transport over `outgoing` / `incoming`, telling `on_skipped` about every line it drops.
pub fn lines(
    outgoing: impl AsyncWrite + Unpin + Send + 'static,
    incoming: impl AsyncRead + Unpin + Send + 'static,
    on_skipped: OnSkipped,
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
    Lines::new(sink, incoming_messages(incoming, on_skipped))
}

/// The JSON message lines of `incoming`; everything else goes to `on_skipped`.
pub fn incoming_messages(
    incoming: impl AsyncRead + Unpin + Send + 'static,
    on_skipped: OnSkipped,
) -> impl Stream<Item = std::io::Result<String>> + Send + 'static {
    let reader = BufReader::with_capacity(64 * 1024, incoming);
    Box::pin(futures::stream::unfold(
        (reader, on_skipped),
        |(mut reader, on_skipped)| async move {
            loop {
                match read_message_line(&mut reader).await {
                    Ok(None) => return None,
                    Ok(Some(Ok(line))) => return Some((Ok(line), (reader, on_skipped))),
                    Ok(Some(Err(skipped))) => on_skipped(skipped),
                    Err(e) => return Some((Err(e), (reader, on_skipped))),
                }
            }
        },
    ))
}

/// The next line that looks like a JSON message (`Ok(Some(Ok))`), a skipped line
/// (`Ok(Some(Err))`), or the end of input (`Ok(None)`).
async fn read_message_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> std::io::Result<Option<Result<String, SkippedLine>>> {
    loop {
        let Some((line, total)) = read_capped(reader).await? else {
            return Ok(None);
        };
        if total > MAX_LINE {
            return Ok(Some(Err(SkippedLine::TooLong(total))));
        }
        let text = String::from_utf8_lossy(&line);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with('{') {
            return Ok(Some(Ok(trimmed.to_owned())));
        }
        let preview: String = trimmed.chars().take(200).collect();
        return Ok(Some(Err(SkippedLine::NotJson(preview))));
    }
}

/// One raw line (without its newline) and its full length; only the first [`MAX_LINE`] bytes
/// are kept. `None` at the end of input.
async fn read_capped(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> std::io::Result<Option<(Vec<u8>, usize)>> {
    let mut line = Vec::new();
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((total > 0).then_some((line, total)));
        }
        let newline = memchr_newline(available);
        let chunk = &available[..newline.unwrap_or(available.len())];
        total += chunk.len();
        if total <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            line = Vec::new();
        }
        let consumed = newline.map_or(available.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some((line, total)));
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all_lines(input: &[u8]) -> Vec<Result<String, SkippedLine>> {
        let mut reader = BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        while let Some(line) = read_message_line(&mut reader).await.unwrap() {
            out.push(line);
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
