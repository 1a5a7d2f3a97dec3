//! What the tier engine has done and has left to do, as counters any
//! thread may read: `pktfs stat` and the metrics endpoint show them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one running tier engine.
#[derive(Debug, Default)]
pub struct TierStats {
    pub files_tiered: AtomicU64,
    pub bytes_tiered: AtomicU64,
    pub records_tiered: AtomicU64,
    pub objects_uploaded: AtomicU64,
    pub bytes_uploaded: AtomicU64,
    pub upload_errors: AtomicU64,
    /// Files and PM bytes the last policy pass chose and had not yet
    /// finished: the backlog.
    pub backlog_files: AtomicU64,
    pub backlog_bytes: AtomicU64,
    pub passes: AtomicU64,
    /// Milliseconds tier-out waited for writing clients (summed over its
    /// upload threads).
    pub yielded_ms: AtomicU64,
    pub fetches: AtomicU64,
    pub fetch_bytes: AtomicU64,
    pub cache_hits: AtomicU64,
    pub fetch_errors: AtomicU64,
    pub recalled_files: AtomicU64,
    pub recalled_bytes: AtomicU64,
    pub objects_deleted: AtomicU64,
    pub objects_compacted: AtomicU64,
    pub snapshots: AtomicU64,
    pub last_snapshot_seq: AtomicU64,
    pub last_snapshot_ns: AtomicU64,
    pub snapshot_errors: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TierStatsSnapshot {
    pub files_tiered: u64,
    pub bytes_tiered: u64,
    pub records_tiered: u64,
    pub objects_uploaded: u64,
    pub bytes_uploaded: u64,
    pub upload_errors: u64,
    pub backlog_files: u64,
    pub backlog_bytes: u64,
    pub passes: u64,
    pub yielded_ms: u64,
    pub fetches: u64,
    pub fetch_bytes: u64,
    pub cache_hits: u64,
    pub fetch_errors: u64,
    pub recalled_files: u64,
    pub recalled_bytes: u64,
    pub objects_deleted: u64,
    pub objects_compacted: u64,
    pub snapshots: u64,
    pub last_snapshot_seq: u64,
    pub last_snapshot_ns: u64,
    pub snapshot_errors: u64,
}

impl TierStats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    pub fn snapshot(&self) -> TierStatsSnapshot {
        let g = |c: &AtomicU64| c.load(Relaxed);
        TierStatsSnapshot {
            files_tiered: g(&self.files_tiered),
            bytes_tiered: g(&self.bytes_tiered),
            records_tiered: g(&self.records_tiered),
            objects_uploaded: g(&self.objects_uploaded),
            bytes_uploaded: g(&self.bytes_uploaded),
            upload_errors: g(&self.upload_errors),
            backlog_files: g(&self.backlog_files),
            backlog_bytes: g(&self.backlog_bytes),
            passes: g(&self.passes),
            yielded_ms: g(&self.yielded_ms),
            fetches: g(&self.fetches),
            fetch_bytes: g(&self.fetch_bytes),
            cache_hits: g(&self.cache_hits),
            fetch_errors: g(&self.fetch_errors),
            recalled_files: g(&self.recalled_files),
            recalled_bytes: g(&self.recalled_bytes),
            objects_deleted: g(&self.objects_deleted),
            objects_compacted: g(&self.objects_compacted),
            snapshots: g(&self.snapshots),
            last_snapshot_seq: g(&self.last_snapshot_seq),
            last_snapshot_ns: g(&self.last_snapshot_ns),
            snapshot_errors: g(&self.snapshot_errors),
        }
    }
}

impl TierStatsSnapshot {
    /// `name value` lines for the text form of `pktfs stat`.
    pub fn lines(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("tier files tiered", self.files_tiered),
            ("tier bytes tiered", self.bytes_tiered),
            ("tier objects uploaded", self.objects_uploaded),
            ("tier bytes uploaded", self.bytes_uploaded),
            ("tier upload errors", self.upload_errors),
            ("tier backlog files", self.backlog_files),
            ("tier backlog bytes", self.backlog_bytes),
            ("tier yielded to clients ms", self.yielded_ms),
            ("tier fetches", self.fetches),
            ("tier fetch bytes", self.fetch_bytes),
            ("tier cache hits", self.cache_hits),
            ("tier fetch errors", self.fetch_errors),
            ("tier files recalled", self.recalled_files),
            ("tier objects deleted", self.objects_deleted),
            ("tier objects compacted", self.objects_compacted),
            ("tier snapshots", self.snapshots),
            ("tier last snapshot", self.last_snapshot_seq),
        ]
    }
}
