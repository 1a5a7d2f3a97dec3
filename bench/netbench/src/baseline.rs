//! The baseline servers: the same minimal keep-alive HTTP server with a
//! different sink for the body (drop it, copy+persist it, write+fdatasync
//! it, or answer GET with sendfile).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pktfs_fs::media::{ExclusivePm, MapOptions, PersistChoice, Pm};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    NetOnly,
    /// network-only, its reads spinning on `recv(MSG_DONTWAIT)`.
    NetOnlyPolling,
    Copy,
    /// Receives the body straight into lines not touched for a while and
    /// writes them back (large PUT only): pktfs's one copy and clwb, and
    /// nothing else.
    RecvFresh,
    Ext4,
    Sendfile,
}

impl Base {
    /// The name the tables use.
    pub fn name(self) -> &'static str {
        match self {
            Base::NetOnly => "network-only",
            Base::NetOnlyPolling => POLLING,
            Base::Copy => "copy+clwb",
            Base::RecvFresh => "recv+clwb, fresh lines",
            Base::Ext4 => "ext4+fdatasync",
            Base::Sendfile => "sendfile-tmpfs",
        }
    }

    /// Its connection threads' name (at most 15 bytes, as Linux keeps):
    /// what `perf` and `top -H` show.
    fn thread_name(self) -> &'static str {
        match self {
            Base::NetOnly => "base-netonly",
            Base::NetOnlyPolling => "base-netpoll",
            Base::Copy => "base-copy",
            Base::RecvFresh => "base-recvfresh",
            Base::Ext4 => "base-ext4",
            Base::Sendfile => "base-sendfile",
        }
    }
}

pub struct Baseline {
    pub kind: Base,
    /// The sendfile baseline's file.
    pub pm: Option<Arc<Pm>>,
    /// The copy baseline's file, cut into windows: a connection leases
    /// one and copies into it (wrapping), so no two threads write the
    /// same bytes and no lock is taken per copy.
    pub copy: Option<Windows>,
    pub ext4_dir: PathBuf,
    pub stop: Arc<AtomicBool>,
}

/// A copy baseline's file of `len` bytes at `path`, mapped in clwb mode
/// once its background pre-fault is done (the baselines' files are
/// measured as pktfs's images are, fully faulted in).
pub fn copy_file(path: &Path, len: u64) -> Pm {
    // Not truncated: a file allocated beforehand (crate::interleave) keeps
    // the memory it was given.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .and_then(|f| f.set_len(len))
        .expect("copy file");
    let pm = Pm::open(
        path,
        &MapOptions {
            persist: PersistChoice::Clwb,
            ..Default::default()
        },
    )
    .expect("map copy file");
    pm.wait_populated();
    pm
}

/// A window of a baseline's file and where its next write goes: kept
/// with the window between connections, so one connection goes on where
/// the last stopped (each line is rewritten once per window's length).
pub struct Window {
    w: ExclusivePm<'static>,
    at: u64,
}

/// The free windows of a baseline's file.
pub type Windows = Mutex<Vec<Window>>;

/// Windows of the copy baseline's file (the mapping lives as long as the
/// process: the windows borrow it for `'static`).
pub fn copy_windows(pm: Pm) -> Windows {
    windows_of(pm, 2 << 20)
}

/// `pm` cut into windows of `window` bytes (a connection leases one and
/// writes through it, wrapping at its end).
fn windows_of(pm: Pm, window: u64) -> Windows {
    let window = window.max(1 << 20);
    let mut rest = Box::leak(Box::new(pm)).exclusive();
    let mut out = Vec::new();
    while rest.window().end - rest.window().start >= window {
        let at = rest.window().start + window;
        let (w, r) = rest.split_at(at);
        out.push(Window { w, at: 0 });
        rest = r;
    }
    Mutex::new(out)
}

/// A connection's window of the copy file, given back when it ends.
struct Lease<'b> {
    pool: &'b Windows,
    w: Option<ExclusivePm<'static>>,
    /// Next write position in the window (wraps).
    at: u64,
}

impl<'b> Lease<'b> {
    fn take(pool: &'b Windows) -> Lease<'b> {
        loop {
            if let Some(Window { w, at }) = pool.lock().expect("copy windows").pop() {
                return Lease {
                    pool,
                    w: Some(w),
                    at,
                };
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The largest receive into a fresh window: a pktfs record holds at most
/// this much (`MAX_RECORD_BYTES`), so its threaded transport receives at
/// most this much at a time.
const RECV_MAX: usize = 256 << 10;

impl Lease<'_> {
    /// Where the next `n` bytes go (wrapping to the window's start when
    /// they do not fit before its end); they are counted as written.
    fn room(&mut self, n: usize) -> u64 {
        let win = self.w.as_ref().expect("leased").window();
        if self.at + n as u64 > win.end - win.start {
            self.at = 0;
        }
        let at = win.start + self.at;
        self.at += n as u64;
        at
    }

    /// One receive of at most `want` bytes (at most [`RECV_MAX`]) from `s`
    /// straight into the window, then clwb + sfence over what came.
    fn recv_persist(&mut self, s: &TcpStream, want: usize) -> std::io::Result<usize> {
        let want = want.min(RECV_MAX);
        let at = self.room(want);
        let w = self.w.as_mut().expect("leased");
        let n = w.recv(s, at, want, 0)?;
        w.persist(at, n as u64);
        // The next receive starts at the next cache line after what came,
        // as pktfs's next piece starts in a fresh buffer.
        self.at -= (want - n.next_multiple_of(64).min(want)) as u64;
        Ok(n)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.w.take() {
            if let Ok(mut p) = self.pool.lock() {
                p.push(Window { w, at: self.at });
            }
        }
    }
}

pub fn start_baseline(b: Arc<Baseline>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    l.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let mut id = 0u64;
        while !b.stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((s, _)) => {
                    id += 1;
                    let b = b.clone();
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_nodelay(true);
                    let _ = std::thread::Builder::new()
                        .name(b.kind.thread_name().into())
                        .spawn(move || baseline_conn(&b, s, id));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    addr
}

/// The polling baseline's name. It serves the one-connection rows only:
/// a thread spinning per connection is not a server for 16 of them on a
/// small machine.
pub const POLLING: &str = "network-only-polling";

/// Up to `buf.len()` bytes from `s`; the polling baseline spins on a
/// non-blocking receive (one syscall per try, as the io_uring loops'
/// polls are) instead of sleeping in `read`.
fn read_some(s: &mut TcpStream, buf: &mut [u8], poll: bool) -> std::io::Result<usize> {
    if !poll {
        return s.read(buf);
    }
    loop {
        match rustix::net::recv(&*s, &mut *buf, rustix::net::RecvFlags::DONTWAIT) {
            Ok((n, _)) => return Ok(n),
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => std::hint::spin_loop(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A minimal keep-alive HTTP server for the baselines.
fn baseline_conn(b: &Baseline, mut s: TcpStream, id: u64) {
    let mut hdr = vec![0u8; 64 << 10];
    let mut body = vec![0u8; 1 << 20];
    let poll = b.kind == Base::NetOnlyPolling;
    let (mut start, mut end) = (0usize, 0usize);
    let mut copy = b.copy.as_ref().map(Lease::take);
    let mut ext4 = if b.kind == Base::Ext4 {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(b.ext4_dir.join(format!("c{id}")))
                .expect("ext4 file"),
        )
    } else {
        None
    };
    loop {
        // Parse a head from hdr[start..end], reading more as needed.
        let (len, clen, is_get) = loop {
            if end > start {
                let mut h = [httparse::EMPTY_HEADER; 32];
                let mut r = httparse::Request::new(&mut h);
                if let Ok(httparse::Status::Complete(n)) = r.parse(&hdr[start..end]) {
                    let cl = r
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| {
                            std::str::from_utf8(h.value)
                                .ok()?
                                .trim()
                                .parse::<u64>()
                                .ok()
                        })
                        .unwrap_or(0);
                    break (n, cl, r.method == Some("GET"));
                }
            }
            if start > 0 {
                hdr.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            match read_some(&mut s, &mut hdr[end..], poll) {
                Ok(0) | Err(_) => return,
                Ok(n) => end += n,
            }
        };
        start += len;
        // Body: what came with the head, then reads into the reused buffer.
        let mut left = clen;
        let mut pos = 0u64;
        let first = (end - start).min(left as usize);
        if first > 0 {
            sink(b, &hdr[start..start + first], &mut ext4, &mut copy, pos);
            pos += first as u64;
            left -= first as u64;
            start += first;
        }
        while left > 0 {
            let want = (left as usize).min(body.len());
            if b.kind == Base::RecvFresh {
                let l = copy.as_mut().expect("fresh window");
                match l.recv_persist(&s, want) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        pos += n as u64;
                        left -= n as u64;
                    }
                }
                continue;
            }
            match read_some(&mut s, &mut body[..want], poll) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    sink(b, &body[..n], &mut ext4, &mut copy, pos);
                    pos += n as u64;
                    left -= n as u64;
                }
            }
        }
        if let Some(f) = &ext4 {
            if clen > 0 {
                f.sync_data().expect("fdatasync");
            }
        }
        if is_get && b.kind == Base::Sendfile {
            let pm = b.pm.as_ref().expect("file");
            let size = pm.len();
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
            if s.write_all(head.as_bytes()).is_err() {
                return;
            }
            let mut off = 0u64;
            while off < size {
                match pm.sendfile_to(&s, off, (size - off).min(1 << 30) as usize) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => off += n as u64,
                }
            }
        } else if s
            .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

fn sink(
    b: &Baseline,
    data: &[u8],
    ext4: &mut Option<std::fs::File>,
    copy: &mut Option<Lease<'_>>,
    pos: u64,
) {
    match b.kind {
        Base::NetOnly | Base::NetOnlyPolling | Base::Sendfile => {}
        Base::Copy | Base::RecvFresh => {
            let l = copy.as_mut().expect("copy window");
            let at = l.room(data.len());
            let w = l.w.as_mut().expect("leased");
            w.write(at, data);
            w.persist(at, data.len() as u64);
        }
        Base::Ext4 => {
            use std::os::unix::fs::FileExt;
            ext4.as_ref()
                .expect("file")
                .write_all_at(data, pos)
                .expect("ext4 write");
        }
    }
}

/// The baselines netbench runs as children for the small PUTs
/// (`recv+clwb, fresh lines` can also run as one, for profiling, but is
/// measured in the large PUT only, inside netbench).
pub const SERVABLE: &[&str] = &["network-only", POLLING, "copy+clwb", "ext4+fdatasync"];

/// The baseline a child of `kind` serves.
fn base_of(kind: crate::cli::BaselineKind) -> Base {
    use crate::cli::BaselineKind;
    match kind {
        BaselineKind::NetworkOnly => Base::NetOnly,
        BaselineKind::NetworkOnlyPolling => Base::NetOnlyPolling,
        BaselineKind::CopyClwb => Base::Copy,
        BaselineKind::RecvClwbFresh => Base::RecvFresh,
        BaselineKind::Ext4Fdatasync => Base::Ext4,
    }
}

/// `netbench serve-baseline KIND [--port N] [--dir D] [--conns N]
/// [--until-eof]`: run one baseline server, on its own for profiling
/// (until killed), or as netbench's child (`--until-eof`: until the parent
/// closes our stdin, so a child never outlives its benchmark). The first
/// line on stdout names the address (`--port 0`: a free one). `--conns`
/// sizes copy+clwb's file: each connection holds a 2 MiB window of it for
/// its lifetime.
pub fn serve_baseline(a: &crate::cli::BaselineArgs) {
    let kind = base_of(a.kind);
    let (port, conns) = (a.port, a.conns);
    let child_dir = crate::child::ChildDir::new(a.dir.clone());
    let dir = child_dir.path().to_path_buf();
    let pm = match kind {
        Base::Copy => Some(copy_windows(copy_file(
            &dir.join("copy.dat"),
            conns.max(1) * (2 << 20),
        ))),
        Base::RecvFresh => {
            let len = a.fresh_mib << 20;
            Some(windows_of(copy_file(&dir.join("recv-fresh.dat"), len), len))
        }
        _ => None,
    };
    let b = Arc::new(Baseline {
        kind,
        pm: None,
        copy: pm,
        ext4_dir: dir.clone(),
        stop: Arc::new(AtomicBool::new(false)),
    });
    let l = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    let addr = l.local_addr().expect("addr");
    crate::child::announce(kind.name(), addr, "threads (one per connection)");
    // Connections accepted so far: the ext4 baseline's files are c1..cN
    // (`baseline_conn`'s ids).
    let accepted = Arc::new(AtomicU64::new(0));
    let counted = accepted.clone();
    let accept = move || {
        for (id, s) in l.incoming().flatten().enumerate() {
            counted.store(id as u64 + 1, Ordering::Relaxed);
            let b = b.clone();
            let _ = s.set_nodelay(true);
            // Past the thread limit a connection is dropped (the client
            // sees a socket error) rather than the server dying.
            let _ = std::thread::Builder::new()
                .name(b.kind.thread_name().into())
                .spawn(move || baseline_conn(&b, s, id as u64 + 1));
        }
    };
    if a.until_eof {
        std::thread::spawn(accept);
        crate::child::wait_for_parent();
        // Only the files this kind made: in a shared directory another
        // file may carry one of the other kinds' names.
        let made: Vec<PathBuf> = match kind {
            Base::Copy => vec![dir.join("copy.dat")],
            Base::RecvFresh => vec![dir.join("recv-fresh.dat")],
            Base::Ext4 => (1..=accepted.load(Ordering::Relaxed))
                .map(|id| dir.join(format!("c{id}")))
                .collect(),
            Base::NetOnly | Base::NetOnlyPolling | Base::Sendfile => Vec::new(),
        };
        child_dir.remove(made);
    } else {
        accept();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// netbench spawns children by table name: each servable name must be
    /// a `serve-baseline` kind serving the baseline of that name.
    #[test]
    fn servable_names_are_child_kinds() {
        for name in SERVABLE.iter().chain(&["recv+clwb, fresh lines"]) {
            let kind = crate::cli::BaselineKind::from_str(name, false)
                .unwrap_or_else(|e| panic!("{name} is not a serve-baseline kind: {e}"));
            assert_eq!(base_of(kind).name(), *name);
        }
    }

    /// The polling baseline answers keep-alive PUTs whose head and body
    /// come in separate segments, and stops with its client.
    #[test]
    fn polling_baseline_answers_puts() {
        let b = Arc::new(Baseline {
            kind: Base::NetOnlyPolling,
            pm: None,
            copy: None,
            ext4_dir: std::env::temp_dir(),
            stop: Arc::new(AtomicBool::new(false)),
        });
        let addr = start_baseline(b.clone());
        let mut c = TcpStream::connect(addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let answer = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
        for n in 0..3 {
            c.write_all(format!("PUT /k/{n} HTTP/1.1\r\nContent-Length: 1024\r\n\r\n").as_bytes())
                .expect("head");
            std::thread::sleep(Duration::from_millis(5)); // the server spins meanwhile
            c.write_all(&[b'x'; 1024]).expect("body");
            let mut got = vec![0u8; answer.len()];
            c.read_exact(&mut got).expect("answer");
            assert_eq!(got, answer, "answer {n}");
        }
        b.stop.store(true, Ordering::Relaxed);
    }
}
