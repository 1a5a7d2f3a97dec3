//! A regular file opened for direct reading: reads copy its bytes out of
//! the mapping in a section, check them against their records' CRCs, and
//! keep the result only if the section held.

use std::io::IoSliceMut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pktfs_layout::{live, FileType};

use crate::error::{Error, Result};
use crate::holder::{Held, NoHold, MAX_HOLD_BYTES};
use crate::index::{Index, Loc};
use crate::lend::Seg;
use crate::section::Section;
use crate::shared::Shared;
use crate::stat::Stat;
use crate::verify::{crc_of, VerifyMode};

/// Records a read checks and marks verified once it holds: inline for the
/// common reads, which touch one or two.
type Marks = smallvec::SmallVec<[usize; 4]>;

/// An open regular file of an image.
#[derive(Debug)]
pub struct File {
    pub(crate) shared: Arc<Shared>,
    ino: u32,
    /// The incarnation of `ino` this handle reads: another birth means the
    /// number names another file now.
    birth: u64,
    /// The path it was opened by, to find it again after the holder
    /// restarted (a new image epoch).
    path: Option<String>,
    /// The epoch in which (ino, birth) was last confirmed.
    epoch: AtomicU64,
    /// The index of the last section that read it.
    cache: Mutex<Option<Arc<Index>>>,
}

impl File {
    pub(crate) fn new(
        shared: Arc<Shared>,
        ino: u32,
        birth: u64,
        path: Option<String>,
    ) -> Result<File> {
        let name = || path.clone().unwrap_or_else(|| format!("inode {ino}"));
        let (kind, epoch) = shared.consistent(ino, |s| {
            let v = shared.inode(ino)?;
            if v.birth != birth {
                return Err(Error::Stale(ino as u64));
            }
            Ok((v.attr.kind, s.epoch))
        })?;
        match kind {
            FileType::Regular => {}
            FileType::Directory => return Err(Error::IsDir(name())),
            _ => return Err(Error::NotRegular(name())),
        }
        Ok(File {
            shared,
            ino,
            birth,
            path,
            epoch: AtomicU64::new(epoch),
            cache: Mutex::new(None),
        })
    }

    /// The file's inode number.
    pub fn ino(&self) -> u64 {
        self.ino as u64
    }

    /// The file's birth (which incarnation of the inode number it is).
    pub fn birth(&self) -> u64 {
        self.birth
    }

    pub fn stat(&self) -> Result<Stat> {
        self.with_index(|ix, _| Ok(Stat::of(self.ino, ix, self.shared.g.buffer_size_bytes)))
    }

    /// The file's size now.
    pub fn len(&self) -> Result<u64> {
        self.with_index(|ix, _| Ok(ix.attr.size))
    }

    /// Whether the file is empty now.
    pub fn is_empty(&self) -> Result<bool> {
        self.len().map(|n| n == 0)
    }

    /// Read at most `buf.len()` bytes at `off`; 0 at or past the end. The
    /// bytes are the file's at one moment, each checked against its
    /// record's CRC as the verify mode says.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> Result<usize> {
        let mut one = [IoSliceMut::new(buf)];
        self.read_vectored_at(&mut one, off)
    }

    /// Fill `buf` from `off`, or fail (`UnexpectedEof` as an io error kind
    /// through [`std::io::Error`]) if the file ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<()> {
        let n = self.read_at(buf, off)?;
        if n < buf.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "inode {}: {} bytes at {off} asked, the file ends after {n}",
                    self.ino,
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// Scatter a read at `off` over `bufs`, all of it from one moment of
    /// the file.
    pub fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], off: u64) -> Result<usize> {
        match self.read_mapped(bufs, off) {
            // What the mapping alone cannot give: through the holder, if
            // there is one (a range in the tier; a file rewritten under
            // every attempt), else the error as it is.
            Err(e @ (Error::Remote { .. } | Error::Busy(_))) => match self.read_held(bufs, off) {
                Err(NoHold::NoHolder) => Err(e),
                Err(NoHold::Stale) => Err(Error::Stale(self.ino as u64)),
                Err(NoHold::Refused(why)) => Err(Error::Holder(why)),
                Ok(n) => Ok(n),
            },
            r => r,
        }
    }

    /// Copy from the mapping in a section that holds.
    fn read_mapped(&self, bufs: &mut [IoSliceMut<'_>], off: u64) -> Result<usize> {
        let ((n, marks), ix) = self.with_index_kept(|ix, _| {
            let mut total = 0usize;
            let mut marks = Marks::new();
            for b in bufs.iter_mut() {
                let (n, m) = self.shared.read_ix(self.ino, ix, off + total as u64, b)?;
                total += n;
                marks.extend(m);
                if n < b.len() {
                    break;
                }
            }
            Ok((total, marks))
        })?;
        // Only now, the section having held, are the checks worth keeping.
        for k in marks {
            ix.mark_verified(k, &self.shared);
        }
        Ok(n)
    }

    /// Copy through a hold the holder takes for this reader.
    fn read_held(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        off: u64,
    ) -> std::result::Result<usize, NoHold> {
        let want: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let mut done = 0u64;
        let mut k = 0usize; // buffer
        let mut in_buf = 0usize; // bytes of buffer k filled
        while done < want {
            let len = (want - done).min(MAX_HOLD_BYTES);
            let h = self.hold(off + done, len)?;
            let mut got = 0u64;
            let segs = crate::lend::held(&self.shared.map, &h)
                .map_err(|e| NoHold::Refused(e.to_string()))?;
            for seg in segs {
                let (bytes, zeros) = match seg {
                    Seg::Data(d) => (Some(d), d.len()),
                    Seg::Zero(n) => (None, n),
                };
                let mut at = 0usize;
                while at < zeros && k < bufs.len() {
                    let dst = &mut bufs[k][in_buf..];
                    let n = dst.len().min(zeros - at);
                    match bytes {
                        Some(d) => dst[..n].copy_from_slice(&d[at..at + n]),
                        None => dst[..n].fill(0),
                    }
                    at += n;
                    in_buf += n;
                    if in_buf == bufs[k].len() {
                        k += 1;
                        in_buf = 0;
                    }
                }
                got += at as u64;
            }
            done += got;
            if got < len {
                break; // the end of the file
            }
        }
        Ok(done as usize)
    }

    fn hold(&self, off: u64, len: u64) -> std::result::Result<Held, NoHold> {
        let g = &self.shared.g;
        let buffers = (g.buffer_offset, g.buffer_offset + g.buffer_region_bytes());
        crate::holder::hold(
            &self.shared.path,
            (self.ino, self.birth),
            (off, len),
            buffers,
        )
    }

    /// Lend `[off, off+len)` of the file to `f` without a copy: slices of
    /// the image (checked against their records' CRCs as the verify mode
    /// says), the bytes of tiered records, zeros for holes; ends at the
    /// end of the file. At most [`MAX_HOLD_BYTES`] at once.
    ///
    /// The slices stay the file's bytes while `f` runs, because nothing
    /// may write them meanwhile: with no holder, the image's shared lock
    /// is held for `f` (a holder starting then waits for it, a bounded
    /// time, and fails); with one, the holder holds the range for this
    /// reader until `f` returns (docs/DIRECT.md). So `f` should return
    /// promptly; for small reads [`File::read_at`] is faster.
    pub fn read_with<R>(&self, off: u64, len: u64, f: impl FnOnce(&[Seg<'_>]) -> R) -> Result<R> {
        if len > MAX_HOLD_BYTES {
            return Err(Error::TooLong {
                len,
                max: MAX_HOLD_BYTES,
            });
        }
        if let Some(nw) = self.shared.no_writer() {
            // No writer can change anything while `nw` lives.
            let (plan, _) =
                self.with_index_kept(|ix, _| self.shared.plan_lend(self.ino, ix, off, len))?;
            let mut segs = Vec::with_capacity(plan.len());
            for p in plan {
                segs.push(match p {
                    Planned::Image { pos, len } => {
                        Seg::Data(crate::lend::unwritten(&self.shared.map, &nw, pos, len)?)
                    }
                    Planned::Zero(n) => Seg::Zero(n as usize),
                });
            }
            return Ok(f(&segs));
        }
        let h = self.hold(off, len).map_err(|e| match e {
            NoHold::NoHolder => Error::Holder(
                "the image is locked by a writer that does not answer on its control socket \
                 (fsck, or a holder stopping); try again"
                    .into(),
            ),
            NoHold::Stale => Error::Stale(self.ino as u64),
            NoHold::Refused(m) => Error::Holder(m),
        })?;
        let segs = crate::lend::held(&self.shared.map, &h)?;
        Ok(f(&segs))
    }

    /// Confirm after the holder restarted (a new image epoch) that this
    /// handle's inode is still its file: found again by its path, or, for
    /// a handle opened by number, because `still_mine` says so (the shim
    /// asks the kernel about its descriptor).
    pub fn rebind(&self, still_mine: impl FnOnce() -> bool) -> Result<()> {
        let epoch = self.current_epoch()?;
        let same = match &self.path {
            Some(p) => self.shared.resolve(p, true).ok() == Some((self.ino, self.birth)),
            None => {
                still_mine()
                    && self
                        .shared
                        .consistent(self.ino, |_| Ok(self.shared.inode(self.ino)?.birth))
                        .ok()
                        == Some(self.birth)
            }
        };
        if !same {
            return Err(Error::Stale(self.ino as u64));
        }
        self.epoch.store(epoch, Ordering::Relaxed);
        Ok(())
    }

    fn current_epoch(&self) -> Result<u64> {
        let e = self
            .shared
            .map
            .load_u64(live::epoch_pos(&self.shared.g))
            .unwrap_or(1);
        if live::in_flight(e) {
            return Err(Error::Repairing);
        }
        Ok(e)
    }

    /// Run `f` on the file's index in a section that holds.
    fn with_index<T>(&self, f: impl FnMut(&Index, &Section) -> Result<T>) -> Result<T> {
        self.with_index_kept(f).map(|(t, _)| t)
    }

    /// [`Self::with_index`], returning the index `f` saw too.
    fn with_index_kept<T>(
        &self,
        mut f: impl FnMut(&Index, &Section) -> Result<T>,
    ) -> Result<(T, Arc<Index>)> {
        let mut rebound = false;
        loop {
            let r = self.shared.consistent(self.ino, |s| {
                if s.epoch != self.epoch.load(Ordering::Relaxed) {
                    return Err(Error::Stale(self.ino as u64));
                }
                let ix = self.index(s)?;
                if ix.birth != self.birth {
                    return Err(Error::Stale(self.ino as u64));
                }
                Ok((f(&ix, s)?, ix))
            });
            match r {
                // The holder restarted (or a repair ran) since this handle
                // last looked: find the file again once, then go on.
                Err(Error::Stale(_)) if !rebound && self.epoch_moved() => {
                    rebound = true;
                    self.rebind(|| false)?;
                }
                Err(Error::NotFound(_)) => return Err(Error::Stale(self.ino as u64)),
                r => {
                    if let Ok((_, ix)) = &r {
                        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = Some(ix.clone());
                    }
                    return r;
                }
            }
        }
    }

    fn epoch_moved(&self) -> bool {
        self.current_epoch()
            .is_ok_and(|e| e != self.epoch.load(Ordering::Relaxed))
    }

    /// The cached index if it was made in a section with these words,
    /// else a new one (made in `s`).
    fn index(&self, s: &Section) -> Result<Arc<Index>> {
        if let Some(ix) = &*self.cache.lock().unwrap_or_else(|p| p.into_inner()) {
            if ix.section == *s {
                return Ok(ix.clone());
            }
        }
        self.shared.index_cached(self.ino, s)
    }
}

impl Shared {
    /// Copy the file's bytes at `off` into `buf` from index `ix` (made in
    /// the caller's section): holes as zeros, local records from the
    /// mapping, checked as the verify mode says. Returns the bytes copied
    /// and the records checked here (to mark once the section holds).
    pub(crate) fn read_ix(
        &self,
        ino: u32,
        ix: &Index,
        off: u64,
        buf: &mut [u8],
    ) -> Result<(usize, Marks)> {
        let size = ix.attr.size;
        if off >= size || buf.is_empty() {
            return Ok((0, Marks::new()));
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        let end = off + n as u64;
        let mode = self.verify_mode();
        let mut marks = Marks::new();
        let mut k = ix.first_after(off);
        let mut at = off;
        while at < end {
            let dst = &mut buf[(at - off) as usize..n];
            match ix.extents.get(k).filter(|e| e.file_off <= at) {
                None => {
                    // A hole, up to the next record or the end.
                    let upto = ix.extents.get(k).map_or(end, |e| e.file_off.min(end));
                    let len = (upto - at) as usize;
                    dst[..len].fill(0);
                    at = upto;
                }
                Some(e) => {
                    let upto = e.end().min(end);
                    let len = (upto - at) as usize;
                    let pos = match e.loc {
                        Loc::Local(pos) => pos,
                        Loc::Remote => {
                            return Err(Error::Remote {
                                ino: ino as u64,
                                start: e.file_off,
                                end: e.end(),
                            })
                        }
                    };
                    if e.damaged {
                        return Err(damaged(ino, e, "fsck marked the record damaged"));
                    }
                    if !self.map.copy_out(pos + (at - e.file_off), &mut dst[..len]) {
                        return Err(damaged(ino, e, "the record's bytes lie outside the image"));
                    }
                    let check = match mode {
                        VerifyMode::Off => false,
                        VerifyMode::Once => !e.verified.load(Ordering::Relaxed),
                        VerifyMode::Always => true,
                    };
                    if check {
                        // A CRC vouches for its whole slice: check all of it.
                        if crc_of(&self.map, pos, e.len) != Some(e.payload_crc) {
                            return Err(damaged(ino, e, "payload checksum mismatch"));
                        }
                        if mode == VerifyMode::Once {
                            marks.push(k);
                        }
                    }
                    at = upto;
                    k += 1;
                }
            }
        }
        Ok((n, marks))
    }
}

/// A piece of a lend, planned in a section.
pub(crate) enum Planned {
    Image { pos: u64, len: u64 },
    Zero(u64),
}

impl Shared {
    /// The pieces of `[off, off+len)` in index `ix`, every record touched
    /// checked as the verify mode says (no writer can change them: the
    /// caller holds the shared lock).
    fn plan_lend(&self, ino: u32, ix: &Index, off: u64, len: u64) -> Result<Vec<Planned>> {
        let size = ix.attr.size;
        let end = size.min(off.saturating_add(len));
        let mode = self.verify_mode();
        let mut out = Vec::new();
        let mut k = ix.first_after(off);
        let mut at = off;
        while at < end {
            match ix.extents.get(k).filter(|e| e.file_off <= at) {
                None => {
                    let upto = ix.extents.get(k).map_or(end, |e| e.file_off.min(end));
                    out.push(Planned::Zero(upto - at));
                    at = upto;
                }
                Some(e) => {
                    let pos = match e.loc {
                        Loc::Local(pos) => pos,
                        Loc::Remote => {
                            return Err(Error::Remote {
                                ino: ino as u64,
                                start: e.file_off,
                                end: e.end(),
                            })
                        }
                    };
                    if e.damaged {
                        return Err(damaged(ino, e, "fsck marked the record damaged"));
                    }
                    let check = match mode {
                        VerifyMode::Off => false,
                        VerifyMode::Once => !e.verified.load(Ordering::Relaxed),
                        VerifyMode::Always => true,
                    };
                    if check {
                        if crc_of(&self.map, pos, e.len) != Some(e.payload_crc) {
                            return Err(damaged(ino, e, "payload checksum mismatch"));
                        }
                        ix.mark_verified(k, self);
                    }
                    let upto = e.end().min(end);
                    out.push(Planned::Image {
                        pos: pos + (at - e.file_off),
                        len: upto - at,
                    });
                    at = upto;
                    k += 1;
                }
            }
        }
        Ok(out)
    }
}

fn damaged(ino: u32, e: &crate::index::Extent, why: &str) -> Error {
    Error::Damaged {
        ino: ino as u64,
        start: e.file_off,
        end: e.end(),
        why: format!("record {}: {why}", e.rec),
    }
}
