//! The tier engine: moves cold file data from PM to an S3-compatible store
//! and reads it back.
//!
//! One background thread runs a policy pass every `scan_interval`:
//! - files not modified for `age` are tiered out;
//! - when PM use passes the high watermark, the least recently used files
//!   are tiered out until it is back under the low watermark;
//! - files read through the tier often since the last pass are brought
//!   back into PM (when there is room under the low watermark);
//! - a metadata snapshot is uploaded when something changed and
//!   `snapshot_interval` has passed (and when the engine stops);
//! - objects nothing references any more are deleted, and objects mostly
//!   dead are compacted.
//!
//! Tier-out itself (`out`): a file's local records are held, their bytes
//! read out of PM (each checked against its CRC), packed into a segment
//! object and uploaded with a CRC32C the store verifies; only after the
//! store confirmed the object are the records switched to remote records,
//! in one commit per run of records, and the PM space freed after that
//! commit is durable. A crash before the switch leaves an orphan object
//! (deleted by the next collection); a crash after it leaves remote
//! records whose object exists. Nothing is ever lost or dangling.

mod gc;
mod out;
mod read;
pub mod stats;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pktfs_fs::Volume;

pub use gc::GcReport;
pub use out::PassReport;
pub use read::TierReader;
pub use stats::{TierStats, TierStatsSnapshot};

use crate::s3::{ObjectStore, StoreError};
use crate::segment::parse_object_key_rel;
use crate::target::TierTarget;

/// How the engine behaves. `Default` is what `--tier` alone gives.
#[derive(Clone, Debug)]
pub struct TierConfig {
    /// Tier out files not modified for this long (`None`: only under
    /// space pressure).
    pub age: Option<Duration>,
    /// Fractions of the packet-buffer space: above `high`, tier out least
    /// recently used files until under `low`.
    pub high_watermark: f64,
    pub low_watermark: f64,
    /// Small files are packed into segment objects of about this size.
    pub segment_bytes: u64,
    /// A file with at least this many bytes in PM gets an object of its
    /// own, uploaded in parts of `part_bytes`.
    pub large_file_bytes: u64,
    pub part_bytes: u64,
    /// Uploads in flight at once.
    pub concurrency: usize,
    /// Upload bandwidth limit, bytes per second (`None`: unlimited).
    pub bandwidth_bytes_per_s: Option<u64>,
    /// While clients write, tier-out that PM use does not force goes at
    /// most this fast (`None`: it never yields). See `out::Yield`.
    pub busy_bandwidth_bytes_per_s: Option<u64>,
    pub scan_interval: Duration,
    pub snapshot_interval: Duration,
    /// Bring a file back into PM after this many record reads through the
    /// tier between two passes (`None`: never).
    pub promote_after_reads: Option<u32>,
    /// Read-through cache and window.
    pub cache_bytes: u64,
    pub window_bytes: u64,
    pub readahead_windows: u64,
    /// Compact an object whose live bytes fall below this fraction.
    pub compact_below: f64,
    /// Snapshots kept in the bucket (the newest ones).
    pub keep_snapshots: usize,
}

impl Default for TierConfig {
    fn default() -> Self {
        TierConfig {
            age: Some(Duration::from_secs(3600)),
            high_watermark: 0.80,
            low_watermark: 0.60,
            segment_bytes: 32 << 20,
            large_file_bytes: 16 << 20,
            part_bytes: 16 << 20,
            concurrency: 4,
            bandwidth_bytes_per_s: None,
            busy_bandwidth_bytes_per_s: Some(32 << 20),
            scan_interval: Duration::from_secs(5),
            snapshot_interval: Duration::from_secs(300),
            promote_after_reads: Some(64),
            cache_bytes: 128 << 20,
            window_bytes: 8 << 20,
            readahead_windows: 8,
            compact_below: 0.5,
            keep_snapshots: 2,
        }
    }
}

/// Why the engine could not start or a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum TierError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Fs(#[from] pktfs_fs::FsError),
    #[error("{0}")]
    Config(String),
    #[error("snapshot: {0}")]
    Snapshot(String),
}

/// State shared by the engine's threads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub vol: Arc<Volume>,
    pub store: ObjectStore,
    pub target: TierTarget,
    pub cfg: TierConfig,
    pub stats: Arc<TierStats>,
    pub reader: Arc<TierReader>,
    pub next_obj: AtomicU64,
    /// Objects being uploaded: never collected.
    pub inflight: Mutex<BTreeSet<u64>>,
    /// Objects the snapshots kept in the bucket reference.
    pub snapshot_refs: Mutex<BTreeSet<u64>>,
    pub next_snapshot: AtomicU64,
    /// One pass (tier-out, collection, snapshot) at a time.
    pub pass_lock: Mutex<()>,
    pub limiter: out::Limiter,
    pub yielder: out::Yield,
    /// Something was tiered or removed since the last snapshot.
    pub dirty: std::sync::atomic::AtomicBool,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    pub fn new_object(&self) -> u64 {
        let o = self.next_obj.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut f) = self.inflight.lock() {
            f.insert(o);
        }
        o
    }
    pub fn done_object(&self, o: u64) {
        if let Ok(mut f) = self.inflight.lock() {
            f.remove(&o);
        }
    }
}

/// A running tier engine. Dropping it stops the background thread (after
/// a last snapshot); [`Tier::stop`] does the same and reports.
#[derive(Debug)]
pub struct Tier {
    sh: Arc<Shared>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Tier {
    /// Connect to the store, learn what is in the bucket, install the
    /// read-through source on `vol`, and (when `background`) start the
    /// policy thread.
    pub fn start(
        vol: Arc<Volume>,
        target: TierTarget,
        store: ObjectStore,
        cfg: TierConfig,
        background: bool,
    ) -> Result<Tier, TierError> {
        if !(0.0..=1.0).contains(&cfg.low_watermark)
            || !(0.0..=1.0).contains(&cfg.high_watermark)
            || cfg.low_watermark > cfg.high_watermark
        {
            return Err(TierError::Config(format!(
                "watermarks must satisfy 0 <= low ({}) <= high ({}) <= 1",
                cfg.low_watermark, cfg.high_watermark
            )));
        }
        if cfg.part_bytes < 5 << 20 {
            return Err(TierError::Config(
                "the part size must be at least 5 MiB (the S3 minimum)".into(),
            ));
        }
        let stats = Arc::new(TierStats::default());
        let reader = TierReader::new(
            store.clone(),
            target.clone(),
            cfg.window_bytes,
            cfg.cache_bytes,
            cfg.readahead_windows,
            stats.clone(),
        );
        // What is in the bucket: object sizes for the reader, and the
        // highest object number, so a new object never reuses one (an
        // orphan's number included: it may be in a snapshot).
        let listed = store.list(&target.key("seg/"))?;
        let mut max_obj = 0u64;
        for o in &listed {
            if let Some(n) = target.rel(&o.key).and_then(parse_object_key_rel) {
                reader.note_size(n, o.size);
                max_obj = max_obj.max(n);
            }
        }
        max_obj = max_obj.max(vol.remote_objects().keys().copied().max().unwrap_or(0));
        vol.set_remote_source(reader.clone());
        let limiter = out::Limiter::new(cfg.bandwidth_bytes_per_s);
        let yielder = out::Yield::new(cfg.busy_bandwidth_bytes_per_s);
        let sh = Arc::new(Shared {
            vol,
            store,
            target,
            cfg,
            stats,
            reader,
            next_obj: AtomicU64::new(max_obj + 1),
            inflight: Mutex::default(),
            snapshot_refs: Mutex::default(),
            next_snapshot: AtomicU64::new(1),
            pass_lock: Mutex::new(()),
            limiter,
            yielder,
            dirty: false.into(),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        gc::load_snapshot_refs(&sh)?;
        tracing::info!(
            "tier {}: {} objects in the bucket, next object {}",
            sh.target,
            listed.len(),
            max_obj + 1
        );
        let worker = if background {
            let s = sh.clone();
            Some(
                std::thread::Builder::new()
                    .name("tier".into())
                    .spawn(move || worker(s))
                    .map_err(|e| TierError::Config(format!("cannot start the tier thread: {e}")))?,
            )
        } else {
            None
        };
        Ok(Tier { sh, worker })
    }

    pub fn stats(&self) -> TierStatsSnapshot {
        self.sh.stats.snapshot()
    }
    /// The live counters (for a metrics callback that outlives a borrow).
    pub fn stats_handle(&self) -> Arc<TierStats> {
        self.sh.stats.clone()
    }
    pub fn target(&self) -> &TierTarget {
        &self.sh.target
    }
    pub fn reader(&self) -> Arc<TierReader> {
        self.sh.reader.clone()
    }

    /// One policy pass now. `all`: tier out every file with bytes in PM,
    /// whatever the policy says.
    pub fn tier_out_now(&self, all: bool) -> Result<PassReport, TierError> {
        let _g = self.sh.pass_lock.lock().map_err(|_| poisoned())?;
        out::pass(&self.sh, all)
    }

    /// Bring files read often through the tier back into PM now (the
    /// policy thread does it after every pass).
    pub fn promote_now(&self) -> Result<(), TierError> {
        let _g = self.sh.pass_lock.lock().map_err(|_| poisoned())?;
        out::promote(&self.sh)
    }

    /// Upload a metadata snapshot now; returns its sequence number.
    pub fn snapshot_now(&self) -> Result<u64, TierError> {
        let _g = self.sh.pass_lock.lock().map_err(|_| poisoned())?;
        gc::snapshot(&self.sh)
    }

    /// Delete unreferenced objects and compact mostly dead ones now.
    pub fn collect_now(&self) -> Result<GcReport, TierError> {
        let _g = self.sh.pass_lock.lock().map_err(|_| poisoned())?;
        gc::collect(&self.sh)
    }

    /// Stop the background thread (it uploads a last snapshot when
    /// anything changed).
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let Ok(mut s) = self.sh.stop.lock() {
            *s = true;
        }
        self.sh.wake.notify_all();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Drop for Tier {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

fn poisoned() -> TierError {
    TierError::Config("a tier lock was poisoned by a panic".into())
}

fn worker(sh: Arc<Shared>) {
    crate::priority::background_priority();
    let mut last_snapshot = Instant::now();
    loop {
        {
            let Ok(g) = sh.stop.lock() else { return };
            let Ok((g, _)) = sh.wake.wait_timeout_while(g, sh.cfg.scan_interval, |s| !*s) else {
                return;
            };
            if *g {
                break;
            }
        }
        let Ok(_g) = sh.pass_lock.lock() else { return };
        if let Err(e) = out::pass(&sh, false) {
            tracing::warn!("tier pass: {e}");
        }
        if let Err(e) = out::promote(&sh) {
            tracing::warn!("tier promotion: {e}");
        }
        if sh.dirty.load(Ordering::Relaxed) && last_snapshot.elapsed() >= sh.cfg.snapshot_interval {
            match gc::snapshot(&sh) {
                Ok(_) => last_snapshot = Instant::now(),
                Err(e) => tracing::warn!("tier snapshot: {e}"),
            }
            if let Err(e) = gc::collect(&sh) {
                tracing::warn!("tier collection: {e}");
            }
        }
    }
    // A last snapshot, so a clean stop loses nothing it tiered.
    if sh.dirty.load(Ordering::Relaxed) {
        if let Ok(_g) = sh.pass_lock.lock() {
            if let Err(e) = gc::snapshot(&sh) {
                tracing::warn!("tier snapshot at stop: {e}");
            }
        }
    }
}
