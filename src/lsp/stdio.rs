//! The server's stdin and stdout, read and written on the runtime's own thread (Unix).
//!
//! tokio's `Stdin` and `Stdout` hand every read and every write to a blocking thread and wake
//! the task when it is done: two thread switches per frame written (agentls writes a frame at a
//! time), which on two cores made the permission round trip and a keystroke's reply wait behind
//! whatever else was runnable. Editors start a language server on a pipe (Helix, Emacs) or on a
//! socket pair (Neovim and VS Code, through libuv); either is put in non-blocking mode and
//! registered with the runtime's poller, so a read or a write is one system call on the thread
//! that asked. Anything else (a terminal, a file) keeps tokio's. Writes are gathered in a
//! buffer and go out at each flush (`outbox::write_frames` flushes after each batch).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::FileType;
use tokio::io::{AsyncRead, AsyncWrite, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// How much written output is gathered before it goes out without a flush.
const WRITE_BUFFER: usize = 64 * 1024;

/// The process's stdin (`stdin`), read on the runtime's poller when it is a pipe or a socket;
/// else `fallback` (tokio's).
pub fn input(
    stdin: impl AsFd,
    fallback: impl AsyncRead + Unpin + Send + 'static,
) -> Box<dyn AsyncRead + Unpin + Send> {
    match polled(stdin.as_fd(), pipe::Receiver::from_owned_fd) {
        Some(Polled::Pipe(pipe)) => Box::new(pipe),
        Some(Polled::Socket(socket)) => Box::new(socket),
        None => Box::new(fallback),
    }
}

/// The process's stdout (`stdout`), buffered until each flush, written on the runtime's poller
/// when it is a pipe or a socket; else through `fallback` (tokio's).
pub fn output(
    stdout: impl AsFd,
    fallback: impl AsyncWrite + Unpin + Send + 'static,
) -> Box<dyn AsyncWrite + Unpin + Send> {
    match polled(stdout.as_fd(), pipe::Sender::from_owned_fd) {
        Some(Polled::Pipe(pipe)) => Box::new(BufWriter::with_capacity(WRITE_BUFFER, pipe)),
        Some(Polled::Socket(socket)) => Box::new(BufWriter::with_capacity(WRITE_BUFFER, socket)),
        None => Box::new(BufWriter::with_capacity(WRITE_BUFFER, fallback)),
    }
}

/// A standard stream on the runtime's poller: a pipe's end (`P`) or a socket.
enum Polled<P> {
    Pipe(P),
    Socket(UnixStream),
}

/// A copy of `fd` on the runtime's poller when it is a pipe (made into `P` by `pipe_end`) or a
/// socket, the two an editor starts a server with; `None` otherwise. The copy shares the open
/// file, so the non-blocking mode set on it holds for the standard stream too; nothing else in
/// the server uses that stream. Only reads and writes are used, so a socket's family does not
/// matter.
fn polled<P>(
    fd: BorrowedFd<'_>,
    pipe_end: impl FnOnce(OwnedFd) -> std::io::Result<P>,
) -> Option<Polled<P>> {
    let kind = FileType::from_raw_mode(rustix::fs::fstat(fd).ok()?.st_mode);
    if !matches!(kind, FileType::Fifo | FileType::Socket) {
        return None;
    }
    let copy = fd.try_clone_to_owned().ok()?;
    if kind == FileType::Fifo {
        return pipe_end(copy).ok().map(Polled::Pipe);
    }
    let socket = std::os::unix::net::UnixStream::from(copy);
    socket.set_nonblocking(true).ok()?;
    UnixStream::from_std(socket).ok().map(Polled::Socket)
}
