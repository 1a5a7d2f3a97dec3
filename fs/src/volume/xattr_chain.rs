//! An inode's xattr chain, the layer under the attribute calls (`xattr`)
//! and the ACLs (`acl`): records whose payload is the name followed by the
//! value, put (a new name appended, an existing one replaced in place by
//! one splice) and dropped in a caller's commit.

use pktfs_layout::{Record, RecordId, RecordKind};

use super::commit::Commit;
use super::failstop::OrStop;
use super::{now_ns, Inode, Rec, Volume};
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

impl Volume {
    pub(crate) fn xattr_value<'a>(&'a self, r: &Rec) -> &'a [u8] {
        &self.slice_bytes(r.slice())[r.r.aux as usize..]
    }

    /// A stored attribute's value.
    pub(crate) fn xattr_of<'a>(&'a self, i: &Inode, name: &[u8]) -> Option<&'a [u8]> {
        let key = i.xnames.get(name)?;
        Some(self.xattr_value(&i.xattrs[key]))
    }

    /// An attribute's value. The access ACL comes with the mode's bits in
    /// the entries the mode expresses (see `acl.rs`).
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
    pub(crate) fn write_xattr_record(
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
