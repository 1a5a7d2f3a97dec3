//! Request bodies: Content-Length and chunked framing, read from the
//! packet buffer into a sink (dropped, made into pieces here, or handed to
//! a persister thread). Body bytes become pieces where they landed,
//! between the chunk framing, which is skipped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pktfs::{FsError, RxPiece};

use super::chunked::{chunk_size_line, trailer_section};
use super::conn::Conn;
use super::head::{Framing, Head};
use super::response::status_of;
use crate::rxstream::{RxJob, IDLE_RESERVATION};

/// Coalesce body bytes into pieces of at least this size (unless the body
/// or the reservation ends first), so a trickle of small segments does not
/// become a record per segment.
const MIN_PIECE: u32 = 16 << 10;

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
}

impl<'a> Conn<'a> {
    /// Receive a body into `sink`. Returns the body's byte count.
    pub(super) fn read_body(
        &mut self,
        framing: Framing,
        sink: &mut Sink<'_, 'a>,
    ) -> Result<u64, BodyError> {
        let mut total = 0u64;
        let r = match framing {
            Framing::Length(n) => self.body_bytes(n, sink, &mut total),
            Framing::Chunked => self.chunked_body(sink, &mut total),
        };
        // An inline body's last pieces stay in `self.pieces`: they are
        // committed together with the file's name (`Volume::rx_link`), so
        // a small upload is one journalled commit, not two.
        if r.is_err() {
            self.vol.rx_abort(std::mem::take(&mut self.pieces));
        }
        r.map(|_| total)
    }

    fn chunked_body(&mut self, sink: &mut Sink<'_, 'a>, total: &mut u64) -> Result<(), BodyError> {
        loop {
            let size = self.chunk_line()?;
            if size == 0 {
                return self.trailers();
            }
            self.body_bytes(size, sink, total)?;
            self.expect_crlf()?;
        }
    }

    fn more(&mut self, want: u64) -> Result<(), BodyError> {
        let want = want.clamp(1, u32::MAX as u64) as u32;
        match self.rx.fill(want, self.sh.cfg.io_timeout) {
            Ok(0) => Err(BodyError::Gone("the client closed the connection".into())),
            Ok(n) => {
                self.add_in(n as u64);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(BodyError::Timeout),
            Err(e) => Err(BodyError::Gone(e.to_string())),
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
                        return Ok(size);
                    }
                    Ok(None) => {}
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
                    return Ok(());
                }
                Ok(None) => {}
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
        }
    }
}
