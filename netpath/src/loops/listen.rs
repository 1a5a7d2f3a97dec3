//! One listening socket per loop, all bound to the same address with
//! SO_REUSEPORT: the kernel spreads new connections over the loops by a
//! hash of the 4-tuple, with no thundering herd and no accept lock, and a
//! loop accepts only its own. Each listener has SO_TIMESTAMPNS, which its
//! connections inherit.

use std::net::{SocketAddr, TcpListener};

use rustix::net::{sockopt, AddressFamily, SocketType};

/// Backlog of each listener (the kernel caps it at net.core.somaxconn):
/// deep enough for a burst of thousands of connects while a loop turns.
const BACKLOG: i32 = 4096;

fn one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let fam = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        fam,
        SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_socket_reuseport(&fd, true)?;
    // Before listen: a connection is cloned from its listener when its
    // handshake completes, options included, so every accepted socket
    // has SO_TIMESTAMPNS from its first byte, bytes that arrive before
    // the loop accepts it included (each segment is stamped on arrival).
    // A listener without it would store clock readings (marked as such).
    if let Err(e) = pktfs_fs::media::net::enable_rx_timestamps(&fd) {
        tracing::warn!(
            "{addr}: SO_TIMESTAMPNS: {e}; received records will carry the loop's clock, \
             not the kernel's receive time"
        );
    }
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, BACKLOG)?;
    Ok(TcpListener::from(fd))
}

/// `n` listeners on `addr` (port 0: a free port chosen first).
///
/// SO_REUSEPORT would also let this group join another process's group on
/// the same port (same user), silently splitting its connections; so the
/// address is first bound once without it, which fails with EADDRINUSE
/// when anything listens there (and picks the port for port 0).
pub fn reuseport_listeners(addr: SocketAddr, n: usize) -> std::io::Result<Vec<TcpListener>> {
    let addr = {
        let probe = TcpListener::bind(addr)?;
        probe.local_addr()?
    };
    let first = one(addr)?;
    let bound = first.local_addr()?;
    let mut v = vec![first];
    for _ in 1..n.max(1) {
        v.push(one(bound)?);
    }
    // The listeners asked the kernel to stamp arriving packets; it starts
    // a moment later (`crate::receive::stamped`): wait for it before the
    // loops take connections, so early bytes carry their arrival time.
    crate::receive::stamped::kernel_stamps();
    Ok(v)
}
