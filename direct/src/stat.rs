//! A file's attributes as a direct reader reports them: the same values
//! the mount's `getattr` gives (pktfs_fs `Volume::attr_of`), from one
//! consistent view of the inode.

use pktfs_layout::FileType;

use crate::error::Result;
use crate::index::Index;
use crate::shared::Shared;

/// `stat` of a file in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub ino: u64,
    pub kind: FileType,
    /// Permission bits (and set-id, sticky), without the type.
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    /// 512-byte blocks the file's records hold.
    pub blocks: u64,
    pub blksize: u32,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub rdev: u32,
}

impl Stat {
    /// `st_mode`: the type and the permission bits.
    pub fn mode(&self) -> u32 {
        self.kind.mode_bits() | self.perm
    }

    pub(crate) fn of(ino: u32, ix: &Index, buffer_size: u32) -> Stat {
        let a = &ix.attr;
        let (size, bytes) = match a.kind {
            FileType::Directory => (
                (ix.dirents.len() as u64 + 2) * 32,
                ix.dirents.len() as u64 * 64,
            ),
            FileType::Regular | FileType::Symlink => (a.size, ix.data_bytes),
            _ => (a.size, 0),
        };
        Stat {
            ino: ino as u64,
            kind: a.kind,
            perm: a.mode & 0o7777,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            size,
            blocks: bytes.div_ceil(512),
            blksize: buffer_size.max(4096),
            atime_ns: a.atime_ns,
            mtime_ns: a.mtime_ns,
            ctime_ns: a.ctime_ns,
            rdev: a.rdev,
        }
    }
}

impl Shared {
    pub(crate) fn stat(&self, ino: u32) -> Result<Stat> {
        self.consistent(ino, |s| {
            let ix = self.index_cached(ino, s)?;
            Ok(Stat::of(ino, &ix, self.g.buffer_size_bytes))
        })
    }
}
