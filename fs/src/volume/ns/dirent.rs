//! Dirent records: writing a directory entry into a directory's chain,
//! replacing the file an entry names, taking an entry out. The namespace
//! operations (`ns.rs`, `rename.rs`) and the upload link (`tmpfile.rs`)
//! build their commits from these.

use pktfs_layout::{FileType, Record, RecordId, RecordKind};

use super::super::alloc::Slice;
use super::super::commit::Commit;
use super::super::{now_ns, Inode, Rec, Volume};
use crate::error::Result;

impl Volume {
    /// Allocate and write a dirent record (unreachable until linked).
    #[allow(clippy::too_many_arguments)]
    /// `name_slice`: reuse existing name bytes (the caller took a reference);
    /// otherwise the name is written into fresh buffer space.
    pub(super) fn new_dirent(
        &self,
        id: RecordId,
        name: &[u8],
        name_slice: Option<(Slice, u32)>,
        ino: u32,
        kind: FileType,
        cookie: u64,
        next: RecordId,
        dir_time: Option<i64>,
    ) -> Result<Rec> {
        let (s, crc) = match name_slice {
            Some(x) => x,
            None => {
                let s = self.alloc_payload(name.len() as u64)?;
                let crc = self.write_payload(&s, name)[0];
                (s[0], crc)
            }
        };
        // With `dir_time`, the dirent also carries its directory's new
        // mtime/ctime (FLAG_DIR_TIME, FORMAT.md): no slot switch needed.
        let (flags, ts) = match dir_time {
            Some(t) => (pktfs_layout::record::FLAG_DIR_TIME, t),
            None => (0, now_ns()),
        };
        let r = Record {
            kind: RecordKind::Dirent,
            flags,
            buffer: s.buffer,
            buf_off: s.buf_off,
            len: s.len,
            payload_crc: crc,
            file_off: 0,
            seq: cookie,
            timestamp_ns: ts as u64,
            aux: Record::dirent_aux(ino, kind.dtype()),
        };
        self.write_record(id, &r, next);
        Ok(Rec { id, r })
    }

    /// A new dirent record (unlinked), for the receive path; `dir_time`
    /// as in `new_dirent`.
    pub(crate) fn new_dirent_pub(
        &self,
        id: RecordId,
        name: &[u8],
        ino: u32,
        kind: FileType,
        cookie: u64,
        dir_time: Option<i64>,
    ) -> Result<Rec> {
        self.new_dirent(id, name, None, ino, kind, cookie, RecordId::NONE, dir_time)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn replace_dirent_pub(
        &self,
        commit: &mut Commit,
        d: &mut Inode,
        cookie: u64,
        new_id: RecordId,
        ino: u32,
        kind: FileType,
        dir_time: Option<i64>,
    ) {
        self.replace_dirent(commit, d, cookie, new_id, ino, kind, dir_time);
    }

    /// Remove the dirent with `cookie` from directory `d` (DRAM and commit).
    pub(super) fn unlink_dirent(&self, commit: &mut Commit, d: &mut Inode, cookie: u64) -> Rec {
        let link = self.data_link_before(d, cookie);
        let succ = d
            .data
            .range(cookie + 1..)
            .next()
            .map(|(_, r)| r.id)
            .unwrap_or(RecordId::NONE);
        commit.store(d.ino, link, succ.0, None);
        let rec = d.data.remove(&cookie).expect("dirent present");
        d.names.remove(self.slice_bytes(rec.slice()));
        commit.free_record(rec.id, rec.slice());
        rec
    }

    /// Replace the dirent at `cookie` in place with one naming `ino`,
    /// reusing the old name bytes. Returns the old record.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn replace_dirent(
        &self,
        commit: &mut Commit,
        d: &mut Inode,
        cookie: u64,
        new_id: RecordId,
        ino: u32,
        kind: FileType,
        dir_time: Option<i64>,
    ) -> Rec {
        let old = d.data[&cookie];
        let link = self.data_link_before(d, cookie);
        let succ = d
            .data
            .range(cookie + 1..)
            .next()
            .map(|(_, r)| r.id)
            .unwrap_or(RecordId::NONE);
        // The new dirent takes over the old one's name bytes together with
        // its reference on their buffer (the old record is freed below
        // without dropping it): no copy, no reference taken and dropped.
        let s = old.slice();
        let rec = self
            .new_dirent(
                new_id,
                self.slice_bytes(s),
                Some((s, old.r.payload_crc)),
                ino,
                kind,
                cookie,
                succ,
                dir_time,
            )
            .expect("reusing a name allocates nothing");
        commit.store(
            d.ino,
            link,
            new_id.0,
            Some((self.geo.record_pos(new_id).0, 64)),
        );
        d.data.insert(cookie, rec);
        commit.free_record_keep_payload(old.id);
        old
    }
}
