//! The one body walker: a request body (Content-Length, chunked, or
//! aws-chunked inside a Content-Length) or a raw stream, walked over the
//! bytes as they land, its data made into pieces of a file where they
//! landed ([`Pieces`]), its framing skipped.
//!
//! Every receiving path drives it: the loops' HTTP and S3 sessions, the
//! thread-per-connection HTTP transport, raw streams on both transports
//! and `pktfs recv` ([`crate::receive::to_file`]). A driver hands it landed
//! bytes ([`Landed`]: a range of a packet buffer, or DRAM read while the
//! image had none to lend) and gets back what follows the body; how the
//! bytes arrive, when to wait and when to commit are the driver's.
//!
//! A protocol that checks a body as it passes (S3's digests and
//! aws-chunked signatures) does so through [`Hooks`]; plain HTTP and raw
//! streams use `()`, whose hooks compile to nothing.

use std::convert::Infallible;

use pktfs_fs::{FsError, RxHeld, RxPiece, RxTime, Volume};
use prometheus_client::metrics::histogram::Histogram;

use super::chunked::{chunk_size_line, trailer_section};
use super::coalesce::Coalescer;
use super::persist::Persister;

/// How a body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// This many bytes (Content-Length).
    Length(u64),
    /// Chunks, then a trailer section. `within`: they must end exactly at
    /// this many bytes (aws-chunked inside a Content-Length): bytes past
    /// it are the next request's, and a chunk that claims more cannot eat
    /// them.
    Chunked { within: Option<u64> },
    /// Every byte until the peer closes (a raw stream).
    Stream,
}

/// Why a body could not be read or stored. `E`: what the protocol's
/// [`Hooks`] refuse a body with.
#[derive(Debug)]
pub(crate) enum BodyError<E> {
    /// The client went away (EOF, reset): nothing to answer.
    Gone(String),
    Timeout,
    Bad(&'static str),
    Fs(FsError),
    /// Refused by the protocol's hooks (a signature or a digest).
    Hook(E),
}

impl<E: std::fmt::Display> std::fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Gone(why) => f.write_str(why),
            BodyError::Timeout => f.write_str("the body was too slow"),
            BodyError::Bad(m) => f.write_str(m),
            BodyError::Fs(e) => e.fmt(f),
            BodyError::Hook(e) => e.fmt(f),
        }
    }
}

impl<E> From<FsError> for BodyError<E> {
    fn from(e: FsError) -> Self {
        BodyError::Fs(e)
    }
}

impl BodyError<Infallible> {
    /// The same error where the hooks could refuse with `E`.
    pub(crate) fn widen<E>(self) -> BodyError<E> {
        match self {
            BodyError::Gone(s) => BodyError::Gone(s),
            BodyError::Timeout => BodyError::Timeout,
            BodyError::Bad(m) => BodyError::Bad(m),
            BodyError::Fs(e) => BodyError::Fs(e),
            BodyError::Hook(n) => match n {},
        }
    }
}

/// What a protocol checks of a body as it passes. Every method has a
/// default that does nothing.
pub(crate) trait Hooks {
    type Error;
    /// [`Hooks::pieces`] does something: the body's pieces must be made
    /// where the hooks see them, not by a persister thread.
    const SEES_PIECES: bool = false;
    /// Data bytes, in order, while they are hot (before their piece's
    /// CRC and write-back).
    #[inline]
    fn data(&mut self, _bytes: &[u8]) {}
    /// A chunk-size line (`line`, its CRLF included) announcing `size`
    /// data bytes.
    #[inline]
    fn chunk_start(&mut self, _line: &[u8], _size: u64) -> Result<(), Self::Error> {
        Ok(())
    }
    /// A chunk's data ended.
    #[inline]
    fn chunk_end(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// The trailer section (its closing empty line included).
    #[inline]
    fn trailers(&mut self, _section: &[u8]) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Pieces about to be committed or linked, each exactly once, in
    /// order.
    #[inline]
    fn pieces(&mut self, _pieces: &[RxPiece<'_>]) {}
}

impl Hooks for () {
    type Error = Infallible;
}

/// Received bytes the walker goes over: in a packet buffer of the image
/// ([`RxHeld`]) or in DRAM ([`Dram`]: read while the image had no buffer
/// to lend). One walk for both; the packet-buffer case is what every
/// upload takes.
pub(crate) trait Landed<'v>: Sized {
    fn len(&self) -> u32;
    fn bytes(&self) -> &[u8];
    /// Split off the first `n` bytes (`0 < n < len`).
    fn split_to(&mut self, n: u32) -> Self;
    /// The bytes as pieces of a file, pushed to `out`: where they landed
    /// (CRC taken, lines written back), or copied into buffer space first
    /// when they are in DRAM.
    fn into_pieces(
        self,
        vol: &'v Volume,
        at: RxTime,
        seq: u64,
        out: &mut Vec<RxPiece<'v>>,
    ) -> Result<(), FsError>;
    /// The bytes held for another thread to make a piece of (None: they
    /// are not in a packet buffer).
    fn into_held(self) -> Result<RxHeld<'v>, Self>;
}

impl<'v> Landed<'v> for RxHeld<'v> {
    #[inline]
    fn len(&self) -> u32 {
        RxHeld::len(self)
    }
    #[inline]
    fn bytes(&self) -> &[u8] {
        RxHeld::bytes(self)
    }
    #[inline]
    fn split_to(&mut self, n: u32) -> Self {
        RxHeld::split_to(self, n)
    }
    #[inline]
    fn into_pieces(
        self,
        _vol: &'v Volume,
        at: RxTime,
        seq: u64,
        out: &mut Vec<RxPiece<'v>>,
    ) -> Result<(), FsError> {
        out.push(self.piece(at, seq));
        Ok(())
    }
    #[inline]
    fn into_held(self) -> Result<RxHeld<'v>, Self> {
        Ok(self)
    }
}

/// Bytes of a connection read into DRAM.
#[derive(Debug)]
pub(crate) struct Dram<'a>(pub(crate) &'a [u8]);

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
    fn into_pieces(
        self,
        vol: &'v Volume,
        at: RxTime,
        seq: u64,
        out: &mut Vec<RxPiece<'v>>,
    ) -> Result<(), FsError> {
        // Copied into fresh buffer space (the volume may have room again),
        // in as many reservations as it takes.
        let n = self.0.len();
        let mut done = 0usize;
        while done < n {
            let mut b = vol.rx_reserve((n - done).min(u32::MAX as usize) as u32)?;
            let k = (b.cap() as usize).min(n - done);
            b.append(&self.0[done..done + k]);
            out.push(b.piece(0, k as u32, at, seq + done as u64));
            done += k;
        }
        Ok(())
    }
    fn into_held(self) -> Result<RxHeld<'v>, Self> {
        Err(self)
    }
}

/// Landed bytes of either kind (the threaded transport's window, which is
/// in DRAM while the image is full).
#[derive(Debug)]
pub(crate) enum Window<'a, 'v> {
    Held(RxHeld<'v>),
    Dram(Dram<'a>),
}

impl<'v> Landed<'v> for Window<'_, 'v> {
    fn len(&self) -> u32 {
        match self {
            Window::Held(h) => h.len(),
            Window::Dram(d) => Landed::len(d),
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Window::Held(h) => h.bytes(),
            Window::Dram(d) => d.0,
        }
    }
    fn split_to(&mut self, n: u32) -> Self {
        match self {
            Window::Held(h) => Window::Held(h.split_to(n)),
            Window::Dram(d) => Window::Dram(Landed::split_to(d, n)),
        }
    }
    fn into_pieces(
        self,
        vol: &'v Volume,
        at: RxTime,
        seq: u64,
        out: &mut Vec<RxPiece<'v>>,
    ) -> Result<(), FsError> {
        match self {
            Window::Held(h) => h.into_pieces(vol, at, seq, out),
            Window::Dram(d) => d.into_pieces(vol, at, seq, out),
        }
    }
    fn into_held(self) -> Result<RxHeld<'v>, Self> {
        match self {
            Window::Held(h) => Ok(h),
            d => Err(d),
        }
    }
}

/// An upload's first check of the free space and records comes after this
/// many bytes or records (a small upload costs no `statfs`: the volume's
/// own refusal covers it), then every this many.
const SPACE_CHECK_BYTES: u64 = 1 << 20;
const SPACE_CHECK_RECORDS: u64 = 64;

/// Keeps an upload from eating into the volume's reserve
/// (`Config::upload_reserve_bytes`, `Config::upload_reserve_records`):
/// counts the bytes and records the body makes, and once a check's worth
/// has been made looks at what is free again. Stops the body (507: nothing
/// is stored) when what is free, less the reserve, is used up: one
/// client's body cannot take the volume's space or record table to zero.
/// A few integer operations per piece otherwise.
#[derive(Debug)]
pub(crate) struct SpaceGuard {
    reserve_bytes: u64,
    reserve_records: u64,
    bytes_left: u64,
    records_left: u64,
}

impl SpaceGuard {
    pub(crate) fn new(reserve_bytes: u64, reserve_records: u64) -> SpaceGuard {
        SpaceGuard {
            reserve_bytes,
            reserve_records,
            bytes_left: SPACE_CHECK_BYTES,
            records_left: SPACE_CHECK_RECORDS,
        }
    }

    /// `bytes` and `records` more were made.
    #[inline]
    fn take(&mut self, vol: &Volume, bytes: u64, records: u64) -> Result<(), FsError> {
        if bytes < self.bytes_left && records < self.records_left {
            self.bytes_left -= bytes;
            self.records_left -= records;
            return Ok(());
        }
        self.check(vol)
    }

    #[cold]
    fn check(&mut self, vol: &Volume) -> Result<(), FsError> {
        let st = vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        let bytes = free.saturating_sub(self.reserve_bytes);
        let records = st.records_free.saturating_sub(self.reserve_records);
        if bytes == 0 || records == 0 {
            return Err(FsError::NoSpace(
                "the body outgrows the free space or records (a reserve is kept)",
            ));
        }
        // Uncommitted pieces are not in `statfs` yet: look again well
        // before what is left could be used up.
        self.bytes_left = (bytes / 2).clamp(1, SPACE_CHECK_BYTES);
        self.records_left = (records / 2).clamp(1, SPACE_CHECK_RECORDS);
        Ok(())
    }
}

/// A body's data on its way into a file: pieces made where the bytes
/// landed (small ones copied together first, [`Coalescer`]), kept until
/// the driver commits them or hands them to the link; or, for a large
/// body on the threaded transport, handed to a persister thread that
/// makes and commits them ([`Persister`]).
#[derive(Debug, Default)]
pub(crate) struct Pieces<'v> {
    /// Made and not yet committed, in stream order.
    list: Vec<RxPiece<'v>>,
    co: Coalescer<'v>,
    guard: Option<SpaceGuard>,
    /// Data bytes taken since the last commit.
    batch: u64,
    /// Records committed so far.
    records: u64,
    /// Commits are timed into this (the metrics' commit histogram).
    timed: Option<&'v Histogram>,
    off_thread: Option<Persister<'v>>,
}

impl<'v> Pieces<'v> {
    /// Pieces kept by the guard from the volume's reserve (None: a raw
    /// stream, which stops when the volume is full) and commits timed
    /// into `timed`.
    pub(crate) fn new(guard: Option<SpaceGuard>, timed: Option<&'v Histogram>) -> Pieces<'v> {
        Pieces {
            guard,
            timed,
            ..Pieces::default()
        }
    }

    /// The same, made and committed by a persister thread instead.
    pub(crate) fn off_thread(guard: Option<SpaceGuard>, p: Persister<'v>) -> Pieces<'v> {
        Pieces {
            guard,
            off_thread: Some(p),
            ..Pieces::default()
        }
    }

    /// Data bytes `part`, received `at`, stream position `seq`. `in_place`:
    /// they end a body and nothing waits to be copied, so however small
    /// they stay where they landed (a small PUT that arrives whole copies
    /// nothing); other small parts are copied together.
    #[inline]
    pub(crate) fn take<D: Landed<'v>>(
        &mut self,
        vol: &'v Volume,
        part: D,
        at: RxTime,
        seq: u64,
        in_place: bool,
    ) -> Result<(), FsError> {
        let k = part.len();
        let before = self.list.len();
        if !(in_place && self.co.pending() == 0) && self.co.wants(k) {
            self.co
                .copy_in(vol, part.bytes(), at, seq, &mut self.list)?;
        } else {
            // What was copied goes first (stream order), then these bytes
            // where they landed: CRC and write-back now, while they are hot.
            self.co.flush(&mut self.list);
            match &self.off_thread {
                None => part.into_pieces(vol, at, seq, &mut self.list)?,
                Some(p) => {
                    p.send_pieces(&mut self.list)?;
                    match part.into_held() {
                        Ok(held) => p.send_held(held, at, seq)?,
                        Err(d) => d.into_pieces(vol, at, seq, &mut self.list)?,
                    }
                }
            }
        }
        let made = (self.list.len() - before) as u64;
        if let Some(p) = &self.off_thread {
            p.send_pieces(&mut self.list)?;
        }
        if let Some(g) = self.guard.as_mut() {
            g.take(vol, k as u64, made)?;
        }
        self.batch += k as u64;
        Ok(())
    }

    /// Data bytes taken since the last commit.
    #[inline]
    pub(crate) fn batch(&self) -> u64 {
        self.batch
    }

    /// Bytes copied together and not yet made a piece.
    #[inline]
    pub(crate) fn pending_small(&self) -> u32 {
        self.co.pending()
    }

    /// Make what was copied together a piece, after those before it.
    pub(crate) fn flush_small(&mut self) -> Result<(), FsError> {
        self.co.flush(&mut self.list);
        match &self.off_thread {
            Some(p) => p.send_pieces(&mut self.list),
            None => Ok(()),
        }
    }

    /// Records committed so far plus those waiting (the file's records
    /// once the rest is linked).
    pub(crate) fn records(&self) -> u64 {
        self.records + self.list.len() as u64
    }

    /// Commit the pieces made into `ino` (one commit; what is still being
    /// copied together stays: [`Self::flush_small`] first to commit it
    /// too), after `hooks` saw them. Returns the file's size (0 when there
    /// was nothing to commit).
    pub(crate) fn commit<H: Hooks>(
        &mut self,
        vol: &'v Volume,
        ino: u64,
        hooks: &mut H,
    ) -> Result<u64, FsError> {
        self.batch = 0;
        if self.list.is_empty() {
            return Ok(0);
        }
        hooks.pieces(&self.list);
        let n = self.list.len() as u64;
        let t0 = self.timed.map(|_| std::time::Instant::now());
        let r = vol.rx_commit(ino, std::mem::take(&mut self.list));
        if let (Some(h), Some(t0)) = (self.timed, t0) {
            h.observe(t0.elapsed().as_secs_f64());
        }
        let size = r?;
        self.records += n;
        Ok(size)
    }

    /// Pieces made and not committed (what is still being copied
    /// together is not one yet).
    pub(crate) fn made(&self) -> usize {
        self.list.len()
    }

    /// The pieces made, for a commit of the caller's (what is still being
    /// copied together stays); `hooks` see them first.
    pub(crate) fn take_made<H: Hooks>(&mut self, hooks: &mut H) -> Vec<RxPiece<'v>> {
        self.batch = 0;
        hooks.pieces(&self.list);
        std::mem::take(&mut self.list)
    }

    /// What is left to commit (what was copied together last), for the
    /// commit that names the file; `hooks` see it first.
    pub(crate) fn tail<H: Hooks>(&mut self, hooks: &mut H) -> Vec<RxPiece<'v>> {
        self.batch = 0;
        self.co.flush(&mut self.list);
        hooks.pieces(&self.list);
        std::mem::take(&mut self.list)
    }

    /// Give up: the pieces made and not committed go back.
    pub(crate) fn abort(&mut self, vol: &Volume) {
        self.co = Coalescer::default();
        vol.rx_abort(std::mem::take(&mut self.list));
    }
}

/// Where the walk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `left` bytes of a Content-Length body.
    Length(u64),
    /// Chunked: a size line, `left` data bytes, the CRLF after data, the
    /// trailer section.
    Size,
    Data(u64),
    Crlf,
    Trailers,
    /// A raw stream: all of it is data.
    Stream,
    /// The body is complete.
    Done,
}

/// What a step of the walk left.
#[derive(Debug)]
pub(crate) enum Step<D> {
    /// The body goes on; `D`: bytes of this chunk not walked yet (the
    /// driver calls again with them).
    More(Option<D>),
    /// The body is complete; `D`: what follows it (the next request's).
    Done(Option<D>),
}

/// One body's walk (module docs).
#[derive(Debug)]
pub(crate) struct Walk {
    frame: Frame,
    /// A chunk-size line, the CRLF after a chunk or the trailer section,
    /// when it spans landed chunks (at most `max_line` bytes).
    line: Vec<u8>,
    max_line: usize,
    /// The chunks must end exactly after this many bytes (aws-chunked).
    within: Option<u64>,
    /// Bytes of the body walked (data and framing).
    walked: u64,
    /// Data bytes.
    data: u64,
}

impl Walk {
    /// A walk of a body framed by `f`; lines (chunk-size lines, trailer
    /// sections) are judged on their first `max_line` bytes.
    pub(crate) fn new(f: Framing, max_line: usize) -> Walk {
        let (frame, within) = match f {
            Framing::Length(0) => (Frame::Done, None),
            Framing::Length(n) => (Frame::Length(n), None),
            Framing::Chunked { within } => (Frame::Size, within),
            Framing::Stream => (Frame::Stream, None),
        };
        Walk {
            frame,
            line: Vec::new(),
            max_line,
            within,
            walked: 0,
            data: 0,
        }
    }

    /// The body is complete.
    #[inline]
    pub(crate) fn done(&self) -> bool {
        self.frame == Frame::Done
    }

    /// Data bytes walked so far.
    #[inline]
    pub(crate) fn data_bytes(&self) -> u64 {
        self.data
    }

    /// Data bytes the current frame still has to come (None between
    /// them: a line, or a stream with no end).
    #[inline]
    pub(crate) fn data_left(&self) -> Option<u64> {
        match self.frame {
            Frame::Length(l) | Frame::Data(l) => Some(l),
            _ => None,
        }
    }

    /// Data bytes of a Content-Length body still to come (None: another
    /// framing, or done).
    #[inline]
    pub(crate) fn length_left(&self) -> Option<u64> {
        match self.frame {
            Frame::Length(l) => Some(l),
            _ => None,
        }
    }

    /// A chunk-size line or trailer section is under way (its deadline
    /// runs from its first byte).
    #[inline]
    pub(crate) fn in_line(&self) -> bool {
        matches!(self.frame, Frame::Size | Frame::Trailers) && !self.line.is_empty()
    }

    /// DRAM the walk holds (a line spanning landed chunks).
    pub(crate) fn dram(&self) -> usize {
        self.line.capacity()
    }

    /// Walk `d` (landed at `at`; `seq` its first byte's stream position,
    /// moved past what is walked) as far as one frame: data into `into`
    /// (None: dropped) after `hooks` saw it; framing skipped. The body
    /// grows in `vol`.
    #[inline]
    pub(crate) fn step<'v, D: Landed<'v>, H: Hooks>(
        &mut self,
        mut d: D,
        at: RxTime,
        seq: &mut u64,
        into: Option<&mut Pieces<'v>>,
        hooks: &mut H,
        vol: &'v Volume,
    ) -> Result<Step<D>, BodyError<H::Error>> {
        let Some(limit) = self.within else {
            return self.frame_step(d, at, seq, into, hooks, vol);
        };
        let left = limit.saturating_sub(self.walked);
        if (d.len() as u64) <= left {
            return self.frame_step(d, at, seq, into, hooks, vol);
        }
        if left == 0 {
            return Err(BodyError::Bad(
                "the aws-chunked body does not end at its Content-Length",
            ));
        }
        // The body ends in `part` (walked to its end) or fails; `d` is
        // what follows.
        let mut into = into;
        let mut part = Some(d.split_to(left as u32));
        while let Some(p) = part.take() {
            match self.frame_step(p, at, seq, into.as_deref_mut(), hooks, vol)? {
                Step::More(rest) => part = rest,
                Step::Done(_) => return Ok(Step::Done(Some(d))),
            }
        }
        Err(BodyError::Bad(
            "the aws-chunked body does not end at its Content-Length",
        ))
    }

    fn frame_step<'v, D: Landed<'v>, H: Hooks>(
        &mut self,
        mut d: D,
        at: RxTime,
        seq: &mut u64,
        into: Option<&mut Pieces<'v>>,
        hooks: &mut H,
        vol: &'v Volume,
    ) -> Result<Step<D>, BodyError<H::Error>> {
        let (n, next) = match self.frame {
            Frame::Length(left) | Frame::Data(left) => {
                let k = left.min(d.len() as u64) as u32;
                if k < d.len() {
                    let part = d.split_to(k);
                    return self.data(part, left, Some(d), at, seq, into, hooks, vol);
                }
                return self.data(d, left, None, at, seq, into, hooks, vol);
            }
            Frame::Stream => return self.data(d, u64::MAX, None, at, seq, into, hooks, vol),
            Frame::Done => return Ok(Step::Done(Some(d))),
            Frame::Size => self.size_line(d.bytes(), hooks)?,
            Frame::Crlf => self.crlf(d.bytes())?,
            Frame::Trailers => self.trailer_section(d.bytes(), hooks)?,
        };
        *seq += n;
        self.walked += n;
        if let Some(f) = next {
            self.frame = f;
        }
        let rest = (n < d.len() as u64).then(|| {
            let _framing = d.split_to(n as u32);
            d
        });
        if self.frame == Frame::Done {
            return Ok(Step::Done(rest));
        }
        Ok(Step::More(rest))
    }

    /// `part`: data (at most `left` bytes of the current frame); `rest`:
    /// what follows it in the landed chunk.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn data<'v, D: Landed<'v>, H: Hooks>(
        &mut self,
        part: D,
        left: u64,
        rest: Option<D>,
        at: RxTime,
        seq: &mut u64,
        into: Option<&mut Pieces<'v>>,
        hooks: &mut H,
        vol: &'v Volume,
    ) -> Result<Step<D>, BodyError<H::Error>> {
        let k = part.len() as u64;
        if let Some(p) = into {
            hooks.data(part.bytes());
            let last_of_length = matches!(self.frame, Frame::Length(_)) && k == left;
            p.take(vol, part, at, *seq, last_of_length)?;
        }
        *seq += k;
        self.walked += k;
        self.data += k;
        let left = left.wrapping_sub(k);
        match self.frame {
            Frame::Length(_) if left == 0 => {
                self.frame = Frame::Done;
                return Ok(Step::Done(rest));
            }
            Frame::Length(_) => self.frame = Frame::Length(left),
            Frame::Data(_) if left == 0 => {
                self.frame = Frame::Crlf;
                hooks.chunk_end().map_err(BodyError::Hook)?;
            }
            Frame::Data(_) => self.frame = Frame::Data(left),
            Frame::Stream => {}
            _ => unreachable!("data only in a data frame"),
        }
        Ok(Step::More(rest))
    }

    /// A chunk-size line's bytes: (bytes of them it took, the next frame
    /// once it is complete).
    fn size_line<H: Hooks>(
        &mut self,
        bytes: &[u8],
        hooks: &mut H,
    ) -> Result<(u64, Option<Frame>), BodyError<H::Error>> {
        let max = self.max_line;
        let mut seen = Ok(());
        let r = assemble(&mut self.line, bytes, max, |w| {
            let r = chunk_size_line(w, max);
            if let Ok(Some((n, size))) = r {
                seen = hooks.chunk_start(&w[..n], size);
            }
            r
        });
        seen.map_err(BodyError::Hook)?;
        match r {
            Ok(Some((n, 0))) => Ok((n as u64, Some(Frame::Trailers))),
            Ok(Some((n, size))) => Ok((n as u64, Some(Frame::Data(size)))),
            Ok(None) => Ok((bytes.len() as u64, None)),
            Err(why) => Err(BodyError::Bad(why.unwrap_or("chunk line too long"))),
        }
    }

    /// The CRLF after a chunk's data.
    fn crlf<E>(&mut self, bytes: &[u8]) -> Result<(u64, Option<Frame>), BodyError<E>> {
        let k = (2 - self.line.len()).min(bytes.len());
        self.line.extend_from_slice(&bytes[..k]);
        if self.line.len() < 2 {
            return Ok((k as u64, None));
        }
        if self.line != b"\r\n" {
            return Err(BodyError::Bad("chunk data not followed by CRLF"));
        }
        self.line.clear();
        Ok((k as u64, Some(Frame::Size)))
    }

    /// The trailer section's bytes; the body is complete with it.
    fn trailer_section<H: Hooks>(
        &mut self,
        bytes: &[u8],
        hooks: &mut H,
    ) -> Result<(u64, Option<Frame>), BodyError<H::Error>> {
        let max = self.max_line;
        let mut seen = Ok(());
        let r = assemble(&mut self.line, bytes, max, |w| {
            let r = trailer_section(w, max);
            if let Ok(Some(n)) = r {
                seen = hooks.trailers(&w[..n]);
            }
            r.map(|t| t.map(|n| (n, ())))
        });
        seen.map_err(BodyError::Hook)?;
        match r {
            Ok(Some((n, ()))) => {
                let end = self.walked + n as u64;
                if self.within.is_some_and(|l| l != end) {
                    return Err(BodyError::Bad(
                        "the aws-chunked body ends before its Content-Length",
                    ));
                }
                self.line = Vec::new();
                Ok((n as u64, Some(Frame::Done)))
            }
            Ok(None) => Ok((bytes.len() as u64, None)),
            Err(why) => Err(BodyError::Bad(why.unwrap_or("trailer section too large"))),
        }
    }
}

/// Parse something (a head, a chunk-size line, a trailer section) from
/// the landed bytes `data`, in place when nothing is pending in `buf`,
/// else from `buf` with `data` appended (never past `max` bytes).
/// `Ok(Some((n, t)))`: complete, `n` bytes of `data` belong to it;
/// `Ok(None)`: incomplete (all of `data` is in `buf` now); `Err(None)`:
/// longer than `max`. `parse` sees at most `max` bytes in either case, so
/// the verdict does not depend on how the bytes were cut.
pub(crate) fn assemble<T, E>(
    buf: &mut Vec<u8>,
    data: &[u8],
    max: usize,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(usize, T)>, E>,
) -> Result<Option<(usize, T)>, Option<E>> {
    if buf.is_empty() {
        // Never more than `max` bytes parsed, however they were cut: what
        // lies past the limit must not change the verdict.
        let data = &data[..data.len().min(max)];
        return match parse(data).map_err(Some)? {
            Some(r) => Ok(Some(r)),
            None if data.len() >= max => Err(None),
            None => {
                buf.extend_from_slice(data);
                Ok(None)
            }
        };
    }
    let prev = buf.len();
    let take = data.len().min(max.saturating_sub(prev));
    buf.extend_from_slice(&data[..take]);
    match parse(buf).map_err(Some)? {
        Some((n, t)) => {
            buf.clear();
            Ok(Some((n - prev, t)))
        }
        None if take < data.len() || buf.len() >= max => Err(None),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol() -> Volume {
        Volume::in_memory(pktfs_layout::GeometryParams::for_size(16 << 20)).unwrap()
    }

    /// Walk `bytes` cut into pieces of `cut` bytes; (data bytes stored, the
    /// bytes after the body, done).
    fn walk(f: Framing, bytes: &[u8], cut: usize) -> (u64, Vec<u8>, bool) {
        let v = vol();
        let mut w = Walk::new(f, 64);
        let mut p = Pieces::default();
        let mut seq = 0;
        let mut after = Vec::new();
        for c in bytes.chunks(cut) {
            let mut rest = Some(Dram(c));
            while let Some(d) = rest.take() {
                if w.done() {
                    after.extend_from_slice(d.0);
                    break;
                }
                match w.step(d, RxTime::Clock(1), &mut seq, Some(&mut p), &mut (), &v) {
                    Ok(Step::More(r)) => rest = r,
                    Ok(Step::Done(r)) => rest = r,
                    Err(e) => panic!("{e:?}"),
                }
            }
        }
        let tail = p.tail(&mut ());
        let size: u64 = tail.iter().map(|x| x.len() as u64).sum();
        assert_eq!(size, w.data_bytes());
        v.rx_abort(tail);
        (size, after, w.done())
    }

    #[test]
    fn chunked_is_walked_however_it_is_cut() {
        let body = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for cut in 1..body.len() {
            let (data, after, done) = walk(Framing::Chunked { within: None }, body, cut);
            assert!(done, "cut {cut}");
            assert_eq!(data, 8, "cut {cut}");
            assert_eq!(after, b"NEXT", "cut {cut}");
        }
    }

    #[test]
    fn a_length_body_ends_at_its_length() {
        for cut in 1..12 {
            let (data, after, done) = walk(Framing::Length(7), b"abcdefgNEXT", cut);
            assert!(done);
            assert_eq!(data, 7);
            assert_eq!(after, b"NEXT");
        }
    }

    #[test]
    fn aws_chunked_must_end_at_its_length() {
        let body = b"3\r\nabc\r\n0\r\n\r\n";
        let n = body.len() as u64;
        let mut all = body.to_vec();
        all.extend_from_slice(b"NEXT");
        for cut in 1..all.len() {
            let (data, after, done) = walk(Framing::Chunked { within: Some(n) }, &all, cut);
            assert!(done && data == 3 && after == b"NEXT", "cut {cut}");
        }
        // A chunk claiming more than the length is refused, however cut.
        let v = vol();
        let mut w = Walk::new(Framing::Chunked { within: Some(6) }, 64);
        let mut seq = 0;
        let r = w.step(
            Dram(b"9\r\nabcdefghi"),
            RxTime::Clock(1),
            &mut seq,
            None,
            &mut (),
            &v,
        );
        assert!(r.is_err());
    }
}
