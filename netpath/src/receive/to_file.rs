//! The receive-to-file socket helper: one call turns a TCP stream into a
//! file, with the servers' guarantees.
//!
//! ```no_run
//! # fn demo(vol: &pktfs_fs::Volume, sock: std::net::TcpStream) -> Result<(), pktfs_netpath::receive::to_file::RecvError> {
//! use pktfs_netpath::receive::to_file::{recv_to_file, RecvOptions};
//! let report = recv_to_file(vol, &sock, "/logs/today.bin", &RecvOptions::default())?;
//! println!("{} bytes in {} records, CRC32C {:08x}", report.bytes, report.records, report.crc32c);
//! # Ok(()) }
//! ```
//!
//! - Bytes move from the kernel into packet buffers of the image once
//!   ([`crate::receive::stream::RxStream`]); each record carries the CRC32C of its
//!   bytes (computed while they are hot), the kernel's receive time of its
//!   first byte (SO_TIMESTAMPNS; where the kernel gave none, the clock when
//!   it was taken, and the record says so: no `FLAG_KERNEL_TIME`) and its
//!   position in the stream. A record is the bytes of one receive (more
//!   when small ones are copied together, below), not a TCP segment.
//! - Timestamps are on before the first byte can arrive when the socket
//!   comes from [`crate::receive::stamped`] (`pktfs recv` listens and
//!   connects with it); on any other socket they are turned on here.
//! - Data is durable at the commit points [`CommitPolicy`] chooses; each
//!   commit appends in stream order, so after a crash the file is an exact
//!   prefix of the stream (for [`RecvMode::ReplaceAtEnd`]: the old file, or
//!   the whole new one).
//! - Receives under 2 KiB (a trickling sender) are copied together into
//!   one record instead (`crate::receive::coalesce`), stored within 100 ms
//!   of their first byte; so a stream of 1-byte segments takes about a
//!   record per 32 KiB, not one per byte.
//! - The report's CRC32C of the whole stream is combined from the records'
//!   CRCs: no second pass over the data.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pktfs_fs::{FileType, FsError, RxPiece, Volume};

use crate::receive::body::{Framing, Pieces, Walk};
use crate::receive::stream::{RxStream, IDLE_RESERVATION};

/// The longest small received bytes wait in the coalescing reservation
/// before they are stored (the loops' raw sessions use the same).
pub(crate) const COALESCE_FLUSH: Duration = Duration::from_millis(100);

/// What to do with the file named by the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecvMode {
    /// Create it; fail if the name exists.
    #[default]
    CreateOnly,
    /// Append to it (created if missing).
    Append,
    /// Receive into an unnamed file that takes the name, replacing what
    /// was there, atomically when the stream ends cleanly.
    ReplaceAtEnd,
}

/// When received bytes are made durable and linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitPolicy {
    /// After every receive (the raw server's policy): the smallest loss
    /// window, the most commits.
    EveryChunk,
    /// Whenever this many bytes are waiting.
    EveryBytes(u64),
    /// Once, when the stream ends (a crash before that keeps nothing of
    /// this stream).
    AtEnd,
}

impl Default for CommitPolicy {
    fn default() -> Self {
        CommitPolicy::EveryBytes(4 << 20)
    }
}

/// How to receive.
#[derive(Clone, Debug)]
pub struct RecvOptions {
    pub mode: RecvMode,
    pub commit: CommitPolicy,
    /// Permission bits, owner and group of a file this creates.
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    /// Largest reservation of buffer space per receive, bytes.
    pub chunk_bytes: u32,
    /// Give up when the sender sends nothing for this long.
    pub idle_timeout: Duration,
}

impl Default for RecvOptions {
    fn default() -> Self {
        RecvOptions {
            mode: RecvMode::CreateOnly,
            commit: CommitPolicy::default(),
            perm: 0o644,
            uid: 0,
            gid: 0,
            chunk_bytes: 1 << 20,
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// What a receive stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecvReport {
    pub ino: u64,
    /// Bytes of this stream now durable in the file.
    pub bytes: u64,
    /// Records they make.
    pub records: u64,
    /// Receive time of the first and of the last stored record, ns since
    /// the epoch (0 when nothing arrived).
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    /// Records whose time is the kernel's (the rest carry the receiver's
    /// clock: the kernel gave no time for their bytes).
    pub kernel_time_records: u64,
    /// CRC32C of the stored stream bytes, combined from the record CRCs.
    pub crc32c: u32,
    /// The sender closed the stream (rather than an error, a timeout or a
    /// full image ending it) and everything it sent is stored.
    pub ended_cleanly: bool,
    /// The file's size afterwards.
    pub file_size: u64,
}

impl RecvReport {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ino": self.ino, "bytes": self.bytes, "records": self.records,
            "first_rx_ns": self.first_rx_ns, "last_rx_ns": self.last_rx_ns,
            "kernel_time_records": self.kernel_time_records,
            "crc32c": format!("{:08x}", self.crc32c), "ended_cleanly": self.ended_cleanly,
            "file_size": self.file_size,
        })
    }
}

/// Why a receive could not start (once it runs, how it ended is in the
/// report).
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    #[error("{path}: {source}")]
    Fs { path: String, source: FsError },
    #[error("{0}: not a regular file")]
    NotAFile(String),
    #[error("{0}: the path must name a file below the root, e.g. /logs/a.bin")]
    BadPath(String),
}

/// Hooks the servers use; a library caller can leave them alone.
#[derive(Default)]
#[allow(missing_debug_implementations)] // closures
pub struct RecvHooks<'a> {
    /// Stop early (server shutdown).
    pub stop: Option<&'a AtomicBool>,
    /// Called after each commit with (inode, file size).
    pub on_commit: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Called at least this often while the sender is quiet.
    pub tick: Option<(Duration, &'a mut dyn FnMut())>,
}

/// `path`'s directory and name (`/logs/a.bin` -> `/logs`, `a.bin`).
fn split_target(path: &str) -> Result<(&str, &str), RecvError> {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some((d, n)) if !n.is_empty() => Ok((d, n)),
        _ => Err(RecvError::BadPath(path.to_string())),
    }
}

/// Whether a stream could be received into `path` in `mode` now: the
/// image is writable, the directory exists, and the name is absent
/// (create), absent or a regular file (append), or anything but a
/// directory (replace). A receiver checks this before it accepts or makes
/// a connection, so a sender is not taken on only to be refused after;
/// [`recv_to_file`] still decides (the name may change in between).
pub fn check_target(vol: &Volume, path: &str, mode: RecvMode) -> Result<(), RecvError> {
    let fs = |source| RecvError::Fs {
        path: path.to_string(),
        source,
    };
    let (dir, name) = split_target(path)?;
    if vol.is_read_only() {
        return Err(fs(FsError::ReadOnly));
    }
    let dir = vol.resolve_path(dir).map_err(fs)?.ino;
    match (mode, vol.lookup(dir, name.as_bytes())) {
        (RecvMode::CreateOnly, Ok(_)) => Err(fs(FsError::Exists)),
        (RecvMode::Append, Ok(a)) if a.kind != FileType::Regular => {
            Err(RecvError::NotAFile(path.to_string()))
        }
        (RecvMode::ReplaceAtEnd, Ok(a)) if a.kind == FileType::Directory => Err(fs(FsError::IsDir)),
        (_, Ok(_)) | (_, Err(FsError::NotFound)) => Ok(()),
        (_, Err(e)) => Err(fs(e)),
    }
}

/// Receive the stream on `sock` into the file at `path` (absolute inside
/// the image). Returns when the sender closes the stream, on an error, or
/// after `idle_timeout` of silence; the report says which.
pub fn recv_to_file(
    vol: &Volume,
    sock: &TcpStream,
    path: &str,
    opts: &RecvOptions,
) -> Result<RecvReport, RecvError> {
    let fs = |source| RecvError::Fs {
        path: path.to_string(),
        source,
    };
    let (dir, name) = split_target(path)?;
    let dir = vol.resolve_path(dir).map_err(fs)?.ino;
    let (ino, tmp) = match opts.mode {
        RecvMode::CreateOnly => (
            vol.create(dir, name.as_bytes(), opts.perm, opts.uid, opts.gid)
                .map_err(fs)?
                .ino,
            false,
        ),
        RecvMode::Append => match vol.lookup(dir, name.as_bytes()) {
            Ok(a) if a.kind == FileType::Regular => (a.ino, false),
            Ok(_) => return Err(RecvError::NotAFile(path.to_string())),
            Err(FsError::NotFound) => (
                vol.create(dir, name.as_bytes(), opts.perm, opts.uid, opts.gid)
                    .map_err(fs)?
                    .ino,
                false,
            ),
            Err(e) => return Err(fs(e)),
        },
        RecvMode::ReplaceAtEnd => (
            vol.create_tmpfile(opts.perm, opts.uid, opts.gid)
                .map_err(fs)?
                .ino,
            true,
        ),
    };
    let mut rep = recv_into(vol, sock, ino, opts, RecvHooks::default());
    if tmp {
        if rep.ended_cleanly {
            // The stream is whole: it takes the name in one commit.
            if let Err(e) = vol.link_tmpfile(ino, dir, name.as_bytes(), true) {
                vol.unpin(ino, 1);
                return Err(fs(e));
            }
        } else {
            // Not whole: never visible; its space goes back.
            vol.unpin(ino, 1);
            rep.bytes = 0;
        }
    }
    Ok(rep)
}

/// The receive loop on an existing regular file `ino`: every commit
/// appends what arrived, in stream order.
pub fn recv_into(
    vol: &Volume,
    sock: &TcpStream,
    ino: u64,
    opts: &RecvOptions,
    hooks: RecvHooks<'_>,
) -> RecvReport {
    let mut r = Receiver {
        vol,
        sock,
        ino,
        opts,
        hooks,
        rx: RxStream::new(vol, sock, opts.chunk_bytes),
        walk: Walk::new(Framing::Stream, 0),
        pieces: Pieces::default(),
        rep: RecvReport {
            ino,
            ..Default::default()
        },
        waiting: 0,
        want: IDLE_RESERVATION,
        idle_until: Instant::now() + opts.idle_timeout,
        small_since: None,
    };
    let end = r.run();
    r.finish(end)
}

/// How a receive loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The sender closed the stream.
    Closed,
    /// Stopped, idle too long, or the connection failed: what arrived is
    /// stored.
    Stopped,
    /// Storing failed (no space or records, a commit refused): the rest
    /// is not stored.
    Failed,
}

/// What one wait for the sender brought.
enum Got {
    Bytes(u32),
    /// Nothing before the wait ended.
    Quiet,
    End(End),
}

/// One stream being received into a file ([`recv_into`]).
struct Receiver<'v, 'o, 'h> {
    vol: &'v Volume,
    sock: &'v TcpStream,
    ino: u64,
    opts: &'o RecvOptions,
    hooks: RecvHooks<'h>,
    rx: RxStream<'v>,
    /// The stream is walked (all of it data) into pieces. Small receives
    /// (a sender of 1-byte segments) are copied together, as on the loops
    /// (`crate::receive::coalesce`): a record per receive would let a
    /// trickling sender exhaust the record table while space is free.
    /// Large receives stay where they landed (one copy). Copied bytes are
    /// made a piece when the reservation fills, before a large receive,
    /// [`COALESCE_FLUSH`] after their first byte (raw files are read while
    /// they grow; the socket's read timeout bounds the wait) and at the
    /// end.
    walk: Walk,
    pieces: Pieces<'v>,
    rep: RecvReport,
    /// Bytes taken since the last commit.
    waiting: u64,
    /// The reservation size asked for: it follows the sender, doubling
    /// while receives fill half of it and shrinking when they do not.
    want: u32,
    idle_until: Instant,
    /// When the oldest small byte waiting to be copied together arrived.
    small_since: Option<Instant>,
}

impl Receiver<'_, '_, '_> {
    fn run(&mut self) -> End {
        loop {
            if self.hooks.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return End::Stopped;
            }
            let ok = match self.receive() {
                Got::End(e) => return e,
                Got::Bytes(n) => self.take(n),
                Got::Quiet => self.quiet(),
            };
            if !ok {
                return End::Failed;
            }
        }
    }

    /// Wait for the sender (at most until the idle timeout, the next tick,
    /// or the moment small bytes waited long enough).
    fn receive(&mut self) -> Got {
        let left = self.idle_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::info!(
                "receive into inode {}: nothing arrived for {:?}; closing",
                self.ino,
                self.opts.idle_timeout
            );
            return Got::End(End::Stopped);
        }
        let mut wait = self.hooks.tick.as_ref().map_or(left, |(t, _)| left.min(*t));
        if let Some(t) = self.small_since {
            // Only while small bytes wait: the large-receive path keeps its
            // timeout (no extra setsockopt per receive).
            wait = wait.min((t + COALESCE_FLUSH).saturating_duration_since(Instant::now()));
        }
        match self.rx.fill(self.want, wait) {
            Ok(0) => Got::End(End::Closed),
            Ok(n) => Got::Bytes(n as u32),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Got::Quiet,
            Err(e) => {
                tracing::info!("receive into inode {}: connection failed: {e}", self.ino);
                Got::End(End::Stopped)
            }
        }
    }

    /// The sender was quiet for a wait: small bytes that waited long
    /// enough become a record now, committed when the policy commits
    /// every receive (else with the rest, as the policy says).
    fn quiet(&mut self) -> bool {
        if self
            .small_since
            .is_some_and(|t| t.elapsed() >= COALESCE_FLUSH)
        {
            let _ = self.pieces.flush_small();
            self.small_since = None;
            if self.opts.commit == CommitPolicy::EveryChunk {
                if !self.commit() {
                    return false;
                }
                self.waiting = 0;
            }
        }
        if let Some((_, f)) = self.hooks.tick.as_mut() {
            f();
        }
        true
    }

    /// `n` bytes arrived: everything received becomes pieces (small ones
    /// copied together), committed when the policy says.
    fn take(&mut self, n: u32) -> bool {
        self.idle_until = Instant::now() + self.opts.idle_timeout;
        self.want = if n >= self.want / 2 {
            (self.want * 2).min(self.opts.chunk_bytes)
        } else {
            (self.want / 2).max(IDLE_RESERVATION)
        };
        let avail = self.rx.available();
        let (at, mut seq) = (self.rx.stamp_next(), self.rx.seq());
        let landed = self.rx.landed(avail);
        let r = self
            .walk
            .step(
                landed,
                at,
                &mut seq,
                Some(&mut self.pieces),
                &mut (),
                self.vol,
            )
            .map(|_| ());
        // Taken or refused, its landed space is not walked again.
        self.rx.consume(avail);
        if let Err(e) = r {
            tracing::warn!(
                "receive into inode {}: cannot store more: {e}; the stream ends here",
                self.ino
            );
            return false; // out of records or space
        }
        if self.pieces.pending_small() == 0 {
            self.small_since = None;
        } else if self.small_since.is_none() {
            self.small_since = Some(Instant::now());
        } else if self
            .small_since
            .is_some_and(|t| t.elapsed() >= COALESCE_FLUSH)
        {
            // A sender that trickles faster than the read timeout.
            let _ = self.pieces.flush_small();
            self.small_since = None;
        }
        self.waiting += avail as u64;
        let due = match self.opts.commit {
            CommitPolicy::EveryChunk => true,
            CommitPolicy::EveryBytes(n) => self.waiting >= n,
            CommitPolicy::AtEnd => false,
        };
        if due {
            if !self.commit() {
                return false;
            }
            self.waiting = 0;
        }
        true
    }

    /// Commit the pieces made; the report counts them once they are in.
    fn commit(&mut self) -> bool {
        if self.pieces.made() == 0 {
            return true;
        }
        let mut seen = Seen::default();
        match self.pieces.commit(self.vol, self.ino, &mut seen) {
            Ok(size) => {
                seen.count_into(&mut self.rep);
                self.rep.file_size = size;
                if let Some(f) = self.hooks.on_commit.as_mut() {
                    f(self.ino, size);
                }
                true
            }
            Err(e) => {
                tracing::warn!(
                    "receive into inode {}: commit failed: {e}; the stream ends here",
                    self.ino
                );
                false
            }
        }
    }

    /// What was copied together is stored too (unless storing failed);
    /// the report.
    fn finish(mut self, end: End) -> RecvReport {
        let stored = end != End::Failed && self.pieces.flush_small().is_ok() && self.commit();
        self.pieces.abort(self.vol);
        drop(self.rx);
        self.rep.ended_cleanly = stored && end == End::Closed;
        if !stored {
            // Tell the sender the stream was not stored to its end.
            let _ = self.sock.shutdown(Shutdown::Both);
        }
        if self.rep.file_size == 0 {
            self.rep.file_size = self.vol.getattr(self.ino).map(|a| a.size).unwrap_or(0);
        }
        self.rep
    }
}

/// The pieces a commit stores, as the report counts them (only once the
/// commit succeeded).
#[derive(Default)]
struct Seen(Vec<(u32, u32, pktfs_fs::RxTime)>);

impl crate::receive::body::Hooks for Seen {
    type Error = std::convert::Infallible;
    fn pieces(&mut self, pieces: &[RxPiece<'_>]) {
        self.0 = pieces.iter().map(|p| (p.crc(), p.len(), p.at())).collect();
    }
}

impl Seen {
    fn count_into(self, rep: &mut RecvReport) {
        for (crc, len, at) in self.0 {
            let ts = at.ns();
            rep.kernel_time_records += u64::from(at.is_kernel());
            rep.crc32c = if rep.bytes == 0 {
                crc
            } else {
                pktfs_layout::crc32c_combine(rep.crc32c, crc, len as u64)
            };
            rep.bytes += len as u64;
            rep.records += 1;
            if rep.first_rx_ns == 0 {
                rep.first_rx_ns = ts;
            }
            rep.last_rx_ns = ts;
        }
    }
}
