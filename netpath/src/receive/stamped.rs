//! Sockets whose received bytes carry the kernel's receive time from the
//! first one: SO_TIMESTAMPNS is set on the socket before it listens or
//! connects, not after `accept` or `connect` returns.
//!
//! Why before: the kernel stamps a packet as it arrives only while some
//! socket on the host asks for timestamps (one switch for the host, turned
//! on by the first socket that sets the option), and a TCP receive hands
//! the stamp over only when the receiving socket has the option on.
//! Setting it once the connection is ours would leave the bytes that came
//! in between (queued before `accept`, right after the handshake) without
//! a time whenever nothing else on the host had it on; their records would
//! then say the receiver's clock (no `FLAG_KERNEL_TIME`), which is the
//! processing time. Set on a listener, the option is inherited by every
//! socket accepted from it (Linux copies the listener's socket flags into
//! the accepted socket, and counts it towards the host's switch).
//!
//! The switch is thrown by a kernel work item, not by the setsockopt
//! itself: on a host where no socket had timestamps on, packets that
//! arrive in the moment after the first one asks are still not stamped.
//! [`listen`] and [`connect`] therefore wait (briefly, bounded) until the
//! kernel stamps a probe byte on loopback ([`kernel_stamps`]) before they
//! take a connection.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::net::{AddressFamily, SocketFlags, SocketType};

/// A TCP socket for `addr`'s family with SO_TIMESTAMPNS on (close-on-exec).
/// A kernel that refuses the option still gives a socket: its records say
/// they carry the receiver's clock, and a warning says why.
fn socket_for(addr: &SocketAddr, flags: SocketFlags) -> std::io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | flags,
        None,
    )?;
    if let Err(e) = pktfs_fs::media::net::enable_rx_timestamps(fd.as_fd()) {
        tracing::warn!(
            "{addr}: the kernel refused receive timestamps (SO_TIMESTAMPNS: {e}); \
             records received on it carry this host's clock, not the arrival time"
        );
    }
    Ok(fd)
}

/// How long [`kernel_stamps`] waits for the kernel to start stamping.
const STAMPING_WAIT: Duration = Duration::from_millis(500);

/// Whether the kernel stamps arriving packets now, waiting (at most
/// [`STAMPING_WAIT`]) for it to start: the caller already holds a socket
/// with SO_TIMESTAMPNS on, which asked for it. Probes with one byte over a
/// loopback TCP connection of its own: a TCP receive carries a time only
/// when the packet was stamped on arrival. False when the kernel never
/// started (or loopback is unusable); records then say they carry the
/// clock.
pub fn kernel_stamps() -> bool {
    let probe = || -> std::io::Result<bool> {
        let l = bound(SocketAddr::from(([127, 0, 0, 1], 0)), 1)?;
        let mut c = TcpStream::connect(l.local_addr()?)?;
        // Each probe byte its own packet, at once (no Nagle wait).
        c.set_nodelay(true)?;
        let (a, _) = l.accept()?;
        a.set_read_timeout(Some(Duration::from_secs(1)))?;
        let t0 = std::time::Instant::now();
        let mut byte = [0u8; 1];
        loop {
            std::io::Write::write_all(&mut c, &[1])?;
            let (n, ts) = pktfs_fs::media::net::recv_timestamped_into(&a, &mut byte, 0)?;
            if n == 1 && ts.is_some() {
                return Ok(true);
            }
            if t0.elapsed() >= STAMPING_WAIT {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    match probe() {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!(
                "the kernel does not stamp received packets (SO_TIMESTAMPNS) after {STAMPING_WAIT:?}; \
                 records carry this host's clock, flagged as such"
            );
            false
        }
        Err(e) => {
            tracing::debug!("cannot probe for kernel receive timestamps on loopback: {e}");
            false
        }
    }
}

/// Listen on `addr` (SO_REUSEADDR, as `TcpListener::bind` sets it), with
/// receive timestamps on before `listen`, so every accepted connection has
/// them from its first byte.
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let l = bound(addr, libc::SOMAXCONN)?;
    kernel_stamps();
    Ok(l)
}

/// A listener on `addr` with timestamps on.
fn bound(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    let fd = socket_for(&addr, SocketFlags::empty())?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, backlog)?;
    Ok(TcpListener::from(fd))
}

/// [`listen`] on the first of `addrs` that works (as `TcpListener::bind`
/// tries each); the last error when none does.
pub fn listen_any(addrs: impl ToSocketAddrs) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in addrs.to_socket_addrs()? {
        match listen(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        )
    }))
}

/// Connect to `addr` (`host:port`, each address it resolves to in turn,
/// each given `timeout`), with receive timestamps on before the handshake,
/// so bytes the peer sends at once are stamped. Errors are for a person:
/// `connect 10.0.0.1:9000: Connection refused`.
pub fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, String> {
    let mut last = format!("{addr}: no address");
    for a in addr.to_socket_addrs().map_err(|e| format!("{addr}: {e}"))? {
        match connect_one(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect {a}: {e}"),
        }
    }
    Err(last)
}

fn connect_one(a: &SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let fd = socket_for(a, SocketFlags::NONBLOCK)?;
    // Bytes the peer sends right after the handshake are stamped too.
    kernel_stamps();
    match rustix::net::connect(&fd, a) {
        Ok(()) => {}
        Err(rustix::io::Errno::INPROGRESS) => wait_connected(&fd, timeout)?,
        Err(e) => return Err(e.into()),
    }
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Wait (at most `timeout`) for a non-blocking connect to finish; its
/// outcome is the socket's pending error.
fn wait_connected(fd: &OwnedFd, timeout: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {timeout:?}"),
            ));
        }
        let ts = rustix::event::Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [rustix::event::PollFd::new(
            fd,
            rustix::event::PollFlags::OUT,
        )];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return rustix::net::sockopt::socket_error(fd)?.map_err(Into::into),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timestamps_on(fd: impl AsFd) -> bool {
        pktfs_fs::media::net::rx_timestamps_enabled(fd).unwrap()
    }

    #[test]
    fn listener_and_accepted_and_connected_sockets_have_timestamps_on() {
        let l = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(timestamps_on(&l), "the listener, before any accept");
        assert!(kernel_stamps(), "and the kernel stamps what arrives");
        let c = connect(&l.local_addr().unwrap().to_string(), Duration::from_secs(5)).unwrap();
        assert!(timestamps_on(&c), "the connecting socket");
        let (a, _) = l.accept().unwrap();
        assert!(timestamps_on(&a), "accepted sockets inherit it");
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!timestamps_on(&plain), "the check can fail");
    }

    #[test]
    fn connect_errors_name_the_address() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        drop(l);
        let e = connect(&at.to_string(), Duration::from_secs(5)).unwrap_err();
        assert!(e.starts_with(&format!("connect {at}: ")), "{e}");
        let e = connect("no-such-host.invalid:1", Duration::from_secs(5)).unwrap_err();
        assert!(e.starts_with("no-such-host.invalid:1: "), "{e}");
    }
}
