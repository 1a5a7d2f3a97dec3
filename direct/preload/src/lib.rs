//! The preload shim: `LD_PRELOAD=libpktfs_preload.so PROGRAM` makes an
//! unmodified program read the files of pktfs mounts straight from the
//! mapped image, through pktfs-direct, every byte checked against its
//! record's CRC32C as the mount checks it.
//!
//! It serves `open`/`openat` (and the aliases glibc compiles them into)
//! of regular files opened for reading (read-only, or read-write: writes
//! go to the kernel, which puts them in the image before they return),
//! then `read`, `pread`, `readv`,
//! `preadv` (and their 64-bit aliases), `lseek`'s SEEK_END and `fstat`
//! of those descriptors. It keeps the real FUSE descriptor underneath and
//! the kernel's file offset in step, so every other call (`dup`, `fork`,
//! `mmap`, `fcntl`, `sendfile`, writes, stdio's own reads) goes to the
//! kernel unchanged; and whatever it cannot serve, it hands to the kernel.
//! It changes nothing a program observes but speed (docs/DIRECT.md lists
//! the few things it cannot see, and what it does about them).
//!
//! `PKTFS_PRELOAD=off` turns it off; `PKTFS_PRELOAD_STATS=FILE` reports
//! what it served (`stats`).

mod guard;
mod interpose;
mod mounts;
mod real;
mod stats;
mod table;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// 0: not decided yet; 1: on; 2: off.
static ENABLED: AtomicU8 = AtomicU8::new(0);

/// Whether the shim serves anything (`PKTFS_PRELOAD=off`: no).
fn enabled() -> bool {
    match ENABLED.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let on = std::env::var_os("PKTFS_PRELOAD").is_none_or(|v| v != "off");
            ENABLED.store(if on { 1 } else { 2 }, Ordering::Relaxed);
            on
        }
    }
}

/// Files this process mapped shared and writable: read through the kernel.
static MAPPED_FOR_WRITE: Mutex<Option<HashSet<(u64, u64)>>> = Mutex::new(None);

fn mapped_for_write(dev: u64, ino: u64) -> bool {
    let g = MAPPED_FOR_WRITE.lock().unwrap_or_else(|p| p.into_inner());
    g.as_ref().is_some_and(|s| s.contains(&(dev, ino)))
}

fn mark_mapped_for_write(dev: u64, ino: u64) {
    let mut g = MAPPED_FOR_WRITE.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(HashSet::new).insert((dev, ino));
    drop(g);
    table::remove_where(|e| e.base.st_dev == dev && e.base.st_ino == ino);
}
