//! Extended attributes: a second chain per inode of xattr records whose
//! payload is the name followed by the value. Setting an existing name
//! replaces its record in place (one splice); a new name is appended.

use pktfs_layout::{Record, RecordId, RecordKind};

use super::acl::AclKind;
use super::commit::Commit;
use super::failstop::OrStop;
use super::system_blob::is_system_xattr;
use super::{now_ns, Inode, Rec, Volume, MAX_XATTR_VALUE};
use crate::error::{FsError, Result};

/// An attribute a new inode is created with (its inherited ACLs).
#[derive(Clone, Debug)]
pub(crate) struct NewXattr {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

impl NewXattr {
    pub fn new(name: &[u8], value: Vec<u8>) -> NewXattr {
        NewXattr {
            name: name.to_vec(),
            value,
        }
    }
}

/// setxattr(2) flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XattrFlags {
    /// XATTR_CREATE: fail if it exists.
    pub create: bool,
    /// XATTR_REPLACE: fail if it does not.
    pub replace: bool,
}

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
    fn xattr_value<'a>(&'a self, r: &Rec) -> &'a [u8] {
        &self.slice_bytes(r.slice())[r.r.aux as usize..]
    }

    /// A stored attribute's value.
    pub(crate) fn xattr_of<'a>(&'a self, i: &Inode, name: &[u8]) -> Option<&'a [u8]> {
        let key = i.xnames.get(name)?;
        Some(self.xattr_value(&i.xattrs[key]))
    }

    /// An attribute's value. The access ACL comes with the mode's bits in
    /// the entries the mode expresses (see `acl.rs`).
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

    /// Write `name = value` as a new record and link it into `i`'s chain
    /// in `commit` (replacing the record of the same name in place). All that
    /// can fail comes before `i` changes.
    pub(crate) fn put_xattr(
        &self,
        commit: &mut Commit,
        i: &mut Inode,
        name: &[u8],
        value: &[u8],
    ) -> Result<()> {
        let existing = i.xnames.get(name).copied();
        let key = existing.unwrap_or(i.next_xkey);
        let (id, r) = self.write_xattr_record(name, value, key)?;
        let succ = xattr_after(i, key);
        self.write_record(id, &r, succ);
        commit.store(
            i.ino,
            self.xattr_link_before(i, key),
            id.0,
            Some((self.geo.record_pos(id).0, 64)),
        );
        if let Some(old) = i.xattrs.insert(key, Rec { id, r }) {
            commit.free_record(old.id, old.slice());
        } else {
            i.xnames.insert(name.into(), key);
            i.next_xkey = key + 1;
        }
        Ok(())
    }

    /// The payload and record (not yet written) of attribute `name` with
    /// chain key `key`.
    fn write_xattr_record(
        &self,
        name: &[u8],
        value: &[u8],
        key: u64,
    ) -> Result<(RecordId, Record)> {
        let mut payload = Vec::with_capacity(name.len() + value.len());
        payload.extend_from_slice(name);
        payload.extend_from_slice(value);
        let slices = self.alloc_payload(payload.len() as u64)?;
        if slices.len() != 1 {
            // An attribute must be one contiguous slice; free space is too
            // fragmented for this one.
            self.release_payload(&slices);
            return Err(FsError::NoSpace(
                "no contiguous buffer space for the attribute",
            ));
        }
        let id = match self.alloc_records(1) {
            Ok(v) => v[0],
            Err(e) => {
                self.release_payload(&slices);
                return Err(e);
            }
        };
        let crc = self.write_payload(&slices, &payload)[0];
        let s = slices[0];
        Ok((
            id,
            Record {
                kind: RecordKind::Xattr,
                flags: 0,
                buffer: s.buffer,
                buf_off: s.buf_off,
                len: s.len,
                payload_crc: crc,
                file_off: 0,
                seq: key,
                timestamp_ns: now_ns() as u64,
                aux: name.len() as u64,
            },
        ))
    }

    /// The xattr chain of an inode not yet named anywhere: written (and
    /// flushed) now, reachable only once the commit that names the inode
    /// publishes it, with keys 1, 2, ... in `list` order. On error nothing
    /// stays allocated.
    pub(crate) fn write_new_xattrs(&self, list: &[NewXattr]) -> Result<Vec<Rec>> {
        let mut recs: Vec<Rec> = Vec::with_capacity(list.len());
        for (k, x) in list.iter().enumerate() {
            match self.write_xattr_record(&x.name, &x.value, k as u64 + 1) {
                Ok((id, r)) => recs.push(Rec { id, r }),
                Err(e) => {
                    self.free_new_xattrs(&recs);
                    return Err(e);
                }
            }
        }
        for (k, rec) in recs.iter().enumerate() {
            let next = recs.get(k + 1).map(|r| r.id).unwrap_or(RecordId::NONE);
            self.write_record(rec.id, &rec.r, next);
        }
        Ok(recs)
    }

    /// Give back what `write_new_xattrs` allocated (nothing reached it).
    pub(crate) fn free_new_xattrs(&self, recs: &[Rec]) {
        let mut a = self.alloc.lock().or_stop();
        for r in recs {
            a.free_record(r.id.0);
            a.drop_ref(r.slice());
        }
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

    /// Unlink attribute `name` from `i`'s chain in `commit`.
    pub(crate) fn drop_xattr(&self, commit: &mut Commit, i: &mut Inode, name: &[u8]) -> Result<()> {
        let key = *i.xnames.get(name).ok_or(FsError::NoXattr)?;
        let succ = xattr_after(i, key);
        commit.store(i.ino, self.xattr_link_before(i, key), succ.0, None);
        let old = i.xattrs.remove(&key).expect("indexed");
        i.xnames.remove(name);
        commit.free_record(old.id, old.slice());
        Ok(())
    }

    fn touch_ctime(&self, commit: &mut Commit, i: &mut Inode) {
        let mut a = i.attr;
        a.ctime_ns = now_ns();
        self.set_attr(commit, i, a);
    }
}

/// The record of `i`'s first attribute after `key` in chain order (what a
/// record put at `key`, or the link left when `key` goes, points to).
fn xattr_after(i: &Inode, key: u64) -> RecordId {
    i.xattrs
        .range(key + 1..)
        .next()
        .map(|(_, r)| r.id)
        .unwrap_or(RecordId::NONE)
}
