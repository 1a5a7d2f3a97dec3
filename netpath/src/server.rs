//! Listeners, connection threads and shutdown.
//!
//! # One thread per connection, capped
//! Each accepted connection gets its own thread (small stack) and runs to
//! completion on it: recv into packet buffers, build pieces, commit, answer.
//! The work per request is dominated by synchronous steps that block the
//! thread anyway (the kernel copy into PM, cache-line write-back and
//! fences of the commit, the Volume's inode locks), so an event loop would
//! gain little here and would have to hand commits to workers; threads keep
//! every request a straight line of code, and the Volume's per-inode locks
//! already let different files commit in parallel. Resources are bounded:
//! at most `max_connections` connections (HTTP and raw together; one more
//! is answered `503` and closed), each with one reservation of at most
//! `rx_chunk` bytes of buffer space (64 KiB while idle), a 512 KiB stack,
//! a head of at most `max_header_bytes`, and timeouts on every wait.
//! Accept loops poll their listener with a short timeout so shutdown needs
//! no wake-up trick.
//!
//! HTTP and raw mode run on the event loops instead ([`crate::loops`], on
//! io_uring or epoll) unless `Config::io` asks for threads or the image is
//! read-only (chosen once in [`Services::start`]); there a connection
//! costs an fd, not a thread.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pktfs_fs::Volume;

use crate::config::{Change, Config, OnChange};
use crate::metrics::Metrics;
use crate::receive::stamped;
use crate::shared::Shared;

const STACK: usize = 512 << 10;

/// Counters since start.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub connections: u64,
    pub refused: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub files_stored: u64,
    /// DRAM the loops' connections hold now against
    /// `Config::max_inflight_bytes` (beyond each one's uncounted
    /// `Config::CONN_FREE_DRAM`).
    pub inflight_bytes: u64,
    /// Times a connection or a request was refused over that budget.
    pub inflight_refused: u64,
    /// Tiered bytes fetched for GETs and held in DRAM now (being fetched,
    /// waiting to be sent, being sent), against `Config::tier_fetch_bytes`,
    /// and the most ever held at once.
    pub tier_fetched_bytes: u64,
    pub tier_fetched_peak: u64,
}

/// Running servers. Dropping it shuts them down.
#[derive(Debug)]
pub struct Services {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    http_addr: Option<SocketAddr>,
    raw_addr: Option<SocketAddr>,
    s3_addr: Option<SocketAddr>,
    /// How connections are served (None: no listener).
    io: Option<crate::loops::IoChoice>,
    /// The io_uring loops (HTTP and raw), when connections run on them.
    loops: Option<crate::loops::Loops>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Http,
    Raw,
}

impl Services {
    /// Bind the configured listeners and start serving `vol`. `on_change`
    /// is told about every entry created, replaced or removed and about raw
    /// files growing. Refuses (`PermissionDenied`, the error an
    /// [`crate::config::Unprotected`]) to listen without a token on an
    /// address that is not loopback ([`Config::check_exposure`]).
    pub fn start(
        vol: Arc<Volume>,
        cfg: Config,
        on_change: Option<OnChange>,
    ) -> std::io::Result<Services> {
        cfg.check_exposure()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
        let raw_dir = raw_dir(&vol, &cfg, on_change.as_ref())?;
        let io = io_choice(&vol, &cfg)?;
        let loop_shared = Arc::new(crate::loops::LoopShared::default());
        let fetch = crate::transmit::fetch::FetchPool::new(
            cfg.tier_fetch_threads,
            cfg.tier_fetch_queue,
            cfg.tier_fetch_bytes,
        );
        let shared = Arc::new(Shared {
            vol,
            // New files and directories belong to the identity requests
            // act as.
            uid: cfg.as_user.uid,
            gid: cfg.as_user.gid,
            cfg,
            on_change,
            stop: AtomicBool::new(false),
            metrics: Metrics::new(),
            raw_dir,
            conns: Mutex::new(HashMap::new()),
            idle: Condvar::new(),
            next_id: AtomicU64::new(1),
            loops: loop_shared.clone(),
            raw_open: Default::default(),
            spares: Default::default(),
            fetch,
        });
        let mut s = Services {
            shared,
            threads: Vec::new(),
            http_addr: None,
            raw_addr: None,
            s3_addr: None,
            io,
            loops: None,
        };
        let on_loops = match s.io.as_ref().and_then(|io| io.backend()) {
            Some(backend) => s.start_loops(backend, loop_shared)?,
            None => false,
        };
        if !on_loops {
            s.start_threads()?;
        }
        Ok(s)
    }

    /// HTTP, S3 and raw mode on the event loops, sharing each loop and its
    /// ring. False when Auto must fall back to threads (the probe passed
    /// but a loop could not start here: a ring's memory, the listeners).
    fn start_loops(
        &mut self,
        backend: pktfs_engine::RingBackend,
        loop_shared: Arc<crate::loops::LoopShared>,
    ) -> std::io::Result<bool> {
        let c = &self.shared.cfg;
        let ring = pktfs_engine::RxRingConfig {
            entries: c.ring_entries,
            entry_bytes: c.ring_entry_bytes,
            backend,
            ..Default::default()
        };
        let mut services: Vec<(SocketAddr, Arc<dyn crate::loops::Protocol>)> = Vec::new();
        if let Some(a) = c.http_listen {
            let p = crate::http::HttpListener {
                sh: self.shared.clone(),
            };
            services.push((a, Arc::new(p)));
        }
        if let Some(a) = c.s3_listen {
            // The S3 endpoint's state (the keys read from the image, the
            // multipart uploads in progress), shared by its connections.
            let p = crate::http::S3Listener {
                sh: self.shared.clone(),
                state: Default::default(),
            };
            services.push((a, Arc::new(p)));
        }
        if let Some(a) = c.raw_listen {
            let p = crate::raw::RawProtocol {
                sh: self.shared.clone(),
            };
            services.push((a, Arc::new(p)));
        }
        let started = crate::loops::Loops::start(
            self.shared.vol.clone(),
            services,
            crate::loops::loop_count(c.loops),
            ring,
            c.busy_poll,
            loop_shared,
        );
        let l = match started {
            Ok(l) => l,
            Err(e) if c.io == crate::config::IoMode::Auto => {
                tracing::warn!("{backend} loops could not start ({e}); serving with threads");
                self.io = Some(crate::loops::IoChoice::Threads {
                    reason: Some(format!("the loops could not start: {e}")),
                });
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        // The listeners' addresses, in the order they were given.
        let mut k = 0;
        for (on, addr) in [
            (c.http_listen.is_some(), &mut self.http_addr),
            (c.s3_listen.is_some(), &mut self.s3_addr),
            (c.raw_listen.is_some(), &mut self.raw_addr),
        ] {
            if on {
                *addr = Some(l.addr(k));
                k += 1;
            }
        }
        self.loops = Some(l);
        Ok(true)
    }

    /// HTTP and raw mode with a thread per connection, each listener
    /// accepting on a thread of its own.
    fn start_threads(&mut self) -> std::io::Result<()> {
        let c = &self.shared.cfg;
        if c.s3_listen.is_some() {
            // The S3 endpoint's bodies are walked (aws-chunked framing,
            // their digests) by the loops' sessions only.
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the S3 endpoint runs on the event loops (io_uring or epoll): not with --io threads or a read-only image",
            ));
        }
        // Receive timestamps on before `listen` (accepted sockets inherit
        // them), so even bytes that arrive before `accept` carry the
        // kernel's receive time.
        let http = c.http_listen.map(stamped::listen).transpose()?;
        let raw = c.raw_listen.map(stamped::listen).transpose()?;
        for (l, kind) in [(http, Kind::Http), (raw, Kind::Raw)] {
            let Some(l) = l else { continue };
            let addr = l.local_addr()?;
            match kind {
                Kind::Http => self.http_addr = Some(addr),
                Kind::Raw => self.raw_addr = Some(addr),
            }
            l.set_nonblocking(true)?;
            let sh = self.shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("pktfs-accept-{kind:?}").to_lowercase())
                .spawn(move || accept_loop(sh, l, kind))?;
            self.threads.push(t);
        }
        Ok(())
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    pub fn raw_addr(&self) -> Option<SocketAddr> {
        self.raw_addr
    }

    pub fn s3_addr(&self) -> Option<SocketAddr> {
        self.s3_addr
    }

    /// How connections are served (None: no listener).
    pub fn io_mode(&self) -> Option<&crate::loops::IoChoice> {
        self.io.as_ref()
    }

    /// The io mode for a person, e.g. "http+raw: io_uring (2 loops)".
    pub fn io_summary(&self) -> String {
        let Some(c) = &self.io else {
            return String::new();
        };
        let mut who = Vec::new();
        if self.http_addr.is_some() {
            who.push("http");
        }
        if self.s3_addr.is_some() {
            who.push("s3");
        }
        if self.raw_addr.is_some() {
            who.push("raw");
        }
        format!("{}: {c}", who.join("+"))
    }

    /// The io_uring loops' counters (connections, timeouts, the fd limit
    /// that bounds them), when connections run on them.
    pub fn loop_stats(&self) -> Option<crate::loops::LoopStats> {
        self.loops.as_ref().map(|l| l.stats())
    }

    /// Counts so far. A connection adds its counts every few requests
    /// and when it ends, so a busy one may be a few requests behind;
    /// [`Services::shutdown`] returns the exact totals.
    pub fn stats(&self) -> Stats {
        let m = &self.shared.metrics;
        let loops_refused = self.loops.as_ref().map_or(0, |l| l.stats().refused);
        Stats {
            connections: m.accepted.get(),
            refused: m.refused.get() + loops_refused,
            requests: m.requests_all.get(),
            bytes_in: m.bytes_in.get(),
            bytes_out: m.bytes_out.get(),
            files_stored: m.files_stored.get(),
            inflight_bytes: self.shared.loops.dram.load(Ordering::Relaxed),
            inflight_refused: self.shared.loops.dram_refused.load(Ordering::Relaxed),
            tier_fetched_bytes: self.shared.fetch.stats().held,
            tier_fetched_peak: self.shared.fetch.stats().peak,
        }
    }

    /// Connections being served now.
    pub fn active(&self) -> usize {
        self.shared.open_connections()
    }

    /// Stop accepting, cut every connection (uploads in progress are
    /// abandoned: never visible), and wait for their threads (at most
    /// `io_timeout`).
    /// Returns the final counts (every connection has added its own).
    pub fn shutdown(mut self) -> Stats {
        self.stop_all();
        self.stats()
    }

    fn stop_all(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Windows still queued fail (their connections are cut next).
        self.shared.fetch.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(l) = self.loops.as_mut() {
            // Closes every loop connection (delivered bytes committed) and
            // gives every lent buffer back.
            l.stop();
        }
        let mut conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        for s in conns.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let deadline =
            std::time::Instant::now() + self.shared.cfg.io_timeout.max(Duration::from_secs(1));
        while !conns.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            conns = self
                .shared
                .idle
                .wait_timeout(conns, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Raw mode's directory (0 without raw mode), found or made, refused on
/// a read-only server or when the identity may not store there.
fn raw_dir(vol: &Volume, cfg: &Config, on_change: Option<&OnChange>) -> std::io::Result<u64> {
    if cfg.raw_listen.is_none() {
        return Ok(0);
    }
    if cfg.read_only || vol.is_read_only() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "raw mode stores data: not with --read-only",
        ));
    }
    let segs = cfg.raw_dir.split('/').filter(|s| !s.is_empty());
    if crate::http::head::reserved(cfg.metrics_path.as_deref(), segs.map(str::as_bytes)).0 {
        let m = cfg.metrics_path.as_deref().unwrap_or_default();
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "--raw-dir {}: the HTTP listener's metrics path {m} is reserved: nothing is made at or below it; choose another --raw-dir (or --metrics-path)",
                cfg.raw_dir
            ),
        ));
    }
    let notify = |c: Change<'_>| {
        if let Some(f) = on_change {
            f(c)
        }
    };
    // Raw files are made as `as_user`: it must be allowed to.
    crate::raw::raw_directory(vol, &cfg.raw_dir, &cfg.as_user, &notify).map_err(|e| {
        let kind = match e {
            crate::raw::RawDirError::Denied { .. } | crate::raw::RawDirError::Sticky { .. } => {
                std::io::ErrorKind::PermissionDenied
            }
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    })
}

/// How connections are served (None: no listener): on the event loops
/// (io_uring when it can run here, else epoll; chosen once, at start,
/// Auto saying why it fell back), or a thread per connection.
fn io_choice(vol: &Volume, cfg: &Config) -> std::io::Result<Option<crate::loops::IoChoice>> {
    let any = cfg.raw_listen.is_some() || cfg.http_listen.is_some() || cfg.s3_listen.is_some();
    if !any {
        return Ok(None);
    }
    if vol.is_read_only() && cfg.io != crate::config::IoMode::Threads {
        // The loops lend the kernel free packet buffers, which a read-only
        // image cannot give: it is served by threads, whatever the mode
        // (and the choice printed says why).
        return Ok(Some(crate::loops::IoChoice::Threads {
            reason: Some(
                "the image is open read-only, and the event loops receive into its free buffers"
                    .into(),
            ),
        }));
    }
    crate::loops::choose(cfg.io, cfg.loops).map(Some)
}

impl Drop for Services {
    fn drop(&mut self) {
        if !self.shared.stop.load(Ordering::SeqCst)
            || !self.threads.is_empty()
            || self.loops.as_ref().is_some_and(|l| l.stats().active > 0)
        {
            self.stop_all();
        }
    }
}

/// Unregisters a connection when its thread ends.
struct ConnGuard {
    sh: Arc<Shared>,
    id: u64,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut c = self.sh.conns.lock().unwrap_or_else(|e| e.into_inner());
        c.remove(&self.id);
        self.sh.idle.notify_all();
    }
}

fn accept_loop(sh: Arc<Shared>, l: TcpListener, kind: Kind) {
    // The last accept error logged: a persistent one (EMFILE) is logged
    // when it starts and when it ends, not every 20 ms.
    let mut failing: Option<std::io::ErrorKind> = None;
    let addr = l
        .local_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    while !sh.stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, peer)) => {
                if failing.take().is_some() {
                    tracing::warn!("{kind:?} server on {addr}: accepting connections again");
                }
                admit(&sh, s, peer, kind)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Err(e) = wait_listener(&l, Duration::from_millis(200)) {
                    tracing::warn!("{kind:?} server on {addr}: waiting for connections: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and friends: connections wait in the backlog.
                if failing != Some(e.kind()) {
                    tracing::warn!("{kind:?} server on {addr}: cannot accept a connection: {e}");
                    failing = Some(e.kind());
                }
                std::thread::sleep(Duration::from_millis(20))
            }
        }
    }
}

fn wait_listener(l: &TcpListener, t: Duration) -> std::io::Result<bool> {
    let ts = rustix::event::Timespec {
        tv_sec: t.as_secs() as _,
        tv_nsec: t.subsec_nanos() as _,
    };
    let mut fds = [rustix::event::PollFd::new(l, rustix::event::PollFlags::IN)];
    Ok(rustix::event::poll(&mut fds, Some(&ts)).map_err(std::io::Error::from)? > 0)
}

fn admit(sh: &Arc<Shared>, s: TcpStream, peer: SocketAddr, kind: Kind) {
    if let Err(e) = s.set_nonblocking(false) {
        tracing::warn!("{kind:?} connection from {peer} dropped: cannot make it blocking: {e}");
        return;
    }
    // A raw connection over `raw_max_connections` is refused here, before
    // it costs a thread (it is closed when `s` drops).
    let raw_slot = match kind {
        Kind::Raw => match crate::raw::RawSlot::take(sh, peer) {
            Some(slot) => Some(slot),
            None => {
                let _ = s.shutdown(Shutdown::Both);
                return;
            }
        },
        Kind::Http => None,
    };
    let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
    {
        let mut c = sh.conns.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() >= sh.cfg.thread_cap() {
            drop(c);
            sh.metrics.refused.inc();
            tracing::warn!(
                "{kind:?} connection from {peer} refused: {} connections are being served (max_connections)",
                sh.cfg.thread_cap()
            );
            refuse(s, kind);
            return;
        }
        match s.try_clone() {
            Ok(k) => {
                c.insert(id, k);
            }
            Err(e) => {
                drop(c);
                sh.metrics.refused.inc();
                tracing::warn!("{kind:?} connection from {peer} dropped: cannot register it: {e}");
                return;
            }
        }
    }
    sh.metrics.accepted.inc();
    let guard = ConnGuard { sh: sh.clone(), id };
    let sh2 = sh.clone();
    let r = std::thread::Builder::new()
        .name(format!("pktfs-conn-{id}"))
        .stack_size(STACK)
        .spawn(move || {
            let _g = guard;
            // A panic while serving may leave the Volume's DRAM state
            // half-changed: stop the Volume (fail-stop; every later
            // request fails) rather than let other connections go on.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match raw_slot {
                None => crate::http::serve_connection(&sh2, s, peer),
                Some(slot) => crate::raw::serve_connection(&sh2, s, peer, slot),
            }));
            if let Err(p) = r {
                sh2.vol
                    .fail_after_panic(&format!("a connection from {peer}"), &*p);
            }
        });
    if let Err(e) = r {
        // The closure (and with it the guard and the socket) was dropped.
        sh.metrics.refused.inc();
        tracing::warn!("{kind:?} connection from {peer} dropped: cannot start its thread: {e}");
    }
}

/// Over the connection cap: HTTP gets a 503, raw is just closed. Never
/// blocks the accept loop.
fn refuse(s: TcpStream, kind: Kind) {
    let _ = s.set_nonblocking(true);
    if kind == Kind::Http {
        let _ = rustix::net::send(
            &s,
            b"HTTP/1.1 503 Service Unavailable\r\nServer: pktfs\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            rustix::net::SendFlags::NOSIGNAL,
        );
    }
    let _ = s.shutdown(Shutdown::Write);
    // Drop what the client already sent, so the close is not a reset that
    // could destroy the 503 before the client reads it.
    let mut buf = [0u8; 4096];
    for _ in 0..16 {
        match std::io::Read::read(&mut &s, &mut buf) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
}
