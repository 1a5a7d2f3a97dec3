//! Clients that keep a request alive with a byte just under every
//! `io_timeout` after its head (a body, a chunk-size line, the trailer
//! section), on the io_uring loops, the loops on epoll and threads: each is
//! answered 408 or closed within about two timeouts and stores nothing
//! (`Config::min_recv_rate`; a line's `header_timeout`), while a client
//! sending its body at a steady, slow but real pace is served.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use pktfs_netpath::IoMode;

use crate::net_common::{data, server, Server};

const MIB: u64 = 1 << 20;
/// `io_timeout` and `header_timeout` of the servers here.
const T: Duration = Duration::from_millis(1000);
/// The trickle: one byte per PACE, each inside T.
const PACE: Duration = Duration::from_millis(900);
/// A trickling client must be cut off within this of its head (two
/// windows, and the loaded machine's slack).
const CUT: Duration = Duration::from_millis(3300);

fn trickle_server(io: IoMode) -> Server {
    server(64 * MIB, |c| {
        c.io = io;
        c.io_timeout = T;
        c.header_timeout = T;
        c.idle_timeout = T;
    })
}

/// How a trickling client ended.
#[derive(Debug)]
struct Cut {
    /// The answer's status, if any came.
    status: Option<u16>,
    /// From its head sent to the answer or close.
    after: Duration,
}

/// Send `prefix` at once, then `trickle` one byte per PACE until the
/// server answers or closes (20 s at most: then `after` shows it).
fn trickler(addr: SocketAddr, prefix: &[u8], trickle: &[u8]) -> Cut {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(prefix).unwrap();
    let t0 = Instant::now();
    s.set_read_timeout(Some(PACE)).unwrap();
    let mut got = Vec::new();
    let mut bytes = trickle.iter().cycle();
    let mut closed = false;
    while t0.elapsed() < Duration::from_secs(20) {
        let mut b = [0u8; 4096];
        match s.read(&mut b) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => {
                got.extend_from_slice(&b[..n]);
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
        if s.write_all(&[*bytes.next().unwrap()]).is_err() {
            closed = true;
            break;
        }
    }
    let after = t0.elapsed();
    assert!(closed || !got.is_empty(), "never cut off in {after:?}");
    let status = String::from_utf8_lossy(&got)
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok());
    Cut { status, after }
}

fn trickled_requests_are_cut_off(io: IoMode) {
    let s = trickle_server(io);
    let st0 = s.vol.statfs();
    let head = |path: &str, framing: &str| {
        format!("PUT {path} HTTP/1.1\r\nHost: x\r\n{framing}\r\n").into_bytes()
    };
    let chunked = "Transfer-Encoding: chunked\r\n";
    let with = |mut h: Vec<u8>, more: &[u8]| {
        h.extend_from_slice(more);
        h
    };
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        (
            "Content-Length body",
            head("/t/body", "Content-Length: 100000\r\n"),
            b"0123456789".to_vec(),
        ),
        (
            // Leading zeros: a chunk-size line as long as max_header_bytes.
            "chunk-size line",
            with(head("/t/line", chunked), b"5\r\nhello\r\n"),
            b"0".to_vec(),
        ),
        (
            "chunk data",
            with(head("/t/data", chunked), b"100000\r\n"),
            b"abcdef".to_vec(),
        ),
        (
            "trailer section",
            with(head("/t/trailer", chunked), b"5\r\nhello\r\n0\r\nX-T: "),
            b"a".to_vec(),
        ),
    ];
    let addr = s.http;
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(name, prefix, trickle)| {
            thread::spawn(move || (name, trickler(addr, &prefix, &trickle)))
        })
        .collect();
    for r in runs {
        let (name, cut) = r.join().unwrap();
        assert!(
            cut.status.is_none_or(|c| c == 408),
            "{io:?}, {name}: answered {cut:?}"
        );
        assert!(
            cut.after < CUT,
            "{io:?}, {name}: held {:?} by a byte per {PACE:?} (io_timeout {T:?})",
            cut.after
        );
    }
    s.settle();
    for p in ["/t/body", "/t/line", "/t/data", "/t/trailer"] {
        assert!(s.lookup(p).is_none(), "{io:?}: {p} was stored");
    }
    let st1 = s.vol.statfs();
    assert_eq!(st0.files_free, st1.files_free, "{io:?}: files made");
    s.check();
}

/// 10 KiB/s for 3 s (three windows, ten times the default rate): served.
fn a_slow_steady_body_is_served(io: IoMode) {
    let s = trickle_server(io);
    let body = data(30 << 10, 7);
    let mut c = TcpStream::connect(s.http).unwrap();
    c.set_nodelay(true).unwrap();
    let head = format!(
        "PUT /steady HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    let t0 = Instant::now();
    for (k, piece) in body.chunks(1024).enumerate() {
        // 1 KiB every 100 ms, on a fixed schedule.
        let at = t0 + Duration::from_millis(100) * k as u32;
        thread::sleep(at.saturating_duration_since(Instant::now()));
        if let Err(e) = c.write_all(piece) {
            let mut got = Vec::new();
            let _ = c.read_to_end(&mut got);
            panic!(
                "{io:?}: piece {k} after {:?}: {e}; the server said {:?}",
                t0.elapsed(),
                String::from_utf8_lossy(&got)
            );
        }
    }
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 201"), "{io:?}: {head}");
    assert_eq!(s.read("/steady").as_deref(), Some(&body[..]), "{io:?}");
    drop(c);
    s.check();
}

on_every_transport!(trickled_requests_are_cut_off, a_slow_steady_body_is_served);
