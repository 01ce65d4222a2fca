//! Which local account opened a loopback connection: the kernel's socket diagnostics
//! (`NETLINK_SOCK_DIAG`, what `ss -e` reads) asked for the one socket at the client's end, by
//! its address and port. One round trip to the kernel, whatever else is open on the machine
//! (reading `/proc/net/tcp` instead costs a line per socket, and anyone can open many). Linux
//! only; elsewhere, and whenever the kernel does not answer, the owner is unknown.

use std::net::SocketAddr;

/// The uid owning the socket at `client`'s end of a connection to `server`, both on loopback.
pub fn uid(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        linux::uid(client, server)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (client, server);
        None
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::net::{IpAddr, SocketAddr};
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

    /// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    /// `INET_DIAG_NOCOOKIE`: any socket with this address, whatever its cookie.
    const NO_COOKIE: u32 = !0;
    /// Every TCP state (the client's end of an accepted connection is `ESTABLISHED`, or
    /// already closing).
    const ALL_STATES: u32 = !0;

    /// `struct inet_diag_sockid` (linux/inet_diag.h): ports and addresses in network order.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct SockId {
        sport: u16,
        dport: u16,
        src: [u32; 4],
        dst: [u32; 4],
        interface: u32,
        cookie: [u32; 2],
    }

    /// `struct nlmsghdr` followed by `struct inet_diag_req_v2`.
    #[repr(C)]
    struct Request {
        len: u32,
        kind: u16,
        flags: u16,
        seq: u32,
        pid: u32,
        family: u8,
        protocol: u8,
        ext: u8,
        pad: u8,
        states: u32,
        id: SockId,
    }

    /// `struct nlmsghdr` followed by `struct inet_diag_msg`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Reply {
        len: u32,
        kind: u16,
        flags: u16,
        seq: u32,
        pid: u32,
        family: u8,
        state: u8,
        timer: u8,
        retransmits: u8,
        id: SockId,
        expires: u32,
        rqueue: u32,
        wqueue: u32,
        uid: u32,
        inode: u32,
    }

    fn v4(addr: SocketAddr) -> Option<(u16, [u32; 4])> {
        match addr.ip() {
            IpAddr::V4(ip) => Some((
                addr.port().to_be(),
                [u32::from_ne_bytes(ip.octets()), 0, 0, 0],
            )),
            IpAddr::V6(_) => None,
        }
    }

    pub fn uid(client: SocketAddr, server: SocketAddr) -> Option<u32> {
        let ((sport, src), (dport, dst)) = (v4(client)?, v4(server)?);
        let request = Request {
            len: std::mem::size_of::<Request>() as u32,
            kind: SOCK_DIAG_BY_FAMILY,
            flags: libc::NLM_F_REQUEST as u16,
            seq: 1,
            pid: 0,
            family: libc::AF_INET as u8,
            protocol: libc::IPPROTO_TCP as u8,
            ext: 0,
            pad: 0,
            states: ALL_STATES,
            // The socket whose own end is the client's: the kernel looks it up as the one a
            // packet from `dst:dport` to `src:sport` would reach.
            id: SockId {
                sport,
                dport,
                src,
                dst,
                interface: 0,
                cookie: [NO_COOKIE; 2],
            },
        };
        // SAFETY: socket(2) takes integers; a non-negative result is a new descriptor we own.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: setsockopt(2) reads `size_of::<timeval>()` bytes from a live timeval; send(2)
        // reads `request.len` bytes from `request`, which is exactly that long.
        let sent = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            );
            libc::send(
                fd.as_raw_fd(),
                (&raw const request).cast(),
                request.len as usize,
                0,
            )
        };
        if sent != request.len as isize {
            return None;
        }
        let mut buffer = [0u8; 512];
        // SAFETY: recv(2) writes at most `buffer.len()` bytes into `buffer`.
        let received =
            unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        let received = usize::try_from(received).ok()?;
        if received < std::mem::size_of::<Reply>() {
            return None; // an NLMSG_ERROR (no such socket) is shorter
        }
        // SAFETY: `buffer` holds at least `size_of::<Reply>()` initialised bytes, and `Reply`
        // is plain integers, valid for any bit pattern; the read is unaligned-safe.
        let reply: Reply = unsafe { std::ptr::read_unaligned(buffer.as_ptr().cast()) };
        let same_socket = reply.id.sport == sport && reply.id.dport == dport;
        (reply.kind == SOCK_DIAG_BY_FAMILY && same_socket).then_some(reply.uid)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_loopback_client_is_found_as_our_own_account() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // SAFETY: getuid(2) cannot fail.
        let me = unsafe { libc::getuid() };
        assert_eq!(super::uid(peer, listener.local_addr().unwrap()), Some(me));
        // A port nobody uses has no owner.
        let gone = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(super::uid(gone, listener.local_addr().unwrap()), None);
    }
}
