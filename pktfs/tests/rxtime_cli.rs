//! A received record's time is when its bytes arrived, not when the
//! receiver got to them. Each test holds the receiving process (SIGSTOP)
//! while the sender's bytes arrive, lets it go [`HOLD`] later (SIGCONT),
//! and checks every stored record: the kernel gave its time
//! (`kernel_time`), the time lies between the sender's first write and a
//! few ms after its last, and it is at least [`BEFORE_RELEASE`] before the
//! receiver could have read a byte. A receiver stamping with its own clock
//! when it processes the bytes fails all three.
//!
//! Receivers: `pktfs serve` (HTTP PUT with Content-Length and chunked, on a
//! connection accepted before the hold and one made during it; raw mode),
//! `pktfs recv` (`--listen`, the bytes arriving before `accept`;
//! `--connect`), and a served image's holder taking the socket `pktfs recv`
//! passes it over the control socket. The servers run on each transport:
//! threads, and the io_uring and epoll loops.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_common::{announced, chain_json, free_port, mkfs, startup_lines, stop, Proc, PKTFS};
use crate::many_common::uring_usable;
use crate::net_common::{data, send_and_close, wait_until, wall_ns, Conn};

/// How long the receiver is held after the bytes arrived.
const HOLD: Duration = Duration::from_millis(300);
/// A record's time is at least this long before the receiver was let go.
const BEFORE_RELEASE: Duration = Duration::from_millis(250);
/// How long after the sender's last write returned a record's time may be
/// (on loopback the kernel stamps a segment while the write sends it; a
/// busy 2-CPU runner can delay the softirq that does it a little).
const SLACK: Duration = Duration::from_millis(25);
/// Each stream's bytes: small enough to sit in the held receiver's socket
/// buffer (the window of a socket nobody reads), so all of it arrives during
/// the hold; bytes still waiting in the sender's buffer would be stamped
/// after it, and rightly.
const STREAM_BYTES: usize = 24 << 10;

/// A process held with SIGSTOP; let go (SIGCONT) by [`Held::release`] or
/// when dropped, so a failing test leaves nothing stopped.
struct Held {
    pid: u32,
    going: bool,
}

impl Held {
    /// Stop `pid` and wait until every thread of it has stopped (a signal
    /// is delivered asynchronously: bytes sent before that could be read).
    fn stop(pid: u32) -> Held {
        signal(pid, rustix::process::Signal::STOP);
        let h = Held { pid, going: false };
        wait_until("the receiver is stopped", Duration::from_secs(10), || {
            all_stopped(pid)
        });
        h
    }

    /// SIGCONT; returns when it was sent (ns since the epoch): nothing the
    /// process did with the bytes can have happened before.
    fn release(mut self) -> u64 {
        let at = wall_ns();
        signal(self.pid, rustix::process::Signal::CONT);
        self.going = true;
        at
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.going {
            signal(self.pid, rustix::process::Signal::CONT);
        }
    }
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(p, sig).expect("signal the receiver");
}

/// Every thread of `pid` in state T (stopped).
fn all_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
            // "pid (comm) S ...": the state follows the last ')'.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("T")
        })
    })
}

/// Check `rows` (a file's chain, `pktfs chain --json`) against the time
/// the bytes were sent (`sent`: before the first write, after the last)
/// and the time the receiver was let go.
fn check_arrival(what: &str, rows: &[serde_json::Value], sent: (u64, u64), released: u64) {
    assert!(!rows.is_empty(), "{what}: no records");
    let slack = SLACK.as_nanos() as u64;
    let before = BEFORE_RELEASE.as_nanos() as u64;
    for r in rows {
        let ts = r["timestamp_ns"].as_u64().expect("timestamp_ns");
        assert_eq!(r["from_network"], true, "{what}: {r}");
        assert_eq!(
            r["kernel_time"], true,
            "{what}: a record without the kernel's receive time: {r}"
        );
        // The kernel's clock and ours are the same CLOCK_REALTIME; a
        // microsecond for the reads' order.
        assert!(
            ts + 1_000 >= sent.0,
            "{what}: stamped {} µs before the first byte was sent: {r}",
            (sent.0 - ts) / 1_000
        );
        assert!(
            ts <= sent.1 + slack,
            "{what}: stamped {} ms after the last byte was sent (the receiver was held \
             {} ms): the processing time, not the arrival time: {r}",
            (ts - sent.1) / 1_000_000,
            HOLD.as_millis()
        );
        assert!(
            ts + before <= released,
            "{what}: stamped only {} ms before the receiver was let go: {r}",
            released.saturating_sub(ts) / 1_000_000
        );
    }
}

/// The stored bytes of `rows` add up to `len`.
fn stored_len(rows: &[serde_json::Value]) -> u64 {
    rows.iter().map(|r| r["length"].as_u64().unwrap()).sum()
}

/// `pktfs serve IMG --listen 127.0.0.1:0 --io IO [extra]`, with the HTTP
/// and (when asked) raw addresses it announced.
fn serve_io(img: &Path, io: &str, extra: &[&str]) -> (Proc, SocketAddr, Option<SocketAddr>) {
    let mut c = Proc::spawn(
        Command::new(PKTFS)
            .args(["serve", img.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(["--io", io])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let said = startup_lines(&mut c);
    assert!(said.contains("serving"), "{said}");
    let http = announced(&said, "HTTP").unwrap_or_else(|| panic!("no HTTP address in: {said}"));
    (c, http, announced(&said, "raw"))
}

/// `pktfs serve` holds a PUT's bytes: a Content-Length body on a
/// connection the server accepted before it was held, and a chunked body on
/// a connection made while it was held (accepted after: the listener's
/// timestamps must already be on).
fn put_times_are_arrival_times(io: &str) {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let (server, http, _) = serve_io(&img, io, &[]);
    // Let the server accept it (a response on it proves that).
    let mut early = Conn::new(http);
    early.send(b"GET /none HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(early.response(false).expect("a response").status, 404);

    let cl = data(STREAM_BYTES, 1);
    let ch = data(STREAM_BYTES, 2);
    let held = Held::stop(server.id());
    let mut late = Conn::new(http);
    let t0 = wall_ns();
    let mut req = format!(
        "PUT /cl.bin HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        cl.len()
    )
    .into_bytes();
    req.extend_from_slice(&cl);
    early.send(&req);
    let mut req =
        b"PUT /chunked.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for c in ch.chunks(8 << 10) {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    late.send(&req);
    let t1 = wall_ns();
    std::thread::sleep(HOLD);
    let released = held.release();
    assert_eq!(early.response(false).expect("a response").status, 201);
    assert_eq!(late.response(false).expect("a response").status, 201);

    for (path, body, how) in [
        (
            "/cl.bin",
            &cl,
            "Content-Length body, connection accepted before the hold",
        ),
        (
            "/chunked.bin",
            &ch,
            "chunked body, connection accepted after the hold",
        ),
    ] {
        let rows = chain_json(&img, path);
        assert_eq!(stored_len(&rows), body.len() as u64, "{io}: {how}");
        check_arrival(&format!("{io}: {how}"), &rows, (t0, t1), released);
    }
    stop(server);
}

#[test]
fn put_on_threads_is_stamped_on_arrival() {
    put_times_are_arrival_times("threads");
}

#[test]
fn put_on_io_uring_is_stamped_on_arrival() {
    require!(uring_usable());
    put_times_are_arrival_times("uring");
}

#[test]
fn put_on_epoll_is_stamped_on_arrival() {
    put_times_are_arrival_times("epoll");
}

/// Raw mode: a stream whose connection and bytes all come while the
/// server is held.
fn raw_times_are_arrival_times(io: &str) {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let (server, http, raw) = serve_io(&img, io, &["--raw-listen", "127.0.0.1:0"]);
    let raw = raw.expect("a raw address announced");
    let body = data(STREAM_BYTES, 3);
    let held = Held::stop(server.id());
    let mut s = TcpStream::connect(raw).unwrap();
    let t0 = wall_ns();
    s.write_all(&body).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let t1 = wall_ns();
    std::thread::sleep(HOLD);
    let released = held.release();
    // The stream's file, once all of it is stored.
    let mut rows = Vec::new();
    wait_until("the raw stream stored", Duration::from_secs(20), || {
        let mut c = Conn::new(http);
        c.send(b"GET /raw/ HTTP/1.1\r\nHost: x\r\n\r\n");
        let list = c.response(false).expect("a response");
        let names = String::from_utf8_lossy(&list.body).to_string();
        let Some(name) = names.lines().next() else {
            return false;
        };
        rows = chain_json(&img, &format!("/raw/{name}"));
        stored_len(&rows) == body.len() as u64
    });
    check_arrival(&format!("{io}: raw stream"), &rows, (t0, t1), released);
    drop(s);
    stop(server);
}

#[test]
fn raw_on_threads_is_stamped_on_arrival() {
    raw_times_are_arrival_times("threads");
}

#[test]
fn raw_on_io_uring_is_stamped_on_arrival() {
    require!(uring_usable());
    raw_times_are_arrival_times("uring");
}

#[test]
fn raw_on_epoll_is_stamped_on_arrival() {
    raw_times_are_arrival_times("epoll");
}

/// `pktfs recv IMG PATH --listen ADDR [extra]`, once it listens.
fn recv_listening(img: &Path, path: &str, addr: SocketAddr, extra: &[&str]) -> Proc {
    let mut c = Proc::spawn(
        Command::new(PKTFS)
            .args(["recv", img.to_str().unwrap(), path, "--listen"])
            .arg(addr.to_string())
            .args(["--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("waiting for one connection"), "{line}");
    c
}

/// `pktfs recv IMG PATH --connect ADDR --json` started.
fn recv_connecting(img: &Path, path: &str, to: SocketAddr) -> Proc {
    Proc::spawn(
        Command::new(PKTFS)
            .args(["recv", img.to_str().unwrap(), path, "--connect"])
            .arg(to.to_string())
            .args(["--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
}

/// Wait (bounded) for `pktfs recv` to end; its JSON report, checked: it
/// ended cleanly and counts every record as kernel-stamped.
fn recv_report(c: Proc) -> serde_json::Value {
    let t0 = Instant::now();
    let mut c = c;
    while c.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "pktfs recv did not finish"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rep: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    assert_eq!(rep["ended_cleanly"], true, "{rep}");
    assert_eq!(
        rep["kernel_time_records"], rep["records"],
        "every record has the kernel's time: {rep}"
    );
    rep
}

/// `pktfs recv --listen` on an image nobody holds, held before the sender
/// connects: connection and bytes arrive before `accept`.
#[test]
fn recv_listen_stamps_bytes_that_came_before_accept() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let addr = free_port();
    let r = recv_listening(&img, "/l.bin", addr, &[]);
    let body = data(STREAM_BYTES, 4);
    let held = Held::stop(r.id());
    let mut s = TcpStream::connect(addr).unwrap();
    let sent = send_and_close(&mut s, &body);
    std::thread::sleep(HOLD);
    let released = held.release();
    let rep = recv_report(r);
    assert_eq!(rep["bytes"], body.len() as u64);
    check_arrival("recv --listen", &chain_json(&img, "/l.bin"), sent, released);
}

/// `pktfs recv --connect` on an image nobody holds, held once connected.
#[test]
fn recv_connect_stamps_on_arrival() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let r = recv_connecting(&img, "/c.bin", l.local_addr().unwrap());
    let (mut s, _) = l.accept().unwrap();
    let body = data(STREAM_BYTES, 5);
    let held = Held::stop(r.id());
    let sent = send_and_close(&mut s, &body);
    std::thread::sleep(HOLD);
    let released = held.release();
    let rep = recv_report(r);
    assert_eq!(rep["bytes"], body.len() as u64);
    check_arrival(
        "recv --connect",
        &chain_json(&img, "/c.bin"),
        sent,
        released,
    );
}

/// `pktfs recv` into a served image passes its socket to the server over
/// the control socket; the server (the holder, which receives) is held
/// while the bytes arrive. Both ways of getting the socket.
#[test]
fn a_socket_passed_to_the_holder_is_stamped_on_arrival() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let (server, _, _) = serve_io(&img, "threads", &[]);

    // --listen: the holder is held before the sender connects.
    let addr = free_port();
    let r = recv_listening(&img, "/pl.bin", addr, &[]);
    let body = data(STREAM_BYTES, 6);
    let held = Held::stop(server.id());
    let mut s = TcpStream::connect(addr).unwrap();
    let sent = send_and_close(&mut s, &body);
    std::thread::sleep(HOLD);
    let released = held.release();
    let rep = recv_report(r);
    assert_eq!(rep["bytes"], body.len() as u64);
    check_arrival(
        "recv --listen, socket passed to the server",
        &chain_json(&img, "/pl.bin"),
        sent,
        released,
    );

    // --connect: held once the receiver has connected (it passes the
    // socket, or is about to, while the holder cannot read it).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let r = recv_connecting(&img, "/pc.bin", l.local_addr().unwrap());
    let (mut s, _) = l.accept().unwrap();
    let body = data(STREAM_BYTES, 7);
    let held = Held::stop(server.id());
    let sent = send_and_close(&mut s, &body);
    std::thread::sleep(HOLD);
    let released = held.release();
    let rep = recv_report(r);
    assert_eq!(rep["bytes"], body.len() as u64);
    check_arrival(
        "recv --connect, socket passed to the server",
        &chain_json(&img, "/pc.bin"),
        sent,
        released,
    );
    drop(s);
    stop(server);
}
