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

use crate::receive::coalesce::Coalescer;
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
    mut hooks: RecvHooks<'_>,
) -> RecvReport {
    let mut rep = RecvReport {
        ino,
        ..Default::default()
    };
    let mut rx = RxStream::new(vol, sock, opts.chunk_bytes);
    let mut pieces: Vec<RxPiece> = Vec::new();
    let mut waiting = 0u64;
    // Reservation size follows the sender: doubles while recvs fill half of
    // it, shrinks when they don't.
    let mut want = IDLE_RESERVATION;
    let mut idle_until = Instant::now() + opts.idle_timeout;
    let mut clean = false;
    // Small receives (a sender of 1-byte segments) are copied together, as
    // on the loops (crate::receive::coalesce): a record per receive would let
    // a trickling sender exhaust the record table while space is free.
    // Large receives stay where they landed (one copy). Copied bytes are
    // made a piece when the reservation fills, before a large receive,
    // COALESCE_FLUSH after their first byte (raw files are read while they
    // grow; the socket's read timeout bounds the wait) and at the end.
    let mut co = Coalescer::default();
    let mut co_since: Option<Instant> = None;
    let mut commit = |pieces: &mut Vec<RxPiece>, rep: &mut RecvReport| -> bool {
        if pieces.is_empty() {
            return true;
        }
        let batch = std::mem::take(pieces);
        let stats: Vec<(u32, u32, pktfs_fs::RxTime)> =
            batch.iter().map(|p| (p.crc(), p.len(), p.at())).collect();
        match vol.rx_commit(ino, batch) {
            Ok(size) => {
                for (crc, len, at) in stats {
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
                rep.file_size = size;
                if let Some(f) = hooks.on_commit.as_mut() {
                    f(ino, size);
                }
                true
            }
            Err(e) => {
                tracing::warn!(
                    "receive into inode {ino}: commit failed: {e}; the stream ends here"
                );
                false
            }
        }
    };
    let ok = loop {
        if hooks.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            break true;
        }
        let left = idle_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::info!(
                "receive into inode {ino}: nothing arrived for {:?}; closing",
                opts.idle_timeout
            );
            break true;
        }
        let mut wait = hooks.tick.as_ref().map_or(left, |(t, _)| left.min(*t));
        if let Some(t) = co_since {
            // Only while small bytes wait: the large-receive path keeps its
            // timeout (no extra setsockopt per receive).
            wait = wait.min((t + COALESCE_FLUSH).saturating_duration_since(Instant::now()));
        }
        let n = match rx.fill(want, wait) {
            Ok(0) => {
                clean = true;
                break true;
            }
            Ok(n) => n as u32,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                if co_since.is_some_and(|t| t.elapsed() >= COALESCE_FLUSH) {
                    // The small bytes waited long enough: a record now,
                    // committed when the policy commits every receive
                    // (else with the rest, as the policy says).
                    co.flush(&mut pieces);
                    co_since = None;
                    if opts.commit == CommitPolicy::EveryChunk {
                        if !commit(&mut pieces, &mut rep) {
                            break false;
                        }
                        waiting = 0;
                    }
                }
                if let Some((_, f)) = hooks.tick.as_mut() {
                    f();
                }
                continue;
            }
            Err(e) => {
                tracing::info!("receive into inode {ino}: connection failed: {e}");
                break true;
            }
        };
        idle_until = Instant::now() + opts.idle_timeout;
        want = if n >= want / 2 {
            (want * 2).min(opts.chunk_bytes)
        } else {
            (want / 2).max(IDLE_RESERVATION)
        };
        let avail = rx.available();
        let r = if co.wants(avail) {
            let (ts, seq) = (rx.stamp_next(), rx.seq());
            let r = co.copy_in(vol, &rx.window()[..avail as usize], ts, seq, &mut pieces);
            // Copied (or refused): its landed space is not linked.
            rx.consume(avail);
            if co.pending() == 0 {
                co_since = None;
            } else if co_since.is_none() {
                co_since = Some(Instant::now());
            } else if co_since.is_some_and(|t| t.elapsed() >= COALESCE_FLUSH) {
                // A sender that trickles faster than the read timeout.
                co.flush(&mut pieces);
                co_since = None;
            }
            r.map(|_| ())
        } else {
            // A large receive: what was copied goes first (stream order).
            co.flush(&mut pieces);
            co_since = None;
            rx.take_into(avail, &mut pieces)
        };
        if let Err(e) = r {
            tracing::warn!(
                "receive into inode {ino}: cannot store more: {e}; the stream ends here"
            );
            break false; // out of records or space
        }
        waiting += avail as u64;
        let due = match opts.commit {
            CommitPolicy::EveryChunk => true,
            CommitPolicy::EveryBytes(n) => waiting >= n,
            CommitPolicy::AtEnd => false,
        };
        if due {
            if !commit(&mut pieces, &mut rep) {
                break false;
            }
            waiting = 0;
        }
    };
    // What was copied together is stored too (unless storing failed).
    co.flush(&mut pieces);
    drop(co);
    let ok = ok && commit(&mut pieces, &mut rep);
    if !pieces.is_empty() {
        vol.rx_abort(std::mem::take(&mut pieces));
    }
    drop(rx);
    rep.ended_cleanly = ok && clean;
    if !ok {
        // Tell the sender the stream was not stored to its end.
        let _ = sock.shutdown(Shutdown::Both);
    }
    if rep.file_size == 0 {
        rep.file_size = vol.getattr(ino).map(|a| a.size).unwrap_or(0);
    }
    rep
}
