//! Shared helpers of the integration tests of the network path: a server
//! on a fresh /dev/shm image, and a tiny HTTP/1.1 client over real
//! sockets. Feature `net`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_netpath::{Change, Config, Services};

#[derive(Debug)]
pub struct Server {
    pub dir: tempfile::TempDir,
    pub vol: Arc<Volume>,
    pub svc: Option<Services>,
    pub http: SocketAddr,
    pub raw: Option<SocketAddr>,
    pub changes: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Stop the services. A stop that does not end within a minute ends
    /// the test process with a message: a hang there once cost CI its whole
    /// 90 minutes with nothing said but "has been running for over 60
    /// seconds".
    pub fn stop(&mut self) {
        if let Some(s) = self.svc.take() {
            let (done, wait) = std::sync::mpsc::channel::<()>();
            std::thread::spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    wait.recv_timeout(Duration::from_secs(60))
                {
                    eprintln!("net test: stopping the services took over 60 s; aborting");
                    std::process::abort();
                }
            });
            s.shutdown();
            drop(done);
        }
    }

    /// Wait until no connection is being served (server threads finished
    /// their cleanup).
    pub fn settle(&self) {
        let svc = self.svc.as_ref().expect("running");
        wait_until("every connection finished", Duration::from_secs(4), || {
            svc.active() == 0
        });
    }

    /// The server's counters so far.
    pub fn stats(&self) -> pktfs_netpath::Stats {
        self.svc.as_ref().expect("running").stats()
    }

    /// Let every connection finish, then check the Volume's invariants
    /// (a live connection's reservation would count as a stray reference).
    pub fn check(&self) {
        self.settle();
        self.vol.check_invariants().unwrap();
    }

    pub fn lookup(&self, path: &str) -> Option<pktfs_fs::Attr> {
        let mut ino = self.vol.root();
        let mut a = None;
        for p in path.split('/').filter(|p| !p.is_empty()) {
            let x = self.vol.lookup(ino, p.as_bytes()).ok()?;
            ino = x.ino;
            a = Some(x);
        }
        a
    }

    /// (name, inode) of every entry of directory `dir`.
    pub fn files_in(&self, dir: &str) -> Vec<(String, u64)> {
        let d = self
            .lookup(dir)
            .unwrap_or_else(|| panic!("no directory {dir}"));
        self.vol
            .list_dir(d.ino)
            .unwrap()
            .into_iter()
            .map(|e| (String::from_utf8(e.name).unwrap(), e.ino))
            .collect()
    }

    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        let a = self.lookup(path)?;
        Some(self.vol.read(a.ino, 0, a.size).expect("read"))
    }

    pub fn free_blocks(&self) -> u64 {
        self.vol.statfs().blocks_free
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn image(bytes: u64) -> (tempfile::TempDir, Arc<Volume>) {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let p = dir.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .expect("format");
    let vol = Arc::new(Volume::open(&p, &OpenOptions::default()).expect("open"));
    (dir, vol)
}

/// A server on a fresh image of `bytes`, HTTP on an ephemeral port,
/// `tweak` adjusting the configuration.
pub fn server(bytes: u64, tweak: impl FnOnce(&mut Config)) -> Server {
    let (dir, vol) = image(bytes);
    serve(dir, vol, tweak)
}

pub fn serve(dir: tempfile::TempDir, vol: Arc<Volume>, tweak: impl FnOnce(&mut Config)) -> Server {
    let mut cfg = Config {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Config::default()
    };
    // PKTFS_IO=threads runs the raw suites on the fallback path (as the CLI
    // takes it); a test that forces a mode overrides it.
    if let Ok(m) = std::env::var("PKTFS_IO") {
        cfg.io = m.parse().expect("PKTFS_IO: auto, uring, epoll or threads");
    }
    tweak(&mut cfg);
    let changes = Arc::new(Mutex::new(Vec::new()));
    let c2 = changes.clone();
    let cb: pktfs_netpath::OnChange = Arc::new(move |c: Change<'_>| {
        let s = match c {
            Change::Entry { parent, name, ino } => {
                format!("entry {parent} {} {ino}", String::from_utf8_lossy(name))
            }
            Change::Removed { parent, name, ino } => {
                format!("removed {parent} {} {ino}", String::from_utf8_lossy(name))
            }
            Change::Data { ino, size } => format!("data {ino} {size}"),
        };
        c2.lock().unwrap().push(s);
    });
    let svc = Services::start(vol.clone(), cfg, Some(cb)).expect("start");
    let http = svc
        .http_addr()
        .unwrap_or_else(|| "127.0.0.1:1".parse().unwrap());
    let raw = svc.raw_addr();
    Server {
        dir,
        vol,
        svc: Some(svc),
        http,
        raw,
        changes,
    }
}

/// The wall clock in ns since the epoch: what records are stamped with
/// (the kernel's receive time, or the clock's where it gives none).
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos() as u64
}

/// Send `body` on `s` and close the sending side; the wall clock
/// ([`wall_ns`]) before and after, in ns.
pub fn send_and_close(s: &mut TcpStream, body: &[u8]) -> (u64, u64) {
    let t0 = wall_ns();
    s.write_all(body).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    (t0, wall_ns())
}

/// Deterministic pseudo-random bytes.
pub fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One client connection with its own read buffer (keep-alive,
/// pipelining).
#[derive(Debug)]
pub struct Conn {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn { s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    fn fill(&mut self) -> bool {
        let mut b = [0u8; 65536];
        match self.s.read(&mut b) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&b[..n]);
                true
            }
        }
    }

    /// The next response (`head_only`: the request was HEAD). None if the
    /// connection closed first.
    pub fn response(&mut self, head_only: bool) -> Option<Response> {
        loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..i]).to_string();
                let mut lines = head.split("\r\n");
                let status_line = lines.next().unwrap_or("");
                let status: u16 = status_line
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| {
                        l.split_once(':')
                            .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
                    })
                    .collect();
                self.buf.drain(..i + 4);
                if status == 100 {
                    continue;
                }
                let chunked = headers.iter().any(|(n, v)| {
                    n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
                });
                if chunked && !head_only && status != 204 && status != 304 {
                    let body = self.chunked_body()?;
                    return Some(Response {
                        status,
                        headers,
                        body,
                    });
                }
                let cl: usize = if head_only || status == 204 || status == 304 {
                    0
                } else {
                    headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                        .map(|(_, v)| v.parse().expect("len"))
                        .unwrap_or(0)
                };
                while self.buf.len() < cl {
                    if !self.fill() {
                        return None;
                    }
                }
                let body: Vec<u8> = self.buf.drain(..cl).collect();
                return Some(Response {
                    status,
                    headers,
                    body,
                });
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// A chunked body (extensions and trailers ignored). None if the
    /// connection closed first.
    fn chunked_body(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                if !self.fill() {
                    return None;
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).to_string();
            let size =
                usize::from_str_radix(line.split(';').next()?.trim(), 16).expect("chunk size");
            self.buf.drain(..line_end + 2);
            if size == 0 {
                // Trailers end with an empty line.
                loop {
                    if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                        self.buf.drain(..i + 2);
                        if i == 0 {
                            return Some(body);
                        }
                        continue;
                    }
                    if !self.fill() {
                        return None;
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if !self.fill() {
                    return None;
                }
            }
            body.extend(self.buf.drain(..size));
            assert_eq!(&self.buf[..2], b"\r\n", "chunk data ends with CRLF");
            self.buf.drain(..2);
        }
    }

    /// Read until the server closes; true if it did within the timeout.
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 4096];
        loop {
            match self.s.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(e) => {
                    eprintln!("closed_by_server: {e:?}");
                    return false;
                }
            }
        }
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        self.send(&req_bytes(method, path, headers, body));
        self.response(method == "HEAD").expect("response")
    }
}

/// One chunk of a chunked body, framed (size line, bytes, CRLF).
pub fn chunk_frame(p: &[u8]) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", p.len()).into_bytes();
    v.extend_from_slice(p);
    v.extend_from_slice(b"\r\n");
    v
}

pub fn req_bytes(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (n, v) in headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    let te = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"));
    if (!body.is_empty() || matches!(method, "PUT" | "POST")) && !te {
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut v = r.into_bytes();
    v.extend_from_slice(body);
    v
}

/// One request on a fresh connection.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    Conn::new(addr).request(method, path, headers, body)
}

/// Poll `cond` every few milliseconds until it holds; panic naming `what`
/// if it does not within `limit`.
#[track_caller]
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "waited {limit:?} for: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
