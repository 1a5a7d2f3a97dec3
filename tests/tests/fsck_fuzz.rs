//! fsck against damaged images: random byte flips of real images (made by
//! running workloads, including one with a committed journal slot pending
//! replay). For every damaged image:
//! - `check` (-n) and `repair` (-y) return (a watchdog aborts the run if one
//!   hangs) and do not panic; every write stays inside the image (`Pm`
//!   asserts it);
//! - if `-n` finds nothing recovery cannot deal with, `Volume::open_pm`
//!   succeeds on the unrepaired image (fsck sees at least what mount sees);
//! - after `-y`, a second `-n` reports no error left (or only ones fsck says
//!   it cannot correct), a second `-y` changes nothing, and then the image
//!   opens, passes `check_invariants`, and its whole tree reads back.
//!
//! `PKTFS_FUZZ_CASES` sets the number of cases (`PKTFS_CRASH_FULL=1`: many);
//! `PKTFS_SEED` replays a run.
//!
//! It runs alone in a child process ([`crate::harness::alone`]): its
//! watchdog's abort ends the whole process, and the test binary runs its
//! other tests beside it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use pktfs_fs::media::Pm;
use pktfs_fs::Volume;
use pktfs_fsck::{exit, Options};
use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{for_each_point, full_mode, record};
use pktfs_tests::model::{dump, Op};

fn p(s: &str) -> String {
    s.to_string()
}

/// Real images: the seeded tree, the tree after a mix of operations
/// (shared extents, long symlink, big xattr, hard links, moved dirs), and a
/// crash image holding a committed journal slot that recovery must replay.
fn images() -> &'static Vec<Arc<Vec<u8>>> {
    static I: OnceLock<Vec<Arc<Vec<u8>>>> = OnceLock::new();
    I.get_or_init(|| {
        let (base, model) = seeded();
        let mix = vec![
            Op::Write {
                path: p("/C/D/e"),
                off: 0,
                len: 40_000,
                seed: 9,
            },
            Op::CopyRange {
                src: p("/C/D/e"),
                soff: 1000,
                dst: p("/A/bar"),
                doff: 50,
                len: 9000,
            },
            Op::Symlink {
                path: p("/B/long"),
                target: "t".repeat(3000),
            },
            Op::SetXattr {
                path: p("/B/baz"),
                name: p("user.big"),
                len: 1500,
                seed: 3,
                create: false,
                replace: false,
            },
            Op::Link {
                src: p("/A/bar"),
                dst: p("/C/D/bar2"),
            },
            Op::Rename {
                src: p("/C/D"),
                dst: p("/A/D"),
                noreplace: false,
                exchange: false,
            },
            Op::Write {
                path: p("/A/foo"),
                off: 2000,
                len: 100,
                seed: 7,
            },
            Op::Mkdir {
                path: p("/E/sub"),
                perm: 0o700,
            },
            Op::Create {
                path: p("/E/sub/x"),
                perm: 0o600,
            },
        ];
        let mut v = Volume::open_pm(Pm::from_bytes(base.to_vec()), false).unwrap();
        let mut m = model.clone();
        for op in &mix {
            assert_eq!(pktfs_tests::model::apply_vol(&v, op), m.apply(op), "{op}");
        }
        let mixed = v.snapshot();
        drop(v);
        // A committed, unapplied journal slot: the instant after the commit
        // fence of a rename, before its stores are applied.
        let w = record(
            "rename",
            base.clone(),
            model,
            &[Op::Rename {
                src: p("/A/bar"),
                dst: p("/B/bar"),
                noreplace: false,
                exchange: false,
            }],
        )
        .unwrap();
        let mut pending = None;
        for_each_point(&w.base, &w.events, |pt| {
            let img = pt.image_with(&[]);
            let r = pktfs_fsck::check(&mut Pm::from_bytes(img.clone()), &Options::check());
            if r.counts.journal_slots_pending > 0 && r.errors_beyond_recovery().is_empty() {
                pending = Some(img);
                return false;
            }
            true
        });
        let pending = pending.expect("a crash image with a pending journal slot");
        vec![base.clone(), Arc::new(mixed), Arc::new(pending)]
    })
}

/// Where to flip: (region start, length) by selector, within the parts of
/// each region that the images use.
fn region(img: &[u8], sel: u8) -> (usize, usize) {
    // Offsets of the 2 MiB / 64-inode geometry, read from the superblock.
    let sb = pktfs_layout::Superblock::from_bytes(&img[..256], 0, img.len() as u64)
        .expect("test images have a valid primary");
    let g = sb.geometry;
    match sel % 16 {
        0 => (0, 256),
        1 => (4096, 256),
        2 => (g.journal_offset as usize, 16 * 1024),
        3..=6 => (g.inode_offset as usize, 32 * 192),
        7..=12 => (g.record_offset as usize, 160 * 64),
        _ => (g.buffer_offset as usize, 96 << 10),
    }
}

static PROGRESS: AtomicU64 = AtomicU64::new(0);

fn watchdog(limit: Duration) {
    static W: OnceLock<()> = OnceLock::new();
    W.get_or_init(|| {
        std::thread::spawn(move || {
            let t0 = Instant::now();
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let last = PROGRESS.load(Relaxed);
                let now = t0.elapsed().as_secs();
                if last != 0 && now > last + limit.as_secs() {
                    eprintln!(
                        "fsck_fuzz: a case has run for over {limit:?}: fsck does not terminate"
                    );
                    std::process::abort();
                }
            }
        });
    });
}

/// Error codes fsck may leave after -y (it says it cannot correct them).
const UNCORRECTABLE: &[&str] = &["superblock.none", "symlink.gap"];

fn case(img_idx: usize, flips: &[(u8, u32, u8)], t0: Instant) -> Result<String, String> {
    PROGRESS.store(t0.elapsed().as_secs().max(1), Relaxed);
    let imgs = images();
    let mut img = imgs[img_idx % imgs.len()].to_vec();
    let mut hit_sb = [false; 2];
    for &(sel, off, x) in flips {
        let (start, len) = region(&imgs[0], sel);
        // Never both superblocks: losing both takes the geometry search,
        // which fsck_detect covers.
        if start < 8192 {
            let which = start / 4096;
            if hit_sb[1 - which] {
                continue;
            }
            hit_sb[which] = true;
        }
        img[start + off as usize % len] ^= x;
    }
    let mut pm = Pm::from_bytes(img.clone());
    let r1 = pktfs_fsck::check(&mut pm, &Options::check());
    if ![exit::CLEAN, exit::UNCORRECTED].contains(&r1.exit_code) {
        return Err(format!("-n exit code {}: {}", r1.exit_code, r1.to_text()));
    }
    if r1.errors_beyond_recovery().is_empty() {
        // fsck says recovery copes: it must.
        let v = Volume::open_pm(Pm::from_bytes(img.clone()), false).map_err(|e| {
            format!(
                "fsck -n found nothing recovery cannot fix, but open fails: {e}\n{}",
                r1.to_text()
            )
        })?;
        v.check_invariants()
            .map_err(|e| format!("invariants after a -n-clean open: {e}"))?;
    }
    let r2 = pktfs_fsck::repair(&mut pm, &Options::yes());
    if ![exit::CLEAN, exit::CORRECTED, exit::UNCORRECTED].contains(&r2.exit_code) {
        return Err(format!("-y exit code {}: {}", r2.exit_code, r2.to_text()));
    }
    let r3 = pktfs_fsck::check(&mut pm, &Options::check());
    let left: Vec<_> = r3.unfixed(pktfs_fsck::Severity::Error);
    if let Some(f) = left.iter().find(|f| !UNCORRECTABLE.contains(&f.code)) {
        return Err(format!(
            "after -y, -n still finds {} {}: {}\n--- -n before:\n{}\n--- -y:\n{}\n--- -n after:\n{}",
            f.code,
            f.record.map(|r| format!("[record {r}]")).unwrap_or_default(),
            f.message,
            r1.to_text(),
            r2.to_text(),
            r3.to_text()
        ));
    }
    if r2.exit_code == exit::UNCORRECTED && left.is_empty() {
        return Err(format!(
            "-y said uncorrected but -n finds nothing:\n{}\n{}",
            r2.to_text(),
            r3.to_text()
        ));
    }
    if left.is_empty() {
        // Reads of ranges marked damaged fail with EIO: the tree is read
        // back from a copy with them dropped.
        let readable = (!r3.damaged.is_empty()).then(|| {
            let mut copy = Pm::from_bytes(pm.snapshot());
            let drop = Options {
                drop_damaged: true,
                ..Options::yes()
            };
            let r = pktfs_fsck::repair(&mut copy, &drop);
            (r, copy)
        });
        // A second -y finds nothing to do: what the first wrote (marks of
        // lost or damaged ranges included) is the image's settled state.
        let mut again = Pm::from_bytes(pm.snapshot());
        let r4 = pktfs_fsck::repair(&mut again, &Options::yes());
        if r4.exit_code != exit::CLEAN
            || !r4.changes.is_empty()
            || again.snapshot() != pm.snapshot()
        {
            return Err(format!(
                "a second -y is not idle:\n--- -y:\n{}\n--- -y again:\n{}",
                r2.to_text(),
                r4.to_text()
            ));
        }
        let v = Volume::open_pm(pm, false).map_err(|e| {
            format!(
                "open after -y failed: {e}\n--- -y:\n{}\n--- -n after:\n{}",
                r2.to_text(),
                r3.to_text()
            )
        })?;
        v.check_invariants()
            .map_err(|e| format!("invariants after -y: {e}"))?;
        match readable {
            None => dump(&v).map_err(|e| format!("tree after -y: {e}"))?,
            Some((r, copy)) => {
                if r.exit_code != exit::CORRECTED {
                    return Err(format!("-y --drop-damaged: {}", r.to_text()));
                }
                let holed = Volume::open_pm(copy, false)
                    .map_err(|e| format!("open after --drop-damaged: {e}"))?;
                dump(&holed).map_err(|e| format!("tree after --drop-damaged: {e}"))?
            }
        };
        if r2.exit_code == exit::CLEAN && r1.exit_code != exit::CLEAN {
            return Err("-n found errors, -y exited 0".into());
        }
    }
    Ok(format!("{}/{}", r1.exit_code, r2.exit_code))
}

#[test]
fn fsck_survives_random_damage_and_repairs_it() {
    crate::harness::alone(|| {
        let seed: u64 = std::env::var("PKTFS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        let cases: u32 = std::env::var("PKTFS_FUZZ_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if full_mode() { 20_000 } else { 4000 });
        println!("fsck_fuzz: seed {seed} (PKTFS_SEED={seed} replays it), {cases} cases");
        watchdog(Duration::from_secs(60));
        let _ = images();
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let cfg = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        };
        let mut runner =
            TestRunner::new_with_rng(cfg, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
        let t0 = Instant::now();
        let outcomes = std::cell::RefCell::new(std::collections::BTreeMap::<String, u64>::new());
        let strat = (
            0usize..3,
            proptest::collection::vec((any::<u8>(), any::<u32>(), 1u8..=255), 1..8),
        );
        let r = runner.run(&strat, |(i, flips)| {
            let o = case(i, &flips, t0).map_err(TestCaseError::fail)?;
            *outcomes.borrow_mut().entry(o).or_default() += 1;
            Ok(())
        });
        PROGRESS.store(0, Relaxed);
        println!(
            "fsck_fuzz: {cases} damaged images in {:.1} s; exit codes (-n/-y): {:?}",
            t0.elapsed().as_secs_f64(),
            outcomes.borrow()
        );
        if let Err(e) = r {
            panic!("fsck_fuzz failed (seed {seed}; PKTFS_SEED={seed} replays it):\n{e}");
        }
    });
}
