//! Who holds an image: the pktfs mounts the kernel lists
//! (/proc/self/mountinfo), the process holding an image's lock
//! (/proc/locks), and [`wait_for_release`], which lets `umount DIR &&
//! mount ...` (or `&& fsck.pktfs -y`) work at once.
//!
//! The kernel completes `umount` of a FUSE mount without waiting for the
//! daemon (no DESTROY is sent for a plain FUSE mount), and the daemon then
//! still has to close the image (write the clean flag, flush, unlock). For
//! that short while the image lock is held by a pktfs mount process whose
//! mount is gone; opening then waits for it, a bounded time, instead of
//! failing with "in use".

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The pktfs mounts this process can see (/proc/self/mountinfo), read the
/// way direct readers read them.
pub use pktfs_direct::mounts::{mounts, PktfsMount};

/// How long an open waits for a departing mount daemon.
pub const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Is `image` the source of a pktfs mount this process can see?
pub fn is_mounted(image: &Path) -> bool {
    let Ok(image) = image.canonicalize() else {
        return false;
    };
    mounts().is_ok_and(|ms| ms.iter().any(|m| m.source == image))
}

/// The processes holding a flock on `image` (from /proc/locks).
pub fn lock_holders(image: &Path) -> Vec<u32> {
    let (Ok(meta), Ok(locks)) = (
        std::fs::metadata(image),
        std::fs::read_to_string("/proc/locks"),
    ) else {
        return Vec::new();
    };
    // /proc/locks names a file as MAJOR:MINOR:INODE, the numbers of the
    // device in hex (glibc's major()/minor() encoding of st_dev).
    let dev = meta.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let want = (major, minor, meta.ino());
    let mut pids = Vec::new();
    for line in locks.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"
        if f.len() < 6 || f[1] != "FLOCK" {
            continue;
        }
        let mut id = f[5].split(':');
        let parsed = (
            id.next().and_then(|x| u64::from_str_radix(x, 16).ok()),
            id.next().and_then(|x| u64::from_str_radix(x, 16).ok()),
            id.next().and_then(|x| x.parse::<u64>().ok()),
        );
        if parsed == (Some(want.0), Some(want.1), Some(want.2)) {
            if let Ok(pid) = f[4].parse() {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Is `pid` a pktfs mount process (`pktfs mount ...`, the mount daemon,
/// `mount.pktfs`), or a pktfs process that is exiting?
fn is_pktfs_mount_process(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    if cmdline.is_empty() {
        // An exiting process has given up its memory, and with it its
        // command line, before it closes its files (and so the lock): only
        // its name is left. An exiting pktfs process lets go in a moment.
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim_end();
        // comm is cut to 15 bytes.
        return comm == "pktfs" || comm.starts_with("mount-pktfs") || comm.starts_with("mount.");
    }
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let name = args
        .first()
        .map(|a| a.rsplit(|&b| b == b'/').next().unwrap_or(a))
        .unwrap_or_default();
    match name {
        b"pktfs" => args.get(1..).is_some_and(|rest| {
            // The subcommand, after any global options.
            rest.iter().find(|a| !a.starts_with(b"-")) == Some(&&b"mount"[..])
        }),
        n => {
            n.starts_with(b"mount-pktfs")
                || n.starts_with(b"mount.pktfs")
                || n.starts_with(b"mount.fuse.pktfs")
        }
    }
}

/// Who holds `image`'s lock, for [`wait_for_release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Nobody (any more): the lock was let go since it was found held.
    Nobody,
    /// A pktfs mount process whose mount is no longer listed: a daemon
    /// closing the image after `umount`.
    Departing(u32),
    /// Anyone else: a live mount, a server, an fsck, this process.
    Other,
}

/// Who holds `image`'s lock.
pub fn holder(image: &Path) -> Holder {
    let holders = lock_holders(image);
    if holders.is_empty() {
        return Holder::Nobody;
    }
    if is_mounted(image) {
        return Holder::Other;
    }
    match holders
        .iter()
        .find(|&&pid| pid != std::process::id() && is_pktfs_mount_process(pid))
    {
        Some(&pid) if holders.iter().all(|&p| p == pid) => Holder::Departing(pid),
        _ => Holder::Other,
    }
}

/// Run `open` until it succeeds, fails otherwise than `locked` says, or the
/// lock's holder is not a departing mount daemon ([`Holder::Departing`]);
/// waits at most [`RELEASE_WAIT`]. `note` is told once, when waiting
/// starts, what is waited for.
pub fn wait_for_release<T, E>(
    image: &Path,
    mut open: impl FnMut() -> Result<T, E>,
    locked: impl Fn(&E) -> bool,
    mut note: impl FnMut(&str),
) -> Result<T, E> {
    let t0 = Instant::now();
    let mut told = false;
    loop {
        match open() {
            Err(e) if locked(&e) && t0.elapsed() < RELEASE_WAIT => {
                let pid = match holder(image) {
                    Holder::Departing(pid) => pid,
                    // Let go between the open and the look: try again
                    // (the bound above still holds if /proc/locks cannot
                    // show the holder).
                    Holder::Nobody => {
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    Holder::Other => return Err(e),
                };
                if !told {
                    note(&format!(
                        "{} is unmounted but pktfs process {pid} has not let go of it yet; \
                         waiting (at most {} s)",
                        image.display(),
                        RELEASE_WAIT.as_secs()
                    ));
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_its_own_lock() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = std::fs::File::create(&p).unwrap();
        f.lock().unwrap();
        assert!(lock_holders(&p).contains(&std::process::id()));
        // Ours, and not a mount process: nothing to wait for.
        assert_eq!(holder(&p), Holder::Other);
        drop(f);
        assert_eq!(holder(&p), Holder::Nobody);
    }
}
