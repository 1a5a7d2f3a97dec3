//! Remote records: file bytes that live in an object of the tier (an
//! S3-compatible store) instead of in the packet-buffer region.
//!
//! A remote record is a data record with its slice moved: kind `Remote`,
//! `aux` = object number, `buffer`/`buf_off` = the slice's offset in the
//! object; its length, payload CRC, seq, timestamp and file offset are the
//! local record's it replaced. So `stat`, `pktfs chain` and the ETag never
//! need the store, and every byte that comes back is checked against the
//! CRC computed when it first arrived.
//!
//! The Volume does not talk to the store itself: the tier engine installs a
//! [`RemoteSource`] that fetches object ranges, and drives tier-out through
//! [`Volume::tier_begin`] / [`Volume::tier_switch`]. The Volume keeps, in
//! DRAM (rebuilt at open like the allocators), how many live bytes every
//! object still has, so the engine knows which objects it may delete.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};

use layout::superblock::Features;
use layout::{FileType, Record, RecordKind};
use rustc_hash::FxHashMap;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::file::Piece;
use super::lockrank::{Rank, RankedMutex};
use super::tx::Tx;
use super::{Inode, InodeRef, Rec, Volume};
use crate::error::{FsError, Result};

/// Where a remote slice's bytes are: `len` bytes at `off` of object `obj`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RemoteSlice {
    pub obj: u64,
    pub off: u64,
    pub len: u32,
}

impl RemoteSlice {
    /// `len` bytes of this slice from `skip`.
    pub fn sub(&self, skip: u32, len: u32) -> RemoteSlice {
        debug_assert!(skip as u64 + len as u64 <= self.len as u64);
        RemoteSlice {
            obj: self.obj,
            off: self.off + skip as u64,
            len,
        }
    }
}

/// Where a data record's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// In the buffer region.
    Local(Slice),
    /// In an object of the tier.
    Remote(RemoteSlice),
}

impl Loc {
    pub fn len(&self) -> u32 {
        match self {
            Loc::Local(s) => s.len,
            Loc::Remote(r) => r.len,
        }
    }
    pub fn local(&self) -> Option<Slice> {
        match self {
            Loc::Local(s) => Some(*s),
            Loc::Remote(_) => None,
        }
    }
    /// The record fields `(kind, buffer, buf_off, aux)` that name it.
    pub fn record_fields(&self) -> (RecordKind, u32, u32, u64) {
        match *self {
            Loc::Local(s) => (RecordKind::Data, s.buffer, s.buf_off, 0),
            Loc::Remote(r) => {
                let (b, o) = Record::remote_fields(r.off);
                (RecordKind::Remote, b, o, r.obj)
            }
        }
    }
}

impl Rec {
    /// Where the record's bytes are (data records; dirents and xattrs are
    /// always local).
    pub(crate) fn loc(&self) -> Loc {
        if self.r.is_remote() {
            Loc::Remote(RemoteSlice {
                obj: self.r.remote_obj(),
                off: self.r.remote_off(),
                len: self.r.len,
            })
        } else {
            Loc::Local(self.slice())
        }
    }
}

/// Fetches object bytes for read-through. Implemented by the tier engine
/// (ranged GETs, read-ahead, a cache); the Volume checks every record's
/// CRC32C on what it returns, so an implementation never has to.
pub trait RemoteSource: Send + Sync + std::fmt::Debug {
    /// Exactly `len` bytes at `off` of object `obj`, or why not. `ino` is
    /// the file that wants them (a promotion policy counts its reads).
    fn fetch(
        &self,
        ino: u64,
        obj: u64,
        off: u64,
        len: u32,
    ) -> std::result::Result<RemoteBytes, String>;

    /// A read of `ino`'s remote bytes served from the Volume's own few
    /// checked records, with no fetch: a read all the same for a policy
    /// that counts them (promotion).
    fn note_read(&self, _ino: u64) {}
}

/// Bytes fetched from the object store: a range of a shared buffer.
///
/// Why not a `Vec`: the tier engine fetches objects in windows of
/// megabytes, and a record is a range of one. Copying each record out of
/// its window cost a 256 KiB copy and allocation per record, a sixth of a
/// cold sequential read's CPU; a range of the window costs nothing, and
/// the Volume's few checked records keep it alive only as long as needed.
#[derive(Clone)]
pub struct RemoteBytes {
    buf: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl RemoteBytes {
    /// All of `v`.
    pub fn new(v: Vec<u8>) -> RemoteBytes {
        let end = v.len();
        RemoteBytes {
            buf: Arc::new(v),
            start: 0,
            end,
        }
    }

    /// `buf[range]`, or `None` when the range is not inside `buf`.
    pub fn range(buf: Arc<Vec<u8>>, range: std::ops::Range<usize>) -> Option<RemoteBytes> {
        if range.start > range.end || range.end > buf.len() {
            return None;
        }
        Some(RemoteBytes {
            buf,
            start: range.start,
            end: range.end,
        })
    }
}

impl std::ops::Deref for RemoteBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

impl std::fmt::Debug for RemoteBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteBytes({} bytes)", self.end - self.start)
    }
}

/// Live bytes and records of one object, as the chains name them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectLive {
    pub bytes: u64,
    pub records: u64,
}

/// The Volume's remote state: the read-through source, and per-object
/// liveness (DRAM only, rebuilt at open).
#[derive(Debug)]
pub(crate) struct RemoteState {
    source: OnceLock<Arc<dyn RemoteSource>>,
    live: RankedMutex<FxHashMap<u64, ObjectLive>>,
    /// Remote records fetched lately whose bytes matched their CRC.
    verified: RankedMutex<VecDeque<(VerifiedKey, RemoteBytes)>>,
}

impl Default for RemoteState {
    fn default() -> RemoteState {
        RemoteState {
            source: OnceLock::new(),
            live: RankedMutex::new(Rank::RemoteLive, FxHashMap::default()),
            verified: RankedMutex::new(Rank::RemoteVerified, VecDeque::new()),
        }
    }
}

/// Records kept in [`RemoteState::verified`]: 8 of at most 256 KiB.
///
/// Why: a record is checked whole, whatever part of it a read wants, and
/// the kernel asks a FUSE file system for 128 KiB at a time, so a
/// sequential reader of a tiered file made every 256 KiB record be
/// fetched, copied and checked two or three times.
const VERIFIED_RECORDS: usize = 8;

/// What names a remote record's bytes: its object slice and its CRC.
/// Object numbers are never reused while a process runs (the engine
/// counts up), so a key never names other bytes than it did when cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct VerifiedKey {
    obj: u64,
    off: u64,
    len: u32,
    crc: u32,
}

impl RemoteState {
    fn verified_get(&self, k: &VerifiedKey) -> Option<RemoteBytes> {
        let v = self.verified.lock().ok()?;
        v.iter().find(|(key, _)| key == k).map(|(_, b)| b.clone())
    }

    fn verified_put(&self, k: VerifiedKey, b: RemoteBytes) {
        if let Ok(mut v) = self.verified.lock() {
            if v.iter().any(|(key, _)| *key == k) {
                return;
            }
            if v.len() >= VERIFIED_RECORDS {
                v.pop_front();
            }
            v.push_back((k, b));
        }
    }
}

impl RemoteState {
    /// Count the remote records of a freshly opened inode's data chain.
    pub fn count(&self, chain: &BTreeMap<u64, Rec>) {
        for r in chain.values() {
            if let Loc::Remote(s) = r.loc() {
                self.add(s);
            }
        }
    }

    pub fn add(&self, s: RemoteSlice) {
        let mut l = self.live.lock().or_stop();
        let e = l.entry(s.obj).or_default();
        e.bytes += s.len as u64;
        e.records += 1;
    }

    /// A record naming `s` is gone for good (its unlink is durable).
    pub fn drop_slice(&self, s: RemoteSlice) {
        let mut l = self.live.lock().or_stop();
        if let Some(e) = l.get_mut(&s.obj) {
            e.bytes = e.bytes.saturating_sub(s.len as u64);
            e.records = e.records.saturating_sub(1);
            if e.records == 0 {
                l.remove(&s.obj);
            }
        }
    }
}

/// A file that could be tiered out: it has bytes in PM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierCandidate {
    pub ino: u64,
    pub size: u64,
    /// Bytes of its data held in PM (the space tier-out frees).
    pub local_bytes: u64,
    pub mtime_ns: i64,
    pub atime_ns: i64,
}

/// One local record of a file being tiered out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierExtent {
    pub file_off: u64,
    pub len: u32,
    /// The record's payload CRC32C: the store is asked to check it.
    pub crc32c: u32,
    rec: Rec,
}

/// The local records of a file, held (their buffer space referenced, so
/// nothing recycles it) while their bytes are uploaded. Build with
/// [`Volume::tier_begin`], finish with [`Volume::tier_switch`]; dropping it
/// gives the references back.
#[derive(Debug)]
pub struct TierOut<'v> {
    vol: &'v Volume,
    ino: u64,
    extents: Vec<TierExtent>,
}

impl<'v> TierOut<'v> {
    pub fn ino(&self) -> u64 {
        self.ino
    }
    pub fn extents(&self) -> &[TierExtent] {
        &self.extents
    }
    /// Bytes in all.
    pub fn len(&self) -> u64 {
        self.extents.iter().map(|e| e.len as u64).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }
    /// The bytes of extent `k`, checked against its CRC32C first (nothing
    /// leaves for the store that does not match what arrived).
    pub fn bytes(&self, k: usize) -> Result<&'v [u8]> {
        let e = &self.extents[k];
        let s = e.rec.slice();
        let b = self.vol.slice_bytes(s);
        if layout::crc32c(b) != e.crc32c {
            tracing::error!(
                ino = self.ino,
                record = e.rec.id.0,
                "damaged data found while tiering out inode {} bytes [{}, {}): it stays in PM",
                self.ino,
                e.file_off,
                e.file_off + e.len as u64
            );
            return Err(FsError::Damaged {
                ino: self.ino,
                start: e.file_off,
                end: e.file_off + e.len as u64,
            });
        }
        Ok(b)
    }
}

impl Drop for TierOut<'_> {
    fn drop(&mut self) {
        if self.extents.is_empty() {
            return;
        }
        match self.vol.alloc.lock() {
            Ok(mut a) => {
                for e in self.extents.drain(..) {
                    a.drop_ref(e.rec.slice());
                }
            }
            Err(_) => {
                if !std::thread::panicking() {
                    self.vol
                        .fail("an allocator lock was poisoned; a tier-out hold was not returned");
                }
            }
        }
    }
}

/// A remote record as `fsck.pktfs --remote` checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRecordInfo {
    pub ino: u64,
    pub file_off: u64,
    pub len: u32,
    pub crc32c: u32,
    pub obj: u64,
    pub obj_off: u64,
    pub damaged: bool,
}

/// A remote extent to link into a file ([`Volume::link_remote`], used by
/// `pktfs restore`): the record a tiered record was, field by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteExtent {
    pub file_off: u64,
    pub obj: u64,
    pub obj_off: u64,
    pub len: u32,
    pub crc32c: u32,
    pub seq: u64,
    pub timestamp_ns: u64,
    pub flags: u8,
}

/// What [`Volume::tier_switch`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchReport {
    /// Records now remote, and their bytes (PM space freed).
    pub records: u64,
    pub bytes: u64,
    /// Records left local because the file changed meanwhile.
    pub skipped: u64,
}

/// Most link stores one switch commit makes (a journal slot holds 60
/// entries; one is left for safety and the attribute slot takes none: the
/// switch does not change attributes).
const SWITCH_RUNS_PER_COMMIT: usize = 56;

impl Volume {
    /// Install the read-through source (once; later calls are ignored and
    /// return false).
    pub fn set_remote_source(&self, s: Arc<dyn RemoteSource>) -> bool {
        self.remote.source.set(s).is_ok()
    }

    /// Per-object live bytes and records, for garbage collection and
    /// `fsck --remote`.
    pub fn remote_objects(&self) -> FxHashMap<u64, ObjectLive> {
        self.remote.live.lock().or_stop().clone()
    }

    /// Set the incompat feature REMOTE_RECORDS (once), before the first
    /// remote record is written: a build without tiering must not open an
    /// image whose chains it would misread.
    pub fn enable_remote_records(&self) -> Result<()> {
        self.check_writable()?;
        let mut sb = self.sb.lock().or_stop();
        if !sb.incompat.contains(Features::REMOTE_RECORDS) {
            sb.incompat |= Features::REMOTE_RECORDS;
            super::write_superblocks(&self.pm, &sb);
            tracing::info!("image feature REMOTE_RECORDS set (the first tier-out)");
        }
        Ok(())
    }

    /// Regular files holding bytes in PM, with their times: the tier
    /// engine's policy picks from these.
    pub fn tier_candidates(&self) -> Vec<TierCandidate> {
        let mut out = Vec::new();
        for a in self.all_inodes() {
            let Ok(i) = a.read() else { continue };
            if i.dead || i.attr.kind != FileType::Regular {
                continue;
            }
            let local: u64 = i
                .data
                .values()
                .filter(|r| !r.r.is_remote())
                .map(|r| r.r.len as u64)
                .sum();
            if local > 0 {
                out.push(TierCandidate {
                    ino: i.ino as u64,
                    size: i.attr.size,
                    local_bytes: local,
                    mtime_ns: i.attr.mtime_ns,
                    atime_ns: i.attr.atime_ns,
                });
            }
        }
        out
    }

    /// Hold the local records of a regular file for upload (at most
    /// `max_bytes` of them, from the start; records marked damaged stay).
    pub fn tier_begin(&self, ino: u64, max_bytes: u64) -> Result<TierOut<'_>> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        Self::file_inode(&i)?;
        let mut extents = Vec::new();
        let mut total = 0u64;
        for r in i.data.values() {
            if r.r.is_remote() || r.r.flags & layout::record::FLAG_DAMAGED != 0 {
                continue;
            }
            if total > 0 && total + r.r.len as u64 > max_bytes {
                break;
            }
            total += r.r.len as u64;
            extents.push(TierExtent {
                file_off: r.r.file_off,
                len: r.r.len,
                crc32c: r.r.payload_crc,
                rec: *r,
            });
        }
        let mut a = self.alloc.lock().or_stop();
        for e in &extents {
            a.take_ref(e.rec.slice());
        }
        Ok(TierOut {
            vol: self,
            ino,
            extents,
        })
    }

    /// The store confirmed the bytes of `out`'s extents at `placed[k]`
    /// (object, offset): switch every extent whose record is still in the
    /// file, unchanged, to a remote record, and free its PM space once the
    /// switch is durable. Runs of adjacent records switch with one link
    /// store each, many runs per commit; a crash leaves every record either
    /// local or remote, never lost.
    pub fn tier_switch(&self, out: TierOut<'_>, placed: &[(u64, u64)]) -> Result<SwitchReport> {
        self.check_writable()?;
        if placed.len() != out.extents.len() {
            return Err(FsError::Invalid("one placement per extent"));
        }
        self.enable_remote_records()?;
        let arc = self.inode(out.ino)?;
        let mut i = super::wlock(&arc)?;
        if i.dead {
            return Ok(SwitchReport {
                skipped: out.extents.len() as u64,
                ..Default::default()
            });
        }
        let mut rep = SwitchReport::default();
        // Group the still-current extents into runs of records adjacent in
        // the chain.
        let mut runs: Vec<Vec<(usize, Rec)>> = Vec::new();
        let mut prev_key: Option<u64> = None;
        for (k, e) in out.extents.iter().enumerate() {
            let cur = i.data.get(&e.file_off).copied();
            if cur != Some(e.rec) {
                rep.skipped += 1;
                prev_key = None;
                continue;
            }
            let adjacent = prev_key.is_some_and(|p| {
                i.data
                    .range(p + 1..)
                    .next()
                    .is_some_and(|(k2, _)| *k2 == e.file_off)
            });
            match runs.last_mut() {
                Some(run) if adjacent => run.push((k, e.rec)),
                _ => runs.push(vec![(k, e.rec)]),
            }
            prev_key = Some(e.file_off);
        }
        let attr = i.attr;
        for batch in runs.chunks(SWITCH_RUNS_PER_COMMIT) {
            let mut tx = Tx::new();
            for run in batch {
                let first = run[0].1.r.file_off;
                let end = run[run.len() - 1].1.r.file_end();
                let pieces: Vec<Piece> = run
                    .iter()
                    .map(|(k, r)| Piece {
                        loc: Loc::Remote(RemoteSlice {
                            obj: placed[*k].0,
                            off: placed[*k].1,
                            len: r.r.len,
                        }),
                        crc: r.r.payload_crc,
                        file_off: r.r.file_off,
                        seq: r.r.seq,
                        timestamp_ns: r.r.timestamp_ns,
                        flags: r.r.flags,
                    })
                    .collect();
                self.splice_range_tx_keep_attr(&mut tx, &mut i, first, end, pieces)?;
                rep.records += run.len() as u64;
                rep.bytes += run.iter().map(|(_, r)| r.r.len as u64).sum::<u64>();
            }
            tx.commit(self);
        }
        debug_assert_eq!(i.attr, attr, "a switch changes no attribute");
        drop(i);
        drop(out);
        Ok(rep)
    }

    /// Link remote extents (sorted by file offset, not overlapping, not
    /// empty) into regular file `ino`, replacing whatever was in their
    /// range, and grow the size to cover them. Commits in batches; each
    /// commit leaves a consistent file. Rebuilding an image from a bucket
    /// is the user.
    pub fn link_remote(&self, ino: u64, extents: &[RemoteExtent]) -> Result<()> {
        self.check_writable()?;
        for w in extents.windows(2) {
            if w[0].file_off + w[0].len as u64 > w[1].file_off {
                return Err(FsError::Invalid(
                    "remote extents overlap or are out of order",
                ));
            }
        }
        if extents.iter().any(|e| e.len == 0 || e.obj == 0) {
            return Err(FsError::Invalid("an empty remote extent or object 0"));
        }
        if extents
            .last()
            .is_some_and(|e| e.file_off.saturating_add(e.len as u64) > super::MAX_FILE_SIZE)
        {
            return Err(FsError::TooBig);
        }
        self.enable_remote_records()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        Self::file_inode(&i)?;
        for batch in extents.chunks(1024) {
            let first = batch[0].file_off;
            let last = &batch[batch.len() - 1];
            let end = last.file_off + last.len as u64;
            let pieces: Vec<Piece> = batch
                .iter()
                .map(|e| Piece {
                    loc: Loc::Remote(RemoteSlice {
                        obj: e.obj,
                        off: e.obj_off,
                        len: e.len,
                    }),
                    crc: e.crc32c,
                    file_off: e.file_off,
                    seq: e.seq,
                    timestamp_ns: e.timestamp_ns,
                    flags: e.flags & !layout::record::FLAG_DIR_TIME,
                })
                .collect();
            let mut attr = i.attr;
            attr.size = attr.size.max(end);
            let mut tx = Tx::new();
            self.splice_range_tx(&mut tx, &mut i, first, end, pieces, attr)?;
            tx.commit(self);
        }
        Ok(())
    }

    /// Bring the remote records of `ino` back into PM (at most `max_bytes`
    /// of them, from the start): fetched, checked, written, and switched
    /// back in commits of whole runs. Returns the bytes brought back.
    pub fn tier_recall(&self, ino: u64, max_bytes: u64) -> Result<u64> {
        self.recall_where(ino, max_bytes, |_| true)
    }

    /// [`Self::tier_recall`] of only the records of `ino` in object `obj`
    /// (compaction stages an object's live records through PM).
    pub fn tier_recall_object(&self, ino: u64, obj: u64) -> Result<u64> {
        self.recall_where(ino, u64::MAX, |r| r.r.remote_obj() == obj)
    }

    /// Handles of every inode, taken without holding the table while any
    /// inode is locked.
    fn all_inodes(&self) -> Vec<InodeRef> {
        self.inodes.snapshot().into_iter().map(|(_, a)| a).collect()
    }

    /// Regular files with a remote record in object `obj`.
    pub fn files_referencing(&self, obj: u64) -> Vec<u64> {
        self.all_inodes()
            .into_iter()
            .filter_map(|a| {
                let i = a.read().ok()?;
                (!i.dead
                    && i.data
                        .values()
                        .any(|r| r.r.is_remote() && r.r.remote_obj() == obj))
                .then_some(i.ino as u64)
            })
            .collect()
    }

    /// Every remote record of the volume, by inode and file offset.
    pub fn remote_records(&self) -> Vec<RemoteRecordInfo> {
        let mut out = Vec::new();
        for a in self.all_inodes() {
            let Ok(i) = a.read() else { continue };
            if i.dead || i.attr.kind != FileType::Regular {
                continue;
            }
            out.extend(
                i.data
                    .values()
                    .filter(|r| r.r.is_remote())
                    .map(|r| RemoteRecordInfo {
                        ino: i.ino as u64,
                        file_off: r.r.file_off,
                        len: r.r.len,
                        crc32c: r.r.payload_crc,
                        obj: r.r.remote_obj(),
                        obj_off: r.r.remote_off(),
                        damaged: r.r.flags & layout::record::FLAG_DAMAGED != 0,
                    }),
            );
        }
        out.sort_by_key(|r| (r.ino, r.file_off));
        out
    }

    fn recall_where(&self, ino: u64, max_bytes: u64, which: impl Fn(&Rec) -> bool) -> Result<u64> {
        self.check_writable()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        Self::file_inode(&i)?;
        let remote: Vec<Rec> = i
            .data
            .values()
            .filter(|r| r.r.is_remote() && which(r))
            .copied()
            .collect();
        let mut done = 0u64;
        for r in remote {
            if done >= max_bytes {
                break;
            }
            let bytes = self.fetch_rec(&i, &r)?;
            let slices = self.alloc_payload(bytes.len() as u64)?;
            let crcs = self.write_payload(&slices, &bytes);
            // One record stays one record when it fits one slice; a slice
            // split by the allocator gets CRCs of its own parts.
            let mut at = r.r.file_off;
            let pieces: Vec<Piece> = slices
                .iter()
                .zip(&crcs)
                .map(|(s, c)| {
                    let p = Piece {
                        loc: Loc::Local(*s),
                        crc: *c,
                        file_off: at,
                        seq: r.r.seq,
                        timestamp_ns: r.r.timestamp_ns,
                        flags: r.r.flags,
                    };
                    at += s.len as u64;
                    p
                })
                .collect();
            let mut tx = Tx::new();
            self.splice_range_tx_keep_attr(&mut tx, &mut i, r.r.file_off, r.r.file_end(), pieces)?;
            tx.commit(self);
            done += r.r.len as u64;
        }
        Ok(done)
    }

    /// Fetch a remote record's whole slice and check it against its CRC:
    /// the only way remote bytes enter the file system.
    ///
    /// The last few records that passed are kept (checked bytes, keyed by
    /// object slice and CRC), so reads that each want part of one record
    /// fetch and check it once.
    pub(crate) fn fetch_rec(&self, i: &Inode, r: &Rec) -> Result<RemoteBytes> {
        let Loc::Remote(s) = r.loc() else {
            return Ok(RemoteBytes::new(self.slice_bytes(r.slice()).to_vec()));
        };
        if r.r.flags & layout::record::FLAG_DAMAGED != 0 {
            return Err(FsError::Damaged {
                ino: i.ino as u64,
                start: r.r.file_off,
                end: r.r.file_end(),
            });
        }
        let key = VerifiedKey {
            obj: s.obj,
            off: s.off,
            len: s.len,
            crc: r.r.payload_crc,
        };
        let src = self.remote.source.get().ok_or_else(|| {
            FsError::Remote(format!(
                "inode {} bytes [{}, {}) are tiered to object {} and no tier is configured \
                 (mount or serve with --tier s3://BUCKET/PREFIX)",
                i.ino,
                r.r.file_off,
                r.r.file_end(),
                s.obj
            ))
        })?;
        if let Some(b) = self.remote.verified_get(&key) {
            src.note_read(i.ino as u64);
            return Ok(b);
        }
        let bytes = src.fetch(i.ino as u64, s.obj, s.off, s.len).map_err(|e| {
            tracing::warn!(ino = i.ino, obj = s.obj, "tier read failed: {e}");
            FsError::Remote(format!(
                "inode {} bytes [{}, {}) (object {}): {e}",
                i.ino,
                r.r.file_off,
                r.r.file_end(),
                s.obj
            ))
        })?;
        let got = layout::crc32c(&bytes);
        if bytes.len() != s.len as usize || got != r.r.payload_crc {
            tracing::error!(
                ino = i.ino,
                obj = s.obj,
                "object {} at {} returned {} bytes with CRC32C {got:#010x} where inode {} \
                 bytes [{}, {}) want {} bytes with {:#010x}: refused",
                s.obj,
                s.off,
                bytes.len(),
                i.ino,
                r.r.file_off,
                r.r.file_end(),
                s.len,
                r.r.payload_crc
            );
            return Err(FsError::Damaged {
                ino: i.ino as u64,
                start: r.r.file_off,
                end: r.r.file_end(),
            });
        }
        self.remote.verified_put(key, bytes.clone());
        Ok(bytes)
    }
}
