//! Raw stream mode: each connection's bytes become one file.
//!
//! The file is created (named by arrival time and peer, e.g.
//! `20250101T120000.123456789Z-127.0.0.1-54321`) in the configured
//! directory when the connection is accepted, and every `recv()` is
//! appended by one commit as soon as it lands: bytes go from the kernel
//! into packet buffers, become one record (CRC32C, kernel receive time,
//! stream position) and are linked at the end of the file. Each commit is
//! atomic and appends in stream order, so after a crash the file holds an
//! exact prefix of what was sent: never a hole, never a foreign byte.
//! There is nothing to answer; when the volume is full the connection is
//! closed and the file keeps what was stored.
//!
//! Two ways to serve it, same semantics: a thread per connection
//! (`serve_connection`, receiving with [`crate::recv::recv_into`]), or a
//! session on the io_uring event loops (`RawProtocol`), where the bytes
//! land in the loop's ring of free packet buffers and everything a
//! connection received in one loop turn is appended by one commit (the
//! same exact-prefix guarantee: commits append in stream order).

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktfs::{RxHeld, RxPiece, Volume};

use crate::config::Change;
use crate::recv::{recv_into, CommitPolicy, RecvHooks, RecvMode, RecvOptions};
use crate::shared::Shared;
use crate::util::{now_ns, raw_name};

/// Growth of a raw file is told to the change callback at most this often
/// (and within this long of the last commit).
const NOTE_EVERY: Duration = Duration::from_millis(100);

/// Create the connection's file (named by arrival time and peer) and tell
/// the change callback. `None` when it cannot be made.
fn create_file(sh: &Shared, peer: SocketAddr) -> Option<(String, u64)> {
    let vol = &*sh.vol;
    let base = raw_name(now_ns(), peer);
    let mut made = None;
    for k in 0..8 {
        let name = if k == 0 {
            base.clone()
        } else {
            format!("{base}-{k}")
        };
        match vol.create(sh.raw_dir, name.as_bytes(), 0o644, sh.uid, sh.gid) {
            Ok(a) => {
                made = Some((name, a.ino));
                break;
            }
            Err(pktfs::FsError::Exists) => continue,
            Err(e) => {
                tracing::warn!("raw connection from {peer}: cannot create {name}: {e}; closing it");
                break;
            }
        }
    }
    let (name, ino) = made?;
    tracing::info!(target: "pktfs::access", %peer, file = %name, "raw stream started");
    sh.metrics.files_stored.inc();
    sh.notify(Change::Entry {
        parent: sh.raw_dir,
        name: name.as_bytes(),
        ino,
    });
    Some((name, ino))
}

pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, peer: SocketAddr) {
    let vol = &*sh.vol;
    let Some((name, ino)) = create_file(sh, peer) else {
        let _ = sock.shutdown(Shutdown::Both);
        return;
    };
    // Every receive is committed at once (the smallest loss window); the
    // mount hears of the growth at most every NOTE_EVERY, and within that
    // of the last commit even when the sender goes quiet.
    let opts = RecvOptions {
        mode: RecvMode::Append,
        commit: CommitPolicy::EveryChunk,
        chunk_bytes: sh.cfg.rx_chunk,
        idle_timeout: sh.cfg.raw_idle_timeout,
        ..Default::default()
    };
    let noted = std::cell::Cell::new((Instant::now(), 0u64, 0u64)); // (when, told, size)
    let mut on_commit = |_ino: u64, size: u64| {
        let (when, told, before) = noted.get();
        sh.metrics.bytes_in.inc_by(size.saturating_sub(before));
        noted.set((when, told, size));
        if when.elapsed() >= NOTE_EVERY {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let mut on_tick = || {
        let (_, told, size) = noted.get();
        if told != size {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let t0 = Instant::now();
    let report = recv_into(
        vol,
        &sock,
        ino,
        &opts,
        RecvHooks {
            stop: Some(&sh.stop),
            on_commit: Some(&mut on_commit),
            tick: Some((NOTE_EVERY, &mut on_tick)),
        },
    );
    let (_, told, size) = noted.get();
    if told != size {
        sh.notify(Change::Data { ino, size });
    }
    tracing::info!(
        target: "pktfs::access",
        %peer,
        file = %name,
        bytes_in = size,
        ms = t0.elapsed().as_millis() as u64,
        records = report.records,
        ended_cleanly = report.ended_cleanly,
        "raw stream ended"
    );
}

/// The raw protocol on the io_uring event loops.
#[derive(Debug)]
pub(crate) struct RawProtocol {
    pub sh: Arc<Shared>,
}

impl crate::loops::Protocol for RawProtocol {
    fn name(&self) -> &'static str {
        "raw"
    }

    fn open<'v>(
        &'v self,
        vol: &'v Volume,
        peer: SocketAddr,
    ) -> Option<Box<dyn crate::loops::Session<'v> + 'v>> {
        if !std::ptr::eq(vol, &*self.sh.vol) {
            return None;
        }
        let (name, ino) = create_file(&self.sh, peer)?;
        self.sh.metrics.accepted.inc();
        Some(Box::new(RawSession {
            sh: self.sh.clone(),
            vol,
            ino,
            peer,
            name,
            started: Instant::now(),
            records: 0,
            pending: Vec::new(),
            seq: 0,
            size: 0,
            told: 0,
            told_at: Instant::now(),
        }))
    }
}

/// One raw connection on a loop: pieces made as bytes land, committed at
/// the end of each loop turn.
struct RawSession<'v> {
    sh: Arc<Shared>,
    vol: &'v Volume,
    ino: u64,
    /// For the access log: who, which file, since when, records stored.
    peer: SocketAddr,
    name: String,
    started: Instant,
    records: u64,
    /// Pieces of this turn, in stream order.
    pending: Vec<RxPiece<'v>>,
    /// Stream position of the next byte.
    seq: u64,
    /// File size after the last commit, and what the callback was told.
    size: u64,
    told: u64,
    told_at: Instant,
}

impl RawSession<'_> {
    /// Append this turn's pieces (one commit). `false`: the volume refused
    /// (full, or stopped): the connection must close.
    fn commit(&mut self) -> bool {
        if self.pending.is_empty() {
            return true;
        }
        let batch = std::mem::take(&mut self.pending);
        let records = batch.len() as u64;
        match self.vol.rx_commit(self.ino, batch) {
            Ok(size) => {
                self.sh
                    .metrics
                    .bytes_in
                    .inc_by(size.saturating_sub(self.size));
                self.size = size;
                self.records += records;
                if self.told_at.elapsed() >= NOTE_EVERY {
                    self.note();
                }
                true
            }
            Err(e) => {
                tracing::debug!("raw: inode {}: commit: {e}", self.ino);
                false
            }
        }
    }

    fn note(&mut self) {
        if self.told != self.size {
            self.sh.notify(Change::Data {
                ino: self.ino,
                size: self.size,
            });
            self.told = self.size;
        }
        self.told_at = Instant::now();
    }
}

impl<'v> crate::loops::Session<'v> for RawSession<'v> {
    fn on_data(&mut self, data: RxHeld<'v>, at: crate::loops::TurnClock) -> crate::loops::Flow<'v> {
        let n = data.len() as u64;
        // CRC and flush now, while the bytes are hot.
        self.pending.push(data.piece(at.rx_ns, self.seq));
        self.seq += n;
        crate::loops::Flow::Continue
    }

    fn end_turn(&mut self) -> crate::loops::Flow<'v> {
        match self.commit() {
            true => crate::loops::Flow::Continue,
            false => crate::loops::Flow::Close,
        }
    }

    fn on_eof(&mut self) -> crate::loops::Flow<'v> {
        // Nothing to answer: the stream is complete.
        crate::loops::Flow::Close
    }

    fn next_timer(&self) -> Option<Instant> {
        // The mount hears of growth within NOTE_EVERY of the last commit,
        // even when the sender goes quiet.
        (self.told != self.size).then_some(self.told_at + NOTE_EVERY)
    }

    fn on_timer(&mut self, _now: Instant) -> crate::loops::Flow<'v> {
        self.note();
        crate::loops::Flow::Continue
    }

    #[allow(clippy::misnamed_getters)] // raw mode's own timeout
    fn idle_timeout(&self) -> Duration {
        self.sh.cfg.raw_idle_timeout
    }

    fn on_close(&mut self, why: crate::loops::CloseReason) {
        // What arrived before the close is stored (a shutdown or timeout
        // does not lose delivered bytes), unless the volume refuses.
        let _ = self.commit();
        self.note();
        tracing::info!(
            target: "pktfs::access",
            peer = %self.peer,
            file = %self.name,
            bytes_in = self.size,
            ms = self.started.elapsed().as_millis() as u64,
            records = self.records,
            ended_cleanly = matches!(why, crate::loops::CloseReason::Eof),
            closed = ?why,
            "raw stream ended"
        );
    }
}
