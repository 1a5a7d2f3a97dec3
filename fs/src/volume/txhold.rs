//! The transmit path's view of the Volume: a file's records held (pinned)
//! as segments the socket sends straight from the image, one iovec per
//! record (a [`TxSeg`], not a TCP segment), until the send is done.
//!
//! # Tiered ranges go in windows
//! A remote record's bytes must be fetched from the store before they can
//! be sent. [`Volume::tx_hold`] fetches them all (for callers that want
//! the range whole); [`Volume::tx_range`] instead plans the range
//! ([`TxPlan`]) and leaves the fetching to the caller, a window at a time:
//! [`TxPlan::plan_window`] names the records of the next window,
//! [`Volume::tx_fetch`] fetches and checks them (on any thread, holding
//! no lock), and [`TxPlan::take`] turns them into a [`TxHold`] to send.
//! So a server holds at most a window or two of a tiered file in DRAM,
//! and never waits for the store under the inode's lock or on a thread
//! that serves other connections. Nothing is fetched under an inode lock
//! on either path.

use pktfs_layout::FileType;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::file::Cover;
use super::remote::RemoteRef;
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
    /// its CRC before the hold was made: `len` bytes from `skip` of the
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
    /// What the holder asked to keep while the hold lives (dropped with
    /// it, after the fetched bytes): a charge against a server's budget
    /// of fetched bytes, say.
    _keep: Option<TxKeep>,
}

/// Anything a holder wants dropped when a hold is ([`TxPlan::take`]).
pub struct TxKeep(pub Box<dyn Send + Sync>);

impl std::fmt::Debug for TxKeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TxKeep")
    }
}

impl<'v> TxHold<'v> {
    /// The volume whose space the hold references.
    pub fn volume(&self) -> &'v Volume {
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

    /// Bytes fetched from the tier that the hold keeps in DRAM.
    pub fn fetched_bytes(&self) -> u64 {
        self.fetched.iter().map(|f| f.len() as u64).sum()
    }

    /// The bytes of segment `k` from its `skip`th on: image bytes (held:
    /// no one writes them while the hold lives) or fetched ones; `None` for
    /// a hole or past the end. What an I/O engine hands the kernel to send.
    pub fn seg_bytes(&self, k: usize, skip: u64) -> Option<&[u8]> {
        let b = match *self.segs.get(k)? {
            TxSeg::Image { image_off, len } => self.vol.pm.slice(image_off, len as usize),
            TxSeg::Fetched { buf, skip, len } => self.fetched(buf, skip, len),
            TxSeg::Zero { .. } => return None,
        };
        b.get(usize::try_from(skip).ok()?..)
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

/// A range as the inode named it, under its lock: segments, the local
/// slices referenced, the remote records (not fetched).
struct Built {
    segs: Vec<TxSeg>,
    slices: Vec<Slice>,
    /// [`TxSeg::Fetched::buf`] indexes this.
    remote: Vec<RemoteRef>,
    size: u64,
}

impl Volume {
    /// Walk `[off, off+len)` of a regular file under its read lock: local
    /// records checked and their slices referenced, remote ones named
    /// (their objects pinned: see [`Volume::pin_objects`]), nothing
    /// fetched.
    /// `every_crc`: check every local record now, whatever the verify
    /// mode (what [`Volume::tx_hold_checked`] promises).
    fn tx_build(&self, ino: u64, off: u64, len: u64, every_crc: bool) -> Result<Built> {
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
        let mut remote = Vec::new();
        for c in super::file::cover(&i, off, end, bs) {
            match c {
                Cover::Hole(n) => segs.push(TxSeg::Zero { len: n }),
                Cover::Remote(sl, r) => {
                    let rr = RemoteRef::of(ino, &r).ok_or(FsError::Invalid("a remote cover"))?;
                    // Known now, before any answer is begun: a damaged
                    // record or a missing tier fails the hold, as a fetch
                    // here would have.
                    if rr.damaged() {
                        return Err(FsError::Damaged {
                            ino,
                            start: r.r.file_off,
                            end: r.r.file_end(),
                        });
                    }
                    self.remote_source(&rr)?;
                    segs.push(TxSeg::Fetched {
                        buf: remote.len() as u32,
                        skip: (sl.off - r.r.remote_off()) as u32,
                        len: sl.len,
                    });
                    remote.push(rr);
                }
                Cover::Data(sl, r) => {
                    // Nothing goes to a socket before its CRC matched.
                    if every_crc {
                        self.verify_rec_as(&i, &r, super::VerifyMode::Always)?;
                    } else {
                        self.verify_rec(&i, &r)?;
                    }
                    segs.push(TxSeg::Image {
                        image_off: self.geo.buffer_pos(sl.buffer, sl.buf_off).0,
                        len: sl.len,
                    });
                    slices.push(sl);
                }
            }
        }
        // Under the inode's lock: the slices and objects are still the
        // file's, so nothing can have recycled or deleted them yet.
        self.pin_objects(&remote);
        let mut a = self.alloc.lock().or_stop();
        for s in &slices {
            a.take_ref(*s);
        }
        Ok(Built {
            segs,
            slices,
            remote,
            size,
        })
    }

    /// Hold `[off, off+len)` of a file (clamped to its size) for sending,
    /// its tiered bytes fetched and checked whole (after the inode's lock
    /// is released). A server sends tiered ranges in windows instead
    /// ([`Volume::tx_range`]).
    pub fn tx_hold(&self, ino: u64, off: u64, len: u64) -> Result<TxHold<'_>> {
        self.tx_hold_as(ino, off, len, false)
    }

    /// [`Volume::tx_hold`], with every local record's CRC checked against
    /// its bytes now, whatever the verify mode (`once` skips a record
    /// checked earlier in this mount, `off` all of them): for a sender
    /// that promises every byte it sends matched its CRC on the way out
    /// (`pktfs send`). Remote records are checked on every fetch anyway.
    pub fn tx_hold_checked(&self, ino: u64, off: u64, len: u64) -> Result<TxHold<'_>> {
        self.tx_hold_as(ino, off, len, true)
    }

    fn tx_hold_as(&self, ino: u64, off: u64, len: u64, every_crc: bool) -> Result<TxHold<'_>> {
        let b = self.tx_build(ino, off, len, every_crc)?;
        let mut h = TxHold {
            vol: self,
            segs: b.segs,
            slices: b.slices,
            fetched: Vec::new(),
            size: b.size,
            _keep: None,
        };
        if !b.remote.is_empty() {
            // Nothing goes to a socket before its CRC matched. (On an
            // error the hold drops its references.)
            let r: Result<Vec<_>> = b.remote.iter().map(|r| self.fetch_remote(r)).collect();
            self.unpin_objects(&b.remote);
            h.fetched = r?;
        }
        Ok(h)
    }

    /// `[off, off+len)` of a file (clamped to its size) for sending: a
    /// local range held at once, exactly as [`Volume::tx_hold`]; one with
    /// remote records planned, to be fetched and sent a window at a time
    /// (module docs).
    pub fn tx_range(&self, ino: u64, off: u64, len: u64) -> Result<TxRange<'_>> {
        let b = self.tx_build(ino, off, len, false)?;
        if b.remote.is_empty() {
            return Ok(TxRange::Local(TxHold {
                vol: self,
                segs: b.segs,
                slices: b.slices,
                fetched: Vec::new(),
                size: b.size,
                _keep: None,
            }));
        }
        Ok(TxRange::Tiered(TxPlan {
            vol: self,
            segs: b.segs,
            slices: b.slices,
            remote: b.remote,
            size: b.size,
            taken_seg: 0,
            taken_slice: 0,
            planned_seg: 0,
        }))
    }

    /// Fetch and check the remote records of window `w` (off any lock; any
    /// thread). The bytes are the records' as planned, each checked
    /// against its CRC.
    pub fn tx_fetch(&self, w: &TxWindow) -> Result<TxFetched> {
        let bytes = w
            .refs
            .iter()
            .map(|r| self.fetch_remote(r))
            .collect::<Result<Vec<_>>>()?;
        Ok(TxFetched {
            first_seg: w.segs.start,
            refs: w.refs.clone(),
            bytes,
        })
    }

    /// The kernel is done with a hold's bytes. (Dropping it does the same.)
    pub fn tx_release(&self, h: TxHold<'_>) {
        drop(h);
    }
}

/// What [`Volume::tx_range`] made of a range.
#[derive(Debug)]
pub enum TxRange<'v> {
    /// No remote record: the whole range held.
    Local(TxHold<'v>),
    /// Remote records to fetch, a window at a time.
    Tiered(TxPlan<'v>),
}

/// A range with remote records, planned: its local slices referenced and
/// its objects pinned until the plan (or the windows taken from it) is
/// dropped; its remote bytes fetched a window at a time.
#[derive(Debug)]
pub struct TxPlan<'v> {
    vol: &'v Volume,
    segs: Vec<TxSeg>,
    /// The referenced slices of the image segments, in order; those
    /// before `taken_slice` went to holds.
    slices: Vec<Slice>,
    remote: Vec<RemoteRef>,
    size: u64,
    /// Segments before this went to holds ([`TxPlan::take`]).
    taken_seg: usize,
    taken_slice: usize,
    /// Segments before this are in windows planned.
    planned_seg: usize,
}

/// The next window of a plan: segments and the remote records they need.
/// Owned and `Send`: it goes to whatever thread fetches.
#[derive(Clone, Debug)]
pub struct TxWindow {
    segs: std::ops::Range<usize>,
    refs: Vec<RemoteRef>,
}

impl TxWindow {
    /// DRAM its fetched records take (whole records).
    pub fn fetch_bytes(&self) -> u64 {
        self.refs.iter().map(|r| r.len() as u64).sum()
    }
}

/// A window's remote records, fetched and checked ([`Volume::tx_fetch`]).
#[derive(Debug)]
pub struct TxFetched {
    first_seg: usize,
    refs: Vec<RemoteRef>,
    bytes: Vec<super::RemoteBytes>,
}

impl TxFetched {
    /// Bytes in DRAM.
    pub fn bytes(&self) -> u64 {
        self.bytes.iter().map(|b| b.len() as u64).sum()
    }
}

impl<'v> TxPlan<'v> {
    /// The file size when the plan was made.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes the whole range sends.
    pub fn len(&self) -> u64 {
        self.segs.iter().map(TxSeg::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every window was planned.
    pub fn all_planned(&self) -> bool {
        self.planned_seg >= self.segs.len()
    }

    /// Every window was taken.
    pub fn all_taken(&self) -> bool {
        self.taken_seg >= self.segs.len()
    }

    /// Plan the next window: the segments up to and excluding the first
    /// remote record that would take its records past `max_bytes` (at
    /// least one record, however large). Local segments and holes cost no
    /// DRAM and go with the window that precedes them. None when all was
    /// planned.
    pub fn plan_window(&mut self, max_bytes: u64) -> Option<TxWindow> {
        let from = self.planned_seg;
        if from >= self.segs.len() {
            return None;
        }
        let mut to = from;
        let mut bytes = 0u64;
        let mut refs = Vec::new();
        while to < self.segs.len() {
            if let TxSeg::Fetched { buf, .. } = self.segs[to] {
                let r = self.remote[buf as usize];
                if !refs.is_empty() && bytes + r.len() as u64 > max_bytes {
                    break;
                }
                bytes += r.len() as u64;
                refs.push(r);
            }
            to += 1;
        }
        self.planned_seg = to;
        Some(TxWindow {
            segs: from..to,
            refs,
        })
    }

    /// Window `w`'s segments as a hold, its remote bytes `f` (fetched for
    /// exactly this window: anything else is refused, never sent). `keep`
    /// is dropped with the hold. Windows are taken in the order planned.
    pub fn take(&mut self, w: TxWindow, f: TxFetched, keep: Option<TxKeep>) -> Result<TxHold<'v>> {
        if w.segs.start != self.taken_seg
            || f.first_seg != w.segs.start
            || f.refs != w.refs
            || f.bytes.len() != w.refs.len()
            || f.bytes
                .iter()
                .zip(&w.refs)
                .any(|(b, r)| b.len() != r.len() as usize)
        {
            return Err(FsError::Invalid(
                "a fetched window that does not match the plan",
            ));
        }
        let mut segs = Vec::with_capacity(w.segs.len());
        let mut slices = 0usize;
        let mut k = 0u32;
        for s in &self.segs[w.segs.clone()] {
            segs.push(match *s {
                TxSeg::Fetched { skip, len, .. } => {
                    k += 1;
                    TxSeg::Fetched {
                        buf: k - 1,
                        skip,
                        len,
                    }
                }
                TxSeg::Image { .. } => {
                    slices += 1;
                    *s
                }
                TxSeg::Zero { .. } => *s,
            });
        }
        // The window's references move from the plan to the hold.
        let from = self.taken_slice;
        self.taken_slice += slices;
        self.taken_seg = w.segs.end;
        Ok(TxHold {
            vol: self.vol,
            segs,
            slices: self.slices[from..from + slices].to_vec(),
            fetched: f.bytes,
            size: self.size,
            _keep: keep,
        })
    }
}

impl Drop for TxPlan<'_> {
    fn drop(&mut self) {
        self.vol.unpin_objects(&self.remote);
        let rest = &self.slices[self.taken_slice.min(self.slices.len())..];
        if rest.is_empty() {
            return;
        }
        match self.vol.alloc.lock() {
            Ok(mut a) => {
                for s in rest {
                    a.drop_ref(*s);
                }
            }
            Err(_) => {
                if !std::thread::panicking() {
                    self.vol
                        .fail("an allocator lock was poisoned; a transmit plan was not returned");
                }
            }
        }
    }
}
