//! Namespace changes under concurrency (ns.rs, "Locking"): a change that
//! waits for one directory delays no change elsewhere, and changes racing
//! on the same names leave the volume consistent.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::RenameFlags;
use crate::error::FsError;
use crate::volume::lock_watch;
use crate::volume::rx_tests::rx_pieces;
use crate::volume::tests::{fresh, ok, reopen};

/// How long a test waits for what must happen before calling it stuck (a
/// deadline for a failure report, not a timing: the runs take milliseconds).
const STUCK: Duration = Duration::from_secs(60);

/// While one thread holds directory `x` write-locked, changes into `x` of
/// every kind wait for it, and changes anywhere else go ahead. (Before,
/// every change looked its names up under one volume-wide lock and kept it
/// while waiting for the directory: one held directory stopped them all.)
#[test]
fn a_held_directory_delays_no_change_elsewhere() {
    let vol = fresh(16 << 20);
    let v = &vol;
    let r = v.root();
    let x = v.mkdir(r, b"x", 0o755, 0, 0).unwrap().ino;
    let y = v.mkdir(r, b"y", 0o755, 0, 0).unwrap().ino;
    let z = v.mkdir(r, b"z", 0o755, 0, 0).unwrap().ino;
    v.create(x, b"old", 0o644, 0, 0).unwrap();
    v.create(y, b"gone", 0o644, 0, 0).unwrap();
    let xarc = v.inode(x).unwrap();
    std::thread::scope(|sc| {
        let held = xarc.write().unwrap();
        lock_watch::watch(&xarc);
        // Three changes into x, each of which now waits for x.
        let waiting = [
            sc.spawn(move || v.create(x, b"a", 0o644, 0, 0).map(|_| ())),
            sc.spawn(move || v.unlink(x, b"old")),
            sc.spawn(move || {
                let t = v.create_tmpfile(0o644, 0, 0)?;
                v.rx_link(t.ino, rx_pieces(v, b"into x", 6), x, b"up", true)
                    .map(|_| ())
            }),
        ];
        let t0 = Instant::now();
        while lock_watch::waits() < 3 {
            assert!(
                t0.elapsed() < STUCK,
                "the changes into x never waited for it"
            );
            std::thread::yield_now();
        }
        // Everything else, on another thread so that a hang is reported.
        let (tx, rx) = mpsc::channel();
        sc.spawn(move || {
            let r = (|| -> crate::error::Result<()> {
                let f = v.create(y, b"f", 0o644, 0, 0)?;
                v.write(f.ino, 0, b"hello")?;
                let d = v.mkdir(y, b"d", 0o755, 0, 0)?;
                v.link(f.ino, d.ino, b"f2")?;
                v.rename(y, b"f", z, b"g", RenameFlags::default())?;
                v.rename(y, b"d", z, b"d", RenameFlags::default())?;
                v.unlink(z, b"g")?;
                v.unlink(d.ino, b"f2")?;
                v.rmdir(z, b"d")?;
                v.unlink(y, b"gone")?;
                let t = v.create_tmpfile(0o644, 0, 0)?;
                v.rx_link(t.ino, rx_pieces(v, b"into y", 6), y, b"up", true)?;
                Ok(())
            })();
            let _ = tx.send(r);
        });
        match rx.recv_timeout(STUCK) {
            Ok(r) => r.expect("the changes outside x"),
            Err(_) => panic!("changes outside x waited for x's lock"),
        }
        assert!(v.lookup(y, b"up").is_ok() && v.lookup(z, b"d").is_err());
        drop(held);
        for w in waiting {
            w.join().unwrap().expect("a change into x, once x was free");
        }
    });
    assert_eq!(
        v.read(v.lookup(x, b"up").unwrap().ino, 0, 64).unwrap(),
        b"into x"
    );
    assert!(v.lookup(x, b"a").is_ok() && v.lookup(x, b"old").is_err());
    ok(v);
    ok(&reopen(vol));
}

/// Threads racing on a few names in three directories with every kind of
/// namespace change, files and directories moving between them: every
/// call answers as the state allows (or `Contended`, counted), and the
/// volume is consistent after, and again after a restart.
#[test]
fn racing_changes_on_the_same_names_stay_consistent() {
    let v = fresh(32 << 20);
    let r = v.root();
    let dirs: Vec<u64> = [b"a", b"b", b"c"]
        .iter()
        .map(|n| v.mkdir(r, *n, 0o755, 0, 0).unwrap().ino)
        .collect();
    let names: [&[u8]; 4] = [b"n0", b"n1", b"n2", b"n3"];
    let threads = 8u64;
    let ops = 60_000u64;
    let contended = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..threads {
            let (v, dirs, contended) = (&v, &dirs, &contended);
            sc.spawn(move || {
                // A small xorshift per thread: the same sequence every run.
                let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
                let mut next = |n: u64| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s % n
                };
                for _ in 0..ops {
                    let d = dirs[next(3) as usize];
                    let d2 = dirs[next(3) as usize];
                    let n = names[next(4) as usize];
                    let n2 = names[next(4) as usize];
                    let op = next(9);
                    let res = match op {
                        0 => v.create(d, n, 0o644, 0, 0).map(|_| ()),
                        1 => v.mkdir(d, n, 0o755, 0, 0).map(|_| ()),
                        2 => v.unlink(d, n),
                        3 => v.rmdir(d, n),
                        4 | 5 => v.rename(d, n, d2, n2, RenameFlags::default()),
                        6 => v
                            .lookup(d, n)
                            .and_then(|a| v.link(a.ino, d2, n2).map(|_| ())),
                        7 => v.create_tmpfile(0o644, 0, 0).and_then(|f| {
                            let r = v.rx_link(f.ino, rx_pieces(v, b"racing", 3), d, n, true);
                            if r.is_err() {
                                v.unpin(f.ino, 1); // still unnamed: its owner frees it
                            }
                            r.map(|_| ())
                        }),
                        _ => v.rename(
                            d,
                            n,
                            d2,
                            n2,
                            RenameFlags {
                                exchange: true,
                                noreplace: false,
                            },
                        ),
                    };
                    // An upload into a directory that exists, replacing:
                    // only a directory under its name may refuse it.
                    if op == 7 {
                        if let Err(e) = &res {
                            assert!(
                                matches!(e, FsError::IsDir | FsError::Contended(_)),
                                "an upload answered {e:?}"
                            );
                        }
                    }
                    match res {
                        Ok(())
                        | Err(FsError::NotFound)
                        | Err(FsError::Exists)
                        | Err(FsError::NotEmpty)
                        | Err(FsError::NotDir)
                        | Err(FsError::IsDir)
                        | Err(FsError::NotPermitted(_))
                        | Err(FsError::Invalid(_)) => {}
                        Err(FsError::Contended(_)) => {
                            contended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            });
        }
    });
    ok(&v);
    let v = reopen(v);
    ok(&v);
    // Every directory is reachable from the root and empty-able: remove
    // everything, depth first, and the volume is back to its three dirs.
    fn clear(v: &crate::Volume, d: u64) {
        for e in v.list_dir(d).unwrap() {
            if e.kind == crate::FileType::Directory {
                clear(v, e.ino);
                v.rmdir(d, &e.name).unwrap();
            } else {
                v.unlink(d, &e.name).unwrap();
            }
        }
    }
    for &d in &dirs {
        clear(&v, d);
    }
    ok(&v);
    let c = contended.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        c * 100 <= threads * ops,
        "{c} calls of {} gave up",
        threads * ops
    );
}

/// A name replaced over and over (a new version renamed over it, an
/// upload linked over it) always leads somewhere: a lookup racing the
/// replacements finds the old file or the new one, never "not found".
/// (Before, `lookup` read the dirent, let the directory go, and then
/// found the file it named freed by the replacement: ENOENT for a name
/// that existed throughout, which a GET answered 404.)
#[test]
fn a_name_being_replaced_is_always_found() {
    let vol = fresh(32 << 20);
    let v = &vol;
    let r = v.root();
    let d = v.mkdir(r, b"d", 0o755, 0, 0).unwrap().ino;
    v.create(d, b"x", 0o644, 0, 0).unwrap();
    const ROUNDS: usize = 3_000;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        let replacer = sc.spawn(|| {
            for i in 0..ROUNDS {
                if i % 2 == 0 {
                    let f = v.create(d, b"x.new", 0o644, 0, 0).unwrap();
                    v.write(f.ino, 0, b"renamed over").unwrap();
                    v.rename(d, b"x.new", d, b"x", RenameFlags::default())
                        .unwrap();
                } else {
                    let t = v.create_tmpfile(0o644, 0, 0).unwrap();
                    v.rx_link(t.ino, rx_pieces(v, b"linked over", 11), d, b"x", true)
                        .unwrap();
                }
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut found = 0u64;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            match v.lookup(d, b"x") {
                Ok(a) => {
                    assert_ne!(a.nlink, 0, "a lookup returned a file no name leads to");
                    found += 1;
                }
                Err(e) => panic!("lookup of a name being replaced: {e} after {found} lookups"),
            }
        }
        replacer.join().unwrap();
        assert!(found > 0);
    });
    ok(&reopen(vol));
}
