//! Opening an image: the file, its lock, its length and backing (a sparse
//! file's holes allocated, or a refusal that changes nothing), the persist
//! mode its storage calls for, and the mapping.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{sigbus, space, tracker, Backing, MediaError, PersistChoice, PersistMode, Pm};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MediaError + '_ {
    move |source| MediaError::Io {
        path: path.to_path_buf(),
        source,
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
    if let Ok(st) = nix::sys::statfs::fstatfs(file) {
        // The magic's type differs between libc targets (i64 here).
        #[allow(clippy::unnecessary_cast)]
        let t = st.filesystem_type().0 as i64;
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

/// Refuse what an image cannot be before opening it: opening a FIFO would
/// wait for a writer, a directory would read as a 4 KiB "image". A path
/// that cannot be examined is left to the open, whose error names it.
fn check_kind(path: &Path, meta: &std::fs::Metadata) -> Result<(), MediaError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() || t.is_char_device() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device (its page cache is not persistent memory)"
    } else {
        "not a regular file"
    };
    Err(MediaError::NotAnImage {
        path: path.to_path_buf(),
        kind,
    })
}

/// Refuse a path that names something an image cannot be (a directory, a
/// FIFO, a socket, a block device) without opening it; a path that does
/// not exist passes (creating it is the caller's business).
pub fn check_path_kind(path: &Path) -> Result<(), MediaError> {
    match std::fs::metadata(path) {
        Ok(m) => check_kind(path, &m),
        Err(_) => Ok(()),
    }
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
        // A write-back instruction the CPU lacks is refused before the file
        // is touched (`map` resolves it again; this is only the early no).
        opts.persist.resolve_insn()?;
        check_path_kind(path)?;
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
        check_path_kind(path)?;
        // 0600: an image holds every byte of every file, whatever their
        // modes say; only its owner may read it (the mount and the servers
        // apply the files' own permissions to everyone else).
        let (file, created) = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
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
        use std::os::unix::fs::FileTypeExt;
        let meta = file.metadata().map_err(io_err(path))?;
        // Again on what was opened: the path may have been replaced since.
        check_kind(path, &meta)?;
        let mut len = meta.len();
        if len == 0 {
            len = match dax_device_len(&file) {
                Some(l) => l,
                None if meta.file_type().is_char_device() => {
                    return Err(MediaError::NotAnImage {
                        path: path.to_path_buf(),
                        kind: "a character device that is not a DAX device",
                    })
                }
                None => 0,
            };
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
        let insn = opts.persist.resolve_insn()?;
        let mode = match opts.persist {
            PersistChoice::Auto => auto_mode(path, &file),
            PersistChoice::Clwb | PersistChoice::Clflushopt | PersistChoice::Clflush => {
                PersistMode::Clwb
            }
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
            insn,
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
            writebacks: Default::default(),
            read_only: opts.read_only,
            populate: std::sync::Mutex::new(populate),
            persist_failed: Default::default(),
            inject_persist_failure: Default::default(),
            completed_bytes,
        })
    }
}
