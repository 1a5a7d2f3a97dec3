//! pktfs's network I/O engines, for netpath's event loops.
//!
//! - [`uring`]: an io_uring per loop thread with a provided-buffer ring
//!   whose entries are runs of the image's free packet buffers (the kernel
//!   picks one for every receive; the completion says which it filled);
//! - [`epoll`]: the same requests carried out with epoll readiness and
//!   non-blocking syscalls, where io_uring is not usable;
//! - [`netio`]: one type over both;
//! - [`rxring`]: [`RxRing`], the safe face: it owns the reservations it
//!   lends ([`pktfs_fs::LentRx`]), turns completions into held ranges of
//!   received bytes, and keeps the bytes of every send alive until the
//!   kernel is done with them;
//! - `rxstamp`: the kernel's receive time (SO_TIMESTAMPNS) read from a
//!   receive's control bytes, which both engines hand on with every
//!   receive.
//!
//! # Where the unsafe is, and why it is sound
//! pktfs-fs lends image memory through [`pktfs_fs::LentRx`]: a reservation
//! whose unfilled bytes no safe code can touch while it is lent, and whose
//! one `unsafe fn`, `mark_filled`, says which bytes the kernel has
//! finished writing. This crate's unsafe is the other half: handing those
//! bytes (and the bytes of sends) to the kernel. `uring` and `epoll` take
//! raw pointers under a contract stated on each `unsafe fn`; `rxring` is
//! the only caller and keeps it (a reservation is dropped only after the
//! kernel is done with its entry, or after every request was cancelled and
//! reaped; otherwise it is leaked). The engines name sockets by raw fd
//! (the loop's table owns them, and an io_uring request takes a raw fd).
//! Plain syscalls (epoll, accept, non-blocking mode) go through rustix,
//! borrowing the fd under one stated contract (`epoll::sock`); libc is
//! called only where a raw pointer into lent memory is the point
//! (`recvmsg`, `recv` and `sendmsg` on image bytes).

pub mod epoll;
pub mod netio;
pub mod rxring;
mod rxstamp;
pub mod uring;

pub use netio::Backend as RingBackend;
pub use rxring::{
    probe, RingEvent, RxData, RxRing, RxRingConfig, RxRingStats, SendStart, TxMsg, TxPos,
};
