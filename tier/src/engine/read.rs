//! Read-through: the [`RemoteSource`] the engine installs on the Volume.
//!
//! Objects are read in aligned windows (8 MiB by default) with ranged GETs
//! and kept in a small LRU cache, so a sequential read of a tiered file
//! costs one GET per window, not one per record; a miss also starts GETs
//! of the next windows in the background (read-ahead), so a reader rarely
//! waits for the store. Concurrent misses of one window share one GET.
//!
//! Nothing here checks bytes: the Volume checks every record's CRC32C on
//! what this returns (`Volume::fetch_rec`), the one trust boundary.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

use pktfs_fs::{RemoteBytes, RemoteSource};

use super::stats::TierStats;
use crate::s3::ObjectStore;
use crate::segment::object_key_rel;
use crate::target::TierTarget;

type Window = Arc<OnceLock<Result<Arc<Vec<u8>>, String>>>;

#[derive(Debug, Default)]
struct Cache {
    slots: HashMap<(u64, u64), Window>,
    /// Least recently used first.
    order: VecDeque<(u64, u64)>,
}

/// Fetches object windows for the Volume.
#[derive(Debug)]
pub struct TierReader {
    store: ObjectStore,
    target: TierTarget,
    window_bytes: u64,
    cache_windows: usize,
    readahead_windows: u64,
    cache: Mutex<Cache>,
    sizes: Mutex<HashMap<u64, u64>>,
    stats: Arc<TierStats>,
    /// Reads per file since the last policy pass (for promotion).
    reads: Mutex<HashMap<u64, u32>>,
    prefetch: Mutex<Option<SyncSender<(u64, u64)>>>,
    /// Buffers of windows that left the cache, for the next fetches (a
    /// fresh 8 MiB buffer costs page faults and zeroing every time).
    spare: Mutex<Vec<Vec<u8>>>,
}

/// Window buffers kept for reuse.
const SPARE_WINDOWS: usize = 4;

impl TierReader {
    pub fn new(
        store: ObjectStore,
        target: TierTarget,
        window_bytes: u64,
        cache_bytes: u64,
        readahead_windows: u64,
        stats: Arc<TierStats>,
    ) -> Arc<TierReader> {
        let r = Arc::new(TierReader {
            store,
            target,
            window_bytes: window_bytes.max(64 << 10),
            cache_windows: (cache_bytes / window_bytes.max(1)).max(2) as usize,
            readahead_windows,
            cache: Mutex::default(),
            sizes: Mutex::default(),
            stats,
            reads: Mutex::default(),
            prefetch: Mutex::new(None),
            spare: Mutex::default(),
        });
        if readahead_windows > 0 {
            // Read-ahead threads hold only a weak reference: the reader
            // (and the threads, once their channel closes) go away with
            // the engine.
            let (tx, rx) = sync_channel::<(u64, u64)>(64);
            let rx = Arc::new(Mutex::new(rx));
            // As many GETs in flight as windows read ahead: one stream from
            // the store is slower than several.
            for k in 0..readahead_windows.clamp(1, 8) {
                let weak = Arc::downgrade(&r);
                let rx = rx.clone();
                let _ = std::thread::Builder::new()
                    .name(format!("tier-readahead-{k}"))
                    .spawn(move || prefetch_loop(weak, rx));
            }
            if let Ok(mut p) = r.prefetch.lock() {
                *p = Some(tx);
            }
        }
        r
    }

    /// The store told us (upload) or we found (listing) an object's size.
    pub fn note_size(&self, obj: u64, len: u64) {
        if let Ok(mut s) = self.sizes.lock() {
            s.insert(obj, len);
        }
    }

    /// Forget an object (deleted).
    pub fn forget(&self, obj: u64) {
        if let Ok(mut s) = self.sizes.lock() {
            s.remove(&obj);
        }
        if let Ok(mut c) = self.cache.lock() {
            c.slots.retain(|(o, _), _| *o != obj);
            c.order.retain(|(o, _)| *o != obj);
        }
    }

    /// Known object sizes.
    pub fn sizes(&self) -> HashMap<u64, u64> {
        self.sizes.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Reads per file since the last call, and reset.
    pub fn take_reads(&self) -> HashMap<u64, u32> {
        self.reads
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    fn size_of(&self, obj: u64) -> Result<u64, String> {
        if let Some(s) = self.sizes.lock().ok().and_then(|s| s.get(&obj).copied()) {
            return Ok(s);
        }
        let key = self.target.key(&object_key_rel(obj));
        let info = self
            .store
            .head(&key)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("object {key} is missing from the store"))?;
        self.note_size(obj, info.size);
        Ok(info.size)
    }

    /// The slot of window `w` of `obj`, and whether it was cached.
    fn slot(&self, obj: u64, w: u64) -> (Window, bool) {
        let mut c = match self.cache.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = c.slots.get(&(obj, w)).cloned() {
            if let Some(pos) = c.order.iter().position(|k| *k == (obj, w)) {
                c.order.remove(pos);
            }
            c.order.push_back((obj, w));
            return (s, true);
        }
        while c.slots.len() >= self.cache_windows {
            match c.order.pop_front() {
                Some(k) => {
                    if let Some(w) = c.slots.remove(&k) {
                        self.recycle(w);
                    }
                }
                None => break,
            }
        }
        let s: Window = Arc::default();
        c.slots.insert((obj, w), s.clone());
        c.order.push_back((obj, w));
        (s, false)
    }

    /// Keep the buffer of a window that left the cache, when nobody else
    /// holds it (records handed out as ranges of it keep it alive instead).
    fn recycle(&self, w: Window) {
        let Ok(cell) = Arc::try_unwrap(w) else { return };
        let Some(Ok(bytes)) = cell.into_inner() else {
            return;
        };
        let Ok(buf) = Arc::try_unwrap(bytes) else {
            return;
        };
        if let Ok(mut s) = self.spare.lock() {
            if s.len() < SPARE_WINDOWS {
                s.push(buf);
            }
        }
    }

    /// Window `w` of `obj`, fetched once however many threads want it.
    fn window(&self, obj: u64, w: u64) -> Result<(Arc<Vec<u8>>, bool), String> {
        let (slot, cached) = self.slot(obj, w);
        let r = slot.get_or_init(|| {
            let size = self.size_of(obj)?;
            let start = w * self.window_bytes;
            if start >= size {
                return Err(format!(
                    "object {obj}: window at {start} is past its end {size}"
                ));
            }
            let len = self.window_bytes.min(size - start);
            let key = self.target.key(&object_key_rel(obj));
            let mut b = self
                .spare
                .lock()
                .ok()
                .and_then(|mut s| s.pop())
                .unwrap_or_default();
            self.store
                .get_range_into(&key, start, len, &mut b)
                .map_err(|e| e.to_string())?;
            TierStats::add(&self.stats.fetches, 1);
            TierStats::add(&self.stats.fetch_bytes, b.len() as u64);
            Ok(Arc::new(b))
        });
        match r {
            Ok(b) => Ok((b.clone(), cached)),
            Err(e) => {
                // A failed window is not kept: the next read tries again.
                let e = e.clone();
                if let Ok(mut c) = self.cache.lock() {
                    c.slots.remove(&(obj, w));
                    c.order.retain(|k| *k != (obj, w));
                }
                Err(e)
            }
        }
    }

    fn read_ahead(&self, obj: u64, w: u64) {
        let Ok(size) = self.size_of(obj) else { return };
        let last = size.saturating_sub(1) / self.window_bytes;
        let tx = self.prefetch.lock().ok().and_then(|p| p.clone());
        let Some(tx) = tx else { return };
        for n in w + 1..=(w + self.readahead_windows).min(last) {
            let known = self
                .cache
                .lock()
                .map(|c| c.slots.contains_key(&(obj, n)))
                .unwrap_or(true);
            if !known {
                // Full queue: skip; the reader will fetch it itself.
                let _ = tx.try_send((obj, n));
            }
        }
    }
}

fn prefetch_loop(weak: std::sync::Weak<TierReader>, rx: Arc<Mutex<Receiver<(u64, u64)>>>) {
    loop {
        let next = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok((obj, w)) = next else { return };
        let Some(r) = weak.upgrade() else { return };
        if let Err(e) = r.window(obj, w) {
            tracing::debug!("tier read-ahead of object {obj} window {w}: {e}");
        }
    }
}

impl RemoteSource for TierReader {
    fn note_read(&self, ino: u64) {
        if let Ok(mut r) = self.reads.lock() {
            *r.entry(ino).or_default() += 1;
        }
    }

    fn fetch(&self, ino: u64, obj: u64, off: u64, len: u32) -> Result<RemoteBytes, String> {
        self.note_read(ino);
        let end = off + len as u64;
        // Most records lie inside one window: hand out a range of it, no
        // copy. One that straddles a window edge (segments pack records
        // back to back) is pieced together.
        let mut pieced: Option<Vec<u8>> = None;
        let mut pos = off;
        let mut missed = None;
        while pos < end {
            let w = pos / self.window_bytes;
            let (bytes, cached) = self.window(obj, w).inspect_err(|_| {
                TierStats::add(&self.stats.fetch_errors, 1);
            })?;
            if cached {
                TierStats::add(&self.stats.cache_hits, 1);
            } else {
                missed = Some(w);
            }
            let wstart = w * self.window_bytes;
            let from = (pos - wstart) as usize;
            let to = ((end - wstart) as usize).min(bytes.len());
            if from >= to {
                return Err(format!(
                    "object {obj} ends at {} before byte {pos}",
                    wstart + bytes.len() as u64
                ));
            }
            if pos == off && wstart + to as u64 == end {
                self.read_ahead(obj, missed.unwrap_or(w));
                return RemoteBytes::range(bytes, from..to)
                    .ok_or_else(|| format!("object {obj}: window {w} is shorter than read"));
            }
            pieced
                .get_or_insert_with(|| Vec::with_capacity(len as usize))
                .extend_from_slice(&bytes[from..to]);
            pos = wstart + to as u64;
        }
        // Read ahead from every window this read touched last.
        self.read_ahead(obj, missed.unwrap_or((end - 1) / self.window_bytes));
        Ok(RemoteBytes::new(pieced.unwrap_or_default()))
    }
}
