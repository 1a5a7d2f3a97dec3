//! Crash-state exploration on top of the recording backend.
//!
//! A workload runs on a `Pm::recording` image with `pm.mark(k)` before
//! operation `k`; its log of stores, flushes and fences is then replayed
//! here. The persistence model is the recording backend's (a flush
//! schedules a line's current contents, a fence makes scheduled lines
//! durable, any line written since it was last made durable may also reach
//! the media on its own), but the crash instants are Chipmunk's: **just
//! before every fence** (any subset of the lines written since the last
//! fence may be on the media: nothing orders them yet) and just after it
//! (the lines written and never flushed). The walk over those instants is
//! the recording backend's (`pktfs_fs::media::recording::walk`); the instants
//! before a fence are where a missing fence between a commit record and
//! what it commits shows.
//!
//! For each crash instant we build: the durable lines only; plus every
//! subset of at most 2 in-flight lines (when there are few), or every
//! subset of at most 2 in-flight *metadata* lines with the in-flight
//! payload lines all absent or all present (when a large write makes them
//! many); all in-flight lines; and torn variants (every other line).
//! Images are deduplicated by a hash of the lines that differ from the
//! workload's starting image, so identical states reached from different
//! workloads over the same seed image are checked once.
//!
//! Each image is then checked: fsck `-n` finds no error recovery cannot fix;
//! `Volume::open_pm` succeeds; `check_invariants` holds; the tree equals the
//! model before or after the operation in flight; a usability pass (create,
//! write, rename, delete and mkdir/rmdir in every directory) succeeds; and
//! fsck reports the image clean afterwards.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use pktfs_fs::media::recording::Event;
use pktfs_fs::media::Pm;
use pktfs_fs::{FileType, RenameFlags, Volume};

use super::{apply_vol, dump, show_result, Model, Op, OpResult, Tree};

const LINE: u64 = 64;

/// One crash instant, and the walk over every instant of a log (the start,
/// just before and just after every fence): the recording backend's own
/// (`pktfs_fs::media::recording`), so the harness and the netpath tests see
/// the same crash points.
pub use pktfs_fs::media::recording::{walk as for_each_point, CrashPoint as Point};

/// Which in-flight subsets to build at a point.
pub fn subsets(p: &Point<'_>, buffer_offset: u64, small: usize) -> Vec<Vec<usize>> {
    let n = p.inflight.len();
    let mut out: Vec<Vec<usize>> = vec![Vec::new()];
    if n == 0 {
        return out;
    }
    out.push((0..n).collect());
    out.push((0..n).filter(|i| i % 2 == 0).collect());
    out.push((0..n).filter(|i| i % 2 == 1).collect());
    if n <= small {
        for a in 0..n {
            out.push(vec![a]);
            for b in a + 1..n {
                out.push(vec![a, b]);
            }
        }
    } else {
        let first_payload_line = buffer_offset / LINE;
        let (meta, pay): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| p.inflight[i].0 < first_payload_line);
        let with = |mut v: Vec<usize>, extra: &[usize]| {
            v.extend_from_slice(extra);
            v.sort_unstable();
            v
        };
        out.push(pay.clone());
        out.push(meta.clone());
        for (x, &a) in meta.iter().enumerate() {
            out.push(vec![a]);
            out.push(with(vec![a], &pay));
            for &b in &meta[x + 1..] {
                out.push(vec![a, b]);
                out.push(with(vec![a, b], &pay));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Workloads.

/// A recorded run of `ops` from `base`, with the model's tree before and
/// after every operation.
#[derive(Debug)]
pub struct Workload {
    pub name: String,
    pub base: Arc<Vec<u8>>,
    pub ops: Vec<Op>,
    pub results: Vec<OpResult>,
    /// `trees[k]`: before op `k`; `trees[ops.len()]`: at the end.
    pub trees: Vec<Tree>,
    pub events: Vec<Event>,
    pub buffer_offset: u64,
}

/// Run `ops` on a recording copy of `base` (whose model is `model`), mark
/// each operation, check every result against the model, and keep the log.
pub fn record(
    name: &str,
    base: Arc<Vec<u8>>,
    model: &Model,
    ops: &[Op],
) -> Result<Workload, String> {
    let v = Volume::open_pm(Pm::recording(base.to_vec()), false)
        .map_err(|e| format!("{name}: open: {e}"))?;
    super::tier::use_store(&v);
    let mut m = model.clone();
    let mut trees = vec![m.tree()];
    let mut results = Vec::new();
    for (k, op) in ops.iter().enumerate() {
        v.pm().mark(k as u64);
        let got = apply_vol(&v, op);
        let mut after = m.clone();
        let want = after.apply(op);
        if got == Err(libc::ENOSPC) {
            // The model cannot predict space; the operation must then have
            // changed nothing.
        } else if got != want {
            return Err(format!(
                "{name}: op {k} {op}: volume {} but the model says {}",
                show_result(&got),
                show_result(&want)
            ));
        } else {
            m = after;
        }
        results.push(got);
        trees.push(m.tree());
    }
    v.pm().mark(ops.len() as u64);
    v.check_invariants()
        .map_err(|e| format!("{name}: invariants after the run: {e}"))?;
    let t = dump(&v)?;
    if &t != trees.last().expect("tree") {
        return Err(format!(
            "{name}: live tree differs from the model:\n{}",
            t.diff(trees.last().expect("tree"), 10)
        ));
    }
    let log = v.pm().crash_log().ok_or("not a recording Pm")?;
    let buffer_offset = v.geometry().buffer_offset;
    drop(v);
    Ok(Workload {
        name: name.into(),
        base,
        ops: ops.to_vec(),
        results,
        trees,
        events: log.events,
        buffer_offset,
    })
}

/// Record any workload, not only [`Op`]s (netpath receives over sockets,
/// uploads through the HTTP server, ...): `run` gets the Volume and a
/// `step(k)` to call before its `k`-th step (it marks the log); `trees[k]`
/// is the tree expected before step `k` and `trees[n]` the final one. The
/// explorer then checks every crash state against "before or after the
/// step in flight" as for [`record`].
pub fn record_custom(
    name: &str,
    base: Arc<Vec<u8>>,
    trees: Vec<Tree>,
    run: impl FnOnce(&Volume, &dyn Fn(u64)) -> Result<(), String>,
) -> Result<Workload, String> {
    record_shared(name, base, trees, |v, step| run(v, step))
}

/// [`record_custom`] with the Volume shared (`Arc`), for a workload that
/// hands it to a server (netpath's `Services` take an `Arc<Volume>`);
/// `run` must have stopped what it started with the Volume when it returns.
pub fn record_shared(
    name: &str,
    base: Arc<Vec<u8>>,
    trees: Vec<Tree>,
    run: impl FnOnce(&Arc<Volume>, &dyn Fn(u64)) -> Result<(), String>,
) -> Result<Workload, String> {
    let v = Arc::new(
        Volume::open_pm(Pm::recording(base.to_vec()), false)
            .map_err(|e| format!("{name}: open: {e}"))?,
    );
    super::tier::use_store(&v);
    let n = trees.len().checked_sub(1).ok_or("no trees")?;
    run(&v, &|k| v.pm().mark(k))?;
    v.pm().mark(n as u64);
    v.check_invariants()
        .map_err(|e| format!("{name}: invariants after the run: {e}"))?;
    let t = dump(&v)?;
    if &t != trees.last().expect("tree") {
        return Err(format!(
            "{name}: live tree differs from the expected one:\n{}",
            t.diff(trees.last().expect("tree"), 10)
        ));
    }
    let log = v.pm().crash_log().ok_or("not a recording Pm")?;
    let buffer_offset = v.geometry().buffer_offset;
    drop(v);
    Ok(Workload {
        name: name.into(),
        base,
        ops: Vec::new(),
        results: Vec::new(),
        trees,
        events: log.events,
        buffer_offset,
    })
}

// ---------------------------------------------------------------------------
// Checking images.

/// Counters for the suite's report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub workloads: u64,
    pub ops: u64,
    pub points: u64,
    pub images_built: u64,
    pub images_checked: u64,
    pub matched_before: u64,
    pub matched_after: u64,
    pub failures: Vec<String>,
    pub secs: f64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.workloads += o.workloads;
        self.ops += o.ops;
        self.points += o.points;
        self.images_built += o.images_built;
        self.images_checked += o.images_checked;
        self.matched_before += o.matched_before;
        self.matched_after += o.matched_after;
        self.failures.extend(o.failures.iter().cloned());
        self.secs += o.secs;
    }
    pub fn summary(&self, what: &str) -> String {
        format!(
            "{what}: {} workloads, {} ops, {} crash points, {} images built, {} distinct crash states checked \
             ({} = before the op in flight, {} = after), {} failures, {:.1} s",
            self.workloads,
            self.ops,
            self.points,
            self.images_built,
            self.images_checked,
            self.matched_before,
            self.matched_after,
            self.failures.len(),
            self.secs
        )
    }
}

/// How much to explore.
#[derive(Clone, Debug)]
pub struct Explore {
    /// Build every subset of at most 2 in-flight lines when there are at
    /// most this many; otherwise only metadata subsets.
    pub small: usize,
    /// Only points whose in-flight op is at least this (pairs: skip op 0's
    /// points, already covered by the single-op run).
    pub from_op: u64,
    /// Run the usability pass and the final fsck on every image.
    pub usability: bool,
    /// Stop collecting after this many failures.
    pub max_failures: usize,
}

impl Default for Explore {
    fn default() -> Explore {
        Explore {
            small: 16,
            from_op: 0,
            usability: true,
            max_failures: 20,
        }
    }
}

/// Checks images, deduplicating across calls (for workloads sharing a base).
#[derive(Debug, Default)]
pub struct Explorer {
    pub seen: HashSet<u64>,
    pub stats: Stats,
    pub cfg: Explore,
}

impl Explorer {
    pub fn new(cfg: Explore) -> Explorer {
        Explorer {
            seen: HashSet::new(),
            stats: Stats::default(),
            cfg,
        }
    }

    /// Every crash state of `w` (from `cfg.from_op` on).
    pub fn explore(&mut self, w: &Workload) {
        let t0 = Instant::now();
        self.stats.workloads += 1;
        self.stats.ops += (w.trees.len() - 1) as u64;
        let n = (w.trees.len() - 1) as u64;
        let cfg = self.cfg.clone();
        let mut stats = std::mem::take(&mut self.stats);
        let seen = &mut self.seen;
        for_each_point(&w.base, &w.events, |p| {
            let k = p.last_mark.map(|m| m.min(n));
            if k.unwrap_or(0) < cfg.from_op {
                return true;
            }
            stats.points += 1;
            // Allowed states: before and after the op in flight.
            let allowed: Vec<(usize, &Tree)> = match k {
                None => vec![(0, &w.trees[0])],
                Some(k) if k >= n => vec![(n as usize, &w.trees[n as usize])],
                Some(k) => vec![
                    (k as usize, &w.trees[k as usize]),
                    (k as usize + 1, &w.trees[k as usize + 1]),
                ],
            };
            for chosen in subsets(p, w.buffer_offset, cfg.small) {
                stats.images_built += 1;
                if !seen.insert(p.key(&chosen)) {
                    continue;
                }
                stats.images_checked += 1;
                let img = p.image_with(&chosen);
                match check_image(img, &allowed, cfg.usability) {
                    Ok(which) => {
                        if allowed.len() == 2
                            && which == allowed[1].0
                            && allowed[0].1 != allowed[1].1
                        {
                            stats.matched_after += 1;
                        } else {
                            stats.matched_before += 1;
                        }
                    }
                    Err(e) => {
                        let op = k
                            .and_then(|k| w.ops.get(k as usize))
                            .map(|o| o.to_string())
                            .unwrap_or("-".into());
                        let lines: Vec<u64> =
                            chosen.iter().map(|&i| p.inflight[i].0 * LINE).collect();
                        stats.failures.push(format!(
                            "{}: op {:?} ({op}), {} fence {}, in-flight lines {} of {}: image offsets {:x?}\n  ops: {}\n  {e}",
                            w.name,
                            k,
                            if p.pre { "before" } else { "after" },
                            if p.pre { p.fence + 1 } else { p.fence },
                            chosen.len(),
                            p.inflight.len(),
                            lines,
                            w.ops.iter().map(|o| o.to_string()).collect::<Vec<_>>().join("; "),
                        ));
                        if stats.failures.len() >= cfg.max_failures {
                            return false;
                        }
                        // One failure per point is enough to understand it.
                        return true;
                    }
                }
            }
            true
        });
        stats.secs += t0.elapsed().as_secs_f64();
        self.stats = stats;
    }
}

/// Check one crash image: returns which allowed state (its index) it equals.
pub fn check_image(
    img: Vec<u8>,
    allowed: &[(usize, &Tree)],
    usability: bool,
) -> Result<usize, String> {
    let mut pm = Pm::from_bytes(img);
    let rep = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    let bad = rep.errors_beyond_recovery();
    let fsck_failed = !bad.is_empty() || rep.operational_error.is_some();
    let mut v = Volume::open_pm(pm, false)
        .map_err(|e| format!("recovery failed: {e}\n  fsck -n said: {}", rep.to_text()))?;
    super::tier::use_store(&v);
    if fsck_failed {
        return Err(format!(
            "fsck -n before recovery (recovery itself succeeded): {}",
            rep.to_text()
        ));
    }
    v.check_invariants()
        .map_err(|e| format!("invariants after recovery: {e}"))?;
    let t = dump(&v).map_err(|e| format!("dump after recovery: {e}"))?;
    let Some(&(which, _)) = allowed.iter().find(|(_, a)| **a == t) else {
        let mut msg = String::from("recovered tree is neither state allowed:");
        for (k, a) in allowed {
            msg.push_str(&format!(
                "\n vs state {k} (recovered = left):\n{}",
                t.diff(a, 8)
            ));
        }
        return Err(msg);
    };
    if usability {
        usability_pass(&v, &t)?;
        v.check_invariants()
            .map_err(|e| format!("invariants after the usability pass: {e}"))?;
        let t2 = dump(&v)?;
        if t2 != t {
            return Err(format!("usability pass left changes:\n{}", t2.diff(&t, 8)));
        }
        let img = v.snapshot();
        drop(v);
        let rep = pktfs_fsck::check(&mut Pm::from_bytes(img), &pktfs_fsck::Options::check());
        if !rep.clean() {
            return Err(format!(
                "fsck after recovery and the usability pass is not clean: {}",
                rep.to_text()
            ));
        }
    }
    Ok(which)
}

/// Create, write, read, rename, delete a file and make/remove a directory
/// in every directory; rename across two directories. Leaves the tree as
/// it found it.
pub fn usability_pass(v: &Volume, t: &Tree) -> Result<(), String> {
    let dirs: Vec<&String> =
        t.0.iter()
            .filter(|(_, e)| e.kind == FileType::Directory)
            .map(|(p, _)| p)
            .collect();
    let full = |v: &Volume| {
        let s = v.statfs();
        s.blocks_free < 8 || s.records_free < 16 || s.files_free < 4
    };
    let mut inos = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let dino = super::vresolve(v, d).map_err(|e| format!("usability: resolve {d}: {e}"))?;
        inos.push(dino);
        let name = format!("zz.use.{i}");
        let f = match v.create(dino, name.as_bytes(), 0o644, 0, 0) {
            Ok(a) => a,
            Err(e) if e.errno() == libc::ENOSPC && full(v) => continue,
            Err(e) => return Err(format!("usability: create in {d}: {e}")),
        };
        let data = super::pattern(i as u8, 0, 3000);
        match v.write(f.ino, 0, &data) {
            Ok(_) => {
                let back = v
                    .read(f.ino, 0, 10_000)
                    .map_err(|e| format!("usability: read in {d}: {e}"))?;
                if back != data {
                    return Err(format!("usability: {d}/{name} reads back wrong"));
                }
            }
            Err(e) if e.errno() == libc::ENOSPC && full(v) => {}
            Err(e) => return Err(format!("usability: write in {d}: {e}")),
        }
        let name2 = format!("zz.use.{i}.renamed");
        match v.rename(
            dino,
            name.as_bytes(),
            dino,
            name2.as_bytes(),
            RenameFlags::default(),
        ) {
            Ok(()) => v
                .unlink(dino, name2.as_bytes())
                .map_err(|e| format!("usability: unlink in {d}: {e}"))?,
            Err(e) if e.errno() == libc::ENOSPC && full(v) => v
                .unlink(dino, name.as_bytes())
                .map_err(|e| format!("usability: unlink in {d}: {e}"))?,
            Err(e) => return Err(format!("usability: rename in {d}: {e}")),
        }
        match v.mkdir(dino, b"zz.use.dir", 0o755, 0, 0) {
            Ok(_) => v
                .rmdir(dino, b"zz.use.dir")
                .map_err(|e| format!("usability: rmdir in {d}: {e}"))?,
            Err(e) if e.errno() == libc::ENOSPC && full(v) => {}
            Err(e) => return Err(format!("usability: mkdir in {d}: {e}")),
        }
    }
    if inos.len() >= 2 {
        let (a, b) = (inos[0], inos[inos.len() - 1]);
        match v.create(a, b"zz.use.x", 0o600, 0, 0) {
            Ok(_) => {
                v.rename(a, b"zz.use.x", b, b"zz.use.y", RenameFlags::default())
                    .map_err(|e| format!("usability: cross rename: {e}"))?;
                v.unlink(b, b"zz.use.y")
                    .map_err(|e| format!("usability: unlink after cross rename: {e}"))?;
            }
            Err(e) if e.errno() == libc::ENOSPC && full(v) => {}
            Err(e) => return Err(format!("usability: create for cross rename: {e}")),
        }
    }
    Ok(())
}

/// `PKTFS_CRASH_FULL=1`: explore everything.
pub fn full_mode() -> bool {
    std::env::var("PKTFS_CRASH_FULL").is_ok_and(|v| v != "0" && !v.is_empty())
}
