//! The server's stdin and stdout, read and written on the runtime's own thread (Unix).
//!
//! tokio's `Stdin` and `Stdout` hand every read and every write to a blocking thread and wake
//! the task when it is done: two thread switches per frame written (agentls writes a frame at a
//! time), which on two cores made the permission round trip and a keystroke's reply wait behind
//! whatever else was runnable. Editors start a language server on a pipe (Helix, Emacs) or on a
//! socket pair (Neovim and VS Code, through libuv); either is put in non-blocking mode and
//! registered with the runtime's poller, so a read or a write is one system call on the thread
//! that asked. Anything else (a terminal, a file) keeps tokio's. Writes are gathered in a
//! buffer and go out at each flush (`transport::write_frames` flushes after each batch).

use tokio::io::{AsyncRead, AsyncWrite, BufWriter};

/// How much written output is gathered before it goes out without a flush.
const WRITE_BUFFER: usize = 64 * 1024;

/// The process's stdin (`stdin`), read on the runtime's poller when it is a pipe or a socket;
/// else `fallback` (tokio's).
pub fn input(
    stdin: impl std::os::fd::AsFd,
    fallback: impl AsyncRead + Unpin + Send + 'static,
) -> Box<dyn AsyncRead + Unpin + Send> {
    match unix::input(stdin.as_fd()) {
        Some(polled) => polled,
        None => Box::new(fallback),
    }
}

/// The process's stdout (`stdout`), buffered until each flush, written on the runtime's poller
/// when it is a pipe or a socket; else through `fallback` (tokio's).
pub fn output(
    stdout: impl std::os::fd::AsFd,
    fallback: impl AsyncWrite + Unpin + Send + 'static,
) -> Box<dyn AsyncWrite + Unpin + Send> {
    match unix::output(stdout.as_fd()) {
        Some(polled) => Box::new(BufWriter::with_capacity(WRITE_BUFFER, polled)),
        None => Box::new(BufWriter::with_capacity(WRITE_BUFFER, fallback)),
    }
}

mod unix {
    use std::os::fd::{BorrowedFd, OwnedFd};

    use rustix::fs::FileType;
    use tokio::io::{AsyncRead, AsyncWrite};
    use tokio::net::UnixStream;
    use tokio::net::unix::pipe;

    /// `fd` to read from when it is a pipe or a socket; `None` otherwise.
    pub(super) fn input(fd: BorrowedFd<'_>) -> Option<Box<dyn AsyncRead + Unpin + Send>> {
        let (kind, fd) = polled(fd)?;
        let reader: Box<dyn AsyncRead + Unpin + Send> = match kind {
            FileType::Fifo => Box::new(pipe::Receiver::from_owned_fd(fd).ok()?),
            _ => Box::new(stream(fd)?),
        };
        Some(reader)
    }

    /// `fd` to write to when it is a pipe or a socket; `None` otherwise.
    pub(super) fn output(fd: BorrowedFd<'_>) -> Option<Box<dyn AsyncWrite + Unpin + Send>> {
        let (kind, fd) = polled(fd)?;
        let writer: Box<dyn AsyncWrite + Unpin + Send> = match kind {
            FileType::Fifo => Box::new(pipe::Sender::from_owned_fd(fd).ok()?),
            _ => Box::new(stream(fd)?),
        };
        Some(writer)
    }

    /// A copy of `fd` and its kind, when it is a pipe or a socket (the two an editor starts a
    /// server with). The copy shares the open file, so the non-blocking mode set on it holds
    /// for the standard stream too; nothing else in the server uses that stream.
    fn polled(fd: BorrowedFd<'_>) -> Option<(FileType, OwnedFd)> {
        let stat = rustix::fs::fstat(fd).ok()?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if !matches!(kind, FileType::Fifo | FileType::Socket) {
            return None;
        }
        let copy = fd.try_clone_to_owned().ok()?;
        Some((kind, copy))
    }

    /// A socket `fd` in non-blocking mode on the runtime's poller. Only reads and writes are
    /// used, so the socket's family does not matter.
    fn stream(fd: OwnedFd) -> Option<UnixStream> {
        let socket = std::os::unix::net::UnixStream::from(fd);
        socket.set_nonblocking(true).ok()?;
        UnixStream::from_std(socket).ok()
    }
}
