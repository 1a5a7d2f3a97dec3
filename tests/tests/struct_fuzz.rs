//! Structure-aware corruption: fields of superblocks, inode headers and
//! attribute slots, records and journal slots are set to hostile values
//! **and their CRCs recomputed**, so the bad values pass the checksum and
//! reach the deeper checks (random flips, as in fsck_fuzz, mostly stop at
//! the CRC). For every mutated image:
//! - opening it (writable) and fsck (-n, then -y) never panic and never
//!   hang (a watchdog aborts the run, naming the case);
//! - an open that refuses the image writes nothing into it;
//! - an open that accepts it serves the whole tree without panicking,
//!   takes a write, and, when it found no damage, passes
//!   `check_invariants` (DRAM agrees with the media).
//!
//! `PKTFS_STRUCT_FUZZ_CASES` sets the number of cases (default 3000 here;
//! the full run uses 100000); `PKTFS_SEED` replays a run and
//! `PKTFS_CASE` one case of it.
//!
//! It runs alone in a child process ([`crate::harness::alone`]): its quiet
//! panic hook and its watchdog's abort are the whole process's, and the
//! test binary runs its other tests beside it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use pktfs_fs::media::Pm;
use pktfs_fs::{OpenOptions, Volume};
use pktfs_fsck::{exit, Options};
use pktfs_layout::{Geometry, Superblock};
use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::dump;

/// xorshift64*: small, seedable, good enough to pick mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A value for a field of `width` bytes currently holding `cur`: the
/// boundaries, neighbours, single-bit changes and plausible ids that deep
/// checks have to get right.
fn hostile(r: &mut Rng, width: usize, cur: u64, g: &Geometry) -> u64 {
    let max = if width == 8 {
        u64::MAX
    } else {
        (1u64 << (width * 8)) - 1
    };
    let v = match r.below(12) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max >> 1,
        4 => cur.wrapping_add(1),
        5 => cur.wrapping_sub(1),
        6 => cur ^ (1 << r.below(width as u64 * 8)),
        7 => 1 + r.below(g.record_count + 2), // a record id, or one past the end
        8 => r.below(g.inode_count as u64 + 2),
        9 => r.below(g.image_len_bytes + 4096),
        10 => r.below(256),
        _ => r.next(),
    };
    v & max
}

fn get(b: &[u8], off: usize, w: usize) -> u64 {
    let mut x = [0u8; 8];
    x[..w].copy_from_slice(&b[off..off + w]);
    u64::from_le_bytes(x)
}

fn put(b: &mut [u8], off: usize, w: usize, v: u64) {
    b[off..off + w].copy_from_slice(&v.to_le_bytes()[..w]);
}

/// Recompute the CRC32C stored at `at` over `from..at`.
fn reseal(b: &mut [u8], from: usize, at: usize) {
    let c = pktfs_layout::crc32c(&b[from..at]);
    b[at..at + 4].copy_from_slice(&c.to_le_bytes());
}

/// A field inside `[lo, hi)` of a struct at `base`: (offset, width).
fn field(r: &mut Rng, base: usize, lo: usize, hi: usize) -> (usize, usize) {
    let w = [1usize, 2, 4, 8][r.below(4) as usize];
    let slots = ((hi - lo) / w).max(1);
    (base + lo + r.below(slots as u64) as usize * w, w)
}

/// Apply one structure-aware mutation; returns what it did.
fn mutate(r: &mut Rng, img: &mut [u8], g: &Geometry) -> String {
    let used_inodes = 48u64.min(g.inode_count as u64);
    let used_records = 200u64.min(g.record_count);
    match r.below(10) {
        // A superblock field (primary or backup), CRC resealed.
        0 | 1 => {
            let base = if r.below(2) == 0 { 0 } else { 4096 };
            let (off, w) = field(r, base, 0, 252);
            let v = hostile(r, w, get(img, off, w), g);
            put(img, off, w, v);
            reseal(img, base, base + 252);
            format!("superblock@{base} +{} ({w} B) = {v:#x}", off - base)
        }
        // An inode header word (links: no CRC).
        2 => {
            let ino = 1 + r.below(used_inodes);
            let base = g.inode_pos(ino as u32).0 as usize;
            let off = base + 8 * r.below(3) as usize;
            let v = hostile(r, 8, get(img, off, 8), g);
            put(img, off, 8, v);
            format!("inode {ino} header +{} = {v:#x}", off - base)
        }
        // An attribute slot field, CRC resealed.
        3 | 4 => {
            let ino = 1 + r.below(used_inodes);
            let base = g.inode_pos(ino as u32).0 as usize + 64 + 64 * r.below(2) as usize;
            let (off, w) = field(r, base, 0, 60);
            let v = hostile(r, w, get(img, off, w), g);
            put(img, off, w, v);
            reseal(img, base, base + 60);
            format!("inode {ino} slot +{} ({w} B) = {v:#x}", off - base)
        }
        // A record field, CRC resealed (bytes 8..60), or its link.
        5..=7 => {
            let id = 1 + r.below(used_records);
            let base = g.record_pos(pktfs_layout::RecordId(id)).0 as usize;
            if r.below(4) == 0 {
                let v = hostile(r, 8, get(img, base, 8), g);
                put(img, base, 8, v);
                format!("record {id} next = {v:#x}")
            } else {
                let (off, w) = field(r, base, 8, 60);
                let v = hostile(r, w, get(img, off, w), g);
                put(img, off, w, v);
                reseal(img, base + 8, base + 60);
                format!("record {id} +{} ({w} B) = {v:#x}", off - base)
            }
        }
        // A committed journal slot with hostile entries, CRC correct.
        _ => {
            let slot = r.below(g.journal_slots as u64) as u32;
            let base = g.journal_slot_pos(slot).0 as usize;
            let n = 1 + r.below(4) as usize;
            let max = ((g.journal_slot_bytes as usize) - 64) / 16;
            let count = if r.below(8) == 0 {
                max as u64 + r.below(3)
            } else {
                n as u64
            };
            let mut entries = Vec::new();
            for _ in 0..n.min(max) {
                // Mostly real link words (an inode head, a record's next).
                let addr = match r.below(4) {
                    0 => g.inode_pos(1 + r.below(used_inodes) as u32).0 + 8 * r.below(3),
                    1 => {
                        g.record_pos(pktfs_layout::RecordId(1 + r.below(used_records)))
                            .0
                    }
                    2 => r.below(g.image_len_bytes) & !7,
                    _ => hostile(r, 8, 0, g),
                };
                let value = hostile(r, 8, 0, g);
                entries.push((addr, value));
            }
            let mut h = [0u8; 64];
            put(&mut h, 0, 8, pktfs_layout::journal::COMMIT_MAGIC);
            put(&mut h, 8, 8, 1 + r.below(1000));
            put(&mut h, 16, 4, count);
            let mut eb = Vec::new();
            for (a, v) in &entries {
                eb.extend_from_slice(&a.to_le_bytes());
                eb.extend_from_slice(&v.to_le_bytes());
            }
            let shown = (count as usize).min(max) * 16;
            eb.resize(shown.max(eb.len()), 0);
            let crc = pktfs_layout::crc32c_append(pktfs_layout::crc32c(&h[..60]), &eb[..shown]);
            h[60..64].copy_from_slice(&crc.to_le_bytes());
            img[base..base + 64].copy_from_slice(&h);
            img[base + 64..base + 64 + eb.len()].copy_from_slice(&eb);
            format!("journal slot {slot}: count {count}, entries {entries:x?}")
        }
    }
}

static PROGRESS: AtomicU64 = AtomicU64::new(0);
static CURRENT: AtomicU64 = AtomicU64::new(u64::MAX);

/// Abort the run, naming the case, if one case runs longer than `limit`
/// (`PROGRESS` holds the start of the current case in ms, 0 when idle).
fn watchdog(seed: u64, limit: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        let started = PROGRESS.load(Relaxed);
        if started != 0 && now_ms() > started + limit.as_millis() as u64 {
            let k = CURRENT.load(Relaxed);
            eprintln!(
                "struct_fuzz: case {k} of seed {seed} has run for over {limit:?}: something \
                 does not terminate (PKTFS_SEED={seed} PKTFS_CASE={k} replays it)"
            );
            std::process::abort();
        }
    });
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(1)
}

/// Run `f`, turning a panic into an error naming `what`.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("{what} panicked: {msg}")
    })
}

fn case(
    base: &[u8],
    g: &Geometry,
    seed: u64,
    k: u64,
    path: &std::path::Path,
) -> Result<String, String> {
    let mut r = Rng(seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut img = base.to_vec();
    let n = 1 + r.below(3);
    let what: Vec<String> = (0..n).map(|_| mutate(&mut r, &mut img, g)).collect();
    let ctx = |e: String| format!("{e}\n  mutations: {what:?}");

    std::fs::write(path, &img).map_err(|e| e.to_string())?;
    let opened = no_panic("open", || Volume::open(path, &OpenOptions::default())).map_err(ctx)?;
    let outcome = match opened {
        Err(e) => {
            let after = std::fs::read(path).map_err(|e| e.to_string())?;
            if after != img {
                return Err(ctx(format!(
                    "open refused the image ({e}) but wrote into it"
                )));
            }
            "refused"
        }
        Ok(v) => {
            let damaged = !v.open_report().damaged_inodes.is_empty();
            no_panic("reading the tree", || {
                let _ = dump(&v);
            })
            .map_err(ctx)?;
            if !damaged && !v.is_read_only() {
                v.check_invariants().map_err(|e| {
                    ctx(format!(
                        "invariants after an open that found no damage: {e}"
                    ))
                })?;
            }
            no_panic("a write", || {
                if let Ok(a) = v.create(v.root(), b"fuzz-new", 0o644, 0, 0) {
                    let _ = v.write(a.ino, 0, &[7u8; 3000]);
                    let _ = v.unlink(v.root(), b"fuzz-new");
                }
            })
            .map_err(ctx)?;
            if !damaged && !v.is_read_only() {
                v.check_invariants()
                    .map_err(|e| ctx(format!("invariants after a write: {e}")))?;
            }
            no_panic("close", || drop(v)).map_err(ctx)?;
            if damaged {
                "opened with damage"
            } else {
                "opened"
            }
        }
    };
    // fsck on the mutated bytes: -n then -y, no panic, a defined exit code.
    let mut pm = Pm::from_bytes(img);
    let r1 = no_panic("fsck -n", || pktfs_fsck::check(&mut pm, &Options::check())).map_err(ctx)?;
    let r2 = no_panic("fsck -y", || pktfs_fsck::repair(&mut pm, &Options::yes())).map_err(ctx)?;
    // 8 (operational error) is fsck refusing an image it must not touch: a
    // newer format version or unknown feature bits with a valid checksum.
    for (w, c) in [("-n", r1.exit_code), ("-y", r2.exit_code)] {
        if ![
            exit::CLEAN,
            exit::CORRECTED,
            exit::UNCORRECTED,
            exit::OPERATIONAL,
        ]
        .contains(&c)
        {
            return Err(ctx(format!("fsck {w} exit code {c}")));
        }
    }
    Ok(format!("{outcome}, fsck -y {}", r2.exit_code))
}

#[test]
fn hostile_fields_with_valid_checksums_never_panic_hang_or_write_rejected_images() {
    crate::harness::alone(|| {
        let seed: u64 = std::env::var("PKTFS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(now_ms);
        let cases: u64 = std::env::var("PKTFS_STRUCT_FUZZ_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3000);
        let only: Option<u64> = std::env::var("PKTFS_CASE")
            .ok()
            .and_then(|s| s.parse().ok());
        let trace = std::env::var_os("PKTFS_FUZZ_TRACE").is_some();
        println!("struct_fuzz: seed {seed} (PKTFS_SEED={seed} replays it), {cases} cases");
        let base = seeded().0.clone();
        let g = Superblock::from_bytes(&base[..256], 0, base.len() as u64)
            .expect("the seeded image is valid")
            .geometry;
        watchdog(seed, Duration::from_secs(60));
        // Panics are caught and reported per case; keep the default hook quiet
        // so thousands of expected-to-be-caught messages do not drown the log.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        let t0 = Instant::now();
        let mut tally = std::collections::BTreeMap::<String, u64>::new();
        let mut failures = Vec::new();
        for k in 0..cases {
            if only.is_some_and(|o| o != k) {
                continue;
            }
            CURRENT.store(k, Relaxed);
            PROGRESS.store(now_ms(), Relaxed);
            if trace {
                // An abort (a failed huge allocation) ends the process without
                // a report: this names the case it happened in.
                eprintln!("struct_fuzz: case {k}");
            }
            match case(&base, &g, seed, k, &path) {
                Ok(o) => *tally.entry(o).or_default() += 1,
                Err(e) => {
                    failures.push(format!("case {k} (PKTFS_SEED={seed} PKTFS_CASE={k}): {e}"))
                }
            }
            if failures.len() >= 5 {
                break;
            }
        }
        PROGRESS.store(0, Relaxed);
        std::panic::set_hook(hook);
        println!(
            "struct_fuzz: {cases} cases in {:.1} s: {tally:?}",
            t0.elapsed().as_secs_f64()
        );
        assert!(
            failures.is_empty(),
            "struct_fuzz failures:\n{}",
            failures.join("\n")
        );
        if only.is_none() {
            // The mutations must reach past the checksums: some images open.
            let count = |p: &str| {
                tally
                    .iter()
                    .filter(|(k, _)| k.starts_with(p))
                    .map(|(_, n)| n)
                    .sum::<u64>()
            };
            assert!(count("opened,") > 0, "{tally:?}");
            assert!(count("refused") > 0, "{tally:?}");
        }
    });
}
