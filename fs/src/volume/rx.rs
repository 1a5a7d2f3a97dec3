//! The receive path's view of the Volume: reserve free buffer space, let the
//! caller `recv()` straight into it (bytes move kernel -> PM once), turn the
//! received bytes into pieces (CRC computed while hot, lines flushed), and
//! link a batch of pieces at the end of a file with one commit.
//!
//! Also unnamed files (like O_TMPFILE): an upload is written into an inode
//! no directory names, and appears atomically under its name at the end, so
//! an upload that never completes is never visible and never replaces the
//! file it was meant to replace.

use super::failstop::OrStop;
use layout::{AttrSlot, FileType, RecordId};

use smallvec::SmallVec;

use super::alloc::Slice;
use super::digest::{Bound, ContentDigest, Precondition};
use super::file::{Cover, Piece};
use super::ns::FIRST_COOKIE;
use super::tx::Tx;
use super::{check_name, now_ns, write_new_inode, Attr, Inode, Volume};
use crate::error::{FsError, Result};
use crate::media::net::IoSeg;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// Reserved, unreachable buffer space to receive into: the only handle
/// through which its bytes are written. Owns one reference on its buffers,
/// given back when it is dropped (pieces made from it hold their own).
///
/// Its bytes are written once, front to back: `[0, filled)` has been
/// received (or appended) and is from then on only read (pieces, and the
/// files they become, name it); `[filled, cap)` is where the next `recv`
/// lands. Writing needs `&mut self`, reading the received bytes `&self`,
/// so the borrow checker keeps the two apart.
#[derive(Debug)]
pub struct RxBuf<'v> {
    vol: &'v Volume,
    /// The reservation's reference on its buffers, shared with the
    /// [`RxHeld`] ranges handed to other threads: the last owner's drop
    /// gives it back (no allocator lock to hand a range over).
    space: Arc<Space<'v>>,
    /// Image offset of the first byte and the capacity in bytes.
    image_off: u64,
    cap: u32,
    /// Bytes received so far (from the start).
    filled: u32,
}

impl<'v> RxBuf<'v> {
    /// Image offset of the first byte.
    pub fn image_off(&self) -> u64 {
        self.image_off
    }
    /// Capacity in bytes.
    pub fn cap(&self) -> u32 {
        self.cap
    }
    /// Bytes received (or appended) so far.
    pub fn filled(&self) -> u32 {
        self.filled
    }
    /// Room left for receiving.
    pub fn spare(&self) -> u32 {
        self.cap - self.filled
    }

    /// The bytes received so far, where they landed in the image.
    pub fn received(&self) -> &[u8] {
        // `[image_off, image_off+filled)` is this reservation's, written
        // only through `&mut self` and only past `filled`: nothing writes
        // these bytes while the borrow of `self` lives.
        self.vol.pm.slice(self.image_off, self.filled as usize)
    }

    /// recvmsg(2) from `fd` into the free tail, with the kernel's receive
    /// timestamp (SO_TIMESTAMPNS). Returns what recvmsg returned; the
    /// bytes count as received.
    pub fn recv_timestamped(
        &mut self,
        fd: impl AsFd,
        flags: i32,
    ) -> std::io::Result<(usize, Option<u64>)> {
        let (n, ts) = self.vol.pm.recv_timestamped(
            fd.as_fd().as_raw_fd(),
            self.image_off + self.filled as u64,
            self.spare() as usize,
            flags,
        )?;
        self.filled += n as u32;
        Ok((n, ts))
    }

    /// recv(2) from `fd` into the free tail.
    pub fn recv(&mut self, fd: impl AsFd, flags: i32) -> std::io::Result<usize> {
        let n = self.vol.pm.recv_into(
            fd.as_fd().as_raw_fd(),
            self.image_off + self.filled as u64,
            self.spare() as usize,
            flags,
        )?;
        self.filled += n as u32;
        Ok(n)
    }

    /// Copy `data` in after the bytes received so far (bytes carried over
    /// from elsewhere, or a test standing in for `recv`). Panics when it
    /// does not fit.
    pub fn append(&mut self, data: &[u8]) {
        assert!(
            data.len() as u64 <= self.spare() as u64,
            "{} bytes do not fit the {} left in the reservation",
            data.len(),
            self.spare()
        );
        self.vol.pm.write(self.image_off + self.filled as u64, data);
        self.filled += data.len() as u32;
    }

    /// `n` more bytes were written past `filled` by someone holding the
    /// right to (a completion of the kernel's receive into a lent
    /// reservation, `super::rxring`).
    pub(super) fn mark_filled(&mut self, n: u32) {
        assert!(n <= self.spare(), "filled past the reservation");
        self.filled += n;
    }

    /// Take a reference on received bytes `[skip, skip+len)` to make a
    /// piece of later, maybe on another thread ([`RxHeld::piece`]).
    pub fn hold(&self, skip: u32, len: u32) -> RxHeld<'v> {
        assert!(
            len > 0 && skip.checked_add(len).is_some_and(|e| e <= self.filled),
            "piece outside the received bytes of its reservation"
        );
        let s = self
            .space
            .slice
            .sub(skip, len, self.vol.geo.buffer_size_bytes);
        RxHeld {
            space: Arc::clone(&self.space),
            slice: s,
        }
    }

    /// Received bytes `[skip, skip+len)`, received at `timestamp_ns` with
    /// stream position `seq`, become a piece: see [`RxHeld::piece`].
    pub fn piece(&self, skip: u32, len: u32, timestamp_ns: u64, seq: u64) -> RxPiece<'v> {
        self.hold(skip, len).piece(timestamp_ns, seq)
    }
}

/// A reservation's reference on its buffers, given back when the last of
/// the reservation and its held ranges is dropped, on whatever thread.
#[derive(Debug)]
struct Space<'v> {
    vol: &'v Volume,
    slice: Slice,
}

impl Drop for Space<'_> {
    fn drop(&mut self) {
        self.vol.drop_ref_quiet(self.slice);
    }
}

/// Received bytes of a reservation, held (they keep the reservation's
/// space alive) until they become a piece, maybe on another thread.
#[derive(Debug)]
pub struct RxHeld<'v> {
    space: Arc<Space<'v>>,
    slice: Slice,
}

impl<'v> RxHeld<'v> {
    pub fn len(&self) -> u32 {
        self.slice.len
    }
    pub fn is_empty(&self) -> bool {
        self.slice.len == 0
    }

    /// The held bytes (received, so only ever read from now on).
    pub fn bytes(&self) -> &[u8] {
        // Received bytes are written once, before they are held, and never
        // again while a reference on them lives.
        self.space.vol.slice_bytes(self.slice)
    }

    /// Split off the first `n` held bytes (a request head, framing, or the
    /// body of one request before the next pipelined one): both parts keep
    /// the reservation's space alive. Panics unless `0 < n < len`.
    pub fn split_to(&mut self, n: u32) -> RxHeld<'v> {
        assert!(n > 0 && n < self.slice.len, "split outside the held bytes");
        let bs = self.space.vol.geo.buffer_size_bytes;
        let front = self.slice.sub(0, n, bs);
        self.slice = self.slice.sub(n, self.slice.len - n, bs);
        RxHeld {
            space: Arc::clone(&self.space),
            slice: front,
        }
    }

    /// Make the piece: CRC32C computed and cache lines flushed now; the
    /// reference moves to the piece.
    pub fn piece(self, timestamp_ns: u64, seq: u64) -> RxPiece<'v> {
        let vol = self.space.vol;
        let s = self.slice;
        let off = vol.geo.buffer_pos(s.buffer, s.buf_off).0;
        // Checksum first, while the received bytes are in the cache: a
        // write-back may also evict the lines (clwb does on some CPUs, and
        // clflushopt always does), and the CRC would then read them back
        // from memory.
        let crc = layout::crc32c(vol.slice_bytes(s));
        vol.pm.flush(off, s.len as u64);
        // The piece's own reference, taken while the reservation's share
        // (dropped after this) still holds the buffers.
        vol.alloc.lock().or_stop().take_ref(s);
        drop(self);
        RxPiece {
            vol,
            piece: Piece {
                loc: super::remote::Loc::Local(s),
                crc,
                file_off: 0,
                seq,
                timestamp_ns,
                flags: layout::record::FLAG_RX,
            },
        }
    }
}

/// Received bytes ready to be linked into a file. Owns one reference on
/// its buffers: committing it hands the reference to the file's record,
/// dropping it gives it back. Not `Copy`: one owner, one release.
#[derive(Debug)]
pub struct RxPiece<'v> {
    vol: &'v Volume,
    piece: Piece,
}

impl RxPiece<'_> {
    /// The buffer space the piece references (always local: received
    /// bytes land in PM).
    fn slice(&self) -> Slice {
        match self.piece.loc {
            super::remote::Loc::Local(s) => s,
            super::remote::Loc::Remote(_) => Slice {
                buffer: 0,
                buf_off: 0,
                len: 0,
            },
        }
    }
    pub fn len(&self) -> u32 {
        self.piece.loc.len()
    }
    pub fn is_empty(&self) -> bool {
        self.piece.loc.len() == 0
    }
    pub fn crc(&self) -> u32 {
        self.piece.crc
    }
    /// Kernel receive time of the bytes, ns since the epoch.
    pub fn timestamp_ns(&self) -> u64 {
        self.piece.timestamp_ns
    }

    /// The piece and its reference, now the caller's (`vol`'s) to account.
    fn take(self, vol: &Volume) -> Piece {
        assert!(
            std::ptr::eq(self.vol, vol),
            "a piece of another volume's buffer space"
        );
        let p = self.piece;
        std::mem::forget(self);
        p
    }
}

impl Drop for RxPiece<'_> {
    fn drop(&mut self) {
        self.vol.drop_ref_quiet(self.slice());
    }
}

impl Volume {
    /// Reserve up to `len` bytes of contiguous buffer space (at least one
    /// buffer; less than asked when free space is fragmented).
    pub fn rx_reserve(&self, len: u32) -> Result<RxBuf<'_>> {
        self.check_writable()?;
        let bs = self.geo.buffer_size_bytes;
        let want = len.div_ceil(bs).max(1);
        let s = self
            .alloc
            .lock()
            .or_stop()
            .alloc_run(want)
            .ok_or(FsError::NoSpace("no free buffer space"))?;
        Ok(RxBuf {
            vol: self,
            space: Arc::new(Space {
                vol: self,
                slice: s,
            }),
            image_off: self.geo.buffer_pos(s.buffer, s.buf_off).0,
            cap: s.len,
            filled: 0,
        })
    }

    /// Bytes `[skip, skip+len)` of the reservation, received from the
    /// network at `timestamp_ns` with stream position `seq`, become a piece:
    /// its cache lines are flushed and its CRC computed now. The piece holds
    /// its own reference on its buffers. Same as [`RxBuf::piece`].
    pub fn rx_piece<'v>(
        &'v self,
        buf: &RxBuf<'v>,
        skip: u32,
        len: u32,
        timestamp_ns: u64,
        seq: u64,
    ) -> RxPiece<'v> {
        assert!(std::ptr::eq(buf.vol, self), "another volume's reservation");
        buf.piece(skip, len, timestamp_ns, seq)
    }

    /// Give back a reservation; space not held by pieces becomes free.
    /// (Dropping it does the same.)
    pub fn rx_release(&self, buf: RxBuf<'_>) {
        drop(buf);
    }

    /// Give a reference back from a `Drop`: never panics (a poisoned
    /// allocator means the volume has stopped; the reference no longer
    /// matters, and a panic in a drop during unwinding would abort).
    pub(crate) fn drop_ref_quiet(&self, s: Slice) {
        match self.alloc.lock() {
            Ok(mut a) => a.drop_ref(s),
            Err(_) => {
                if !std::thread::panicking() {
                    self.fail(
                        "an allocator lock was poisoned; a buffer reference was not returned",
                    );
                }
            }
        }
    }

    /// Drop pieces that will not be committed (one allocator lock for
    /// all; dropping them one by one does the same).
    pub fn rx_abort(&self, pieces: Vec<RxPiece<'_>>) {
        if pieces.is_empty() {
            return;
        }
        let ps: Vec<Piece> = pieces.into_iter().map(|p| p.take(self)).collect();
        self.release_pieces(&ps);
    }

    /// Link `pieces`, in order, at the end of file `ino`: one commit (the
    /// records of the batch are linked to each other first, then published
    /// together). Durable when it returns. Returns the new size.
    pub fn rx_commit(&self, ino: u64, pieces: Vec<RxPiece<'_>>) -> Result<u64> {
        let arc = match self.inode(ino) {
            Ok(a) => a,
            Err(e) => {
                self.rx_abort(pieces);
                return Err(e);
            }
        };
        let mut i = match super::wlock(&arc) {
            Ok(i) => i,
            Err(e) => {
                self.rx_abort(pieces);
                return Err(e);
            }
        };
        let (ps, at) = self.place_at_end(&i, pieces)?;
        let now = now_ns();
        let mut a = i.attr;
        let off = a.size;
        a.size = at;
        a.mtime_ns = now;
        a.ctime_ns = now;
        self.splice_range(&mut i, off, at, ps, a)?;
        Ok(at)
    }

    /// Give `pieces` the file offsets that put them, in order, at the end
    /// of regular file `i`; returns them and the new size. On error the
    /// pieces' references are dropped.
    fn place_at_end(&self, i: &Inode, pieces: Vec<RxPiece<'_>>) -> Result<(Vec<Piece>, u64)> {
        if i.attr.kind != FileType::Regular {
            self.rx_abort(pieces);
            return Err(FsError::Invalid("not a regular file"));
        }
        let mut at = i.attr.size;
        let ps: Vec<Piece> = pieces
            .into_iter()
            .map(|p| {
                let mut q = p.take(self);
                q.file_off = at;
                at += q.loc.len() as u64;
                q
            })
            .collect();
        if at > super::MAX_FILE_SIZE {
            self.release_pieces(&ps);
            return Err(FsError::TooBig);
        }
        Ok((ps, at))
    }

    /// A regular file no directory names (like O_TMPFILE). It lives while
    /// pinned (it starts with one pin) and is freed by `unpin` unless
    /// `link_tmpfile` gave it a name first. A crash frees it: nothing
    /// reaches it.
    pub fn create_tmpfile(&self, perm: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.check_writable()?;
        let ino = self
            .alloc
            .lock()
            .or_stop()
            .alloc_inode()
            .ok_or(FsError::NoSpace("no free inodes"))?;
        let now = now_ns();
        let attr = AttrSlot {
            kind: FileType::Regular,
            mode: perm & 0o7777,
            uid,
            gid,
            nlink: 0,
            size: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            rdev: 0,
            parent: 0,
        };
        // Written and flushed, not fenced: nothing can reach the inode
        // until a commit names it (`rx_link`), and that commit's first
        // fence makes these lines durable before its publish. One fence
        // less per upload.
        let slot = write_new_inode(&self.pm, &self.geo, ino, &attr, RecordId::NONE);
        let mut i = Inode::new(ino, attr, slot);
        i.pins = 1;
        let a = self.attr_of(&i);
        self.insert_inode(i);
        Ok(a)
    }

    /// Give an unnamed file the name `dir/name` in one commit, replacing an
    /// existing non-directory of that name when `replace` (the old file's
    /// space is freed after the commit). Drops the tmpfile's creation pin.
    pub fn link_tmpfile(&self, ino: u64, dir: u64, name: &[u8], replace: bool) -> Result<()> {
        self.rx_link(ino, Vec::new(), dir, name, replace)
            .map(|_| ())
    }

    /// [`Self::rx_commit`] of `tail` and [`Self::link_tmpfile`] as **one**
    /// commit: the unnamed file `ino` gets `tail` appended and appears as
    /// `dir/name` together, durable on return. A small upload is then one
    /// journalled commit instead of two. Returns whether an existing file
    /// was replaced. On error nothing is visible, the tail's references are
    /// dropped and the caller still holds its pin.
    pub fn rx_link(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<bool> {
        self.rx_link_deferred(ino, tail, dir, name, replace)
            .map(|l| l.replaced())
    }

    /// [`Self::rx_link`], but a file the name replaced keeps its space
    /// until the returned [`Linked`] is dropped: a server answers the
    /// client first and gives the old file's records and buffers back
    /// after (that work is not needed for durability: the commit already
    /// made the old file unreachable, and recovery frees what nothing
    /// reaches).
    pub fn rx_link_deferred(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<Linked<'_>> {
        self.rx_link_with(ino, tail, dir, name, replace, None, false)
    }

    /// [`Self::rx_link_deferred`] only if `cond` holds for what the name
    /// leads to when the link is made: it is checked under the locks of
    /// the directory and of the file being replaced, so no concurrent
    /// change of that name can come between the check and the link. A
    /// `false` is [`FsError::PreconditionFailed`] and changes nothing.
    ///
    /// The returned [`Linked`] also describes the version just named
    /// ([`Linked::digest`], for an HTTP answer's ETag): a pass over the
    /// file's records, which the other link calls skip.
    pub fn rx_link_if(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
    ) -> Result<Linked<'_>> {
        self.rx_link_with(ino, tail, dir, name, replace, cond, true)
    }

    /// [`Self::rx_link_if`], with the digest taken only when `describe`.
    #[allow(clippy::too_many_arguments)]
    fn rx_link_with(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
        describe: bool,
    ) -> Result<Linked<'_>> {
        // A default ACL of `dir` is inherited before the name appears (a
        // directory lookup when there is none).
        if let Err(e) = self.inherit_into_unnamed(ino, dir) {
            self.rx_abort(tail);
            return Err(e);
        }
        let mut tail = Some(tail);
        let r = self.rx_link_inner(ino, &mut tail, dir, name, replace, cond, describe);
        // Pieces the commit did not take (an error before the splice).
        if let Some(t) = tail.take() {
            self.rx_abort(t);
        }
        r.map(|(replaced, pinned, digest)| Linked {
            vol: self,
            replaced,
            pinned,
            digest,
        })
    }

    /// The body of [`Self::rx_link`]; takes `tail` only once nothing can
    /// fail but the splice's own record allocation (which drops the
    /// pieces' references itself).
    #[allow(clippy::too_many_arguments)]
    fn rx_link_inner(
        &self,
        ino: u64,
        tail: &mut Option<Vec<RxPiece<'_>>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
        describe: bool,
    ) -> Result<(bool, Option<u64>, Option<ContentDigest>)> {
        self.check_writable()?;
        check_name(name)?;
        // Lock order: the namespace lock, then inode locks by number. The
        // namespace lock covers the lookup below until the inode locks are
        // held (every namespace change looks up and locks under it, and
        // changes a directory only under that directory's write lock);
        // it is released before the commit, so uploads into different
        // directories do not wait on each other's fences.
        let ns = self.ns.lock().or_stop();
        let darc = self.inode(dir)?;
        let victim = {
            let d = super::rlock(&darc)?;
            if d.attr.kind != FileType::Directory {
                return Err(FsError::NotDir);
            }
            d.names
                .get(name)
                .map(|&c| (d.data[&c].r.dirent_ino(), d.data[&c].r.dirent_dtype(), c))
        };
        // The namespace lock keeps this entry as it is until the directory
        // is write-locked below; from then on that lock does.
        let victim_cookie = victim.map(|v| v.2);
        let victim = victim.map(|(v, dtype, _)| (v, dtype));
        if let Some((v, dtype)) = victim {
            if !replace {
                return Err(FsError::Exists);
            }
            if cond.is_some() && v as u64 == ino {
                // Not a case a conditional upload makes (its file is new).
                return Err(FsError::Invalid("a conditional link of a file onto itself"));
            }
            if dtype == FileType::Directory.dtype() {
                return Err(FsError::IsDir);
            }
            if v as u64 == ino {
                // Already linked under this name (a repeated call).
                return match tail.as_ref().is_some_and(|t| !t.is_empty()) {
                    false => Ok((true, None, None)),
                    true => Err(FsError::Invalid("not an unnamed file")),
                };
            }
        }
        let mut inos: SmallVec<[u32; 3]> = SmallVec::new();
        inos.extend([dir as u32, ino as u32]);
        inos.extend(victim.map(|v| v.0));
        inos.sort_unstable();
        inos.dedup();
        let mut arcs: SmallVec<[_; 3]> = SmallVec::new();
        for &n in &inos {
            let a = match n as u64 == dir {
                true => darc.clone(),
                false => self.inode(n as u64)?,
            };
            arcs.push((n, a));
        }
        let mut guards: SmallVec<[_; 3]> = SmallVec::new();
        for (n, a) in &arcs {
            guards.push((*n, super::wlock(a)?));
        }
        drop(ns);
        let idx = |n: u32| inos.iter().position(|m| *m == n).expect("locked");
        let (ti, di) = (idx(ino as u32), idx(dir as u32));
        if let Some(cond) = cond {
            // Under the directory's and the victim's write locks: what the
            // name leads to cannot change until the commit below.
            let bound = match victim {
                Some((v, _)) => self.bound_locked(&guards[idx(v)].1)?,
                None => Bound::Absent,
            };
            if !cond(&bound) {
                return Err(FsError::PreconditionFailed);
            }
        }
        if guards[ti].1.attr.nlink != 0 || guards[ti].1.attr.kind != FileType::Regular {
            return Err(FsError::Invalid("not an unnamed file"));
        }
        let now = now_ns();
        // The directory's new mtime/ctime ride on the new dirent
        // (FLAG_DIR_TIME, FORMAT.md) instead of a switch of its attribute
        // slot: naming the file is then one 8-byte publish, not a journalled
        // commit. Only when the clock is past the slot's ctime (it always
        // is, unless the clock went back): otherwise the slot switches.
        let dir_time = (now > guards[di].1.attr.ctime_ns).then_some(now);
        // Everything fallible first, before the transaction or any DRAM
        // state changes: the dirent's record (written, still unreachable).
        let id = self.alloc_records(1)?[0];
        let cookie = match victim_cookie {
            Some(c) => c,
            None => guards[di].1.next_seq.max(FIRST_COOKIE),
        };
        let fresh = match victim {
            Some(_) => None,
            None => {
                match self.new_dirent_pub(id, name, ino as u32, FileType::Regular, cookie, dir_time)
                {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.free_records_now(&[id]);
                        return Err(e);
                    }
                }
            }
        };
        // Undo of the above if the splice below fails: the record, and the
        // name bytes a fresh dirent took.
        let undo_name = |v: &Volume| {
            v.free_records_now(&[id]);
            if let Some(r) = &fresh {
                v.release_payload(&[r.slice()]);
            }
        };
        // The file: its tail pieces and its new attributes (named, sized).
        // Nothing reaches it until the name below is published, so its
        // changes are written in place rather than journalled.
        let mut tx = Tx::new();
        let t = &mut guards[ti].1;
        let mut ta = t.attr;
        ta.nlink = 1;
        ta.ctime_ns = now;
        // Nothing could read an unnamed file: it was last "accessed" when
        // it came into being, which for a file made ahead of its upload
        // (netpath's spares) is now, not when it was made.
        ta.atime_ns = now;
        let pieces = tail.take().unwrap_or_default();
        if pieces.is_empty() {
            self.set_attr(&mut tx, t, ta);
        } else {
            let off = ta.size;
            let (ps, at) = match self.place_at_end(t, pieces) {
                Ok(x) => x,
                Err(e) => {
                    undo_name(self);
                    return Err(e);
                }
            };
            ta.size = at;
            ta.mtime_ns = now;
            if let Err(e) = self.splice_range_tx(&mut tx, t, off, at, ps, ta) {
                undo_name(self);
                return Err(e);
            }
        }
        tx.make_unreachable();
        // The name.
        match (victim, fresh) {
            (Some((v, _)), _) => {
                self.replace_dirent_pub(
                    &mut tx,
                    &mut guards[di].1,
                    cookie,
                    id,
                    ino as u32,
                    FileType::Regular,
                    dir_time,
                );
                let g = &mut guards[idx(v)].1;
                let mut va = g.attr;
                va.nlink -= 1;
                va.ctime_ns = now;
                if va.nlink > 0 {
                    self.set_attr(&mut tx, g, va);
                } else {
                    g.attr = va;
                }
            }
            (None, rec) => {
                let rec = rec.expect("a new dirent when nothing is replaced");
                let d = &mut guards[di].1;
                tx.store(
                    self.data_link_before(d, cookie),
                    id.0,
                    Some((self.geo.record_pos(id).0, 64)),
                );
                d.data.insert(cookie, rec);
                d.names.insert(name.into(), cookie);
                d.next_seq = cookie + 1;
            }
        }
        let d = &mut guards[di].1;
        let mut da = d.attr;
        da.mtime_ns = now;
        da.ctime_ns = now;
        if dir_time.is_some() {
            d.attr = da; // carried by the dirent; the next slot switch keeps it
        } else {
            self.set_attr(&mut tx, d, da);
        }
        tx.commit(self);
        let t = &mut guards[ti].1;
        t.pins = t.pins.saturating_sub(1);
        // The version just named, described while it is still locked (a
        // later change cannot slip in before the caller asks).
        let digest = match describe {
            true => self.digest_locked(t).ok(),
            false => None,
        };
        // A replaced file nothing holds any more: pinned for the caller,
        // whose `Linked` frees it when dropped (`unpin`).
        let mut pinned = None;
        if let Some((v, _)) = victim {
            let g = &mut guards[idx(v)].1;
            if g.attr.nlink == 0 && g.pins == 0 {
                g.pins = 1;
                pinned = Some(v as u64);
            }
        }
        Ok((victim.is_some(), pinned, digest))
    }
}

/// An unnamed file (like O_TMPFILE) owned through its creation pin:
/// dropped while still unnamed, it is freed; [`TmpFile::link`] gives it a
/// name, and the pin goes with it (so it is released exactly once,
/// whichever way the upload ends).
#[derive(Debug)]
#[must_use = "dropping it at once frees the unnamed file"]
pub struct TmpFile<'v> {
    vol: &'v Volume,
    attr: Attr,
    /// Still holds the creation pin (not yet named).
    pinned: bool,
}

impl<'v> TmpFile<'v> {
    pub fn ino(&self) -> u64 {
        self.attr.ino
    }
    /// The attributes it was created with.
    pub fn attr(&self) -> &Attr {
        &self.attr
    }
    /// Has [`Self::link`] named it?
    pub fn is_linked(&self) -> bool {
        !self.pinned
    }
    /// [`Volume::rx_commit`] into this file.
    pub fn commit(&self, pieces: Vec<RxPiece<'_>>) -> Result<u64> {
        self.vol.rx_commit(self.attr.ino, pieces)
    }
    /// [`Volume::rx_link_deferred`]: append `tail` and name the file
    /// `dir/name` in one commit. On success the creation pin is spent and
    /// dropping this does nothing more; on error the file is still unnamed
    /// and still this handle's.
    pub fn link(
        &mut self,
        tail: Vec<RxPiece<'v>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<Linked<'v>> {
        self.link_if(tail, dir, name, replace, None)
    }
    /// [`Self::link`] under a precondition ([`Volume::rx_link_if`]).
    pub fn link_if(
        &mut self,
        tail: Vec<RxPiece<'v>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
    ) -> Result<Linked<'v>> {
        assert!(self.pinned, "the file is already named");
        let l = self
            .vol
            .rx_link_if(self.attr.ino, tail, dir, name, replace, cond)?;
        self.pinned = false;
        Ok(l)
    }
}

impl Drop for TmpFile<'_> {
    fn drop(&mut self) {
        // Not while unwinding (a second panic would abort): an unnamed
        // file nothing frees is freed by the next open (nothing reaches it).
        if self.pinned && !std::thread::panicking() {
            self.vol.unpin(self.attr.ino, 1);
        }
    }
}

impl Volume {
    /// [`Self::create_tmpfile`], owned: the returned [`TmpFile`] frees the
    /// file when dropped unless it was named.
    pub fn tmpfile(&self, perm: u32, uid: u32, gid: u32) -> Result<TmpFile<'_>> {
        let attr = self.create_tmpfile(perm, uid, gid)?;
        Ok(TmpFile {
            vol: self,
            attr,
            pinned: true,
        })
    }
}

/// The result of [`Volume::rx_link_deferred`]: whether a file was
/// replaced, and that file held (pinned) until this is dropped, when its
/// space goes back to the allocators.
#[derive(Debug)]
#[must_use = "dropping it at once frees the replaced file's space; hold it to do that later"]
pub struct Linked<'a> {
    vol: &'a Volume,
    replaced: bool,
    pinned: Option<u64>,
    digest: Option<ContentDigest>,
}

impl Linked<'_> {
    /// An existing file of that name was replaced.
    pub fn replaced(&self) -> bool {
        self.replaced
    }
    /// The named file's [`Volume::content_digest`] as the link left it,
    /// from [`Volume::rx_link_if`] (and [`TmpFile::link_if`]); None from
    /// the other link calls, if it could not be taken (a damaged record),
    /// or when the file already had the name.
    pub fn digest(&self) -> Option<&ContentDigest> {
        self.digest.as_ref()
    }
}

impl Drop for Linked<'_> {
    fn drop(&mut self) {
        if let Some(ino) = self.pinned.take() {
            self.vol.unpin(ino, 1);
        }
    }
}

/// One piece of a file to transmit: bytes in the image, or a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxSeg {
    /// `len` bytes at image offset `image_off` (one record, or part of one).
    Image { image_off: u64, len: u32 },
    /// Bytes of a remote record, fetched from the tier and checked against
    /// its CRC when the hold was taken: `len` bytes from `skip` of the
    /// hold's fetched buffer `buf` (see [`TxHold::fetched`]).
    Fetched { buf: u32, skip: u32, len: u32 },
    /// A hole: send `len` zero bytes.
    Zero { len: u64 },
}

impl TxSeg {
    /// Bytes in the segment.
    pub fn len(&self) -> u64 {
        match *self {
            TxSeg::Image { len, .. } | TxSeg::Fetched { len, .. } => len as u64,
            TxSeg::Zero { len } => len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A range of a file held for transmission: the buffer space its segments
/// name is referenced, so an overwrite or delete meanwhile cannot recycle it
/// until the hold is dropped (PASTE: a buffer is not reused until its
/// owner says so). The held bytes are only ever read; [`TxHold::send`]
/// hands them to the kernel without a copy in user space.
#[derive(Debug)]
pub struct TxHold<'v> {
    vol: &'v Volume,
    segs: Vec<TxSeg>,
    slices: Vec<Slice>,
    /// Remote records' bytes, fetched and checked (heap memory that stays
    /// where it is while the hold lives, however the hold moves).
    fetched: Vec<super::RemoteBytes>,
    /// The file size when the hold was taken.
    size: u64,
}

impl<'v> TxHold<'v> {
    /// The volume whose space the hold references.
    pub(super) fn volume(&self) -> &'v Volume {
        self.vol
    }

    /// The range as segments, in file order.
    pub fn segs(&self) -> &[TxSeg] {
        &self.segs
    }
    /// The file size when the hold was taken.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The bytes of a [`TxSeg::Fetched`] segment.
    pub fn fetched(&self, buf: u32, skip: u32, len: u32) -> &[u8] {
        &self.fetched[buf as usize][skip as usize..(skip + len) as usize]
    }

    /// sendmsg(2) on `fd`, one iovec per segment: the run of image
    /// segments starting at segment `first` (its first `skip` bytes
    /// already sent), up to `max_iov` of them, stopping before a hole.
    /// Returns the bytes the kernel took (may be fewer than offered, like
    /// any send) and the number of segments offered. A hole at `first`
    /// offers nothing: holes are the caller's to send.
    pub fn send(
        &self,
        fd: impl AsFd,
        first: usize,
        skip: u64,
        max_iov: usize,
        flags: i32,
    ) -> std::io::Result<(usize, usize)> {
        let mut offered = 0usize;
        let iov = self.segs[first..]
            .iter()
            .take_while(|s| !matches!(s, TxSeg::Zero { .. }))
            .take(max_iov)
            .enumerate()
            .map(|(k, s)| {
                offered += 1;
                let skip = if k == 0 { skip.min(s.len()) } else { 0 };
                match *s {
                    TxSeg::Image { image_off, len } => IoSeg::Image {
                        off: image_off + skip,
                        len: (len as u64 - skip) as usize,
                    },
                    TxSeg::Fetched { buf, skip: s0, len } => {
                        IoSeg::Mem(&self.fetched(buf, s0, len)[skip as usize..])
                    }
                    TxSeg::Zero { .. } => IoSeg::Mem(&[]),
                }
            });
        // The image segments name buffer space this hold references, whose
        // bytes nothing writes while referenced (records are written once,
        // before they are linked), and the fetched ones are the hold's own:
        // the kernel only reads them.
        let n = self
            .vol
            .pm
            .send_segments(fd.as_fd().as_raw_fd(), iov, flags)?;
        Ok((n, offered))
    }
}

impl Drop for TxHold<'_> {
    fn drop(&mut self) {
        if self.slices.is_empty() {
            return;
        }
        match self.vol.alloc.lock() {
            Ok(mut a) => {
                for s in self.slices.drain(..) {
                    a.drop_ref(s);
                }
            }
            Err(_) => {
                if !std::thread::panicking() {
                    self.vol
                        .fail("an allocator lock was poisoned; a transmit hold was not returned");
                }
            }
        }
    }
}

impl Volume {
    /// Hold `[off, off+len)` of a file (clamped to its size) for sending.
    pub fn tx_hold(&self, ino: u64, off: u64, len: u64) -> Result<TxHold<'_>> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        if i.attr.kind != FileType::Regular {
            return Err(if i.attr.kind == FileType::Directory {
                FsError::IsDir
            } else {
                FsError::Invalid("not a regular file")
            });
        }
        let size = i.attr.size;
        let end = size.min(off.saturating_add(len));
        let bs = self.geo.buffer_size_bytes;
        let mut segs = Vec::new();
        let mut slices = Vec::new();
        let mut fetched = Vec::new();
        for c in super::file::cover(&i, off, end, bs) {
            match c {
                Cover::Hole(n) => segs.push(TxSeg::Zero { len: n }),
                Cover::Remote(sl, r) => {
                    // Fetched now, whole, and checked: nothing goes to a
                    // socket before its CRC matched.
                    let bytes = self.fetch_rec(&i, &r)?;
                    segs.push(TxSeg::Fetched {
                        buf: fetched.len() as u32,
                        skip: (sl.off - r.r.remote_off()) as u32,
                        len: sl.len,
                    });
                    fetched.push(bytes);
                }
                Cover::Data(sl, r) => {
                    // Nothing goes to a socket before its CRC matched.
                    self.verify_rec(&i, &r)?;
                    segs.push(TxSeg::Image {
                        image_off: self.geo.buffer_pos(sl.buffer, sl.buf_off).0,
                        len: sl.len,
                    });
                    slices.push(sl);
                }
            }
        }
        let mut a = self.alloc.lock().or_stop();
        for s in &slices {
            a.take_ref(*s);
        }
        Ok(TxHold {
            vol: self,
            segs,
            slices,
            fetched,
            size,
        })
    }

    /// The kernel is done with a hold's bytes. (Dropping it does the same.)
    pub fn tx_release(&self, h: TxHold<'_>) {
        drop(h);
    }
}
