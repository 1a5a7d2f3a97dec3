//! Reading one request on the holder's side: a JSON line of at most
//! [`MAX_REQUEST`] bytes within [`REQUEST_DEADLINE`], and at most one
//! passed descriptor, which must be a connected TCP socket.

use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

pub use pktfs_control::{MAX_REQUEST, REQUEST_DEADLINE};

/// Descriptors a single recvmsg makes room for: more than the one a
/// request may pass, so a client passing several is seen (and refused)
/// rather than silently cut to one.
const FD_ROOM: usize = 4;

/// Why a request was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("the request line was not complete within {} s", .0.as_secs())]
    Deadline(Duration),
    #[error("the request line is longer than {0} bytes")]
    TooLong(usize),
    #[error("the request is not UTF-8")]
    NotUtf8,
    #[error(
        "{0} descriptors were passed with the request; at most one (a connected TCP socket) may be"
    )]
    TooManyFds(usize),
    #[error("the descriptor passed with the request is not a connected TCP socket: {0}")]
    NotTcp(String),
    #[error("reading the request: {0}")]
    Io(#[from] std::io::Error),
}

/// A request as read: the line (with its newline), and the TCP socket
/// passed with it, if any.
#[derive(Debug)]
pub(crate) struct Request {
    pub line: String,
    pub passed: Option<TcpStream>,
}

/// Read one request line from `s`, and the descriptor passed with it
/// (SCM_RIGHTS, received close-on-exec so no child of the holder inherits
/// it). `Ok(None)`: the client closed without sending anything (a probe,
/// [`super::is_held`]).
pub(crate) fn read_request(s: &UnixStream) -> Result<Option<Request>, RequestError> {
    read_within(s, REQUEST_DEADLINE, MAX_REQUEST)
}

fn read_within(
    s: &UnixStream,
    deadline: Duration,
    max: usize,
) -> Result<Option<Request>, RequestError> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};
    use std::mem::MaybeUninit;
    let end = Instant::now() + deadline;
    let mut buf = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut cut = false; // the kernel dropped descriptors that did not fit
    let mut chunk = [0u8; 1024];
    while !buf.contains(&b'\n') {
        // One byte past the bound is read, to tell a line of exactly `max`
        // bytes from a longer one.
        let room = (max + 1 - buf.len()).min(chunk.len());
        if room == 0 {
            return Err(RequestError::TooLong(max));
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(RequestError::Deadline(deadline));
        }
        s.set_read_timeout(Some(left))?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FD_ROOM))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let r = match rustix::net::recvmsg(
            s,
            &mut [std::io::IoSliceMut::new(&mut chunk[..room])],
            &mut cmsg,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(r) => r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::AGAIN) => return Err(RequestError::Deadline(deadline)),
            Err(e) => return Err(RequestError::Io(e.into())),
        };
        cut |= r.flags.contains(ReturnFlags::CTRUNC);
        for m in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(passed) = m {
                fds.extend(passed);
            }
        }
        if r.bytes == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..r.bytes]);
    }
    if buf.len() > max {
        return Err(RequestError::TooLong(max));
    }
    if buf.is_empty() && fds.is_empty() {
        return Ok(None);
    }
    // Every descriptor not returned is closed as `fds` drops.
    if fds.len() > 1 || cut {
        // Cut: more were passed than there was room for; say at least that.
        let n = if cut {
            fds.len().max(FD_ROOM + 1)
        } else {
            fds.len()
        };
        return Err(RequestError::TooManyFds(n));
    }
    let passed = fds.pop().map(tcp_stream).transpose()?;
    let line = String::from_utf8(buf).map_err(|_| RequestError::NotUtf8)?;
    Ok(Some(Request { line, passed }))
}

/// `fd` as a TcpStream if it is one: a stream socket of the IPv4 or IPv6
/// family, protocol TCP, connected. The holder reads and writes file data
/// on it, so anything else (a pipe, a Unix socket, a listening socket) is
/// refused rather than trusted to behave like a TCP peer.
fn tcp_stream(fd: OwnedFd) -> Result<TcpStream, RequestError> {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let not = |why: String| RequestError::NotTcp(why);
    let ty = sockopt::socket_type(&fd).map_err(|e| not(format!("not a socket ({e})")))?;
    if ty != SocketType::STREAM {
        return Err(not(format!("a socket of type {ty:?}, not a stream")));
    }
    let family = sockopt::socket_domain(&fd).map_err(|e| not(e.to_string()))?;
    if family != AddressFamily::INET && family != AddressFamily::INET6 {
        return Err(not(format!("a {family:?} socket, not IPv4 or IPv6")));
    }
    let proto = sockopt::socket_protocol(&fd).map_err(|e| not(e.to_string()))?;
    if proto != Some(rustix::net::ipproto::TCP) {
        return Err(not(format!("protocol {proto:?}, not TCP")));
    }
    match rustix::net::getpeername(&fd) {
        Ok(Some(_)) => Ok(TcpStream::from(fd)),
        Ok(None) | Err(_) => Err(not("it is not connected".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn pass(s: &UnixStream, line: &[u8], fds: &[std::os::fd::BorrowedFd<'_>]) {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut cmsg = SendAncillaryBuffer::new(&mut space);
        assert!(cmsg.push(SendAncillaryMessage::ScmRights(fds)));
        rustix::net::sendmsg(
            s,
            &[std::io::IoSlice::new(line)],
            &mut cmsg,
            SendFlags::empty(),
        )
        .unwrap();
    }

    #[test]
    fn a_line_is_read() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"{\"op\":\"stat\"}\n").unwrap();
        let r = read_request(&b).unwrap().unwrap();
        assert_eq!(r.line, "{\"op\":\"stat\"}\n");
        assert!(r.passed.is_none());
    }

    #[test]
    fn a_probe_is_none() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(a);
        assert!(read_request(&b).unwrap().is_none());
    }

    #[test]
    fn a_line_of_exactly_the_bound_is_read_and_one_more_is_refused() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut line = vec![b'x'; MAX_REQUEST - 1];
        line.push(b'\n');
        a.write_all(&line).unwrap();
        assert_eq!(read_request(&b).unwrap().unwrap().line.len(), MAX_REQUEST);
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&vec![b'x'; MAX_REQUEST]).unwrap();
        a.write_all(b"\n").unwrap();
        assert!(matches!(read_request(&b), Err(RequestError::TooLong(_))));
    }

    #[test]
    fn the_deadline_is_for_the_whole_line() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            // A byte every 100 ms: each read is quick, the line never ends.
            for _ in 0..30 {
                if a.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t0 = Instant::now();
        let r = read_within(&b, Duration::from_millis(600), MAX_REQUEST);
        assert!(matches!(r, Err(RequestError::Deadline(_))), "{r:?}");
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t0.elapsed()
        );
        drop(b);
        t.join().unwrap();
    }

    #[test]
    fn a_connected_tcp_socket_is_taken() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        pass(&a, b"{\"op\":\"recv\"}\n", &[c.as_fd()]);
        let r = read_request(&b).unwrap().unwrap();
        assert!(r.passed.is_some());
    }

    #[test]
    fn other_descriptors_are_refused_and_closed() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut pr, pw) = std::io::pipe().unwrap();
        let (u1, _u2) = UnixStream::pair().unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let cases: [(&str, std::os::fd::BorrowedFd<'_>); 4] = [
            ("pipe", pw.as_fd()),
            ("unix", u1.as_fd()),
            ("listener", l.as_fd()),
            ("udp", udp.as_fd()),
        ];
        for (what, fd) in cases {
            let (a, b) = UnixStream::pair().unwrap();
            pass(&a, b"{\"op\":\"recv\"}\n", &[fd]);
            let r = read_request(&b);
            assert!(matches!(r, Err(RequestError::NotTcp(_))), "{what}: {r:?}");
        }
        // The holder's copy of the pipe's write end is closed: with ours
        // gone too, the read end sees end of file.
        drop(pw);
        let mut one = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut pr, &mut one).unwrap(), 0);
    }

    #[test]
    fn two_descriptors_are_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c1 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        pass(&a, b"{\"op\":\"recv\"}\n", &[c1.as_fd(), c2.as_fd()]);
        assert!(matches!(read_request(&b), Err(RequestError::TooManyFds(2))));
    }
}
