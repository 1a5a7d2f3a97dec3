//! Tier-out and recall: moving a file's records between PM and the tier's
//! objects. The tier engine holds a file's local records while it uploads
//! them ([`Volume::tier_begin`] -> [`TierOut`]), then switches the records
//! the store confirmed to remote records ([`Volume::tier_switch`]);
//! [`Volume::link_remote`] rebuilds a file from a bucket (`pktfs restore`);
//! [`Volume::tier_recall`] brings remote records back into PM. Reading
//! remote records, and the per-object liveness the engine's garbage
//! collection uses, are `remote.rs`.

use pktfs_layout::FileType;

use super::commit::Commit;
use super::failstop::OrStop;
use super::file::Piece;
use super::remote::{Loc, RemoteSlice};
use super::{Rec, Volume};
use crate::error::{FsError, Result};

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
        if pktfs_layout::crc32c(b) != e.crc32c {
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
            if r.r.is_remote() || r.r.flags & pktfs_layout::record::FLAG_DAMAGED != 0 {
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
            let mut commit = Commit::new();
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
                self.splice_range_tx_keep_attr(&mut commit, &mut i, first, end, pieces)?;
                rep.records += run.len() as u64;
                rep.bytes += run.iter().map(|(_, r)| r.r.len as u64).sum::<u64>();
            }
            commit.apply(self);
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
                    flags: e.flags & !pktfs_layout::record::FLAG_DIR_TIME,
                })
                .collect();
            let mut attr = i.attr;
            attr.size = attr.size.max(end);
            let mut commit = Commit::new();
            self.splice_range_tx(&mut commit, &mut i, first, end, pieces, attr)?;
            commit.apply(self);
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
            let mut commit = Commit::new();
            self.splice_range_tx_keep_attr(
                &mut commit,
                &mut i,
                r.r.file_off,
                r.r.file_end(),
                pieces,
            )?;
            commit.apply(self);
            done += r.r.len as u64;
        }
        Ok(done)
    }
}
