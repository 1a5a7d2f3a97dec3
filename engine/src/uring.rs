//! io_uring for the network path: one ring per event-loop thread, with a
//! provided-buffer ring whose entries are runs of the image's free packet
//! buffers (PASTE's shape on kernel TCP: the kernel picks a free buffer for
//! every receive and the completion says which one it filled).
//!
//! All the unsafe of lending memory to the kernel through a ring lives
//! here. The safe face is [`crate::RxRing`], which owns the reservations
//! this ring lends and keeps the contract of `NetRing::provide` and
//! `NetRing::send_segments`.
//!
//! # When the kernel stops writing
//! The kernel writes a provided buffer only while a receive request that
//! may select it is in flight; every request's writes happen before its
//! last completion (the one without `IORING_CQE_F_MORE`). So the ring
//! counts requests in flight, and [`NetRing::quiesce`] cancels them all and
//! reaps completions until none is left: from then on no byte of lent
//! memory is written or read by the kernel. Unregistering the buffer ring
//! or closing the ring fd alone would not do: teardown of a closed ring is
//! asynchronous, and a request that already selected a buffer finishes its
//! copy regardless. When quiescence cannot be confirmed (an
//! `io_uring_enter` error other than EINTR), the owner must leak the lent
//! memory rather than reuse it (leaking reserved buffer space is safe: the
//! next open of the image rebuilds the allocator from what files reach).
//!
//! # Every receive carries the kernel's receive time
//! Receives are multishot `recvmsg` (`IORING_OP_RECVMSG` with
//! `IORING_RECV_MULTISHOT`) into the same provided-buffer ring, with a
//! message template whose `msg_namelen` is 0 and whose `msg_controllen`
//! has room for one `SCM_TIMESTAMPNS` message. For every completion the
//! kernel writes, at the buffer's write position, `struct
//! io_uring_recvmsg_out` (16 bytes), the control bytes (32) and then the
//! payload, and the completion's result counts all three
//! ([`RECV_PREFIX_BYTES`] + payload). `crate::RxRing` reads the time from
//! the control bytes (`crate::rxstamp`) and hands on only the payload; the
//! prefix stays inside the reservation and never becomes a record. The
//! payload is still written once, by the kernel, straight into the image.
//!
//! What it costs: 48 bytes of buffer space per completion (about 5% of a
//! 1 KiB request's receive, nothing of note for a large body's), and the
//! kernel's copy of those 48 bytes; no system call, allocation or copy of
//! payload is added.
//!
//! ## Incremental consumption and the short tail
//! Incremental consumption (`IOU_PBUF_RING_INC`) works with multishot
//! `recvmsg` on 6.12+ (the probe checks it): each completion takes
//! prefix + payload from the entry. But the kernel refuses to start a
//! `recvmsg` in an entry with less room than the prefix (`-EFAULT`, which
//! ends the request and leaves the entry at the head of the ring, so every
//! later receive would fail the same way), and one with exactly the
//! prefix's room reads 0 bytes, which looks like end of stream. So when an
//! entry is left with a tail shorter than [`TAIL_EAT_BELOW`], the ring
//! consumes it with a read from `/dev/zero` selecting from the same buffer
//! group ([`NetRing::eat_tail`]): the read runs when it is submitted, before
//! any receive of the next `io_uring_enter` (DEFER_TASKRUN), and the entry
//! is retired. A receive that met the tail first (in the same batch of task
//! work) ends without bytes and is re-armed (`RxData::Ended`). Without
//! `/dev/zero`, or without incremental consumption in the kernel, every
//! receive consumes a whole entry, as before.
#![allow(unsafe_code)]

use rustc_hash::FxHashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use std::ptr::NonNull;

mod mem;
pub(crate) mod poll;
use mem::{spare_keep, BufRingMem, SendKeep, Sink, SINK_BYTES};

/// `IOU_PBUF_RING_INC` (include/uapi/linux/io_uring.h): incremental
/// consumption of provided buffers (6.12+).
const PBUF_RING_INC: u16 = 2;
/// How long a stopping ring waits for its cancelled requests to end.
const QUIESCE_LIMIT: Duration = Duration::from_secs(10);
/// `IORING_CQE_F_BUF_MORE` (include/uapi/linux/io_uring.h): the entry has room left.
const CQE_F_BUF_MORE: u32 = 1 << 4;
/// `sizeof(struct io_uring_recvmsg_out)` (namelen, controllen, payloadlen,
/// flags: four `__u32`).
const RECVMSG_OUT_BYTES: u32 = 16;
/// Bytes the kernel writes before the payload of every multishot
/// `recvmsg` completion (module docs): the header, no name, the control
/// room for one timestamp.
pub const RECV_PREFIX_BYTES: u32 = RECVMSG_OUT_BYTES + crate::rxstamp::CONTROL_BYTES as u32;
/// An entry left with less room than this is eaten ([`NetRing::eat_tail`]):
/// below the prefix a receive fails, at it a receive reads nothing, and
/// just above it each receive would make a record of a few bytes.
pub const TAIL_EAT_BELOW: u32 = RECV_PREFIX_BYTES + 64;

/// Holes in a transmitted file are sent from this (the kernel only reads
/// it).
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// A completion as the kernel posted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    pub user_data: u64,
    pub result: i32,
    pub flags: u32,
    /// The receive's kernel time, ns since the epoch, where the backend
    /// posts it beside the completion (epoll). An io_uring receive carries
    /// it inside its buffer instead (module docs): `None` here.
    pub kernel_ns: Option<u64>,
}

impl Cqe {
    /// More completions of the same request will follow.
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }
    /// The provided buffer (ring entry) the data landed in.
    pub fn buffer(&self) -> Option<u16> {
        cqueue::buffer_select(self.flags)
    }
    /// Incremental consumption: the entry has room left and stays with the
    /// kernel.
    pub fn buffer_more(&self) -> bool {
        self.flags & CQE_F_BUF_MORE != 0
    }
}

/// What a ring can do, found by [`probe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Provided-buffer rings accept `IOU_PBUF_RING_INC`.
    pub incremental: bool,
    /// The ring was set up with SINGLE_ISSUER + DEFER_TASKRUN.
    pub defer_taskrun: bool,
}

/// An io_uring with one provided-buffer ring (buffer group 0) over image
/// memory. Not `Send` (raw pointers): with SINGLE_ISSUER only the thread
/// that made it may submit, and that includes the cancellations of `Drop`.
pub struct NetRing {
    ring: IoUring,
    br: Option<BufRingMem>,
    /// Local tail of the buffer ring (published with a release store).
    tail: u16,
    incremental: bool,
    defer_taskrun: bool,
    /// Requests whose last completion has not been reaped.
    inflight: usize,
    /// Sends in flight that name kept memory (sendmsg), by user_data;
    /// `None` for a one-buffer send, which names only the caller's bytes.
    /// Keys are the loop's own tags, never input: a fast hash is enough.
    sends: FxHashMap<u64, Option<SendKeep>>,
    /// Sends queued since `take_fresh_sends` last looked.
    fresh_sends: usize,
    spare_keeps: Vec<SendKeep>,
    /// Made at the first draining receive.
    sink: Option<Sink>,
    /// The message template of every multishot `recvmsg`: no name, room
    /// for one timestamp (the kernel reads the two lengths from it).
    recv_msg: Box<libc::msghdr>,
    /// `/dev/zero`, which short tails of entries are eaten from
    /// (incremental consumption only).
    zero: Option<OwnedFd>,
    /// Quiescence could not be confirmed: never free what was lent.
    wedged: bool,
}

impl std::fmt::Debug for NetRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetRing")
            .field("incremental", &self.incremental)
            .field("inflight", &self.inflight)
            .finish_non_exhaustive()
    }
}

/// The buffer group every ring uses (one group per ring).
pub const BGID: u16 = 0;
/// Reserved user_data of the cancellations `quiesce` issues.
const QUIESCE_UD: u64 = u64::MAX;

fn build(sq_entries: u32, defer: bool) -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    // The CQ is sized for bursts of multishot completions (one per
    // receive of every connection between two turns); overflow is not
    // lost (FEAT_NODROP) but costs a slow path.
    b.setup_cqsize(sq_entries.saturating_mul(8)).setup_clamp();
    if defer {
        // One thread submits and reaps: completions run as task work only
        // when the loop asks for them (no IPIs interrupting the thread in
        // the middle of a turn), and the kernel skips submission locking.
        b.setup_single_issuer().setup_defer_taskrun();
    } else {
        // Older kernels: at least do not interrupt the thread for task work.
        b.setup_coop_taskrun();
    }
    // Either way the kernel raises IORING_SQ_TASKRUN when it queues work
    // for this ring: what `submit_and_poll` watches instead of entering
    // the kernel on every poll.
    b.setup_taskrun_flag();
    b.build(sq_entries)
}

/// One iovec of a ring send after the head.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RingSeg {
    /// Zeros (a hole), at most 64 KiB.
    Zero(usize),
    /// Bytes the caller keeps alive, unmoved and unwritten until the
    /// completion: held image bytes ([`pktfs_fs::TxHold::seg_bytes`]) or
    /// DRAM (fetched tiered bytes).
    Mem { ptr: *const u8, len: usize },
}

impl NetRing {
    /// A ring with `sq_entries` submission slots and a buffer ring of
    /// `buf_entries` (a power of two, at most 32768).
    /// Incremental consumption is used when `incremental` and the kernel
    /// has it.
    pub(crate) fn new(sq_entries: u32, buf_entries: u16, incremental: bool) -> io::Result<NetRing> {
        if buf_entries == 0 || !buf_entries.is_power_of_two() || buf_entries > 32768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring entries must be a power of two up to 32768",
            ));
        }
        let (ring, defer_taskrun) = match build(sq_entries, true) {
            Ok(r) => (r, true),
            Err(_) => (build(sq_entries, false)?, false),
        };
        let br = BufRingMem::new(buf_entries)?;
        let mut inc = false;
        // Incremental consumption needs a way to eat short tails (module
        // docs); without /dev/zero every receive takes a whole entry.
        let zero = if incremental { open_zero() } else { None };
        if zero.is_some() {
            // SAFETY: `br` is page aligned, `buf_entries` entries long and
            // owned by the returned ring, which unregisters it (or leaks it)
            // before freeing it.
            inc = unsafe {
                ring.submitter().register_buf_ring_with_flags(
                    br.ptr as u64,
                    buf_entries,
                    BGID,
                    PBUF_RING_INC,
                )
            }
            .is_ok();
        }
        if !inc {
            // SAFETY: as above.
            unsafe {
                ring.submitter()
                    .register_buf_ring_with_flags(br.ptr as u64, buf_entries, BGID, 0)
            }?;
        }
        // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
        let mut recv_msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        recv_msg.msg_controllen = crate::rxstamp::CONTROL_BYTES as _;
        Ok(NetRing {
            ring,
            br: Some(br),
            tail: 0,
            incremental: inc,
            defer_taskrun,
            inflight: 0,
            sends: FxHashMap::default(),
            fresh_sends: 0,
            spare_keeps: Vec::new(),
            sink: None,
            recv_msg,
            zero: if inc { zero } else { None },
            wedged: false,
        })
    }

    pub fn features(&self) -> Features {
        Features {
            incremental: self.incremental,
            defer_taskrun: self.defer_taskrun,
        }
    }

    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        self.inflight
    }

    /// Sends queued since the last call: the ones the next
    /// `io_uring_enter` hands the kernel, whose completions usually come
    /// at once (a send into a socket with room completes inline).
    pub fn take_fresh_sends(&mut self) -> usize {
        std::mem::take(&mut self.fresh_sends)
    }

    /// Hand the `len` bytes at `ptr` to the kernel as buffer `bid`.
    /// Visible to the kernel at the next [`Self::submit_and_wait`].
    ///
    /// # Safety
    /// The bytes are writable and the caller's (a lent reservation,
    /// [`pktfs_fs::LentRx`]) and, until a completion reports the entry
    /// consumed or [`Self::quiesce`] returned `true`, nothing else writes
    /// them, nothing reads bytes no completion has reported filled, and
    /// they are not freed. Each `bid` is in the ring at most once.
    pub(crate) unsafe fn provide(&mut self, bid: u16, ptr: NonNull<u8>, len: u32) {
        let Some(br) = &self.br else { return };
        assert!(bid < br.entries, "provided buffer id outside the ring");
        let mask = br.entries - 1;
        // SAFETY: index masked into the ring's `entries` entries; only this
        // thread writes entries between head and our tail, and the kernel
        // reads them only after the release store of the tail below.
        let e = unsafe { &mut *br.ptr.add((self.tail & mask) as usize) };
        e.set_addr(ptr.as_ptr() as u64);
        e.set_len(len);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field overlays entry 0's `resv`; `br.ptr` is the
        // page-aligned base of the registered ring.
        let tail =
            unsafe { types::BufRingEntry::tail(br.ptr) } as *const std::sync::atomic::AtomicU16;
        // SAFETY: an aligned u16 in the ring memory, shared with the kernel,
        // accessed atomically.
        unsafe { &*tail }.store(self.tail, std::sync::atomic::Ordering::Release);
    }

    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry pushed names only memory that outlives the
        // request (no memory; provided buffers under `provide`'s contract;
        // a send's iovecs and msghdr kept in `sends` until its completion;
        // the sink, freed only after quiescence).
        if unsafe { self.ring.submission().push(&e) }.is_err() {
            // The SQ is full: hand what is queued to the kernel and retry.
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(&e) }
                .map_err(|_| io::Error::other("submission queue full"))?;
        }
        self.inflight += 1;
        Ok(())
    }

    /// Multishot accept on listening socket `fd` (each completion is a new
    /// connection's fd).
    pub fn accept_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(user_data);
        self.push(e)
    }

    /// Multishot `recvmsg` on `fd` into the provided buffers: each
    /// completion's buffer holds [`RECV_PREFIX_BYTES`] of header and
    /// control bytes (the receive time), then the payload (module docs).
    pub fn recv_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let e = opcode::RecvMsgMulti::new(types::Fd(fd), &*self.recv_msg, BGID)
            .build()
            .user_data(user_data);
        self.push(e)
    }

    /// Consume up to `max` bytes of the entry at the head of the buffer
    /// ring with a read from `/dev/zero` (module docs, "the short tail"):
    /// its completion names the entry and the bytes taken, which are
    /// zeros and never a record. `Unsupported` without incremental
    /// consumption (there are no tails then).
    pub fn eat_tail(&mut self, max: u32, user_data: u64) -> io::Result<()> {
        let Some(zero) = self.zero.as_ref() else {
            return Err(io::ErrorKind::Unsupported.into());
        };
        let e = opcode::Read::new(types::Fd(zero.as_raw_fd()), std::ptr::null_mut(), max)
            .buf_group(BGID)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(user_data);
        self.push(e)
    }

    /// The bytes a receive completion reports at its entry's write
    /// position (`buf`, the completion's result long), split: the payload
    /// and the kernel's receive time. `None` when they do not parse as a
    /// multishot `recvmsg`'s (shorter than the prefix).
    pub(crate) fn parse_received(buf: &[u8]) -> Option<Received> {
        // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        m.msg_controllen = crate::rxstamp::CONTROL_BYTES as _;
        let out = types::RecvMsgOut::parse(buf, &m).ok()?;
        Some(Received {
            payload_len: out.payload_data().len() as u32,
            kernel_ns: crate::rxstamp::timestamp_ns(out.control_data()),
        })
    }

    /// A single-shot receive on `fd` whose bytes are thrown away (into the
    /// ring's sink, never into the image): how a connection that answered
    /// early keeps reading what its client still sends, so that closing
    /// does not reset the connection before the answer is read, when no
    /// packet buffer is free to receive into.
    pub fn recv_discard(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        if self.sink.is_none() {
            self.sink = Some(Sink::new()?);
        }
        let ptr = self.sink.as_ref().expect("made above").ptr;
        let e = opcode::Recv::new(types::Fd(fd), ptr, SINK_BYTES as u32)
            .build()
            .user_data(user_data);
        self.push(e)
    }

    /// Cancel every request with `user_data`.
    pub fn cancel(&mut self, target: u64, user_data: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::user_data(target).all())
            .build()
            .user_data(user_data);
        self.push(e)
    }

    /// The same send as [`Self::send_segments`], tried at once without
    /// waiting: one non-blocking sendmsg. Returns the bytes the kernel
    /// took (a short count when the socket buffer filled; `WouldBlock`
    /// when it was full). The bytes are only read during the call, so
    /// the contract of `send_segments` holds for its duration only.
    ///
    /// Why: a small answer (an HTTP 201) fits the socket buffer almost
    /// always; sent here it needs no SQE, no completion, no kept iovecs
    /// and no extra turn of the loop, which on one connection is a tenth
    /// of the request's CPU.
    pub(crate) fn send_now(
        &self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
    ) -> io::Result<usize> {
        send_now(fd, head, segs)
    }

    /// Send on `fd` (sendmsg with one iovec per segment; a plain send when
    /// there is one buffer): kept bytes, or zeros (a hole, at most 64 KiB
    /// per segment). `user_data` must be unique among sends in flight.
    ///
    /// `head`: DRAM bytes sent first (an HTTP response head), as the first
    /// iovec. `RingSeg::Mem` segments are DRAM bytes too (tiered data
    /// fetched back), under the same contract as `head`.
    ///
    /// Contract (crate-internal): the `head` and `Mem` bytes stay
    /// allocated, unmoved and unwritten until
    /// the completion for `user_data` is reaped or [`Self::quiesce`]
    /// returned `true` (`TxHold` keeps the image bytes referenced; the
    /// caller keeps the head's heap allocation, `RxRing`'s `sends` map).
    pub(crate) fn send_segments(
        &mut self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
        user_data: u64,
    ) -> io::Result<()> {
        if self.sends.contains_key(&user_data) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a send with this user_data is in flight",
            ));
        }
        let mut keep = self.spare_keeps.pop().unwrap_or_else(SendKeep::new);
        keep.iovs.clear();
        keep.iovs.extend(iovecs(head, segs));
        let one = match keep.iovs[..] {
            [one] => u32::try_from(one.iov_len)
                .ok()
                .map(|len| (one.iov_base, len)),
            _ => None,
        };
        let (e, kept) = if let Some((buf, len)) = one {
            // One buffer (a small answer's head, or one record): a plain
            // send, without the msghdr the kernel would copy and the iovec
            // it would import; nothing to keep but the caller's bytes.
            let e = opcode::Send::new(types::Fd(fd), buf as *const u8, len)
                .flags(libc::MSG_NOSIGNAL)
                .build()
                .user_data(user_data);
            self.spare_keeps.push(keep);
            (e, None)
        } else {
            // SAFETY: msghdr is plain old data; zeroed is a valid empty
            // header (a kept one may hold the previous send's fields).
            *keep.msg = unsafe { std::mem::zeroed() };
            keep.msg.msg_iov = keep.iovs.as_mut_ptr();
            keep.msg.msg_iovlen = keep.iovs.len() as _;
            let e = opcode::SendMsg::new(types::Fd(fd), &*keep.msg as *const libc::msghdr)
                .flags(libc::MSG_NOSIGNAL as u32)
                .build()
                .user_data(user_data);
            (e, Some(keep))
        };
        if let Err(err) = self.push(e) {
            self.spare(kept);
            return Err(err);
        }
        self.sends.insert(user_data, kept);
        self.fresh_sends += 1;
        Ok(())
    }

    /// A send's kept memory, back for the next send once the kernel is
    /// done with it.
    fn spare(&mut self, kept: Option<SendKeep>) {
        spare_keep(&mut self.spare_keeps, kept);
    }

    /// Submit what is queued and wait for at least one completion, at most
    /// `timeout`. A timeout or a signal is not an error.
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let r = match timeout {
            Some(t) => {
                let ts = types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submitter().submit_and_wait(1),
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Submit what is queued, then look for a completion without sleeping
    /// for at most `budget` (busy polling); returns whether one was posted.
    ///
    /// Why: a loop that sleeps between requests is woken for the next one
    /// by an interrupt to its idle core, and that wake-up (two exits to the
    /// hypervisor in a VM) is most of a lightly loaded server's latency. A
    /// loop that keeps looking for a while after it did work takes the next
    /// request without it, for CPU time spent looking. Looking is one read
    /// of the ring's flags (the kernel raises IORING_SQ_TASKRUN when it
    /// queues work for the ring) and one `io_uring_enter` only when it did;
    /// the poll starts with an enter only when requests are queued.
    pub fn submit_and_poll(&mut self, budget: Duration) -> io::Result<bool> {
        poll::poll(self, budget)
    }

    /// One `io_uring_enter` that submits what is queued and runs the
    /// ring's pending task work (posting what it completes), not waiting.
    fn enter_nowait(&mut self) -> io::Result<()> {
        // From linux/io_uring.h (not in the libc crate).
        const IORING_ENTER_GETEVENTS: u32 = 1;
        let queued = self.ring.submission().len() as u32;
        // SAFETY: no argument is passed, and every queued SQE was built by
        // this ring's methods, which keep what it points to alive until
        // its completion.
        let r = unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(queued, 0, IORING_ENTER_GETEVENTS, None)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Move the completions posted so far into `out`.
    pub fn reap(&mut self, out: &mut Vec<Cqe>) {
        for c in self.ring.completion() {
            let c = Cqe {
                user_data: c.user_data(),
                result: c.result(),
                flags: c.flags(),
                kernel_ns: None,
            };
            if !c.more() {
                self.inflight = self.inflight.saturating_sub(1);
                // The kernel is done with a send's memory at its last
                // completion.
                if let Some(k) = self.sends.remove(&c.user_data) {
                    spare_keep(&mut self.spare_keeps, k);
                }
            }
            if c.user_data != QUIESCE_UD {
                out.push(c);
            }
        }
    }

    /// Cancel every request and reap until none is in flight; completions
    /// other than the cancellations' are appended to `out`. Returns whether
    /// the kernel is confirmed done with all lent memory.
    pub fn quiesce(&mut self, out: &mut Vec<Cqe>) -> bool {
        if self.wedged {
            return false;
        }
        let mut cancelled = false;
        let mut errors = 0;
        // Bounded: a stop must end even if the kernel never completes a
        // request (then its memory is leaked, never freed under it).
        let deadline = std::time::Instant::now() + QUIESCE_LIMIT;
        while self.inflight > 0 {
            if std::time::Instant::now() >= deadline {
                tracing::error!(
                    "io_uring: {} requests still in flight {QUIESCE_LIMIT:?} after they were \
                     cancelled; their memory is kept for the life of the process",
                    self.inflight
                );
                self.wedged = true;
                return false;
            }
            if !cancelled {
                let e = opcode::AsyncCancel2::new(types::CancelBuilder::any().all())
                    .build()
                    .user_data(QUIESCE_UD);
                if self.push(e).is_err() {
                    self.wedged = true;
                    return false;
                }
                cancelled = true;
            }
            if let Err(e) = self.submit_and_wait(Some(Duration::from_millis(100))) {
                errors += 1;
                if errors > 10 {
                    tracing::error!("io_uring: cannot confirm requests ended: {e}");
                    self.wedged = true;
                    return false;
                }
            }
            let before = self.inflight;
            self.reap(out);
            // Requests may arrive after the cancel (a multishot re-armed
            // internally); cancel again until nothing is left.
            if self.inflight > 0 && self.inflight == before {
                cancelled = false;
            }
        }
        true
    }
}

/// A multishot `recvmsg`'s completion read from its buffer
/// ([`NetRing::parse_received`]): the payload follows the
/// [`RECV_PREFIX_BYTES`] of prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Received {
    pub(crate) payload_len: u32,
    /// `None`: the kernel gave no time (no SO_TIMESTAMPNS on the socket,
    /// or the control message was cut short, `MSG_CTRUNC`).
    pub(crate) kernel_ns: Option<u64>,
}

/// `/dev/zero`, read-only (short tails are eaten from it); `None` where it
/// cannot be opened (a sandbox without it).
fn open_zero() -> Option<OwnedFd> {
    std::fs::File::open("/dev/zero").ok().map(OwnedFd::from)
}

/// The iovecs of a send: `head` first, then one per segment (a hole's
/// from the zero page).
pub(crate) fn iovecs<'s>(
    head: Option<&'s [u8]>,
    segs: impl IntoIterator<Item = RingSeg> + 's,
) -> impl Iterator<Item = libc::iovec> + 's {
    let head = head.filter(|h| !h.is_empty()).map(|h| libc::iovec {
        // The kernel only reads; the caller keeps the bytes alive.
        iov_base: h.as_ptr() as *mut libc::c_void,
        iov_len: h.len(),
    });
    head.into_iter()
        .chain(segs.into_iter().map(move |s| match s {
            RingSeg::Zero(n) => {
                assert!(n <= ZEROS.len(), "hole segment too long");
                libc::iovec {
                    iov_base: ZEROS.as_ptr() as *mut libc::c_void,
                    iov_len: n,
                }
            }
            // The kernel only reads; the caller keeps the bytes alive and
            // unmoved until the completion (the contract of `send_segments`).
            RingSeg::Mem { ptr, len: n } => libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: n,
            },
        }))
}

/// One non-blocking sendmsg of `head` and `segs` (see
/// [`NetRing::send_now`]).
pub(crate) fn send_now(
    fd: RawFd,
    head: Option<&[u8]>,
    segs: impl IntoIterator<Item = RingSeg>,
) -> io::Result<usize> {
    // On the stack for the usual few iovecs (the call is synchronous).
    let iovs: smallvec::SmallVec<[libc::iovec; 8]> = iovecs(head, segs).collect();
    sendmsg_now(fd, &iovs)
}

/// One non-blocking sendmsg of `iovs`.
///
/// Contract (crate-internal): every iovec names memory readable for the
/// duration of the call (built by [`iovecs`] from the zero page or bytes
/// the caller keeps alive).
pub(crate) fn sendmsg_now(fd: RawFd, iovs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iovs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iovs.len() as _;
    // SAFETY: the iovecs name readable memory for the duration of the call
    // (the contract above); the kernel only reads them.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

impl Drop for NetRing {
    fn drop(&mut self) {
        let mut sink = Vec::new();
        if self.quiesce(&mut sink) {
            if self.ring.submitter().unregister_buf_ring(BGID).is_err() {
                // Still registered: the ring memory stays valid for ever.
                std::mem::forget(self.br.take());
            }
        } else {
            // The kernel may still use them: never free.
            std::mem::forget(self.br.take());
            std::mem::forget(self.sink.take());
            std::mem::forget(std::mem::take(&mut self.sends));
        }
    }
}

/// The accepted connection of an accept completion.
pub fn accepted_fd(c: &Cqe) -> io::Result<OwnedFd> {
    if c.result < 0 {
        return Err(io::Error::from_raw_os_error(-c.result));
    }
    // SAFETY: a successful accept completion's result is a new fd the
    // kernel installed in this process for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(c.result) })
}

/// Can this process use io_uring for the loops: a ring with a buffer ring,
/// and a multishot receive into it that works (checked on a socket pair).
/// `Err` says what is missing.
pub fn probe() -> Result<Features, String> {
    // On a thread of its own: the probe's ring runs a real receive, and the
    // kernel's completion work for it (task work, on the ring's thread) can
    // interrupt that thread's next blocking call. A socket read with
    // SO_RCVTIMEO set then fails with EINTR instead of restarting, so the
    // probe would leak a spurious error into the caller's own I/O (an
    // embedding application's, or a test client's on the same thread).
    std::thread::Builder::new()
        .name("pktfs-uring-probe".into())
        .spawn(probe_here)
        .map_err(|e| format!("io_uring probe thread: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("io_uring probe panicked".into()))
}

fn probe_here() -> Result<Features, String> {
    // The probe's own buffer, lent to the kernel below.
    let mut mem = vec![0u8; 4096].into_boxed_slice();
    let mut ring = NetRing::new(8, 1, true).map_err(|e| format!("io_uring setup: {e}"))?;
    let mut p = io_uring::Probe::new();
    ring.ring
        .submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("io_uring probe: {e}"))?;
    for (op, name) in [
        (opcode::AcceptMulti::CODE, "accept"),
        (opcode::RecvMsgMulti::CODE, "recvmsg"),
        (opcode::SendMsg::CODE, "sendmsg"),
        (opcode::AsyncCancel2::CODE, "async cancel"),
        (opcode::Read::CODE, "read"),
    ] {
        if !p.is_supported(op) {
            return Err(format!("io_uring lacks {name}"));
        }
    }
    let (a, b) = std::os::unix::net::UnixStream::pair().map_err(|e| e.to_string())?;
    use std::io::Write;
    (&a).write_all(b"probe").map_err(|e| e.to_string())?;
    // SAFETY: `mem` is ours and writable; nothing reads or frees it until
    // the quiesce below confirms the kernel is done (else it is leaked).
    unsafe { ring.provide(0, NonNull::from(&mut mem[..]).cast(), 4096) };
    // From here on `mem` is lent: every path goes through the quiesce below.
    let mut out = Vec::new();
    let wait_one = |ring: &mut NetRing, out: &mut Vec<Cqe>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while out.is_empty() && std::time::Instant::now() < deadline {
            ring.submit_and_wait(Some(Duration::from_millis(100)))
                .map_err(|e| format!("io_uring submit: {e}"))?;
            ring.reap(out);
        }
        Ok::<(), String>(())
    };
    let run = (|| {
        ring.recv_multi(b.as_raw_fd(), 1)
            .map_err(|e| e.to_string())?;
        wait_one(&mut ring, &mut out)?;
        let Some(&c) = out.first() else {
            return Err("multishot recvmsg into a buffer ring never completed".to_string());
        };
        if c.result < 0 {
            return Err(format!(
                "multishot recvmsg into a buffer ring failed: {}",
                io::Error::from_raw_os_error(-c.result)
            ));
        }
        if c.result as u32 != RECV_PREFIX_BYTES + 5 || c.buffer() != Some(0) {
            return Err("multishot recvmsg into a buffer ring misbehaved".to_string());
        }
        if !ring.incremental {
            return Ok(());
        }
        // Incremental: the entry keeps its room, and a short tail can be
        // eaten (module docs): eat the rest of it here.
        if !c.buffer_more() {
            return Err("incremental consumption did not keep the entry".to_string());
        }
        out.clear();
        ring.eat_tail(4096, 2)
            .map_err(|e| format!("eating a tail: {e}"))?;
        wait_one(&mut ring, &mut out)?;
        match out.iter().find(|c| c.user_data == 2) {
            Some(c)
                if c.result as u32 == 4096 - RECV_PREFIX_BYTES - 5
                    && c.buffer() == Some(0)
                    && !c.buffer_more() =>
            {
                Ok(())
            }
            Some(c) => Err(format!(
                "eating an entry's tail misbehaved (result {}, flags {:#x})",
                c.result, c.flags
            )),
            None => Err("eating an entry's tail never completed".to_string()),
        }
    })();
    let f = ring.features();
    let res = run.map(|()| f);
    let mut sink = Vec::new();
    if !ring.quiesce(&mut sink) {
        // The kernel may still write `mem`: it must never be freed.
        std::mem::forget(mem);
        return Err("io_uring requests would not end".into());
    }
    drop(ring);
    res
}
