//! Operations on a file's byte ranges that move no payload bytes:
//! fallocate (fill holes with zeroed buffer space, punch holes),
//! SEEK_DATA / SEEK_HOLE, and copy_file_range, whose new records share the
//! source's buffer space. Each change is one splice of `file.rs`.

use super::failstop::OrStop;

use super::commit::Commit;
use super::file::{cover, walk_from, Cover, FallocMode, Piece};
use super::remote::Loc;
use super::{now_ns, Volume, MAX_FILE_SIZE};
use crate::error::{FsError, Result};

impl Volume {
    /// fallocate(2): mode 0 / KEEP_SIZE fill holes with zeroed buffer space;
    /// PUNCH_HOLE (with KEEP_SIZE) drops the range's data.
    pub fn fallocate(&self, ino: u64, off: u64, len: u64, mode: FallocMode) -> Result<()> {
        self.check_writable()?;
        if len == 0 {
            return Err(FsError::Invalid("fallocate length 0"));
        }
        let end = off
            .checked_add(len)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(FsError::TooBig)?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        Self::file_inode(&i)?;
        let now = now_ns();
        if mode.punch_hole {
            if !mode.keep_size {
                return Err(FsError::NotSupported("PUNCH_HOLE needs KEEP_SIZE"));
            }
            let size = i.attr.size;
            let end = end.min(size);
            if off >= end {
                return Ok(());
            }
            let mut a = i.attr;
            a.mtime_ns = now;
            a.ctime_ns = now;
            return self.splice_range(&mut i, off, end, Vec::new(), a);
        }
        // With KEEP_SIZE nothing is allocated past the end of file: a data
        // chain never reaches past the size (recovery checks that), and on a
        // copy-on-write file system a reservation past EOF would promise
        // nothing anyway.
        let end = if mode.keep_size {
            end.min(i.attr.size)
        } else {
            end
        };
        if off >= end {
            return Ok(());
        }
        // Holes inside [off, end).
        let mut holes = Vec::new();
        let mut pos = off;
        for c in cover(&i, off, end, self.geo.buffer_size_bytes) {
            match c {
                Cover::Hole(n) => {
                    holes.push((pos, pos + n));
                    pos += n;
                }
                Cover::Data(sl, _) => pos += sl.len as u64,
                Cover::Remote(sl, _) => pos += sl.len as u64,
            }
        }
        let total: u64 = holes.iter().map(|(a, b)| b - a).sum();
        if total > self.statfs().blocks_free * self.geo.buffer_size_bytes as u64 {
            return Err(FsError::NoSpace("not enough free buffer space to allocate"));
        }
        let new_size = if mode.keep_size {
            i.attr.size
        } else {
            i.attr.size.max(end)
        };
        let n = holes.len();
        for (k, (h0, h1)) in holes.into_iter().enumerate() {
            let slices = self.alloc_payload(h1 - h0)?;
            let mut pieces = Vec::new();
            let mut at = h0;
            for s in &slices {
                let pos = self.geo.buffer_pos(s.buffer, s.buf_off).0;
                let crc = self.pm.zero_nt(pos, s.len as u64);
                pieces.push(Piece {
                    loc: Loc::Local(*s),
                    crc,
                    file_off: at,
                    seq: i.next_seq,
                    timestamp_ns: now as u64,
                    flags: 0,
                });
                i.next_seq += 1;
                at += s.len as u64;
            }
            let mut a = i.attr;
            a.ctime_ns = now;
            if k + 1 == n {
                a.size = new_size;
                a.mtime_ns = now;
            }
            self.splice_range(&mut i, h0, h1, pieces, a)?;
        }
        if n == 0 && new_size != i.attr.size {
            let mut a = i.attr;
            a.size = new_size;
            a.ctime_ns = now;
            a.mtime_ns = now;
            let mut commit = Commit::new();
            self.set_attr(&mut commit, &mut i, a);
            commit.apply(self);
        }
        Ok(())
    }

    /// lseek SEEK_DATA (`data` true) or SEEK_HOLE from `off`.
    pub fn seek(&self, ino: u64, off: u64, data: bool) -> Result<u64> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        let size = i.attr.size;
        if off >= size {
            return Err(FsError::Nxio);
        }
        let mut pos = off;
        for (_, r) in i.data.range(walk_from(&i, off)..) {
            if r.r.file_end() <= pos {
                continue;
            }
            if data {
                return Ok(pos.max(r.r.file_off));
            }
            if r.r.file_off > pos {
                return Ok(pos); // in a hole
            }
            pos = r.r.file_end();
        }
        if data {
            Err(FsError::Nxio)
        } else {
            Ok(pos.min(size).max(off))
        }
    }

    /// copy_file_range: the destination's new records point at the source's
    /// buffer space (shared, reference-counted), so no bytes are copied.
    pub fn copy_range(&self, src: u64, soff: u64, dst: u64, doff: u64, len: u64) -> Result<u64> {
        self.check_writable()?;
        if src == dst {
            let overlap = soff < doff.saturating_add(len) && doff < soff.saturating_add(len);
            if overlap {
                return Err(FsError::Invalid("overlapping copy within one file"));
            }
        }
        let sarc = self.inode(src)?;
        let darc = self.inode(dst)?;
        // Collect source pieces under the source's read lock (taken alone,
        // then released, so no two inode locks are held out of order).
        let (pieces, copied) = {
            let s = super::rlock(&sarc)?;
            Self::file_inode(&s)?;
            let end = s.attr.size.min(soff.saturating_add(len));
            if soff >= end {
                return Ok(0);
            }
            let bs = self.geo.buffer_size_bytes;
            let mut pieces = Vec::new();
            let mut a = self.alloc.lock().or_stop();
            let mut pos = soff;
            for c in cover(&s, soff, end, bs) {
                let (loc, r) = match c {
                    Cover::Hole(n) => {
                        pos += n; // a hole stays a hole
                        continue;
                    }
                    Cover::Data(sl, r) => (Loc::Local(sl), r),
                    Cover::Remote(sl, r) => (Loc::Remote(sl), r),
                };
                // Verified before its CRC is reused or a part of it gets a
                // fresh one: a damaged source makes a damaged copy. A
                // remote record's copy names the same object slice; a part
                // of one is fetched (and checked) for its CRC.
                let whole = loc.len() == r.r.len;
                let (flags, crc) = match loc {
                    Loc::Local(sl) => {
                        let flags = self.derived_flags(&s, &r);
                        let crc = if whole {
                            r.r.payload_crc
                        } else {
                            pktfs_layout::crc32c(self.slice_bytes(sl))
                        };
                        a.take_ref(sl);
                        (flags, crc)
                    }
                    Loc::Remote(_) if whole => (r.r.flags, r.r.payload_crc),
                    Loc::Remote(rs) => {
                        let bytes = match self.fetch_rec(&s, &r) {
                            Ok(b) => b,
                            Err(e) => {
                                drop(a);
                                self.release_pieces(&pieces);
                                return Err(e);
                            }
                        };
                        let skip = (rs.off - r.r.remote_off()) as usize;
                        (
                            r.r.flags,
                            pktfs_layout::crc32c(&bytes[skip..skip + rs.len as usize]),
                        )
                    }
                };
                pieces.push(Piece {
                    loc,
                    crc,
                    file_off: pos - soff + doff,
                    seq: r.r.seq,
                    timestamp_ns: r.r.timestamp_ns,
                    flags,
                });
                pos += loc.len() as u64;
            }
            (pieces, end - soff)
        };
        let dend = doff
            .checked_add(copied)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(FsError::TooBig)?;
        let mut d = super::wlock(&darc)?;
        if let Err(e) = Self::file_inode(&d) {
            self.release_pieces(&pieces);
            return Err(e);
        }
        let now = now_ns();
        let mut a = d.attr;
        a.size = a.size.max(dend);
        a.mtime_ns = now;
        a.ctime_ns = now;
        self.splice_range(&mut d, doff, dend, pieces, a)?;
        Ok(copied)
    }
}
