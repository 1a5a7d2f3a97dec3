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
//! [`Volume::tier_begin`] / [`Volume::tier_switch`] (`tierout.rs`, with
//! recall and `link_remote`). The Volume keeps, in
//! DRAM (rebuilt at open like the allocators), how many live bytes every
//! object still has, so the engine knows which objects it may delete.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock};

use pktfs_layout::superblock::Features;
use pktfs_layout::{FileType, Record, RecordKind};
use rustc_hash::FxHashMap;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::lockrank::{Rank, RankedMutex};
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

    /// Handles of every inode, taken without holding the table while any
    /// inode is locked.
    pub(super) fn all_inodes(&self) -> Vec<InodeRef> {
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
                        damaged: r.r.flags & pktfs_layout::record::FLAG_DAMAGED != 0,
                    }),
            );
        }
        out.sort_by_key(|r| (r.ino, r.file_off));
        out
    }

    /// Fetch a remote record's whole slice and check it against its CRC:
    /// the only way remote bytes enter the file system.
    ///
    /// The last few records that passed are kept (checked bytes, keyed by
    /// object slice and CRC), so reads that each want part of one record
    /// fetch and check it once.
    pub(crate) fn fetch_rec(&self, i: &Inode, r: &Rec) -> Result<RemoteBytes> {
        match RemoteRef::of(i.ino as u64, r) {
            None => Ok(RemoteBytes::new(self.slice_bytes(r.slice()).to_vec())),
            Some(rr) => self.fetch_remote(&rr),
        }
    }

    /// [`Volume::fetch_rec`] of a record named by value: no inode lock is
    /// needed (or taken), so a transmit path fetches off its locks, on any
    /// thread. The bytes are those the record named when `r` was taken
    /// (checked against its CRC); the record may have been replaced since,
    /// and then the object must still be pinned ([`Volume::pin_objects`])
    /// for the fetch to find it.
    pub(crate) fn fetch_remote(&self, r: &RemoteRef) -> Result<RemoteBytes> {
        let s = r.slice;
        if r.damaged {
            return Err(FsError::Damaged {
                ino: r.ino,
                start: r.file_off,
                end: r.file_end,
            });
        }
        let key = VerifiedKey {
            obj: s.obj,
            off: s.off,
            len: s.len,
            crc: r.crc,
        };
        let src = self.remote_source(r)?;
        if let Some(b) = self.remote.verified_get(&key) {
            src.note_read(r.ino);
            return Ok(b);
        }
        let bytes = src.fetch(r.ino, s.obj, s.off, s.len).map_err(|e| {
            tracing::warn!(ino = r.ino, obj = s.obj, "tier read failed: {e}");
            FsError::Remote(format!(
                "inode {} bytes [{}, {}) (object {}): {e}",
                r.ino, r.file_off, r.file_end, s.obj
            ))
        })?;
        let got = pktfs_layout::crc32c(&bytes);
        if bytes.len() != s.len as usize || got != r.crc {
            tracing::error!(
                ino = r.ino,
                obj = s.obj,
                "object {} at {} returned {} bytes with CRC32C {got:#010x} where inode {} \
                 bytes [{}, {}) want {} bytes with {:#010x}: refused",
                s.obj,
                s.off,
                bytes.len(),
                r.ino,
                r.file_off,
                r.file_end,
                s.len,
                r.crc
            );
            return Err(FsError::Damaged {
                ino: r.ino,
                start: r.file_off,
                end: r.file_end,
            });
        }
        self.remote.verified_put(key, bytes.clone());
        Ok(bytes)
    }

    /// The installed read-through source, or why a remote record cannot be
    /// read without one.
    pub(crate) fn remote_source(&self, r: &RemoteRef) -> Result<&Arc<dyn RemoteSource>> {
        self.remote.source.get().ok_or_else(|| {
            FsError::Remote(format!(
                "inode {} bytes [{}, {}) are tiered to object {} and no tier is configured \
                 (mount or serve with --tier s3://BUCKET/PREFIX)",
                r.ino, r.file_off, r.file_end, r.slice.obj
            ))
        })
    }

    /// Count `refs`' objects live as if one more record named each slice,
    /// until [`Volume::unpin_objects`]: garbage collection keeps an object
    /// that still has live bytes, so bytes a transmit planned to fetch
    /// later are not deleted under it when the file is overwritten
    /// meanwhile. Called under the inode's lock that found the records
    /// (so the objects were live when pinned).
    pub(crate) fn pin_objects(&self, refs: &[RemoteRef]) {
        for r in refs {
            self.remote.add(r.slice);
        }
    }

    /// Undo [`Volume::pin_objects`].
    pub(crate) fn unpin_objects(&self, refs: &[RemoteRef]) {
        for r in refs {
            self.remote.drop_slice(r.slice);
        }
    }
}

/// A remote record named by value: what fetching and checking it needs,
/// without the inode (whose lock a fetch must not hold: a slow store would
/// stall every reader and writer of the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRef {
    ino: u64,
    file_off: u64,
    file_end: u64,
    slice: RemoteSlice,
    crc: u32,
    damaged: bool,
}

impl RemoteRef {
    /// The record `r` of inode `ino`, when it is remote.
    pub(crate) fn of(ino: u64, r: &Rec) -> Option<RemoteRef> {
        let Loc::Remote(slice) = r.loc() else {
            return None;
        };
        Some(RemoteRef {
            ino,
            file_off: r.r.file_off,
            file_end: r.r.file_end(),
            slice,
            crc: r.r.payload_crc,
            damaged: r.r.flags & pktfs_layout::record::FLAG_DAMAGED != 0,
        })
    }

    /// Bytes a fetch of the record brings (the whole record: its CRC
    /// covers all of it, whatever part is wanted).
    pub fn len(&self) -> u32 {
        self.slice.len
    }

    pub fn is_empty(&self) -> bool {
        self.slice.len == 0
    }

    /// Where the record's bytes are.
    pub fn slice(&self) -> RemoteSlice {
        self.slice
    }

    /// The damage flag: such a record is never fetched.
    pub(crate) fn damaged(&self) -> bool {
        self.damaged
    }
}
