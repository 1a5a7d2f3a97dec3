//! The mapping and the persistence primitives. All of pktfs-fs's `unsafe`
//! lives in this module (the crate denies `unsafe_code` everywhere else),
//! but for `LentRx::mark_filled`, an `unsafe fn` whose promise is its
//! caller's; the network engines' own is in pktfs-engine.
//!
//! Persistence is per thread, as `sfence` is: a `flush` is durable after
//! the same thread's next `fence`, which issues the thread's queued
//! write-backs first (`writeback.rs` says why they wait for it).
//!
//! Two backends share one interface, [`Pm`]:
//! - **real**: an image file mapped with memmap2 (DAX file, /dev/dax, a file
//!   on /dev/shm, or any file), persisted by clwb+sfence, msync, or fence
//!   only (eADR);
//! - **recording**: heap memory whose every store, flushed line and fence is
//!   logged, so tests can build the image a crash would leave at any fence
//!   ([`recording::CrashLog`]).
//!
//! # Soundness contract
//! `Pm` is a byte region shared by many threads (`Sync`). It does not lock,
//! so the methods that read or write arbitrary bytes through `&Pm`
//! (`slice`, `read`, `read_u64`, `write`, `write_nt`, `zero`, `zero_nt`,
//! `store_u64`, `publish_u64`, `recv_into`, `recv_timestamped`,
//! `send_segments`, `file`) are `pub(crate)`: their only callers are the
//! Volume and its typed handles, which guarantee that no two threads
//! write the same bytes at once, that no thread reads (or holds a borrow
//! of) bytes another is writing, and that words read while they may
//! change are accessed only through the atomic `read_u64`/`store_u64`.
//!
//! Outside the crate, raw access needs exclusive access, proved by the
//! borrow checker: [`Pm::exclusive`] takes `&mut Pm` and returns an
//! [`ExclusivePm`] (reads through `&`, writes through `&mut`; `split_at`
//! for disjoint windows on several threads). Receiving into and sending
//! from the image goes through `RxBuf` and `TxHold` (fs/src/volume/rx.rs and
//! txhold.rs); an I/O engine (pktfs-engine) that lends image memory to the
//! kernel gets its address from a `LentRx` and says what the kernel filled
//! through `LentRx::mark_filled`, the one `unsafe fn` fs exports.
//! What stays safe on `&Pm` changes no byte: length and mode, flush,
//! fence, persist, msync, sendfile, the recording log.
//!
//! Both backends' base is page-aligned (a mapping; the heap backend's
//! `alloc_zeroed` with a page `Layout`), which the `AtomicU64` casts rely
//! on. Not covered: another process writing the image file while it is
//! mapped (the image lock keeps pktfs processes out; `MapOptions::no_lock`
//! gives that up for a read-only look).
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod arch;
mod error;
mod exclusive;
pub mod machine;
mod mode;
pub mod net;
mod open;
pub mod recording;
mod sigbus;
pub mod space;
mod tracker;
mod writeback;
pub use writeback::FlushThread;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub use arch::FlushInsn;
pub use error::MediaError;
pub use exclusive::ExclusivePm;
pub use mode::{persist_names, PersistChoice, PersistMode, Persistence};
pub use open::{check_path_kind, MapOptions};
use recording::{CrashLog, Recorder};

enum Backing {
    Mapped {
        _map: memmap2::MmapRaw,
        file: File,
        path: PathBuf,
    },
    /// Heap memory (recording backend and in-memory images). Kept as a raw
    /// allocation so shared `&self` writes through `base` are sound.
    Heap { ptr: *mut u8, len: usize },
}

/// Alignment of the heap backend's allocation: a page, like a mapping's
/// base, so `read_u64`/`store_u64` may treat any 8-aligned offset as an
/// aligned `AtomicU64` and cache-line arithmetic holds on both backends.
const HEAP_ALIGN: usize = 4096;

fn heap_layout(len: usize) -> std::alloc::Layout {
    // A zero-sized allocation is not allowed; such a Pm has len 0 and
    // every access is refused by `check`.
    std::alloc::Layout::from_size_align(len.max(1), HEAP_ALIGN).expect("heap image layout")
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Heap { ptr, len } = *self {
            // SAFETY: ptr came from `alloc_zeroed(heap_layout(len))` in
            // `heap()`, and this is the only place that frees it.
            unsafe { std::alloc::dealloc(ptr, heap_layout(len)) };
        }
    }
}

/// A persistent-memory region and its persistence primitives.
pub struct Pm {
    base: *mut u8,
    len: usize,
    mode: PersistMode,
    insn: FlushInsn,
    /// Names the mapping for the SIGBUS handler; dropped before `backing`
    /// unmaps it (fields drop in order).
    _sigbus: Option<sigbus::Registration>,
    backing: Backing,
    recorder: Option<Mutex<Recorder>>,
    tracker: tracker::Tracker,
    /// Small write-backs queued until the flushing thread's next fence
    /// (`writeback.rs` says why).
    writebacks: writeback::WriteBacks,
    read_only: bool,
    /// Background pre-fault of the mapping; joined before the mapping goes
    /// (or by `wait_populated`).
    populate: Mutex<Option<Populate>>,
    /// Set when a persist failed (msync error): the device may have lost
    /// writes, so nothing may be acknowledged any more (see the Volume's
    /// fail-stop).
    persist_failed: std::sync::OnceLock<String>,
    /// Test hook: the next flush fails as a failed msync would.
    inject_persist_failure: std::sync::atomic::AtomicBool,
    /// Bytes a writable open allocated because the image was sparse.
    completed_bytes: u64,
}

// SAFETY: `Pm` is a handle on a shared memory region; its methods never hand
// out overlapping `&mut` access and the Volume's locks serialise conflicting
// access to the same bytes (see the module docs). The raw pointer does not
// tie the region to a thread.
unsafe impl Send for Pm {}
// SAFETY: as above: shared access from many threads is the design, and the
// only word-sized racing accesses go through atomics.
unsafe impl Sync for Pm {}

/// The pre-fault thread and its stop flag.
type Populate = (
    std::thread::JoinHandle<()>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

impl Pm {
    /// Wait until the background pre-fault of the mapping (writable opens
    /// start one unless `MapOptions::no_populate`) has finished; at once
    /// when there is none. Why: while it runs it zeroes pages on another
    /// core, and copies into pages it has not reached yet take a fault
    /// each; a benchmark that starts measuring before it ends measures
    /// that too.
    pub fn wait_populated(&self) {
        let p = self
            .populate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((h, _stop)) = p {
            let _ = h.join();
        }
    }
}

impl Drop for Pm {
    fn drop(&mut self) {
        // Write back what threads flushed and never fenced, while the
        // mapping is still there (the fields, `backing` among them, drop
        // after this).
        let (base, insn) = (self.base, self.insn);
        self.writebacks.issue_all(|o, l| {
            // SAFETY: queued offsets were checked against the mapping when
            // they were queued, and the mapping lives until `backing` drops.
            unsafe { arch::flush_lines(insn, base.add(o), l) }
        });
        arch::sfence();
        let p = self.populate.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some((h, stop)) = p.take() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for Pm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pm")
            .field("len", &self.len)
            .field("mode", &self.mode)
            .field("recording", &self.recorder.is_some())
            .finish()
    }
}

impl Pm {
    /// A page-aligned heap copy of `image` (a `Box<[u8]>` is only
    /// byte-aligned).
    fn heap(image: Vec<u8>) -> (*mut u8, usize, Backing) {
        let len = image.len();
        let layout = heap_layout(len);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: ptr is a fresh allocation of at least `len` bytes that
        // nothing else references; `image` is a separate allocation.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), ptr, len) };
        (ptr, len, Backing::Heap { ptr, len })
    }

    /// An in-memory image (no persistence to speak of: persists are no-ops
    /// apart from the debug tracker). For tests and for checking crash images.
    pub fn from_bytes(image: Vec<u8>) -> Pm {
        let (base, len, backing) = Self::heap(image);
        Pm {
            base,
            len,
            mode: PersistMode::Eadr,
            insn: FlushInsn::None,
            _sigbus: None,
            backing,
            recorder: None,
            tracker: tracker::Tracker::default(),
            writebacks: Default::default(),
            read_only: false,
            populate: Mutex::new(None),
            persist_failed: Default::default(),
            inject_persist_failure: Default::default(),
            completed_bytes: 0,
        }
    }

    /// The recording backend: starts from `image` and logs every store,
    /// flushed line and fence from here on.
    pub fn recording(image: Vec<u8>) -> Pm {
        let rec = Recorder::new(image.clone());
        let mut pm = Pm::from_bytes(image);
        pm.mode = PersistMode::Clwb;
        pm.recorder = Some(Mutex::new(rec));
        pm
    }

    /// The log so far (recording backend only).
    pub fn crash_log(&self) -> Option<CrashLog> {
        self.recorder
            .as_ref()
            .map(|r| r.lock().unwrap_or_else(|e| e.into_inner()).log())
    }

    /// Put a marker (e.g. "operation 7 starts") into the recording log.
    pub fn mark(&self, tag: u64) {
        if let Some(r) = &self.recorder {
            r.lock().unwrap_or_else(|e| e.into_inner()).mark(tag);
        }
    }

    /// A copy of the whole region as it is now (cache view). `&mut self`:
    /// nothing else can be writing it (see [`Pm::exclusive`]).
    pub fn snapshot(&mut self) -> Vec<u8> {
        self.exclusive().snapshot()
    }

    /// Exclusive access to the whole region, for a holder that owns the
    /// `Pm` (fsck, tools, tests): plain reads and writes of any byte,
    /// sound because nothing else can reach the region while the
    /// `&mut Pm` borrow lives.
    pub fn exclusive(&mut self) -> ExclusivePm<'_> {
        ExclusivePm::whole(self)
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn mode(&self) -> PersistMode {
        self.mode
    }
    pub fn flush_insn(&self) -> FlushInsn {
        self.insn
    }
    /// The mode and write-back instruction together, as the tools print it.
    pub fn persistence(&self) -> Persistence {
        Persistence {
            mode: self.mode,
            insn: self.insn,
        }
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    /// Non-zero when opening found the image sparse and allocated its holes
    /// (roughly how many bytes).
    pub fn completed_bytes(&self) -> u64 {
        self.completed_bytes
    }
    /// The image file, for `sendfile()` (real backend only). Crate-internal:
    /// a write through the file would change mapped bytes behind the
    /// Volume's back.
    pub(crate) fn file(&self) -> Option<&File> {
        match &self.backing {
            Backing::Mapped { file, .. } => Some(file),
            Backing::Heap { .. } => None,
        }
    }
    pub fn path(&self) -> Option<&Path> {
        match &self.backing {
            Backing::Mapped { path, .. } => Some(path),
            Backing::Heap { .. } => None,
        }
    }

    #[inline]
    #[track_caller]
    fn check(&self, off: u64, len: usize) -> usize {
        let end = off.checked_add(len as u64);
        assert!(
            end.is_some_and(|e| e <= self.len as u64),
            "pm access {off}+{len} outside the {}-byte region",
            self.len
        );
        off as usize
    }

    #[inline]
    #[track_caller]
    fn check_writable(&self) {
        assert!(!self.read_only, "write to a read-only mapping");
    }

    /// The address of `[off, off+len)` (writable; in bounds), for memory
    /// lent to the kernel (`LentRx::spare_ptr`). Only an address: what may
    /// be done through it is the lender's contract.
    pub(crate) fn ptr_at(&self, off: u64, len: usize) -> std::ptr::NonNull<u8> {
        self.check_writable();
        let o = self.check(off, len);
        // SAFETY: in bounds of the region (checked), which is not null.
        std::ptr::NonNull::new(unsafe { self.base.add(o) }).expect("a mapping is not at 0")
    }

    /// The kernel wrote `[off, off+len)` (a receive into lent memory):
    /// account the bytes as stored, like `recv_into` does, so the flush
    /// tracker and the recording backend see them.
    pub(crate) fn note_received(&self, off: u64, len: u64) {
        self.check(off, len as usize);
        self.tracker.dirty(off, len);
        if let Some(r) = &self.recorder {
            let bytes = self.slice(off, len as usize).to_vec();
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .store(off, &bytes);
        }
    }

    /// Borrow `len` bytes at `off`. The Volume's locks guarantee nobody
    /// writes them while the borrow lives (crate-internal: outside the
    /// crate, see [`ExclusivePm::slice`]).
    #[inline]
    pub(crate) fn slice(&self, off: u64, len: usize) -> &[u8] {
        let o = self.check(off, len);
        // SAFETY: o..o+len is inside the region (checked), which lives as long
        // as &self; by the module's concurrency contract no thread writes
        // these bytes while the shared borrow is alive.
        unsafe { std::slice::from_raw_parts(self.base.add(o), len) }
    }

    /// Copy bytes out.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) {
        out.copy_from_slice(self.slice(off, out.len()));
    }

    /// Atomic aligned 8-byte load (link words may be published concurrently).
    /// Crate-internal: sound only while every concurrent access to the word
    /// is atomic, which the Volume keeps (a record's words are written
    /// plainly only while nothing reaches it).
    #[inline]
    pub(crate) fn read_u64(&self, off: u64) -> u64 {
        let o = self.check(off, 8);
        assert!(o.is_multiple_of(8), "unaligned link word at {off}");
        // SAFETY: o is 8-aligned and in bounds, and the region's base is page
        // aligned (a mapping, or the heap backend's `HEAP_ALIGN` allocation), so the address is a valid, aligned AtomicU64 location for
        // the region's lifetime; all concurrent access to link words is atomic.
        let a = unsafe { &*(self.base.add(o) as *const AtomicU64) };
        u64::from_le(a.load(Ordering::Acquire))
    }

    /// Plain (cached) stores. Not durable until [`Pm::persist`].
    pub(crate) fn write(&self, off: u64, data: &[u8]) {
        self.check_writable();
        let o = self.check(off, data.len());
        // SAFETY: in bounds (checked), writable (checked), and by the
        // concurrency contract no other thread accesses these bytes now.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(o), data.len()) };
        self.tracker.dirty(off, data.len() as u64);
        if let Some(r) = &self.recorder {
            r.lock().unwrap_or_else(|e| e.into_inner()).store(off, data);
        }
    }

    /// Copy for large payloads: non-temporal stores (the lines need no
    /// write-back afterwards), falling back to `write` + flush where the mode
    /// or size makes streaming pointless. Durable after the next fence.
    pub(crate) fn write_nt(&self, off: u64, data: &[u8]) {
        const NT_MIN: usize = 4096;
        if data.len() < NT_MIN || self.mode != PersistMode::Clwb || self.recorder.is_some() {
            self.write(off, data);
            self.flush(off, data.len() as u64);
            return;
        }
        self.check_writable();
        let o = self.check(off, data.len());
        // SAFETY: in bounds, writable, not overlapping `data` (which is not in
        // the mapping's written range by the concurrency contract), and not
        // accessed by another thread.
        unsafe { arch::copy_nt(self.insn, self.base.add(o), data) };
        self.tracker.dirty(off, data.len() as u64);
        self.tracker.flushed(off, data.len() as u64);
    }

    /// Fill with zeros (cached stores).
    pub(crate) fn zero(&self, off: u64, len: u64) {
        const CHUNK: [u8; 4096] = [0; 4096];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(4096);
            self.write(off + done, &CHUNK[..n as usize]);
            done += n;
        }
    }

    /// Zero a range with non-temporal stores (flushed; durable after the
    /// next fence) and return the CRC32C of the zeros.
    pub(crate) fn zero_nt(&self, off: u64, len: u64) -> u32 {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let mut done = 0;
        let mut crc = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len() as u64) as usize;
            self.write_nt(off + done, &ZEROS[..n]);
            crc = pktfs_layout::crc32c_append(crc, &ZEROS[..n]);
            done += n as u64;
        }
        crc
    }

    /// Write `[off, off+len)` back: durable after this thread's next
    /// fence. A small range is queued and written back by that fence
    /// (`writeback.rs`: a locked instruction after a write-back waits for
    /// it, and an upload takes many locks between its flushes and its
    /// fence).
    pub fn flush(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let o = self.check(off, len as usize);
        match self.mode {
            PersistMode::Clwb if self.recorder.is_none() => {
                self.writebacks.queue(o, len as usize, |o, l| {
                    // SAFETY: o..o+l is inside the mapping (checked when
                    // queued) and the mapping lives as long as `self`.
                    unsafe { arch::flush_lines(self.insn, self.base.add(o), l) }
                });
            }
            PersistMode::Msync => {
                let page = 4096usize;
                let start = o / page * page;
                let end = (o + len as usize).div_ceil(page) * page;
                let end = end.min(self.len);
                // SAFETY: start..end is page aligned and inside the mapping.
                let rc = unsafe {
                    libc::msync(
                        self.base.add(start) as *mut libc::c_void,
                        end - start,
                        libc::MS_SYNC,
                    )
                };
                if rc != 0 {
                    self.persist_failed(format!("msync: {}", std::io::Error::last_os_error()));
                }
            }
            _ => {}
        }
        // A plain load first: a locked swap on every flush would be a
        // locked instruction right after the write-backs, which x86 orders
        // behind them (CLFLUSHOPT/CLWB are ordered with locked RMWs), so it
        // made each flush wait for its lines like a fence, on the hot path
        // of every upload, for a test hook.
        if self
            .inject_persist_failure
            .load(std::sync::atomic::Ordering::Acquire)
            && self
                .inject_persist_failure
                .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            self.persist_failed("injected persistence failure (test hook)".to_string());
        }
        self.tracker.flushed(off, len);
        if let Some(r) = &self.recorder {
            r.lock().unwrap_or_else(|e| e.into_inner()).flush(off, len);
        }
    }

    /// A persist failed: the device may have lost writes. Record it (the
    /// Volume stops serving) and unwind the operation before it can reach
    /// its commit point and acknowledge data that is not durable.
    #[cold]
    fn persist_failed(&self, why: String) -> ! {
        let _ = self.persist_failed.set(why.clone());
        panic!("persisting to the image failed: {why}");
    }

    /// Why persisting failed, once it has.
    #[inline]
    pub fn persist_failure(&self) -> Option<&str> {
        self.persist_failed.get().map(String::as_str)
    }

    /// Test hook: make the next flush fail as a failed msync would.
    #[doc(hidden)]
    pub fn inject_persist_failure(&self) {
        self.inject_persist_failure
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Order: everything this thread flushed before is durable before
    /// anything after (its queued write-backs are issued first).
    pub fn fence(&self) {
        if self.mode == PersistMode::Clwb {
            self.writebacks.issue_mine(|o, l| {
                // SAFETY: o..o+l is inside the mapping (checked when
                // queued) and the mapping lives as long as `self`.
                unsafe { arch::flush_lines(self.insn, self.base.add(o), l) }
            });
        }
        if self.mode != PersistMode::Msync {
            arch::sfence();
        }
        self.tracker.fenced();
        if let Some(r) = &self.recorder {
            r.lock().unwrap_or_else(|e| e.into_inner()).fence();
        }
    }

    /// Make `[off, off+len)` durable: flush its lines, then fence.
    pub fn persist(&self, off: u64, len: u64) {
        self.flush(off, len);
        self.fence();
    }

    /// Atomic aligned 8-byte store of a link word, not yet durable: used to
    /// apply journalled stores, which are persisted together afterwards.
    pub(crate) fn store_u64(&self, off: u64, value: u64) {
        self.check_writable();
        let o = self.check(off, 8);
        assert!(o.is_multiple_of(8), "unaligned store at {off}");
        // SAFETY: aligned and in bounds (checked); see `read_u64`.
        let a = unsafe { &*(self.base.add(o) as *const AtomicU64) };
        a.store(value.to_le(), Ordering::Release);
        if let Some(r) = &self.recorder {
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .store(off, &value.to_le_bytes());
        }
        self.tracker.dirty(off, 8);
    }

    /// Add `by` to a live word (`pktfs_layout::live`) and return the new
    /// value. Live words are for other processes mapping the image now,
    /// never for a later open: the store is neither persisted nor entered
    /// in the crash log or the write tracker (a crash image may hold any
    /// value there, and every value is valid).
    pub(crate) fn bump_live(&self, off: u64, by: u64) -> u64 {
        self.check_writable();
        let o = self.check(off, 8);
        assert!(o.is_multiple_of(8), "unaligned live word at {off}");
        // SAFETY: aligned and in bounds (checked); see `read_u64`. Live
        // words are only ever accessed atomically.
        let a = unsafe { &*(self.base.add(o) as *const AtomicU64) };
        // The words are little-endian on the media, and so is every machine
        // this builds for (asserted below), so the native add is the
        // media's add.
        const _: () = assert!(cfg!(target_endian = "little"));
        a.fetch_add(by, Ordering::AcqRel).wrapping_add(by)
    }

    /// Set a live word (see [`Pm::bump_live`]).
    pub(crate) fn store_live(&self, off: u64, value: u64) {
        self.check_writable();
        let o = self.check(off, 8);
        assert!(o.is_multiple_of(8), "unaligned live word at {off}");
        // SAFETY: as in `bump_live`.
        let a = unsafe { &*(self.base.add(o) as *const AtomicU64) };
        a.store(value.to_le(), Ordering::Release);
    }

    /// The only way a new record becomes reachable: one aligned 8-byte store
    /// of a link word, then persist. A crash leaves the old or the new value,
    /// never a mix.
    pub(crate) fn publish_u64(&self, off: u64, value: u64) {
        self.check_writable();
        let o = self.check(off, 8);
        assert!(o.is_multiple_of(8), "unaligned publish at {off}");
        let _ = o;
        self.store_u64(off, value);
        self.persist(off, 8);
    }

    /// Debug builds: panic if any byte of `[off, off+len)` was written and is
    /// not yet durable. Called before publishing a link that reaches it.
    #[track_caller]
    pub fn debug_assert_persisted(&self, off: u64, len: u64) {
        self.tracker.assert_clean(off, len);
    }

    /// Receive from a socket straight into the region: the bytes move from
    /// the kernel into the image once. Returns what recv(2) returned.
    pub(crate) fn recv_into(
        &self,
        fd: std::os::fd::RawFd,
        off: u64,
        len: usize,
        flags: i32,
    ) -> std::io::Result<usize> {
        self.check_writable();
        let o = self.check(off, len);
        // SAFETY: o..o+len is inside the writable mapping and, by the
        // concurrency contract, reserved for this caller (free buffer space it
        // allocated); recv writes at most len bytes there.
        let n = unsafe { libc::recv(fd, self.base.add(o) as *mut libc::c_void, len, flags) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        self.tracker.dirty(off, n as u64);
        if let Some(r) = &self.recorder {
            let bytes = self.slice(off, n).to_vec();
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .store(off, &bytes);
        }
        Ok(n)
    }

    /// msync the whole mapping (used at close in every mode, so a file-backed
    /// image is also consistent in the page cache's view of the file).
    pub fn sync_all(&self) -> std::io::Result<()> {
        if let Backing::Mapped { .. } = self.backing {
            if self.read_only {
                return Ok(());
            }
            // SAFETY: base..base+len is the whole mapping.
            let rc =
                unsafe { libc::msync(self.base as *mut libc::c_void, self.len, libc::MS_SYNC) };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
