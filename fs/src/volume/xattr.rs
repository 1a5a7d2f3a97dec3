//! Extended attributes as the Volume's calls: getxattr, listxattr,
//! setxattr, removexattr, with the names they allow and the POSIX ACLs
//! (`acl`) they hand over; the chain itself is `xattr_chain`'s.

use super::acl::AclKind;
use super::commit::Commit;
use super::system_blob::is_system_xattr;
pub use super::xattr_chain::XattrFlags;
use super::{now_ns, Inode, Volume, MAX_XATTR_VALUE};
use crate::error::{FsError, Result};

fn check_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(FsError::Invalid("empty attribute name"));
    }
    if name.len() > pktfs_layout::NAME_MAX {
        return Err(FsError::Range);
    }
    if name.contains(&0) {
        return Err(FsError::Invalid("NUL in attribute name"));
    }
    Ok(())
}

/// Namespaces a new attribute may be set in, as the kernel's own file
/// systems take them: `user.`, `trusted.` and `security.` (the kernel
/// checks who may write each before the request gets here), and `system.`
/// only for the POSIX ACLs (`acl.rs`). Any other name is EOPNOTSUPP, and a
/// namespace with nothing after it EINVAL, as on ext4 and tmpfs. Reading,
/// listing and removing are not restricted, so attributes stored under
/// other names before this check still come out.
fn check_settable_namespace(name: &[u8]) -> Result<()> {
    for ns in [&b"user."[..], b"trusted.", b"security."] {
        if let Some(rest) = name.strip_prefix(ns) {
            if rest.is_empty() {
                return Err(FsError::Invalid(
                    "attribute name with nothing after its namespace",
                ));
            }
            return Ok(());
        }
    }
    Err(FsError::NotSupported(
        "attribute namespace: user., trusted., security. and the system. ACLs only",
    ))
}

impl Volume {
    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        if is_system_xattr(name) {
            // pktfs's own (system_blob.rs): as if it did not exist.
            return Err(FsError::NoXattr);
        }
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        if let Some(kind) = AclKind::of_xattr(name) {
            return self.get_acl(&i, kind);
        }
        self.xattr_of(&i, name)
            .map(<[u8]>::to_vec)
            .ok_or(FsError::NoXattr)
    }

    /// Names, in the order they were first set (pktfs's own,
    /// `system_blob.rs`, left out).
    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Ok(i.xattrs
            .values()
            .map(|r| &self.slice_bytes(r.slice())[..r.r.aux as usize])
            .filter(|n| !is_system_xattr(n))
            .map(<[u8]>::to_vec)
            .collect())
    }

    /// Set an attribute. The two ACL names are checked as ACLs (EINVAL if
    /// malformed) and an access ACL changes the mode with it (`acl.rs`).
    /// Names outside user., trusted. and security. are refused
    /// (EOPNOTSUPP, as ext4 does; a restore uses [`Self::restore_xattr`]).
    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: XattrFlags) -> Result<()> {
        self.setxattr_as(ino, name, value, flags, |_| true)
    }

    /// [`Self::setxattr`] on behalf of a caller: setting an access ACL
    /// clears the setgid bit unless `in_group_or_capable(file's gid)` (the
    /// caller is in the file's group or has CAP_FSETID), as chmod does.
    pub fn setxattr_as(
        &self,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: XattrFlags,
        in_group_or_capable: impl Fn(u32) -> bool,
    ) -> Result<()> {
        self.set_xattr_checked(ino, name, value, flags, in_group_or_capable, true)
    }

    /// Put back an attribute an image held, whatever its namespace (a
    /// restore from a snapshot: images written before the namespace check
    /// may hold names it refuses). Otherwise as [`Self::setxattr`].
    pub fn restore_xattr(&self, ino: u64, name: &[u8], value: &[u8]) -> Result<()> {
        self.set_xattr_checked(ino, name, value, XattrFlags::default(), |_| true, false)
    }

    fn set_xattr_checked(
        &self,
        ino: u64,
        name: &[u8],
        value: &[u8],
        flags: XattrFlags,
        in_group_or_capable: impl Fn(u32) -> bool,
        check_namespace: bool,
    ) -> Result<()> {
        self.check_writable()?;
        check_xattr_name(name)?;
        if is_system_xattr(name) {
            // pktfs's own (system_blob.rs), even for a restore.
            return Err(FsError::NotSupported(
                "attribute namespace: pktfs. is reserved for pktfs itself",
            ));
        }
        if value.len() > MAX_XATTR_VALUE {
            return Err(FsError::TooBig);
        }
        if let Some(kind) = AclKind::of_xattr(name) {
            return self.set_acl(ino, kind, value, flags, in_group_or_capable);
        }
        if check_namespace {
            check_settable_namespace(name)?;
        }
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let existing = i.xnames.contains_key(name);
        if flags.create && existing {
            return Err(FsError::Exists);
        }
        if flags.replace && !existing {
            return Err(FsError::NoXattr);
        }
        let mut commit = Commit::new();
        self.put_xattr(&mut commit, &mut i, name, value)?;
        self.touch_ctime(&mut commit, &mut i);
        commit.apply(self);
        Ok(())
    }

    /// Remove an attribute. Removing an ACL that is not there succeeds,
    /// as on ext4 and tmpfs (the kernel asks for it on `setfacl -k` and
    /// `setfattr -x system.posix_acl_*`, and the mode may say an access ACL
    /// that is not stored); it changes nothing.
    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.check_writable()?;
        check_xattr_name(name)?;
        if is_system_xattr(name) {
            // pktfs's own (system_blob.rs): as if it did not exist.
            return Err(FsError::NoXattr);
        }
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        if AclKind::of_xattr(name).is_some() && !i.xnames.contains_key(name) {
            return Ok(());
        }
        let mut commit = Commit::new();
        self.drop_xattr(&mut commit, &mut i, name)?;
        self.touch_ctime(&mut commit, &mut i);
        commit.apply(self);
        Ok(())
    }

    fn touch_ctime(&self, commit: &mut Commit, i: &mut Inode) {
        let mut a = i.attr;
        a.ctime_ns = now_ns();
        self.set_attr(commit, i, a);
    }
}
