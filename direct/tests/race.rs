//! Readers racing the holder, checked against the history: every read must
//! return the file as it was after some prefix of the holder's operations,
//! one that had finished when the read began or started before it ended.
//! Never a mix of two states, never bytes of a buffer reused meanwhile.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use pktfs_direct::{Error, Image};
use pktfs_fs::SetAttr;

use crate::common::{held, pattern};

#[derive(Clone, Debug)]
enum Op {
    Write {
        off: u64,
        len: usize,
        seed: u64,
    },
    Truncate(u64),
    /// Unlinked and made again, empty (handles on the old file go stale).
    Recreate,
}

fn apply(state: &mut Vec<u8>, op: &Op) {
    match *op {
        Op::Write { off, len, seed } => {
            let end = off as usize + len;
            if state.len() < end {
                state.resize(end, 0);
            }
            state[off as usize..end].copy_from_slice(&pattern(seed, len));
        }
        Op::Truncate(n) => state.resize(n as usize, 0),
        Op::Recreate => state.clear(),
    }
}

/// The holder's log: ops appended before they start; `started` and
/// `finished` count them.
#[derive(Default)]
struct History {
    ops: RwLock<Vec<Op>>,
    started: AtomicU64,
    finished: AtomicU64,
}

/// A reader's replay of the history, advanced as reads need.
struct Replay {
    at: u64,
    state: Vec<u8>,
}

impl Replay {
    fn advance_to(&mut self, k: u64, h: &History) {
        let ops = h.ops.read().unwrap();
        while self.at < k {
            apply(&mut self.state, &ops[self.at as usize]);
            self.at += 1;
        }
    }
}

fn expected(state: &[u8], off: u64, len: usize) -> &[u8] {
    let s = (off as usize).min(state.len());
    let e = (off as usize + len).min(state.len());
    &state[s..e]
}

#[test]
fn reads_return_one_moment_of_the_file_while_the_holder_rewrites_it() {
    let h = held(64 << 20);
    let vol = Arc::new(h.vol);
    let root = vol.root();
    vol.create(root, b"f", 0o644, 0, 0).unwrap();
    let hist = Arc::new(History::default());
    let stop = Arc::new(AtomicBool::new(false));
    let run_for = Duration::from_millis(
        std::env::var("PKTFS_DIRECT_RACE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
    );

    let holder = {
        let (vol, hist, stop) = (vol.clone(), hist.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = 0x1234_5678u64;
            let mut rnd = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut seed = 1;
            while !stop.load(SeqCst) {
                let op = match rnd(20) {
                    0 => Op::Recreate,
                    1..=3 => Op::Truncate(rnd(300_000)),
                    _ => {
                        seed += 1;
                        Op::Write {
                            off: rnd(250_000),
                            len: 1 + rnd(70_000) as usize,
                            seed,
                        }
                    }
                };
                hist.ops.write().unwrap().push(op.clone());
                hist.started.fetch_add(1, SeqCst);
                let ino = vol.lookup(root, b"f").unwrap().ino;
                match op {
                    Op::Write { off, len, seed } => {
                        vol.write(ino, off, &pattern(seed, len)).unwrap();
                    }
                    Op::Truncate(n) => {
                        let s = SetAttr {
                            size: Some(n),
                            ..Default::default()
                        };
                        vol.setattr(ino, &s).unwrap();
                    }
                    Op::Recreate => {
                        vol.unlink(root, b"f").unwrap();
                        vol.create(root, b"f", 0o644, 0, 0).unwrap();
                    }
                }
                hist.finished.fetch_add(1, SeqCst);
            }
        })
    };

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (hist, stop, path) = (hist.clone(), stop.clone(), h.path.clone());
            std::thread::spawn(move || {
                let img = Image::open(&path).unwrap();
                let mut replay = Replay {
                    at: 0,
                    state: Vec::new(),
                };
                let mut x = 0x9999 + r as u64;
                let mut rnd = move |n: u64| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % n
                };
                let (mut checked, mut stale, mut busy) = (0u64, 0u64, 0u64);
                let mut f = None;
                while !stop.load(SeqCst) {
                    let before = hist.finished.load(SeqCst);
                    if f.is_none() {
                        f = img.open_file("/f").ok();
                    }
                    let Some(file) = &f else { continue };
                    let off = rnd(320_000);
                    let len = rnd(100_000) as usize;
                    let mut buf = vec![0xEEu8; len];
                    match file.read_at(&mut buf, off) {
                        Ok(n) => {
                            buf.truncate(n);
                            let after = hist.started.load(SeqCst);
                            replay.advance_to(before, &hist);
                            let mut ok = expected(&replay.state, off, len) == &buf[..];
                            // Later candidates, on a copy (the replay must
                            // not pass states a later read may need).
                            if !ok {
                                let mut probe = Replay {
                                    at: replay.at,
                                    state: replay.state.clone(),
                                };
                                while !ok && probe.at < after {
                                    let k = probe.at + 1;
                                    probe.advance_to(k, &hist);
                                    ok = expected(&probe.state, off, len) == &buf[..];
                                }
                            }
                            assert!(
                                ok,
                                "read of {len} at {off} matches no state between op {before} and op {after}"
                            );
                            checked += 1;
                        }
                        Err(Error::Stale(_)) => {
                            stale += 1;
                            f = None;
                        }
                        Err(Error::Busy(_)) => busy += 1,
                        Err(e) => panic!("reader {r}: {e}"),
                    }
                }
                (checked, stale, busy)
            })
        })
        .collect();

    std::thread::sleep(run_for);
    stop.store(true, SeqCst);
    holder.join().unwrap();
    let ops = hist.finished.load(SeqCst);
    for r in readers {
        let (checked, stale, busy) = r.join().unwrap();
        eprintln!(
            "reader: {checked} reads checked, {stale} stale handles, {busy} busy; {ops} holder ops"
        );
        assert!(checked > 100, "too few reads checked ({checked})");
    }
    assert!(ops > 100, "too few holder operations ({ops})");
}
