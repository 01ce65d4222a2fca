//! Follows an HTTP/1.1 client's bytes (RFC 9112): a request's head up to its empty line, then a
//! body of its `Content-Length` or in chunks (`Transfer-Encoding: chunked`), enough to know
//! whether it stopped in the middle of a request. Nothing is checked here (hyper does that and
//! closes a client that breaks the framing).

/// How much of a line is kept to read a header or a chunk size from; the rest only counted.
const LINE_KEPT: usize = 1024;

/// Where a client is in its requests.
#[derive(Debug, Default)]
pub(super) struct RequestScan {
    state: State,
    /// The start of the current line of the head, a chunk size or a trailer.
    line: Vec<u8>,
    /// What the head said of its body so far.
    content_length: u64,
    chunked: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No byte of a request yet (empty lines before one are skipped, as servers do).
    #[default]
    Between,
    /// In the request line or the header fields.
    Head,
    /// Bytes of a `Content-Length` body still to come.
    Body(u64),
    /// In a chunk-size line.
    ChunkSize,
    /// Data bytes of a chunk still to come.
    ChunkData(u64),
    /// In the line break after a chunk's data.
    ChunkEnd,
    /// In the trailer fields after the last chunk, up to the empty line.
    Trailers,
}

impl RequestScan {
    /// `bytes` arrived from the client.
    pub(super) fn feed(&mut self, mut bytes: &[u8]) {
        while let Some((&byte, rest)) = bytes.split_first() {
            match self.state {
                State::Body(left) | State::ChunkData(left) => {
                    let taken = (bytes.len() as u64).min(left);
                    bytes = &bytes[taken as usize..];
                    self.state = match (self.state, left - taken) {
                        (State::ChunkData(_), 0) => State::ChunkEnd,
                        (State::ChunkData(_), left) => State::ChunkData(left),
                        (_, 0) => State::Between,
                        (_, left) => State::Body(left),
                    };
                    continue;
                }
                State::Between if byte == b'\r' || byte == b'\n' => {}
                State::Between => {
                    self.state = State::Head;
                    self.line.clear();
                    self.line.push(byte);
                }
                _ if byte == b'\n' => self.line_ended(),
                _ => {
                    if self.line.len() < LINE_KEPT {
                        self.line.push(byte);
                    }
                }
            }
            bytes = rest;
        }
    }

    /// Whether the client is in the middle of a request.
    pub(super) fn in_the_middle(&self) -> bool {
        self.state != State::Between
    }

    fn line_ended(&mut self) {
        let mut kept = std::mem::take(&mut self.line);
        let line = kept.strip_suffix(b"\r").unwrap_or(&kept);
        self.state = match self.state {
            State::Head if line.is_empty() => {
                let state = if self.chunked {
                    State::ChunkSize
                } else if self.content_length > 0 {
                    State::Body(self.content_length)
                } else {
                    State::Between
                };
                (self.content_length, self.chunked) = (0, false);
                state
            }
            State::Head => {
                self.header(line);
                State::Head
            }
            State::ChunkSize => match chunk_size(line) {
                Some(0) => State::Trailers,
                Some(size) => State::ChunkData(size),
                // hyper refuses it and closes the connection.
                None => State::Between,
            },
            State::ChunkEnd => State::ChunkSize,
            State::Trailers if line.is_empty() => State::Between,
            other => other,
        };
        kept.clear();
        self.line = kept;
    }

    /// Notes what a header field of the head says of the body.
    fn header(&mut self, line: &[u8]) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            let length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            self.content_length = length.unwrap_or(0);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            self.chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
        }
    }
}

/// The size a chunk-size line gives (hex digits, then maybe `;` and extensions).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .map_or(line, |end| &line[..end]);
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Requests one after the other, each with a body of `Content-Length` (a `None` size: no
    /// header) or in chunks, its bytes anything; and where each one ends.
    fn requests(bodies: &[(bool, Vec<Vec<u8>>)]) -> (Vec<u8>, BTreeSet<usize>) {
        let (mut bytes, mut ends) = (Vec::new(), BTreeSet::from([0]));
        for (chunked, parts) in bodies {
            bytes.extend_from_slice(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:9\r\n");
            if *chunked {
                bytes.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                for part in parts.iter().filter(|p| !p.is_empty()) {
                    bytes.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    bytes.extend_from_slice(part);
                    bytes.extend_from_slice(b"\r\n");
                }
                bytes.extend_from_slice(b"0\r\n\r\n");
            } else {
                let body = parts.concat();
                if !body.is_empty() {
                    let header = format!("Content-Length: {}\r\n", body.len());
                    bytes.extend_from_slice(header.as_bytes());
                }
                bytes.extend_from_slice(b"\r\n");
                bytes.extend_from_slice(&body);
            }
            ends.insert(bytes.len());
        }
        (bytes, ends)
    }

    proptest! {
        /// However requests are cut into reads, the client is between requests exactly where
        /// one ended (bodies hold any bytes, blank lines and heads' look-alikes included).
        #[test]
        fn any_requests_cut_anywhere_are_followed(
            bodies in prop::collection::vec(
                (any::<bool>(), prop::collection::vec(
                    prop::collection::vec(
                        prop_oneof![any::<u8>(), Just(b'\r'), Just(b'\n')], 0..40),
                    0..4)),
                1..6),
            reads in prop::collection::vec(1usize..50, 1..20),
        ) {
            let (bytes, ends) = requests(&bodies);
            let mut scan = RequestScan::default();
            let (mut at, mut reads) = (0, reads.iter().cycle());
            while at < bytes.len() {
                let n = (*reads.next().unwrap()).min(bytes.len() - at);
                scan.feed(&bytes[at..at + n]);
                at += n;
                prop_assert_eq!(scan.in_the_middle(), !ends.contains(&at), "after {} bytes", at);
            }
        }
    }

    fn middle_after(parts: &[&[u8]]) -> Vec<bool> {
        let mut scan = RequestScan::default();
        parts
            .iter()
            .map(|part| {
                scan.feed(part);
                scan.in_the_middle()
            })
            .collect()
    }

    #[test]
    fn heads_and_bodies_are_followed_across_reads() {
        // A GET without a body, split in its head; then another on the same connection.
        let get = middle_after(&[b"GET / HTTP/1.1\r\nHo", b"st: x\r\n", b"\r\n", b"GET /"]);
        assert_eq!(get, [true, true, false, true]);
        // A POST of 5 bytes with the body split, another one right behind it in the same read.
        let post = middle_after(&[
            b"POST /mcp HTTP/1.1\r\ncontent-length:  5 \r\n\r\nab",
            b"c",
            b"de",
            b"POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyGET",
        ]);
        assert_eq!(post, [true, true, false, true]);
        // Line feeds alone end lines too; empty lines between requests are skipped.
        let bare = middle_after(&[b"\r\n\nGET / HTTP/1.1\nHost: x\n\n", b"\r\n"]);
        assert_eq!(bare, [false, false]);
    }

    #[test]
    fn chunks_are_followed_to_the_trailers_end() {
        let chunked = middle_after(&[
            b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n",
            b"5;ext=1\r\nhel",
            b"lo\r\n",
            b"10\r\n0123456789abcdef\r\n0\r\n",
            b"Trailer: x\r\n",
            b"\r\n",
        ]);
        assert_eq!(chunked, [true, true, true, true, true, false]);
        // A body after a chunked request is sized by its own head.
        let mut scan = RequestScan::default();
        scan.feed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
        scan.feed(b"POST / HTTP/1.1\r\n\r\n");
        assert!(!scan.in_the_middle(), "no Content-Length: no body");
    }

    #[test]
    fn long_lines_are_counted_not_kept() {
        let mut scan = RequestScan::default();
        scan.feed(b"GET / HTTP/1.1\r\nX-Long: ");
        scan.feed(&vec![b'a'; 100_000]);
        assert!(scan.line.len() <= LINE_KEPT);
        scan.feed(b"\r\nContent-Length: 3\r\n\r\nabc");
        assert!(!scan.in_the_middle());
    }
}
