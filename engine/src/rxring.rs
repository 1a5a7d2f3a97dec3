//! Free packet buffers lent to the kernel through an io_uring
//! provided-buffer ring (PASTE's pool that the NIC fills wherever it
//! likes, on kernel TCP): the ring holds reservations of free buffer
//! space, every receive completion says which one it filled and how much,
//! and the filled bytes come back as [`RxHeld`] ranges that become pieces
//! (CRC32C while hot, flush) linked by the usual commits
//! ([`Volume::rx_commit`], [`pktfs_fs::TmpFile`]).
//!
//! # Why this is sound from safe code
//! The reservations lent to the kernel are owned by the [`RxRing`] and
//! never handed out: no `&mut` exists to write them and no `&` covers a
//! byte before a completion reported it filled (a filled range is behind
//! the kernel's write position, which only moves forward). A reservation
//! goes back to the allocator only when a completion says the kernel is
//! done with its entry, or when the ring is dropped, and `Drop` first
//! cancels every request and reaps until none is in flight (the kernel
//! writes a provided buffer only inside a request, before the request's
//! last completion). If that cannot be confirmed the reservations are
//! leaked, never reused. The ring is not `Send`, so its drop runs on the
//! thread that owns the io_uring (SINGLE_ISSUER).
//!
//! # Incremental consumption
//! With `IOU_PBUF_RING_INC` (kernel 6.12+) one entry (a run of contiguous
//! buffers, 256 KiB by default) is filled by successive receives, possibly
//! of different connections, each taking the next bytes: the image's
//! buffers are packed densely and one entry serves many small receives.
//! Without it each receive consumes a whole entry; its unfilled tail goes
//! back to the allocator at once (at most part of one buffer is left
//! over), and the ring must be replenished after every receive.
//!
//! # Receive times
//! Every receive comes with the kernel's receive time when the socket has
//! SO_TIMESTAMPNS ([`RingEvent::Received`]'s `kernel_ns`): on io_uring from
//! the control bytes the kernel wrote into the buffer ahead of the payload
//! (`crate::uring`, "Every receive carries the kernel's receive time";
//! only the payload is held, the prefix stays unused in the reservation),
//! on epoll from the control buffer of its `recvmsg`. Where an entry is
//! left with a tail too short for another receive, the ring eats it
//! (`NetRing::eat_tail`) at the end of [`RxRing::completions`].
#![allow(unsafe_code)]

use rustc_hash::{FxHashMap, FxHashSet};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use pktfs_fs::{FsError, LentRx, Result, RxHeld, TxHold, TxSeg, Volume};

use crate::netio::{Backend, NetIo};
use crate::uring::{self, Cqe, RingSeg};

/// Shape of a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxRingConfig {
    /// Entries of the provided-buffer ring (a power of two, at most 32768).
    pub entries: u16,
    /// Buffer space per entry, bytes (rounded up to whole packet buffers).
    pub entry_bytes: u32,
    /// Submission queue entries.
    pub sq_entries: u32,
    /// Use incremental consumption when the kernel has it.
    pub incremental: bool,
    /// Try each send at once with a non-blocking sendmsg, and go through
    /// the ring only for what does not fit the socket buffer. Off by
    /// default: a `SendMsg` SQE per answer, submitted with the loop's next
    /// `io_uring_enter` (one system call for a whole turn's answers), was
    /// measured cheaper at 16 and 256 connections (docs/DESIGN.md, "The
    /// event loops"). netpath's io_uring loops turn it on
    /// for a turn that received on one connection only
    /// ([`RxRing::set_inline_sends`]), where there is nothing to batch.
    pub inline_sends: bool,
    /// io_uring, or the epoll fallback that carries out the same requests
    /// (`crate::epoll`).
    pub backend: Backend,
}

impl Default for RxRingConfig {
    fn default() -> Self {
        RxRingConfig {
            // What one turn may receive before it is checksummed: within
            // a core's L2; and one receive up to the largest record
            // (netpath's Config says why).
            entries: 4,
            entry_bytes: 256 << 10,
            sq_entries: 1024,
            incremental: true,
            inline_sends: false,
            backend: Backend::Uring,
        }
    }
}

/// How [`RxRing::send`] started a send.
#[derive(Debug)]
pub enum SendStart<'v> {
    /// In the ring: [`RingEvent::Sent`] brings the message back.
    Queued,
    /// Sent at once (`sent` bytes, possibly fewer than offered): the
    /// message is back already, as a completion would have brought it.
    Done { sent: usize, msg: TxMsg<'v> },
}

/// What a receive completion brought.
#[derive(Debug)]
pub enum RxData<'v> {
    /// Bytes of the stream, in image buffers the ring lent; they hold
    /// their buffers until made into a piece or dropped.
    Bytes(RxHeld<'v>),
    /// The peer closed its side.
    Eof,
    /// The receive failed (`ENOBUFS`: the ring was empty; re-arm once it
    /// has entries again).
    Error(io::Error),
    /// A draining receive ([`RxRing::recv_discard`]) threw this many bytes
    /// away (it is single-shot: arm another to go on).
    Discarded(usize),
    /// No bytes, no end of stream and no error: the entry the receive
    /// selected had no room for any (io_uring's short tail, `crate::uring`).
    /// When it is the last completion (`more == false`), re-arm.
    Ended,
}

/// A completion, decoded.
#[derive(Debug)]
pub enum RingEvent<'v> {
    /// A connection accepted by [`RxRing::accept_multi`] (`more`: the
    /// accept stays armed).
    Accepted {
        tag: u64,
        conn: io::Result<OwnedFd>,
        more: bool,
    },
    /// A receive of [`RxRing::recv_multi`] (`more`: it stays armed) or of
    /// [`RxRing::recv_discard`] (never `more`). `kernel_ns`: for
    /// [`RxData::Bytes`], the kernel's receive time (SO_TIMESTAMPNS; for
    /// TCP the arrival of the newest segment the receive took), ns since
    /// the epoch; `None` when the kernel gave none.
    Received {
        tag: u64,
        data: RxData<'v>,
        more: bool,
        kernel_ns: Option<u64>,
    },
    /// A send of [`RxRing::send`] ended; the message comes back.
    Sent {
        tag: u64,
        result: io::Result<usize>,
        msg: TxMsg<'v>,
    },
    /// A cancellation of [`RxRing::cancel`] ended.
    Cancelled { tag: u64 },
}

/// What one send carries: DRAM bytes (a response head, a small body)
/// followed by a held range of a file.
#[derive(Debug, Default)]
pub struct TxMsg<'v> {
    pub head: Vec<u8>,
    pub hold: Option<TxHold<'v>>,
}

impl TxMsg<'_> {
    /// Bytes in all.
    pub fn len(&self) -> u64 {
        self.head.len() as u64
            + self
                .hold
                .as_ref()
                .map_or(0, |h| h.segs().iter().map(TxSeg::len).sum())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `pos` moved on by `n` bytes the kernel took.
    pub fn advance(&self, pos: &mut TxPos, mut n: u64) {
        let h = (self.head.len() - pos.head.min(self.head.len())) as u64;
        let t = h.min(n);
        pos.head += t as usize;
        n -= t;
        let segs = self.hold.as_ref().map_or(&[][..], |h| h.segs());
        while n > 0 && pos.seg < segs.len() {
            let len = segs[pos.seg].len();
            let take = n.min(len - pos.skip);
            pos.skip += take;
            n -= take;
            if pos.skip == len {
                pos.seg += 1;
                pos.skip = 0;
            }
        }
    }
}

/// How far a [`TxMsg`] got: head bytes sent, then segment and bytes into it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxPos {
    pub head: usize,
    pub seg: usize,
    pub skip: u64,
}

/// Counters of a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxRingStats {
    /// Entries the kernel holds now.
    pub published: u32,
    /// Buffer space the kernel holds now (filled parts included), bytes.
    pub lent_bytes: u64,
    /// Entries that could not be replenished (the volume had no space).
    pub starved: u32,
    /// Receives that found the ring empty (ENOBUFS).
    pub enobufs: u64,
    /// Short tails of entries eaten (io_uring, incremental consumption;
    /// see `crate::uring`), and receives that met one first and were
    /// ended for a re-arm ([`RxData::Ended`]).
    pub tails_eaten: u64,
    pub tail_rearms: u64,
}

const KIND_SHIFT: u32 = 56;
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const CANCEL: u64 = 4;
const DRAIN: u64 = 5;
const EAT: u64 = 6;
/// Largest tag: the top byte of user_data says what the request was.
pub const MAX_TAG: u64 = (1 << KIND_SHIFT) - 1;
/// iovecs per send (IOV_MAX).
const MAX_IOV: usize = 1024;

fn ud(kind: u64, tag: u64) -> io::Result<u64> {
    if tag > MAX_TAG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ring tag out of range",
        ));
    }
    Ok(kind << KIND_SHIFT | tag)
}

/// What one completion filled of its entry ([`RxRing::consume`]).
struct Filled<'v> {
    bid: u16,
    /// Where the bytes start in the reservation, and how many.
    at: u32,
    n: u32,
    /// The entry's room before the completion.
    room: u32,
    /// The first byte (read only: the bytes are filled).
    ptr: std::ptr::NonNull<u8>,
    /// The entry's reservation, when the kernel is done with the entry:
    /// dropped (its reference given back) once the caller held its bytes.
    retired: Option<LentRx<'v>>,
}

/// An io_uring (or its epoll fallback) whose receives land in the
/// volume's free packet buffers. See the module docs.
#[derive(Debug)]
pub struct RxRing<'v> {
    vol: &'v Volume,
    ring: NetIo,
    cfg: RxRingConfig,
    /// Entry `bid`'s reservation while the kernel holds it; `filled` is
    /// the kernel's write position in it.
    slots: Vec<Option<LentRx<'v>>>,
    /// Entries to replenish.
    empty: Vec<u16>,
    /// Keyed by the loop's own tags (never a client's bytes), so a fast
    /// hash needs no seed against collisions.
    sends: FxHashMap<u64, TxMsg<'v>>,
    /// Tags with a draining receive in flight.
    drains: FxHashSet<u64>,
    cqes: Vec<Cqe>,
    enobufs: u64,
    /// Bytes ahead of the payload in every receive's buffer (io_uring's
    /// multishot `recvmsg` prefix; 0 on epoll).
    prefix: u32,
    /// The entry the kernel consumes incrementally now (the last one a
    /// completion left with room).
    partial: Option<u16>,
    /// A tail-eating read is in flight.
    eating: bool,
    tails_eaten: u64,
    tail_rearms: u64,
}

impl<'v> RxRing<'v> {
    /// An io_uring (or epoll) for the network path whose provided-buffer
    /// ring is filled with `cfg.entries` reservations of `vol`'s free
    /// buffer space.
    pub fn new(vol: &'v Volume, cfg: RxRingConfig) -> Result<RxRing<'v>> {
        if vol.is_read_only() {
            return Err(FsError::ReadOnly);
        }
        let ring = NetIo::new(cfg.backend, cfg.sq_entries, cfg.entries, cfg.incremental).map_err(
            |source| FsError::Io {
                path: cfg.backend.to_string().into(),
                source,
            },
        )?;
        let mut r = RxRing {
            vol,
            ring,
            cfg,
            slots: (0..cfg.entries).map(|_| None).collect(),
            empty: (0..cfg.entries).rev().collect(),
            sends: FxHashMap::default(),
            drains: FxHashSet::default(),
            cqes: Vec::new(),
            enobufs: 0,
            prefix: match cfg.backend {
                Backend::Uring => uring::RECV_PREFIX_BYTES,
                Backend::Epoll => 0,
            },
            partial: None,
            eating: false,
            tails_eaten: 0,
            tail_rearms: 0,
        };
        r.replenish();
        Ok(r)
    }

    pub fn volume(&self) -> &'v Volume {
        self.vol
    }
    pub fn config(&self) -> RxRingConfig {
        self.cfg
    }
    /// The backend the ring runs on.
    pub fn backend(&self) -> Backend {
        self.ring.backend()
    }
    /// Whether the sends started from now on try a non-blocking `sendmsg`
    /// first ([`RxRingConfig::inline_sends`]); the loops choose per turn.
    pub fn set_inline_sends(&mut self, on: bool) {
        self.cfg.inline_sends = on;
    }
    /// Incremental consumption is on.
    pub fn incremental(&self) -> bool {
        self.ring.features().incremental
    }
    /// The ring runs with SINGLE_ISSUER + DEFER_TASKRUN.
    pub fn defer_taskrun(&self) -> bool {
        self.ring.features().defer_taskrun
    }
    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        self.ring.inflight()
    }
    /// Sends queued since the last call (see `NetRing::take_fresh_sends`):
    /// their completions usually come without waiting for the peer.
    pub fn take_fresh_sends(&mut self) -> usize {
        self.ring.take_fresh_sends()
    }

    pub fn stats(&self) -> RxRingStats {
        let mut s = RxRingStats {
            starved: self.empty.len() as u32,
            enobufs: self.enobufs,
            tails_eaten: self.tails_eaten,
            tail_rearms: self.tail_rearms,
            ..Default::default()
        };
        for b in self.slots.iter().flatten() {
            s.published += 1;
            s.lent_bytes += b.cap() as u64;
        }
        s
    }

    /// Give every empty entry a fresh reservation. Returns how many
    /// entries the kernel holds afterwards (fewer than configured when
    /// the volume is out of space).
    pub fn replenish(&mut self) -> usize {
        while let Some(&bid) = self.empty.last() {
            match self.vol.rx_reserve(self.cfg.entry_bytes) {
                Ok(b) => {
                    self.empty.pop();
                    let mut lent = b.lend();
                    let len = lent.spare();
                    // SAFETY: the reservation is the ring's (`slots`) until
                    // a completion says the kernel moved past its entry, or
                    // the ring quiesced (`Drop` leaks it otherwise); nothing
                    // else writes it, and only what completions reported
                    // filled is read (`LentRx` allows nothing else).
                    unsafe { self.ring.provide(bid, lent.spare_ptr(), len) };
                    self.slots[bid as usize] = Some(lent);
                }
                Err(_) => break,
            }
        }
        self.cfg.entries as usize - self.empty.len()
    }

    /// Arm a multishot accept on a listening socket.
    pub fn accept_multi(&mut self, listener: BorrowedFd<'_>, tag: u64) -> io::Result<()> {
        let u = ud(ACCEPT, tag)?;
        self.ring.accept_multi(listener.as_raw_fd(), u)
    }

    /// Arm a multishot receive on a connected socket into the ring's
    /// buffers. The socket must stay open until the receive ended (its
    /// last [`RingEvent::Received`] has `more == false`).
    pub fn recv_multi(&mut self, sock: BorrowedFd<'_>, tag: u64) -> io::Result<()> {
        let u = ud(RECV, tag)?;
        self.ring.recv_multi(sock.as_raw_fd(), u)
    }

    /// Arm a single-shot receive on `sock` that throws its bytes away
    /// (they land in DRAM, never in the image): for a connection that
    /// answered early and reads what its client still sends before closing,
    /// when the ring has no buffer to lend. At most one per tag; it ends
    /// with a [`RingEvent::Received`] of [`RxData::Discarded`], `Eof` or
    /// `Error`, and [`RxRing::cancel`] cancels it.
    pub fn recv_discard(&mut self, sock: BorrowedFd<'_>, tag: u64) -> io::Result<()> {
        let u = ud(DRAIN, tag)?;
        if !self.drains.insert(tag) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a draining receive of this tag is in flight",
            ));
        }
        if let Err(e) = self.ring.recv_discard(sock.as_raw_fd(), u) {
            self.drains.remove(&tag);
            return Err(e);
        }
        Ok(())
    }

    /// Send `msg` on `sock` in one sendmsg: its DRAM head bytes (from
    /// `head_skip`) as the first iovec, then its held range of a file, one
    /// iovec per record (holes from a zero page), starting at segment
    /// `first` with its first `skip` bytes already sent. At most one send
    /// per tag in flight; the message comes back with [`RingEvent::Sent`]
    /// (the kernel may take fewer bytes than offered: continue from
    /// there). On error the message is handed back.
    // The error hands the message back (its hold is the caller's to keep
    // or drop): large, and moved once per failed send only.
    #[allow(clippy::result_large_err)]
    pub fn send(
        &mut self,
        sock: BorrowedFd<'_>,
        msg: TxMsg<'v>,
        at: TxPos,
        tag: u64,
    ) -> std::result::Result<SendStart<'v>, (io::Error, TxMsg<'v>)> {
        if msg
            .hold
            .as_ref()
            .is_some_and(|h| !std::ptr::eq(h.volume(), self.vol))
        {
            return Err((
                io::Error::new(io::ErrorKind::InvalidInput, "a hold of another volume"),
                msg,
            ));
        }
        let u = match ud(SEND, tag) {
            Ok(u) => u,
            Err(e) => return Err((e, msg)),
        };
        if self.sends.contains_key(&tag) {
            return Err((
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a send of this tag is in flight",
                ),
                msg,
            ));
        }
        // Most sends are an answer head and a record or two: no allocation.
        let mut segs: smallvec::SmallVec<[RingSeg; 8]> = smallvec::SmallVec::new();
        let held = msg.hold.as_ref().map_or(&[][..], |h| h.segs());
        for (k, s) in held.iter().enumerate().skip(at.seg) {
            let skip = if k == at.seg { at.skip } else { 0 };
            match *s {
                TxSeg::Image { .. } | TxSeg::Fetched { .. } => {
                    // Held image bytes (unwritten while the hold lives) or
                    // fetched ones the hold owns.
                    if let Some(b) = msg.hold.as_ref().and_then(|h| h.seg_bytes(k, skip)) {
                        if !b.is_empty() {
                            segs.push(RingSeg::Mem {
                                ptr: b.as_ptr(),
                                len: b.len(),
                            });
                        }
                    }
                }
                TxSeg::Zero { len } => {
                    let mut left = len.saturating_sub(skip);
                    while left > 0 && segs.len() < MAX_IOV - 1 {
                        let n = left.min(64 << 10);
                        segs.push(RingSeg::Zero(n as usize));
                        left -= n;
                    }
                }
            }
            if segs.len() >= MAX_IOV - 1 {
                segs.truncate(MAX_IOV - 1);
                break;
            }
        }
        let head = msg.head.get(at.head..).filter(|h| !h.is_empty());
        // The hold references every image segment, owns the fetched ones,
        // and those and `msg.head`'s heap bytes stay where they are (moving
        // the Vec or the hold does not move them)
        // until the send's completion hands the message back
        // (`NetRing::send_segments`' contract).
        if self.cfg.inline_sends {
            // First without the ring: most answers fit the socket buffer.
            match self
                .ring
                .send_now(sock.as_raw_fd(), head, segs.iter().copied())
            {
                Ok(n) if n > 0 => return Ok(SendStart::Done { sent: n, msg }),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err((e, msg)),
            }
        }
        if let Err(e) = self.ring.send_segments(sock.as_raw_fd(), head, segs, u) {
            return Err((e, msg));
        }
        self.sends.insert(tag, msg);
        Ok(SendStart::Queued)
    }

    /// Cancel the requests of `tag` (its receive and its send); each ends
    /// with its usual last completion.
    pub fn cancel(&mut self, tag: u64) -> io::Result<()> {
        let c = ud(CANCEL, tag)?;
        self.ring.cancel(ud(RECV, tag)?, c)?;
        if self.drains.contains(&tag) {
            self.ring.cancel(ud(DRAIN, tag)?, c)?;
        }
        if self.sends.contains_key(&tag) {
            self.ring.cancel(ud(SEND, tag)?, c)?;
        }
        Ok(())
    }

    /// Submit everything queued (one syscall) and wait for a completion,
    /// at most `timeout`.
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.ring.submit_and_wait(timeout)
    }

    /// Submit everything queued, then poll for a completion without
    /// sleeping, at most `budget`; returns whether one arrived (then
    /// [`Self::completions`] has it). See `NetRing::submit_and_poll`.
    pub fn submit_and_poll(&mut self, budget: Duration) -> io::Result<bool> {
        self.ring.submit_and_poll(budget)
    }

    /// Decode the completions posted so far into `out`, then replenish
    /// the entries the kernel used up.
    pub fn completions(&mut self, out: &mut Vec<RingEvent<'v>>) {
        let mut cqes = std::mem::take(&mut self.cqes);
        self.ring.reap(&mut cqes);
        for c in cqes.drain(..) {
            if let Some(e) = self.decode(c) {
                out.push(e);
            }
        }
        self.cqes = cqes;
        self.eat_short_tail();
        self.replenish();
    }

    /// Queue a read that eats the rest of the entry being consumed when it
    /// is too short for another receive (`crate::uring`, "the short
    /// tail"). Queued here, after every completion of the batch: the
    /// kernel's state is then ours (it runs receives only inside
    /// `io_uring_enter`, and submits this read before running them).
    fn eat_short_tail(&mut self) {
        if self.prefix == 0 || self.eating || !self.incremental() {
            return;
        }
        let Some(bid) = self.partial else { return };
        let Some(slot) = self.slots.get(bid as usize).and_then(|s| s.as_ref()) else {
            self.partial = None;
            return;
        };
        if slot.spare() >= uring::TAIL_EAT_BELOW {
            return;
        }
        let u = EAT << KIND_SHIFT;
        match self.ring.eat_tail(uring::TAIL_EAT_BELOW, u) {
            Ok(()) => self.eating = true,
            Err(e) => tracing::error!(
                "io_uring: cannot eat the short tail of buffer {bid} ({e}); receives may end \
                 without bytes until it is retired"
            ),
        }
    }

    fn decode(&mut self, c: Cqe) -> Option<RingEvent<'v>> {
        let tag = c.user_data & MAX_TAG;
        let more = c.more();
        let err = || io::Error::from_raw_os_error(-c.result);
        match c.user_data >> KIND_SHIFT {
            ACCEPT => Some(RingEvent::Accepted {
                tag,
                conn: uring::accepted_fd(&c),
                more,
            }),
            RECV => {
                let (data, kernel_ns) = match self.landed(&c) {
                    Some(Ok((h, ns))) => (RxData::Bytes(h), ns),
                    Some(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => (RxData::Eof, None),
                    Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.tail_rearms += 1;
                        (RxData::Ended, None)
                    }
                    Some(Err(e)) => (RxData::Error(e), None),
                    None if c.result == 0 => (RxData::Eof, None),
                    None if c.result == -libc::EFAULT && self.prefix > 0 => {
                        // The entry at the head had less room than the
                        // prefix (the short tail; `crate::uring`): the
                        // bytes wait in the socket for the re-arm, which
                        // is submitted after the read that eats the tail.
                        self.tail_rearms += 1;
                        (RxData::Ended, None)
                    }
                    None => {
                        if c.result == -libc::ENOBUFS {
                            self.enobufs += 1;
                        }
                        (RxData::Error(err()), None)
                    }
                };
                Some(RingEvent::Received {
                    tag,
                    data,
                    more,
                    kernel_ns,
                })
            }
            SEND => {
                let msg = self.sends.remove(&tag)?;
                let result = if c.result < 0 {
                    Err(err())
                } else {
                    Ok(c.result as usize)
                };
                Some(RingEvent::Sent { tag, result, msg })
            }
            CANCEL => Some(RingEvent::Cancelled { tag }),
            DRAIN => {
                self.drains.remove(&tag);
                let data = match c.result {
                    0 => RxData::Eof,
                    n if n > 0 => RxData::Discarded(n as usize),
                    _ => RxData::Error(err()),
                };
                Some(RingEvent::Received {
                    tag,
                    data,
                    more: false,
                    kernel_ns: None,
                })
            }
            EAT => {
                self.eating = false;
                if c.result > 0 {
                    self.tails_eaten += 1;
                    // Zeros the kernel read into the tail: accounted as
                    // filled, never held.
                    if let Some(Err(e)) = self.consume(&c) {
                        tracing::error!("io_uring: eating a tail: {e}");
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Account the bytes a completion says the kernel wrote into its
    /// entry, and take the entry off the ring when the kernel is done with
    /// it (`Filled::retired`). `None`: no buffer was selected.
    fn consume(&mut self, c: &Cqe) -> Option<std::result::Result<Filled<'v>, io::Error>> {
        let bid = c.buffer()?;
        let done = !(self.ring.features().incremental && c.buffer_more());
        let Some(slot) = self.slots.get_mut(bid as usize).and_then(|s| s.as_mut()) else {
            tracing::error!("io_uring reported buffer {bid}, which the ring does not hold");
            return Some(Err(io::Error::other("completion for an unknown buffer")));
        };
        let n = c.result.max(0) as u32;
        let room = slot.spare();
        let r = if n > room {
            tracing::error!("io_uring reported {n} bytes in buffer {bid}, which has {room} left");
            Err(io::Error::other("completion past the end of its buffer"))
        } else {
            let at = slot.filled();
            let ptr = slot.spare_ptr();
            // SAFETY: the kernel's completion reports `n` bytes written at
            // the entry's write position (checked to fit above); it writes
            // the entry only further on (incremental) or no more.
            unsafe { slot.mark_filled(n) };
            Ok(Filled {
                bid,
                at,
                n,
                room,
                ptr,
                retired: None,
            })
        };
        let retired = if done {
            // The kernel moved past this entry: off the ring. The
            // reservation's own reference goes when the caller is done
            // with it (held ranges keep their buffers).
            self.empty.push(bid);
            if self.partial == Some(bid) {
                self.partial = None;
            }
            self.slots[bid as usize].take()
        } else {
            self.partial = Some(bid);
            None
        };
        Some(r.map(|mut f| {
            f.retired = retired;
            f
        }))
    }

    /// The payload a receive completion says landed in its buffer, as a
    /// hold, and its kernel receive time; retires the entry when the
    /// kernel is done with it. `None`: no buffer was selected (an error,
    /// or epoll's end of stream). An `UnexpectedEof` error is the end of
    /// the stream, a `WouldBlock` one a receive that found no room for a
    /// byte (`RxData::Ended`).
    #[allow(clippy::type_complexity)]
    fn landed(
        &mut self,
        c: &Cqe,
    ) -> Option<std::result::Result<(RxHeld<'v>, Option<u64>), io::Error>> {
        let f = match self.consume(c)? {
            Ok(f) => f,
            Err(e) => return Some(Err(e)),
        };
        let Some(lent) = f
            .retired
            .as_ref()
            .or_else(|| self.slots[f.bid as usize].as_ref())
        else {
            return Some(Err(io::Error::other("completion for an unknown buffer")));
        };
        if self.prefix == 0 {
            // epoll: the payload alone, its time beside the completion.
            if f.n == 0 {
                return Some(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            return Some(Ok((lent.hold(f.at, f.n), c.kernel_ns)));
        }
        // SAFETY: `consume` accounted these `n` bytes as filled: the kernel
        // wrote them (its completion says so) and writes them no more, and
        // filled bytes are only ever read. Their reservation (`lent`) lives
        // until this function returns, past the last use of `buf`.
        let buf = unsafe { std::slice::from_raw_parts(f.ptr.as_ptr(), f.n as usize) };
        let Some(r) = uring::NetRing::parse_received(buf) else {
            tracing::error!(
                "io_uring reported {} bytes of a recvmsg in buffer {}, fewer than its header",
                f.n,
                f.bid
            );
            return Some(Err(io::Error::other(
                "a recvmsg completion shorter than its header",
            )));
        };
        if r.payload_len == 0 {
            return Some(Err(if f.room <= self.prefix {
                // Not the end of the stream: the entry had no room for a
                // byte of payload (the short tail, `crate::uring`).
                io::ErrorKind::WouldBlock.into()
            } else {
                io::ErrorKind::UnexpectedEof.into()
            }));
        }
        Some(Ok((
            lent.hold(f.at + self.prefix, r.payload_len),
            r.kernel_ns,
        )))
    }

    /// Cancel everything and reap until nothing is in flight: afterwards
    /// the kernel touches none of the ring's buffers. Completions are
    /// dropped (their holds returned). Returns whether that could be
    /// confirmed. `Drop` does the same.
    pub fn quiesce(&mut self) -> bool {
        let mut cqes = Vec::new();
        let ok = self.ring.quiesce(&mut cqes);
        for c in cqes {
            drop(self.decode(c));
        }
        ok
    }
}

impl Drop for RxRing<'_> {
    fn drop(&mut self) {
        if !self.quiesce() {
            tracing::error!(
                "io_uring requests could not be confirmed ended: {} bytes of buffer space are left reserved until the image is opened again",
                self.stats().lent_bytes
            );
            // Never back to the allocator while the kernel may write them.
            for s in self.slots.drain(..) {
                std::mem::forget(s);
            }
            for (_, h) in self.sends.drain() {
                std::mem::forget(h);
            }
        }
        // Otherwise the fields drop: the reservations go back to the
        // allocator, then the ring's fd closes.
    }
}

/// Is io_uring usable for [`RxRing`]: see [`crate::uring::probe`].
pub fn probe() -> std::result::Result<crate::uring::Features, String> {
    uring::probe()
}

#[cfg(test)]
mod tests;
