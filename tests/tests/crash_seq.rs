//! Crash injection over random operation sequences (proptest): every crash
//! state of every operation of a random sequence over the seeded tree is
//! checked as in `crash_ops` (fsck, recovery, model before/after the op in
//! flight, usability pass, fsck clean). Failing sequences are shrunk and
//! printed as concrete operations.
//!
//! `PKTFS_SEED` replays a run; `PKTFS_SEQ_CASES` sets the number of
//! sequences; `PKTFS_CRASH_FULL=1` runs many more, longer, with every
//! subset of at most two in-flight lines for up to 48 lines.

use std::cell::RefCell;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{full_mode, record, Explore, Explorer, Stats};
use pktfs_tests::model::gen::{concretize, ops};

#[test]
fn crash_random_sequences() {
    let seed: u64 = std::env::var("PKTFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let full = full_mode();
    let cases: u32 = std::env::var("PKTFS_SEQ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full { 400 } else { 64 });
    let max_len = if full { 24 } else { 10 };
    println!("crash_seq: seed {seed} (PKTFS_SEED={seed} replays it), {cases} sequences of up to {max_len} ops");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let cfg = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 500,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(cfg, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let (base, model) = seeded();
    let total = RefCell::new(Stats::default());
    let r = runner.run(&ops(max_len), |aops| {
        let mut m = model.clone();
        let mut seq = Vec::new();
        for a in &aops {
            let op = concretize(a, &m);
            let _ = m.apply(&op);
            seq.push(op);
        }
        let w = record("sequence", base.clone(), model, &seq).map_err(TestCaseError::fail)?;
        let mut ex = Explorer::new(Explore {
            small: if full { 48 } else { 16 },
            max_failures: 1,
            ..Explore::default()
        });
        ex.explore(&w);
        total.borrow_mut().add(&ex.stats);
        match ex.stats.failures.first() {
            Some(f) => Err(TestCaseError::fail(f.clone())),
            None => Ok(()),
        }
    });
    let t = total.into_inner();
    println!("{}", t.summary("crash_seq"));
    if let Err(e) = r {
        panic!("crash_seq failed (seed {seed}; PKTFS_SEED={seed} replays it):\n{e}");
    }
}
