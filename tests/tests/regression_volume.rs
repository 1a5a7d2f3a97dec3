//! Volume bugs found by the crash injector and the model test, each
//! minimised to a small deterministic test (fixed in e27cc52; kept so they
//! stay fixed).

use std::sync::Arc;

use pktfs_fs::media::Pm;
use pktfs_fs::{FallocMode, Volume};
use pktfs_tests::model::crash::{check_image, for_each_point, record};
use pktfs_tests::model::{format_image, Model, Op};

const IMAGE: u64 = 2 << 20;

/// Found by `crash_ops` (every journaled op): `Commit::apply` wrote the journal
/// header — the commit point — in the same fence epoch as the payload, the
/// records and the idle attribute slots it commits, so the header and entry
/// lines could reach the media before them (a line may be written back any
/// time after its store). Recovery then replayed links to records that were
/// never durable: "inode slot ...: generation 2 but the selector says 4".
#[test]

fn journal_header_never_reaches_the_media_before_what_it_commits() {
    let base = Arc::new(format_image(IMAGE, Some(64)));
    let w = record(
        "mkdir",
        base,
        &Model::new(),
        &[Op::Mkdir {
            path: "/d".into(),
            perm: 0o755,
        }],
    )
    .unwrap();
    let (j0, j1) = (8192u64, 8192 + 16 * 1024);
    let mut tried = 0;
    let mut failures = Vec::new();
    for_each_point(&w.base, &w.events, |p| {
        if p.pre && p.last_mark == Some(0) {
            // Crash just before a fence with only the journal's lines on the media.
            let j: Vec<usize> = (0..p.inflight.len())
                .filter(|&i| (j0..j1).contains(&(p.inflight[i].0 * 64)))
                .collect();
            if !j.is_empty() {
                tried += 1;
                let allowed = [(0, &w.trees[0]), (1, &w.trees[1])];
                if let Err(e) = check_image(p.image_with(&j), &allowed, false) {
                    failures.push(format!("before fence {}: {e}", p.fence + 1));
                }
            }
        }
        true
    });
    assert!(tried > 0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Found by `crash_ops` (`fallocate /A/bar [0, +4096) keep_size`): with
/// KEEP_SIZE, fallocate linked zero-filled records past the end of file;
/// the size stays, so the chain holds records past the size, which the
/// recovery walk refuses ("records reach byte 4096 past the size 100"): the
/// image cannot be mounted again even without a crash.
#[test]

fn fallocate_keep_size_past_eof_still_mounts() {
    let mut v = Volume::open_pm(Pm::from_bytes(format_image(IMAGE, Some(64))), false).unwrap();
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &[7u8; 100]).unwrap();
    v.fallocate(
        f.ino,
        0,
        4096,
        FallocMode {
            keep_size: true,
            punch_hole: false,
        },
    )
    .unwrap();
    assert_eq!(v.getattr(f.ino).unwrap().size, 100);
    let img = v.snapshot();
    drop(v);
    let rep = pktfs_fsck::check(
        &mut Pm::from_bytes(img.clone()),
        &pktfs_fsck::Options::check(),
    );
    let v = Volume::open_pm(Pm::from_bytes(img), false)
        .unwrap_or_else(|e| panic!("remount: {e}\nfsck: {}", rep.to_text()));
    assert_eq!(v.getattr(f.ino).unwrap().size, 100);
    assert_eq!(v.read(f.ino, 0, 1000).unwrap(), vec![7u8; 100]);
    assert!(rep.clean(), "{}", rep.to_text());
}

/// Found by `model_prop` (seed 2, shrunk to two crashes): a crash while
/// mount rewrote the *backup* superblock left it torn; the next mount's
/// `mark_mounted` rewrote the primary first (always primary, then backup),
/// so a second crash there left no valid superblock at all.
#[test]

fn two_crashes_during_mount_leave_a_valid_superblock() {
    let base = format_image(IMAGE, Some(64));
    // Mount 1 crashes while writing the backup superblock (before fence 2).
    let v = Volume::open_pm(Pm::recording(base.clone()), false).unwrap();
    let log = v.pm().crash_log().unwrap();
    drop(v);
    let mut first = Vec::new();
    for_each_point(&base, &log.events, |p| {
        if p.pre && p.fence == 1 {
            for i in 0..p.inflight.len() {
                first.push(p.image_with(&[i]));
            }
        }
        true
    });
    assert!(!first.is_empty());
    let mut bad = Vec::new();
    for img1 in first {
        Volume::open_pm(Pm::from_bytes(img1.clone()), false).expect("the primary is intact");
        // Mount 2 crashes while writing the primary (before its first fence).
        let v = Volume::open_pm(Pm::recording(img1.clone()), false).unwrap();
        let log = v.pm().crash_log().unwrap();
        drop(v);
        for_each_point(&img1, &log.events, |p| {
            if p.pre && p.fence == 0 {
                for i in 0..p.inflight.len() {
                    if let Err(e) = Volume::open_pm(Pm::from_bytes(p.image_with(&[i])), false) {
                        bad.push(e.to_string());
                    }
                }
            }
            true
        });
    }
    assert!(
        bad.is_empty(),
        "{} images without a valid superblock: {}",
        bad.len(),
        bad[0]
    );
}
