//! The Volume: files and directories as chains of packet-metadata records on
//! a [`Pm`] region. No FUSE types here; the FUSE adapter and the network
//! path are thin layers over this API.
//!
//! # Locking
//! Lock order, outermost first ([`lockrank::Rank`]; a thread waits for a
//! lock only while every lock it holds comes earlier, and debug builds
//! check that on every acquisition):
//! 1. `renames`: a rename between two directories, throughout;
//! 2. inode locks, several at once only in ascending inode number (a
//!    try-lock may take one out of order: it never waits);
//! 3. `sb`; `alloc`, then a journal slot (inside `Commit::apply`); the remote
//!    state's maps;
//! 4. leaves, held for one map access: `ns` (which directory is in which,
//!    for rename's loop check) and the inode table's shards.
//!
//! Namespace changes lock the inodes they touch (ns.rs, "Locking"); data
//! operations (read, write, truncate, setattr, xattrs) take only the
//! inode's own lock, so they run in parallel on different files.
//!
//! # DRAM state
//! Every reachable inode has an `Inode` with its chains indexed in
//! BTreeMaps (data records by file offset, dirents by readdir cookie, xattrs
//! by insertion key). The map order *is* the chain order: the link words on
//! the media always mirror it, and every edit computes its link stores from
//! the map.

mod acl;
#[cfg(test)]
mod acl_tests;
mod alloc;
mod commit;
mod digest;
mod failstop;
mod file;
mod file_space;
mod itable;
pub mod journal;
mod lifecycle;
mod live;
mod lockrank;
mod ns;
mod perm;
#[cfg(test)]
mod perm_tests;
mod pinned;
mod recover;
mod remote;
#[cfg(test)]
mod remote_tests;
mod rx;
#[cfg(test)]
mod rx_tests;
mod scrub;
#[cfg(test)]
mod sgid_tests;
mod superblocks;
mod system_blob;
#[cfg(test)]
mod system_blob_tests;
#[cfg(test)]
mod tests;
mod tierout;
mod tmpfile;
mod txhold;
mod types;
mod verify;
mod xattr;
mod xattr_chain;

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pktfs_layout::inode::{BIRTH_OFF, CHANGE_OFF, DATA_HEAD_OFF, INODE_SIZE, XATTR_HEAD_OFF};
use pktfs_layout::{
    AttrSlot, FileType, Geometry, InodeHeader, Record, RecordId, Superblock, ROOT_INO,
};

pub use acl::{Acl, AclEntry, AclKind, ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR};
pub use alloc::{Slice, MAX_RECORD_BYTES};
pub use digest::{Bound, ContentDigest, Precondition};
pub use file::{FallocMode, Seg};
pub use live::{epoch_begin, epoch_end};
pub use ns::{NewMode, RenameFlags};
pub use perm::{permitted, Access, AclView, Cred, Denial, S_ISVTX};
pub use recover::OpenReport;
pub use remote::{ObjectLive, RemoteBytes, RemoteRecordInfo, RemoteRef, RemoteSlice, RemoteSource};
pub use rx::{LentRx, RxBuf, RxHeld, RxPiece, RxTime};
pub use scrub::{ScrubDamage, ScrubOptions, ScrubProgress, ScrubReport};
pub use system_blob::{
    MAX_S3_CORS_BYTES, MAX_SYSTEM_XATTR_BYTES, S3_CORS_XATTR, S3_KEYS_XATTR, S3_OWNER_XATTR,
    SYSTEM_XATTR_PREFIX,
};
pub use tierout::{RemoteExtent, SwitchReport, TierCandidate, TierExtent, TierOut};
pub use tmpfile::{Linked, OwnedTmpFile, TmpFile};
pub use txhold::{TxFetched, TxHold, TxKeep, TxPlan, TxRange, TxSeg, TxWindow};
pub use types::{Attr, ChainEntry, DirEntry, FormatOptions, OpenOptions, SetAttr, StatFs, TimeSet};
pub use verify::VerifyMode;
pub use xattr::XattrFlags;

use crate::error::{FsError, Result};
use crate::media::{ExclusivePm, PersistMode, Pm};
use alloc::Alloc;
use commit::{Commit, JournalSlots, SlotState};
use failstop::OrStop;
use lockrank::{InodeLock, RankedMutex};
pub(crate) use superblocks::{mark_mounted, write_superblocks};

/// An in-memory inode and its lock (ranked by its number: `lockrank`).
pub(crate) type InodeRef = Arc<InodeLock<Inode>>;
/// An inode read-locked (the lock's rank kept while it lives).
pub(crate) type InodeRead<'a> = lockrank::Ranked<std::sync::RwLockReadGuard<'a, Inode>>;
/// An inode write-locked.
pub(crate) type InodeWrite<'a> = lockrank::Ranked<std::sync::RwLockWriteGuard<'a, Inode>>;

/// Largest file size pktfs accepts (file offsets are signed 64-bit in POSIX).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// Largest xattr value (XATTR_SIZE_MAX).
pub const MAX_XATTR_VALUE: usize = 65536;
/// Largest link count.
pub const MAX_NLINK: u32 = 65000;

/// A record as the DRAM index keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    pub id: RecordId,
    pub r: Record,
}

impl Rec {
    pub fn slice(&self) -> Slice {
        Slice {
            buffer: self.r.buffer,
            buf_off: self.r.buf_off,
            len: self.r.len,
        }
    }
}

/// DRAM state of one reachable (or open, unlinked) inode.
#[derive(Debug)]
pub(crate) struct Inode {
    pub ino: u32,
    pub attr: AttrSlot,
    pub slot: SlotState,
    /// Data chain: data records keyed by file offset, or dirents by cookie.
    pub data: BTreeMap<u64, Rec>,
    /// Directories: name -> cookie.
    pub names: HashMap<Box<[u8]>, u64>,
    /// Xattr chain keyed by insertion key, and name -> key.
    pub xattrs: BTreeMap<u64, Rec>,
    pub xnames: HashMap<Box<[u8]>, u64>,
    /// Next data/dirent sequence number and next xattr key.
    pub next_seq: u64,
    pub next_xkey: u64,
    /// Holders that keep an unlinked inode alive (open files, kernel lookups).
    pub pins: u64,
    /// Set when the inode's storage was freed. A thread that fetched the
    /// inode before that and locks it afterwards must not touch the media
    /// through it (its number may already name a new file).
    pub dead: bool,
    /// Sum of the data records' lengths (for `blocks`), kept as they change.
    pub data_bytes: u64,
    /// An unnamed file's inode was written back without a fence on this
    /// thread (`create_tmpfile`): durable only after that thread's next
    /// fence (media/writeback.rs), so a commit that names it on another
    /// thread writes it back again first (`rx_link`).
    pub unfenced_by: Option<crate::media::FlushThread>,
}

/// A directory's mtime/ctime as the image defines them (FORMAT.md): the
/// live slot's, unless a dirent flagged `FLAG_DIR_TIME` is later than the
/// slot's ctime; then the latest such dirent's timestamp is both.
pub(crate) fn fold_dir_times(attr: &mut AttrSlot, data: &BTreeMap<u64, Rec>) {
    if attr.kind != FileType::Directory {
        return;
    }
    let latest = data
        .values()
        .filter(|r| r.r.flags & pktfs_layout::record::FLAG_DIR_TIME != 0)
        .filter_map(|r| i64::try_from(r.r.timestamp_ns).ok())
        .max();
    if let Some(t) = latest.filter(|&t| t > attr.ctime_ns) {
        attr.mtime_ns = t;
        attr.ctime_ns = t;
    }
}

/// A poisoned inode lock: a panic interrupted a change to this inode, so
/// its DRAM state may disagree with the media (see `failstop`).
fn poisoned(ino: u32) -> FsError {
    FsError::Failed(format!(
        "an operation on inode {ino} panicked while changing it"
    ))
}

/// Lock an inode for reading; a freed inode is "not found".
#[track_caller]
pub(crate) fn rlock(a: &InodeRef) -> Result<InodeRead<'_>> {
    #[cfg(test)]
    lock_watch::note(a, a.is_taken(false));
    let g = a.read().map_err(|e| poisoned(e.into_inner().ino))?;
    if g.dead {
        return Err(FsError::NotFound);
    }
    Ok(g)
}

/// Lock an inode for writing; a freed inode is "not found".
#[track_caller]
pub(crate) fn wlock(a: &InodeRef) -> Result<InodeWrite<'_>> {
    #[cfg(test)]
    lock_watch::note(a, a.is_taken(true));
    let g = a.write().map_err(|e| poisoned(e.into_inner().ino))?;
    if g.dead {
        return Err(FsError::NotFound);
    }
    Ok(g)
}

/// Lets a test see threads wait for one inode's lock (ns/lock_tests.rs):
/// one watched inode at a time, in the whole test binary.
#[cfg(test)]
pub(crate) mod lock_watch {
    use super::InodeRef;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    static WATCHED: AtomicUsize = AtomicUsize::new(0);
    static WAITS: AtomicUsize = AtomicUsize::new(0);

    /// Count from now the lock calls that find `a` taken.
    pub fn watch(a: &InodeRef) {
        WAITS.store(0, Ordering::SeqCst);
        WATCHED.store(Arc::as_ptr(a) as usize, Ordering::SeqCst);
    }
    /// Lock calls that found the watched inode taken (and so wait for it).
    pub fn waits() -> usize {
        WAITS.load(Ordering::SeqCst)
    }
    pub(super) fn note(a: &InodeRef, taken: bool) {
        if taken && Arc::as_ptr(a) as usize == WATCHED.load(Ordering::SeqCst) {
            WAITS.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Inode {
    fn new(ino: u32, attr: AttrSlot, slot: SlotState) -> Inode {
        Inode {
            ino,
            attr,
            slot,
            data: BTreeMap::new(),
            names: HashMap::new(),
            xattrs: BTreeMap::new(),
            xnames: HashMap::new(),
            next_seq: 1,
            next_xkey: 1,
            pins: 0,
            dead: false,
            data_bytes: 0,
            unfenced_by: None,
        }
    }
}

pub(crate) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn time_of(t: TimeSet, now: i64) -> i64 {
    match t {
        TimeSet::Now => now,
        TimeSet::Ns(v) => v,
    }
}

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(FsError::Invalid("bad file name"));
    }
    if name.len() > pktfs_layout::NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// Which directory is in which, for rename's loop check. Its lock is a
/// leaf (ns.rs, "Locking"): taken for one map access, never while waiting
/// for another lock.
#[derive(Debug, Default)]
pub(crate) struct Namespace {
    /// Directory -> parent directory, for rename loop checks.
    pub dir_parent: FxHashMap<u32, u32>,
}

pub struct Volume {
    pub(crate) pm: Pm,
    pub(crate) geo: Geometry,
    sb: RankedMutex<Superblock>,
    pub(crate) alloc: RankedMutex<Alloc>,
    pub(crate) journal: JournalSlots,
    pub(crate) ns: RankedMutex<Namespace>,
    /// Held by a rename between two directories throughout: such renames
    /// take turns (ns.rs, "Locking").
    pub(crate) renames: RankedMutex<()>,
    /// Inode number -> in-memory inode (sharded; see `itable`).
    inodes: itable::InodeTable,
    read_only: bool,
    report: OpenReport,
    closed: std::sync::atomic::AtomicBool,
    pub(crate) verify: verify::Verifier,
    fail_state: failstop::FailState,
    /// Inodes that failed their checks at open, and why: they answer EIO.
    damaged_inodes: FxHashMap<u32, String>,
    /// Read-through source and per-object liveness of remote records.
    pub(crate) remote: remote::RemoteState,
    /// Bumped by every change of the S3 access key store (`system_blob`).
    s3_keys_version: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Volume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volume")
            .field("pm", &self.pm)
            .field("geometry", &self.geo)
            .finish()
    }
}

impl Volume {
    /// What opening found and did (backup superblock, journal replays, ...).
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn persist_mode(&self) -> PersistMode {
        self.pm.mode()
    }
    /// The persist mode with its write-back instruction, for people:
    /// prints `clwb`, `clflushopt`, `clflush`, `msync` or `eadr`.
    pub fn persistence(&self) -> crate::media::Persistence {
        self.pm.persistence()
    }
    /// The region's shared API: length, persistence mode, flush/fence,
    /// the crash log. Its bytes are reached only through the Volume, its
    /// typed handles ([`RxBuf`], [`TxHold`]), or [`Self::pm_exclusive`].
    pub fn pm(&self) -> &Pm {
        &self.pm
    }
    /// The region's bytes, exclusively: `&mut self` proves no operation,
    /// handle or other thread is using the Volume, so they may be read or
    /// written raw ([`Pm::exclusive`]). Writing behind the Volume's back
    /// leaves its DRAM state stale: for benchmarks and tests.
    pub fn pm_exclusive(&mut self) -> ExclusivePm<'_> {
        self.pm.exclusive()
    }
    /// A copy of the image as it is now (cache view).
    pub fn snapshot(&mut self) -> Vec<u8> {
        self.pm.snapshot()
    }
    pub fn superblock(&self) -> Superblock {
        self.sb.lock().or_stop().clone()
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_live()?;
        if self.read_only {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    pub(crate) fn inode(&self, ino: u64) -> Result<InodeRef> {
        self.check_live()?;
        if ino == 0 || ino > u32::MAX as u64 {
            return Err(FsError::NotFound);
        }
        self.inodes
            .get(ino as u32)
            .ok_or_else(|| match self.damaged_inodes.get(&(ino as u32)) {
                Some(why) => FsError::DamagedInode {
                    ino,
                    why: why.clone(),
                },
                None => FsError::NotFound,
            })
    }

    pub(crate) fn insert_inode(&self, ino: Inode) -> InodeRef {
        let n = ino.ino;
        let a = Arc::new(InodeLock::new(n, ino));
        self.inodes.insert(n, a.clone());
        a
    }

    pub(crate) fn remove_inode(&self, ino: u32) {
        self.inodes.remove(ino);
    }

    pub(crate) fn attr_of(&self, i: &Inode) -> Attr {
        let bytes: u64 = if i.attr.kind == FileType::Regular || i.attr.kind == FileType::Symlink {
            i.data_bytes
        } else {
            i.data.len() as u64 * 64
        };
        Attr {
            ino: i.ino as u64,
            kind: i.attr.kind,
            perm: i.attr.mode & 0o7777,
            uid: i.attr.uid,
            gid: i.attr.gid,
            nlink: i.attr.nlink,
            size: if i.attr.kind == FileType::Directory {
                (i.data.len() as u64 + 2) * 32
            } else {
                i.attr.size
            },
            blocks: bytes.div_ceil(512),
            atime_ns: i.attr.atime_ns,
            mtime_ns: i.attr.mtime_ns,
            ctime_ns: i.attr.ctime_ns,
            rdev: i.attr.rdev,
            blksize: self.geo.buffer_size_bytes.max(4096),
        }
    }

    pub fn root(&self) -> u64 {
        ROOT_INO as u64
    }

    pub fn getattr(&self, ino: u64) -> Result<Attr> {
        let i = self.inode(ino)?;
        let g = rlock(&i)?;
        Ok(self.attr_of(&g))
    }

    /// A read or a directory listing updates atime: with `strict` always,
    /// otherwise the relatime way, only when atime is not newer than mtime
    /// and ctime or is a day old. Nothing else changes (not ctime). The
    /// common case, nothing to do, takes only the inode's read lock.
    pub fn touch_atime(&self, ino: u64, strict: bool) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let due = |a: &AttrSlot, now: i64| {
            strict
                || a.atime_ns <= a.mtime_ns
                || a.atime_ns <= a.ctime_ns
                || now.saturating_sub(a.atime_ns) >= 86_400_000_000_000
        };
        let arc = self.inode(ino)?;
        if !due(&rlock(&arc)?.attr, now_ns()) {
            return Ok(());
        }
        let mut i = wlock(&arc)?;
        let now = now_ns();
        if !due(&i.attr, now) {
            return Ok(()); // another reader did it meanwhile
        }
        let mut na = i.attr;
        na.atime_ns = now;
        let mut commit = Commit::new();
        self.set_attr(&mut commit, &mut i, na);
        commit.apply(self);
        Ok(())
    }

    pub fn statfs(&self) -> StatFs {
        let a = self.alloc.lock().or_stop();
        StatFs {
            block_size: self.geo.buffer_size_bytes,
            blocks: self.geo.buffer_count,
            blocks_free: a.free_buffer_count(),
            files: self.geo.inode_count as u64,
            files_free: a.free_inode_count(),
            records: self.geo.record_count,
            records_free: a.free_record_count(),
            name_max: pktfs_layout::NAME_MAX as u32,
        }
    }

    /// Bytes of packet-buffer space handed out since this open: it moves
    /// when clients write, so background work (tier-out) can tell a busy
    /// volume from an idle one and yield to the clients.
    pub fn payload_allocated_bytes(&self) -> u64 {
        self.alloc.lock().or_stop().allocated_bytes()
    }

    /// Keep `ino` alive while unlinked (an open file, a kernel reference).
    pub fn pin(&self, ino: u64) -> Result<()> {
        let i = self.inode(ino)?;
        wlock(&i)?.pins += 1;
        Ok(())
    }

    /// Drop `n` pins; an unlinked inode with no pins left is freed.
    pub fn unpin(&self, ino: u64, n: u64) {
        let Ok(i) = self.inode(ino) else { return };
        let Ok(mut g) = wlock(&i) else { return };
        g.pins = g.pins.saturating_sub(n);
        if g.pins == 0 && g.attr.nlink == 0 {
            self.free_inode_storage(&mut g);
        }
    }

    /// Release every record and buffer of an inode nothing reaches any more
    /// (the unlink that made it unreachable has committed), and its number.
    pub(crate) fn free_inode_storage(&self, i: &mut Inode) {
        // Out of the map *before* the number goes back to the allocator: a
        // create on another thread may take the number at once and insert
        // its new inode, which a later removal would then throw away.
        self.remove_inode(i.ino);
        // Direct readers that hold the number must see it move before its
        // records and buffers can be reused (live.rs).
        self.changes_begin(std::iter::once(i.ino));
        self.mark_freed(i.ino);
        self.changes_end(std::iter::once(i.ino));
        let mut a = self.alloc.lock().or_stop();
        for r in i.data.values().chain(i.xattrs.values()) {
            a.free_record(r.id.0);
            match r.loc() {
                remote::Loc::Local(s) => a.drop_ref(s),
                remote::Loc::Remote(s) => self.remote.drop_slice(s),
            }
        }
        i.data.clear();
        i.xattrs.clear();
        i.names.clear();
        i.xnames.clear();
        i.data_bytes = 0;
        i.dead = true;
        a.free_inode(i.ino);
    }

    /// Write payload bytes into freshly allocated slices (non-temporal where
    /// large) and return each slice's CRC32C, computed while `data` is hot.
    pub(crate) fn write_payload(&self, slices: &[Slice], data: &[u8]) -> Vec<u32> {
        let mut crcs = Vec::with_capacity(slices.len());
        let mut at = 0usize;
        // Copy, then checksum the source while it is still in the cache (a
        // slice is at most 256 KiB: MAX_RECORD_BYTES).
        for s in slices {
            let chunk = &data[at..at + s.len as usize];
            self.pm
                .write_nt(self.geo.buffer_pos(s.buffer, s.buf_off).0, chunk);
            crcs.push(pktfs_layout::crc32c(chunk));
            at += s.len as usize;
        }
        crcs
    }

    /// Write a record (unreachable until a link publish names it) and
    /// schedule its write-back.
    pub(crate) fn write_record(&self, id: RecordId, r: &Record, next: RecordId) {
        let pos = self.geo.record_pos(id).0;
        self.pm.write(pos, &r.to_bytes(next));
        self.pm.flush(pos, 64);
        // Its payload CRC was computed from the bytes as they were copied
        // in, or over part of a record verified first (see `verify`).
        if r.flags & pktfs_layout::record::FLAG_DAMAGED == 0 {
            self.verify.mark_checked(id);
        } else {
            self.verify.forget(id);
        }
    }

    /// The bytes a slice names.
    pub(crate) fn slice_bytes(&self, s: Slice) -> &[u8] {
        self.pm
            .slice(self.geo.buffer_pos(s.buffer, s.buf_off).0, s.len as usize)
    }

    /// Address of the link word that points at the first record after `key`
    /// in a chain: the predecessor's `next`, or the inode's head word.
    pub(crate) fn link_before(
        &self,
        chain: &BTreeMap<u64, Rec>,
        key: u64,
        ino: u32,
        head_off: u64,
    ) -> u64 {
        match chain.range(..key).next_back() {
            Some((_, p)) => self.geo.record_pos(p.id).0,
            None => self.geo.inode_pos(ino).0 + head_off,
        }
    }

    pub(crate) fn data_link_before(&self, i: &Inode, key: u64) -> u64 {
        self.link_before(&i.data, key, i.ino, DATA_HEAD_OFF)
    }
    pub(crate) fn xattr_link_before(&self, i: &Inode, key: u64) -> u64 {
        self.link_before(&i.xattrs, key, i.ino, XATTR_HEAD_OFF)
    }

    pub(crate) fn alloc_records(&self, n: usize) -> Result<SmallVec<[RecordId; 4]>> {
        let mut a = self.alloc.lock().or_stop();
        a.alloc_records(n)
            .map(|v| v.into_iter().map(RecordId).collect())
            .ok_or(FsError::NoSpace("no free records"))
    }

    pub(crate) fn free_records_now(&self, ids: &[RecordId]) {
        let mut a = self.alloc.lock().or_stop();
        for id in ids {
            a.free_record(id.0);
        }
    }

    pub(crate) fn release_payload(&self, s: &[Slice]) {
        self.alloc.lock().or_stop().release_payload(s);
    }

    pub(crate) fn alloc_payload(&self, len: u64) -> Result<Vec<Slice>> {
        self.alloc
            .lock()
            .or_stop()
            .alloc_payload(len)
            .ok_or(FsError::NoSpace("no free buffer space"))
    }

    /// Every change to an inode's attributes goes through here.
    pub(crate) fn set_attr(&self, commit: &mut Commit, i: &mut Inode, attr: AttrSlot) {
        i.slot = commit.set_attr(i.ino, i.slot, attr);
        i.attr = attr;
    }

    /// Consistency of DRAM against the media, for tests and debug builds:
    /// every chain's link words mirror its map, every record on the media
    /// equals its DRAM copy, and allocator counts add up. The totals are
    /// exact only on a quiescent volume (nothing being created or freed
    /// meanwhile); it never blocks a thread that is changing the volume for
    /// longer than one inode's lock, and never deadlocks against one.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        recover::check_invariants(self)
    }

    /// Buffer references no record accounts for (besides the allocator's
    /// hold on its small-payload buffer): reservations, pieces not yet
    /// committed, transmit holds, buffers lent to an io_uring. 0 when
    /// nothing is in flight; anything else then is a leak. For tests.
    pub fn stray_buffer_refs(&self) -> u64 {
        recover::stray_buffer_refs(self)
    }
}

/// Write a fresh inode (header + slot 0) and schedule its write-back. The
/// inode is unreachable until a dirent naming it is published.
pub(crate) fn write_new_inode(
    pm: &Pm,
    g: &Geometry,
    ino: u32,
    attr: &AttrSlot,
    data_head: RecordId,
) -> SlotState {
    write_new_inode_heads(pm, g, ino, attr, data_head, RecordId::NONE)
}

/// [`write_new_inode`] with an xattr chain already written for it.
pub(crate) fn write_new_inode_heads(
    pm: &Pm,
    g: &Geometry,
    ino: u32,
    attr: &AttrSlot,
    data_head: RecordId,
    xattr_head: RecordId,
) -> SlotState {
    let pos = g.inode_pos(ino).0;
    let mut bytes = [0u8; INODE_SIZE];
    let generation = 1u64;
    bytes[0..8].copy_from_slice(&InodeHeader::selector(generation, 0).to_le_bytes());
    bytes[DATA_HEAD_OFF as usize..DATA_HEAD_OFF as usize + 8]
        .copy_from_slice(&data_head.0.to_le_bytes());
    bytes[XATTR_HEAD_OFF as usize..XATTR_HEAD_OFF as usize + 8]
        .copy_from_slice(&xattr_head.0.to_le_bytes());
    bytes[64..128].copy_from_slice(&attr.to_bytes(generation));
    // The change counter is the one word not written: it goes on counting
    // across the number's incarnations (live.rs), and the count at this
    // birth is written with the inode.
    let birth = live::new_birth(pm, g, ino);
    bytes[BIRTH_OFF as usize..BIRTH_OFF as usize + 8].copy_from_slice(&birth.to_le_bytes());
    let change = CHANGE_OFF as usize;
    pm.write(pos, &bytes[..change]);
    pm.write(pos + change as u64 + 8, &bytes[change + 8..]);
    pm.flush(pos, INODE_SIZE as u64);
    SlotState {
        generation,
        live_slot: 0,
    }
}

pub(crate) fn resolve_time(t: TimeSet, now: i64) -> i64 {
    time_of(t, now)
}
