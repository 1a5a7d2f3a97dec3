//! Permission checks as Linux makes them for a local file system, for the
//! callers that reach the Volume without the kernel in between (netpath's
//! HTTP server acting as a configured identity). The mount does not use
//! this: there the kernel checks (`default_permissions`, FUSE_POSIX_ACL),
//! and a test compares the two (pktfs/tests/fuse_posix_acl.rs).
//!
//! [`permitted`] is `generic_permission` (fs/namei.c) with
//! `posix_acl_permission` (fs/posix_acl.c), step for step:
//! - the owner gets the mode's owner bits (ACLs do not matter);
//! - with an access ACL, and only when the mode's group bits (the mask)
//!   are not all clear, the ACL decides: a named user entry (masked), else
//!   the owning group's and the named groups' entries the caller is in (the
//!   first that grants all, masked; one matching but none granting denies),
//!   else other;
//! - without one (or with the group bits clear), the group bits when the
//!   caller is in the file's group (primary or supplementary) and they
//!   differ from other's in a bit asked for, else other's bits;
//! - root (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) then overrides a refusal:
//!   on directories always, on anything else for read and write, and for
//!   execute only if some execute bit is set.
//!
//! And the sticky-directory rule of `may_delete` (`check_sticky`): in a
//! directory with S_ISVTX only the entry's owner, the directory's owner or
//! root may remove or replace an entry.

use super::acl::{
    Acl, ACL_ACCESS_XATTR, TAG_GROUP, TAG_GROUP_OBJ, TAG_MASK, TAG_OTHER, TAG_USER, TAG_USER_OBJ,
};
use super::{Inode, Volume};
use crate::error::{FsError, Result};
use crate::FileType;

/// The sticky bit (S_ISVTX).
pub const S_ISVTX: u32 = 0o1000;

/// Who asks: the ids a process would have (fsuid, fsgid, supplementary
/// groups). uid 0 has the capabilities root has (CAP_DAC_OVERRIDE,
/// CAP_DAC_READ_SEARCH, CAP_FOWNER).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, sorted, without duplicates.
    groups: Vec<u32>,
}

impl Cred {
    /// `uid`/`gid` with supplementary `groups` (in any order).
    pub fn new(uid: u32, gid: u32, groups: impl IntoIterator<Item = u32>) -> Cred {
        let mut groups: Vec<u32> = groups.into_iter().collect();
        groups.sort_unstable();
        groups.dedup();
        Cred { uid, gid, groups }
    }

    /// Root, in group 0.
    pub fn root() -> Cred {
        Cred::new(0, 0, [])
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// The supplementary groups, sorted.
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    /// `in_group_p`: the primary group or a supplementary one.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.binary_search(&gid).is_ok()
    }
}

/// What is asked for: any of read, write, execute (search on a
/// directory), as `MAY_READ | MAY_WRITE | MAY_EXEC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access(u8);

impl Access {
    pub const READ: Access = Access(4);
    pub const WRITE: Access = Access(2);
    pub const EXEC: Access = Access(1);
    /// Search (on a directory) is execute.
    pub const SEARCH: Access = Access(1);
    /// What creating, removing or replacing an entry needs on its directory.
    pub const WRITE_SEARCH: Access = Access(3);

    /// From `rwx` bits (0..=7; higher bits are dropped).
    pub const fn from_bits(bits: u32) -> Access {
        Access((bits & 7) as u8)
    }

    /// The `rwx` bits (4, 2, 1).
    pub const fn bits(self) -> u32 {
        self.0 as u32
    }

    pub const fn union(self, o: Access) -> Access {
        Access(self.0 | o.0)
    }

    /// For messages: "r", "wx", ...
    pub fn letters(self) -> &'static str {
        ["", "x", "w", "wx", "r", "rx", "rw", "rwx"][self.0 as usize & 7]
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, o: Access) -> Access {
        self.union(o)
    }
}

/// An inode's access ACL as a permission check sees it: absent, a valid
/// one (its mask and owner/other entries already the mode's), or one that
/// does not parse (then nothing is granted through it: only the owner and
/// root get in, as the mode's owner bits and the override say).
#[derive(Debug)]
pub enum AclView {
    None,
    Acl(Acl),
    Malformed,
}

/// `generic_permission`: may `who` have `want` on an inode of this kind,
/// mode (permission bits; the type bits are ignored), owner and group,
/// whose access ACL `acl()` gives? `acl` is called only when the ACL can
/// matter (the caller is not the owner and the mode's group bits are not
/// all clear), so an inode without xattrs costs no ACL read.
pub fn permitted(
    kind: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    acl: impl FnOnce() -> AclView,
    who: &Cred,
    want: Access,
) -> bool {
    let want_bits = want.bits();
    if want_bits == 0 {
        return true;
    }
    if acl_permission_check(mode, uid, gid, acl, who, want_bits) {
        return true;
    }
    if !who.is_root() {
        return false;
    }
    // The capabilities' override.
    if kind == FileType::Directory {
        return true;
    }
    want_bits & Access::EXEC.bits() == 0 || mode & 0o111 != 0
}

/// `acl_permission_check` (fs/namei.c).
fn acl_permission_check(
    mode: u32,
    uid: u32,
    gid: u32,
    acl: impl FnOnce() -> AclView,
    who: &Cred,
    want: u32,
) -> bool {
    if who.uid == uid {
        return want & !(mode >> 6) & 7 == 0;
    }
    if mode & 0o070 != 0 {
        match acl() {
            AclView::None => {}
            AclView::Acl(a) => return posix_acl_permission(&a, uid, gid, who, want),
            AclView::Malformed => return false,
        }
    }
    let mut m = mode;
    // Group bits that differ from other's in what is asked: is the caller
    // in the group? (Otherwise either gives the same answer.)
    if want & (mode ^ (mode >> 3)) & 7 != 0 && who.in_group(gid) {
        m >>= 3;
    }
    want & !m & 7 == 0
}

/// `posix_acl_permission` (fs/posix_acl.c), on the entries in canonical
/// order (as [`Acl::parse`] keeps them, and as the kernel requires).
fn posix_acl_permission(acl: &Acl, uid: u32, gid: u32, who: &Cred, want: u32) -> bool {
    let entries = acl.entries();
    let mask_of = |from: usize| -> Option<u32> {
        entries[from + 1..]
            .iter()
            .find(|e| e.tag == TAG_MASK)
            .map(|e| e.perm as u32)
    };
    let mut found = false;
    for (k, e) in entries.iter().enumerate() {
        let perm = e.perm as u32;
        match e.tag {
            TAG_USER_OBJ => {
                if who.uid == uid {
                    return perm & want == want;
                }
            }
            TAG_USER => {
                if e.id == who.uid {
                    let m = mask_of(k).unwrap_or(7);
                    return perm & m & want == want;
                }
            }
            TAG_GROUP_OBJ | TAG_GROUP => {
                let g = if e.tag == TAG_GROUP_OBJ { gid } else { e.id };
                if who.in_group(g) {
                    found = true;
                    if perm & want == want {
                        let m = mask_of(k).unwrap_or(7);
                        return perm & m & want == want;
                    }
                }
            }
            TAG_MASK => {}
            TAG_OTHER => {
                return !found && perm & want == want;
            }
            _ => return false,
        }
    }
    false
}

impl Volume {
    /// The access ACL of a locked inode as a permission check sees it.
    fn acl_view(&self, i: &Inode) -> AclView {
        if i.xnames.is_empty() {
            return AclView::None;
        }
        let Some(stored) = self.xattr_of(i, ACL_ACCESS_XATTR.as_bytes()) else {
            return AclView::None;
        };
        match Acl::parse(stored) {
            Ok(Some(a)) => AclView::Acl(a.with_mode(i.attr.mode)),
            Ok(None) => AclView::None,
            Err(e) => {
                tracing::warn!(
                    "inode {}: its stored access ACL does not parse ({e}); it grants nothing \
                     (remove it with setfacl -b)",
                    i.ino
                );
                AclView::Malformed
            }
        }
    }

    /// [`permitted`] on a locked inode.
    pub(crate) fn may(&self, i: &Inode, who: &Cred, want: Access) -> bool {
        let a = &i.attr;
        permitted(
            a.kind,
            a.mode & 0o7777,
            a.uid,
            a.gid,
            || self.acl_view(i),
            who,
            want,
        )
    }

    /// May `who` have `want` on `ino`, by its mode, owner, group and access
    /// ACL as they are now (as the kernel's `inode_permission` decides for
    /// a local file system; see this module's notes)?
    pub fn permits(&self, ino: u64, who: &Cred, want: Access) -> Result<bool> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Ok(self.may(&i, who, want))
    }

    /// Which of the bits of `want` `who` lacks on `ino` (each checked on
    /// its own; empty: all granted). For messages.
    pub fn missing(&self, ino: u64, who: &Cred, want: Access) -> Result<Access> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        let mut lacks = 0;
        for b in [4, 2, 1] {
            if want.bits() & b != 0 && !self.may(&i, who, Access::from_bits(b)) {
                lacks |= b;
            }
        }
        Ok(Access::from_bits(lacks))
    }

    /// [`Self::lookup_kind`] as `who`: search permission on `parent` is
    /// needed (checked under the lock the lookup takes), else
    /// [`FsError::Access`], whether or not the name exists.
    pub fn lookup_kind_as(&self, parent: u64, name: &[u8], who: &Cred) -> Result<(u64, FileType)> {
        if name.len() > pktfs_layout::NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let d = self.inode(parent)?;
        let d = super::rlock(&d)?;
        if d.attr.kind != FileType::Directory {
            return Err(FsError::NotDir);
        }
        if !self.may(&d, who, Access::SEARCH) {
            return Err(FsError::Access);
        }
        match d.child_kind(name) {
            Some((ino, kind)) => Ok((ino as u64, kind)),
            None => Err(FsError::NotFound),
        }
    }

    /// What a path names, walked from the root one name at a time
    /// (symlinks are not followed; `.` and `..` are names like any other
    /// and find nothing). With `who`, every directory walked needs search
    /// permission for that identity ([`FsError::Access`] otherwise), as the
    /// kernel's path walk checks it; a name under something that is not a
    /// directory is [`FsError::NotDir`]. The one path walk of pktfs: the
    /// tools, the servers and the control socket all resolve through it.
    pub fn resolve_parts<'p>(
        &self,
        parts: impl IntoIterator<Item = &'p [u8]>,
        who: Option<&Cred>,
    ) -> Result<crate::volume::Attr> {
        let mut a = self.getattr(self.root())?;
        for name in parts {
            if a.kind != pktfs_layout::FileType::Directory {
                return Err(FsError::NotDir);
            }
            a = match who {
                Some(c) => self.lookup_as(a.ino, name, c)?,
                None => self.lookup(a.ino, name)?,
            };
        }
        Ok(a)
    }

    /// [`Self::resolve_parts`] of a `/`-separated path (`/a/b`, `a/b/`;
    /// empty parts are skipped, `/` is the root), as the image's owner
    /// would (no permission checks).
    pub fn resolve_path(&self, path: &str) -> Result<crate::volume::Attr> {
        self.resolve_parts(
            path.split('/').filter(|p| !p.is_empty()).map(str::as_bytes),
            None,
        )
    }

    /// `mkdir -p`: the directory `parts` names, walked from the root as
    /// [`Self::resolve_parts`] walks, each missing one made on the way
    /// with `perm`, owned by `uid`:`gid`. With `who`, every directory
    /// walked needs search permission and each one a directory is made in
    /// needs write and search ([`FsError::Access`] otherwise); None: as
    /// the image's owner, no checks. A directory made by someone else
    /// between the look and the make is taken as found; a name that is not
    /// a directory is [`FsError::NotDir`]. `made(parent, name, ino)` hears
    /// of each directory made (a mount's cache is told of it).
    pub fn make_dirs<'p>(
        &self,
        parts: impl IntoIterator<Item = &'p [u8]>,
        (perm, uid, gid): (u32, u32, u32),
        who: Option<&Cred>,
        made: &mut dyn FnMut(u64, &[u8], u64),
    ) -> Result<u64> {
        let mut dir = self.root();
        for name in parts {
            let found = match who {
                Some(c) => self.lookup_kind_as(dir, name, c),
                None => self.lookup_kind(dir, name),
            };
            dir = match found {
                Ok((ino, FileType::Directory)) => ino,
                Ok(_) => return Err(FsError::NotDir),
                Err(FsError::NotFound) => {
                    if let Some(c) = who {
                        if !self.permits(dir, c, Access::WRITE_SEARCH)? {
                            return Err(FsError::Access);
                        }
                    }
                    match self.mkdir(dir, name, perm, uid, gid) {
                        Ok(a) => {
                            made(dir, name, a.ino);
                            a.ino
                        }
                        Err(FsError::Exists) => match self.lookup_kind(dir, name)? {
                            (ino, FileType::Directory) => ino,
                            _ => return Err(FsError::NotDir),
                        },
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
        }
        Ok(dir)
    }

    /// [`Self::lookup`] as `who` (search permission on `parent`, as
    /// [`Self::lookup_kind_as`]).
    pub fn lookup_as(&self, parent: u64, name: &[u8], who: &Cred) -> Result<crate::volume::Attr> {
        if !self.permits(parent, who, Access::SEARCH)? {
            return Err(FsError::Access);
        }
        self.lookup(parent, name)
    }

    /// May `who` create, remove or replace the entry `name` of directory
    /// `dir` (`may_create` / `may_delete`)? Write and search on `dir`; and
    /// when `dir` is sticky and `name` exists, `who` must own the entry or
    /// `dir`, or be root. `Ok(None)`: yes; `Ok(Some(Denial))`: why not.
    /// A check before the change, not under its locks: a chmod, chown or
    /// replacement in between is not seen.
    pub fn may_change_entry(&self, dir: u64, name: &[u8], who: &Cred) -> Result<Option<Denial>> {
        let victim = {
            let arc = self.inode(dir)?;
            let d = super::rlock(&arc)?;
            if d.attr.kind != FileType::Directory {
                return Err(FsError::NotDir);
            }
            if !self.may(&d, who, Access::WRITE_SEARCH) {
                let mut lacks = 0;
                for b in [2, 1] {
                    if !self.may(&d, who, Access::from_bits(b)) {
                        lacks |= b;
                    }
                }
                return Ok(Some(Denial::Missing(Access::from_bits(lacks))));
            }
            if d.attr.mode & S_ISVTX == 0 || who.is_root() || d.attr.uid == who.uid {
                return Ok(None);
            }
            match d.child_kind(name) {
                Some((ino, _)) => ino as u64,
                None => return Ok(None),
            }
        };
        // The directory's lock is released before the entry's is taken
        // (lock order); an entry gone meanwhile is nothing to protect.
        match self.getattr(victim) {
            Ok(a) if a.uid != who.uid => Ok(Some(Denial::Sticky)),
            Ok(_) | Err(FsError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Why [`Volume::may_change_entry`] refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    /// These bits on the directory are not granted.
    Missing(Access),
    /// The directory is sticky and neither it nor the entry is the
    /// caller's.
    Sticky,
}
