//! A Volume race the network path can meet: if `free_inode_storage`
//! returned the inode number to the allocator before it removed the inode
//! from the in-memory map, a `create_tmpfile` on another thread could take
//! the number, insert its inode, and then lose it to the late removal (an
//! upload's own unnamed file would vanish and its PUT answer 404). Sixteen
//! threads free and create at once so the window is met often.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};

/// A fresh 64 MiB image on /dev/shm, opened (the directory holds it).
fn fresh() -> (tempfile::TempDir, std::path::PathBuf, Arc<Volume>) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = dir.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(64 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = Arc::new(Volume::open(&p, &OpenOptions::default()).unwrap());
    (dir, p, v)
}

#[test]
fn a_new_unnamed_file_never_vanishes_while_others_are_freed() {
    let (_dir, _, v) = fresh();
    let d = v.mkdir(v.root(), b"k", 0o755, 0, 0).unwrap().ino;
    let stop = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicU64::new(0));
    let mut ts = Vec::new();
    for t in 0..16u64 {
        let (v, stop, lost) = (v.clone(), stop.clone(), lost.clone());
        ts.push(std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                // Make an unnamed file, then give it a name that replaces
                // (and so frees) the previous file of that name.
                let f = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
                if v.getattr(f).is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let name = format!("{}", (t * 7 + i) % 4);
                if v.link_tmpfile(f, d, name.as_bytes(), true).is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
                // And one that is abandoned (freed by its last unpin).
                let g = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
                if v.getattr(g).is_err() {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
                v.unpin(g, 1);
            }
        }));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(
        lost.load(Ordering::Relaxed),
        0,
        "new inodes vanished while others were freed"
    );
}

/// Uploads (`rx_link_deferred`, holding the replaced file for a moment as
/// the server does) racing unlinks and renames of the same names across
/// two directories, 12 threads on whatever cores there are. `rx_link`
/// checks under its inode locks that the name still leads where its
/// lookup said (fs's ns.rs, "Locking"); nothing may
/// be lost, freed twice or left inconsistent, and every name left must
/// read back one writer's whole body, before and after a remount.
#[test]
fn uploads_race_unlinks_and_renames() {
    let (_dir, p, v) = fresh();
    let dirs = [
        v.mkdir(v.root(), b"a", 0o755, 0, 0).unwrap().ino,
        v.mkdir(v.root(), b"b", 0o755, 0, 0).unwrap().ino,
    ];
    let body = |t: u64, i: u64| -> Vec<u8> {
        let mut b = format!("writer {t} upload {i};").into_bytes();
        b.resize(1500 + (i % 7) as usize * 300, b'0' + (t % 10) as u8);
        b
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut ts = Vec::new();
    for t in 0..12u64 {
        let (v, stop) = (v.clone(), stop.clone());
        ts.push(std::thread::spawn(move || {
            let mut i = 0u64;
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let d = dirs[(i % 2) as usize];
                let name = format!("n{}", (t + i) % 5);
                match t % 4 {
                    0 | 1 => {
                        let data = body(t, i);
                        let f = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
                        let mut buf = v.rx_reserve(data.len() as u32).unwrap();
                        buf.append(&data);
                        let pc = buf.piece(0, data.len() as u32, pktfs_fs::RxTime::Clock(1), 0);
                        drop(buf);
                        match v.rx_link_deferred(f, vec![pc], d, name.as_bytes(), true) {
                            Ok(l) => {
                                std::thread::yield_now();
                                drop(l);
                            }
                            Err(e) => panic!("upload {t}/{i}: {e:?}"),
                        }
                    }
                    2 => {
                        let _ = v.unlink(d, name.as_bytes());
                    }
                    _ => {
                        let to = dirs[((i + 1) % 2) as usize];
                        let _ = v.rename(
                            d,
                            name.as_bytes(),
                            to,
                            format!("n{}", i % 5).as_bytes(),
                            pktfs_fs::RenameFlags::default(),
                        );
                    }
                }
                ops += 1;
            }
            ops
        }));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let ops: u64 = ts.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(ops > 1000, "only {ops} operations ran");
    v.check_invariants().unwrap();
    let check = |v: &Volume| {
        let mut files = 0;
        for d in dirs {
            // Listed first: `readdir` calls back under the directory's read
            // lock, and a lookup in it from there would wait for that lock
            // again (the lock-order check refuses it).
            for e in v.list_dir(d).unwrap() {
                let a = v.lookup(d, &e.name).unwrap();
                let got = v.read(a.ino, 0, 1 << 20).unwrap();
                let head = String::from_utf8_lossy(&got[..got.len().min(40)]).to_string();
                let (t, i) = head
                    .strip_prefix("writer ")
                    .and_then(|r| r.split_once(" upload "))
                    .and_then(|(t, r)| Some((t.parse().ok()?, r.split(';').next()?.parse().ok()?)))
                    .unwrap_or_else(|| panic!("{:?}: foreign bytes {head:?}", e.name));
                assert_eq!(got, body(t, i), "{:?}: a torn or mixed body", e.name);
                files += 1;
            }
        }
        files
    };
    let n = check(&v);
    let v = Arc::into_inner(v).expect("threads joined");
    v.close().unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    v.check_invariants().unwrap();
    assert_eq!(check(&v), n, "the same names after a remount");
}

/// A reservation shared between a connection's stream and a persister
/// thread (jobs hold their own references) is given back exactly once,
/// whichever side drops last, even when both drop at the same instant.
/// (The stream used to share it through an `Arc` released with
/// `Arc::try_unwrap(..).ok()`: two threads dropping their shares at once
/// both failed the unwrap, and the space leaked until remount.)
#[test]
fn a_reservation_shared_with_a_persister_is_released_once() {
    use std::io::Write;
    use std::time::Duration;
    let (_dir, _, v) = fresh();
    let before = v.statfs();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    let barrier = std::sync::Barrier::new(2);
    for round in 0..200u32 {
        client.write_all(&[round as u8; 3000]).unwrap();
        let mut rx = pktfs_netpath::receive::stream::RxStream::new(&v, &server, 64 << 10);
        let mut got = 0;
        while got < 3000 {
            got += rx.fill(3000, Duration::from_secs(10)).unwrap();
        }
        let a = rx.take_job(1000).expect("a job");
        let b = rx.take_job(2000).expect("a job");
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let p = a.piece();
                barrier.wait();
                drop(p);
                drop(b);
            });
            barrier.wait();
            drop(rx);
        });
    }
    assert_eq!(
        v.statfs().blocks_free,
        before.blocks_free,
        "no reference leaked"
    );
    v.check_invariants().unwrap();
}
