//! Slow and idle clients cost others nothing, on both transports: a head
//! trickled in one byte at a time and a body that stalls are answered 408
//! (or closed) once their timeouts pass, and meanwhile another client's
//! requests are answered promptly; on the io_uring loops a thousand idle
//! keep-alive connections (no thread each) do not keep a new client out.
//! Nothing of the abandoned uploads becomes visible or stays allocated.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use pktfs_netpath::IoMode;

use crate::net_common;
use crate::net_common::{data, server, Conn, Server};

const MIB: u64 = 1 << 20;
/// The well-behaved client's file names.
const NAMES: usize = 8;
/// The head and body timeouts of these servers.
const TIMEOUT: Duration = Duration::from_millis(1000);
/// How long one small request of a well-behaved client may take here: far
/// below TIMEOUT, so a client that had to wait for a slow one's timeout
/// would fail it (generous for a loaded debug build otherwise).
const PROMPT: Duration = Duration::from_millis(600);

fn start(io: IoMode) -> Server {
    server(64 * MIB, |c| {
        c.io = io;
        c.header_timeout = TIMEOUT;
        c.io_timeout = TIMEOUT;
        c.idle_timeout = Duration::from_secs(60);
    })
}

/// Trickle a request head one byte every 50 ms until the server answers
/// or closes: (the answer's status if any, how long it took).
fn slowloris(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) -> (Option<u16>, Duration) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nonblocking(true).unwrap();
    let head = b"PUT /slowloris HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    let t0 = Instant::now();
    let mut got = Vec::new();
    for &b in head.iter().cycle() {
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
        if stop.load(Ordering::Relaxed) || t0.elapsed() > Duration::from_secs(20) {
            break;
        }
        if s.write_all(&[b]).is_err() {
            break;
        }
        // The pacing is the attack itself (each byte well inside the body
        // timeout, the whole head never inside the head timeout).
        thread::sleep(Duration::from_millis(50));
    }
    let status = String::from_utf8_lossy(&got)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok());
    (status, t0.elapsed())
}

fn abuse_does_not_delay_others(io: IoMode) {
    let s = start(io);
    let st0 = s.vol.statfs();
    let stop = Arc::new(AtomicBool::new(false));
    let addr = s.http;
    let loris = {
        let stop = stop.clone();
        thread::spawn(move || slowloris(addr, stop))
    };
    // A body that stalls after its first kilobyte.
    let mut stall = Conn::new(addr);
    stall.send(b"PUT /stalled HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n");
    stall.send(&data(1024, 7));
    let stall_t0 = Instant::now();

    // Meanwhile: a well-behaved client, PUT then GET on fresh connections.
    let mut worst = Duration::ZERO;
    let t_all = Instant::now();
    let mut k = 0;
    while t_all.elapsed() < TIMEOUT * 2 || k < 20 {
        let b = data(1000 + k, k as u64);
        let t = Instant::now();
        let mut c = Conn::new(addr);
        // Eight names, overwritten in turn (a few thousand requests run).
        let path = format!("/ok/{}", k % NAMES);
        let r = c.request("PUT", &path, &[], &b);
        assert!(r.status == 201 || r.status == 204, "{io:?}: PUT {k}: {r:?}");
        let r = c.request("GET", &path, &[], b"");
        assert_eq!(r.status, 200, "{io:?}: GET {k}");
        assert!(r.body == b, "{io:?}: GET {k}: wrong bytes");
        worst = worst.max(t.elapsed());
        k += 1;
    }
    assert!(
        worst < PROMPT,
        "{io:?}: a well-behaved request took {worst:?} while slow clients were connected"
    );

    // The stalled body is answered 408 or closed, after its timeout.
    let r = stall.response(false);
    assert!(
        r.as_ref().is_none_or(|r| r.status == 408),
        "{io:?}: stalled body: {r:?}"
    );
    let waited = stall_t0.elapsed();
    assert!(
        waited >= TIMEOUT.mul_f32(0.9) && waited < TIMEOUT * 6,
        "{io:?}: stalled body closed after {waited:?}"
    );
    // The trickled head likewise.
    let (status, took) = loris.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    assert!(
        status.is_none_or(|c| c == 408),
        "{io:?}: slowloris answered {status:?}"
    );
    assert!(
        took >= TIMEOUT.mul_f32(0.9) && took < TIMEOUT * 6,
        "{io:?}: slowloris cut off after {took:?}"
    );

    s.settle();
    assert!(s.lookup("/slowloris").is_none() && s.lookup("/stalled").is_none());
    let st1 = s.vol.statfs();
    // Only the well-behaved uploads (and their directory) took inodes.
    assert_eq!(st0.files_free - st1.files_free, NAMES as u64 + 1, "{io:?}");
    s.check();
}

#[test]
fn slow_clients_do_not_delay_others_on_the_loops() {
    abuse_does_not_delay_others(IoMode::Uring);
}

#[test]
fn slow_clients_do_not_delay_others_on_epoll() {
    abuse_does_not_delay_others(IoMode::Epoll);
}

#[test]
fn slow_clients_do_not_delay_others_on_threads() {
    abuse_does_not_delay_others(IoMode::Threads);
}

#[test]
fn a_thousand_idle_keepalive_connections_do_not_keep_a_client_out() {
    let s = start(IoMode::Uring);
    let mut idle = Vec::new();
    for i in 0..1000 {
        let mut c = Conn::new(s.http);
        if i % 10 == 0 {
            // Some have been used, then sit idle (keep-alive).
            let r = c.request("PUT", &format!("/idle/{i}"), &[], b"x");
            assert_eq!(r.status, 201);
        }
        idle.push(c);
    }
    let t = Instant::now();
    let b = data(4096, 9);
    let r = net_common::http(s.http, "PUT", "/newcomer", &[], &b);
    assert_eq!(r.status, 201, "a new client behind 1,000 idle connections");
    let r = net_common::http(s.http, "GET", "/newcomer", &[], b"");
    assert_eq!(r.status, 200);
    assert!(r.body == b);
    assert!(
        t.elapsed() < PROMPT,
        "the new client waited {:?} behind idle connections",
        t.elapsed()
    );
    // Every idle connection is still open and still served.
    for (i, c) in idle.iter_mut().enumerate().step_by(97) {
        let r = c.request("GET", "/newcomer", &[], b"");
        assert_eq!(r.status, 200, "idle connection {i}");
    }
    assert!(s.stats().refused == 0, "{:?}", s.stats());
    drop(idle);
    s.check();
}

/// Inodes in use (files, directories, unnamed files).
fn inodes_used(s: &Server) -> u64 {
    let st = s.vol.statfs();
    st.files - st.files_free
}

/// After a PUT a keep-alive connection makes the unnamed file for its next
/// upload ahead of time; such spares are capped server-wide, go back when
/// their connections close, and an upload into one carries the times of
/// its own request.
fn spares_are_capped_and_freed(io: IoMode) {
    const CONNS: usize = 300;
    let s = server(64 * MIB, |c| {
        c.io = io;
        c.max_connections = Some(CONNS + 16);
    });
    let before = inodes_used(&s);
    let mut conns = Vec::new();
    for i in 0..CONNS {
        let mut c = Conn::new(s.http);
        let r = c.request("PUT", &format!("/sp/{i}"), &[], b"x");
        assert_eq!(r.status, 201);
        conns.push(c);
    }
    // The files, their directory, and one spare per connection up to the
    // cap (made after each answer was sent).
    let named = CONNS as u64 + 1;
    let cap = pktfs_netpath::http::MAX_SPARES as u64;
    assert!(CONNS as u64 > cap, "the test must pass the cap");
    net_common::wait_until("the spares are made", Duration::from_secs(10), || {
        inodes_used(&s) == before + named + cap
    });
    // A second upload on a connection takes its spare: its times are the
    // request's, not the spare's.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let r = conns[0].request("PUT", "/sp/second", &[], b"yz");
    assert_eq!(r.status, 201);
    let a = s.lookup("/sp/second").expect("stored");
    assert!(
        a.atime_ns >= t0 && a.mtime_ns >= t0 && a.ctime_ns >= t0,
        "times {a:?} before the request at {t0}"
    );
    assert_eq!(s.read("/sp/second").unwrap(), b"yz");
    // Connections gone: their spares are freed, the stored files stay.
    drop(conns);
    s.settle();
    assert_eq!(inodes_used(&s), before + named + 1);
    assert!(s.stats().refused == 0, "{:?}", s.stats());
    s.check();
}

#[test]
fn spares_are_capped_and_freed_on_the_loops() {
    spares_are_capped_and_freed(IoMode::Uring);
}

#[test]
fn spares_are_capped_and_freed_on_epoll() {
    spares_are_capped_and_freed(IoMode::Epoll);
}

#[test]
fn spares_are_capped_and_freed_on_threads() {
    spares_are_capped_and_freed(IoMode::Threads);
}

/// On an image with few inodes no spares are made: idle connections do
/// not hold the inodes that uploads need, and every inode can be used.
#[test]
fn no_spares_while_inodes_are_scarce() {
    let s = server(8 * MIB, |c| c.io = IoMode::Uring);
    let free = s.vol.statfs().files_free;
    assert!(
        free < pktfs_netpath::http::SPARE_MIN_FREE_INODES,
        "the image must be short of inodes ({free} free)"
    );
    let before = inodes_used(&s);
    let mut conns = Vec::new();
    for i in 0..40 {
        let mut c = Conn::new(s.http);
        let r = c.request("PUT", &format!("/few/{i}"), &[], b"x");
        assert_eq!(r.status, 201);
        conns.push(c);
    }
    // Every answer is out and the loop has gone on: a spare would exist.
    let r = conns[0].request("GET", "/few/0", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(
        inodes_used(&s),
        before + 40 + 1,
        "files and their directory only"
    );
    // The remaining inodes all go to uploads, to the last one.
    let left = s.vol.statfs().files_free;
    for i in 0..left {
        let r = conns[(i % 40) as usize].request("PUT", &format!("/few/more{i}"), &[], b"y");
        assert_eq!(r.status, 201, "upload {i} of the {left} inodes left");
    }
    let r = conns[0].request("PUT", "/few/one-too-many", &[], b"z");
    assert_eq!(r.status, 507, "no inode left");
    drop(conns);
    s.check();
}
