//! An HTTP session's request bodies: the framing walked over landed
//! bytes (Content-Length or chunked), an upload's bytes turned into
//! pieces of its unnamed file where they landed, the link and answer at
//! the end, and what a failed or abandoned body undoes.

use pktfs_fs::{RxHeld, RxPiece, RxTime};

use super::super::chunked::{chunk_size_line, trailer_section};
use super::super::framing::BodyError;
use super::{assemble, Frame, HttpSession};

/// The image has no buffer space for an upload's body (answered 507).
pub(super) fn no_body_space() -> BodyError {
    BodyError::Fs(pktfs_fs::FsError::NoSpace(
        "no free buffer space to receive the body into",
    ))
}

impl<'v> HttpSession<'v> {
    /// A Content-Length: 0 body is complete at once.
    pub(super) fn body_done_if_empty(&mut self) {
        if matches!(self.body.as_ref().map(|b| b.frame), Some(Frame::Length(0))) {
            self.body_complete();
        }
    }

    /// Landed bytes of a body (data and framing); returns what follows it.
    pub(super) fn body_bytes<D: Landed<'v>>(&mut self, mut d: D, ts: RxTime) -> Option<D> {
        // An aws-chunked S3 body is walked as chunks but must end exactly
        // at its Content-Length: bytes past it are the next request's, and
        // never reach the chunk walk (a chunk claiming more cannot eat them).
        if let Some(left) = self.s3_limit_left() {
            if left == 0 {
                return self.fail_body(BodyError::Bad(
                    "the aws-chunked body does not end at its Content-Length",
                ));
            }
            if (d.len() as u64) > left {
                let part = d.split_to(left as u32);
                // `part` ends at the limit: the body ends in it (the
                // trailer check below refuses one that ends before) or
                // fails; `d` is what follows.
                let _none = self.body_bytes(part, ts);
                if self.body.is_some() {
                    return self.fail_body(BodyError::Bad(
                        "the aws-chunked body does not end at its Content-Length",
                    ));
                }
                return (!self.finishing).then_some(d);
            }
        }
        let max = self.sh.cfg.max_header_bytes;
        let now = self.c.now();
        let io = self.sh.cfg.io_timeout;
        let b = self.body.as_mut().expect("a body");
        // A body that broke the pace or a line's deadline gets no more
        // time (module docs, "Timeouts").
        if !b.frozen {
            b.deadline = now + io;
        }
        // In a window's last quarter the mark stays down, so what arrived
        // is taken (and counted) before the window is judged.
        b.lowat_lapsed = now + io / 4 >= b.window_end;
        let (n, next): (u64, Option<Frame>) = match b.frame {
            Frame::Length(left) | Frame::Data(left) => {
                let k = left.min(d.len() as u64) as u32;
                b.window_bytes += k as u64;
                if k < d.len() {
                    let part = d.split_to(k);
                    return self.body_data(part, ts, left, Some(d));
                }
                return self.body_data(d, ts, left, None);
            }
            Frame::Size => {
                // An S3 chunk's line carries its signature: kept from the
                // line's bytes as they are parsed.
                let mut sig = super::super::s3::ChunkSig::default();
                let want_sig = b.upload.as_ref().is_some_and(|u| u.s3.is_some());
                let r = assemble(&mut self.line, d.bytes(), max, |w| {
                    let r = chunk_size_line(w, max);
                    if let (true, Ok(Some((n, _)))) = (want_sig, &r) {
                        sig = super::super::s3::ChunkSig::of_line(&w[..*n]);
                    }
                    r
                });
                if let (true, Ok(Some((_, size)))) = (want_sig, &r) {
                    let size = *size;
                    let s3 = b.upload.as_mut().and_then(|u| u.s3.as_mut());
                    if let Some(Err(e)) = s3.map(|s| s.chunk_start(size, sig)) {
                        return self.fail_body(e);
                    }
                }
                match r {
                    Ok(Some((n, 0))) => (n as u64, Some(Frame::Trailers)),
                    Ok(Some((n, size))) => (n as u64, Some(Frame::Data(size))),
                    Ok(None) => (d.len() as u64, None),
                    Err(why) => {
                        let why = why.unwrap_or("chunk line too long");
                        return self.fail_body(BodyError::Bad(why));
                    }
                }
            }
            Frame::Crlf => {
                let k = (2 - self.line.len()).min(d.len() as usize);
                self.line.extend_from_slice(&d.bytes()[..k]);
                if self.line.len() < 2 {
                    (k as u64, None)
                } else if self.line != b"\r\n" {
                    return self.fail_body(BodyError::Bad("chunk data not followed by CRLF"));
                } else {
                    self.line.clear();
                    (k as u64, Some(Frame::Size))
                }
            }
            Frame::Trailers => {
                let want = b.upload.as_ref().is_some_and(|u| u.s3.is_some());
                let mut fields: Vec<u8> = Vec::new();
                match assemble(&mut self.line, d.bytes(), max, |w| {
                    let r = trailer_section(w, max);
                    if let (true, Ok(Some(n))) = (want, &r) {
                        fields = w[..*n].to_vec();
                    }
                    r.map(|t| t.map(|n| (n, ())))
                }) {
                    Ok(Some((n, ()))) => {
                        let s3 = b.upload.as_mut().and_then(|u| u.s3.as_mut());
                        if let Some(Err(e)) = s3.map(|s| s.trailers(&fields)) {
                            return self.fail_body(e);
                        }
                        self.seq += n as u64;
                        if self.s3_limit_left().is_some_and(|l| l != 0) {
                            return self.fail_body(BodyError::Bad(
                                "the aws-chunked body ends before its Content-Length",
                            ));
                        }
                        let rest = (n < d.len() as usize).then(|| {
                            let _t = d.split_to(n as u32);
                            d
                        });
                        self.body_complete();
                        return rest;
                    }
                    Ok(None) => (d.len() as u64, None),
                    Err(why) => {
                        let why = why.unwrap_or("trailer section too large");
                        return self.fail_body(BodyError::Bad(why));
                    }
                }
            }
        };
        self.seq += n;
        let b = self.body.as_mut().expect("a body");
        b.window_bytes += n;
        if let Some(f) = next {
            b.frame = f;
            b.line_since = None;
        } else if matches!(b.frame, Frame::Size | Frame::Trailers) {
            // A line under way: its deadline runs from its first byte.
            b.line_since.get_or_insert(now);
        }
        if n < d.len() as u64 {
            let _framing = d.split_to(n as u32);
            Some(d)
        } else {
            None
        }
    }

    /// `part`: body data (at most `left` bytes of the current frame);
    /// `rest`: what follows it in the landed chunk.
    pub(super) fn body_data<D: Landed<'v>>(
        &mut self,
        part: D,
        ts: RxTime,
        left: u64,
        rest: Option<D>,
    ) -> Option<D> {
        let k = part.len() as u64;
        let b = self.body.as_mut().expect("a body");
        b.bytes += k;
        match b.upload.as_mut() {
            Some(u) => {
                if let Some(s3) = u.s3.as_mut() {
                    // Digests while the bytes are hot, before the CRC and
                    // the write-back of the piece.
                    s3.data(part.bytes());
                }
                // The last bytes of a Content-Length body with nothing
                // copied before them stay where they landed (a small PUT
                // that arrives whole copies nothing); other small pieces
                // are copied together (`crate::receive::coalesce`).
                let whole = matches!(b.frame, Frame::Length(_)) && k == left;
                let pieces = &mut self.c.pieces;
                let before = pieces.len();
                let r = if !(whole && u.co.pending() == 0) && u.co.wants(part.len()) {
                    let r = u.co.copy_in(self.c.vol, part.bytes(), ts, self.seq, pieces);
                    drop(part);
                    r.map(|_| ()).map_err(BodyError::Fs)
                } else {
                    u.co.flush(pieces);
                    // CRC and flush now, while the bytes are hot.
                    match part.into_piece(ts, self.seq) {
                        Some(piece) => {
                            pieces.push(piece);
                            Ok(())
                        }
                        // Bytes in DRAM cannot become a file's (`on_dram`
                        // gives an upload up before its body is walked).
                        None => Err(no_body_space()),
                    }
                };
                let made = (pieces.len() - before) as u64;
                let r = r.and_then(|()| u.guard.take(self.c.vol, &self.sh.cfg, k, made));
                if let Err(e) = r {
                    return self.fail_body(e);
                }
                u.batch += k;
            }
            None => drop(part),
        }
        self.seq += k;
        let left = left - k;
        match b.frame {
            Frame::Length(_) if left == 0 => {
                self.body_complete();
                return rest;
            }
            Frame::Length(_) => b.frame = Frame::Length(left),
            Frame::Data(_) if left == 0 => {
                b.frame = Frame::Crlf;
                let s3 = b.upload.as_mut().and_then(|u| u.s3.as_mut());
                if let Some(Err(e)) = s3.map(|s| s.chunk_end()) {
                    return self.fail_body(e);
                }
            }
            Frame::Data(_) => b.frame = Frame::Data(left),
            _ => unreachable!("data only in a data frame"),
        }
        rest
    }

    /// The body is in: a skipped one is done; an upload is named (one
    /// commit with its last pieces) and answered.
    pub(super) fn body_complete(&mut self) {
        let Some(b) = self.body.take() else { return };
        self.line.clear();
        if let Some(h) = b.then {
            self.act(h);
            return;
        }
        let Some(mut u) = b.upload else { return };
        u.co.flush(&mut self.c.pieces);
        let records = u.records + self.c.pieces.len() as u64;
        let keep = match u.s3 {
            Some(mut s3) => {
                s3.fold_pieces(&self.c.pieces);
                self.c
                    .s3_finish(&u.head, u.tmp, *s3, Ok((b.bytes, records)))
            }
            None => self.c.put_finish(&u.head, u.tmp, Ok((b.bytes, records))),
        };
        self.end_request();
        if !keep {
            self.finishing = true;
        }
    }

    /// The body failed: an upload is given up (never visible), the
    /// failure answered when there is anyone to answer, the connection
    /// closed.
    pub(super) fn body_error(&mut self, e: BodyError) {
        let upload = self.abort_upload();
        self.c.body_failed(e);
        if upload {
            self.end_request();
        }
        self.finishing = true;
    }

    /// [`Self::body_error`] where the body walk stops: nothing follows.
    pub(super) fn fail_body<D>(&mut self, e: BodyError) -> Option<D> {
        self.body_error(e);
        None
    }

    /// Drop an upload in progress (its uncommitted pieces and its unnamed
    /// file), or a request waiting for its body. Whether there was one (a
    /// request begun and not yet ended).
    pub(super) fn abort_upload(&mut self) -> bool {
        let Some(b) = self.body.take() else {
            return false;
        };
        self.vol_abort();
        b.upload.is_some() || b.then.is_some()
    }

    /// Bytes an aws-chunked S3 body may still take before its
    /// Content-Length (None: not such a body).
    fn s3_limit_left(&self) -> Option<u64> {
        let b = self.body.as_ref()?;
        let s3 = b.upload.as_ref()?.s3.as_ref()?;
        let limit = s3.limit()?;
        Some(limit.saturating_sub(self.seq - s3.start_seq))
    }

    pub(super) fn vol_abort(&mut self) {
        self.c.vol.rx_abort(std::mem::take(&mut self.c.pieces));
    }
}

/// Received bytes the body framing walks over: in a packet buffer of the
/// image ([`RxHeld`], every upload's) or in DRAM ([`Dram`]: read while the
/// image had no buffer to receive into, `on_dram`). One walk for both; the
/// packet-buffer case compiles to what it was.
pub(super) trait Landed<'v>: Sized {
    fn len(&self) -> u32;
    fn bytes(&self) -> &[u8];
    /// Split off the first `n` bytes (`0 < n < len`).
    fn split_to(&mut self, n: u32) -> Self;
    /// The bytes as a piece of an upload's file: CRC taken, lines flushed.
    /// `None` for bytes that are not in the image.
    fn into_piece(self, ts: RxTime, seq: u64) -> Option<RxPiece<'v>>;
}

impl<'v> Landed<'v> for RxHeld<'v> {
    fn len(&self) -> u32 {
        RxHeld::len(self)
    }
    fn bytes(&self) -> &[u8] {
        RxHeld::bytes(self)
    }
    fn split_to(&mut self, n: u32) -> Self {
        RxHeld::split_to(self, n)
    }
    fn into_piece(self, ts: RxTime, seq: u64) -> Option<RxPiece<'v>> {
        Some(self.piece(ts, seq))
    }
}

/// Bytes of a connection read into DRAM.
pub(super) struct Dram<'a>(pub(super) &'a [u8]);

impl<'v> Landed<'v> for Dram<'_> {
    fn len(&self) -> u32 {
        // One receive's worth: far below 4 GiB.
        self.0.len() as u32
    }
    fn bytes(&self) -> &[u8] {
        self.0
    }
    fn split_to(&mut self, n: u32) -> Self {
        let (front, back) = self.0.split_at(n as usize);
        self.0 = back;
        Dram(front)
    }
    fn into_piece(self, _ts: RxTime, _seq: u64) -> Option<RxPiece<'v>> {
        None
    }
}
