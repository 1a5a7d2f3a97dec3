//! Regression test for a Volume race the network path ran into (fixed in
//! fs: `free_inode_storage` used to return the inode number to the
//! allocator before it removed the inode from the in-memory map, so a
//! `create_tmpfile` on another thread could take the number, insert its
//! inode, and then lose it to the late removal: the upload's own unnamed
//! file vanished and a PUT under 16-connection load answered 404). With 16
//! threads on 2 vCPUs this reproduced in 2 of 3 runs before the fix.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use pktfs::{FormatOptions, OpenOptions, Volume};

#[test]
fn a_new_unnamed_file_never_vanishes_while_others_are_freed() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = dir.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: layout::GeometryParams::for_size(64 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = Arc::new(Volume::open(&p, &OpenOptions::default()).unwrap());
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
