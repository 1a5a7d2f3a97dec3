//! Waking a loop from another thread: a connection's tiered window was
//! fetched (`crate::transmit::fetch`), or a place in the fetch queue freed.
//!
//! A loop waits for completions of its ring, so a wake-up must be one: the
//! loop keeps a draining receive ([`pktfs_engine::RxRing::recv_discard`]) armed on
//! one end of a socket pair, and a waker sends a byte on the other. Why a
//! socket pair rather than an eventfd: the ring's existing draining
//! receive waits on it on both backends (io_uring and epoll), so no new
//! ring operation is needed. Wakes are coalesced: one byte until the loop
//! took the list of connections to wake, whatever their number.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// The ring tag of the wake-up receive: above every connection's tag
/// (those carry a 24-bit generation over a 32-bit slot, and a slot of
/// 2^32 - 1 is never reached).
pub(crate) const TAG: u64 = pktfs_engine::rxring::MAX_TAG;

/// A loop's wake-up: the socket pair and who asked.
#[derive(Debug)]
pub(crate) struct LoopWake {
    tx: UnixStream,
    rx: UnixStream,
    /// Connection tags to wake, and whether a byte is on its way.
    ready: Mutex<(Vec<u64>, bool)>,
}

/// Wakes one connection of one loop ([`crate::loops::Session::on_wake`]).
/// A wake of a connection that closed meanwhile is ignored (its tag's
/// generation does not match any more).
#[derive(Clone, Debug)]
pub struct Waker {
    w: Arc<LoopWake>,
    tag: u64,
}

impl Waker {
    pub fn wake(&self) {
        let mut r = self.w.ready.lock().unwrap_or_else(|e| e.into_inner());
        r.0.push(self.tag);
        if !r.1 {
            r.1 = true;
            // Non-blocking: a full socket buffer means bytes are waiting
            // already, and the loop takes the whole list on any of them.
            let _ = rustix::net::send(
                &self.w.tx,
                &[1u8],
                rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
            );
        }
    }
}

impl LoopWake {
    pub(crate) fn new() -> io::Result<Arc<LoopWake>> {
        let (tx, rx) = UnixStream::pair()?;
        Ok(Arc::new(LoopWake {
            tx,
            rx,
            ready: Mutex::default(),
        }))
    }

    /// A waker of the connection with ring tag `tag`.
    pub(crate) fn waker(self: &Arc<Self>, tag: u64) -> Waker {
        Waker {
            w: self.clone(),
            tag,
        }
    }

    /// The end the loop receives on.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }

    /// The tags woken since the last call (into `out`); later wakes send
    /// a byte again.
    pub(crate) fn take(&self, out: &mut Vec<u64>) {
        let mut r = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        r.1 = false;
        out.append(&mut r.0);
    }
}
