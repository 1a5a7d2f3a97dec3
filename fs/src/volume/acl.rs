//! POSIX access control lists, kept the way Linux's local file systems
//! keep them (fs/posix_acl.c), stored as two ordinary attributes in the
//! xattr chain (no format change): `system.posix_acl_access` and
//! `system.posix_acl_default`, in the kernel's xattr form (version 2,
//! little-endian `{tag: u16, perm: u16, id: u32}` entries).
//!
//! The mode is the one truth for the three entries it can express: the
//! stored access ACL's USER_OBJ, GROUP_OBJ-or-MASK and OTHER entries are
//! replaced by the mode's bits whenever the ACL is read. So a chmod is a
//! mode change alone, and the ACL and `stat` can never disagree, whatever
//! was stored by an older pktfs that kept ACLs as plain attributes.
//!
//! Setting an access ACL changes the mode in the same commit, and an ACL
//! the mode expresses exactly is not stored at all (as ext4 does). A new
//! inode in a directory with a default ACL gets its ACLs written before
//! the commit that names it, so no crash shows it without them.

use super::commit::Commit;
use super::xattr_chain::{NewXattr, XattrFlags};
use super::{Inode, Volume};
use crate::error::{FsError, Result};
use crate::FileType;

/// The access ACL's attribute name.
pub const ACL_ACCESS_XATTR: &str = "system.posix_acl_access";
/// The default ACL's attribute name (directories only).
pub const ACL_DEFAULT_XATTR: &str = "system.posix_acl_default";

const VERSION: u32 = 2;
const HEADER_BYTES: usize = 4;
const ENTRY_BYTES: usize = 8;

pub(super) const TAG_USER_OBJ: u16 = 0x01;
pub(super) const TAG_USER: u16 = 0x02;
pub(super) const TAG_GROUP_OBJ: u16 = 0x04;
pub(super) const TAG_GROUP: u16 = 0x08;
pub(super) const TAG_MASK: u16 = 0x10;
pub(super) const TAG_OTHER: u16 = 0x20;

/// The id stored in entries that name no one (USER_OBJ, GROUP_OBJ, MASK,
/// OTHER).
const NO_ID: u32 = u32::MAX;

/// The rwx bits of a mode; the rest (setuid, setgid, sticky) no ACL touches.
const RWX_ALL: u32 = 0o777;
const S_ISGID: u32 = 0o2000;

/// Which of an inode's two ACLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclKind {
    Access,
    Default,
}

impl AclKind {
    /// The ACL an attribute name stands for, if it names one.
    pub fn of_xattr(name: &[u8]) -> Option<AclKind> {
        if name == ACL_ACCESS_XATTR.as_bytes() {
            Some(AclKind::Access)
        } else if name == ACL_DEFAULT_XATTR.as_bytes() {
            Some(AclKind::Default)
        } else {
            None
        }
    }

    fn xattr(self) -> &'static [u8] {
        match self {
            AclKind::Access => ACL_ACCESS_XATTR.as_bytes(),
            AclKind::Default => ACL_DEFAULT_XATTR.as_bytes(),
        }
    }
}

/// One ACL entry: a tag, `rwx` permission bits (0..=7) and, for USER and
/// GROUP entries, the uid or gid it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u16,
    pub perm: u16,
    pub id: u32,
}

/// A valid ACL: entries in the canonical order (USER_OBJ, USER by id,
/// GROUP_OBJ, GROUP by id, MASK, OTHER), a MASK whenever there is a named
/// entry, no name twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<AclEntry>,
}

fn rank(tag: u16) -> u8 {
    match tag {
        TAG_USER_OBJ => 0,
        TAG_USER => 1,
        TAG_GROUP_OBJ => 2,
        TAG_GROUP => 3,
        TAG_MASK => 4,
        _ => 5, // TAG_OTHER; anything else is refused before sorting
    }
}

impl Acl {
    /// Parse the xattr form. `Ok(None)`: a header without entries, which
    /// setfacl and the kernel use to mean "no ACL". Anything malformed is
    /// `Invalid` (EINVAL), as the kernel's posix_acl_valid decides.
    pub fn parse(v: &[u8]) -> Result<Option<Acl>> {
        if v.len() < HEADER_BYTES || !(v.len() - HEADER_BYTES).is_multiple_of(ENTRY_BYTES) {
            return Err(FsError::Invalid("ACL: not a header and whole entries"));
        }
        let version = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
        if version != VERSION {
            return Err(FsError::Invalid("ACL: not version 2"));
        }
        let mut entries: Vec<AclEntry> = v[HEADER_BYTES..]
            .chunks_exact(ENTRY_BYTES)
            .map(|c| AclEntry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let mut counts = [0usize; 6];
        for e in &mut entries {
            if e.perm & !7 != 0 {
                return Err(FsError::Invalid("ACL: permission bits other than rwx"));
            }
            match e.tag {
                TAG_USER | TAG_GROUP => {
                    if e.id == NO_ID {
                        return Err(FsError::Invalid("ACL: a named entry without an id"));
                    }
                }
                // The id of an unnamed entry means nothing; keep it canonical.
                TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_MASK | TAG_OTHER => e.id = NO_ID,
                _ => return Err(FsError::Invalid("ACL: unknown entry tag")),
            }
            counts[rank(e.tag) as usize] += 1;
        }
        let named = counts[1] + counts[3];
        if counts[0] != 1 || counts[2] != 1 || counts[5] != 1 {
            return Err(FsError::Invalid(
                "ACL: needs exactly one owner, owning-group and other entry",
            ));
        }
        if counts[4] > 1 || (named > 0 && counts[4] == 0) {
            return Err(FsError::Invalid(
                "ACL: a mask is needed with named entries, and only one",
            ));
        }
        // libacl sends them sorted; sort anyway so lookups and equality do
        // not depend on the sender.
        entries.sort_by_key(|e| (rank(e.tag), e.id));
        if entries.windows(2).any(|w| {
            w[0].tag == w[1].tag && matches!(w[0].tag, TAG_USER | TAG_GROUP) && w[0].id == w[1].id
        }) {
            return Err(FsError::Invalid("ACL: a user or group named twice"));
        }
        Ok(Some(Acl { entries }))
    }

    /// The xattr form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_BYTES + ENTRY_BYTES * self.entries.len());
        v.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.entries {
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.extend_from_slice(&e.perm.to_le_bytes());
            v.extend_from_slice(&e.id.to_le_bytes());
        }
        v
    }

    pub fn entries(&self) -> &[AclEntry] {
        &self.entries
    }

    fn has_mask(&self) -> bool {
        self.entries.iter().any(|e| e.tag == TAG_MASK)
    }

    /// The three-entry ACL a mode expresses.
    pub fn from_mode(mode: u32) -> Acl {
        let e = |tag, shift: u32| AclEntry {
            tag,
            perm: ((mode >> shift) & 7) as u16,
            id: NO_ID,
        };
        Acl {
            entries: vec![e(TAG_USER_OBJ, 6), e(TAG_GROUP_OBJ, 3), e(TAG_OTHER, 0)],
        }
    }

    /// The rwx bits this ACL gives the mode (the group bits are the mask's
    /// when there is one), and whether the mode says all of it
    /// (posix_acl_equiv_mode: no named entries and no mask).
    pub fn mode_bits(&self) -> (u32, bool) {
        let mut mode = 0;
        let mut equiv = true;
        for e in &self.entries {
            let p = e.perm as u32;
            match e.tag {
                TAG_USER_OBJ => mode |= p << 6,
                TAG_GROUP_OBJ if !self.has_mask() => mode |= p << 3,
                TAG_MASK => {
                    mode |= p << 3;
                    equiv = false;
                }
                TAG_OTHER => mode |= p,
                TAG_USER | TAG_GROUP => equiv = false,
                _ => {}
            }
        }
        (mode, equiv)
    }

    /// This ACL with the entries the mode expresses set from `mode`
    /// (posix_acl_chmod): USER_OBJ, the MASK if there is one or else
    /// GROUP_OBJ, and OTHER.
    pub fn with_mode(&self, mode: u32) -> Acl {
        let mask = self.has_mask();
        let mut a = self.clone();
        for e in &mut a.entries {
            match e.tag {
                TAG_USER_OBJ => e.perm = ((mode >> 6) & 7) as u16,
                TAG_GROUP_OBJ if !mask => e.perm = ((mode >> 3) & 7) as u16,
                TAG_MASK => e.perm = ((mode >> 3) & 7) as u16,
                TAG_OTHER => e.perm = (mode & 7) as u16,
                _ => {}
            }
        }
        a
    }

    /// A new inode's access ACL from its directory's default ACL (`self`)
    /// and the mode asked for (posix_acl_create_masq): each class gets
    /// what both allow. Returns the mode (the bits outside rwx kept from
    /// `mode`) and the ACL, or `None` when the mode says all of it.
    pub fn create_masq(&self, mode: u32) -> (u32, Option<Acl>) {
        let mut a = self.clone();
        let mut rwx = mode & RWX_ALL;
        let mask = a.has_mask();
        for e in &mut a.entries {
            let shift = match e.tag {
                TAG_USER_OBJ => 6,
                TAG_MASK => 3,
                TAG_GROUP_OBJ if !mask => 3,
                TAG_OTHER => 0,
                _ => continue,
            };
            e.perm &= ((rwx >> shift) & 7) as u16;
            rwx = (rwx & !(7 << shift)) | ((e.perm as u32) << shift);
        }
        let (_, equiv) = a.mode_bits();
        ((mode & !RWX_ALL) | rwx, (!equiv).then_some(a))
    }
}

/// What a new inode in a directory gets: its mode and the ACL attributes
/// to write with it.
pub(crate) struct Inherited {
    pub mode: u32,
    pub xattrs: Vec<NewXattr>,
}

impl Volume {
    /// The mode and ACLs of a new `kind` inode asked for with `perm` in
    /// directory `p` (posix_acl_create): with a default ACL there, the new
    /// inode's access ACL is it masked by `perm` (and a new directory
    /// inherits the default ACL too); without, `perm` less `umask`.
    /// Symlinks get neither. A default ACL that does not parse counts as
    /// none, with a warning: creating files must not depend on it.
    pub(crate) fn inherit_acl(
        &self,
        p: &Inode,
        kind: FileType,
        perm: u32,
        umask: u32,
    ) -> Inherited {
        let perm = perm & 0o7777;
        if kind == FileType::Symlink {
            return Inherited {
                mode: perm,
                xattrs: Vec::new(),
            };
        }
        let stored = self.xattr_of(p, AclKind::Default.xattr());
        let default = match stored.map(Acl::parse) {
            Some(Ok(Some(d))) => d,
            Some(Err(e)) => {
                tracing::warn!(
                    "inode {}: its default ACL does not parse ({e}); new entries in it get \
                     the umask instead",
                    p.ino
                );
                return Inherited {
                    mode: perm & !(umask & RWX_ALL),
                    xattrs: Vec::new(),
                };
            }
            _ => {
                return Inherited {
                    mode: perm & !(umask & RWX_ALL),
                    xattrs: Vec::new(),
                }
            }
        };
        let (mode, access) = default.create_masq(perm);
        let mut xattrs = Vec::new();
        if let Some(a) = access {
            xattrs.push(NewXattr::new(AclKind::Access.xattr(), a.to_bytes()));
        }
        if kind == FileType::Directory {
            xattrs.push(NewXattr::new(AclKind::Default.xattr(), default.to_bytes()));
        }
        Inherited { mode, xattrs }
    }

    /// Give the unnamed file `ino` (`create_tmpfile`) what creating it in
    /// `dir` would have given it: with a default ACL there, its access ACL
    /// (and the mode that ACL masks) as `posix_acl_create` makes them.
    /// Called by the link that names it, so files received over the
    /// network inherit like files made through the mount. Without a
    /// default ACL nothing changes: the mode the server chose stays (no
    /// umask applies to it). Its own commit, on an inode nothing reaches
    /// yet: a crash before the link frees it with its attributes, and a
    /// refused link leaves nothing visible.
    pub(crate) fn inherit_into_unnamed(&self, ino: u64, dir: u64) -> Result<()> {
        // On every upload's link: the common case (no default ACL) costs
        // one directory lookup and nothing else.
        // No two of these locks are held at once (lock order is by inode
        // number elsewhere; this takes them one after the other).
        let darc = self.inode(dir)?;
        {
            let d = super::rlock(&darc)?;
            if d.attr.kind != FileType::Directory
                || !d.xnames.contains_key(AclKind::Default.xattr())
            {
                return Ok(());
            }
        }
        self.check_writable()?;
        let perm = {
            let arc = self.inode(ino)?;
            let i = super::rlock(&arc)?;
            if i.attr.nlink != 0 || i.attr.kind != FileType::Regular {
                // Already named (a repeated link) or not an unnamed file:
                // the link itself says what that means.
                return Ok(());
            }
            i.attr.mode & 0o7777
        };
        let inherited = self.inherit_acl(&*super::rlock(&darc)?, FileType::Regular, perm, 0);
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        if i.attr.nlink != 0 {
            return Ok(());
        }
        let mut commit = Commit::new();
        for x in &inherited.xattrs {
            self.put_xattr(&mut commit, &mut i, &x.name, &x.value)?;
        }
        let mut a = i.attr;
        a.mode = (a.mode & !0o7777) | (inherited.mode & 0o7777);
        a.ctime_ns = super::now_ns();
        self.set_attr(&mut commit, &mut i, a);
        commit.apply(self);
        Ok(())
    }

    /// getxattr of an ACL: the default ACL as stored, the access ACL with
    /// the mode's bits in the entries the mode expresses.
    pub(crate) fn get_acl(&self, i: &Inode, kind: AclKind) -> Result<Vec<u8>> {
        let stored = self.xattr_of(i, kind.xattr()).ok_or(FsError::NoXattr)?;
        if kind == AclKind::Default {
            return Ok(stored.to_vec());
        }
        match Acl::parse(stored) {
            Ok(Some(a)) => Ok(a.with_mode(i.attr.mode).to_bytes()),
            Ok(None) => Err(FsError::NoXattr),
            Err(_) => Err(FsError::DamagedInode {
                ino: i.ino as u64,
                why: "its stored access ACL is malformed; remove it with setfacl -b".into(),
            }),
        }
    }

    /// setxattr of an ACL, in one commit with the mode change it implies
    /// (posix_acl_update_mode): an access ACL sets the mode's rwx bits
    /// (and clears setgid unless `in_group_or_capable(gid)`) and is stored
    /// only if the mode cannot say it all; an empty ACL removes it; a
    /// default ACL is for directories only.
    pub(crate) fn set_acl(
        &self,
        ino: u64,
        kind: AclKind,
        value: &[u8],
        flags: XattrFlags,
        in_group_or_capable: impl Fn(u32) -> bool,
    ) -> Result<()> {
        self.check_writable()?;
        let acl = Acl::parse(value)?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let name = kind.xattr();
        let exists = i.xnames.contains_key(name);
        if flags.create && exists {
            return Err(FsError::Exists);
        }
        if flags.replace && !exists {
            return Err(FsError::NoXattr);
        }
        if kind == AclKind::Default && i.attr.kind != FileType::Directory {
            return Err(FsError::NotPermitted(
                "a default ACL is only for directories",
            ));
        }
        if i.attr.kind == FileType::Symlink {
            return Err(FsError::NotSupported("symlinks have no ACLs"));
        }
        let mut commit = Commit::new();
        let mut a = i.attr;
        let store = match (&acl, kind) {
            (None, _) => None,
            (Some(acl), AclKind::Access) => {
                let (bits, equiv) = acl.mode_bits();
                a.mode = (a.mode & !RWX_ALL) | bits;
                if a.mode & S_ISGID != 0 && !in_group_or_capable(a.gid) {
                    a.mode &= !S_ISGID;
                }
                (!equiv).then(|| acl.to_bytes())
            }
            (Some(acl), AclKind::Default) => Some(acl.to_bytes()),
        };
        match store {
            Some(v) => self.put_xattr(&mut commit, &mut i, name, &v)?,
            None if exists => self.drop_xattr(&mut commit, &mut i, name)?,
            None => {}
        }
        a.ctime_ns = super::now_ns();
        self.set_attr(&mut commit, &mut i, a);
        commit.apply(self);
        Ok(())
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for &(t, p, id) in entries {
            v.extend_from_slice(&t.to_le_bytes());
            v.extend_from_slice(&p.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    #[test]
    fn round_trip_and_canonical_order() {
        // Named entries out of order come back sorted.
        let v = acl(&[
            (TAG_USER_OBJ, 6, NO_ID),
            (TAG_USER, 4, 1001),
            (TAG_USER, 7, 1000),
            (TAG_GROUP_OBJ, 4, NO_ID),
            (TAG_MASK, 7, NO_ID),
            (TAG_OTHER, 0, NO_ID),
        ]);
        let a = Acl::parse(&v).unwrap().unwrap();
        let ids: Vec<u32> = a.entries().iter().map(|e| e.id).collect();
        assert_eq!(ids, [NO_ID, 1000, 1001, NO_ID, NO_ID, NO_ID]);
        assert_eq!(Acl::parse(&a.to_bytes()).unwrap().unwrap(), a);
        assert_eq!(a.mode_bits(), (0o670, false));
    }

    #[test]
    fn malformed_is_einval_never_a_panic() {
        let base = [
            (TAG_USER_OBJ, 6, NO_ID),
            (TAG_GROUP_OBJ, 4, NO_ID),
            (TAG_OTHER, 4, NO_ID),
        ];
        let bad: Vec<Vec<u8>> = vec![
            vec![],
            vec![2, 0, 0],
            {
                let mut v = acl(&base);
                v.push(0);
                v
            },
            {
                let mut v = acl(&base);
                v[0] = 1; // version 1
                v
            },
            acl(&[(TAG_USER_OBJ, 6, NO_ID), (TAG_OTHER, 4, NO_ID)]),
            acl(&[
                (TAG_USER_OBJ, 8, NO_ID),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
            acl(&[
                (0x40, 6, NO_ID),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
            // A named entry needs a mask.
            acl(&[
                (TAG_USER_OBJ, 6, NO_ID),
                (TAG_USER, 6, 5),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
            // Named twice.
            acl(&[
                (TAG_USER_OBJ, 6, NO_ID),
                (TAG_USER, 6, 5),
                (TAG_USER, 4, 5),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_MASK, 6, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
            // Two owners.
            acl(&[
                (TAG_USER_OBJ, 6, NO_ID),
                (TAG_USER_OBJ, 6, NO_ID),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
            // A named entry without an id.
            acl(&[
                (TAG_USER_OBJ, 6, NO_ID),
                (TAG_GROUP, 6, NO_ID),
                (TAG_GROUP_OBJ, 4, NO_ID),
                (TAG_MASK, 6, NO_ID),
                (TAG_OTHER, 4, NO_ID),
            ]),
        ];
        for v in bad {
            assert!(
                matches!(Acl::parse(&v), Err(FsError::Invalid(_))),
                "{v:?} accepted"
            );
        }
        assert_eq!(Acl::parse(&acl(&[])).unwrap(), None);
    }

    #[test]
    fn chmod_sets_mask_not_group_obj() {
        let v = acl(&[
            (TAG_USER_OBJ, 6, NO_ID),
            (TAG_USER, 6, 1000),
            (TAG_GROUP_OBJ, 4, NO_ID),
            (TAG_MASK, 6, NO_ID),
            (TAG_OTHER, 4, NO_ID),
        ]);
        let a = Acl::parse(&v).unwrap().unwrap().with_mode(0o4750);
        let perms: Vec<u16> = a.entries().iter().map(|e| e.perm).collect();
        // user::rwx user:1000:rw- group::r-- mask::r-x other::---
        assert_eq!(perms, [7, 6, 4, 5, 0]);
        let plain = Acl::from_mode(0o640).with_mode(0o751);
        assert_eq!(plain.mode_bits(), (0o751, true));
    }

    #[test]
    fn create_masks_default_by_mode() {
        let d = Acl::parse(&acl(&[
            (TAG_USER_OBJ, 7, NO_ID),
            (TAG_GROUP, 7, 100),
            (TAG_GROUP_OBJ, 5, NO_ID),
            (TAG_MASK, 7, NO_ID),
            (TAG_OTHER, 5, NO_ID),
        ]))
        .unwrap()
        .unwrap();
        // open(O_CREAT, 0666): no x anywhere; the mask holds the group bits.
        let (mode, a) = d.create_masq(0o666);
        assert_eq!(mode, 0o664);
        let a = a.expect("named entries keep an ACL");
        assert_eq!(a.mode_bits(), (0o664, false));
        // The named group keeps rwx; the mask limits it.
        assert!(a
            .entries()
            .iter()
            .any(|e| e.tag == TAG_GROUP && e.perm == 7));
        // A plain default ACL gives a plain mode and no stored ACL.
        let (mode, a) = Acl::from_mode(0o750).create_masq(0o2777);
        assert_eq!((mode, a), (0o2750, None));
    }
}
