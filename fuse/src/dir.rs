//! Directory listings for FUSE: readdir and readdirplus, their offsets
//! ("." is 1, ".." 2, then the entries' own cookies, which stay valid while
//! the directory changes) and, for readdirplus, the lookup each listed
//! entry counts as.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use fuser::{Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};

use crate::state::PktFuse;
use crate::translate::{err, file_attr, kind};

impl PktFuse {
    pub(super) fn list_dir(&self, dir: u64, offset: u64, mut reply: ReplyDirectory) {
        if offset == 0 {
            self.accessed(dir);
        }
        // Offsets: 1 after ".", 2 after "..", then the entries' own
        // cookies, which stay valid while the directory changes.
        if offset < 1 && reply.add(INodeNo(dir), 1, fuser::FileType::Directory, ".") {
            return reply.ok();
        }
        if offset < 2 {
            let parent = match self.vol.parent_of(dir) {
                Ok(p) => p,
                Err(e) => return reply.error(err(&e)),
            };
            if reply.add(INodeNo(parent), 2, fuser::FileType::Directory, "..") {
                return reply.ok();
            }
        }
        let after = if offset < 3 { 0 } else { offset };
        let r = self.vol.readdir(dir, after, |e| {
            !reply.add(
                INodeNo(e.ino),
                e.cookie,
                kind(e.kind),
                OsStr::from_bytes(&e.name),
            )
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(&e)),
        }
    }

    pub(super) fn list_dir_plus(&self, dir: u64, offset: u64, mut reply: ReplyDirectoryPlus) {
        let ttl = self.tune.entry_ttl;
        if offset == 0 {
            self.accessed(dir);
        }
        if offset < 1 {
            match self.vol.getattr(dir) {
                Ok(a) => {
                    if reply.add(INodeNo(dir), 1, ".", &ttl, &file_attr(&a), Generation(0)) {
                        return reply.ok();
                    }
                }
                Err(e) => return reply.error(err(&e)),
            }
        }
        if offset < 2 {
            let pa = self.vol.parent_of(dir).and_then(|p| self.vol.getattr(p));
            match pa {
                Ok(a) => {
                    if reply.add(INodeNo(a.ino), 2, "..", &ttl, &file_attr(&a), Generation(0)) {
                        return reply.ok();
                    }
                }
                Err(e) => return reply.error(err(&e)),
            }
        }
        let mut after = if offset < 3 { 0 } else { offset };
        // Entries are collected under the directory's lock, then their
        // attributes fetched and pinned without it (lock order).
        loop {
            let batch = match self.readdir_entries(dir, after, 64) {
                Ok(b) => b,
                Err(e) => return reply.error(err(&e)),
            };
            if batch.is_empty() {
                return reply.ok();
            }
            for e in batch {
                after = e.cookie;
                // Each entry (but "." and "..") counts as a lookup: the
                // name's inode now, pinned with its binding (the number
                // listed may have been freed and reused since).
                let Ok(a) = self.vol.lookup_pinned(dir, &e.name) else {
                    continue; // removed since: as if read before
                };
                if reply.add(
                    INodeNo(a.ino),
                    e.cookie,
                    OsStr::from_bytes(&e.name),
                    &ttl,
                    &file_attr(&a),
                    Generation(0),
                ) {
                    // Did not fit: not handed to the kernel.
                    self.vol.unpin(a.ino, 1);
                    return reply.ok();
                }
                self.kernel_got(a.ino);
            }
        }
    }
}
