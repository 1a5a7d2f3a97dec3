//! The event loops' I/O backend: an io_uring ([`NetRing`]) where the
//! kernel allows it, else epoll carrying out the same requests
//! ([`EpollRing`]). One type for `RxRing` to hold, so the ring's
//! ownership of lent packet buffers, the loop and its sessions are the
//! same code on both (why: docs/NETPATH.md, "The epoll fallback").

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use std::ptr::NonNull;

use crate::epoll::EpollRing;
use crate::uring::{Cqe, Features, NetRing, RingSeg};

/// Which backend a ring runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// io_uring: multishot requests, a provided-buffer ring the kernel
    /// picks from, one `io_uring_enter` per turn.
    #[default]
    Uring,
    /// epoll readiness and non-blocking syscalls on the loop's thread.
    Epoll,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Uring => "io_uring",
            Backend::Epoll => "epoll",
        })
    }
}

/// A ring of either backend; every method is the backend's own.
#[derive(Debug)]
pub enum NetIo {
    Uring(NetRing),
    Epoll(EpollRing),
}

macro_rules! each {
    ($s:expr, $r:ident => $e:expr) => {
        match $s {
            NetIo::Uring($r) => $e,
            NetIo::Epoll($r) => $e,
        }
    };
}

impl NetIo {
    /// A ring of `backend` (`sq_entries` and `incremental` only mean
    /// something to io_uring).
    pub(crate) fn new(
        backend: Backend,
        sq_entries: u32,
        buf_entries: u16,
        incremental: bool,
    ) -> io::Result<NetIo> {
        Ok(match backend {
            Backend::Uring => NetIo::Uring(NetRing::new(sq_entries, buf_entries, incremental)?),
            Backend::Epoll => NetIo::Epoll(EpollRing::new(buf_entries)?),
        })
    }
    pub fn backend(&self) -> Backend {
        match self {
            NetIo::Uring(_) => Backend::Uring,
            NetIo::Epoll(_) => Backend::Epoll,
        }
    }
    pub fn features(&self) -> Features {
        each!(self, r => r.features())
    }
    pub fn inflight(&self) -> usize {
        each!(self, r => r.inflight())
    }
    pub fn take_fresh_sends(&mut self) -> usize {
        each!(self, r => r.take_fresh_sends())
    }
    /// # Safety
    /// `NetRing::provide`'s contract.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn provide(&mut self, bid: u16, ptr: NonNull<u8>, len: u32) {
        // SAFETY: the caller's promise is the backend's contract.
        each!(self, r => unsafe { r.provide(bid, ptr, len) })
    }
    pub fn accept_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        each!(self, r => r.accept_multi(fd, user_data))
    }
    pub fn recv_multi(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        each!(self, r => r.recv_multi(fd, user_data))
    }
    /// io_uring only (`NetRing::eat_tail`); epoll has no tails to eat.
    pub fn eat_tail(&mut self, max: u32, user_data: u64) -> io::Result<()> {
        match self {
            NetIo::Uring(r) => r.eat_tail(max, user_data),
            NetIo::Epoll(_) => Err(io::ErrorKind::Unsupported.into()),
        }
    }
    pub fn recv_discard(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        each!(self, r => r.recv_discard(fd, user_data))
    }
    pub fn cancel(&mut self, target: u64, user_data: u64) -> io::Result<()> {
        each!(self, r => r.cancel(target, user_data))
    }
    pub(crate) fn send_now(
        &self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
    ) -> io::Result<usize> {
        each!(self, r => r.send_now(fd, head, segs))
    }
    /// Contract: `NetRing::send_segments`'.
    pub(crate) fn send_segments(
        &mut self,
        fd: RawFd,
        head: Option<&[u8]>,
        segs: impl IntoIterator<Item = RingSeg>,
        user_data: u64,
    ) -> io::Result<()> {
        each!(self, r => r.send_segments(fd, head, segs, user_data))
    }
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        each!(self, r => r.submit_and_wait(timeout))
    }
    pub fn submit_and_poll(&mut self, budget: Duration) -> io::Result<bool> {
        each!(self, r => r.submit_and_poll(budget))
    }
    pub fn reap(&mut self, out: &mut Vec<Cqe>) {
        each!(self, r => r.reap(out))
    }
    pub fn quiesce(&mut self, out: &mut Vec<Cqe>) -> bool {
        each!(self, r => r.quiesce(out))
    }
}
