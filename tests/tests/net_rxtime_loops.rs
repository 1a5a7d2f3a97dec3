//! Received records carry the kernel's arrival time on the event loops
//! (io_uring and epoll, HTTP uploads and raw streams), not the time the
//! loop got to them.
//!
//! The server runs in a child process (this test binary again, running
//! [`serve_for_the_parent`]), so the test can hold all of it with SIGSTOP:
//! the bytes arrive while it is stopped, it is continued 300 ms later,
//! and every record of the stored file must say (with FLAG_KERNEL_TIME)
//! that its bytes arrived when they were sent, at least 250 ms before the
//! server could have looked at them. Once with the connection accepted
//! before the stop, once with the connection made and its bytes sent
//! while the server is stopped (the listener's SO_TIMESTAMPNS, set before
//! accept, stamps them).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_netpath::{Config, IoMode, Services};
use rustix::process::{kill_process, Pid, Signal};

use crate::net_common::*;
use crate::prereq;

/// The image the child serves (its path); unset: not a child.
const CHILD_IMAGE: &str = "PKTFS_RXTIME_CHILD_IMAGE";
/// The child's I/O mode (`uring` or `epoll`).
const CHILD_IO: &str = "PKTFS_RXTIME_CHILD_IO";
/// The line the child prints its ports on.
const PORTS: &str = "PKTFS-RXTIME-PORTS";
/// What the parent writes to have the child say when its raw file holds
/// that many bytes, and the line it says it with.
const WAIT_RAW: &str = "wait-raw";
const STORED: &str = "PKTFS-RXTIME-STORED";
/// How long the server is held after the bytes arrived.
const HELD: Duration = Duration::from_millis(300);
/// A record's time must be this much before the server was continued.
const BEFORE_PROCESSING: Duration = Duration::from_millis(250);
/// How long after the sender's last write returned a record's time may be
/// (on loopback the kernel stamps a segment while the write sends it; a
/// busy 2-CPU runner can delay the softirq that does it a little), as in
/// the other transports' arrival-time tests; far below [`HELD`].
const SLACK: Duration = Duration::from_millis(25);
/// Bytes sent: several records, and within the socket buffer of a
/// stopped server (the send must not wait for it).
const BYTES: usize = 20_000;

fn uring_usable() -> prereq::Check {
    pktfs_netpath::loops::choose(IoMode::Uring, 1)
        .map(|_| ())
        .map_err(|e| format!("io_uring is not usable in this process: {e}"))
}

/// Not a test of its own: the server of the tests below, when this binary
/// is run as their child (`CHILD_IMAGE` set). Serves HTTP and raw on one
/// loop of the asked mode, prints the ports, answers `WAIT_RAW n` lines
/// (once a raw file holds `n` bytes: `STORED`), and stops when its stdin
/// closes (after the connections it serves ended), closing the image.
#[test]
fn serve_for_the_parent() {
    let Ok(image) = std::env::var(CHILD_IMAGE) else {
        return;
    };
    let io: IoMode = std::env::var(CHILD_IO)
        .expect("the child's I/O mode")
        .parse()
        .expect("uring or epoll");
    let vol = Arc::new(Volume::open(Path::new(&image), &OpenOptions::default()).expect("open"));
    let cfg = Config {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_dir: "/raw".into(),
        io,
        loops: 1,
        ..Config::default()
    };
    let svc = Services::start(vol.clone(), cfg, None).expect("start");
    println!(
        "{PORTS} {} {}",
        svc.http_addr().unwrap(),
        svc.raw_addr().unwrap()
    );
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lines() {
        let Ok(line) = line else { break };
        if let Some(n) = line.strip_prefix(WAIT_RAW) {
            let n: u64 = n.trim().parse().expect("a byte count");
            wait_until("the raw file's bytes", Duration::from_secs(20), || {
                vol.lookup(vol.root(), b"raw").is_ok_and(|d| {
                    vol.list_dir(d.ino)
                        .unwrap()
                        .iter()
                        .any(|e| vol.getattr(e.ino).is_ok_and(|a| a.size >= n))
                })
            });
            println!("{STORED}");
            std::io::stdout().flush().unwrap();
        }
    }
    wait_until(
        "the child's connections ended",
        Duration::from_secs(10),
        || svc.active() == 0,
    );
    svc.shutdown();
    Arc::into_inner(vol)
        .expect("the services let go of the volume")
        .close()
        .expect("close");
}

/// The child server: stopped, continued, and at the end killed if it is
/// still there (a failed test must not leave a stopped process behind).
struct ChildServer {
    child: Option<Child>,
    http: SocketAddr,
    raw: SocketAddr,
    /// What the child said on its output.
    said: std::sync::mpsc::Receiver<Said>,
}

#[derive(Debug)]
enum Said {
    Ports(Option<(SocketAddr, SocketAddr)>),
    Stored,
}

impl ChildServer {
    fn start(image: &Path, io: &str) -> ChildServer {
        let name = crate::harness::name_in(module_path!(), "serve_for_the_parent");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--nocapture", "--test-threads=1"])
            .env(CHILD_IMAGE, image)
            .env(CHILD_IO, io)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the child server");
        // Its output is read to the end on a thread of its own (the child
        // must never block on, or fail at, writing it); the ports come
        // back from there. libtest may print the test's name before them
        // on the same line.
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find(PORTS) {
                    let mut w = line[at + PORTS.len()..].split_whitespace();
                    let http: Option<SocketAddr> = w.next().and_then(|a| a.parse().ok());
                    let raw: Option<SocketAddr> = w.next().and_then(|a| a.parse().ok());
                    let _ = tx.send(Said::Ports(http.zip(raw)));
                } else if line.contains(STORED) {
                    let _ = tx.send(Said::Stored);
                }
            }
        });
        let Ok(Said::Ports(Some((http, raw)))) = rx.recv_timeout(Duration::from_secs(30)) else {
            panic!("the child server did not start (see its output above)");
        };
        ChildServer {
            child: Some(child),
            http,
            raw,
            said: rx,
        }
    }

    /// Wait until the child stored a raw file of `n` bytes.
    fn wait_raw(&mut self, n: usize) {
        let stdin = self.child.as_mut().unwrap().stdin.as_mut().unwrap();
        writeln!(stdin, "{WAIT_RAW} {n}").unwrap();
        stdin.flush().unwrap();
        match self.said.recv_timeout(Duration::from_secs(30)) {
            Ok(Said::Stored) => {}
            other => panic!("the child server did not store the raw stream: {other:?}"),
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().unwrap().id() as i32).unwrap()
    }

    fn signal(&self, sig: Signal) {
        kill_process(self.pid(), sig).expect("signal the child server");
    }

    /// Stop it cleanly (its stdin closes) and wait for it to exit.
    fn finish(mut self) {
        let mut child = self.child.take().unwrap();
        drop(child.stdin.take());
        let st = child.wait().expect("wait for the child server");
        assert!(st.success(), "the child server: {st:?}");
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Some(p) = Pid::from_raw(c.id() as i32) {
                let _ = kill_process(p, Signal::CONT);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A fresh image for the child, in a directory removed with the test.
fn fresh_image() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let p = dir.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(64 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .expect("format");
    (dir, p)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// One HTTP PUT of `BYTES`.
    Http,
    /// A raw stream of `BYTES`.
    Raw,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    /// The connection is accepted (and served) before the server is held.
    Accepted,
    /// The connection is made and its bytes sent while the server is held:
    /// it is accepted only after.
    BeforeAccept,
}

/// Send while the server is held; check every record of the stored file.
fn held_server_keeps_arrival_times(io: &str, proto: Proto, when: When) {
    let case = format!("{io}, {proto:?}, {when:?}");
    let (_dir, image) = fresh_image();
    let mut srv = ChildServer::start(&image, io);
    let body = data(BYTES, 61);
    let mut http = None;
    let mut raw = None;
    if when == When::Accepted {
        match proto {
            Proto::Http => {
                // Served once: the loop accepted it and armed its receive.
                let mut c = Conn::new(srv.http);
                let r = c.request("PUT", "/warm", &[], b"warm");
                assert_eq!(r.status, 201, "{case}");
                http = Some(c);
            }
            Proto::Raw => {
                raw = Some(TcpStream::connect(srv.raw).unwrap());
                // Nothing answers a raw stream: give the loop its accept.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    srv.signal(Signal::STOP);
    // Stopped: connect now if not yet (the kernel completes the handshake
    // into the listener's backlog), then send.
    match proto {
        Proto::Http => {
            http.get_or_insert_with(|| Conn::new(srv.http));
        }
        Proto::Raw => {
            raw.get_or_insert_with(|| TcpStream::connect(srv.raw).unwrap());
        }
    }
    let sent_from = wall_ns();
    match proto {
        Proto::Http => http
            .as_mut()
            .unwrap()
            .send(&req_bytes("PUT", "/held", &[], &body)),
        Proto::Raw => raw.as_mut().unwrap().write_all(&body).unwrap(),
    }
    let sent_to = wall_ns();
    std::thread::sleep(HELD);
    let continued = wall_ns();
    srv.signal(Signal::CONT);
    match proto {
        Proto::Http => {
            let r = http.as_mut().unwrap().response(false).expect("an answer");
            assert_eq!(r.status, 201, "{case}");
        }
        // Closed only once the server stored every byte: the FIN is a
        // segment of its own, and TCP coalesces it into the last data
        // segment still queued, whose receive time then becomes the FIN's
        // (the kernel's time of a receive is its newest segment's).
        Proto::Raw => {
            srv.wait_raw(BYTES);
            drop(raw.take());
        }
    }
    drop(http);
    srv.finish();

    let vol = Volume::open(&image, &OpenOptions::default()).expect("reopen");
    let ino = match proto {
        Proto::Http => vol.lookup(vol.root(), b"held").expect("the upload").ino,
        Proto::Raw => {
            let d = vol.lookup(vol.root(), b"raw").expect("the raw directory");
            let files = vol.list_dir(d.ino).unwrap();
            assert_eq!(files.len(), 1, "{case}: {files:?}");
            files[0].ino
        }
    };
    assert_eq!(vol.read(ino, 0, u64::MAX).unwrap(), body, "{case}");
    let chain = vol.chain(ino).unwrap();
    assert!(!chain.is_empty(), "{case}");
    for r in &chain {
        assert!(r.from_network, "{case}: {r:?}");
        assert!(
            r.kernel_time,
            "{case}: record at {} has no kernel receive time: {r:?}",
            r.file_off
        );
        let t = r.timestamp_ns;
        // The arrival: a loopback send is delivered within the write.
        assert!(
            t + 1_000_000 >= sent_from && t <= sent_to + SLACK.as_nanos() as u64,
            "{case}: record at {} stamped {t}, sent during [{sent_from}, {sent_to}] \
             (off by {} us)",
            r.file_off,
            (t as i64 - sent_from as i64) / 1000
        );
        assert!(
            continued.saturating_sub(t) >= BEFORE_PROCESSING.as_nanos() as u64,
            "{case}: record at {} stamped {t}, only {} us before the server could \
             process it (continued at {continued})",
            r.file_off,
            continued.saturating_sub(t) / 1000
        );
    }
}

fn on_uring(proto: Proto, when: When) {
    require!(uring_usable());
    held_server_keeps_arrival_times("uring", proto, when);
}

fn on_epoll(proto: Proto, when: When) {
    held_server_keeps_arrival_times("epoll", proto, when);
}

#[test]
fn uring_http_put_records_keep_the_arrival_time() {
    on_uring(Proto::Http, When::Accepted);
}

#[test]
fn uring_http_put_before_accept_keeps_the_arrival_time() {
    on_uring(Proto::Http, When::BeforeAccept);
}

#[test]
fn uring_raw_records_keep_the_arrival_time() {
    on_uring(Proto::Raw, When::Accepted);
}

#[test]
fn uring_raw_before_accept_keeps_the_arrival_time() {
    on_uring(Proto::Raw, When::BeforeAccept);
}

#[test]
fn epoll_http_put_records_keep_the_arrival_time() {
    on_epoll(Proto::Http, When::Accepted);
}

#[test]
fn epoll_http_put_before_accept_keeps_the_arrival_time() {
    on_epoll(Proto::Http, When::BeforeAccept);
}

#[test]
fn epoll_raw_records_keep_the_arrival_time() {
    on_epoll(Proto::Raw, When::Accepted);
}

#[test]
fn epoll_raw_before_accept_keeps_the_arrival_time() {
    on_epoll(Proto::Raw, When::BeforeAccept);
}
