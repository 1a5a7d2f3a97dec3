//! Which descriptors the shim serves directly: descriptor number -> entry,
//! with a count so that a program with none pays one atomic load per call.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// A descriptor opened read-only on a pktfs mount, served from the image.
#[derive(Debug)]
pub struct Entry {
    pub file: pktfs_direct::File,
    /// The kernel's `stat` of the descriptor when it was opened: the fields
    /// the image does not hold (the mount's device, the block size the
    /// kernel reports) come from here.
    pub base: libc::stat64,
    /// Serializes the offset's read-copy-advance of `read`/`readv` and
    /// `lseek` within this process, as the kernel's file position lock does.
    pos: std::sync::Mutex<()>,
}

/// How long a `read` waits for another thread's `read` on the same
/// descriptor before it goes to the kernel instead (which keeps the
/// program's result right, only slower): a thread that forked while
/// holding the lock, or a signal handler reading the descriptor its own
/// thread was reading, must never wait forever.
const POS_PATIENCE: Duration = Duration::from_millis(2);

impl Entry {
    pub fn new(file: pktfs_direct::File, base: libc::stat64) -> Entry {
        Entry {
            file,
            base,
            pos: std::sync::Mutex::new(()),
        }
    }

    /// Run `f` holding the position lock, or None if it stays taken.
    pub fn with_pos<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let t0 = Instant::now();
        loop {
            match self.pos.try_lock() {
                Ok(_g) => return Some(f()),
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    let _g = p.into_inner();
                    return Some(f());
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    if t0.elapsed() > POS_PATIENCE {
                        return None;
                    }
                    std::thread::yield_now();
                }
            }
        }
    }
}

static COUNT: AtomicUsize = AtomicUsize::new(0);
static TABLE: RwLock<Vec<Option<Arc<Entry>>>> = RwLock::new(Vec::new());

/// The entry of `fd`, if the shim serves it.
pub fn get(fd: i32) -> Option<Arc<Entry>> {
    if COUNT.load(Ordering::Acquire) == 0 || fd < 0 {
        return None;
    }
    let t = TABLE.read().unwrap_or_else(|p| p.into_inner());
    t.get(fd as usize).and_then(|e| e.clone())
}

/// Serve `fd` directly from now on.
pub fn insert(fd: i32, e: Entry) {
    if fd < 0 {
        return;
    }
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    let i = fd as usize;
    if t.len() <= i {
        t.resize(i + 1, None);
    }
    if t[i].replace(Arc::new(e)).is_none() {
        COUNT.fetch_add(1, Ordering::AcqRel);
    }
}

/// `fd` is being closed (or replaced): no longer served.
pub fn remove(fd: i32) {
    if COUNT.load(Ordering::Acquire) == 0 || fd < 0 {
        return;
    }
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    if let Some(slot) = t.get_mut(fd as usize) {
        if slot.take().is_some() {
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Every descriptor in `[low, high]` is being closed.
pub fn remove_range(low: u32, high: u32) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    let end = (high as usize).min(t.len().saturating_sub(1));
    for i in (low as usize)..=end {
        if t.get_mut(i).and_then(|s| s.take()).is_some() {
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Stop serving every descriptor whose entry `f` picks.
pub fn remove_where(f: impl Fn(&Entry) -> bool) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    for slot in t.iter_mut() {
        if slot.as_deref().is_some_and(&f) {
            *slot = None;
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
