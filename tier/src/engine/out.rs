//! Tier-out: choose files by policy, pack their records into segment
//! objects, upload, switch the records to remote ones.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pktfs_fs::{TierCandidate, TierOut};

use super::stats::TierStats;
use super::{Shared, TierError};
use crate::segment::{object_key_rel, SegmentBuilder};

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PassReport {
    pub files_chosen: u64,
    pub bytes_chosen: u64,
    pub files_tiered: u64,
    pub bytes_tiered: u64,
    pub objects: u64,
    pub errors: u64,
}

/// A token bucket over upload bytes (one second of burst).
#[derive(Debug)]
pub(crate) struct Limiter {
    rate: Option<u64>,
    state: Mutex<(f64, Instant)>,
}

impl Limiter {
    pub fn new(rate: Option<u64>) -> Limiter {
        Limiter {
            rate: rate.filter(|r| *r > 0),
            state: Mutex::new((rate.unwrap_or(0) as f64, Instant::now())),
        }
    }

    /// Wait until `n` bytes may go.
    pub fn acquire(&self, n: u64) {
        let Some(rate) = self.rate else { return };
        let wait = {
            let Ok(mut s) = self.state.lock() else { return };
            let now = Instant::now();
            let refill = now.duration_since(s.1).as_secs_f64() * rate as f64;
            s.0 = (s.0 + refill).min(rate as f64);
            s.1 = now;
            s.0 -= n as f64;
            if s.0 < 0.0 {
                Duration::from_secs_f64(-s.0 / rate as f64)
            } else {
                Duration::ZERO
            }
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// Tier-out that PM use does not force yields to clients that are
/// writing, as ZFS's scrub delays its I/O while the pool serves other I/O:
/// while the volume has handed out packet-buffer space within
/// [`IDLE_AFTER`], such uploads share one pipe of `rate` bytes a second;
/// the moment the clients pause, they go at full speed again. On a small
/// machine (where the object store may even share the cores) a full-speed
/// tier-out costs ingest more than half its rate; the age policy is in no
/// hurry, ingest is what a client waits for. Above the high watermark
/// nothing yields: there the choice is tier-out or 507.
#[derive(Debug)]
pub(crate) struct Yield {
    rate: Option<u64>,
    /// (payload bytes allocated when last looked, when that last moved,
    /// when the shared pipe is next free).
    state: Mutex<(u64, Option<Instant>, Instant)>,
}

/// The clients count as idle when they have not written for this long.
pub(crate) const IDLE_AFTER: Duration = Duration::from_millis(250);

impl Yield {
    pub fn new(rate: Option<u64>) -> Yield {
        Yield {
            rate: rate.filter(|r| *r > 0),
            state: Mutex::new((0, None, Instant::now())),
        }
    }

    /// Whether clients wrote within [`IDLE_AFTER`].
    fn busy(&self, vol: &pktfs_fs::Volume) -> bool {
        let now_bytes = vol.payload_allocated_bytes();
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        if s.1.is_none() {
            // The first look: what was written before does not count.
            *s = (now_bytes, Some(Instant::now() - IDLE_AFTER), s.2);
        } else if now_bytes != s.0 {
            s.0 = now_bytes;
            s.1 = Some(Instant::now());
        }
        s.1.is_some_and(|t| t.elapsed() < IDLE_AFTER)
    }

    /// Before `n` bytes of tier-out go: while clients write, wait for
    /// this upload's turn in the shared pipe; return early if they stop.
    /// Returns how long it waited.
    pub fn wait(&self, vol: &pktfs_fs::Volume, n: u64) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let t0 = Instant::now();
        if !self.busy(vol) {
            return Duration::ZERO;
        }
        let until = {
            let Ok(mut s) = self.state.lock() else {
                return Duration::ZERO;
            };
            let start = s.2.max(t0);
            s.2 = start + Duration::from_secs_f64(n as f64 / rate as f64);
            s.2
        };
        loop {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
            if !self.busy(vol) {
                // Idle again: what this upload still owed is forgiven.
                if let Ok(mut s) = self.state.lock() {
                    s.2 = Instant::now();
                }
                break;
            }
        }
        t0.elapsed()
    }
}

/// Which candidates the policy picks now, and whether PM use forces it
/// (above the high watermark, or `all`): then nothing yields to clients.
fn choose(sh: &Shared, mut c: Vec<TierCandidate>, all: bool) -> (Vec<TierCandidate>, bool) {
    if all {
        return (c, true);
    }
    let now = pktfs_now_ns();
    let mut chosen = Vec::new();
    if let Some(age) = sh.cfg.age {
        let cutoff = now - age.as_nanos() as i64;
        let (old, young): (Vec<_>, Vec<_>) = c.into_iter().partition(|f| f.mtime_ns <= cutoff);
        chosen = old;
        c = young;
    }
    let st = sh.vol.statfs();
    let total = st.blocks.max(1) as f64;
    let bs = sh.vol.geometry().buffer_size_bytes as u64;
    let chosen_bytes: u64 = chosen.iter().map(|f| f.local_bytes).sum();
    let used = (st.blocks - st.blocks_free) as f64 - chosen_bytes as f64 / bs as f64;
    let urgent = used / total > sh.cfg.high_watermark;
    if urgent {
        let mut need = (used - sh.cfg.low_watermark * total) * bs as f64;
        // Least recently used first: the later of access and change.
        c.sort_by_key(|f| f.atime_ns.max(f.mtime_ns));
        for f in c {
            if need <= 0.0 {
                break;
            }
            need -= f.local_bytes as f64;
            chosen.push(f);
        }
    }
    (chosen, urgent)
}

fn pktfs_now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Uploads to do.
enum Job<'v> {
    /// Small files packed into one segment.
    Segment(Vec<TierOut<'v>>),
    /// One large file, its own object, in parts.
    Large(TierOut<'v>),
}

/// One policy pass.
pub(crate) fn pass(sh: &Shared, all: bool) -> Result<PassReport, TierError> {
    TierStats::add(&sh.stats.passes, 1);
    let (chosen, urgent) = choose(sh, sh.vol.tier_candidates(), all);
    let mut rep = PassReport {
        files_chosen: chosen.len() as u64,
        bytes_chosen: chosen.iter().map(|f| f.local_bytes).sum(),
        ..Default::default()
    };
    sh.stats
        .backlog_files
        .store(rep.files_chosen, Ordering::Relaxed);
    sh.stats
        .backlog_bytes
        .store(rep.bytes_chosen, Ordering::Relaxed);
    if chosen.is_empty() {
        return Ok(rep);
    }
    let vol = &*sh.vol;
    let mut jobs: VecDeque<Job<'_>> = VecDeque::new();
    let mut group: Vec<TierOut<'_>> = Vec::new();
    let mut group_bytes = 0u64;
    for f in &chosen {
        let out = match vol.tier_begin(f.ino, u64::MAX) {
            Ok(o) if !o.is_empty() => o,
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!("tier: inode {} skipped: {e}", f.ino);
                continue;
            }
        };
        if out.len() >= sh.cfg.large_file_bytes {
            jobs.push_back(Job::Large(out));
            continue;
        }
        group_bytes += out.len();
        group.push(out);
        if group_bytes >= sh.cfg.segment_bytes {
            jobs.push_back(Job::Segment(std::mem::take(&mut group)));
            group_bytes = 0;
        }
    }
    if !group.is_empty() {
        jobs.push_back(Job::Segment(group));
    }
    let queue = Mutex::new(jobs);
    let totals = Mutex::new(rep);
    std::thread::scope(|s| {
        for _ in 0..sh.cfg.concurrency.max(1) {
            s.spawn(|| loop {
                crate::priority::background_priority();
                let job = match queue.lock() {
                    Ok(mut q) => q.pop_front(),
                    Err(_) => None,
                };
                let Some(job) = job else { break };
                let r = match job {
                    Job::Segment(outs) => upload_segment(sh, outs, urgent),
                    Job::Large(out) => upload_large(sh, out, urgent),
                };
                if let Ok(mut t) = totals.lock() {
                    match r {
                        Ok((files, bytes)) => {
                            t.files_tiered += files;
                            t.bytes_tiered += bytes;
                            t.objects += 1;
                        }
                        Err(e) => {
                            t.errors += 1;
                            TierStats::add(&sh.stats.upload_errors, 1);
                            tracing::warn!("tier upload failed (the files stay in PM): {e}");
                        }
                    }
                }
            });
        }
    });
    rep = totals.into_inner().unwrap_or(rep);
    sh.stats.backlog_files.store(0, Ordering::Relaxed);
    sh.stats.backlog_bytes.store(0, Ordering::Relaxed);
    if rep.files_tiered > 0 {
        sh.dirty.store(true, Ordering::Relaxed);
    }
    Ok(rep)
}

/// Copy a file's held bytes (each checked) into `body`, noting where each
/// extent went. A damaged extent: the file is left out (it stays in PM).
fn pack(
    out: &TierOut<'_>,
    seg: &mut SegmentBuilder,
    body: &mut Vec<u8>,
) -> Result<Vec<(u64, u64)>, pktfs_fs::FsError> {
    let mark = (body.len(), seg.payload_bytes());
    let mut placed = Vec::with_capacity(out.extents().len());
    let mut trial = Vec::new();
    for (k, e) in out.extents().iter().enumerate() {
        let b = out.bytes(k)?;
        trial.push((b, e));
    }
    debug_assert_eq!(mark.0 as u64, mark.1);
    for (b, e) in trial {
        let at = seg.add(e.len, e.crc32c, out.ino(), e.file_off);
        body.extend_from_slice(b);
        placed.push((seg.object(), at));
    }
    Ok(placed)
}

/// Switch the uploaded files; returns (files, bytes) switched.
fn switch_all(sh: &Shared, done: Vec<(TierOut<'_>, Vec<(u64, u64)>)>) -> (u64, u64) {
    let (mut files, mut bytes) = (0u64, 0u64);
    for (out, placed) in done {
        let ino = out.ino();
        match sh.vol.tier_switch(out, &placed) {
            Ok(r) => {
                if r.records > 0 {
                    files += 1;
                }
                bytes += r.bytes;
                TierStats::add(&sh.stats.records_tiered, r.records);
            }
            Err(e) => tracing::warn!("tier: switching inode {ino}: {e}"),
        }
    }
    TierStats::add(&sh.stats.files_tiered, files);
    TierStats::add(&sh.stats.bytes_tiered, bytes);
    (files, bytes)
}

/// Before `n` bytes are read out of PM and uploaded: yield to writing
/// clients unless PM use forces this tier-out.
fn pace(sh: &Shared, n: u64, urgent: bool) {
    if urgent {
        return;
    }
    let waited = sh.yielder.wait(&sh.vol, n);
    TierStats::add(&sh.stats.yielded_ms, waited.as_millis() as u64);
}

fn upload_segment(
    sh: &Shared,
    outs: Vec<TierOut<'_>>,
    urgent: bool,
) -> Result<(u64, u64), TierError> {
    let obj = sh.new_object();
    let r = (|| {
        let mut seg = SegmentBuilder::new(obj);
        let cap: u64 = outs.iter().map(|o| o.len()).sum();
        pace(sh, cap, urgent);
        let mut body = Vec::with_capacity(cap as usize + 4096);
        let mut done = Vec::with_capacity(outs.len());
        for out in outs {
            match pack(&out, &mut seg, &mut body) {
                Ok(p) => done.push((out, p)),
                Err(e) => tracing::error!("tier: inode {} left in PM: {e}", out.ino()),
            }
        }
        if done.is_empty() {
            return Ok((0, 0));
        }
        let (tail, crc) = seg.finish();
        body.extend_from_slice(&tail);
        let len = body.len() as u64;
        sh.limiter.acquire(len);
        let key = sh.target.key(&object_key_rel(obj));
        sh.store.put(&key, body, crc)?;
        sh.reader.note_size(obj, len);
        TierStats::add(&sh.stats.objects_uploaded, 1);
        TierStats::add(&sh.stats.bytes_uploaded, len);
        // The store confirmed the object: now, and only now, switch.
        Ok(switch_all(sh, done))
    })();
    sh.done_object(obj);
    r
}

fn upload_large(sh: &Shared, out: TierOut<'_>, urgent: bool) -> Result<(u64, u64), TierError> {
    let obj = sh.new_object();
    let r = (|| {
        let key = sh.target.key(&object_key_rel(obj));
        let mut seg = SegmentBuilder::new(obj);
        let mut placed = Vec::with_capacity(out.extents().len());
        let mut up = sh.store.begin_multipart(&key)?;
        let mut part = Vec::with_capacity(sh.cfg.part_bytes as usize + (256 << 10));
        let mut part_crc = 0u32;
        let mut number = 1i32;
        let mut total = 0u64;
        let n = out.extents().len();
        let res: Result<(), TierError> = (|| {
            for (k, e) in out.extents().iter().enumerate() {
                if part.is_empty() {
                    pace(sh, sh.cfg.part_bytes.min(out.len() - total), urgent);
                }
                let b = out.bytes(k)?;
                let at = seg.add(e.len, e.crc32c, out.ino(), e.file_off);
                placed.push((obj, at));
                part.extend_from_slice(b);
                part_crc = crate::segment::combine(part_crc, e.crc32c, e.len as u64);
                let last = k + 1 == n;
                if last {
                    let (tail, _) = seg.finish();
                    part_crc = crate::segment::combine(
                        part_crc,
                        pktfs_layout::crc32c(&tail),
                        tail.len() as u64,
                    );
                    part.extend_from_slice(&tail);
                }
                if last || part.len() as u64 >= sh.cfg.part_bytes {
                    let len = part.len() as u64;
                    sh.limiter.acquire(len);
                    up.part(number, std::mem::take(&mut part), part_crc)?;
                    total += len;
                    number += 1;
                    part_crc = 0;
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            up.abort();
            return Err(e);
        }
        up.complete()?;
        sh.reader.note_size(obj, total);
        TierStats::add(&sh.stats.objects_uploaded, 1);
        TierStats::add(&sh.stats.bytes_uploaded, total);
        Ok(switch_all(sh, vec![(out, placed)]))
    })();
    sh.done_object(obj);
    r
}

/// Bring files read often through the tier back into PM, while PM use
/// stays under the low watermark.
pub(crate) fn promote(sh: &Shared) -> Result<(), TierError> {
    let reads = sh.reader.take_reads();
    let Some(min) = sh.cfg.promote_after_reads else {
        return Ok(());
    };
    let bs = sh.vol.geometry().buffer_size_bytes as u64;
    let mut hot: Vec<(u64, u32)> = reads.into_iter().filter(|(_, n)| *n >= min).collect();
    hot.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (ino, _) in hot {
        let st = sh.vol.statfs();
        let used = (st.blocks - st.blocks_free) as f64 / st.blocks.max(1) as f64;
        if used >= sh.cfg.low_watermark {
            break;
        }
        let room = ((sh.cfg.low_watermark - used) * st.blocks as f64) as u64 * bs;
        match sh.vol.tier_recall(ino, room) {
            Ok(n) if n > 0 => {
                TierStats::add(&sh.stats.recalled_files, 1);
                TierStats::add(&sh.stats.recalled_bytes, n);
                sh.dirty.store(true, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("tier: recall of inode {ino}: {e}"),
        }
    }
    Ok(())
}
