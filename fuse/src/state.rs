//! The FUSE file system's state (a shared Volume, the mount's tuning, the
//! kernel notifier) and the helpers its operations share: pinning for
//! the kernel's references, open flags, atime, ownership of new inodes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fuser::{FopenFlags, Generation, INodeNo, Notifier, ReplyEntry, Request};

use crate::translate::{err, file_attr};
use pktfs_fs::FsError;
use pktfs_fs::{Attr, DirEntry, NewMode, Volume};

/// Knobs the adapter needs from the mount options.
#[derive(Clone, Debug)]
pub(crate) struct Tuning {
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
    pub max_write: u32,
    pub max_readahead: u32,
    pub keep_cache: bool,
    pub direct_io: bool,
    pub atime: crate::AtimeMode,
}

/// The FUSE file system: a shared Volume and the reply timeouts.
#[derive(Debug)]
pub(crate) struct PktFuse {
    pub vol: Arc<Volume>,
    pub tune: Tuning,
    /// Tells the kernel about changes it did not ask for (a write that
    /// cleared setuid); set once the session exists.
    pub notifier: Arc<OnceLock<Notifier>>,
    /// The lookup references the kernel holds, by inode: each one pins its
    /// inode in the Volume until the kernel forgets it. A session that ends
    /// (unmount) without the kernel's last forgets gives the rest back here
    /// (`release_kernel_refs`), or files deleted while the kernel knew them
    /// would keep their space for as long as the Volume stays open.
    pub kernel_refs: Mutex<HashMap<u64, u64>>,
}

impl PktFuse {
    /// Drop `n` kernel references. (A freed inode leaves the Volume's map
    /// before its number can be reused, `Volume::free_inode_storage`, so a
    /// create on another thread needs no lock against this.)
    pub(super) fn unpin(&self, ino: u64, n: u64) {
        {
            let mut r = self.kernel_refs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = r.get_mut(&ino) {
                *c = c.saturating_sub(n);
                if *c == 0 {
                    r.remove(&ino);
                }
            }
        }
        self.vol.unpin(ino, n)
    }

    /// The kernel now holds one more lookup reference to `ino` (pinned by
    /// the Volume call that made the entry).
    pub(super) fn kernel_got(&self, ino: u64) {
        *self
            .kernel_refs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ino)
            .or_insert(0) += 1;
    }

    /// The session is over: give back every reference the kernel did not.
    pub(super) fn release_kernel_refs(&self) {
        let refs = std::mem::take(&mut *self.kernel_refs.lock().unwrap_or_else(|p| p.into_inner()));
        for (ino, n) in refs {
            self.vol.unpin(ino, n);
        }
    }

    /// How files are opened: no FLUSH on close (there is nothing to flush:
    /// writes are on the media when they return, and locks are the
    /// kernel's), and the page cache kept across opens unless turned off.
    ///
    /// With `direct_io` the kernel hands each read and write to the daemon
    /// with the caller's own pages: a write is copied once, from the
    /// caller's buffer into the request the daemon reads, and then once
    /// into the image; a read is copied once, from the image into the
    /// caller's buffer. Through the page cache each costs one copy more.
    /// The image is memory already, so there is nothing for the page cache
    /// to save (a DAX file system bypasses it for the same reason).
    /// Writes that do not extend the file may run in parallel: the Volume
    /// orders them under the inode's lock.
    pub(super) fn open_flags(&self) -> FopenFlags {
        let mut f = FopenFlags::FOPEN_NOFLUSH;
        if self.tune.direct_io {
            f |= FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES;
        } else if self.tune.keep_cache {
            f |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        f
    }

    /// A read or listing of `ino` happened: update its atime as the mount
    /// asks. Done before the reply, so a stat that follows sees it (the
    /// kernel drops its cached atime after a read). Best effort: a failed
    /// atime update does not fail the read.
    pub(super) fn accessed(&self, ino: u64) {
        let strict = match self.tune.atime {
            crate::AtimeMode::Never => return,
            crate::AtimeMode::Relative => false,
            crate::AtimeMode::Strict => true,
        };
        let _ = self.vol.touch_atime(ino, strict);
    }

    /// Reply with an entry the kernel will count as one lookup reference:
    /// pin the inode for it (released by `forget`). Only for an inode the
    /// kernel already holds a reference to (link's source), which cannot
    /// be freed and its number reused before this pin; a name looked up or
    /// created here is pinned with it by the Volume (`lookup_pinned`,
    /// `create_node_pinned`).
    pub(super) fn entry(&self, reply: ReplyEntry, a: &Attr) {
        match self.vol.pin(a.ino) {
            Ok(()) => {
                self.kernel_got(a.ino);
                reply.entry(&self.tune.entry_ttl, &file_attr(a), Generation(0))
            }
            Err(e) => reply.error(err(&e)),
        }
    }

    /// Owner and group of a new inode in `parent`, and the mode asked for:
    /// the caller's. The umask (the kernel leaves it to us, FUSE_DONT_MASK),
    /// default ACLs and the setgid-directory rule are the Volume's to
    /// apply, under the directory's lock (`Volume::create_node_pinned`).
    pub(super) fn new_owner(&self, req: &Request, perm: u32, umask: u32) -> NewMode {
        NewMode {
            perm,
            umask,
            uid: req.uid(),
            gid: req.gid(),
        }
    }

    /// Tell the kernel that `ino`'s attributes changed behind a request
    /// that does not return them (a write that cleared setuid): without
    /// this it would go on using the cached mode, e.g. for exec. Offset -1
    /// leaves the page cache alone, so this cannot wait on the pages of
    /// the write in flight.
    pub(super) fn attrs_changed(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            if let Err(e) = n.inval_inode(INodeNo(ino), -1, 0) {
                tracing::debug!("inode {ino}: attribute invalidation not delivered: {e}");
            }
        }
    }

    pub(super) fn readdir_entries(
        &self,
        dir: u64,
        after: u64,
        max: usize,
    ) -> Result<Vec<DirEntry>, FsError> {
        let mut v = Vec::new();
        self.vol.readdir(dir, after, |e| {
            v.push(e);
            v.len() < max
        })?;
        Ok(v)
    }

    pub(super) fn chain_json(&self, ino: u64) -> Result<Vec<u8>, FsError> {
        let rows = self.vol.chain(ino)?.iter().map(|r| r.to_json()).collect();
        Ok(serde_json::Value::Array(rows).to_string().into_bytes())
    }
}

impl Drop for PktFuse {
    fn drop(&mut self) {
        // A session torn down without `destroy` (the kernel gone first).
        self.release_kernel_refs();
    }
}
