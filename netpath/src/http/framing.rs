//! Request bodies: Content-Length and chunked framing, read from the
//! packet buffer into a sink (dropped, made into pieces here, or handed to
//! a persister thread). Body bytes become pieces where they landed,
//! between the chunk framing, which is skipped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pktfs_fs::{FsError, RxPiece};

use super::chunked::{chunk_size_line, trailer_section};
use super::conn::Conn;
use super::head::{Framing, Head};
use super::response::status_of;
use crate::receive::coalesce::Coalescer;
use crate::receive::stream::{RxJob, IDLE_RESERVATION};

/// Coalesce body bytes into pieces of at least this size (unless the body
/// or the reservation ends first), so a trickle of small receives does not
/// become a record per receive.
const MIN_PIECE: u32 = 16 << 10;

/// An upload's first check of the free space and records comes after this
/// many bytes or records (a small upload costs no `statfs`: the volume's
/// own refusal covers it), then every this many.
const SPACE_CHECK_BYTES: u64 = 1 << 20;
const SPACE_CHECK_RECORDS: u64 = 64;

/// Keeps an upload from eating into the volume's reserve
/// (`Config::upload_reserve_bytes`, `Config::upload_reserve_records`):
/// counts the bytes and records the body makes, and once a check's worth
/// has been made looks at what is free again. Stops the body with 507
/// (nothing is stored) when what is free, less the reserve, is used up:
/// one client's body cannot take the volume's space or record table to
/// zero. A few integer operations per piece otherwise.
#[derive(Debug)]
pub(super) struct SpaceGuard {
    bytes_left: u64,
    records_left: u64,
}

impl Default for SpaceGuard {
    fn default() -> Self {
        SpaceGuard {
            bytes_left: SPACE_CHECK_BYTES,
            records_left: SPACE_CHECK_RECORDS,
        }
    }
}

impl SpaceGuard {
    /// `bytes` and `records` more were made.
    #[inline]
    pub(super) fn take(
        &mut self,
        vol: &pktfs_fs::Volume,
        cfg: &crate::config::Config,
        bytes: u64,
        records: u64,
    ) -> Result<(), BodyError> {
        if bytes < self.bytes_left && records < self.records_left {
            self.bytes_left -= bytes;
            self.records_left -= records;
            return Ok(());
        }
        self.check(vol, cfg)
    }

    #[cold]
    fn check(
        &mut self,
        vol: &pktfs_fs::Volume,
        cfg: &crate::config::Config,
    ) -> Result<(), BodyError> {
        let st = vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        let bytes = free.saturating_sub(cfg.upload_reserve_bytes);
        let records = st.records_free.saturating_sub(cfg.upload_reserve_records);
        if bytes == 0 || records == 0 {
            return Err(BodyError::Fs(FsError::NoSpace(
                "the body outgrows the free space or records (a reserve is kept)",
            )));
        }
        // Uncommitted pieces are not in `statfs` yet: look again well
        // before what is left could be used up.
        self.bytes_left = (bytes / 2).clamp(1, SPACE_CHECK_BYTES);
        self.records_left = (records / 2).clamp(1, SPACE_CHECK_RECORDS);
        Ok(())
    }
}

/// A body being read on the threaded transport: its small pieces copied
/// together, its use of space watched.
#[derive(Default)]
struct BodyState<'v> {
    chunked: bool,
    co: Coalescer<'v>,
    guard: SpaceGuard,
}

/// Where body bytes go.
pub(super) enum Sink<'s, 'v> {
    /// Skipped (a body nobody stores).
    Discard,
    /// Pieces made and committed on the connection's thread.
    Inline { ino: u64, records: u64 },
    /// Handed to a persister thread.
    Persister {
        tx: std::sync::mpsc::SyncSender<Work<'v>>,
        failed: &'s AtomicBool,
    },
}

/// What the persister thread is given, in stream order.
pub(super) enum Work<'v> {
    Job(RxJob<'v>),
    Piece(RxPiece<'v>),
}

/// Why a body could not be read or stored.
#[derive(Debug)]
pub(super) enum BodyError {
    /// The client went away (EOF, reset): nothing to answer.
    Gone(String),
    Timeout,
    Bad(&'static str),
    Fs(FsError),
    /// An S3 body refused by its signatures or digests (answered with
    /// that S3 error; nothing stored).
    S3(pktfs_s3::error::S3Error),
}

impl<'a> Conn<'a> {
    /// Receive a body into `sink`. Returns the body's byte count.
    pub(super) fn read_body(
        &mut self,
        framing: Framing,
        sink: &mut Sink<'_, 'a>,
    ) -> Result<u64, BodyError> {
        let mut total = 0u64;
        let mut st = BodyState::default();
        self.pace.begin();
        let mut r = match framing {
            Framing::Length(n) => self.body_bytes(n, sink, &mut total, &mut st),
            Framing::Chunked => self.chunked_body(sink, &mut total, &mut st),
        };
        if r.is_ok() {
            // What was copied together goes last, in order.
            r = self.flush_coalesced(sink, &mut st);
        }
        // An inline body's last pieces stay in `self.pieces`: they are
        // committed together with the file's name (`Volume::rx_link`), so
        // a small upload is one journalled commit, not two.
        if r.is_err() {
            self.vol.rx_abort(std::mem::take(&mut self.pieces));
        }
        r.map(|_| total)
    }

    fn chunked_body(
        &mut self,
        sink: &mut Sink<'_, 'a>,
        total: &mut u64,
        st: &mut BodyState<'a>,
    ) -> Result<(), BodyError> {
        st.chunked = true;
        loop {
            let size = self.chunk_line()?;
            if size == 0 {
                return self.trailers();
            }
            self.body_bytes(size, sink, total, st)?;
            self.expect_crlf()?;
        }
    }

    /// The coalesced small pieces become a piece, after those before them:
    /// into `self.pieces` (inline) or to the persister.
    fn flush_coalesced(
        &mut self,
        sink: &mut Sink<'_, 'a>,
        st: &mut BodyState<'a>,
    ) -> Result<(), BodyError> {
        match sink {
            Sink::Discard => Ok(()),
            Sink::Inline { .. } => {
                st.co.flush(&mut self.pieces);
                Ok(())
            }
            Sink::Persister { tx, .. } => {
                let mut ps = Vec::new();
                st.co.flush(&mut ps);
                for p in ps {
                    if tx.send(Work::Piece(p)).is_err() {
                        return Err(BodyError::Fs(FsError::NoSpace(
                            "the upload could not be stored",
                        )));
                    }
                }
                Ok(())
            }
        }
    }

    /// A chunk's `k` small bytes copied together with the body's other
    /// small pieces (pieces the copy completed go to the sink).
    fn coalesce(
        &mut self,
        k: u32,
        sink: &mut Sink<'_, 'a>,
        st: &mut BodyState<'a>,
    ) -> Result<(), BodyError> {
        let (ts, seq) = (self.rx.stamp_next(), self.rx.seq());
        let mut made = Vec::new();
        let out = match sink {
            Sink::Inline { .. } => &mut self.pieces,
            _ => &mut made,
        };
        let before = out.len();
        let r = st
            .co
            .copy_in(self.vol, &self.rx.window()[..k as usize], ts, seq, out);
        let n = (out.len() - before) as u64;
        self.rx.consume(k);
        if let Err(e) = r {
            self.vol.rx_abort(made);
            return Err(BodyError::Fs(e));
        }
        st.guard.take(self.vol, &self.sh.cfg, k as u64, n)?;
        if let Sink::Persister { tx, .. } = sink {
            for p in made {
                if tx.send(Work::Piece(p)).is_err() {
                    return Err(BodyError::Fs(FsError::NoSpace(
                        "the upload could not be stored",
                    )));
                }
            }
        }
        Ok(())
    }

    /// Wait for more of the body, keeping to its pace
    /// (`Config::min_recv_rate`, a line's `header_timeout`: [`super::pace`]);
    /// a receive that times out before the pace is judged waits again.
    fn more(&mut self, want: u64) -> Result<(), BodyError> {
        let want = want.clamp(1, u32::MAX as u64) as u32;
        loop {
            let timeout = self
                .pace
                .wait(Instant::now(), self.req.started, &self.sh.cfg)
                .map_err(|_| BodyError::Timeout)?;
            match self.rx.fill(want, timeout) {
                Ok(0) => return Err(BodyError::Gone("the client closed the connection".into())),
                Ok(n) => {
                    self.add_in(n as u64);
                    self.pace.got(n as u64);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                Err(e) => return Err(BodyError::Gone(e.to_string())),
            }
        }
    }

    /// Commit the pieces made so far into `ino` (timed for the metrics).
    pub(super) fn commit(&mut self, ino: u64, records: &mut u64) -> Result<(), BodyError> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let n = self.pieces.len() as u64;
        let t0 = Instant::now();
        let r = self.vol.rx_commit(ino, std::mem::take(&mut self.pieces));
        self.sh
            .metrics
            .commit_seconds
            .observe(t0.elapsed().as_secs_f64());
        r.map_err(BodyError::Fs)?;
        *records += n;
        Ok(())
    }

    /// `left` body bytes: taken as pieces where they landed, or skipped.
    fn body_bytes(
        &mut self,
        mut left: u64,
        sink: &mut Sink<'_, 'a>,
        total: &mut u64,
        st: &mut BodyState<'a>,
    ) -> Result<(), BodyError> {
        let mut batch: u64 = self.pieces.iter().map(|p| p.len() as u64).sum();
        while left > 0 {
            let avail = self.rx.available() as u64;
            let after = left.saturating_sub(avail).min(u32::MAX as u64) as u32;
            let take_now = avail >= left
                || (avail > 0 && (avail >= MIN_PIECE as u64 || self.rx.will_move(after)));
            if !take_now {
                self.more(left - avail)?;
                continue;
            }
            let k = avail.min(left) as u32;
            // A chunked body's small chunks are copied together (a record
            // per chunk would let 1-byte chunks exhaust the records); a
            // Content-Length body's pieces are already large (`MIN_PIECE`).
            if st.chunked && !matches!(sink, Sink::Discard) && st.co.wants(k) {
                self.coalesce(k, sink, st)?;
                left -= k as u64;
                *total += k as u64;
                continue;
            }
            if !matches!(sink, Sink::Discard) {
                self.flush_coalesced(sink, st)?;
                st.guard.take(self.vol, &self.sh.cfg, k as u64, 1)?;
            }
            match sink {
                Sink::Discard => self.rx.consume(k),
                Sink::Inline { ino, records } => {
                    self.rx
                        .take_into(k, &mut self.pieces)
                        .map_err(BodyError::Fs)?;
                    batch += k as u64;
                    if batch >= self.sh.cfg.rx_chunk as u64 {
                        let ino = *ino;
                        self.commit(ino, records)?;
                        batch = 0;
                    }
                }
                Sink::Persister { tx, failed } => {
                    if failed.load(Ordering::Relaxed) {
                        return Err(BodyError::Fs(FsError::NoSpace(
                            "the upload could not be stored",
                        )));
                    }
                    let work = match self.rx.take_job(k) {
                        Some(j) => vec![Work::Job(j)],
                        None => {
                            // DRAM fallback: pieces made here, in order.
                            let mut ps = Vec::new();
                            let r = self.rx.take_into(k, &mut ps);
                            if let Err(e) = r {
                                self.vol.rx_abort(ps);
                                return Err(BodyError::Fs(e));
                            }
                            ps.into_iter().map(Work::Piece).collect()
                        }
                    };
                    for w in work {
                        if let Err(std::sync::mpsc::SendError(w)) = tx.send(w) {
                            drop(w); // its reference goes back
                            return Err(BodyError::Fs(FsError::NoSpace(
                                "the upload could not be stored",
                            )));
                        }
                    }
                }
            }
            left -= k as u64;
            *total += k as u64;
        }
        Ok(())
    }

    /// A chunk-size line (extensions ignored), skipped in the buffer.
    fn chunk_line(&mut self) -> Result<u64, BodyError> {
        loop {
            let w = self.rx.window();
            if !w.is_empty() {
                match chunk_size_line(w, self.sh.cfg.max_header_bytes) {
                    Ok(Some((n, size))) => {
                        self.rx.consume(n as u32);
                        self.pace.line_done();
                        return Ok(size);
                    }
                    Ok(None) => self.pace.line_open(),
                    Err(why) => return Err(BodyError::Bad(why)),
                }
            }
            self.more(IDLE_RESERVATION as u64)?;
        }
    }

    fn expect_crlf(&mut self) -> Result<(), BodyError> {
        while self.rx.available() < 2 {
            self.more(IDLE_RESERVATION as u64)?;
        }
        if &self.rx.window()[..2] != b"\r\n" {
            return Err(BodyError::Bad("chunk data not followed by CRLF"));
        }
        self.rx.consume(2);
        Ok(())
    }

    fn trailers(&mut self) -> Result<(), BodyError> {
        loop {
            match trailer_section(self.rx.window(), self.sh.cfg.max_header_bytes) {
                Ok(Some(n)) => {
                    self.rx.consume(n as u32);
                    self.pace.line_done();
                    return Ok(());
                }
                Ok(None) => {
                    if !self.rx.window().is_empty() {
                        self.pace.line_open();
                    }
                }
                Err(why) => return Err(BodyError::Bad(why)),
            }
            self.more(IDLE_RESERVATION as u64)?;
        }
    }

    /// Read and drop a body nobody stores (GET with a body, ...). False:
    /// the connection is done.
    pub(super) fn discard_body(&mut self, h: &Head) -> bool {
        let Some(f) = h.framing() else {
            return true;
        };
        if let Some(ob) = self.outbox.as_mut() {
            // On an event loop the session skips it as it arrives.
            ob.skip_body = Some(f);
            return true;
        }
        match self.read_body(f, &mut Sink::Discard) {
            Ok(_) => true,
            Err(e) => {
                self.body_failed(e);
                false
            }
        }
    }

    /// Answer (when there is anyone to answer) and log a failed body.
    pub(super) fn body_failed(&mut self, e: BodyError) {
        match e {
            BodyError::Gone(why) => tracing::info!(
                peer = %self.peer,
                method = self.req.method,
                path = %self.path.display(),
                "request body incomplete: {why}; nothing was stored"
            ),
            BodyError::Timeout => self.error(408, "request body too slow", false),
            BodyError::Bad(m) => {
                self.error(400, m, false);
                self.linger();
            }
            BodyError::Fs(e) => {
                let code = status_of(&e);
                self.error(code, &e.to_string(), false);
                self.linger();
            }
            BodyError::S3(e) => {
                self.s3_error(&e, false);
                self.linger();
            }
        }
    }
}
