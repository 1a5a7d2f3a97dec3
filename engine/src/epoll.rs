//! The event loops' fallback where io_uring is not usable (an older
//! kernel, a seccomp profile or container that blocks it): the same
//! requests as [`NetRing`](super::uring::NetRing) (multishot accept,
//! multishot receive into provided packet buffers of the image, draining
//! receives, sends of one iovec per record, cancellation) and the same
//! completions, carried out with epoll readiness and non-blocking
//! syscalls on the loop's own thread.
//!
//! Why emulate the ring instead of writing a second loop: the loop, its
//! sessions and `RxRing`'s ownership of lent buffer space stay one piece
//! of code for both backends, so the fallback serves thousands of
//! connections on one thread per loop with the same HTTP, the same
//! durability contract and the same tests; only where bytes are moved
//! differs. The provided buffers keep their meaning: a connection holds
//! no packet buffer until bytes arrive, and each receive takes the next
//! bytes of the oldest provided entry, as the kernel does with
//! incremental consumption (`IOU_PBUF_RING_INC`).
//!
//! Receives are `recvmsg` calls straight into the provided entry (the
//! payload only) with a control buffer on the stack for the kernel's
//! receive time (`SCM_TIMESTAMPNS`, `crate::rxstamp`), posted beside the
//! completion ([`Cqe::kernel_ns`]); the buffer holds no prefix, unlike an
//! io_uring multishot `recvmsg`'s.
//!
//! # When the kernel stops writing
//! Here the kernel writes a provided buffer only inside a `recv` this
//! module calls, on this thread: once a call returned, nothing writes lent
//! memory, so [`EpollRing::quiesce`] only has to post the cancellations.
//! The contract of [`EpollRing::provide`] is `NetRing::provide`'s.
//!
//! # Syscalls
//! epoll and accept go through rustix. The engine names sockets by number
//! (as an io_uring request does), so each call borrows its fd through
//! [`sock`], whose contract is the engine's: a caller owns the sockets it
//! arms requests on until those requests complete. The unsafe left is the
//! receives' (raw pointers into lent buffers).
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::os::fd::{BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use rustc_hash::FxHashMap;
use rustix::event::epoll;
use rustix::event::Timespec;
use rustix::net::SocketFlags;

use crate::uring::poll::{self, Polled};
use crate::uring::{iovecs, send_now, sendmsg_now, Cqe, Features, RingSeg};
use std::ptr::NonNull;

/// Completion flags as io_uring posts them (include/uapi/linux/io_uring.h).
const CQE_F_BUFFER: u32 = 1 << 0;
const CQE_F_MORE: u32 = 1 << 1;
const CQE_F_BUF_MORE: u32 = 1 << 4;
const CQE_BUFFER_SHIFT: u32 = 16;

/// Readiness events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// Accepts per listener per readiness event: a burst of connections
/// does not starve the established ones of a turn.
const ACCEPT_BURST: usize = 64;
/// Receives per connection per readiness event (each fills at most the
/// rest of one provided entry): a stream that keeps the socket full moves
/// on to the next entry without another `epoll_wait`, and still leaves
/// the other connections their turn.
const RECV_BURST: usize = 4;
/// Bytes one draining receive may take (as the ring's sink).
const SINK_BYTES: usize = 64 << 10;

/// One provided entry: `[off, off + len)` of the image, `used` bytes of it
/// already filled.
#[derive(Debug)]
struct Provided {
    bid: u16,
    /// The lent bytes (`provide`'s contract).
    ptr: NonNull<u8>,
    len: u32,
    used: u32,
}

/// A send not yet completed: queued until the next submission, or tried
/// and waiting for room in the socket. Its iovecs are kept until it
/// completes (the memory they name is the caller's, under
/// `send_segments`' contract).
#[derive(Debug)]
struct PendingSend {
    ud: u64,
    iovs: Vec<libc::iovec>,
    /// Tried once and the socket had no room: epoll says when it has.
    waiting: bool,
}

/// The requests armed on one fd.
#[derive(Debug, Default)]
struct FdState {
    accept: Option<u64>,
    recv: Option<u64>,
    drain: Option<u64>,
    send: Option<PendingSend>,
    /// Events registered with epoll (0: not registered).
    registered: u32,
}

impl FdState {
    fn wanted(&self) -> u32 {
        let mut ev = 0;
        if self.accept.is_some() || self.recv.is_some() || self.drain.is_some() {
            ev |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if self.send.as_ref().is_some_and(|s| s.waiting) {
            ev |= libc::EPOLLOUT as u32;
        }
        ev
    }
    fn is_idle(&self) -> bool {
        self.wanted() == 0 && self.send.is_none()
    }
}

/// Provided packet buffers of the image, filled by non-blocking receives
/// when epoll says a socket is readable. Not `Send` (raw pointer), like
/// `NetRing`: a loop's requests are its thread's.
pub struct EpollRing {
    ep: OwnedFd,
    /// Provided entries in the order the kernel would take them.
    bufs: VecDeque<Provided>,
    buf_entries: u16,
    fds: FxHashMap<RawFd, FdState>,
    /// Which fd each armed request is on (cancellation by user_data).
    by_ud: FxHashMap<u64, RawFd>,
    /// Completions posted and not yet reaped.
    done: VecDeque<Cqe>,
    /// Sends queued since the last submission, in order: `(fd, user_data)`
    /// (see `send_segments`).
    queued: Vec<(RawFd, u64)>,
    /// Requests whose last completion has not been reaped.
    inflight: usize,
    fresh_sends: usize,
    sink: Vec<u8>,
    events: Vec<epoll::Event>,
}

impl std::fmt::Debug for EpollRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpollRing")
            .field("inflight", &self.inflight)
            .field("fds", &self.fds.len())
            .finish_non_exhaustive()
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl EpollRing {
    /// An epoll instance standing in for a ring of `buf_entries` provided
    /// entries (a power of two, at most 32768, as for `NetRing`).
    pub(crate) fn new(buf_entries: u16) -> io::Result<EpollRing> {
        if buf_entries == 0 || !buf_entries.is_power_of_two() || buf_entries > 32768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring entries must be a power of two up to 32768",
            ));
        }
        Ok(EpollRing {
            ep: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            bufs: VecDeque::new(),
            buf_entries,
            fds: FxHashMap::default(),
            by_ud: FxHashMap::default(),
            done: VecDeque::new(),
            queued: Vec::new(),
            inflight: 0,
            fresh_sends: 0,
            sink: Vec::new(),
            events: Vec::with_capacity(EVENTS),
        })
    }

    /// What the emulation does of the ring's features: incremental
    /// consumption always (entries are packed by successive receives);
    /// no task work to defer.
    pub fn features(&self) -> Features {
        Features {
            incremental: true,
            defer_taskrun: false,
        }
    }

    pub fn inflight(&self) -> usize {
        self.inflight
    }

    pub fn take_fresh_sends(&mut self) -> usize {
        std::mem::take(&mut self.fresh_sends)
    }

    /// Lend the `len` bytes at `ptr` as entry `bid`.
    ///
    /// # Safety
    /// The contract of `NetRing::provide`.
    pub(crate) unsafe fn provide(&mut self, bid: u16, ptr: NonNull<u8>, len: u32) {
        assert!(
            bid < self.buf_entries && len > 0,
            "provided buffer id outside the ring, or empty"
        );
        self.bufs.push_back(Provided {
            bid,
            ptr,
            len,
            used: 0,
        });
    }

    /// Register `fd`'s wanted events with epoll (or drop it when nothing
    /// is armed on it). A failed registration completes the fd's
    /// requests with the error.
    fn update(&mut self, fd: RawFd) {
        let Some(st) = self.fds.get_mut(&fd) else {
            return;
        };
        let want = st.wanted();
        if want == st.registered {
            // A queued send keeps its fd's state (nothing to register yet).
            if st.is_idle() {
                self.fds.remove(&fd);
            }
            return;
        }
        // SAFETY: `fd` has requests armed, or had until this call
        // (`sock`'s contract).
        let s = unsafe { sock(fd) };
        let flags = epoll::EventFlags::from_bits_retain(want);
        let data = epoll::EventData::new_u64(fd as u64);
        let r = match (st.registered, want) {
            // Failure is harmless: the fd is gone from the set either way.
            (_, 0) => epoll::delete(&self.ep, s).or(Ok(())),
            (0, _) => epoll::add(&self.ep, s, data, flags),
            _ => epoll::modify(&self.ep, s, data, flags).inspect_err(|_| {
                // Still registered with its old events: out of the set
                // before its requests end, so nothing of it is reported
                // after the fd may be closed and its number reused.
                let _ = epoll::delete(&self.ep, s);
            }),
        };
        if let Err(e) = r {
            st.registered = 0;
            self.fail_all(fd, e.raw_os_error());
            return;
        }
        st.registered = want;
        if st.is_idle() {
            self.fds.remove(&fd);
        }
    }

    /// Complete every request on `fd` with `-err`.
    fn fail_all(&mut self, fd: RawFd, err: i32) {
        let Some(st) = self.fds.get_mut(&fd) else {
            return;
        };
        let uds: Vec<u64> = [st.accept.take(), st.recv.take(), st.drain.take()]
            .into_iter()
            .flatten()
            .chain(st.send.take().map(|s| s.ud))
            .collect();
        for ud in uds {
            self.post_last(ud, -err, 0);
        }
        self.fds.remove(&fd);
    }

    fn post(&mut self, user_data: u64, result: i32, flags: u32) {
        self.done.push_back(Cqe {
            user_data,
            result,
            flags,
            kernel_ns: None,
        });
    }

    /// The last completion of a request: it is no longer armed.
    fn post_last(&mut self, ud: u64, result: i32, flags: u32) {
        self.by_ud.remove(&ud);
        self.post(ud, result, flags & !CQE_F_MORE);
    }

    fn arm(
        &mut self,
        fd: RawFd,
        ud: u64,
        set: impl FnOnce(&mut FdState) -> bool,
    ) -> io::Result<()> {
        if self.by_ud.contains_key(&ud) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a request with this user_data is armed",
            ));
        }
        let st = self.fds.entry(fd).or_default();
        if !set(st) {
            if st.is_idle() && st.registered == 0 {
                self.fds.remove(&fd);
            }
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a request of this kind is armed on this socket",
            ));
        }
        self.by_ud.insert(ud, fd);
        self.inflight += 1;
        self.update(fd);
        Ok(())
    }

    /// Multishot accept on listening socket `fd` (made non-blocking: the
    /// accepts run when epoll says a connection is waiting).
    pub fn accept_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        set_nonblocking(fd)?;
        self.arm(fd, user_data, |st| set_if_none(&mut st.accept, user_data))
    }

    /// Multishot receive on `fd` (a socket this ring accepted, so
    /// non-blocking) into the provided entries.
    pub fn recv_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        self.arm(fd, user_data, |st| {
            st.drain.is_none() && set_if_none(&mut st.recv, user_data)
        })
    }

    /// A single-shot receive whose bytes are thrown away (see
    /// `NetRing::recv_discard`).
    pub fn recv_discard(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        if self.sink.is_empty() {
            self.sink = vec![0; SINK_BYTES];
        }
        self.arm(fd, user_data, |st| {
            st.recv.is_none() && set_if_none(&mut st.drain, user_data)
        })
    }

    /// Cancel the request with `target` (its last completion is
    /// `-ECANCELED`), then post `user_data`'s own completion (0, or
    /// `-ENOENT` when nothing was armed under `target`).
    pub fn cancel(&mut self, target: u64, user_data: u64) -> io::Result<()> {
        self.inflight += 1;
        let Some(fd) = self.by_ud.get(&target).copied() else {
            self.post(user_data, -libc::ENOENT, 0);
            return Ok(());
        };
        if let Some(st) = self.fds.get_mut(&fd) {
            if st.accept == Some(target) {
                st.accept = None;
            }
            if st.recv == Some(target) {
                st.recv = None;
            }
            if st.drain == Some(target) {
                st.drain = None;
            }
            if st.send.as_ref().is_some_and(|s| s.ud == target) {
                st.send = None;
            }
        }
        self.post_last(target, -libc::ECANCELED, 0);
        self.update(fd);
        self.post(user_data, 0, 0);
        Ok(())
    }

    /// See `NetRing::send_now`.
    pub(crate) fn send_now(
        &self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
    ) -> io::Result<usize> {
        send_now(fd, head, segs)
    }

    /// Send on `fd`, as a ring does: queued now, tried at the next
    /// submission (`submit_and_wait`, `submit_and_poll`); what does not fit
    /// the socket buffer then waits for epoll to say there is room.
    /// Completes with the bytes the kernel took (possibly fewer than
    /// offered), as a ring send does. Contract: `NetRing::send_segments`'.
    ///
    /// Why queue instead of sending at once: a turn that answers many
    /// connections then sends its answers back to back after its commits,
    /// as the ring's one `io_uring_enter` does, instead of a `sendmsg`
    /// between each commit (each drags the loopback delivery and the
    /// peer's wake-up through the caches the next commit wants). A turn
    /// with one answer sends it at once instead (`send_now`, chosen by the
    /// loop).
    pub(crate) fn send_segments(
        &mut self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
        user_data: u64,
    ) -> io::Result<()> {
        if self.by_ud.contains_key(&user_data)
            || self.fds.get(&fd).is_some_and(|st| st.send.is_some())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a send with this user_data, or on this socket, is in flight",
            ));
        }
        let iovs: Vec<libc::iovec> = iovecs(head, segs).collect();
        self.fresh_sends += 1;
        self.inflight += 1;
        self.by_ud.insert(user_data, fd);
        self.fds.entry(fd).or_default().send = Some(PendingSend {
            ud: user_data,
            iovs,
            waiting: false,
        });
        self.queued.push((fd, user_data));
        Ok(())
    }

    /// Try the queued sends, in the order they were queued.
    fn submit(&mut self) {
        let mut queued = std::mem::take(&mut self.queued);
        for &(fd, ud) in &queued {
            let Some(st) = self.fds.get_mut(&fd) else {
                continue; // cancelled, its fd's state gone
            };
            let Some(s) = st.send.as_mut().filter(|s| s.ud == ud && !s.waiting) else {
                continue; // cancelled
            };
            match sendmsg_now(fd, &s.iovs) {
                Ok(n) => {
                    st.send = None;
                    self.post_last(ud, n as i32, 0);
                }
                // No room: kept (the memory it names stays the caller's
                // until the completion) until epoll says there is.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => s.waiting = true,
                Err(e) => {
                    st.send = None;
                    self.post_last(ud, -e.raw_os_error().unwrap_or(libc::EIO), 0);
                }
            }
            self.update(fd);
        }
        queued.clear();
        // The allocation is kept for the next turn's sends.
        self.queued = queued;
    }

    /// Wait until a completion is posted, at most `timeout` (rounded up to
    /// whole milliseconds, epoll's unit). A signal is not an error.
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.submit();
        if !self.done.is_empty() {
            return Ok(());
        }
        let ms = match timeout {
            None => -1,
            Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
        };
        self.pump(ms)
    }

    /// Look for a completion without sleeping, at most `budget`: each look
    /// is an `epoll_wait` that does not block (see `NetRing::submit_and_poll`
    /// for why a loop polls).
    pub fn submit_and_poll(&mut self, budget: Duration) -> io::Result<bool> {
        poll::poll(self, budget)
    }

    /// One `epoll_wait` (at most `timeout_ms`; 0: do not block), then the
    /// work of every ready fd, posting what completes.
    fn pump(&mut self, timeout_ms: i32) -> io::Result<()> {
        let timeout = (timeout_ms >= 0).then(|| Timespec {
            tv_sec: (timeout_ms / 1000).into(),
            tv_nsec: ((timeout_ms % 1000) * 1_000_000).into(),
        });
        self.events.clear();
        match epoll::wait(
            &self.ep,
            rustix::buffer::spare_capacity(&mut self.events),
            timeout.as_ref(),
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        // Taken out while `ready` borrows the ring; put back for the next
        // wait, so the list is allocated once.
        let events = std::mem::take(&mut self.events);
        for &epoll::Event { flags, data } in &events {
            let (fd, bits) = (data.u64() as RawFd, flags.bits());
            self.ready(fd, bits);
        }
        self.events = events;
        Ok(())
    }

    /// `fd` is ready for `bits`: run what is armed on it.
    fn ready(&mut self, fd: RawFd, bits: u32) {
        let Some(st) = self.fds.get(&fd) else {
            return;
        };
        let input =
            bits & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
        let output = bits & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
        let (accept, recv, drain, send) = (
            st.accept,
            st.recv,
            st.drain,
            // A queued send goes at the next submission, in its turn.
            st.send.as_ref().filter(|s| s.waiting).map(|s| s.ud),
        );
        if input {
            if let Some(ud) = accept {
                self.accept_ready(fd, ud);
            }
            if let Some(ud) = recv {
                self.recv_ready(fd, ud);
            }
            if let Some(ud) = drain {
                self.drain_ready(fd, ud);
            }
        }
        if output {
            if let Some(ud) = send {
                self.send_ready(fd, ud);
            }
        }
        self.update(fd);
    }

    fn accept_ready(&mut self, fd: RawFd, ud: u64) {
        for _ in 0..ACCEPT_BURST {
            // SAFETY: an accept is armed on `fd` (`sock`'s contract).
            let c = rustix::net::accept_with(
                unsafe { sock(fd) },
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            );
            let e = match c {
                Ok(c) => {
                    // The new fd is handed over in the completion, as a
                    // ring's accept does (`accepted_fd` takes ownership).
                    self.post(ud, c.into_raw_fd(), CQE_F_MORE);
                    continue;
                }
                Err(e) => e.raw_os_error(),
            };
            match e {
                libc::EAGAIN => return,
                // A connection reset while it waited, or a signal: the
                // next one.
                libc::EINTR | libc::ECONNABORTED => {}
                e => {
                    // As a multishot accept does on EMFILE and the like: the
                    // request ends with the error; the loop backs off and
                    // re-arms.
                    if let Some(st) = self.fds.get_mut(&fd) {
                        st.accept = None;
                    }
                    self.post_last(ud, -e, 0);
                    return;
                }
            }
        }
    }

    fn recv_ready(&mut self, fd: RawFd, ud: u64) {
        for _ in 0..RECV_BURST {
            let Some(b) = self.bufs.front() else {
                // As the kernel ends a multishot receive that finds the
                // buffer ring empty; the loop re-arms once it has entries.
                self.end_recv(fd, ud, -libc::ENOBUFS);
                return;
            };
            let (bid, room) = (b.bid, b.len - b.used);
            let mut iov = libc::iovec {
                // SAFETY: `[used, len)` of the entry is inside the lent
                // bytes (`provide`'s contract).
                iov_base: unsafe { b.ptr.as_ptr().add(b.used as usize) } as *mut libc::c_void,
                iov_len: room as usize,
            };
            // Room for one SCM_TIMESTAMPNS message, aligned for a cmsghdr.
            let mut control = [0u64; crate::rxstamp::CONTROL_BYTES.div_ceil(8)];
            // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: the iovec names provided space nothing else writes or
            // reads until a completion reports it filled (`provide`'s
            // contract), written by the kernel only during this call; the
            // control buffer is ours, alive for the call.
            let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
            match n {
                0 => {
                    self.end_recv(fd, ud, 0);
                    return;
                }
                n if n > 0 => {
                    let n = n as u32;
                    let b = self.bufs.front_mut().expect("looked at above");
                    b.used += n;
                    let mut flags = CQE_F_BUFFER | (bid as u32) << CQE_BUFFER_SHIFT | CQE_F_MORE;
                    if b.used < b.len {
                        flags |= CQE_F_BUF_MORE;
                    } else {
                        self.bufs.pop_front();
                    }
                    let clen = (msg.msg_controllen as usize).min(size_of_val(&control));
                    let kernel_ns = control_time(&control, clen);
                    self.done.push_back(Cqe {
                        user_data: ud,
                        result: n as i32,
                        flags,
                        kernel_ns,
                    });
                    if n < room {
                        // The socket is most likely empty: let epoll say.
                        return;
                    }
                }
                _ => match errno() {
                    libc::EAGAIN | libc::EINTR => return,
                    e => {
                        self.end_recv(fd, ud, -e);
                        return;
                    }
                },
            }
        }
    }

    fn end_recv(&mut self, fd: RawFd, ud: u64, result: i32) {
        if let Some(st) = self.fds.get_mut(&fd) {
            st.recv = None;
        }
        self.post_last(ud, result, 0);
    }

    fn drain_ready(&mut self, fd: RawFd, ud: u64) {
        // SAFETY: the sink is DRAM of ours, `SINK_BYTES` long; its bytes
        // are thrown away.
        let n = unsafe {
            libc::recv(
                fd,
                self.sink.as_mut_ptr() as *mut libc::c_void,
                self.sink.len(),
                libc::MSG_DONTWAIT,
            )
        };
        let result = match n {
            n if n >= 0 => n as i32,
            _ => match errno() {
                libc::EAGAIN | libc::EINTR => return,
                e => -e,
            },
        };
        if let Some(st) = self.fds.get_mut(&fd) {
            st.drain = None;
        }
        self.post_last(ud, result, 0);
    }

    fn send_ready(&mut self, fd: RawFd, ud: u64) {
        let Some(st) = self.fds.get_mut(&fd) else {
            return;
        };
        let Some(s) = st.send.as_ref() else { return };
        let result = match sendmsg_now(fd, &s.iovs) {
            Ok(n) => n as i32,
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) => return,
                Some(e) => -e,
                None => -libc::EIO,
            },
        };
        st.send = None;
        self.post_last(ud, result, 0);
    }

    /// Move the completions posted so far into `out`.
    pub fn reap(&mut self, out: &mut Vec<Cqe>) {
        for c in self.done.drain(..) {
            if c.flags & CQE_F_MORE == 0 {
                self.inflight = self.inflight.saturating_sub(1);
            }
            out.push(c);
        }
    }

    /// Cancel every request (each ends with `-ECANCELED`) and reap: no
    /// receive runs outside this module's calls, so from here on nothing
    /// writes lent memory. Always `true`.
    pub fn quiesce(&mut self, out: &mut Vec<Cqe>) -> bool {
        let fds: Vec<RawFd> = self.fds.keys().copied().collect();
        for fd in fds {
            if let Some(st) = self.fds.get_mut(&fd) {
                // Deregistered before the loop may close the fd.
                st.accept = None;
                st.recv = None;
                st.drain = None;
                st.send = None;
            }
            self.update(fd);
        }
        self.queued.clear();
        let uds: Vec<u64> = self.by_ud.keys().copied().collect();
        for ud in uds {
            self.post_last(ud, -libc::ECANCELED, 0);
        }
        self.reap(out);
        true
    }
}

impl Polled for EpollRing {
    fn queued(&mut self) -> bool {
        !self.queued.is_empty()
    }
    fn posted(&mut self) -> bool {
        !self.done.is_empty()
    }
    /// Readiness is only found by asking: every look is an enter.
    fn flagged(&mut self) -> bool {
        true
    }
    fn enter(&mut self) -> io::Result<()> {
        self.submit();
        self.pump(0)
    }
}

/// The receive time in the first `len` bytes of a `recvmsg`'s control
/// buffer.
fn control_time(control: &[u64], len: usize) -> Option<u64> {
    // The words as the kernel wrote them, as bytes (no allocation).
    let mut bytes = [0u8; crate::rxstamp::CONTROL_BYTES.div_ceil(8) * 8];
    for (d, w) in bytes.chunks_exact_mut(8).zip(control) {
        d.copy_from_slice(&w.to_ne_bytes());
    }
    crate::rxstamp::timestamp_ns(&bytes[..len.min(bytes.len())])
}

/// Arm `slot` with `ud` unless something is armed there already.
fn set_if_none(slot: &mut Option<u64>, ud: u64) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(ud);
    true
}

/// The socket `fd` names, borrowed for one syscall through rustix.
///
/// # Safety
/// `fd` is open for the call. The engine keeps that because its callers
/// do (the contract of the requests on [`NetRing`](super::uring::NetRing)
/// that this ring emulates): the loop owns each socket it arms a request
/// on until every request on it has completed and been reaped, and the
/// engine borrows an fd only while a request is armed on it or in the
/// call that ends its last one.
unsafe fn sock<'a>(fd: RawFd) -> BorrowedFd<'a> {
    // SAFETY: the caller's contract above.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: the caller is arming a request on `fd` (`sock`'s contract).
    rustix::io::ioctl_fionbio(unsafe { sock(fd) }, true)?;
    Ok(())
}

#[cfg(test)]
mod tests;
