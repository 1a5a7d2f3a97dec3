//! The engine's policies against real Garage, in process: the high/low
//! watermarks tier out the least recently used files first; files read
//! often through the tier come back into PM; an object mostly dead is
//! compacted and then collected; the bandwidth limit holds.
//!
//! Garage missing: under CI a failure, elsewhere a loud SKIPPED line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pktfs_fs::{SetAttr, TimeSet, Volume};
use pktfs_layout::GeometryParams;
use pktfs_tier::engine::{Tier, TierConfig};
use pktfs_tier::garage::Garage;
use pktfs_tier::segment::parse_object_key_rel;

use crate::prereq;

fn garage() -> prereq::Check {
    prereq::holds(Garage::binary().is_some(), || {
        "`garage` is not installed (cargo install --locked garage; .ci/run does)".into()
    })
}

fn fresh(size: u64) -> Arc<Volume> {
    Arc::new(Volume::in_memory(GeometryParams::for_size(size)).unwrap())
}

fn used(v: &Volume) -> f64 {
    let s = v.statfs();
    (s.blocks - s.blocks_free) as f64 / s.blocks as f64
}

fn remote(v: &Volume, ino: u64) -> bool {
    let c = v.chain(ino).unwrap();
    !c.is_empty() && c.iter().all(|r| r.remote.is_some())
}

fn start(g: &Garage, v: &Arc<Volume>, prefix: &str, cfg: TierConfig) -> Tier {
    Tier::start(v.clone(), g.target(prefix), g.store().unwrap(), cfg, false).unwrap()
}

#[test]
fn watermarks_tier_out_the_least_recently_used_first() {
    require!(garage());
    let g = Garage::start(1).unwrap();
    let v = fresh(48 << 20);
    let mut files = Vec::new();
    // Fill to about 70%: 16 files of 2 MiB, accessed long ago to recently.
    for k in 0..16i64 {
        let f = v
            .create(v.root(), format!("f{k}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        v.write(f, 0, &vec![k as u8; 2 << 20]).unwrap();
        let t = 1_000_000_000 * (k + 1);
        v.setattr(
            f,
            &SetAttr {
                atime: Some(TimeSet::Ns(t)),
                mtime: Some(TimeSet::Ns(t)),
                ..Default::default()
            },
        )
        .unwrap();
        files.push(f);
    }
    let before = used(&v);
    assert!(before > 0.6, "filled to {before}");
    let cfg = TierConfig {
        age: None,
        high_watermark: 0.5,
        low_watermark: 0.3,
        ..TierConfig::default()
    };
    let t = start(&g, &v, "wm", cfg);
    let rep = t.tier_out_now(false).unwrap();
    let after = used(&v);
    println!("used {before:.2} -> {after:.2}: {rep:?}");
    assert!(after <= 0.31, "under the low watermark: {after}");
    // The oldest went, the newest stayed.
    let gone: Vec<bool> = files.iter().map(|f| remote(&v, *f)).collect();
    let first_kept = gone.iter().position(|g| !g).unwrap();
    assert!(
        gone[..first_kept].iter().all(|g| *g) && gone[first_kept..].iter().all(|g| !*g),
        "{gone:?}"
    );
    assert!(first_kept > 0 && first_kept < 16);
    for (k, f) in files.iter().enumerate() {
        assert_eq!(v.read(*f, 0, 4 << 20).unwrap(), vec![k as u8; 2 << 20]);
    }
    // Under the high watermark and no age: the next pass does nothing.
    assert_eq!(t.tier_out_now(false).unwrap().files_chosen, 0);
}

#[test]
fn hot_files_come_back_and_dead_objects_are_compacted_then_collected() {
    require!(garage());
    let g = Garage::start(1).unwrap();
    let v = fresh(64 << 20);
    let files: Vec<u64> = (0..10u8)
        .map(|k| {
            let f = v
                .create(v.root(), format!("f{k}").as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            v.write(f, 0, &vec![k; 300_000]).unwrap();
            f
        })
        .collect();
    let cfg = TierConfig {
        promote_after_reads: Some(3),
        ..TierConfig::default()
    };
    let t = start(&g, &v, "pc", cfg);
    let rep = t.tier_out_now(true).unwrap();
    assert_eq!((rep.files_tiered, rep.objects), (10, 1), "{rep:?}");
    let obj = *v.remote_objects().keys().next().unwrap();
    // Read f0 through the tier again and again: promoted back into PM.
    for _ in 0..4 {
        assert_eq!(v.read(files[0], 0, 1 << 20).unwrap(), vec![0u8; 300_000]);
    }
    t.promote_now().unwrap();
    assert!(
        v.chain(files[0])
            .unwrap()
            .iter()
            .all(|r| r.remote.is_none()),
        "f0 promoted"
    );
    assert!(remote(&v, files[1]));
    // Delete 7 of the others: the object is mostly dead.
    for k in 3..10 {
        v.unlink(v.root(), format!("f{k}").as_bytes()).unwrap();
    }
    let rep = t.collect_now().unwrap();
    assert_eq!(rep.objects_compacted, 1, "{rep:?}");
    // Its live records came back to PM; the next pass tiers them into a
    // new object, and the old one is collected.
    assert!(!v.remote_objects().contains_key(&obj));
    t.tier_out_now(true).unwrap();
    let rep = t.collect_now().unwrap();
    assert!(rep.objects_deleted >= 1, "{rep:?}");
    let store = g.store().unwrap();
    let listed: Vec<u64> = store
        .list(&g.target("pc").key("seg/"))
        .unwrap()
        .iter()
        .filter_map(|o| g.target("pc").rel(&o.key).and_then(parse_object_key_rel))
        .collect();
    assert!(
        !listed.contains(&obj),
        "the dead object is gone: {listed:?}"
    );
    for k in 0..3u8 {
        assert_eq!(
            v.read(files[k as usize], 0, 1 << 20).unwrap(),
            vec![k; 300_000]
        );
    }
    v.check_invariants().unwrap();
}

#[test]
fn the_bandwidth_limit_holds() {
    require!(garage());
    let g = Garage::start(1).unwrap();
    let v = fresh(64 << 20);
    for k in 0..8u8 {
        let f = v
            .create(v.root(), format!("f{k}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        v.write(f, 0, &vec![k; 1 << 20]).unwrap();
    }
    let cfg = TierConfig {
        bandwidth_bytes_per_s: Some(4 << 20),
        segment_bytes: 1 << 20,
        ..TierConfig::default()
    };
    let t = start(&g, &v, "bw", cfg);
    let t0 = Instant::now();
    let rep = t.tier_out_now(true).unwrap();
    let took = t0.elapsed();
    assert_eq!(rep.files_tiered, 8);
    // 8 MiB at 4 MiB/s with one second of burst: at least a second.
    assert!(took >= Duration::from_millis(900), "took {took:?}");
}

/// Files `old-{k}` of 1 MiB, last modified long ago.
fn old_files(v: &Volume, tag: &str, n: u8) {
    for k in 0..n {
        let f = v
            .create(v.root(), format!("{tag}-{k}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        v.write(f, 0, &vec![k; 1 << 20]).unwrap();
        v.setattr(
            f,
            &SetAttr {
                mtime: Some(TimeSet::Ns(1_000_000_000)),
                ..Default::default()
            },
        )
        .unwrap();
    }
}

/// Tier-out by age yields to clients that are writing (it shares a pipe of
/// the busy bandwidth while they write, and goes at full speed when they
/// stop); tier-out forced by the high watermark does not yield.
#[test]
fn tier_out_yields_to_writing_clients_unless_pm_forces_it() {
    require!(garage());
    let g = Garage::start(1).unwrap();
    let v = fresh(64 << 20);
    let cfg = TierConfig {
        age: Some(Duration::from_secs(1)),
        busy_bandwidth_bytes_per_s: Some(2 << 20),
        segment_bytes: 1 << 20,
        ..TierConfig::default()
    };
    let t = start(&g, &v, "yield", cfg);
    // A client writing 4 KiB every 10 ms while `run` tiers out.
    let with_writer = |run: &dyn Fn() -> Duration| {
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let f = v.create(v.root(), b"busy", 0o644, 0, 0).unwrap().ino;
                let mut off = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    v.write(f, off, &[7u8; 4096]).unwrap();
                    off += 4096;
                    std::thread::sleep(Duration::from_millis(10));
                }
                v.unlink(v.root(), b"busy").unwrap();
            });
            std::thread::sleep(Duration::from_millis(50));
            let took = run();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            w.join().unwrap();
            took
        })
    };
    let timed = || {
        let t0 = Instant::now();
        let rep = t.tier_out_now(false).unwrap();
        assert_eq!(rep.files_tiered, 6, "{rep:?}");
        t0.elapsed()
    };

    // Idle clients: full speed, no waiting.
    old_files(&v, "idle", 6);
    let idle = timed();
    assert_eq!(t.stats().yielded_ms, 0);

    // Writing clients: 6 MiB through a 2 MiB/s pipe takes 2.5 s or more
    // (the first segment goes at once).
    old_files(&v, "busy", 6);
    let busy = with_writer(&timed);
    let yielded = t.stats().yielded_ms;
    assert!(
        busy >= Duration::from_millis(2400) && yielded >= 2400,
        "busy {busy:?}, yielded {yielded} ms, idle {idle:?}"
    );

    // Above the high watermark nothing yields: fill PM past 80% with
    // young files (the age policy does not pick them; the watermark does).
    let before = t.stats().yielded_ms;
    let mut k = 0;
    while used(&v) < 0.85 {
        let f = v
            .create(v.root(), format!("young-{k}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        v.write(f, 0, &vec![1u8; 1 << 20]).unwrap();
        k += 1;
    }
    let forced = with_writer(&|| {
        let t0 = Instant::now();
        let rep = t.tier_out_now(false).unwrap();
        assert!(rep.files_tiered > 0, "{rep:?}");
        t0.elapsed()
    });
    assert!(
        used(&v) <= 0.65,
        "PM use {:.2} after a forced pass",
        used(&v)
    );
    assert_eq!(
        t.stats().yielded_ms,
        before,
        "a forced pass waited (took {forced:?})"
    );
    v.check_invariants().unwrap();
}
