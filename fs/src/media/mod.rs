//! The mapping and the persistence primitives. All `unsafe` in pktfs lives in
//! this module (the crate denies `unsafe_code` everywhere else).
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
//! from the image goes through `RxBuf` and `TxHold` (fs/src/volume/rx.rs).
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
pub mod machine;
pub mod net;
pub mod recording;
mod sigbus;
pub mod space;
pub mod sys;
mod tracker;
pub mod uring;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub use arch::FlushInsn;
use recording::{CrashLog, Recorder};

/// How writes are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistMode {
    /// clwb (or clflushopt/clflush) each written line, then sfence. Default on
    /// a DAX mapping and on /dev/shm.
    Clwb,
    /// msync(MS_SYNC) the written pages: a file on a block device.
    Msync,
    /// sfence only: the CPU caches are in the persistence domain (eADR).
    Eadr,
}

/// What the user asked for; `Auto` picks by what the image is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PersistChoice {
    #[default]
    Auto,
    Clwb,
    Msync,
    Eadr,
}

impl std::str::FromStr for PersistChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => PersistChoice::Auto,
            "clwb" => PersistChoice::Clwb,
            "msync" => PersistChoice::Msync,
            "eadr" => PersistChoice::Eadr,
            _ => {
                return Err(format!(
                    "unknown persist mode {s:?} (auto, clwb, msync, eadr)"
                ))
            }
        })
    }
}

impl std::fmt::Display for PersistMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PersistMode::Clwb => "clwb",
            PersistMode::Msync => "msync",
            PersistMode::Eadr => "eadr",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is in use by another pktfs process (it holds the image lock); unmount it first"
    )]
    Locked { path: PathBuf },
    #[error("{path} is {len} bytes: too small to be an image")]
    TooSmall { path: PathBuf, len: u64 },
    /// Creating (or resizing) an image: the file system lacks the room.
    #[error(
        "{path}: {} asked for but the file system holding it has only {} free; {}",
        space::human_bytes(*len_bytes),
        space::human_bytes(*free_bytes),
        size_advice(*max_len_bytes)
    )]
    NoRoom {
        path: PathBuf,
        len_bytes: u64,
        free_bytes: u64,
        /// The largest image that fits: what is free plus what the file
        /// already has allocated.
        max_len_bytes: u64,
    },
    /// A writable open of a sparse image the file system cannot complete.
    #[error(
        "{path} is sparse: {} of its {} are not allocated and the file system holding it has only {} free, so writes there would fault; free {} more there (or move the image), or open it read-only",
        space::human_bytes(*missing_bytes),
        space::human_bytes(*len_bytes),
        space::human_bytes(*free_bytes),
        space::human_bytes(missing_bytes.saturating_sub(*free_bytes))
    )]
    SparseNoRoom {
        path: PathBuf,
        len_bytes: u64,
        missing_bytes: u64,
        free_bytes: u64,
    },
    #[error(
        "{path}: {} is more than the file system holding it allows in one file",
        space::human_bytes(*len_bytes)
    )]
    TooLarge { path: PathBuf, len_bytes: u64 },
}

/// What to do about [`MediaError::NoRoom`]: the largest `--size` that fits
/// (whole MiB, as mkfs.pktfs and `pktfs up` take it), if there is one.
fn size_advice(max_len_bytes: u64) -> String {
    if max_len_bytes >= 1 << 20 {
        format!(
            "choose --size at most {}M, or another place",
            max_len_bytes >> 20
        )
    } else {
        "free some space there or choose another place".to_string()
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MediaError + '_ {
    move |source| MediaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

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
    read_only: bool,
    /// Background pre-fault of the mapping; joined before the mapping goes.
    populate: Option<(
        std::thread::JoinHandle<()>,
        std::sync::Arc<std::sync::atomic::AtomicBool>,
    )>,
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

impl Drop for Pm {
    fn drop(&mut self) {
        if let Some((h, stop)) = self.populate.take() {
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

/// Options for opening an image file.
#[derive(Clone, Debug, Default)]
pub struct MapOptions {
    pub persist: PersistChoice,
    pub read_only: bool,
    /// Pre-fault the whole mapping (MADV_POPULATE_WRITE) so copies do not
    /// take page faults. Default on for writable opens.
    pub no_populate: bool,
    /// Do not take the exclusive lock (fsck -n on a mounted image).
    pub no_lock: bool,
}

const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// What kind of storage a path is on, for the `Auto` persist choice.
fn auto_mode(path: &Path, file: &File) -> PersistMode {
    use std::os::unix::fs::FileTypeExt;
    if file
        .metadata()
        .map(|m| m.file_type().is_char_device())
        .unwrap_or(false)
    {
        return PersistMode::Clwb; // /dev/daxN.M
    }
    // SAFETY: statfs is plain-old-data; fstatfs fills it for a valid fd.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open for the duration of the call and `st` is valid.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    if rc == 0 {
        let t = st.f_type as i64;
        if t == TMPFS_MAGIC || t == RAMFS_MAGIC {
            return PersistMode::Clwb;
        }
    }
    if is_dax_mount(path) {
        return PersistMode::Clwb;
    }
    PersistMode::Msync
}

/// Is `path` on a file system mounted with `-o dax`?
fn is_dax_mount(path: &Path) -> bool {
    let Ok(abs) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let mut best: Option<(usize, bool)> = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        if abs.starts_with(f[1]) && best.is_none_or(|(l, _)| f[1].len() > l) {
            best = Some((
                f[1].len(),
                f[3].split(',').any(|o| o == "dax" || o == "dax=always"),
            ));
        }
    }
    best.is_some_and(|(_, dax)| dax)
}

/// Size of a character DAX device from sysfs.
fn dax_device_len(file: &File) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let rdev = file.metadata().ok()?.rdev();
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    std::fs::read_to_string(format!("/sys/dev/char/{maj}:{min}/size"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How long an open waits for a lock held by someone else before it says
/// the image is in use. A lock can outlive its holder briefly: a process
/// that forks copies every descriptor (the image's included) into the
/// child until the child execs, and an unmounted daemon lets go of the
/// image only as it exits. A real holder still gets a clear error, later.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

fn lock(file: &File, path: &Path, shared: bool) -> Result<(), MediaError> {
    let t0 = std::time::Instant::now();
    let lock = loop {
        let r = if shared {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match r {
            Err(std::fs::TryLockError::WouldBlock) if t0.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => break r,
        }
    };
    match lock {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(MediaError::Locked {
            path: path.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(MediaError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// An allocation that failed, as the error a person can act on.
fn alloc_err(
    path: &Path,
    e: std::io::Error,
    no_room: impl FnOnce() -> MediaError,
    len_bytes: u64,
) -> MediaError {
    match e.raw_os_error() {
        // tmpfs says ENOMEM when memory, not its size limit, runs out.
        Some(libc::ENOSPC) | Some(libc::ENOMEM) => no_room(),
        Some(libc::EFBIG) => MediaError::TooLarge {
            path: path.to_path_buf(),
            len_bytes,
        },
        _ => MediaError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// Make a new (or re-formatted) image file `len_bytes` long with every byte
/// backed, or refuse without having changed it (see [`space`]). The space
/// check comes first and costs one statvfs, so a request that cannot fit is
/// refused at once.
fn prepare_image(path: &Path, file: &File, len_bytes: u64) -> Result<(), MediaError> {
    let meta = file.metadata().map_err(io_err(path))?;
    if !space::is_allocatable(&meta) {
        // /dev/dax: memory already, and its length is the device's.
        return Ok(());
    }
    let have_bytes = space::allocated_bytes(&meta);
    let no_room = |free_bytes: u64| MediaError::NoRoom {
        path: path.to_path_buf(),
        len_bytes,
        free_bytes,
        max_len_bytes: free_bytes.saturating_add(have_bytes),
    };
    if have_bytes < len_bytes {
        if let Some(free_bytes) = space::free_bytes(file).map_err(io_err(path))? {
            if free_bytes < len_bytes - have_bytes {
                return Err(no_room(free_bytes));
            }
        }
    }
    // Even a file that has enough blocks may have them in the wrong place
    // (past the new length), so always ask: fallocate skips what is backed.
    space::allocate(file, len_bytes).map_err(|e| {
        alloc_err(
            path,
            e,
            || no_room(space::free_bytes(file).ok().flatten().unwrap_or(0)),
            len_bytes,
        )
    })?;
    if meta.len() != len_bytes {
        file.set_len(len_bytes).map_err(|e| {
            alloc_err(
                path,
                e,
                || no_room(space::free_bytes(file).ok().flatten().unwrap_or(0)),
                len_bytes,
            )
        })?;
    }
    Ok(())
}

/// A writable open of a sparse image: allocate the holes (no byte of the
/// image changes) so no store into the mapping can fault for lack of
/// backing, or refuse. Returns the bytes newly allocated.
fn complete_sparse(
    path: &Path,
    file: &File,
    meta: &std::fs::Metadata,
    len_bytes: u64,
) -> Result<u64, MediaError> {
    if !space::is_allocatable(meta) {
        return Ok(0);
    }
    let have_bytes = space::allocated_bytes(meta);
    if have_bytes >= len_bytes {
        return Ok(0);
    }
    let missing_bytes = len_bytes - have_bytes;
    let refuse = |free_bytes: u64| MediaError::SparseNoRoom {
        path: path.to_path_buf(),
        len_bytes,
        missing_bytes,
        free_bytes,
    };
    // Ask first: on ext4 and xfs a fallocate that runs out of space keeps
    // what it took, and would leave that file system full for nothing.
    if let Some(free_bytes) = space::free_bytes(file).map_err(io_err(path))? {
        if free_bytes < missing_bytes {
            return Err(refuse(free_bytes));
        }
    }
    let how = space::allocate(file, len_bytes).map_err(|e| {
        alloc_err(
            path,
            e,
            || refuse(space::free_bytes(file).ok().flatten().unwrap_or(0)),
            len_bytes,
        )
    })?;
    let now_bytes = space::allocated_bytes(&file.metadata().map_err(io_err(path))?);
    let done_bytes = now_bytes.saturating_sub(have_bytes);
    tracing::info!(
        "{}: the image was sparse; allocated {} of its {} ({how:?}) so writes cannot fault",
        path.display(),
        space::human_bytes(done_bytes),
        space::human_bytes(len_bytes),
    );
    if now_bytes < len_bytes {
        // Compressing or deduplicating file systems may report fewer blocks
        // than they promise; nothing more can be asked of them here.
        tracing::warn!(
            "{}: still {} of {} allocated after completing it",
            path.display(),
            space::human_bytes(now_bytes),
            space::human_bytes(len_bytes),
        );
    }
    Ok(done_bytes)
}

impl Pm {
    /// Map an image file. A writable open of a sparse regular file first
    /// allocates its holes, or refuses if the file system lacks the room
    /// ([`MediaError::SparseNoRoom`]); a read-only open maps it as it is
    /// (reading a hole needs no backing).
    pub fn open(path: &Path, opts: &MapOptions) -> Result<Pm, MediaError> {
        let file = OpenOptions::new()
            .read(true)
            .write(!opts.read_only)
            .open(path)
            .map_err(io_err(path))?;
        if !opts.no_lock {
            lock(&file, path, opts.read_only)?;
        }
        Self::map(path, file, opts)
    }

    /// Create the image file at `path` (or take the one there), make it
    /// `len_bytes` long with every byte allocated, and map it writable for
    /// formatting. Refuses before changing anything when the file system
    /// lacks the room ([`MediaError::NoRoom`]) or another process holds the
    /// image; on any error a file this call created is removed, and an
    /// existing one keeps its length and contents. A character device
    /// (/dev/dax) is mapped as it is.
    pub fn create(path: &Path, len_bytes: u64) -> Result<Pm, MediaError> {
        let (file, created) = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(f) => (f, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .map_err(io_err(path))?,
                false,
            ),
            Err(e) => return Err(io_err(path)(e)),
        };
        let r = lock(&file, path, false)
            .and_then(|()| prepare_image(path, &file, len_bytes))
            .and_then(|()| Self::map(path, file, &MapOptions::default()));
        if r.is_err() && created {
            let _ = std::fs::remove_file(path);
        }
        r
    }

    fn map(path: &Path, file: File, opts: &MapOptions) -> Result<Pm, MediaError> {
        let meta = file.metadata().map_err(io_err(path))?;
        let mut len = meta.len();
        if len == 0 {
            len = dax_device_len(&file).unwrap_or(0);
        }
        if len < 8192 {
            return Err(MediaError::TooSmall {
                path: path.to_path_buf(),
                len,
            });
        }
        let completed_bytes = if opts.read_only {
            0
        } else {
            complete_sparse(path, &file, &meta, len)?
        };
        let map = if opts.read_only {
            memmap2::MmapOptions::new()
                .len(len as usize)
                .map_raw_read_only(&file)
        } else {
            memmap2::MmapOptions::new().len(len as usize).map_raw(&file)
        }
        .map_err(io_err(path))?;
        let mode = match opts.persist {
            PersistChoice::Auto => auto_mode(path, &file),
            PersistChoice::Clwb => PersistMode::Clwb,
            PersistChoice::Msync => PersistMode::Msync,
            PersistChoice::Eadr => PersistMode::Eadr,
        };
        let base = map.as_mut_ptr();
        // Pre-fault in the background so opening does not wait for it and
        // copies (or a scrub's reads) do not take a page fault per 4 KiB.
        // A writable open has allocated the whole file by now
        // (complete_sparse), so this only maps pages that exist. A read-only
        // open of a sparse image is not populated: on tmpfs a read fault on
        // a hole allocates a page, so populating would take room (and could
        // fill the file system) for an open that promised to need none.
        // Drop stops it at the next step and joins it before the mapping
        // goes.
        let sparse_read_only =
            opts.read_only && space::is_allocatable(&meta) && space::allocated_bytes(&meta) < len;
        let populate = (!opts.no_populate && !sparse_read_only).then(|| {
            let (addr, n) = (base as usize, len as usize);
            let advice = if opts.read_only {
                libc::MADV_POPULATE_READ
            } else {
                libc::MADV_POPULATE_WRITE
            };
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stop2 = stop.clone();
            let h = std::thread::spawn(move || {
                const STEP: usize = 64 << 20;
                let mut off = 0;
                while off < n && !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = STEP.min(n - off);
                    // SAFETY: addr+off..addr+off+k lies inside the mapping,
                    // which stays mapped until this thread is joined (Drop).
                    // MADV_POPULATE_* only faults pages in; it changes no
                    // data (and fails harmlessly on kernels before 5.14).
                    unsafe { libc::madvise((addr + off) as *mut libc::c_void, k, advice) };
                    off += k;
                }
            });
            (h, stop)
        });
        Ok(Pm {
            base,
            len: len as usize,
            mode,
            insn: arch::detect_flush(),
            _sigbus: Some(sigbus::register(
                base,
                len as usize,
                &path.display().to_string(),
            )),
            backing: Backing::Mapped {
                _map: map,
                file,
                path: path.to_path_buf(),
            },
            recorder: None,
            tracker: tracker::Tracker::default(),
            read_only: opts.read_only,
            populate,
            persist_failed: Default::default(),
            inject_persist_failure: Default::default(),
            completed_bytes,
        })
    }

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
            read_only: false,
            populate: None,
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
        ExclusivePm {
            start: 0,
            end: self.len(),
            pm: self,
            _excl: std::marker::PhantomData,
        }
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
            crc = layout::crc32c_append(crc, &ZEROS[..n]);
            done += n as u64;
        }
        crc
    }

    /// Start writing back `[off, off+len)`; durable after the next fence.
    pub fn flush(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let o = self.check(off, len as usize);
        match self.mode {
            PersistMode::Clwb if self.recorder.is_none() => {
                // SAFETY: o..o+len is inside the mapping (checked).
                unsafe { arch::flush_lines(self.insn, self.base.add(o), len as usize) }
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
        if self
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

    /// Order: everything flushed before is durable before anything after.
    pub fn fence(&self) {
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

/// Exclusive access to a [`Pm`]'s bytes, made from `&mut Pm`
/// ([`Pm::exclusive`], or `Volume::pm_exclusive`): while it lives no Volume,
/// handle or thread can reach the region, so the borrow rules are the
/// whole proof of soundness: reads borrow `&self`, writes need
/// `&mut self`, and a shared `&ExclusivePm` (even across threads) only
/// reads.
///
/// What it cannot rule out is another *process* writing the image file:
/// pktfs processes exclude each other with the image lock (a writable
/// open is exclusive, a read-only one shared); [`MapOptions::no_lock`]
/// gives that up for a read-only look at a mounted image, whose bytes may
/// then change underneath (as with any shared mapping).
///
/// [`ExclusivePm::split_at`] cuts it into handles on disjoint windows,
/// one per thread, each checked to stay inside its own.
#[derive(Debug)]
pub struct ExclusivePm<'a> {
    pm: &'a Pm,
    /// The window this handle owns: `[start, end)` (the whole region
    /// unless split with [`ExclusivePm::split_at`]).
    start: u64,
    end: u64,
    /// Stands for the `&'a mut Pm` (or the part of it) this was made from.
    _excl: std::marker::PhantomData<&'a mut Pm>,
}

impl<'a> ExclusivePm<'a> {
    #[track_caller]
    fn inside(&self, off: u64, len: u64) {
        assert!(
            off >= self.start && off.checked_add(len).is_some_and(|e| e <= self.end),
            "access {off}+{len} outside this handle's window {}..{}",
            self.start,
            self.end
        );
    }

    /// Split into two handles owning `[start, at)` and `[at, end)`: each
    /// may then go to its own thread (like `split_at_mut`).
    pub fn split_at(self, at: u64) -> (ExclusivePm<'a>, ExclusivePm<'a>) {
        assert!(
            (self.start..=self.end).contains(&at),
            "split at {at} outside {}..{}",
            self.start,
            self.end
        );
        (
            ExclusivePm {
                pm: self.pm,
                start: self.start,
                end: at,
                _excl: std::marker::PhantomData,
            },
            ExclusivePm {
                pm: self.pm,
                start: at,
                end: self.end,
                _excl: std::marker::PhantomData,
            },
        )
    }
    /// The window `[start, end)` this handle owns (image offsets).
    pub fn window(&self) -> std::ops::Range<u64> {
        self.start..self.end
    }
    /// Does this handle own the whole region?
    pub fn is_whole(&self) -> bool {
        self.start == 0 && self.end == self.pm.len()
    }
    /// The region's shared API (length, mode, flush, fence, the crash log).
    pub fn pm(&self) -> &Pm {
        self.pm
    }
    /// The whole region's length (offsets are the region's, whatever the
    /// window).
    pub fn len(&self) -> u64 {
        self.pm.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pm.is_empty()
    }
    pub fn is_read_only(&self) -> bool {
        self.pm.is_read_only()
    }
    /// Borrow `len` bytes at `off` (panics outside the window).
    #[track_caller]
    pub fn slice(&self, off: u64, len: usize) -> &[u8] {
        self.inside(off, len as u64);
        self.pm.slice(off, len)
    }
    /// Copy bytes out.
    #[track_caller]
    pub fn read(&self, off: u64, out: &mut [u8]) {
        self.inside(off, out.len() as u64);
        self.pm.read(off, out)
    }
    /// An aligned 8-byte little-endian word.
    #[track_caller]
    pub fn read_u64(&self, off: u64) -> u64 {
        self.inside(off, 8);
        self.pm.read_u64(off)
    }
    /// A copy of the window (cache view).
    pub fn snapshot(&self) -> Vec<u8> {
        self.pm
            .slice(self.start, (self.end - self.start) as usize)
            .to_vec()
    }
    /// Plain stores; durable after [`Self::persist`] (or flush + fence).
    #[track_caller]
    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.inside(off, data.len() as u64);
        self.pm.write(off, data)
    }
    /// Non-temporal copy, flushed; durable after the next fence.
    #[track_caller]
    pub fn write_nt(&mut self, off: u64, data: &[u8]) {
        self.inside(off, data.len() as u64);
        self.pm.write_nt(off, data)
    }
    /// Fill with zeros (cached stores).
    #[track_caller]
    pub fn zero(&mut self, off: u64, len: u64) {
        self.inside(off, len);
        self.pm.zero(off, len)
    }
    /// Aligned 8-byte store, not yet durable.
    #[track_caller]
    pub fn store_u64(&mut self, off: u64, value: u64) {
        self.inside(off, 8);
        self.pm.store_u64(off, value)
    }
    /// Aligned 8-byte store, then persist.
    #[track_caller]
    pub fn publish_u64(&mut self, off: u64, value: u64) {
        self.inside(off, 8);
        self.pm.publish_u64(off, value)
    }
    pub fn flush(&self, off: u64, len: u64) {
        self.pm.flush(off, len)
    }
    pub fn fence(&self) {
        self.pm.fence()
    }
    pub fn persist(&self, off: u64, len: u64) {
        self.pm.persist(off, len)
    }
    /// sendmsg(2) of `(offset, len)` segments of the window (the kernel
    /// reads them during the call).
    pub fn send_segments(
        &self,
        fd: impl std::os::fd::AsFd,
        segs: impl IntoIterator<Item = (u64, usize)>,
        flags: i32,
    ) -> std::io::Result<usize> {
        let segs = segs.into_iter().map(|(off, len)| {
            self.inside(off, len as u64);
            net::IoSeg::Image { off, len }
        });
        self.pm
            .send_segments(std::os::fd::AsFd::as_fd(&fd).as_raw_fd(), segs, flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_publish_roundtrip_on_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        let pm = Pm::open(&p, &MapOptions::default()).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        pm.write_nt(4096 + 3, &data);
        pm.fence();
        pm.debug_assert_persisted(4096 + 3, data.len() as u64);
        pm.publish_u64(64, 0xdead_beef);
        assert_eq!(pm.read_u64(64), 0xdead_beef);
        assert_eq!(pm.slice(4096 + 3, data.len()), &data[..]);
        // A second writable open is refused while the first holds the lock.
        assert!(matches!(
            Pm::open(&p, &MapOptions::default()),
            Err(MediaError::Locked { .. })
        ));
        drop(pm);
        let pm = Pm::open(
            &p,
            &MapOptions {
                persist: PersistChoice::Msync,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(pm.read_u64(64), 0xdead_beef);
        assert_eq!(pm.mode(), PersistMode::Msync);
    }

    #[test]
    fn every_mode_copies_correctly() {
        for mode in [
            PersistChoice::Clwb,
            PersistChoice::Msync,
            PersistChoice::Eadr,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("img");
            std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
            let pm = Pm::open(
                &p,
                &MapOptions {
                    persist: mode,
                    ..Default::default()
                },
            )
            .unwrap();
            for (off, len) in [(0u64, 1usize), (17, 5000), (64, 64), (4095, 70_000)] {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + off as usize) as u8).collect();
                pm.write_nt(off, &data);
                pm.persist(off, len as u64);
                assert_eq!(pm.slice(off, len), &data[..]);
            }
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "not durable")]
    fn tracker_catches_publish_before_persist() {
        let pm = Pm::from_bytes(vec![0; 1 << 16]);
        pm.write(128, &[1; 64]);
        pm.debug_assert_persisted(128, 64);
    }

    #[test]
    fn heap_backend_is_page_aligned() {
        for len in [8192usize, 1 << 16, (1 << 20) + 64] {
            let img: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut pm = Pm::from_bytes(img.clone());
            assert_eq!(
                pm.base as usize % HEAP_ALIGN,
                0,
                "heap image of {len} bytes"
            );
            assert_eq!(pm.snapshot(), img);
            let rec = Pm::recording(img);
            assert_eq!(rec.base as usize % HEAP_ALIGN, 0);
        }
    }

    #[test]
    fn refuses_tiny_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("small");
        std::fs::write(&p, [0u8; 100]).unwrap();
        assert!(matches!(
            Pm::open(&p, &MapOptions::default()),
            Err(MediaError::TooSmall { .. })
        ));
        assert!(matches!(
            Pm::open(&dir.path().join("nope"), &MapOptions::default()),
            Err(MediaError::Io { .. })
        ));
    }
}
