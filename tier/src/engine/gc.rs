//! Snapshots and garbage: uploading the metadata snapshot, deleting objects
//! nothing references, compacting objects that are mostly dead.
//!
//! An object may be deleted only when no remote record references it (the
//! Volume's per-object live counts, which drop only once an unlink is
//! durable), no snapshot kept in the bucket references it (a restore from
//! that snapshot would need it), and no upload is writing it.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use super::stats::TierStats;
use super::{Shared, TierError};
use crate::segment::{object_key_rel, parse_object_key_rel};
use crate::snapshot::{self, parse_snapshot_key_rel, snapshot_key_rel};

/// What one collection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    pub objects_listed: u64,
    pub objects_deleted: u64,
    pub bytes_deleted: u64,
    pub objects_compacted: u64,
    pub snapshots_deleted: u64,
}

/// Snapshots in the bucket, oldest first.
fn list_snapshots(sh: &Shared) -> Result<Vec<u64>, TierError> {
    let mut seqs: Vec<u64> = sh
        .store
        .list(&sh.target.key("snap/"))?
        .iter()
        .filter_map(|o| sh.target.rel(&o.key).and_then(parse_snapshot_key_rel))
        .collect();
    seqs.sort_unstable();
    Ok(seqs)
}

/// At start: the objects the kept snapshots reference, and the next
/// snapshot number.
pub(crate) fn load_snapshot_refs(sh: &Shared) -> Result<(), TierError> {
    let seqs = list_snapshots(sh)?;
    let mut refs = BTreeSet::new();
    for &s in &seqs {
        let bytes = sh.store.get(&sh.target.key(&snapshot_key_rel(s)))?;
        match snapshot::referenced_objects(&bytes) {
            Ok(r) => refs.extend(r),
            Err(e) => {
                return Err(TierError::Snapshot(format!(
                    "snapshot {s} in {} does not parse ({e}); nothing is collected until it \
                     is removed or replaced",
                    sh.target
                )))
            }
        }
    }
    if let Ok(mut r) = sh.snapshot_refs.lock() {
        *r = refs;
    }
    let next = seqs.last().map_or(1, |s| s + 1);
    sh.next_snapshot.store(next, Ordering::Relaxed);
    Ok(())
}

/// Capture and upload a snapshot; drop snapshots beyond the kept number.
pub(crate) fn snapshot(sh: &Shared) -> Result<u64, TierError> {
    let seq = sh.next_snapshot.fetch_add(1, Ordering::Relaxed);
    let r = (|| {
        // Cleared first: a change during the capture marks it again.
        sh.dirty.store(false, Ordering::Relaxed);
        let snap =
            snapshot::capture(&sh.vol, seq).map_err(|e| TierError::Snapshot(e.to_string()))?;
        let crc = pktfs_layout::crc32c(&snap.bytes);
        sh.store
            .put(&sh.target.key(&snapshot_key_rel(seq)), snap.bytes, crc)?;
        // Objects of the kept snapshots: the new one and the newest older.
        let seqs = list_snapshots(sh)?;
        let keep = sh.cfg.keep_snapshots.max(1);
        let cut = seqs.len().saturating_sub(keep);
        let mut refs: BTreeSet<u64> = snap.referenced_objects;
        for &s in &seqs[cut..] {
            if s == seq {
                continue;
            }
            let b = sh.store.get(&sh.target.key(&snapshot_key_rel(s)))?;
            refs.extend(
                snapshot::referenced_objects(&b).map_err(|e| TierError::Snapshot(e.to_string()))?,
            );
        }
        if let Ok(mut r) = sh.snapshot_refs.lock() {
            *r = refs;
        }
        for &s in &seqs[..cut] {
            sh.store.delete(&sh.target.key(&snapshot_key_rel(s)))?;
        }
        TierStats::add(&sh.stats.snapshots, 1);
        sh.stats.last_snapshot_seq.store(seq, Ordering::Relaxed);
        sh.stats.last_snapshot_ns.store(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            Ordering::Relaxed,
        );
        tracing::info!("tier {}: snapshot {seq} uploaded", sh.target);
        Ok(seq)
    })();
    if r.is_err() {
        sh.dirty.store(true, Ordering::Relaxed);
        TierStats::add(&sh.stats.snapshot_errors, 1);
    }
    r
}

/// Delete objects nothing references; compact mostly dead ones.
pub(crate) fn collect(sh: &Shared) -> Result<GcReport, TierError> {
    let mut rep = GcReport::default();
    // The upload numbers in flight are taken before the listing: an object
    // created after it is not listed, one created before is in `inflight`.
    let inflight = sh.inflight.lock().map(|f| f.clone()).unwrap_or_default();
    let listed = sh.store.list(&sh.target.key("seg/"))?;
    let live = sh.vol.remote_objects();
    let snap = sh
        .snapshot_refs
        .lock()
        .map(|r| r.clone())
        .unwrap_or_default();
    let mut dead = Vec::new();
    for o in &listed {
        let Some(n) = sh.target.rel(&o.key).and_then(parse_object_key_rel) else {
            continue;
        };
        rep.objects_listed += 1;
        if live.contains_key(&n) || snap.contains(&n) || inflight.contains(&n) {
            continue;
        }
        if n >= sh.next_obj.load(Ordering::Relaxed) {
            continue; // another writer's? never ours to delete
        }
        dead.push((n, o.size));
    }
    if !dead.is_empty() {
        let keys: Vec<String> = dead
            .iter()
            .map(|(n, _)| sh.target.key(&object_key_rel(*n)))
            .collect();
        sh.store.delete_many(&keys)?;
        for (n, size) in &dead {
            sh.reader.forget(*n);
            rep.objects_deleted += 1;
            rep.bytes_deleted += size;
        }
        TierStats::add(&sh.stats.objects_deleted, rep.objects_deleted);
        tracing::info!(
            "tier {}: deleted {} objects nothing references ({} bytes)",
            sh.target,
            rep.objects_deleted,
            rep.bytes_deleted
        );
    }
    // Compaction: an object whose live bytes are a small part of it is
    // rewritten by tiering its live records again from PM copies. The
    // records are brought back (recalled) and tiered out in the next pass;
    // the old object then has no live record and goes once no kept
    // snapshot needs it.
    let sizes = sh.reader.sizes();
    let mut victims: Vec<u64> = live
        .iter()
        .filter(|(n, l)| {
            sizes
                .get(n)
                .is_some_and(|&s| s > 0 && (l.bytes as f64) < sh.cfg.compact_below * s as f64)
        })
        .map(|(n, _)| *n)
        .collect();
    victims.sort_unstable();
    for n in victims {
        let st = sh.vol.statfs();
        let used = (st.blocks - st.blocks_free) as f64 / st.blocks.max(1) as f64;
        if used >= sh.cfg.low_watermark {
            break; // no room in PM to stage the live records
        }
        let inos = sh.vol.files_referencing(n);
        let mut ok = true;
        for ino in &inos {
            if let Err(e) = sh.vol.tier_recall_object(*ino, n) {
                tracing::debug!("tier: compaction of object {n}, inode {ino}: {e}");
                ok = false;
            }
        }
        if ok {
            rep.objects_compacted += 1;
            TierStats::add(&sh.stats.objects_compacted, 1);
        }
    }
    Ok(rep)
}
