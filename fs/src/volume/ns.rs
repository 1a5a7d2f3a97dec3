//! Namespace operations: directories are chains of dirent records whose
//! payload is the name; every change is one commit (a publish, or a journal
//! of several).
//!
//! Locking, so that changes in different directories run side by side
//! (their commits' fences included): a change write-locks the inodes it
//! touches, in ascending inode number, and makes every check under those
//! locks. What it found by a lookup before locking (the inode a name leads
//! to) it checks again once locked and, if the name has moved, looks up
//! again. (`remove`, a rename within one directory and `rx_link` first try
//! a fast path: the directory write-locked, the lookup under it, and the
//! other inodes taken only if free, never waited for out of order.) Only
//! a rename between two directories takes a volume-wide lock,
//! `Volume::renames`, first: it alone moves directories to another parent,
//! so its loop check (is the target below the directory moved?) sees no
//! other move. `Volume::ns` (which directory is
//! in which) is a leaf, held for a map access and never while waiting for
//! another lock.

use super::failstop::OrStop;

use pktfs_layout::{FileType, RecordId};

use super::commit::Commit;
use super::digest::{Bound, Precondition};
use super::{check_name, now_ns, Attr, DirEntry, Inode, InodeRef, InodeWrite, Volume, MAX_NLINK};
use crate::error::{FsError, Result};

mod dirent;
#[cfg(test)]
mod lock_tests;
mod node;
mod rename;
pub use rename::RenameFlags;

/// The set-group-ID bit of a mode.
pub(crate) const S_ISGID: u32 = 0o2000;

/// Cookies 1 and 2 are left for "." and ".." in readdir.
pub const FIRST_COOKIE: u64 = 3;

/// An inode's number and its in-memory inode.
type InodeArc = (u32, InodeRef);

/// Write locks on several inodes, taken in ascending inode order.
struct Locked<'a> {
    guards: Vec<(u32, InodeWrite<'a>)>,
}

impl<'a> Locked<'a> {
    fn new(arcs: &'a [(u32, InodeRef)]) -> Result<Locked<'a>> {
        // `arcs` is sorted by inode number and deduplicated by the caller.
        Ok(Locked {
            guards: arcs
                .iter()
                .map(|(n, a)| Ok((*n, super::wlock(a)?)))
                .collect::<Result<_>>()?,
        })
    }
    fn get(&mut self, ino: u32) -> &mut Inode {
        &mut self
            .guards
            .iter_mut()
            .find(|(n, _)| *n == ino)
            .expect("inode locked")
            .1
    }
}

/// How often a namespace change looks a name up again when, by the time
/// it held the locks, the name had moved (each retry needs another thread
/// to have changed that very name in between: someone made progress).
pub(super) const BINDING_RETRIES: usize = 64;

impl Inode {
    /// The inode a directory's `name` leads to.
    pub(crate) fn child(&self, name: &[u8]) -> Option<u32> {
        self.names.get(name).map(|c| self.data[c].r.dirent_ino())
    }
    /// [`Self::child`] and its type, as the dirent records it.
    pub(super) fn child_kind(&self, name: &[u8]) -> Option<(u32, FileType)> {
        self.names.get(name).map(|c| {
            let r = &self.data[c].r;
            (
                r.dirent_ino(),
                FileType::from_dtype(r.dirent_dtype()).unwrap_or(FileType::Regular),
            )
        })
    }
}

/// For inodes found by a lookup made before their locks: `None` where
/// one has been freed since ("not found"; the caller looks again, as its
/// number may already name another inode).
pub(in crate::volume) fn unless_freed<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(x) => Ok(Some(x)),
        Err(FsError::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Write-lock `a` only if no one holds it: the fast paths lock a child
/// while holding its directory, whatever their numbers, so they must
/// never wait (a wait out of number order could deadlock). `None` (taken,
/// freed, or poisoned) sends the caller to its ordered path, which waits
/// and reports poisoning.
pub(in crate::volume) fn try_wlock(a: &InodeRef) -> Option<InodeWrite<'_>> {
    a.try_write().filter(|g| !g.dead)
}

/// Who a new inode belongs to and the mode asked for it (see
/// [`Volume::create_node`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewMode {
    /// The mode asked for (permission bits, setuid/setgid/sticky).
    pub perm: u32,
    /// The creator's umask, applied when the directory has no default ACL.
    pub umask: u32,
    pub uid: u32,
    pub gid: u32,
}

impl NewMode {
    /// `perm` as it is (no umask).
    pub fn plain(perm: u32, uid: u32, gid: u32) -> NewMode {
        NewMode {
            perm,
            umask: 0,
            uid,
            gid,
        }
    }
}

impl Volume {
    fn arcs(&self, inos: &[u32]) -> Result<Vec<InodeArc>> {
        let mut v: Vec<u32> = inos.to_vec();
        v.sort_unstable();
        v.dedup();
        v.into_iter()
            .map(|n| Ok((n, self.inode(n as u64)?)))
            .collect()
    }

    fn child_of(&self, dir: u64, name: &[u8]) -> Result<Option<(u32, FileType)>> {
        let d = self.inode(dir)?;
        let d = super::rlock(&d)?;
        if d.attr.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        Ok(d.child_kind(name))
    }

    /// Find `name` in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        if name.len() > pktfs_layout::NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        // The parent's lock is released before the child's is taken, so
        // lookups never hold two inode locks out of order. In between, a
        // change may replace the name (a rename or an upload linked over
        // it) and free the file it led to: that file is then gone, or no
        // longer linked (nlink 0, or its number already reused by an
        // unnamed file), while the name leads elsewhere. Look again rather
        // than answer "not found" for a name that existed throughout.
        for _ in 0..BINDING_RETRIES {
            let Some((ino, _)) = self.child_of(parent, name)? else {
                return Err(FsError::NotFound);
            };
            match self.getattr(ino as u64) {
                Err(FsError::NotFound) => continue,
                Ok(a) if a.nlink == 0 => continue,
                r => return r,
            }
        }
        Err(FsError::Contended("the name"))
    }

    /// Find `name` in directory `parent` and say what it is, from the
    /// dirent alone (no attributes: the child is not looked up). For path
    /// walks that only need to know "a directory, and which".
    pub fn lookup_kind(&self, parent: u64, name: &[u8]) -> Result<(u64, FileType)> {
        if name.len() > pktfs_layout::NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        match self.child_of(parent, name)? {
            Some((ino, kind)) => Ok((ino as u64, kind)),
            None => Err(FsError::NotFound),
        }
    }

    /// The parent of a directory (the root is its own parent).
    pub fn parent_of(&self, dir: u64) -> Result<u64> {
        let d = self.inode(dir)?;
        let d = super::rlock(&d)?;
        if d.attr.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        Ok(d.attr.parent as u64)
    }

    /// Visit the entries after `after` (0 = from the start) in cookie order
    /// until `f` returns false. Cookies stay valid while the directory
    /// changes: an entry keeps its cookie until it is removed.
    ///
    /// `f` runs under the directory's read lock, so it must not call into
    /// the Volume: a lookup in the same directory would wait for that lock
    /// again (and deadlock once a writer queues between the two), which
    /// debug builds refuse (`lockrank`). Collect first ([`Self::list_dir`]).
    pub fn readdir(&self, dir: u64, after: u64, mut f: impl FnMut(DirEntry) -> bool) -> Result<()> {
        let d = self.inode(dir)?;
        let d = super::rlock(&d)?;
        if d.attr.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        for (&cookie, rec) in d.data.range(after.saturating_add(1)..) {
            let e = DirEntry {
                name: self.slice_bytes(rec.slice()).to_vec(),
                ino: rec.r.dirent_ino() as u64,
                kind: FileType::from_dtype(rec.r.dirent_dtype()).unwrap_or(FileType::Regular),
                cookie,
            };
            if !f(e) {
                break;
            }
        }
        Ok(())
    }

    /// Convenience: all entries.
    pub fn list_dir(&self, dir: u64) -> Result<Vec<DirEntry>> {
        let mut v = Vec::new();
        self.readdir(dir, 0, |e| {
            v.push(e);
            true
        })?;
        Ok(v)
    }

    /// Create a regular file, FIFO, socket or device node. `perm` is the
    /// mode as given (no umask); in a directory with a default ACL the new
    /// inode inherits it and `perm` is masked by it ([`Self::create_node`]).
    #[allow(clippy::too_many_arguments)] // mirrors mknod(2)'s own arguments
    pub fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        perm: u32,
        uid: u32,
        gid: u32,
        rdev: u32,
    ) -> Result<Attr> {
        if matches!(kind, FileType::Directory | FileType::Symlink) {
            return Err(FsError::Invalid("use mkdir/symlink"));
        }
        self.make_node(
            parent,
            name,
            kind,
            NewMode::plain(perm, uid, gid),
            rdev,
            None,
            0,
        )
    }

    /// Create a regular file (`perm` as for [`Self::mknod`]).
    pub fn create(&self, parent: u64, name: &[u8], perm: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.make_node(
            parent,
            name,
            FileType::Regular,
            NewMode::plain(perm, uid, gid),
            0,
            None,
            0,
        )
    }

    /// Create a directory (`perm` as for [`Self::mknod`]; a default ACL of
    /// `parent` becomes the new directory's default ACL too).
    pub fn mkdir(&self, parent: u64, name: &[u8], perm: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.make_node(
            parent,
            name,
            FileType::Directory,
            NewMode::plain(perm, uid, gid),
            0,
            None,
            0,
        )
    }

    pub fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.make_symlink(parent, name, target, uid, gid, 0)
    }

    /// [`Self::symlink`], the new inode starting with `pins`.
    pub(super) fn make_symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
        pins: u64,
    ) -> Result<Attr> {
        if target.is_empty() {
            return Err(FsError::NotFound);
        }
        if target.len() > 4095 {
            return Err(FsError::NameTooLong);
        }
        self.make_node(
            parent,
            name,
            FileType::Symlink,
            NewMode::plain(0o777, uid, gid),
            0,
            Some(target),
            pins,
        )
    }

    /// Create a regular file, directory, FIFO, socket or device node as
    /// open(2)/mkdir(2)/mknod(2) do on a local file system: `m.perm` is
    /// the mode asked for; in a directory with a default ACL the new inode
    /// inherits it (and its mode is masked by it), elsewhere `m.umask` is
    /// taken away. The FUSE mount uses this (the kernel leaves the umask
    /// to the file system when ACLs are on). `create`, `mkdir` and
    /// `mknod` are this with no umask.
    pub fn create_node(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        m: NewMode,
        rdev: u32,
    ) -> Result<Attr> {
        self.make_plain_node(parent, name, kind, m, rdev, 0)
    }

    /// [`Self::create_node`], the new inode starting with `pins`.
    pub(super) fn make_plain_node(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        m: NewMode,
        rdev: u32,
        pins: u64,
    ) -> Result<Attr> {
        if kind == FileType::Symlink {
            return Err(FsError::Invalid("use symlink"));
        }
        self.make_node(parent, name, kind, m, rdev, None, pins)
    }

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        let i = super::rlock(&i)?;
        if i.attr.kind != FileType::Symlink {
            return Err(FsError::Invalid("not a symlink"));
        }
        // The size comes from the media: check it before trusting it with an
        // allocation, and the target bytes before handing them out.
        let damaged = |why: String| FsError::DamagedInode { ino, why };
        if i.attr.size > 4095 {
            return Err(damaged(format!(
                "symlink size {} is over 4095 bytes",
                i.attr.size
            )));
        }
        let mut out = Vec::with_capacity(i.attr.size as usize);
        for r in i.data.values() {
            if r.r.file_off != out.len() as u64 {
                return Err(damaged("a gap in the symlink target".into()));
            }
            self.verify_rec(&i, r)?;
            out.extend_from_slice(self.slice_bytes(r.slice()));
        }
        if out.len() as u64 != i.attr.size {
            return Err(damaged("symlink target shorter than its size".into()));
        }
        Ok(out)
    }

    pub fn unlink(&self, parent: u64, name: &[u8]) -> Result<()> {
        self.remove(parent, name, Some(false), None).map(|_| ())
    }

    /// Remove `parent/name`, a file or an empty directory (whichever it
    /// is), if `cond` holds for it: checked under the locks that make the
    /// removal, so a concurrent replacement cannot come in between (an
    /// HTTP `DELETE` with `If-Match`). A name that is absent is
    /// [`FsError::PreconditionFailed`] when `cond` refuses
    /// [`Bound::Absent`], else [`FsError::NotFound`]. Returns the removed
    /// inode.
    pub fn remove_if(
        &self,
        parent: u64,
        name: &[u8],
        cond: Option<Precondition<'_>>,
    ) -> Result<u64> {
        if name == b"." || name == b".." {
            return Err(FsError::Invalid("removal of . or .."));
        }
        self.remove(parent, name, None, cond)
    }

    pub fn rmdir(&self, parent: u64, name: &[u8]) -> Result<()> {
        if name == b"." {
            return Err(FsError::Invalid("rmdir of ."));
        }
        if name == b".." {
            return Err(FsError::NotEmpty);
        }
        self.remove(parent, name, Some(true), None).map(|_| ())
    }

    /// Remove an entry: a directory (`want_dir` Some(true)), anything
    /// else (Some(false)), or whichever it is (None); under `cond` when
    /// given. Returns the removed inode.
    fn remove(
        &self,
        parent: u64,
        name: &[u8],
        want_dir: Option<bool>,
        cond: Option<Precondition<'_>>,
    ) -> Result<u64> {
        self.check_writable()?;
        if name.len() > pktfs_layout::NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        // Absent under the parent's lock: absent at a point in time, which
        // is what a failed removal reports.
        let absent = || match cond {
            Some(c) if !c(&Bound::Absent) => Err(FsError::PreconditionFailed),
            _ => Err(FsError::NotFound),
        };
        let kind_ok = |ckind: FileType| {
            let dir = ckind == FileType::Directory;
            match want_dir {
                Some(true) if !dir => Err(FsError::NotDir),
                Some(false) if dir => Err(FsError::IsDir),
                _ => Ok(dir),
            }
        };
        // Fast path: the parent write-locked and the name looked up under
        // it, the child taken if no one holds it.
        {
            // Declared before the guards, so that they outlive them.
            let (parc, carc);
            parc = self.inode(parent)?;
            let p = super::wlock(&parc)?;
            if p.attr.kind != FileType::Directory {
                return Err(FsError::NotDir);
            }
            let Some((cino, ckind)) = p.child_kind(name) else {
                return absent();
            };
            let dir = kind_ok(ckind)?;
            carc = self.inode(cino as u64).ok();
            if let Some(c) = carc.as_ref().and_then(try_wlock) {
                let mut l = Locked {
                    guards: vec![(parent as u32, p), (cino, c)],
                };
                return self.remove_locked(&mut l, parent as u32, name, cino, dir, cond);
            };
        }
        // Look up, lock in number order, and check that the name still
        // leads where it did: no lock is held between the lookup and the
        // locks, so a concurrent change of this very name sends us round
        // again.
        for _ in 0..BINDING_RETRIES {
            let Some((cino, ckind)) = self.child_of(parent, name)? else {
                return absent();
            };
            let dir = kind_ok(ckind)?;
            let Some(arcs) = unless_freed(self.arcs(&[parent as u32, cino]))? else {
                continue; // the child was freed since the lookup
            };
            let Some(mut l) = unless_freed(Locked::new(&arcs))? else {
                continue; // the child was freed since the lookup
            };
            if l.get(parent as u32).child(name) != Some(cino) {
                continue;
            }
            return self.remove_locked(&mut l, parent as u32, name, cino, dir, cond);
        }
        Err(FsError::Contended("the name"))
    }

    /// [`Self::remove`] with the parent and the child `cino` (which `name`
    /// leads to) write-locked.
    fn remove_locked(
        &self,
        l: &mut Locked<'_>,
        parent: u32,
        name: &[u8],
        cino: u32,
        dir: bool,
        cond: Option<Precondition<'_>>,
    ) -> Result<u64> {
        if let Some(c) = cond {
            if !c(&self.bound_locked(l.get(cino))?) {
                return Err(FsError::PreconditionFailed);
            }
        }
        if dir && !l.get(cino).names.is_empty() {
            return Err(FsError::NotEmpty);
        }
        let now = now_ns();
        let mut commit = Commit::new();
        let p = l.get(parent);
        let cookie = p.names[name];
        self.unlink_dirent(&mut commit, p, cookie);
        let mut pa = p.attr;
        pa.mtime_ns = now;
        pa.ctime_ns = now;
        if dir {
            pa.nlink -= 1;
        }
        self.set_attr(&mut commit, p, pa);
        let c = l.get(cino);
        let mut ca = c.attr;
        ca.nlink = if dir { 0 } else { ca.nlink.saturating_sub(1) };
        ca.ctime_ns = now;
        // Unreachable after the commit with no link left, so nothing needs
        // persisting, unless something keeps it open (pins): its slot then
        // stays the file's attributes for direct readers (live.rs).
        if ca.nlink > 0 || c.pins > 0 {
            self.set_attr(&mut commit, c, ca);
        } else {
            c.attr = ca;
        }
        commit.apply(self);
        if dir {
            self.ns.lock().or_stop().dir_parent.remove(&cino);
        }
        let c = l.get(cino);
        if c.attr.nlink == 0 && c.pins == 0 {
            self.free_inode_storage(c);
        }
        Ok(cino as u64)
    }

    /// Add a hard link `newparent/newname` to `ino`.
    pub fn link(&self, ino: u64, newparent: u64, newname: &[u8]) -> Result<Attr> {
        self.check_writable()?;
        check_name(newname)?;
        // Nothing is looked up: both inodes are given, and every check is
        // made under their locks.
        let arcs = self.arcs(&[ino as u32, newparent as u32])?;
        if ino == newparent {
            return Err(FsError::NotPermitted("hard link to a directory"));
        }
        let mut l = Locked::new(&arcs)?;
        let c = l.get(ino as u32);
        if c.attr.kind == FileType::Directory {
            return Err(FsError::NotPermitted("hard link to a directory"));
        }
        if c.attr.nlink == 0 {
            return Err(FsError::NotFound);
        }
        if c.attr.nlink >= MAX_NLINK {
            return Err(FsError::TooManyLinks);
        }
        let ckind = c.attr.kind;
        let p = l.get(newparent as u32);
        if p.attr.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        if p.attr.nlink == 0 {
            return Err(FsError::NotFound);
        }
        if p.names.contains_key(newname) {
            return Err(FsError::Exists);
        }
        let did = self.alloc_records(1)?[0];
        let cookie = p.next_seq.max(FIRST_COOKIE);
        let dirent = match self.new_dirent(
            did,
            newname,
            None,
            ino as u32,
            ckind,
            cookie,
            RecordId::NONE,
            None,
        ) {
            Ok(d) => d,
            Err(e) => {
                self.free_records_now(&[did]);
                return Err(e);
            }
        };
        let now = now_ns();
        let mut commit = Commit::new();
        commit.store(
            p.ino,
            self.data_link_before(p, cookie),
            did.0,
            Some((self.geo.record_pos(did).0, 64)),
        );
        let mut pa = p.attr;
        pa.mtime_ns = now;
        pa.ctime_ns = now;
        self.set_attr(&mut commit, p, pa);
        p.data.insert(cookie, dirent);
        p.names.insert(newname.into(), cookie);
        p.next_seq = cookie + 1;
        let c = l.get(ino as u32);
        let mut ca = c.attr;
        ca.nlink += 1;
        ca.ctime_ns = now;
        self.set_attr(&mut commit, c, ca);
        commit.apply(self);
        Ok(self.attr_of(l.get(ino as u32)))
    }
}
