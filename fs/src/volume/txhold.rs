//! The transmit path's view of the Volume: a file's records held (pinned)
//! as segments the socket sends straight from the image, one record per
//! segment, until the send is done.

use layout::FileType;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::file::Cover;
use super::Volume;
use crate::error::{FsError, Result};
use crate::media::net::IoSeg;
use std::os::fd::{AsFd, AsRawFd};

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

    /// DRAM the hold itself keeps while it lives: its segment lists and
    /// the tiered bytes fetched for it. A local range's bytes are in the
    /// image and cost no DRAM, however long the range (what a server's
    /// per-connection bound on queued answers counts).
    pub fn dram_bytes(&self) -> usize {
        self.segs.capacity() * std::mem::size_of::<TxSeg>()
            + self.slices.capacity() * std::mem::size_of::<Slice>()
            + self.fetched.iter().map(|f| f.len()).sum::<usize>()
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
