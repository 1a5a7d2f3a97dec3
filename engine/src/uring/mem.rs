//! The memory an io_uring owns besides the image: the provided-buffer
//! ring's entries, the sink of draining receives, and the iovec lists and
//! message headers of sends in flight. Each lives until the ring has
//! confirmed the kernel is done with it (see `NetRing::drop`).

use std::io;

use io_uring::types;

/// The shared memory of a provided-buffer ring (an array of
/// `io_uring_buf`, page aligned as the kernel requires).
pub(super) struct BufRingMem {
    pub(super) ptr: *mut types::BufRingEntry,
    pub(super) entries: u16,
}

impl BufRingMem {
    fn layout(entries: u16) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(
            entries as usize * size_of::<types::BufRingEntry>(),
            4096,
        )
        .expect("buffer ring layout")
    }
    pub(super) fn new(entries: u16) -> io::Result<BufRingMem> {
        // SAFETY: the layout has a non-zero size (entries >= 1, checked by
        // the caller) and a valid alignment.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout(entries)) };
        if ptr.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        Ok(BufRingMem {
            ptr: ptr as *mut types::BufRingEntry,
            entries,
        })
    }
}

impl Drop for BufRingMem {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; freed only here, and
        // only after the ring stopped using it (see `NetRing::drop`).
        unsafe { std::alloc::dealloc(self.ptr as *mut u8, Self::layout(self.entries)) };
    }
}

/// Where receives that only drain a socket land (a connection lingering
/// after an early answer while no image buffer is free): DRAM the kernel
/// writes and nothing reads, shared by every draining receive (their bytes
/// are thrown away, so overlapping writes do not matter). Freed with the
/// ring, and only once the ring is quiesced.
pub(super) struct Sink {
    pub(super) ptr: *mut u8,
}

/// Bytes one draining receive may take.
pub(super) const SINK_BYTES: usize = 64 << 10;

impl Sink {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(SINK_BYTES, 64).expect("sink layout")
    }
    pub(super) fn new() -> io::Result<Sink> {
        // SAFETY: a non-zero size and a valid alignment.
        let ptr = unsafe { std::alloc::alloc(Self::layout()) };
        if ptr.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        Ok(Sink { ptr })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; dropped only after
        // the ring confirmed no request is in flight (`NetRing::drop`).
        unsafe { std::alloc::dealloc(self.ptr, Self::layout()) };
    }
}

/// What a sendmsg in flight names: kept alive until its completion, then
/// kept for the next one (`NetRing::spare_keeps`), so that a send costs no
/// allocation once the loop is warm. A one-iovec send needs none of it
/// (it goes as `IORING_OP_SEND`).
pub(super) struct SendKeep {
    /// Its heap buffer must not move while the send is in flight: filled
    /// before the SQE is pushed, untouched until the completion.
    pub(super) iovs: Vec<libc::iovec>,
    pub(super) msg: Box<libc::msghdr>,
}

impl SendKeep {
    pub(super) fn new() -> Self {
        SendKeep {
            iovs: Vec::new(),
            // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
            msg: Box::new(unsafe { std::mem::zeroed() }),
        }
    }
}

pub(super) fn spare_keep(spares: &mut Vec<SendKeep>, kept: Option<SendKeep>) {
    if let Some(k) = kept {
        if spares.len() < SPARE_KEEPS_MAX && k.iovs.capacity() <= SPARE_IOVS_MAX {
            spares.push(k);
        }
    }
}

/// Kept `SendKeep`s at most: a burst of sends on thousands of connections
/// does not stay allocated for ever.
const SPARE_KEEPS_MAX: usize = 256;
/// A kept iovec list longer than this (a large GET's) is not kept.
const SPARE_IOVS_MAX: usize = 64;
