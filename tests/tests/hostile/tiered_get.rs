//! GETs of tiered files (issue "safe to expose", part 3): the range is
//! fetched and sent in bounded windows off the loop thread. On the
//! io_uring loops, the epoll loops and the threads: the bytes are exact
//! and the fetched bytes held at once stay within a few windows; a slow
//! store does not stall the loop's other connections; a fetch that fails
//! mid-body cuts the connection short of its Content-Length; a client
//! that leaves mid-GET leaves no reference, pin or fetched byte behind.
//!
//! The store is in process (a [`pktfs_fs::RemoteSource`] with a delay and a
//! failure switch), so no object store is needed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pktfs_fs::{RemoteBytes, RemoteSource, Volume};
use pktfs_netpath::IoMode;

use crate::net_common::{data, http, server, wait_until, Conn, Server};

const KIB: u64 = 1 << 10;
/// The windows these tests use: small, so a file of a few MiB is many.
const WINDOW: u64 = 256 * KIB;
const FILE: usize = 6 << 20;
const OBJ: u64 = 1;

/// Objects in DRAM; every fetch waits `delay_ms`; fetches at or past
/// `fail_from` of an object fail (the store is "down" for them).
#[derive(Debug, Default)]
struct FakeStore {
    objs: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    delay_ms: AtomicU64,
    fail_from: AtomicU64,
    fetches: AtomicU64,
}

impl RemoteSource for FakeStore {
    fn fetch(&self, _ino: u64, obj: u64, off: u64, len: u32) -> Result<RemoteBytes, String> {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let d = self.delay_ms.load(Ordering::Relaxed);
        if d > 0 {
            std::thread::sleep(Duration::from_millis(d));
        }
        if off >= self.fail_from.load(Ordering::Relaxed) {
            return Err(format!("object {obj} at {off}: the test store is down"));
        }
        let o = self
            .objs
            .lock()
            .map_err(|_| "poisoned".to_string())?
            .get(&obj)
            .cloned()
            .ok_or_else(|| format!("object {obj} not found"))?;
        let end = off as usize + len as usize;
        RemoteBytes::range(o, off as usize..end).ok_or_else(|| format!("short object {obj}"))
    }
}

fn uring_usable() -> crate::prereq::Check {
    pktfs_netpath::loops::choose(IoMode::Uring, 1)
        .map(|_| ())
        .map_err(|e| format!("io_uring is not usable in this process: {e}"))
}

/// A server on one loop (`io`) with a tiered file `/big` of `FILE` bytes
/// in one object of a fake store (everything fetchable, no delay yet).
fn tiered(io: IoMode) -> (Server, Arc<FakeStore>, Vec<u8>) {
    let s = server(64 << 20, |c| {
        c.io = io;
        c.loops = 1;
        c.io_timeout = Duration::from_secs(5);
        c.tier_window_bytes = WINDOW;
    });
    let store = Arc::new(FakeStore {
        fail_from: AtomicU64::new(u64::MAX),
        ..FakeStore::default()
    });
    assert!(s.vol.set_remote_source(store.clone()));
    let want = data(FILE, 58);
    assert_eq!(http(s.http, "PUT", "/big", &[], &want).status, 201);
    let ino = s.lookup("/big").expect("stored").ino;
    tier_out(&s.vol, &store, ino);
    (s, store, want)
}

/// Tier every local record of `ino` out into object `OBJ`, as the engine
/// does: hold, read, store, switch.
fn tier_out(v: &Volume, store: &FakeStore, ino: u64) {
    let out = v.tier_begin(ino, u64::MAX).expect("tier_begin");
    let mut body = Vec::new();
    let mut placed = Vec::new();
    for k in 0..out.extents().len() {
        placed.push((OBJ, body.len() as u64));
        body.extend_from_slice(out.bytes(k).expect("extent bytes"));
    }
    store.objs.lock().unwrap().insert(OBJ, Arc::new(body));
    let rep = v.tier_switch(out, &placed).expect("tier_switch");
    assert_eq!(rep.bytes, FILE as u64, "the whole file is tiered");
}

/// Records of object `OBJ` the volume counts live (pins included).
fn live_records(s: &Server) -> u64 {
    s.vol.remote_objects().get(&OBJ).map_or(0, |o| o.records)
}

/// A GET read raw: status, Content-Length, the body bytes that came, and
/// whether the connection closed before Content-Length bytes.
struct Raw {
    status: u16,
    len: usize,
    body: Vec<u8>,
    cut: bool,
}

fn raw_get(addr: std::net::SocketAddr, path: &str, extra: &str) -> Raw {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").unwrap();
    let mut buf = Vec::new();
    let mut b = vec![0u8; 64 << 10];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => panic!("closed before a head: {:?}", String::from_utf8_lossy(&buf)),
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .expect("Content-Length");
    let mut body = buf[head_end..].to_vec();
    let mut cut = false;
    while body.len() < len {
        match s.read(&mut b) {
            Ok(0) | Err(_) => {
                cut = true;
                break;
            }
            Ok(n) => body.extend_from_slice(&b[..n]),
        }
    }
    Raw {
        status,
        len,
        body,
        cut,
    }
}

/// Everything a tiered GET held is back: fetched bytes, references (the
/// volume's invariants), object pins.
fn all_given_back(s: &Server, records: u64) {
    s.settle();
    wait_until("fetched bytes given back", Duration::from_secs(10), || {
        s.stats().tier_fetched_bytes == 0
    });
    s.check();
    assert_eq!(live_records(s), records, "no object pin left behind");
}

fn exact_and_bounded(io: IoMode) {
    let (s, _store, want) = tiered(io);
    let records = live_records(&s);
    assert!(records > 8, "a file of many records ({records})");
    let r = raw_get(s.http, "/big", "");
    assert_eq!((r.status, r.len, r.cut), (200, FILE, false));
    assert!(r.body == want, "the tiered file's bytes, exactly");
    // A range across many windows, starting and ending inside records.
    let (a, b) = (100_001usize, FILE - 77_777);
    let r = raw_get(s.http, "/big", &format!("Range: bytes={a}-{}\r\n", b - 1));
    assert_eq!((r.status, r.len, r.cut), (206, b - a, false));
    assert!(r.body == want[a..b], "the range's bytes, exactly");
    let st = s.stats();
    assert!(
        st.tier_fetched_peak > 0,
        "the GETs fetched through the pool or budget"
    );
    // One window being sent and the next fetched: two, plus a record of
    // rounding (a window is whole records).
    assert!(
        st.tier_fetched_peak <= 3 * WINDOW,
        "peak fetched bytes {} > 3 windows of {WINDOW}",
        st.tier_fetched_peak
    );
    all_given_back(&s, records);
}

#[test]
fn exact_bytes_bounded_peak_uring() {
    require!(uring_usable());
    exact_and_bounded(IoMode::Uring);
}

#[test]
fn exact_bytes_bounded_peak_epoll() {
    exact_and_bounded(IoMode::Epoll);
}

#[test]
fn exact_bytes_bounded_peak_threads() {
    exact_and_bounded(IoMode::Threads);
}

/// While a GET waits on a slow store, the same loop answers others.
fn loop_not_blocked(io: IoMode) {
    let (s, store, want) = tiered(io);
    // Each fetch takes 150 ms: the whole file, fetched at once on the
    // loop, would stall it for seconds.
    store.delay_ms.store(150, Ordering::Relaxed);
    assert_eq!(http(s.http, "PUT", "/small", &[], b"hello").status, 201);
    let done = Arc::new(AtomicBool::new(false));
    let (addr, d2) = (s.http, done.clone());
    let big = std::thread::spawn(move || {
        let r = raw_get(addr, "/big", "");
        d2.store(true, Ordering::SeqCst);
        r
    });
    // The GET is under way (its first fetch is in).
    wait_until("a fetch began", Duration::from_secs(10), || {
        store.fetches.load(Ordering::Relaxed) > 0
    });
    let mut c = Conn::new(s.http);
    let mut worst = Duration::ZERO;
    for k in 0..5 {
        let t = Instant::now();
        let r = c.request("GET", "/small", &[], &[]);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
        let body = format!("put {k}");
        let r = c.request("PUT", &format!("/p{k}"), &[], body.as_bytes());
        assert_eq!(r.status, 201);
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !done.load(Ordering::SeqCst),
        "the tiered GET was still in progress while the others were answered"
    );
    assert!(
        worst < Duration::from_millis(500),
        "a small GET+PUT on the same loop took {worst:?} while a tiered GET waited on the store"
    );
    drop(c);
    let r = big.join().unwrap();
    assert_eq!((r.status, r.cut), (200, false));
    assert!(r.body == want);
    all_given_back(&s, live_records(&s));
}

#[test]
fn slow_store_does_not_block_the_loop_uring() {
    require!(uring_usable());
    loop_not_blocked(IoMode::Uring);
}

#[test]
fn slow_store_does_not_block_the_loop_epoll() {
    loop_not_blocked(IoMode::Epoll);
}

/// The store fails half way: the head went out with the first window, so
/// the connection is cut short of Content-Length (never a complete-looking
/// body), and the bytes that did come are the file's. Failing from the
/// start is answered with an error instead.
fn fails_mid_body(io: IoMode) {
    let (s, store, want) = tiered(io);
    let records = live_records(&s);
    store.fail_from.store(FILE as u64 / 2, Ordering::Relaxed);
    let r = raw_get(s.http, "/big", "");
    assert_eq!((r.status, r.len), (200, FILE));
    assert!(r.cut, "the connection closed before Content-Length");
    assert!(r.body.len() < FILE, "a short body ({} bytes)", r.body.len());
    assert!(r.body == want[..r.body.len()], "what came is the file's");
    store.fail_from.store(0, Ordering::Relaxed);
    // Another file, not in the verified records kept from the last GET.
    let r = Conn::new(s.http).request("GET", "/big", &[("Range", "bytes=5000000-5000099")], &[]);
    assert_eq!(
        r.status, 503,
        "a store that is down before the head: an error answer"
    );
    all_given_back(&s, records);
}

#[test]
fn a_fetch_failing_mid_body_cuts_the_connection_uring() {
    require!(uring_usable());
    fails_mid_body(IoMode::Uring);
}

#[test]
fn a_fetch_failing_mid_body_cuts_the_connection_epoll() {
    fails_mid_body(IoMode::Epoll);
}

#[test]
fn a_fetch_failing_mid_body_cuts_the_connection_threads() {
    fails_mid_body(IoMode::Threads);
}

/// A client that reads a little of a tiered GET and leaves: nothing stays
/// held (references, pins, fetched bytes), and the file can be removed
/// with its object's liveness gone.
fn client_leaves(io: IoMode) {
    let (s, store, _want) = tiered(io);
    let records = live_records(&s);
    store.delay_ms.store(30, Ordering::Relaxed);
    for _ in 0..3 {
        let mut c = TcpStream::connect(s.http).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut b = vec![0u8; 100 << 10];
        let mut got = 0;
        while got < 300 << 10 {
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        assert!(got > 0, "the GET began");
        drop(c);
    }
    all_given_back(&s, records);
    assert_eq!(http(s.http, "DELETE", "/big", &[], &[]).status, 204);
    wait_until(
        "the object is no longer live",
        Duration::from_secs(5),
        || live_records(&s) == 0,
    );
    s.check();
}

#[test]
fn a_client_leaving_mid_get_leaks_nothing_uring() {
    require!(uring_usable());
    client_leaves(IoMode::Uring);
}

#[test]
fn a_client_leaving_mid_get_leaks_nothing_epoll() {
    client_leaves(IoMode::Epoll);
}

#[test]
fn a_client_leaving_mid_get_leaks_nothing_threads() {
    client_leaves(IoMode::Threads);
}
