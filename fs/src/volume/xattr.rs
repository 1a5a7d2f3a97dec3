//! Extended attributes: a second chain per inode of xattr records whose
//! payload is the name followed by the value. Setting an existing name
//! replaces its record in place (one splice); a new name is appended.

use layout::{Record, RecordId, RecordKind};

use super::tx::Tx;
use super::{now_ns, Inode, Rec, Volume, MAX_XATTR_VALUE};
use crate::error::{FsError, Result};

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
    if name.len() > layout::NAME_MAX {
        return Err(FsError::Range);
    }
    if name.contains(&0) {
        return Err(FsError::Invalid("NUL in attribute name"));
    }
    Ok(())
}

impl Volume {
    fn xattr_value<'a>(&'a self, r: &Rec) -> &'a [u8] {
        &self.slice_bytes(r.slice())[r.r.aux as usize..]
    }

    pub fn getxattr(&self, ino: u64, name: &[u8]) -> Result<Vec<u8>> {
        check_xattr_name(name)?;
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        let key = i.xnames.get(name).ok_or(FsError::NoXattr)?;
        Ok(self.xattr_value(&i.xattrs[key]).to_vec())
    }

    /// Names, in the order they were first set.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Ok(i.xattrs
            .values()
            .map(|r| self.slice_bytes(r.slice())[..r.r.aux as usize].to_vec())
            .collect())
    }

    pub fn setxattr(&self, ino: u64, name: &[u8], value: &[u8], flags: XattrFlags) -> Result<()> {
        self.check_writable()?;
        check_xattr_name(name)?;
        if value.len() > MAX_XATTR_VALUE {
            return Err(FsError::TooBig);
        }
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let existing = i.xnames.get(name).copied();
        if flags.create && existing.is_some() {
            return Err(FsError::Exists);
        }
        if flags.replace && existing.is_none() {
            return Err(FsError::NoXattr);
        }
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
        let key = existing.unwrap_or(i.next_xkey);
        let succ = i
            .xattrs
            .range(key + 1..)
            .next()
            .map(|(_, r)| r.id)
            .unwrap_or(RecordId::NONE);
        let r = Record {
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
        };
        self.write_record(id, &r, succ);
        let mut tx = Tx::new();
        tx.store(
            self.xattr_link_before(&i, key),
            id.0,
            Some((self.geo.record_pos(id).0, 64)),
        );
        if let Some(old) = i.xattrs.insert(key, Rec { id, r }) {
            tx.free_record(old.id, old.slice());
        } else {
            i.xnames.insert(name.into(), key);
            i.next_xkey = key + 1;
        }
        self.touch_ctime(&mut tx, &mut i);
        tx.commit(self);
        Ok(())
    }

    pub fn removexattr(&self, ino: u64, name: &[u8]) -> Result<()> {
        self.check_writable()?;
        check_xattr_name(name)?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let key = *i.xnames.get(name).ok_or(FsError::NoXattr)?;
        let succ = i
            .xattrs
            .range(key + 1..)
            .next()
            .map(|(_, r)| r.id)
            .unwrap_or(RecordId::NONE);
        let mut tx = Tx::new();
        tx.store(self.xattr_link_before(&i, key), succ.0, None);
        let old = i.xattrs.remove(&key).expect("indexed");
        i.xnames.remove(name);
        tx.free_record(old.id, old.slice());
        self.touch_ctime(&mut tx, &mut i);
        tx.commit(self);
        Ok(())
    }

    fn touch_ctime(&self, tx: &mut Tx, i: &mut Inode) {
        let mut a = i.attr;
        a.ctime_ns = now_ns();
        self.set_attr(tx, i, a);
    }
}
