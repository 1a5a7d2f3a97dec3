//! The receive path's view of the Volume: reserve free buffer space, let the
//! caller `recv()` straight into it (bytes move kernel -> PM once), turn the
//! received bytes into pieces (CRC computed while hot, lines flushed), and
//! link a batch of pieces at the end of a file with one commit.
//!
//! Unnamed files and linking pieces under a name are in `tmpfile.rs`; the
//! transmit side (records held while a socket sends them) in `txhold.rs`.

use crate::media::FlushThread;
use pktfs_layout::FileType;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::file::Piece;
use super::{now_ns, Inode, Volume};
use crate::error::{FsError, Result};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

/// When received bytes arrived, and who says so: what a received record's
/// `timestamp_ns` and `FLAG_KERNEL_TIME` hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxTime {
    /// The kernel's receive time (SO_TIMESTAMPNS): for one receive of a TCP
    /// stream, that of the newest segment it took. ns since the epoch.
    Kernel(u64),
    /// The receiver's clock when it took the bytes: the kernel gave no
    /// time. The record is stored without `FLAG_KERNEL_TIME`, so it never
    /// passes for an arrival time.
    Clock(u64),
}

/// No time known (a clock reading of 0): what an empty accumulator holds
/// before its first bytes.
impl Default for RxTime {
    fn default() -> Self {
        RxTime::Clock(0)
    }
}

impl RxTime {
    /// `kernel` when the kernel gave a time, else the clock now.
    pub fn kernel_or_now(kernel: Option<u64>) -> RxTime {
        match kernel {
            Some(ns) => RxTime::Kernel(ns),
            None => RxTime::Clock(now_ns() as u64),
        }
    }
    /// ns since the epoch, whoever gave it.
    pub fn ns(self) -> u64 {
        match self {
            RxTime::Kernel(ns) | RxTime::Clock(ns) => ns,
        }
    }
    /// Whether the kernel gave it.
    pub fn is_kernel(self) -> bool {
        matches!(self, RxTime::Kernel(_))
    }
    /// The same kind of time, at `ns` (a time clamped or carried over
    /// keeps who gave it).
    pub fn with_ns(self, ns: u64) -> RxTime {
        match self {
            RxTime::Kernel(_) => RxTime::Kernel(ns),
            RxTime::Clock(_) => RxTime::Clock(ns),
        }
    }
    /// The flags of a record received at this time.
    pub fn flags(self) -> u8 {
        use pktfs_layout::record::{FLAG_KERNEL_TIME, FLAG_RX};
        match self {
            RxTime::Kernel(_) => FLAG_RX | FLAG_KERNEL_TIME,
            RxTime::Clock(_) => FLAG_RX,
        }
    }
    /// Read back from a record's time and flags.
    pub fn from_record(timestamp_ns: u64, flags: u8) -> RxTime {
        if flags & pktfs_layout::record::FLAG_KERNEL_TIME != 0 {
            RxTime::Kernel(timestamp_ns)
        } else {
            RxTime::Clock(timestamp_ns)
        }
    }
}

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

    /// Lend the reservation to the kernel (an io_uring provided buffer, an
    /// epoll loop's receive): see [`LentRx`].
    pub fn lend(self) -> LentRx<'v> {
        LentRx(self)
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

    /// Received bytes `[skip, skip+len)`, received `at` with stream
    /// position `seq`, become a piece: see [`RxHeld::piece`].
    pub fn piece(&self, skip: u32, len: u32, at: RxTime, seq: u64) -> RxPiece<'v> {
        self.hold(skip, len).piece(at, seq)
    }
}

/// A reservation lent to the kernel to receive into, for as long as a
/// request of an I/O engine (pktfs-engine) may select it.
///
/// While lent, the kernel may write the unfilled bytes `[filled, cap)` at
/// any moment, so this type has no safe way to read or write them (no
/// `received` past `filled`, no `append`, no `recv`): only what
/// [`Self::mark_filled`] accounted for can be held and read. The lender
/// keeps two promises, written where it hands [`Self::spare_ptr`] to the
/// kernel: the value is not dropped (its space would go back to the
/// allocator) while the kernel may still write, and nothing but the kernel
/// writes the lent bytes.
#[derive(Debug)]
pub struct LentRx<'v>(RxBuf<'v>);

impl<'v> LentRx<'v> {
    /// Image offset of the first byte.
    pub fn image_off(&self) -> u64 {
        self.0.image_off
    }
    /// Capacity in bytes.
    pub fn cap(&self) -> u32 {
        self.0.cap
    }
    /// Bytes accounted as received so far.
    pub fn filled(&self) -> u32 {
        self.0.filled
    }
    /// Bytes the kernel may still write.
    pub fn spare(&self) -> u32 {
        self.0.spare()
    }
    /// Where the kernel writes next: `spare()` bytes from here are lent.
    /// A raw pointer: writing through it is the caller's `unsafe`, under
    /// the promises above.
    pub fn spare_ptr(&mut self) -> std::ptr::NonNull<u8> {
        self.0.vol.pm.ptr_at(
            self.0.image_off + self.0.filled as u64,
            self.0.spare() as usize,
        )
    }

    /// Account `n` bytes after `filled()` as received: from then on they
    /// are read (held, CRC'd, linked into files) and never written again.
    ///
    /// # Safety
    /// The `n` bytes from [`Self::spare_ptr`] (as it was before this call)
    /// have been written, and whoever wrote them (the kernel, in a receive
    /// this reservation was lent to, that has completed for them) writes
    /// them no more. Reading bytes the kernel is still writing would be a
    /// data race.
    // The one unsafe fn outside `media`: the promise is the lender's.
    #[allow(unsafe_code)]
    pub unsafe fn mark_filled(&mut self, n: u32) {
        assert!(n <= self.0.spare(), "filled past the reservation");
        let at = self.0.image_off + self.0.filled as u64;
        self.0.vol.pm.note_received(at, n as u64);
        self.0.filled += n;
    }

    /// Take a reference on received bytes `[skip, skip+len)` (within
    /// `filled()`): [`RxBuf::hold`].
    pub fn hold(&self, skip: u32, len: u32) -> RxHeld<'v> {
        self.0.hold(skip, len)
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
    pub fn piece(self, at: RxTime, seq: u64) -> RxPiece<'v> {
        let vol = self.space.vol;
        let s = self.slice;
        let off = vol.geo.buffer_pos(s.buffer, s.buf_off).0;
        // Checksum first, while the received bytes are in the cache: a
        // write-back may also evict the lines (clwb does on some CPUs, and
        // clflushopt always does), and the CRC would then read them back
        // from memory.
        let crc = pktfs_layout::crc32c(vol.slice_bytes(s));
        vol.pm.flush(off, s.len as u64);
        // The piece's own reference, taken while the reservation's share
        // (dropped after this) still holds the buffers.
        vol.alloc.lock().or_stop().take_ref(s);
        drop(self);
        RxPiece {
            vol,
            flushed_by: FlushThread::current(),
            piece: Piece {
                loc: super::remote::Loc::Local(s),
                crc,
                file_off: 0,
                seq,
                timestamp_ns: at.ns(),
                flags: at.flags(),
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
    /// The thread whose write-back of the bytes is pending: a flush is
    /// durable after that thread's next fence only (media/writeback.rs).
    flushed_by: FlushThread,
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
    /// Receive time of the bytes, ns since the epoch (see [`Self::at`]).
    pub fn timestamp_ns(&self) -> u64 {
        self.piece.timestamp_ns
    }
    /// When the bytes arrived, and whether the kernel said so.
    pub fn at(&self) -> RxTime {
        RxTime::from_record(self.piece.timestamp_ns, self.piece.flags)
    }

    /// The piece and its reference, now the caller's (`vol`'s) to account.
    fn take(self, vol: &Volume) -> Piece {
        assert!(
            std::ptr::eq(self.vol, vol),
            "a piece of another volume's buffer space"
        );
        // A piece made on another thread (the threaded transport's DRAM
        // fallback hands pieces to its persister) has its write-back queued
        // there, and that thread's fence is not this commit's: write the
        // bytes back again here, before this thread's fence.
        if self.flushed_by != FlushThread::current() {
            let s = self.slice();
            vol.pm
                .flush(vol.geo.buffer_pos(s.buffer, s.buf_off).0, s.len as u64);
        }
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
    /// network `at` with stream position `seq`, become a piece:
    /// its cache lines are flushed and its CRC computed now. The piece holds
    /// its own reference on its buffers. Same as [`RxBuf::piece`].
    pub fn rx_piece<'v>(
        &'v self,
        buf: &RxBuf<'v>,
        skip: u32,
        len: u32,
        at: RxTime,
        seq: u64,
    ) -> RxPiece<'v> {
        assert!(std::ptr::eq(buf.vol, self), "another volume's reservation");
        buf.piece(skip, len, at, seq)
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
    pub(super) fn place_at_end(
        &self,
        i: &Inode,
        pieces: Vec<RxPiece<'_>>,
    ) -> Result<(Vec<Piece>, u64)> {
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
}
