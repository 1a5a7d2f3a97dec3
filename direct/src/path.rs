//! Names: resolving a path to an inode through the directories' dirent
//! chains, listing a directory, reading a symlink. Each directory is read
//! in a section of its own; a name that changes meanwhile is found as it
//! was at some moment, as a lookup racing a rename is anywhere.
//!
//! No permission is checked: a direct reader may read the image file, so
//! it may read every file in it (docs/DIRECT.md, "Who may read").

use pktfs_layout::{FileType, ROOT_INO};

use crate::error::{Error, Result};
use crate::shared::Shared;

/// Symlinks followed in one resolution before `Loop` (Linux's limit).
const MAX_SYMLINKS: u32 = 40;

/// An entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: u64,
    pub kind: FileType,
    /// The readdir cookie (stable while the directory changes).
    pub cookie: u64,
}

impl Shared {
    /// The inode (and its birth) `path` leads to, from the root. `follow`:
    /// follow a symlink in the last component too.
    pub(crate) fn resolve(&self, path: &str, follow: bool) -> Result<(u32, u64)> {
        let mut hops = 0u32;
        let mut todo: Vec<Vec<u8>> = components(path).rev().collect();
        let mut dir = ROOT_INO;
        let mut cur = (ROOT_INO, self.birth_of(ROOT_INO)?);
        while let Some(name) = todo.pop() {
            match &name[..] {
                b"." => continue,
                b".." => {
                    let parent = self.consistent(dir, |_| Ok(self.inode(dir)?.attr.parent))?;
                    dir = if parent == 0 { ROOT_INO } else { parent };
                    cur = (dir, self.birth_of(dir)?);
                    continue;
                }
                _ => {}
            }
            let (ino, kind) = self
                .lookup_in(dir, &name)?
                .ok_or_else(|| Error::NotFound(path.to_string()))?;
            let last = todo.is_empty();
            if kind == FileType::Symlink && (!last || follow) {
                hops += 1;
                if hops > MAX_SYMLINKS {
                    return Err(Error::Loop(path.to_string()));
                }
                let target = self.read_link(ino, path)?;
                if target.first() == Some(&b'/') {
                    return Err(Error::AbsoluteSymlink {
                        path: path.to_string(),
                        target: String::from_utf8_lossy(&target).into_owned(),
                    });
                }
                // The target's components come next, relative to `dir`.
                let t = String::from_utf8_lossy(&target).into_owned();
                todo.extend(components(&t).rev());
                continue;
            }
            if !last && kind != FileType::Directory {
                return Err(Error::NotDir(path.to_string()));
            }
            if kind == FileType::Directory {
                dir = ino;
            }
            cur = (ino, self.birth_of(ino)?);
        }
        Ok(cur)
    }

    fn birth_of(&self, ino: u32) -> Result<u64> {
        self.consistent(ino, |_| Ok(self.inode(ino)?.birth))
    }

    /// The entry `name` of directory `dir`, if any.
    fn lookup_in(&self, dir: u32, name: &[u8]) -> Result<Option<(u32, FileType)>> {
        self.consistent(dir, |s| {
            let ix = self.index_cached(dir, s)?;
            if ix.attr.kind != FileType::Directory {
                return Err(Error::NotDir(String::from_utf8_lossy(name).into_owned()));
            }
            Ok(ix.names.get(name).map(|&k| {
                let d = &ix.dirents[k];
                (
                    d.ino,
                    FileType::from_dtype(d.dtype).unwrap_or(FileType::Regular),
                )
            }))
        })
    }

    pub(crate) fn read_dir(&self, dir: u32, path: &str) -> Result<Vec<DirEntry>> {
        self.consistent(dir, |s| {
            let ix = self.index_cached(dir, s)?;
            if ix.attr.kind != FileType::Directory {
                return Err(Error::NotDir(path.to_string()));
            }
            Ok(ix
                .dirents
                .iter()
                .map(|d| DirEntry {
                    name: d.name.to_vec(),
                    ino: d.ino as u64,
                    kind: FileType::from_dtype(d.dtype).unwrap_or(FileType::Regular),
                    cookie: d.cookie,
                })
                .collect())
        })
    }

    pub(crate) fn read_link(&self, ino: u32, path: &str) -> Result<Vec<u8>> {
        let (bytes, marks) = self.consistent(ino, |s| {
            let ix = self.index_cached(ino, s)?;
            if ix.attr.kind != FileType::Symlink {
                return Err(Error::InvalidPath(format!("{path}: not a symlink")));
            }
            // A symlink's target is at most PATH_MAX bytes; a bigger size
            // is damage, not a reason to allocate.
            let size = ix.attr.size.min(4096) as usize;
            let mut out = vec![0u8; size];
            let (n, marks) = self.read_ix(ino, &ix, 0, &mut out)?;
            out.truncate(n);
            Ok((out, (ix, marks)))
        })?;
        let (ix, marks) = marks;
        for k in marks {
            ix.mark_verified(k, self);
        }
        Ok(bytes)
    }
}

/// The non-empty components of `path` (a leading `/` means the root,
/// which is where every path starts).
fn components(path: &str) -> impl DoubleEndedIterator<Item = Vec<u8>> + '_ {
    path.split('/')
        .filter(|c| !c.is_empty())
        .map(|c| c.as_bytes().to_vec())
}
