//! Crash injection (as crash_ops) over the operations that move file bytes
//! between PM and the tier: tier-out (a file's local records switched to
//! remote records, in commits of whole runs, its PM space freed after the
//! switch is durable), reads and writes of a tiered file (an overwrite
//! splits a remote record into remote remnants), truncation into a remote
//! record, copy_file_range of a tiered range, recall, and unlink. Every
//! crash state must recover to the model before or after the operation in
//! flight, read back through the tier with every record's CRC checked: no
//! byte is lost and no record dangles.

use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{full_mode, record, Explore, Explorer};
use pktfs_tests::model::Op;

fn p(s: &str) -> String {
    s.to_string()
}

#[test]
fn crash_tier_ops() {
    let (base, model) = seeded();
    let workloads: Vec<(&str, Vec<Op>)> = vec![
        (
            "tier-out",
            vec![
                Op::Write {
                    path: p("/A/foo"),
                    off: 9000,
                    len: 5000,
                    seed: 7,
                },
                Op::TierOut { path: p("/A/foo") },
                Op::TierOut { path: p("/A/bar") },
                // Nothing local left: a no-op.
                Op::TierOut { path: p("/A/foo") },
            ],
        ),
        (
            "tiered-file-changes",
            vec![
                Op::TierOut { path: p("/A/foo") },
                Op::Write {
                    path: p("/A/foo"),
                    off: 1000,
                    len: 300,
                    seed: 9,
                },
                Op::Truncate {
                    path: p("/A/foo"),
                    size: 4001,
                },
                Op::CopyRange {
                    src: p("/A/foo"),
                    soff: 100,
                    dst: p("/A/bar"),
                    doff: 50,
                    len: 2000,
                },
                Op::TierOut { path: p("/A/foo") },
                Op::Recall { path: p("/A/foo") },
                Op::TierOut { path: p("/A/bar") },
                Op::Unlink { path: p("/A/bar") },
            ],
        ),
    ];
    let mut ex = Explorer::new(Explore {
        small: if full_mode() { 48 } else { 16 },
        ..Explore::default()
    });
    for (name, ops) in &workloads {
        let w = record(name, base.clone(), model, ops).unwrap_or_else(|e| panic!("{e}"));
        ex.explore(&w);
    }
    println!("{}", ex.stats.summary("crash_tier"));
    for f in ex.stats.failures.iter().take(5) {
        println!("FAILURE: {f}\n");
    }
    assert!(
        ex.stats.failures.is_empty(),
        "{} crash states failed (first shown above)",
        ex.stats.failures.len()
    );
    assert!(
        ex.stats.images_checked > 0 && ex.stats.matched_after > 0,
        "no crash state was checked"
    );
}
