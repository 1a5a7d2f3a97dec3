//! The reference-model property test: random sequences of Volume operations,
//! with clean remounts and crashes at random fences (through the recording
//! backend), run against the in-memory model; the whole tree (names, types,
//! sizes, contents, modes, owners, link counts, hard-link identity, xattrs,
//! rdev) is compared after every operation, remount and crash, and so is
//! what a direct reader (pktfs-direct) finds in a copy of the image. A crash must
//! leave the operation in flight entirely done or entirely undone.
//!
//! ENOSPC is an allowed outcome of any operation (the model cannot predict
//! space), but only when the volume is plausibly full, and the operation
//! must then have changed nothing. Every case ends by deleting everything:
//! all records, inodes and buffers must be free again and reusable.
//!
//! Seeds are printed: `PKTFS_SEED=<n>` replays a run, `PKTFS_MODEL_CASES`
//! sets the number of cases (`PKTFS_CRASH_FULL=1`: many more). Shrunk
//! failures print their concrete operations; keep them in
//! `regression_*.rs`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

static OPS_OK: AtomicU64 = AtomicU64::new(0);
static OPS_ERR: AtomicU64 = AtomicU64::new(0);
static OPS_ENOSPC: AtomicU64 = AtomicU64::new(0);
static REMOUNTS: AtomicU64 = AtomicU64::new(0);
static CRASHES: AtomicU64 = AtomicU64::new(0);
static CRASH_AFTER: AtomicU64 = AtomicU64::new(0);

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use pktfs_fs::media::Pm;
use pktfs_fs::{FileType, Volume};
use pktfs_tests::model::crash::{check_image, for_each_point, full_mode, subsets};
use pktfs_tests::model::gen::{concretize, steps, Step};
use pktfs_tests::model::{apply_vol, dump, format_image, show_result, Model, Op, OpResult};

/// The roomy image (ENOSPC is rare) and the tight one (1 MiB: ENOSPC is
/// common, so freed space must be reusable all the time).
fn base_image(tight: bool) -> Arc<Vec<u8>> {
    static B: OnceLock<Arc<Vec<u8>>> = OnceLock::new();
    static T: OnceLock<Arc<Vec<u8>>> = OnceLock::new();
    if tight {
        T.get_or_init(|| Arc::new(format_image(1 << 20, Some(32))))
            .clone()
    } else {
        B.get_or_init(|| Arc::new(format_image(2 << 20, Some(64))))
            .clone()
    }
}

struct Harness {
    v: Option<Volume>,
    model: Model,
    /// The image the current recording started from, and the model before
    /// each operation since (and after the last).
    base: Arc<Vec<u8>>,
    states: Vec<Model>,
    since_open: usize,
    /// Everything done so far, for the failure message.
    trace: Vec<String>,
}

fn open(img: &[u8]) -> Result<Volume, String> {
    let v =
        Volume::open_pm(Pm::recording(img.to_vec()), false).map_err(|e| format!("open: {e}"))?;
    pktfs_tests::model::tier::use_store(&v);
    Ok(v)
}

/// Payload bytes an operation needs, for judging ENOSPC.
fn payload(op: &Op) -> Option<u64> {
    Some(match op {
        Op::Write { len, .. } | Op::Append { len, .. } => *len as u64,
        Op::Symlink { target, .. } => target.len() as u64,
        Op::Fallocate {
            len, punch: false, ..
        } => *len,
        // An xattr must be one contiguous slice: fragmentation is a
        // legitimate ENOSPC for large values.
        Op::SetXattr { len, .. } if *len <= 1000 => *len as u64 + 16,
        Op::Create { .. }
        | Op::Mkdir { .. }
        | Op::Mknod { .. }
        | Op::Link { .. }
        | Op::Rename { .. } => 256,
        Op::Upload { len, .. } => *len as u64 + 2048,
        Op::Truncate { .. } | Op::Chmod { .. } | Op::Chown { .. } => 0,
        _ => return None,
    })
}

impl Harness {
    fn new(tight: bool) -> Result<Harness, String> {
        let base = base_image(tight);
        let v = open(&base)?;
        let model = Model::new();
        Ok(Harness {
            v: Some(v),
            states: vec![model.clone()],
            model,
            base,
            since_open: 0,
            trace: Vec::new(),
        })
    }

    fn v(&self) -> &Volume {
        self.v.as_ref().expect("volume open")
    }

    fn compare(&mut self, when: &str) -> Result<(), String> {
        let t = dump(self.v())?;
        let m = self.model.tree();
        if t != m {
            return Err(format!(
                "{when}: volume tree (left) differs from the model (right):\n{}",
                t.diff(&m, 10)
            ));
        }
        // And a direct reader of the image sees the same tree.
        let image = self.v.as_mut().expect("volume open").snapshot();
        pktfs_tests::model::direct::check(&image, &t).map_err(|e| format!("{when}: {e}"))
    }

    fn op(&mut self, op: Op) -> Result<(), String> {
        let v = self.v();
        v.pm().mark(self.since_open as u64);
        let before = v.statfs();
        let got: OpResult = apply_vol(v, &op);
        let mut after = self.model.clone();
        let want = after.apply(&op);
        self.trace.push(format!("{op}  => {}", show_result(&got)));
        match got {
            Ok(_) => &OPS_OK,
            Err(libc::ENOSPC) => &OPS_ENOSPC,
            Err(_) => &OPS_ERR,
        }
        .fetch_add(1, Relaxed);
        if got == Err(libc::ENOSPC) {
            let bs = self.v().geometry().buffer_size_bytes as u64;
            if let Some(need) = payload(&op) {
                let plenty = before.blocks_free * bs > need + 4 * bs
                    && before.records_free > need / bs + 64
                    && before.files_free > 2;
                if plenty && want.is_ok() {
                    return Err(format!("{op}: ENOSPC with {before:?} free (needs about {need} bytes): space leaked?"));
                }
            }
        } else if got != want {
            return Err(format!(
                "{op}: volume {} but the model says {}",
                show_result(&got),
                show_result(&want)
            ));
        } else {
            self.model = after;
        }
        self.since_open += 1;
        self.states.push(self.model.clone());
        self.compare(&format!("after {op}"))?;
        if self.trace.len().is_multiple_of(8) {
            self.v()
                .check_invariants()
                .map_err(|e| format!("invariants after {op}: {e}"))?;
        }
        Ok(())
    }

    fn reset_recording(&mut self, img: Vec<u8>) -> Result<(), String> {
        self.v = Some(open(&img)?);
        self.base = Arc::new(img);
        self.states = vec![self.model.clone()];
        self.since_open = 0;
        self.v()
            .check_invariants()
            .map_err(|e| format!("invariants after reopen: {e}"))?;
        self.compare("after reopen")
    }

    fn remount(&mut self) -> Result<(), String> {
        self.trace.push("remount".into());
        REMOUNTS.fetch_add(1, Relaxed);
        let img = self.v.as_mut().expect("volume open").snapshot();
        self.v = None;
        self.reset_recording(img)
    }

    fn crash(&mut self, point: u32, subset: u32) -> Result<(), String> {
        let v = self.v.take().expect("volume");
        let log = v.pm().crash_log().ok_or("not recording")?;
        let boff = v.geometry().buffer_offset;
        drop(v);
        let mut n = 0u64;
        for_each_point(&self.base, &log.events, |_| {
            n += 1;
            true
        });
        let want = point as u64 % n.max(1);
        let mut i = 0u64;
        let mut found = None;
        for_each_point(&self.base, &log.events, |p| {
            if i == want {
                let subs = subsets(p, boff, 16);
                let chosen = &subs[subset as usize % subs.len()];
                found = Some((
                    p.image_with(chosen),
                    p.last_mark,
                    p.pre,
                    p.fence,
                    chosen.len(),
                    p.inflight.len(),
                ));
                return false;
            }
            i += 1;
            true
        });
        let (img, mark, pre, fence, k, of) = found.ok_or("no crash point")?;
        let ops = self.since_open as u64;
        let idx: Vec<usize> = match mark {
            None => vec![0],
            Some(m) if m >= ops => vec![ops as usize],
            Some(m) => vec![m as usize, m as usize + 1],
        };
        self.trace.push(format!(
            "crash {} fence {fence} (op in flight: {mark:?} of {ops}), {k} of {of} in-flight lines",
            if pre { "before" } else { "after" }
        ));
        let trees: Vec<_> = idx.iter().map(|&j| self.states[j].tree()).collect();
        let allowed: Vec<(usize, &pktfs_tests::model::Tree)> =
            idx.iter().copied().zip(trees.iter()).collect();
        let which = check_image(img.clone(), &allowed, true)?;
        CRASHES.fetch_add(1, Relaxed);
        if idx.len() == 2 && which == idx[1] {
            CRASH_AFTER.fetch_add(1, Relaxed);
        }
        self.model = self.states[which].clone();
        self.reset_recording(img)
    }

    /// Delete everything: every record, inode and buffer must come back,
    /// and the space must be reusable, before and after a remount.
    fn finish(&mut self) -> Result<(), String> {
        let v = self.v();
        rm_rf(v, v.root())?;
        for n in v.listxattr(v.root()).map_err(|e| e.to_string())? {
            v.removexattr(v.root(), &n)
                .map_err(|e| format!("removexattr on the root: {e}"))?;
        }
        let g = *v.geometry();
        let check = |v: &Volume, when: &str| -> Result<(), String> {
            let s = v.statfs();
            if s.files_free != g.inode_count as u64 - 1
                || s.records_free != g.record_count
                || s.blocks_free + 1 < g.buffer_count
            {
                return Err(format!(
                    "{when}: everything deleted but {s:?} free of {g:?}: leak"
                ));
            }
            Ok(())
        };
        check(v, "after deleting everything")?;
        let f = v
            .create(v.root(), b"big", 0o644, 0, 0)
            .map_err(|e| format!("create big: {e}"))?;
        let bs = g.buffer_size_bytes as u64;
        let total = (v.statfs().blocks_free - 2) * bs;
        let mut off = 0;
        while off < total {
            let n = (256 << 10).min(total - off);
            v.write(f.ino, off, &vec![0x5a; n as usize])
                .map_err(|e| format!("refilling freed space at {off} of {total}: {e}"))?;
            off += n;
        }
        v.unlink(v.root(), b"big")
            .map_err(|e| format!("unlink big: {e}"))?;
        check(v, "after refilling and deleting")?;
        v.check_invariants()?;
        let img = self.v.as_mut().expect("volume open").snapshot();
        self.v = None;
        let v =
            Volume::open_pm(Pm::from_bytes(img), false).map_err(|e| format!("final open: {e}"))?;
        pktfs_tests::model::tier::use_store(&v);
        check(&v, "after the final remount")?;
        Ok(())
    }
}

fn rm_rf(v: &Volume, dir: u64) -> Result<(), String> {
    for e in v.list_dir(dir).map_err(|e| e.to_string())? {
        if e.kind == FileType::Directory {
            rm_rf(v, e.ino)?;
            v.rmdir(dir, &e.name)
                .map_err(|x| format!("rmdir {:?}: {x}", String::from_utf8_lossy(&e.name)))?;
        } else {
            v.unlink(dir, &e.name)
                .map_err(|x| format!("unlink {:?}: {x}", String::from_utf8_lossy(&e.name)))?;
        }
    }
    Ok(())
}

pub fn run_case(steps: &[Step], tight: bool) -> Result<(), String> {
    let mut h = Harness::new(tight)?;
    let r = (|| {
        for s in steps {
            match s {
                Step::Op(a) => {
                    let op = concretize(a, &h.model);
                    h.op(op)?
                }
                Step::Remount => h.remount()?,
                Step::Crash(p, k) => h.crash(*p, *k)?,
            }
        }
        h.finish()
    })();
    r.map_err(|e| format!("{e}\n--- concrete steps:\n  {}", h.trace.join("\n  ")))
}

fn seed() -> u64 {
    std::env::var("PKTFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

fn run(tight: bool, default_cases: u32) {
    let seed = seed();
    let what = if tight {
        "model_prop (1 MiB image)"
    } else {
        "model_prop"
    };
    let cases: u32 = std::env::var("PKTFS_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full_mode() {
            20 * default_cases
        } else {
            default_cases
        });
    for c in [
        &OPS_OK,
        &OPS_ERR,
        &OPS_ENOSPC,
        &REMOUNTS,
        &CRASHES,
        &CRASH_AFTER,
    ] {
        c.store(0, Relaxed);
    }
    println!("{what}: seed {seed} (PKTFS_SEED={seed} replays it), {cases} cases");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let cfg = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4000,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(cfg, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let t0 = std::time::Instant::now();
    let r = runner.run(&steps(64), |s| {
        run_case(&s, tight).map_err(TestCaseError::fail)
    });
    match r {
        Ok(()) => println!(
            "{what}: {cases} cases passed in {:.1} s (seed {seed}): {} ops ok, {} failed as the model said, {} ENOSPC, \
             {} remounts, {} crashes recovered ({} with the op in flight done)",
            t0.elapsed().as_secs_f64(),
            OPS_OK.load(Relaxed),
            OPS_ERR.load(Relaxed),
            OPS_ENOSPC.load(Relaxed),
            REMOUNTS.load(Relaxed),
            CRASHES.load(Relaxed),
            CRASH_AFTER.load(Relaxed)
        ),
        Err(e) => panic!("{what} failed (seed {seed}; PKTFS_SEED={seed} replays it):\n{e}"),
    }
}

// One test function: the counters are process-wide.
#[test]
fn model_random_sequences_with_remounts_and_crashes() {
    run(false, 256);
    run(true, 128);
}
