//! A file's content checksum from its chain: the CRC32C of the whole
//! content, combined from the records' payload CRCs (and the CRC of the
//! zeros of its holes), with no pass over the data. The HTTP server's
//! `ETag` is made from it.
//!
//! Every data record's CRC covers exactly the bytes the file uses from
//! it: an overwrite or truncation never shortens a record in place, it
//! replaces it with remnants that carry a CRC of their own (computed when
//! the record is split, after the record was verified; see `file.rs`), and
//! records never overlap. So the file's CRC is the in-order combination of
//! the record CRCs and the hole CRCs, O(records · log size).

use pktfs_layout::record::FLAG_DAMAGED;

use super::file::{cover, Cover};
use super::{rlock, Inode, VerifyMode, Volume};
use crate::error::{FsError, Result};

/// What a file holds, in one consistent view (taken under the inode's
/// lock): its checksum together with the size and time it describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentDigest {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    /// CRC32C (Castagnoli) of the file's `size` bytes.
    pub crc32c: u32,
}

/// What a name leads to at the instant a conditional change is made,
/// seen under the locks that make the change (so nothing can come
/// between the check and the change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Nothing has that name.
    Absent,
    /// An entry: a regular file with its digest, or another kind
    /// (`digest` None), with its modification and change times.
    ///
    /// `ctime_ns` moves with every change of the inode, its extended
    /// attributes included, which the digest does not describe: a caller
    /// that read a file's state (its digest and an attribute it keeps
    /// beside the bytes) before the change can require that state exactly
    /// (the same inode, digest, mtime and ctime) and know nothing changed
    /// in between, whatever else the file keeps.
    Present {
        digest: Option<ContentDigest>,
        mtime_ns: i64,
        ctime_ns: i64,
    },
}

/// A caller's precondition on a change ([`Volume::rx_link_if`],
/// [`Volume::remove_if`]): checked under the change's own locks, and a
/// `false` refuses the change with [`FsError::PreconditionFailed`]
/// (an HTTP `If-Match`, evaluated where no concurrent replacement can
/// slip in between).
pub type Precondition<'c> = &'c (dyn Fn(&Bound) -> bool + 'c);

impl Volume {
    /// The [`Bound`] of a locked entry.
    pub(crate) fn bound_locked(&self, i: &Inode) -> Result<Bound> {
        let digest = match i.attr.kind {
            pktfs_layout::FileType::Regular => Some(self.digest_locked(i)?),
            _ => None,
        };
        Ok(Bound::Present {
            digest,
            mtime_ns: i.attr.mtime_ns,
            ctime_ns: i.attr.ctime_ns,
        })
    }
}

impl Volume {
    /// The CRC32C of a regular file's content, from its records' CRCs.
    ///
    /// Damage is never laundered into a checksum: a record marked damaged
    /// (by fsck, or as the remnant of a damaged record) fails with
    /// [`FsError::Damaged`], and with [`VerifyMode::Always`] every record
    /// is checked against its bytes first. In the other modes the bytes
    /// are not read: the digest describes what the records vouch for, and
    /// every read or transmit of those bytes still checks them.
    pub fn content_digest(&self, ino: u64) -> Result<ContentDigest> {
        let arc = self.inode(ino)?;
        let i = rlock(&arc)?;
        self.digest_locked(&i)
    }

    /// [`Self::content_digest`] of an inode the caller has locked.
    pub(crate) fn digest_locked(&self, i: &Inode) -> Result<ContentDigest> {
        let ino = u64::from(i.ino);
        match i.attr.kind {
            pktfs_layout::FileType::Regular => {}
            pktfs_layout::FileType::Directory => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid("not a regular file")),
        }
        let size = i.attr.size;
        let always = self.verify_mode() == VerifyMode::Always;
        let mut crc = 0u32;
        for c in cover(i, 0, size, self.geo.buffer_size_bytes) {
            match c {
                Cover::Hole(n) => {
                    crc = pktfs_layout::crc32c_combine(crc, pktfs_layout::crc32c_zeros(n), n)
                }
                Cover::Data(sl, r) => {
                    if always || r.r.flags & FLAG_DAMAGED != 0 {
                        self.verify_rec(i, &r)?;
                    }
                    let part = if sl.len == r.r.len {
                        r.r.payload_crc
                    } else {
                        // A record reaching past the end of file: the format
                        // forbids it (recovery checks), so this never runs
                        // on a consistent image; if it did, the used part's
                        // CRC has to come from its bytes, checked first.
                        self.verify_rec(i, &r)?;
                        pktfs_layout::crc32c(self.slice_bytes(sl))
                    };
                    crc = pktfs_layout::crc32c_combine(crc, part, sl.len as u64);
                }
                Cover::Remote(sl, r) => {
                    // The record's CRC vouches for its object bytes; the
                    // store is not asked.
                    if r.r.flags & FLAG_DAMAGED != 0 {
                        self.verify_rec(i, &r)?;
                    }
                    let part = if sl.len == r.r.len {
                        r.r.payload_crc
                    } else {
                        let b = self.fetch_rec(i, &r)?;
                        let skip = (sl.off - r.r.remote_off()) as usize;
                        pktfs_layout::crc32c(&b[skip..skip + sl.len as usize])
                    };
                    crc = pktfs_layout::crc32c_combine(crc, part, sl.len as u64);
                }
            }
        }
        Ok(ContentDigest {
            ino,
            size,
            mtime_ns: i.attr.mtime_ns,
            crc32c: crc,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::volume::tests::{fresh, reopen};
    use crate::volume::{SetAttr, Volume};

    fn check(v: &Volume, ino: u64) {
        let d = v.content_digest(ino).unwrap();
        let a = v.getattr(ino).unwrap();
        let bytes = v.read(ino, 0, a.size).unwrap();
        assert_eq!(d.size, a.size);
        assert_eq!(d.crc32c, pktfs_layout::crc32c(&bytes));
    }

    #[test]
    fn digest_follows_writes_holes_splits_and_truncation() {
        let v = fresh(64 << 20);
        let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap().ino;
        check(&v, f); // empty
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31 + 7) as u8).collect();
        v.write(f, 0, &data).unwrap();
        check(&v, f);
        v.write(f, 1_000_000, b"after a hole").unwrap();
        check(&v, f);
        v.write(f, 12_345, &data[..5000]).unwrap(); // splits a record
        check(&v, f);
        let trunc = SetAttr {
            size: Some(200_001),
            ..Default::default()
        };
        v.setattr(f, &trunc).unwrap(); // remnant at the new end
        check(&v, f);
        let grow = SetAttr {
            size: Some(2_000_000),
            ..Default::default()
        };
        v.setattr(f, &grow).unwrap(); // a trailing hole
        check(&v, f);
        let before = v.content_digest(f).unwrap().crc32c;
        let v = reopen(v);
        assert_eq!(v.content_digest(f).unwrap().crc32c, before);
        check(&v, f);
        let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
        assert!(v.content_digest(d).is_err());
    }

    #[test]
    fn zeros_match_a_pass_over_zeros() {
        for n in [0u64, 1, 2, 3, 7, 64, 4095, 4096, 100_000] {
            let z = vec![0u8; n as usize];
            assert_eq!(
                pktfs_layout::crc32c_zeros(n),
                pktfs_layout::crc32c(&z),
                "n = {n}"
            );
        }
    }
}
