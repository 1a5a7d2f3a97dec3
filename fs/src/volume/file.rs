//! File data: a regular file is a chain of data records sorted by file
//! offset. Every change to a byte range (write, truncate, punch, fallocate,
//! copy_file_range) is one splice: the records covering the range are
//! replaced by new ones, partly covered records are split into remnants
//! that point into the same buffer (like an sk_buff clone), and one link
//! publish (plus the attribute slot, through the journal) commits it.

use super::failstop::OrStop;
use pktfs_layout::{AttrSlot, FileType, Record, RecordId};
use smallvec::SmallVec;

use super::alloc::Slice;
use super::commit::Commit;
use super::remote::{Loc, RemoteSlice};
use super::{now_ns, resolve_time, Attr, ChainEntry, Inode, Rec, SetAttr, Volume, MAX_FILE_SIZE};
use crate::error::{FsError, Result};

/// A piece of a read: bytes in the image, or a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    Data(&'a [u8]),
    Zero(usize),
}

/// fallocate(2) modes pktfs supports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FallocMode {
    pub keep_size: bool,
    pub punch_hole: bool,
}

/// A slice about to become a data record. Its buffer reference is already
/// taken (local slices).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub loc: Loc,
    pub crc: u32,
    pub file_off: u64,
    pub seq: u64,
    pub timestamp_ns: u64,
    pub flags: u8,
}

/// One piece of a byte range of a file, in file order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cover {
    /// A hole of this many bytes.
    Hole(u64),
    /// The part of one record's slice that lies in the range, and the
    /// record it came from.
    Data(Slice, Rec),
    /// The same for a remote record: the part of its object slice.
    Remote(RemoteSlice, Rec),
}

/// Where a walk of the data chain from `off` starts: the key of the record
/// at or before `off` (it may reach into `off`), else `off` itself.
pub(crate) fn walk_from(i: &Inode, off: u64) -> u64 {
    i.data
        .range(..=off)
        .next_back()
        .map(|(k, _)| *k)
        .unwrap_or(off)
}

/// Walk `[off, end)` of a data chain: the records covering it, cut to the
/// range, with the holes between them. The one walk reads, transmit holds,
/// fallocate and copy_file_range share. Inline for the usual small file (a
/// 1 KiB upload's ETag walks one record): no allocation per request.
pub(crate) fn cover(i: &Inode, off: u64, end: u64, bs: u32) -> SmallVec<[Cover; 4]> {
    let mut out = SmallVec::new();
    if off >= end {
        return out;
    }
    let mut pos = off;
    for (_, r) in i.data.range(walk_from(i, off)..end) {
        let (rs, re) = (r.r.file_off, r.r.file_end());
        if re <= pos {
            continue;
        }
        if rs > pos {
            out.push(Cover::Hole(rs - pos));
            pos = rs;
        }
        let take_end = re.min(end);
        let (skip, take) = ((pos - rs) as u32, (take_end - pos) as u32);
        out.push(match r.loc() {
            Loc::Local(s) => Cover::Data(s.sub(skip, take, bs), *r),
            Loc::Remote(s) => Cover::Remote(s.sub(skip, take), *r),
        });
        pos = take_end;
    }
    if pos < end {
        out.push(Cover::Hole(end - pos));
    }
    out
}

impl Volume {
    pub(crate) fn file_inode(i: &Inode) -> Result<()> {
        match i.attr.kind {
            FileType::Regular => Ok(()),
            FileType::Directory => Err(FsError::IsDir),
            _ => Err(FsError::Invalid("not a regular file")),
        }
    }

    /// Replace the bytes `[off, end)` of `i` with `pieces` (sorted, inside
    /// the range; gaps become holes) and switch to `attr`, in one commit.
    /// On error nothing changed and the pieces' references were dropped.
    pub(crate) fn splice_range(
        &self,
        i: &mut Inode,
        off: u64,
        end: u64,
        pieces: Vec<Piece>,
        attr: AttrSlot,
    ) -> Result<()> {
        let mut commit = Commit::new();
        self.splice_range_tx(&mut commit, i, off, end, pieces, attr)?;
        commit.apply(self);
        Ok(())
    }

    /// [`Self::splice_range`] into the caller's transaction, so a splice can
    /// commit together with other changes (the receive path names a file
    /// and links its last pieces in one commit). The only failure is
    /// running out of records, before anything changed: on error `i` and
    /// `commit` are untouched and the pieces' references were dropped. After
    /// success `i`'s DRAM state already shows the splice; the caller must
    /// commit `commit`.
    pub(crate) fn splice_range_tx(
        &self,
        commit: &mut Commit,
        i: &mut Inode,
        off: u64,
        end: u64,
        pieces: Vec<Piece>,
        attr: AttrSlot,
    ) -> Result<()> {
        self.splice_range_tx_keep_attr(commit, i, off, end, pieces)?;
        self.set_attr(commit, i, attr);
        Ok(())
    }

    /// [`Self::splice_range_tx`] without an attribute change (tier-out
    /// switches where the bytes are, not what they are).
    pub(crate) fn splice_range_tx_keep_attr(
        &self,
        commit: &mut Commit,
        i: &mut Inode,
        off: u64,
        end: u64,
        pieces: Vec<Piece>,
    ) -> Result<()> {
        let bs = self.geo.buffer_size_bytes;
        // Records overlapping the range: a straddler before `off`, then
        // everything keyed inside it.
        let mut over: SmallVec<[Rec; 4]> = SmallVec::new();
        if let Some((_, r)) = i.data.range(..off).next_back() {
            if r.r.file_end() > off {
                over.push(*r);
            }
        }
        over.extend(i.data.range(off..end).map(|(_, r)| *r));
        let mut remnants: SmallVec<[Piece; 2]> = SmallVec::new();
        let mut left = None;
        let mut right = None;
        if let Some(f) = over.first() {
            if f.r.file_off < off {
                let len = (off - f.r.file_off) as u32;
                left = Some(
                    self.remnant(i, f, 0, len, f.r.file_off, bs)
                        .inspect_err(|_| self.release_pieces(&pieces))?,
                );
            }
        }
        if let Some(l) = over.last() {
            if l.r.file_end() > end {
                let skip = (end - l.r.file_off) as u32;
                right = Some(
                    self.remnant(i, l, skip, l.r.len - skip, end, bs)
                        .inspect_err(|_| self.release_pieces(&pieces))?,
                );
            }
        }
        remnants.extend(left);
        let new_list: SmallVec<[Piece; 4]> = left
            .into_iter()
            .chain(pieces.iter().copied())
            .chain(right)
            .collect();
        remnants.extend(right);
        let ids = match self.alloc_records(new_list.len()) {
            Ok(ids) => ids,
            Err(e) => {
                self.release_pieces(&pieces);
                return Err(e);
            }
        };
        if remnants.iter().any(|r| r.loc.local().is_some()) {
            let mut a = self.alloc.lock().or_stop();
            for s in remnants.iter().filter_map(|r| r.loc.local()) {
                a.take_ref(s);
            }
        }
        let first_key = over.first().map(|r| r.r.file_off).unwrap_or(off);
        let link = self.data_link_before(i, first_key);
        let succ = i
            .data
            .range(end..)
            .next()
            .map(|(_, r)| r.id)
            .unwrap_or(RecordId::NONE);
        let mut recs: SmallVec<[Rec; 4]> = SmallVec::with_capacity(new_list.len());
        for (k, p) in new_list.iter().enumerate() {
            let (kind, buffer, buf_off, aux) = p.loc.record_fields();
            let r = Record {
                kind,
                flags: p.flags,
                buffer,
                buf_off,
                len: p.loc.len(),
                payload_crc: p.crc,
                file_off: p.file_off,
                seq: p.seq,
                timestamp_ns: p.timestamp_ns,
                aux,
            };
            let next = ids.get(k + 1).copied().unwrap_or(succ);
            self.write_record(ids[k], &r, next);
            recs.push(Rec { id: ids[k], r });
        }
        if cfg!(debug_assertions) {
            // Debug builds check, before the publish, that every new record
            // and the bytes it names are durable (the tracker knows which
            // thread's fence made them so).
            for (k, p) in new_list.iter().enumerate() {
                commit.store_reach(self.geo.record_pos(ids[k]).0, 64);
                if let Some(s) = p.loc.local() {
                    commit.store_reach(self.geo.buffer_pos(s.buffer, s.buf_off).0, s.len as u64);
                }
            }
        }
        let first_new = ids.first().copied().unwrap_or(succ);
        let currently = over.first().map(|r| r.id).unwrap_or(succ);
        if first_new != currently {
            commit.store(
                i.ino,
                link,
                first_new.0,
                ids.first().map(|id| (self.geo.record_pos(*id).0, 64)),
            );
        }
        for r in &over {
            match r.loc() {
                Loc::Local(s) => commit.free_record(r.id, s),
                Loc::Remote(s) => commit.free_remote(r.id, s),
            }
            i.data.remove(&r.r.file_off);
            i.data_bytes -= r.r.len as u64;
        }
        for r in recs {
            if let Loc::Remote(s) = r.loc() {
                self.remote.add(s);
            }
            i.data_bytes += r.r.len as u64;
            i.data.insert(r.r.file_off, r);
        }
        Ok(())
    }

    /// Give back the buffer references of pieces that will not be linked.
    pub(crate) fn release_pieces(&self, pieces: &[Piece]) {
        let local: Vec<Slice> = pieces.iter().filter_map(|p| p.loc.local()).collect();
        if !local.is_empty() {
            self.release_payload(&local);
        }
    }

    /// The part `[skip, skip+len)` of record `r` as a piece at `file_off`,
    /// with a CRC of its own. The record is checked first, so a fresh CRC
    /// never vouches for bytes that were already wrong (a damaged record
    /// leaves damaged remnants). A remote record's remnant stays in its
    /// object: its bytes are fetched (and checked) once, for the CRC.
    fn remnant(
        &self,
        i: &Inode,
        r: &Rec,
        skip: u32,
        len: u32,
        file_off: u64,
        bs: u32,
    ) -> Result<Piece> {
        let (loc, flags, crc) = match r.loc() {
            Loc::Local(s) => {
                let s = s.sub(skip, len, bs);
                (
                    Loc::Local(s),
                    self.derived_flags(i, r),
                    pktfs_layout::crc32c(self.slice_bytes(s)),
                )
            }
            Loc::Remote(s) => {
                let bytes = self.fetch_rec(i, r)?;
                let part = &bytes[skip as usize..(skip + len) as usize];
                (
                    Loc::Remote(s.sub(skip, len)),
                    r.r.flags,
                    pktfs_layout::crc32c(part),
                )
            }
        };
        Ok(Piece {
            loc,
            flags,
            crc,
            file_off,
            seq: r.r.seq,
            timestamp_ns: r.r.timestamp_ns,
        })
    }

    /// Write `data` at `off`. Durable when it returns.
    pub fn write(&self, ino: u64, off: u64, data: &[u8]) -> Result<usize> {
        self.write_ext(ino, off, data, None)
    }

    /// Write with explicit packet metadata (netpath: receive timestamp and
    /// stream sequence). `meta` = (timestamp_ns, seq, flags).
    pub fn write_ext(
        &self,
        ino: u64,
        off: u64,
        data: &[u8],
        meta: Option<(u64, u64, u8)>,
    ) -> Result<usize> {
        self.check_writable()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        self.write_locked(&mut i, off, data, meta)
    }

    /// Append at the current end of file, atomically with respect to other
    /// appends; returns the offset written at.
    pub fn append(&self, ino: u64, data: &[u8], meta: Option<(u64, u64, u8)>) -> Result<u64> {
        self.check_writable()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let off = i.attr.size;
        self.write_locked(&mut i, off, data, meta)?;
        Ok(off)
    }

    fn write_locked(
        &self,
        i: &mut Inode,
        off: u64,
        data: &[u8],
        meta: Option<(u64, u64, u8)>,
    ) -> Result<usize> {
        Self::file_inode(i)?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(FsError::TooBig)?;
        let slices = self.alloc_payload(data.len() as u64)?;
        // Step 1 of the idiom: payload into buffer space, CRC while hot.
        let crcs = self.write_payload(&slices, data);
        let now = now_ns();
        let (ts, seq0, flags) = meta.unwrap_or((now as u64, i.next_seq, 0));
        let mut pieces = Vec::with_capacity(slices.len());
        let mut at = off;
        for (k, s) in slices.iter().enumerate() {
            let seq = if meta.is_some() {
                seq0 + (at - off)
            } else {
                seq0 + k as u64
            };
            pieces.push(Piece {
                loc: Loc::Local(*s),
                crc: crcs[k],
                file_off: at,
                seq,
                timestamp_ns: ts,
                flags,
            });
            at += s.len as u64;
        }
        if meta.is_none() {
            i.next_seq += slices.len() as u64;
        }
        let mut attr = i.attr;
        attr.size = attr.size.max(end);
        attr.mtime_ns = now;
        attr.ctime_ns = now;
        self.splice_range(i, off, end, pieces, attr)?;
        Ok(data.len())
    }

    /// Read up to `len` bytes at `off` as segments without copying.
    pub fn read_with<R>(
        &self,
        ino: u64,
        off: u64,
        len: u64,
        f: impl FnOnce(&[Seg<'_>]) -> R,
    ) -> Result<R> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Self::file_inode(&i).or_else(|e| {
            if i.attr.kind == FileType::Symlink {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        let size = i.attr.size;
        if off >= size || len == 0 {
            return Ok(f(&[]));
        }
        let end = size.min(off.saturating_add(len));
        let bs = self.geo.buffer_size_bytes;
        // Data in the image, fetched bytes of remote records, or holes;
        // records that lie back to back in the buffer region (as sequential
        // writes leave them) become one segment.
        enum Part {
            Image(u64, u64),
            Fetched(usize, usize, usize),
            Zero(u64),
        }
        let mut parts: Vec<Part> = Vec::new();
        let mut fetched: Vec<super::RemoteBytes> = Vec::new();
        for c in cover(&i, off, end, bs) {
            match c {
                Cover::Hole(n) => match parts.last_mut() {
                    Some(Part::Zero(l)) => *l += n,
                    _ => parts.push(Part::Zero(n)),
                },
                Cover::Data(sl, r) => {
                    // No byte of a record leaves before its CRC matched.
                    self.verify_rec(&i, &r)?;
                    let img = self.geo.buffer_pos(sl.buffer, sl.buf_off).0;
                    match parts.last_mut() {
                        Some(Part::Image(a, l)) if *a + *l == img => *l += sl.len as u64,
                        _ => parts.push(Part::Image(img, sl.len as u64)),
                    }
                }
                Cover::Remote(sl, r) => {
                    // The whole record comes back and is checked, whatever
                    // part of it the read wants.
                    let bytes = self.fetch_rec(&i, &r)?;
                    let skip = (sl.off - r.r.remote_off()) as usize;
                    parts.push(Part::Fetched(fetched.len(), skip, sl.len as usize));
                    fetched.push(bytes);
                }
            }
        }
        let segs: Vec<Seg<'_>> = parts
            .into_iter()
            .map(|p| match p {
                Part::Image(o, len) => Seg::Data(self.pm.slice(o, len as usize)),
                Part::Fetched(k, skip, len) => Seg::Data(&fetched[k][skip..skip + len]),
                Part::Zero(len) => Seg::Zero(len as usize),
            })
            .collect();
        Ok(f(&segs))
    }

    /// Read into a new vector.
    pub fn read(&self, ino: u64, off: u64, len: u64) -> Result<Vec<u8>> {
        self.read_with(ino, off, len, |segs| {
            let mut v = Vec::new();
            for s in segs {
                match s {
                    Seg::Data(d) => v.extend_from_slice(d),
                    Seg::Zero(n) => v.resize(v.len() + n, 0),
                }
            }
            v
        })
    }

    /// chmod / chown / truncate / utimens, in one commit.
    pub fn setattr(&self, ino: u64, s: &SetAttr) -> Result<Attr> {
        self.check_writable()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        let now = now_ns();
        let mut a = i.attr;
        if let Some(m) = s.mode {
            a.mode = m & 0o7777;
        }
        if let Some(u) = s.uid {
            a.uid = u;
        }
        if let Some(g) = s.gid {
            a.gid = g;
        }
        if let Some(t) = s.atime {
            a.atime_ns = resolve_time(t, now);
        }
        if let Some(t) = s.mtime {
            a.mtime_ns = resolve_time(t, now);
        }
        let changed = s.mode.is_some()
            || s.uid.is_some()
            || s.gid.is_some()
            || s.size.is_some()
            || s.atime.is_some()
            || s.mtime.is_some();
        a.ctime_ns = match s.ctime {
            Some(t) => resolve_time(t, now),
            None if changed => now,
            None => a.ctime_ns,
        };
        if let Some(size) = s.size {
            Self::file_inode(&i)?;
            if size > MAX_FILE_SIZE {
                return Err(FsError::TooBig);
            }
            if size != i.attr.size || s.mtime.is_none() {
                a.mtime_ns = s.mtime.map(|t| resolve_time(t, now)).unwrap_or(now);
            }
            a.size = size;
            if size < i.attr.size {
                // Drop records past the new end; split the one straddling it.
                let end = i
                    .data
                    .last_key_value()
                    .map(|(_, r)| r.r.file_end())
                    .unwrap_or(0)
                    .max(size);
                self.splice_range(&mut i, size, end, Vec::new(), a)?;
                return Ok(self.attr_of(&i));
            }
        }
        let mut commit = Commit::new();
        self.set_attr(&mut commit, &mut i, a);
        commit.apply(self);
        Ok(self.attr_of(&i))
    }

    /// What a write or truncate by someone without CAP_FSETID does to a
    /// regular file on Linux (file_remove_privs, setattr_should_drop_suidgid):
    /// clear setuid; clear setgid when group-execute is set, or when the
    /// writer is not in the file's group (`in_group(gid)`, asked only
    /// then). One commit, and none when there is nothing to clear;
    /// callers clear before they write, so no crash leaves the new data
    /// under the old privileges. Returns whether the mode changed.
    pub fn kill_suidgid(&self, ino: u64, in_group: impl Fn(u32) -> bool) -> Result<bool> {
        const S_ISUID: u32 = 0o4000;
        const S_ISGID: u32 = 0o2000;
        const S_IXGRP: u32 = 0o0010;
        let kill = |a: &AttrSlot| {
            let mut k = a.mode & S_ISUID;
            if a.mode & S_ISGID != 0 && (a.mode & S_IXGRP != 0 || !in_group(a.gid)) {
                k |= S_ISGID;
            }
            k
        };
        let arc = self.inode(ino)?;
        {
            // The common case, no privilege bits: a shared lock and no commit.
            let i = super::rlock(&arc)?;
            if i.attr.kind != FileType::Regular || kill(&i.attr) == 0 {
                return Ok(false);
            }
        }
        self.check_writable()?;
        let mut i = super::wlock(&arc)?;
        let k = kill(&i.attr);
        if i.attr.kind != FileType::Regular || k == 0 {
            return Ok(false);
        }
        let mut a = i.attr;
        a.mode &= !k;
        a.ctime_ns = now_ns();
        let mut commit = Commit::new();
        self.set_attr(&mut commit, &mut i, a);
        commit.apply(self);
        Ok(true)
    }

    /// The file's records as packets. Each record is checked as a read
    /// would check it, so a damaged one shows as such.
    pub fn chain(&self, ino: u64) -> Result<Vec<ChainEntry>> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Ok(i.data
            .values()
            .map(|r| ChainEntry {
                record: r.id.0,
                file_off: r.r.file_off,
                len: r.r.len,
                buffer: r.r.buffer,
                buf_off: r.r.buf_off,
                image_off: if r.r.is_remote() {
                    0
                } else {
                    self.geo.buffer_pos(r.r.buffer, r.r.buf_off).0
                },
                remote: r
                    .r
                    .is_remote()
                    .then(|| (r.r.remote_obj(), r.r.remote_off())),
                payload_crc: r.r.payload_crc,
                timestamp_ns: r.r.timestamp_ns,
                seq: r.r.seq,
                from_network: r.r.flags & pktfs_layout::record::FLAG_RX != 0,
                kernel_time: r.r.flags & pktfs_layout::record::FLAG_KERNEL_TIME != 0,
                damaged: self.verify_rec(&i, r).is_err(),
            })
            .collect())
    }

    /// fsync: every operation is durable when it returns; nothing to do
    /// beyond checking the inode exists.
    pub fn fsync(&self, ino: u64) -> Result<()> {
        self.inode(ino).map(|_| ())
    }
}
